"""Rule demo_benchmarks: small real benchmarks from images that ship inside installed packages
(pmcflow.encoders.benchmarks.build_demo_benchmarks)."""

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.encoders.benchmarks import build_demo_benchmarks  # noqa: E402

sm = snakemake  # noqa: F821
build_demo_benchmarks(sm.output[0], seed=int(sm.params.seed))
