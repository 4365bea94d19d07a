"""Rule render_shard: one shard of one split of synthetic compound figures (pmcflow.synth)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

import yaml  # noqa: E402

from pmcflow.synth.render import render  # noqa: E402

sm = snakemake  # noqa: F821
cfg = sm.params.synth
sources = None
if cfg["sources"]:
    with open(cfg["sources"]) as fh:
        sources = yaml.safe_load(fh)
render(
    int(sm.params.n),
    int(sm.params.seed),
    sm.output[0],
    size=cfg["size"],
    shard=int(sm.wildcards.shard),
    num_shards=int(cfg["num_shards"]),
    start=int(sm.params.start),
    sources=sources,
    compress_level=int(cfg["compress_level"]),
)
