"""Rule enrich_subcaptions: the subcaption step of a chunk (pmcflow.enrich.stage)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.enrich.settings import EnrichSettings  # noqa: E402
from pmcflow.enrich.stage import subcaption_chunk  # noqa: E402

sm = snakemake  # noqa: F821
subcaption_chunk(
    EnrichSettings.from_section(sm.params.enrich),
    sm.wildcards.chunk,
    sm.input.subfigures,
    sm.input.figures,
    sm.input.articles,
    sm.output,
)
