"""Rule parse_chunk: JATS -> articles, figures, mentions (pmcflow.jats)."""
from pmcflow.workflow import params_config, start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.jats import parse_chunk  # noqa: E402

sm = snakemake  # noqa: F821
parse_chunk(params_config(sm.params, "parse"), sm.wildcards.chunk, sm.input.acquired, sm.output)
