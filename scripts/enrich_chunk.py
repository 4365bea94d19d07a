"""Rule enrich_chunk: subcaptions + in-text reference summaries (pmcflow.enrich)."""
import sys
from pathlib import Path

try:
    import pmcflow  # noqa: F401
except ImportError:  # the vLLM environment (envs/vllm.yaml) holds vllm's stack, not pmcflow's
    sys.path.insert(0, str(Path(snakemake.scriptdir).parent / "src"))  # noqa: F821

from pmcflow.workflow import log_to_file  # noqa: E402

log_to_file(snakemake.log[0])  # noqa: F821 - injected by Snakemake

from pmcflow.enrich.stage import enrich_chunk  # noqa: E402

sm = snakemake  # noqa: F821
enrich_chunk(
    sm.config,
    sm.wildcards.chunk,
    sm.input.subfigures,
    sm.input.figures,
    sm.input.mentions,
    sm.input.articles,
    str(Path(sm.output.enriched).parent),
)
