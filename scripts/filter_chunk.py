"""Rule filter_chunk: enriched rows -> dataset rows + rejections (pmcflow.filter)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.filter.checks import FilterSettings  # noqa: E402
from pmcflow.filter.stage import filter_chunk  # noqa: E402

sm = snakemake  # noqa: F821
filter_chunk(
    FilterSettings.from_section(sm.params.filter),
    sm.wildcards.chunk,
    sm.input.enriched,
    sm.output,
    duplicates_path=sm.input.duplicates if "duplicates" in sm.input.keys() else None,
    phash_path=sm.input.phash,
)
