"""Rule train_detector: train detector.backend on the rendered figures (pmcflow.detect.stage)."""
from pathlib import Path

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.detect.settings import DetectorSettings  # noqa: E402
from pmcflow.detect.stage import train_stage  # noqa: E402

sm = snakemake  # noqa: F821
train_stage(
    DetectorSettings.from_section(sm.params.detector),
    int(sm.params.seed),
    str(Path(sm.input.train).parent),
    str(Path(sm.input.val).parent),
    sm.output[0],
)
