"""Rule filter_chunk: enriched rows -> dataset rows + rejections (pmcflow.filter)."""
from pmcflow.workflow import params_config, start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.filter.stage import filter_chunk  # noqa: E402

sm = snakemake  # noqa: F821
filter_chunk(
    params_config(sm.params, "filter", "seed"),
    sm.wildcards.chunk,
    sm.input.enriched,
    sm.output,
    duplicates_path=sm.input.duplicates if "duplicates" in sm.input.keys() else None,
    phash_path=sm.input.phash,
)
