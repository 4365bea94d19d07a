"""Which rules get GPUs (pmcflow.compute), as Snakemake loads the workflow, and where the Slurm
profile's partition file sends each job (the executor plugin's own partition selection)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from pmcflow_testing import containers as ct
from snakemake_executor_plugin_slurm.partitions import get_best_partition, read_partition_file

from pmcflow import compute, runs
from pmcflow.config import ConfigError, load_config
from pmcflow.encoders.train import TrainSettings

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm"
cc = ct.check_containers_module()  # scripts/setup/check_containers.py: rule settings as loaded

# The rules that run a model, and the config that says on which device (the paper's recipe runs
# every one of them on CUDA); every other rule is CPU work.
MODEL_RULES = {
    "decompose_chunk",
    "train_detector",
    "evaluate_detector",
    "enrich_subcaptions",
    "enrich_chunk",
    "train_encoder",
    "evaluate_encoder",
    "evaluate_baseline",
}


class _Resources(dict):
    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def _value(v: Any) -> Any:
    return getattr(v, "value", v)


def _slurm_job(name: str, rule_resources: dict[str, Any], profile: dict[str, Any]) -> SimpleNamespace:
    """A job as the Slurm plugin sees it: the rule's resources under the profile's defaults and
    per-rule settings (expressions evaluated at attempt 1)."""
    res = {k: _value(v) for k, v in rule_resources.items() if not k.startswith("_") and k != "tmpdir"}
    threads = int(_value(rule_resources["_cores"]))
    scope = {"attempt": 1, "threads": threads}
    for k, v in (profile.get("default-resources") or {}).items():
        if k not in ("slurm_account", "tmpdir"):
            res.setdefault(k, eval(str(v), {}, scope))  # noqa: S307
    for k, v in ((profile.get("set-resources") or {}).get(name) or {}).items():
        res[k] = eval(str(v), {}, scope)  # noqa: S307
    return SimpleNamespace(name=name, threads=threads, resources=_Resources(res))


def _partitions_and_jobs(
    configfiles: list[str],
) -> tuple[dict[str, Any], dict[str, str | None], dict[str, int]]:
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    partitions = read_partition_file(PROFILE / profile["slurm-partition-config"])
    gpu_partitions = {p.name for p in partitions if p.limits.max_gpu > 0}
    settings = cc.rule_settings(configfiles)
    chosen, gpus = {}, {}
    log = logging.getLogger("test")
    for name, s in settings.items():
        job = _slurm_job(name, s["resources"], profile)
        chosen[name] = get_best_partition(partitions, job, log)
        gpus[name] = int(job.resources.get("gpu", 0))
    return {"gpu": gpu_partitions}, chosen, gpus


def test_production_config_gives_each_model_rule_its_gpus_and_cpu_rules_none():
    """The resource test of the production issue: config/config.yaml with the Slurm profile."""
    kinds, chosen, gpus = _partitions_and_jobs(["config/config.yaml"])
    cfg = load_config([REPO / "config" / "config.yaml"])
    assert MODEL_RULES <= set(gpus), sorted(MODEL_RULES - set(gpus))
    for rule, n in gpus.items():
        if rule in MODEL_RULES:
            assert n >= 1, f"{rule} runs a model on cuda in the paper's recipe but asks for no GPU"
            assert chosen[rule] in kinds["gpu"], (rule, chosen[rule])
        else:
            assert n == 0, f"{rule} is CPU work but asks for {n} GPUs"
            assert chosen[rule] is not None and chosen[rule] not in kinds["gpu"], (rule, chosen[rule])
    # The counts are those the stages use: the trainer's own resolution of the preset, the vLLM
    # engines' tensor parallelism, one GPU for the single-GPU detector backend.
    trainer = TrainSettings.from_section(runs.run_settings(cfg["train"], runs.encoder_runs(cfg["train"])[0]))
    assert trainer.device == "cuda" and gpus["train_encoder"] == trainer.n_gpus == 8
    assert gpus["enrich_subcaptions"] == cfg["enrich"]["subcaption"]["vllm"]["tensor_parallel_size"]
    assert gpus["enrich_chunk"] == cfg["enrich"]["summary"]["vllm"]["tensor_parallel_size"]
    assert gpus["train_detector"] == 1 and cfg["detector"]["backend"] == "transformers"


def test_demo_config_asks_for_no_gpu():
    _, chosen, gpus = _partitions_and_jobs(["config/demo.yaml"])
    assert {r for r, n in gpus.items() if n} == set()
    assert "gpu" not in set(chosen.values())


def test_gpu_jobs_get_cores_and_memory_per_gpu():
    cfg = load_config([REPO / "config" / "config.yaml"])
    res = compute.resources(cfg, "train_encoder", mem_mb=16000, runtime=7200)
    assert res == {"mem_mb": 8 * cfg["compute"]["mem_mb_per_gpu"], "runtime": 7200, "gpu": 8}
    assert compute.threads(cfg, "train_encoder", 1) == 8 * cfg["compute"]["cpus_per_gpu"]
    # A CPU rule keeps its own figures.
    assert compute.resources(cfg, "parse_chunk", mem_mb=2000, runtime=60) == {"mem_mb": 2000, "runtime": 60}
    assert compute.threads(cfg, "parse_chunk", 2) == 2


def _cfg(**sections: dict[str, Any]) -> dict[str, Any]:
    cfg = copy.deepcopy(load_config([REPO / "config" / "demo.yaml"]))
    for name, values in sections.items():
        cfg[name].update(values)
    return cfg


def test_gpu_counts_follow_each_stage_section():
    cfg = _cfg(
        decompose={"gpus": 2},
        evaluate={"device": "cuda"},
        train={"device": "cuda", "n_gpus": 4, "precision": "amp"},
    )
    cfg["enrich"]["subcaption"] = {**cfg["enrich"]["subcaption"], "backend": "transformers", "device": "cuda"}
    cfg["enrich"]["summary"] = {
        **cfg["enrich"]["summary"],
        "backend": "vllm",
        "vllm": {"tensor_parallel_size": 4},
    }
    g = compute.rule_gpus(cfg)
    assert g["decompose_chunk"] == 2
    assert g["evaluate_encoder"] == g["evaluate_baseline"] == 1
    assert g["train_encoder"] == 4
    assert g["enrich_subcaptions"] == 1 and g["enrich_chunk"] == 4
    assert g["train_detector"] == g["evaluate_detector"] == 0


def test_a_variant_on_more_gpus_sizes_the_training_jobs():
    cfg = _cfg(train={"device": "cuda", "precision": "amp", "variants": {"a": {}, "b": {"n_gpus": 2}}})
    assert compute.rule_gpus(cfg)["train_encoder"] == 2


@pytest.mark.parametrize(
    ("overlay", "message"),
    [
        ({"detector": {"params": {"ultralytics": {"device": "cuda"}}}}, "detector.gpus: 0 but"),
        ({"detector": {"backend": "transformers", "gpus": 2}}, "trains on one GPU"),
        ({"decompose": {"detector_params": {"device": "cuda:0"}}}, "decompose.gpus: 0 but"),
    ],
)
def test_a_model_on_cuda_without_a_gpu_request_is_refused(tmp_path, overlay, message):
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay))
    with pytest.raises(ConfigError, match=message):
        load_config([REPO / "config" / "demo.yaml", path])


def test_ultralytics_trains_on_every_gpu_it_gets(tmp_path):
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump({"detector": {"backend": "ultralytics", "gpus": 4}}))
    cfg = load_config([REPO / "config" / "demo.yaml", path])
    assert compute.rule_gpus(cfg)["train_detector"] == 4
    assert compute.rule_gpus(cfg)["evaluate_detector"] == 1
