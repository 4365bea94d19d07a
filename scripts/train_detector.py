"""Rule train_detector: train detector.backend on the rendered figures (pmcflow.detect.stage)."""
from pathlib import Path

from pmcflow.workflow import params_config, start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.detect.stage import train_stage  # noqa: E402

sm = snakemake  # noqa: F821
train_stage(params_config(sm.params, "detector", "seed"), str(Path(sm.input.train).parent), str(Path(sm.input.val).parent), sm.output[0])
