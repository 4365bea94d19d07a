"""Rule decompose_chunk: detector over figure graphics -> subfigures + crops (pmcflow.decompose)."""
from pathlib import Path

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.decompose.settings import DecomposeSettings  # noqa: E402
from pmcflow.decompose.stage import decompose_chunk  # noqa: E402

sm = snakemake  # noqa: F821
decompose_chunk(
    DecomposeSettings.from_section(sm.params.decompose),
    sm.wildcards.chunk,
    sm.input.figures,
    sm.output,
    # decompose.checkpoint == "trained": the detector this run trained (its folder's record)
    trained_model=sm.input.model if "model" in sm.input.keys() else None,
)
Path(sm.output.crops).mkdir(parents=True, exist_ok=True)  # a chunk without crops still has the folder
