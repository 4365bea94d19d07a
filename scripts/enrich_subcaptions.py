"""Rule enrich_subcaptions: the subcaption step of a chunk (pmcflow.enrich.stage)."""
from pmcflow.workflow import params_config, start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.enrich.stage import subcaption_chunk  # noqa: E402

sm = snakemake  # noqa: F821
subcaption_chunk(
    params_config(sm.params, "enrich"),
    sm.wildcards.chunk,
    sm.input.subfigures,
    sm.input.figures,
    sm.input.articles,
    sm.output,
)
