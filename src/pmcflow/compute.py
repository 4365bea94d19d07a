"""What each rule asks the scheduler for: GPUs from the stage's own config section, and the CPUs and
memory that go with them.  Standard library only: ``rules/common.smk`` loads it without the package.

A stage's GPU count is a setting of its config section, read here and nowhere else; the rules put
it in their ``resources`` as ``gpu`` (the Slurm executor plugin turns that into ``--gpus``) and the
Slurm profile only maps resources to partitions (``profiles/slurm/partitions.yaml``), so a site
changes a GPU count in one place:

==================== =========================================================================
rule                 GPUs
==================== =========================================================================
decompose_chunk      ``decompose.gpus`` (batched detector inference)
train_detector       ``detector.gpus`` (the backend's own multi-GPU where it has one)
evaluate_detector    one when ``detector.gpus`` > 0
enrich_subcaptions   ``enrich.subcaption``: vLLM -> ``vllm.tensor_parallel_size``; transformers
                     on ``cuda`` -> 1
enrich_chunk         ``enrich.summary``, the same way (one vLLM engine per job)
train_encoder        ``train.n_gpus`` when the run's device (after the preset) is ``cuda`` or ``auto``
evaluate_encoder     one when ``evaluate.device`` is ``cuda`` or ``auto``
evaluate_baseline    the same
==================== =========================================================================

Every other rule runs on CPU and asks for no GPU.  A GPU job gets ``compute.cpus_per_gpu`` cores
and ``compute.mem_mb_per_gpu`` memory per GPU; its CPU-only figures stay those of the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

if __name__ == "pmcflow.compute":
    from pmcflow import runs as _runs
else:  # loaded by file path from the workflow's tree (rules/common.smk): its runs.py beside it
    import importlib.util as _ilu
    from pathlib import Path as _Path

    _spec = _ilu.spec_from_file_location(f"{__name__}_runs", _Path(__file__).with_name("runs.py"))
    assert _spec is not None and _spec.loader is not None
    _runs = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(_runs)

GPU_RULES = (
    "decompose_chunk",
    "train_detector",
    "evaluate_detector",
    "enrich_subcaptions",
    "enrich_chunk",
    "train_encoder",
    "evaluate_encoder",
    "evaluate_baseline",
)
# Detector backends that train on one GPU (no multi-GPU launcher wired in): asking for more would
# leave GPUs idle, so the configuration is refused.
SINGLE_GPU_DETECTOR_BACKENDS = ("transformers", "mmdet", "xycut")


def _cuda(device: Any) -> bool:
    return str(device or "").startswith("cuda")


def _gpu_device(device: Any) -> bool:
    """A device that wants a GPU from the scheduler: ``cuda[:N]``, or ``auto`` (cuda when given one)."""
    return _cuda(device) or device == "auto"


def _enrich_gpus(task: Mapping[str, Any]) -> int:
    backend = task.get("backend")
    if backend == "vllm":
        return int((task.get("vllm") or {}).get("tensor_parallel_size", 1))
    if backend == "transformers" and _cuda(task.get("device")):
        return 1
    return 0


def rule_gpus(config: Mapping[str, Any]) -> dict[str, int]:
    """``{rule: GPUs}`` for every rule that can run a model (0 = on CPU)."""
    detector_gpus = int(config["detector"].get("gpus", 0))
    train = config["train"]
    runs = _runs.encoder_runs(train)
    evaluate_gpus = 1 if _gpu_device(config["evaluate"].get("device")) else 0
    return {
        "decompose_chunk": int(config["decompose"].get("gpus", 0)),
        "train_detector": detector_gpus,
        "evaluate_detector": min(detector_gpus, 1),
        "enrich_subcaptions": _enrich_gpus(config["enrich"]["subcaption"]),
        "enrich_chunk": _enrich_gpus(config["enrich"]["summary"]),
        "train_encoder": max(_runs.trainer_gpus(train, r) for r in runs),
        "evaluate_encoder": evaluate_gpus,
        "evaluate_baseline": evaluate_gpus,
    }


def resources(config: Mapping[str, Any], rule: str, *, mem_mb: int, runtime: int) -> dict[str, Any]:
    """A rule's ``resources``: its CPU figures, or ``gpu`` and memory per GPU when it gets GPUs."""
    gpus = rule_gpus(config).get(rule, 0)
    if not gpus:
        return {"mem_mb": mem_mb, "runtime": runtime}
    per_gpu = int(config["compute"]["mem_mb_per_gpu"])
    return {"mem_mb": max(mem_mb, gpus * per_gpu), "runtime": runtime, "gpu": gpus}


def threads(config: Mapping[str, Any], rule: str, cpu_threads: int) -> int:
    """A rule's ``threads``: ``compute.cpus_per_gpu`` per GPU on a GPU, else its CPU value."""
    gpus = rule_gpus(config).get(rule, 0)
    return gpus * int(config["compute"]["cpus_per_gpu"]) if gpus else cpu_threads


def _detector_device(config: Mapping[str, Any]) -> Any:
    det = config["detector"]
    return ((det.get("params") or {}).get(det.get("backend")) or {}).get("device")


def problems(config: Mapping[str, Any]) -> list[str]:
    """Settings that would put a model on a GPU the rule does not ask for, or GPUs nothing uses."""
    out: list[str] = []
    det = config["detector"]
    gpus = int(det.get("gpus", 0))
    if det.get("train") and _cuda(_detector_device(config)) and not gpus:
        out.append(
            f"detector.gpus: 0 but detector.params.{det['backend']}.device is "
            f"{_detector_device(config)!r}: the training job would get no GPU; set detector.gpus"
        )
    if gpus > 1 and det.get("backend") in SINGLE_GPU_DETECTOR_BACKENDS:
        out.append(
            f"detector.gpus: {gpus}, but the {det['backend']} backend trains on one GPU "
            "(the ultralytics backend uses several); set detector.gpus: 1"
        )
    dec = config["decompose"]
    if _cuda((dec.get("detector_params") or {}).get("device")) and not int(dec.get("gpus", 0)):
        out.append(
            "decompose.gpus: 0 but decompose.detector_params.device is "
            f"{dec['detector_params']['device']!r}: the job would get no GPU; set decompose.gpus: 1"
        )
    return out
