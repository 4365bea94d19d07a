"""Rule evaluate_encoder: retrieval Recall@K and zero-shot metrics (pmcflow.encoders.evaluate)."""
from pathlib import Path

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.encoders.evaluate import evaluate_encoder  # noqa: E402

sm = snakemake  # noqa: F821
evaluate_encoder(
    dict(sm.params.evaluate),
    int(sm.params.seed),
    sm.input.encoder,
    sm.input.shards,
    str(Path(sm.output.metrics).parent),
    benchmarks_yaml=[Path(sm.input.benchmarks) / "benchmarks.yaml"]
    if "benchmarks" in sm.input.keys()
    else [],
)
