"""End to end on CPU: real tiny images -> shards -> open_clip_train (1 epoch, tiny model) -> evaluation."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest
from pmcflow_testing.encoder_toydata import CLASSES, make_toy_dataset

from pmcflow.encoders.evaluate import evaluate_encoder
from pmcflow.encoders.train import train_encoder
from pmcflow.shard import shard_dataset

pytestmark = pytest.mark.slow


def test_shard_train_evaluate(tmp_path: Path) -> None:
    toy = tmp_path / "toy"
    dataset = make_toy_dataset(toy, n_per_class=14, seed=5, size=64)
    shards = tmp_path / "shards"
    m = shard_dataset(
        {"splits": {"train": 0.6, "val": 0.15, "test": 0.25}, "max_samples_per_shard": 10},
        20260415,
        [str(dataset)],
        str(shards),
        base_dir=str(toy),
    )
    assert m["n_samples"] == 42 and all(m["splits"][s]["n_samples"] > 0 for s in ("train", "val", "test"))

    rec = train_encoder(
        {"model": "tiny-vit-bpe", "epochs": 1, "batch_size": 8, "timeout_s": 600},
        20260415,
        str(shards),
        str(tmp_path / "train"),
    )
    assert Path(rec["checkpoint"]).is_file() and rec["checkpoint"].endswith("epoch_1.pt")
    steps = pl.read_parquet(tmp_path / "train" / "steps.parquet")
    assert steps.height == rec["schedule"]["steps_per_epoch"] >= 3
    assert steps["loss"].is_finite().all() and (steps["samples_per_s"] > 0).all()
    assert rec["val_metrics"] is not None and "clip_val_loss" in rec["val_metrics"]
    assert json.loads((tmp_path / "train" / "train.json").read_text())["checkpoint"] == rec["checkpoint"]

    # An external labelled set in the <class>/<image> layout (crops of the training sources).
    ext = tmp_path / "ext"
    rows = pl.read_parquet(dataset).select("crop_path", "modality").rows()
    for i, (crop, label) in enumerate(rows[::3]):
        (ext / label).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(toy / crop, ext / label / f"{i}{Path(crop).suffix}")

    res = evaluate_encoder(
        {
            "bootstrap": 100,
            "zero_shot": {
                "class_names": {"chart": "chart or plot"},
                "datasets": [{"name": "ext", "kind": "dir", "path": str(ext)}],
            },
        },
        20260415,
        str(tmp_path / "train"),
        str(shards),
        str(tmp_path / "eval"),
    )
    metrics = pl.read_parquet(tmp_path / "eval" / "metrics.parquet")
    ret = metrics.filter(pl.col("task") == "retrieval")
    assert set(ret["direction"]) == {"image_to_text", "text_to_image"}
    for k in (1, 10, 50, 200):
        vals = ret.filter(pl.col("metric") == f"R@{k}")["value"].to_list()
        assert len(vals) == 2 and all(0.0 <= v <= 1.0 for v in vals)
    assert ret.filter(pl.col("metric") == "R@1")["n"].to_list() == [m["splits"]["test"]["n_samples"]] * 2
    zs = metrics.filter(pl.col("task") == "zero_shot")
    assert {"test:modality", "ext"} <= set(zs["dataset"])
    for row in zs.filter(pl.col("metric").is_in(["accuracy", "macro_f1"])).iter_rows(named=True):
        assert 0.0 <= row["value"] <= 1.0
        assert math.isnan(row["ci_low"]) or row["ci_low"] <= row["value"] <= row["ci_high"]
    assert res["zero_shot"]["ext"]["classes"] == sorted(CLASSES)
    ranks = pl.read_parquet(tmp_path / "eval" / "retrieval_ranks.parquet")
    assert ranks.height == m["splits"]["test"]["n_samples"]
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["checkpoint"] == rec["checkpoint"]


def test_best_epoch_and_every_benchmark_task_on_real_demo_benchmarks(tmp_path: Path) -> None:
    """Two epochs with best-epoch selection, then the benchmark suite on the demo benchmarks (real
    images shipped inside installed packages): retrieval, zero-shot, linear probe and robustness,
    with the files used recorded with their sha256 and features cached."""
    import hashlib

    import numpy as np

    from pmcflow.encoders.benchmarks import build_demo_benchmarks

    toy = tmp_path / "toy"
    dataset = make_toy_dataset(toy, n_per_class=14, seed=5, size=64)
    shards = tmp_path / "shards"
    m = shard_dataset(
        {"splits": {"train": 0.6, "val": 0.15, "test": 0.25}}, 20260415, [str(dataset)], str(shards), base_dir=str(toy)
    )  # fmt: skip
    assert m["splits"]["val"]["n_samples"] >= 2
    rec = train_encoder(
        {"model": "tiny-vit-bpe", "epochs": 2, "batch_size": 8, "text_fields": ["caption"]}, 7, str(shards), str(tmp_path / "train")
    )  # fmt: skip
    sel = rec["selection"]
    assert [r["epoch"] for r in sel["by_epoch"]] == [1, 2] and sel["n_pairs"] >= 2
    assert rec["best_epoch"] in (1, 2) and rec["checkpoint"].endswith(f"epoch_{rec['best_epoch']}.pt")
    best = max(sel["by_epoch"], key=lambda r: (r["R@200"], r["mrr"], r["epoch"]))
    assert best["epoch"] == rec["best_epoch"] and rec["final_checkpoint"].endswith("epoch_2.pt")

    built = build_demo_benchmarks(tmp_path / "bench", seed=0)
    assert len(built) >= 2
    cfg = {
        "bootstrap": 50,
        "linear_probe": {"epochs": 10},
        "robustness": {"perturbations": {"flip": 1, "brightness": 0.5}},
        "feature_cache": str(tmp_path / "features"),
    }
    yaml_path = tmp_path / "bench" / "benchmarks.yaml"
    res = evaluate_encoder(
        cfg, 7, str(tmp_path / "train"), str(shards), str(tmp_path / "eval"), benchmarks_yaml=[yaml_path]
    )
    metrics = pl.read_parquet(tmp_path / "eval" / "metrics.parquet")
    names = set(res["benchmarks"])
    assert len(names) >= 2
    tasks = set(metrics.filter(pl.col("dataset").is_in(sorted(names)))["task"])
    assert tasks == {"retrieval", "zero_shot", "linear_probe"}
    for row in metrics.filter(pl.col("dataset").is_in(sorted(names))).iter_rows(named=True):
        assert 0.0 <= row["value"] <= 1.0 or row["metric"] == "mean_rank" or row["metric"] == "median_rank"
    rob = pl.read_parquet(tmp_path / "eval" / "robustness.parquet")
    assert set(rob["perturbation"]) == {"flip", "brightness"} and set(rob["task"]) == {
        "retrieval",
        "zero_shot",
    }
    assert rob["p_value"].drop_nulls().is_between(0, 1).all()
    used = json.loads((tmp_path / "eval" / "benchmarks.json").read_text())["benchmarks"]
    for b in used:
        assert b["files"]
        for f in b["files"][:5]:
            assert hashlib.sha256(Path(f["path"]).read_bytes()).hexdigest() == f["sha256"]
    emb = np.load(tmp_path / "eval" / "embeddings.npz")
    assert set(names) <= set(emb.files)
    # A second evaluation reuses every cached feature and writes the same bytes.
    again = evaluate_encoder(
        cfg, 7, str(tmp_path / "train"), str(shards), str(tmp_path / "eval2"), benchmarks_yaml=[yaml_path]
    )
    first, second = res["_feature_cache"], again["_feature_cache"]
    assert second.misses == 0 and second.hits == first.misses > 0
    for name in (
        "metrics.parquet",
        "metrics.json",
        "robustness.parquet",
        "benchmarks.json",
        "embeddings.npz",
    ):
        assert (tmp_path / "eval" / name).read_bytes() == (tmp_path / "eval2" / name).read_bytes(), name
