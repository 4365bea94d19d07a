"""Rule decompose_chunk: detector over figure graphics -> subfigures + crops (pmcflow.decompose)."""
import json
from pathlib import Path

from pmcflow.workflow import params_config, start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.decompose.stage import decompose_chunk  # noqa: E402

sm = snakemake  # noqa: F821
cfg = params_config(sm.params, "decompose")
if "model" in sm.input.keys():  # decompose.checkpoint == "trained": the detector this run trained
    trained = json.loads((Path(sm.input.model) / "train.json").read_text())
    cfg["decompose"]["backend"] = trained["backend"]
    cfg["decompose"]["checkpoint"] = trained["checkpoint"]
decompose_chunk(cfg, sm.wildcards.chunk, sm.input.figures, str(Path(sm.output.subfigures).parent))
Path(sm.output.crops).mkdir(parents=True, exist_ok=True)  # a chunk without crops still has the folder
