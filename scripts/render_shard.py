"""Rule render_shard: one shard of one split of synthetic compound figures (pmcflow.synth)."""

from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.synth.render import render  # noqa: E402
from pmcflow.synth.settings import SynthSettings  # noqa: E402
from pmcflow.synth.sources import load_sources_file  # noqa: E402

sm = snakemake  # noqa: F821
settings = SynthSettings.from_section(sm.params.synth)
# a datasets file gives each split its own datasets; an old {modality: [paths]} file, every split the same
sources = load_sources_file(settings.sources) if settings.sources else None
render(
    int(sm.params.n),
    int(sm.params.seed),
    sm.output[0],
    size=settings.size,
    shard=int(sm.wildcards.shard),
    num_shards=settings.num_shards,
    start=int(sm.params.start),
    sources=sources,
    compress_level=settings.compress_level,
    split=sm.wildcards.split,
    elements=settings.element_params,
    canvas=settings.canvas_params,
    modality_weights=settings.modality_weights,
)
