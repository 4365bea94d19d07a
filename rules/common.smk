# Shared by every stage: config validation, paths, wildcard constraints, input functions.
import hashlib
import json
from pathlib import Path

from snakemake.utils import validate


validate(config, schema="../config/schema/config.schema.yaml")

RESULTS = config["paths"]["results"]
RESOURCES = config["paths"]["resources"]
LOGS = config["paths"]["logs"]
ENV = "../envs/pmcflow.yaml"
IMAGES = config["containers"]  # one pinned Apptainer image per environment (containers/*.def)
# Enrichment with a vLLM backend runs in the vLLM environment and asks for GPUs (the largest
# tensor_parallel_size of the vLLM tasks); the slurm plugin turns `gpu` into --gpus.
_VLLM_TASKS = [t for t in ("subcaption", "summary") if config["enrich"][t]["backend"] == "vllm"]
ENRICH_IMAGE = IMAGES["vllm"] if _VLLM_TASKS else IMAGES["base"]
ENRICH_ENV = "../envs/vllm.yaml" if _VLLM_TASKS else ENV
ENRICH_GPUS = max(
    [int((config["enrich"][t].get("vllm") or {}).get("tensor_parallel_size", 1)) for t in _VLLM_TASKS],
    default=0,
)
SRC = Path(workflow.basedir) / "src" / "pmcflow"


wildcard_constraints:
    chunk=r"c\d{6}",


# Targets each stage contributes to `rule all`; every rules/*.smk appends its aggregates.
FINAL_TARGETS = []


def all_targets(wildcards):
    return list(FINAL_TARGETS)


def code_version(*modules):
    """sha256 of the package modules a stage runs (files or directories under src/pmcflow).

    Used as a rule param so that editing a stage's code reruns that stage (and its descendants)
    and nothing else: the rule scripts are thin, so Snakemake's own code trigger would not see it.
    """
    h = hashlib.sha256()
    for mod in modules:
        path = SRC / mod
        if path.is_dir():  # a subpackage or a folder of shipped data (weights, prompts)
            files = sorted(f for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
        elif path.is_file():
            files = [path]
        else:  # e.g. no detector shipped: hash the absence, so shipping one reruns the stage
            h.update(f"absent:{mod}".encode())
            files = []
        for f in files:
            h.update(str(f.relative_to(SRC)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


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


def decompose_model_input(wildcards):
    """The detector this run trains, when decompose.checkpoint is 'trained'."""
    if config["decompose"]["checkpoint"] == "trained":
        return {"model": f"{RESULTS}/detector/model"}
    return {}


def detector_model_input(wildcards):
    """The detector trained in this run, when detector.train is on."""
    return {"model": f"{RESULTS}/detector/model"} if config["detector"]["train"] else {}
