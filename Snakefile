# pmcflow: PMC Open Access -> subfigure-level image-text dataset (Open-PMC-18M recipe).
# Entry point only: configuration, includes and the default target. Logic lives in src/pmcflow/.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/acquire.smk"
include: "rules/parse.smk"
include: "rules/synth.smk"
include: "rules/detector.smk"
include: "rules/decompose.smk"
include: "rules/enrich.smk"


rule all:
    default_target: True
    input:
        all_targets,
