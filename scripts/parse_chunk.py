"""Rule parse_chunk: JATS -> articles, figures, mentions (pmcflow.jats)."""
from pathlib import Path

from pmcflow.workflow import log_to_file, params_config

log_to_file(snakemake.log[0])  # noqa: F821 - injected by Snakemake

from pmcflow.jats import parse_chunk  # noqa: E402

sm = snakemake  # noqa: F821
parse_chunk(params_config(sm.params, "parse"), sm.wildcards.chunk, sm.input.acquired, str(Path(sm.output.articles).parent))
