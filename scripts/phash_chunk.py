"""Rule phash_chunk: per-row filter checks, modality and perceptual hash (pmcflow.filter)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.filter.checks import FilterSettings  # noqa: E402
from pmcflow.filter.stage import phash_chunk  # noqa: E402

sm = snakemake  # noqa: F821
phash_chunk(FilterSettings.from_section(sm.params.filter), sm.wildcards.chunk, sm.input.enriched, sm.output[0])
