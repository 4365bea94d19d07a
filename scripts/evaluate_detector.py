"""Rule evaluate_detector: mAP/F1 on the synthetic holdout and every configured set."""
from pathlib import Path

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.detect.eval_stage import eval_sets_from_config, evaluate_stage  # noqa: E402
from pmcflow.detect.settings import DetectorSettings  # noqa: E402

sm = snakemake  # noqa: F821
settings = DetectorSettings.from_section(sm.params.detector)
sets = eval_sets_from_config(settings, str(Path(sm.input.holdout).parent))
trained = sm.input.model if "model" in sm.input.keys() else None  # the detector this run trained
evaluate_stage(settings, sets, sm.output.eval, trained_model=trained)
