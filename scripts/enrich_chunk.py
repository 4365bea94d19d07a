"""Rule enrich_chunk: in-text reference summaries over the chunk's subcaptions, and the chunk's
enriched table (pmcflow.enrich)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.enrich.settings import EnrichSettings  # noqa: E402
from pmcflow.enrich.stage import enrich_chunk  # noqa: E402

sm = snakemake  # noqa: F821
enrich_chunk(
    EnrichSettings.from_section(sm.params.enrich),
    sm.wildcards.chunk,
    sm.input.subfigures,
    sm.input.figures,
    sm.input.mentions,
    sm.input.articles,
    sm.output,
    subcaptions=(sm.input.subcaptions, sm.input.subcaption_rejections),
)
