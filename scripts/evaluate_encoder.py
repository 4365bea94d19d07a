"""Rules evaluate_encoder and evaluate_baseline: retrieval Recall@K, zero-shot and the configured
benchmarks of a trained run or a baseline model (pmcflow.encoders.evaluate)."""
from pathlib import Path

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.encoders.evaluate import evaluate_encoder  # noqa: E402
from pmcflow.encoders.settings import EvaluateSettings  # noqa: E402

sm = snakemake  # noqa: F821
baseline = sm.wildcards.get("baseline")
evaluate_encoder(
    EvaluateSettings.from_section(sm.params.evaluate),
    int(sm.params.seed),
    None if baseline else sm.input.encoder,
    sm.input.shards,
    sm.output,
    baseline=baseline,
    benchmarks_yaml=[Path(sm.input.benchmarks) / "benchmarks.yaml"]
    if "benchmarks" in sm.input.keys()
    else [],
)
