"""Rule phash_chunk: per-row filter checks, modality and perceptual hash (pmcflow.filter)."""
from pmcflow.workflow import params_config, start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.filter.stage import phash_chunk  # noqa: E402

sm = snakemake  # noqa: F821
phash_chunk(params_config(sm.params, "filter", "seed"), sm.wildcards.chunk, sm.input.enriched, sm.output[0])
