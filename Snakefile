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


# Aggregates (per-stage summaries, the global shard step, `all`) take milliseconds to seconds: on a
# cluster the Snakemake process runs them itself instead of submitting a job for each.
localrules:
    all,
    acquire_summary,
    parse_summary,
    decompose_summary,
    enrich_summary,
    filter_summary,
    shard,


# One run per results folder and download cache (pmcflow.runlock); the summary at the end names
# every article still pending a retry, so nothing is lost in silence (pmcflow.retry).
_LOCKS = []


onstart:
    for _dir, _what in LOCKED_DIRS:
        _LOCKS.append(_RUNLOCK.RunLock(_dir, _what).acquire())
        if _LOCKS[-1].replaced_stale:
            print(f"pmcflow: replaced a stale lock ({_RUNLOCK.describe(_LOCKS[-1].replaced_stale)})")


onsuccess:
    print(_RETRY.summary_line(RESULTS))
    for _lock in reversed(_LOCKS):
        _lock.release()


onerror:
    print(_RETRY.summary_line(RESULTS))
    for _lock in reversed(_LOCKS):
        _lock.release()
