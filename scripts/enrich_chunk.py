"""Rule enrich_chunk: subcaptions + in-text reference summaries (pmcflow.enrich)."""
from pathlib import Path

from pmcflow.workflow import log_to_file, params_config

log_to_file(snakemake.log[0])  # noqa: F821 - injected by Snakemake

from pmcflow.enrich.stage import enrich_chunk  # noqa: E402

sm = snakemake  # noqa: F821
enrich_chunk(
    params_config(sm.params, "enrich"),
    sm.wildcards.chunk,
    sm.input.subfigures,
    sm.input.figures,
    sm.input.mentions,
    sm.input.articles,
    str(Path(sm.output.enriched).parent),
)
