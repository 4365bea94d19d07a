# Shared by every stage: config validation, paths, wildcard constraints, input functions.
import importlib.util
import json
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate


SRC = Path(workflow.basedir) / "src" / "pmcflow"


def _stdlib_module(name):
    """A standard-library-only module of the package, loaded from this workflow's own tree, so the
    Snakemake process needs no pmcflow install: on a cluster the package may live only inside the
    rules' containers."""
    spec = importlib.util.spec_from_file_location(f"_pmcflow_{name}", SRC / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_CLOSURE = _stdlib_module("closure")  # code_version: what each rule's code reaches
_RETRY = _stdlib_module("retry")  # pending retries of acquisition
_RUNLOCK = _stdlib_module("runlock")  # one run per results folder and download cache
_CONFIGCHECK = _stdlib_module("configcheck")  # cross-field checks, before any job starts
_CONTAINERPIN = _stdlib_module("containerpin")  # container images pinned by digest
_COMPUTE = _stdlib_module("compute")  # GPUs, cores and memory per rule from the config
_LAYOUT = _stdlib_module("layout")  # every path under the results folder, spelled once

# The whole configuration is checked before any job starts: types, ranges and enums (the schema),
# then what ties keys together (pmcflow.configcheck); every message names the key's full path.
_CONFIGCHECK.normalise(config)
validate(config, schema="../config/schema/config.schema.yaml")
_PROBLEMS = _CONFIGCHECK.problems(config) + _COMPUTE.problems(config)
if _PROBLEMS:
    raise WorkflowError("invalid configuration:\n" + "\n".join(f"  {m}" for m in _PROBLEMS))
# Offline jobs (the Apptainer images set HF_HUB_OFFLINE=1; PMCFLOW_CHECK_MODELS=1/0 forces it) load
# hub models from the local cache only: every one the config names must be there (pmcflow.modelcache).
_MODELCACHE = _stdlib_module("modelcache")
if workflow.is_main_process and _MODELCACHE.check_enabled(workflow.deployment_settings.deployment_method or ()):
    _MISSING = _MODELCACHE.missing(config, config_files=workflow.configfiles)
    if _MISSING:
        raise WorkflowError("hub models missing from the local cache:\n" + "\n".join(f"  {m}" for m in _MISSING))


RESULTS = config["paths"]["results"]
RESOURCES = config["paths"]["resources"]
LOGS = config["paths"]["logs"]


def results_path(rel):
    """``rel``, a path of the results layout (pmcflow.layout), under this run's results folder."""
    return f"{RESULTS}/{rel}"


# Folders one run writes alone (pmcflow.runlock): refused here, before the plan reads anything a
# running run is writing; taken in `onstart` (Snakefile) and released when the run ends.
LOCKED_DIRS = ((RESULTS, "results folder"), (f"{RESOURCES}/pmc", "download cache"))
if workflow.is_main_process:
    for _dir, _what in LOCKED_DIRS:
        _held = _RUNLOCK.held_by_other(_dir, _what)
        if _held:
            raise WorkflowError(_held)
ENV = "../envs/pmcflow.yaml"
# One Apptainer image per environment (containers/*.def), pinned as `<file>.sif@sha256:<digest>`
# (containers/images.yaml from `make containers`) or by a registry digest. Rules get the file;
# a run that deploys containers first checks every local image it uses against its pin.
IMAGES = {k: _CONTAINERPIN.rule_image(v) for k, v in config["containers"].items()}
# Enrichment runs as two jobs per chunk, subcaptions then summaries, so that one vLLM engine owns
# its GPUs at a time; a task with a vLLM backend runs in the vLLM environment.
_VLLM = {t: config["enrich"][t]["backend"] == "vllm" for t in ("subcaption", "summary")}
ENRICH_IMAGE = {t: IMAGES["vllm"] if v else IMAGES["base"] for t, v in _VLLM.items()}
ENRICH_ENV = {t: "../envs/vllm.yaml" if v else ENV for t, v in _VLLM.items()}


def rule_resources(rule, mem_mb, runtime):
    """A rule's resources: its CPU figures, or its GPUs (from its config section) and memory per
    GPU (pmcflow.compute); the Slurm profile picks the partition from them."""
    return _COMPUTE.resources(config, rule, mem_mb=mem_mb, runtime=runtime)


def rule_threads(rule, cpu_threads):
    """A rule's threads: compute.cpus_per_gpu per GPU when it gets GPUs, else ``cpu_threads``."""
    return _COMPUTE.threads(config, rule, cpu_threads)


# The mmdet image (mmcv compiled from source) only where the mmdet backend runs; every other
# detector backend runs in the base image.
DETECTOR_IMAGE = IMAGES["mmdet"] if config["detector"]["backend"] == "mmdet" else IMAGES["base"]
_DECOMPOSE_BACKEND = (
    config["detector"]["backend"]
    if config["decompose"]["checkpoint"] == "trained"
    else config["decompose"]["backend"]
)
DECOMPOSE_IMAGE = IMAGES["mmdet"] if _DECOMPOSE_BACKEND == "mmdet" else IMAGES["base"]


def _deploys_containers():
    from snakemake.settings.types import DeploymentMethod

    return DeploymentMethod.APPTAINER in (workflow.deployment_settings.deployment_method or ())


if workflow.is_main_process and _deploys_containers():
    _images = (*ENRICH_IMAGE.values(), DETECTOR_IMAGE, DECOMPOSE_IMAGE)
    _used = {"base"} | {k for k in ("mmdet", "vllm") if IMAGES[k] in _images}
    _errors, _warnings = _CONTAINERPIN.problems(config["containers"], _used)
    for _w in _warnings:
        print(f"pmcflow: warning: {_w}", file=sys.stderr)
    if _errors:
        raise WorkflowError("container images:\n" + "\n".join(f"  {m}" for m in _errors))
wildcard_constraints:
    chunk=r"c\d{6}",


# Targets each stage contributes to `rule all`; every rules/*.smk appends its aggregates.
FINAL_TARGETS = []


def all_targets(wildcards):
    return list(FINAL_TARGETS)


def code_version(*entries):
    """Digest of everything a rule's code reaches inside src/pmcflow (pmcflow.closure).

    ``entries`` are the rule's script (and a report's notebook), relative to the workflow root.
    Passed as the rule's ``code`` param: editing any module or shipped data file the stage can
    reach reruns it and its descendants, and nothing else (Snakemake's own code trigger sees only
    the thin script).
    """
    return _CLOSURE.digest(SRC, [Path(workflow.basedir) / e for e in entries])


def retry_stamp(wildcards):
    """acquire_chunk's extra input: touched while the chunk has articles pending a retry, so the
    next plain run re-acquires them (pmcflow.retry)."""
    return _RETRY.retry_stamp(RESULTS, wildcards.chunk)


def crops_present(wildcards):
    """enrich_chunk's extra input: rewritten while the chunk's decompose crops are missing (a killed
    rerun), so enrich and everything that points to crops is rebuilt with them (pmcflow.retry)."""
    return _RETRY.presence_stamp(
        RESULTS, f"crops-{wildcards.chunk}", [results_path(_LAYOUT.CROPS.format(chunk=wildcards.chunk))]
    )


def listed_chunks():
    """Chunk ids from the listing checkpoint (re-evaluated after it runs)."""
    manifest = checkpoints.list_articles.get().output.chunks
    with open(manifest) as fh:
        return sorted(json.load(fh)["chunks"])


def chunk_digest(chunk):
    """Content digest of one chunk's listing rows: a changed chunk reruns, an unchanged one does not."""
    manifest = checkpoints.list_articles.get().output.chunks
    with open(manifest) as fh:
        return json.load(fh)["chunks"][chunk]["digest"]


def per_chunk(pattern):
    """Input function: `pattern` (with {chunk}) expanded over every listed chunk."""

    def _inputs(wildcards):
        return expand(pattern, chunk=listed_chunks())

    return _inputs


def summary_inputs(stage):
    """Every chunk's counts and rejections of ``stage``: what its *_summary job merges."""
    return {
        "counts": per_chunk(results_path(_LAYOUT.chunk_counts(stage))),
        "rejections": per_chunk(results_path(_LAYOUT.chunk_rejections(stage))),
    }


def summary_outputs(stage):
    return {
        "counts": results_path(_LAYOUT.counts(stage)),
        "rejections": results_path(_LAYOUT.rejections(stage)),
    }


def stage_counts(*stages):
    """The stage-level counts.json of ``stages`` (pmcflow.layout.STAGE_DIRS keys), in that order."""
    return tuple(results_path(_LAYOUT.counts(s)) for s in stages)


def evaluation_outputs(folder):
    """What an evaluation writes in ``folder`` (a pmcflow.layout folder), by output name."""
    return {k: results_path(_LAYOUT.evaluation_file(folder, k)) for k in _LAYOUT.EVALUATION_FILES}


def decompose_model_input(wildcards):
    """The detector this run trains, when decompose.checkpoint is 'trained'."""
    if config["decompose"]["checkpoint"] == "trained":
        return {"model": results_path(_LAYOUT.DETECTOR_MODEL)}
    return {}


DEMO_BENCHMARKS = results_path(_LAYOUT.DEMO_BENCHMARKS)
# The evaluate section a trained run's evaluation takes: without the baselines and the embedding
# analysis, so adding a baseline does not re-evaluate the runs (rules/evaluate.smk).
EVALUATE = {k: v for k, v in config["evaluate"].items() if k not in ("baselines", "embedding")}
BASELINES = dict(config["evaluate"]["baselines"])


def demo_benchmarks_input(wildcards):
    """The demo benchmarks (rules/evaluate.smk) when evaluate.build_demo_benchmarks is on."""
    return {"benchmarks": DEMO_BENCHMARKS} if config["evaluate"]["build_demo_benchmarks"] else {}


def synth_sources_input(wildcards):
    """render_shard's sources file (synth.sources), so that editing it renders again; the
    shipped panels when it is empty."""
    sources = config["synth"]["sources"]
    return {"sources": sources} if sources else {}


def detector_model_input(wildcards):
    """The detector trained in this run, when detector.train is on."""
    return {"model": results_path(_LAYOUT.DETECTOR_MODEL)} if config["detector"]["train"] else {}


def corpus_duplicates_input(wildcards):
    """find_duplicates' clusters when filter.dedup.scope is corpus; chunk scope searches in-chunk."""
    dedup = config["filter"]["dedup"]
    if dedup["enabled"] and dedup["scope"] == "corpus":
        return {"duplicates": results_path(_LAYOUT.DUPLICATES)}
    return {}
