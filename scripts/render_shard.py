"""Rule render_shard: one shard of one split of synthetic compound figures (pmcflow.synth)."""

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.synth.render import render  # noqa: E402
from pmcflow.synth.sources import load_sources_file  # noqa: E402

sm = snakemake  # noqa: F821
cfg = sm.params.synth
# a datasets file gives each split its own datasets; an old {modality: [paths]} file, every split the same
sources = load_sources_file(cfg["sources"]) if cfg["sources"] else None
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
    split=sm.wildcards.split,
    elements=cfg["elements"],
    canvas=cfg["canvas"],
    modality_weights=cfg["modality_weights"],
)
