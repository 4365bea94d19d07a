"""Baselines evaluated by the same code as the trained runs: a seeded random initialisation (the
chance floor), open_clip weights from a checkpoint file, and an ``hf-hub:`` model loaded through
open_clip's real hub code from a local Hugging Face cache (offline, as on a compute node)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pmcflow_testing.encoder_toydata import make_toy_dataset

from pmcflow.encoders import evaluate as EV
from pmcflow.encoders.train import prepare_model_dir
from pmcflow.shard import shard_dataset

pytestmark = pytest.mark.slow
SEED = 20260415


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("toy")
    dataset = make_toy_dataset(root / "toy", n_per_class=6, seed=5, size=64)
    out = root / "shards"
    shard_dataset(
        {"splits": {"train": 0.5, "test": 0.5}}, SEED, [str(dataset)], str(out), base_dir=str(root / "toy")
    )
    return out


def _cfg(baselines: dict) -> dict:
    return {"bootstrap": 20, "baselines": baselines}


def test_random_init_baseline_is_seeded_and_recorded(shards: Path, tmp_path: Path) -> None:
    spec = {"untrained": {"model": "tiny-vit-bpe", "pretrained": None, "note": "chance floor"}}
    res = EV.evaluate_encoder(_cfg(spec), SEED, None, shards, tmp_path / "a", baseline="untrained")
    rec = res["baseline"]
    assert rec["random_init"] and "chance floor" in rec["weights"] and rec["note"] == "chance floor"
    assert res["checkpoint"] is None and res["retrieval"]["n_pairs"] >= 2
    doc = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert doc["baseline"]["name"] == "untrained" and doc["model_id"] == "tiny-vit-bpe"
    # The same seed gives the same weights, so the same bytes; another seed, another model.
    EV.evaluate_encoder(_cfg(spec), SEED, None, shards, tmp_path / "b", baseline="untrained")
    for name in ("metrics.parquet", "metrics.json", "retrieval_ranks.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    EV.evaluate_encoder(_cfg(spec), SEED + 1, None, shards, tmp_path / "c", baseline="untrained")
    assert (tmp_path / "a" / "retrieval_ranks.parquet").read_bytes() != (
        tmp_path / "c" / "retrieval_ranks.parquet"
    ).read_bytes()
    with pytest.raises(EV.EvaluateError, match="no baseline 'other'"):
        EV.evaluate_encoder(_cfg(spec), SEED, None, shards, tmp_path / "d", baseline="other")
    with pytest.raises(EV.EvaluateError, match="must be a checkpoint file"):
        bad = {"tag": {"model": "tiny-vit-bpe", "pretrained": "openai"}}  # open_clip would ignore it
        EV.evaluate_encoder(_cfg(bad), SEED, None, shards, tmp_path / "f", baseline="tag")
    with pytest.raises(EV.EvaluateError, match="cannot load"):
        EV.evaluate_encoder(
            _cfg({"bad": {"model": "no-such-model"}}), SEED, None, shards, tmp_path / "e", baseline="bad"
        )


def _tiny_checkpoint(tmp_path: Path) -> tuple[str, Path, EV.Encoder]:
    """A tiny model with its own weights (seed 99), saved as an open_clip checkpoint file."""
    import torch

    model_id = prepare_model_dir("tiny-vit-bpe", tmp_path / "model")
    enc = EV.Encoder(model_id, None, init_seed=99)
    path = tmp_path / "weights.pt"
    torch.save({"state_dict": enc.model.state_dict()}, path)
    return model_id, path, enc


def test_pretrained_file_and_hf_hub_baselines_load_the_same_weights(shards: Path, tmp_path: Path) -> None:
    import torch

    model_id, weights, enc = _tiny_checkpoint(tmp_path)
    # (1) local-dir config + a checkpoint file: the weights are the file's, not the seed's.
    spec = {"file": {"model": model_id, "pretrained": str(weights)}}
    res = EV.evaluate_encoder(_cfg(spec), SEED, None, shards, tmp_path / "file", baseline="file")
    assert not res["baseline"]["random_init"] and res["baseline"]["pretrained_sha256"]
    loaded, _ = EV.baseline_encoder("file", spec["file"], tmp_path / "file2", seed=1)
    for (k, a), (_, b) in zip(enc.model.state_dict().items(), loaded.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k

    # (2) the same model published as an hf-hub repo, read from a local HF cache, offline.
    cache = tmp_path / "hf"
    snap = cache / "models--pmcflow-test--tiny-clip" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (snap.parent.parent / "refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text("0" * 40)
    cfg = json.loads((Path(model_id[len("local-dir:") :]) / "open_clip_config.json").read_text())
    (snap / "open_clip_config.json").write_text(json.dumps(cfg))
    torch.save(enc.model.state_dict(), snap / "open_clip_pytorch_model.bin")
    conf = tmp_path / "conf.yaml"
    conf.write_text(
        "evaluate:\n  bootstrap: 20\n  baselines:\n    hub: {model: 'hf-hub:pmcflow-test/tiny-clip'}\n"
    )
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", PYTHONHASHSEED="0")
    cmd = [
        str(Path(sys.executable).with_name("pmcflow")),
        "evaluate-encoder",
        "--baseline",
        "hub",
        "--shards",
        str(shards),
    ]
    proc = subprocess.run(
        [*cmd, "--out", str(tmp_path / "hub"), "-c", str(conf)], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    hub = json.loads((tmp_path / "hub" / "metrics.json").read_text())
    assert "loaded by open_clip by name" in (tmp_path / "hub" / "model" / "README.txt").read_text()
    assert hub["baseline"]["weights"] == "the hub checkpoint of hf-hub:pmcflow-test/tiny-clip"
    file_rec = json.loads((tmp_path / "file" / "metrics.json").read_text())
    assert hub["retrieval"] == file_rec["retrieval"]  # same weights, same code: the same numbers
    # Without the cache the hub model cannot be had offline: one clear error naming the baseline.
    env["HF_HUB_CACHE"] = str(tmp_path / "empty")
    proc = subprocess.run(
        [*cmd, "--out", str(tmp_path / "nohub"), "-c", str(conf)], env=env, capture_output=True, text=True
    )
    assert proc.returncode != 0 and "baseline 'hub': cannot load hf-hub:pmcflow-test/tiny-clip" in proc.stderr
    assert "Traceback" not in proc.stderr
