# pmcflow: PMC Open Access -> subfigure-level image-text dataset (Open-PMC-18M recipe).
# Entry point only: configuration, includes and the default target. Logic lives in src/pmcflow/.
from snakemake.utils import min_version

min_version("9.0")


# The production config is the default; a --configfile (e.g. config/demo.yaml) replaces it rather
# than being deep-merged over it, so production-only settings never leak into other runs.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/acquire.smk"
include: "rules/parse.smk"
include: "rules/synth.smk"
include: "rules/detector.smk"
include: "rules/decompose.smk"
include: "rules/enrich.smk"
include: "rules/filter.smk"
include: "rules/shard.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets,
