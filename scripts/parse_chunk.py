"""Rule parse_chunk: JATS -> articles, figures, mentions (pmcflow.jats)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.jats import ParseSettings, parse_chunk  # noqa: E402

sm = snakemake  # noqa: F821
parse_chunk(ParseSettings.from_section(sm.params.parse), sm.wildcards.chunk, sm.input.acquired, sm.output)
