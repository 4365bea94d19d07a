"""pmcflow.repro: what must match between two runs, and what may not."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pmcflow import repro


def _tree(root: Path, *, loss: float, wall: float, log: str, weights: bytes) -> Path:
    enc = root / "encoders" / "tiny"
    enc.mkdir(parents=True)
    (enc / "train.log").write_text(log)
    (enc / "train.json").write_text(
        json.dumps({"final_loss": loss, "wall_s": wall, "samples_per_s_median": wall})
    )
    pq.write_table(pa.table({"step": [0], "loss": [loss], "batch_time_s": [wall], "data_time_s": [wall],
                             "samples_per_s": [wall]}), enc / "steps.parquet")  # fmt: skip
    det = root / "detector" / "model"
    det.mkdir(parents=True)
    (det / "train.json").write_text(
        json.dumps(
            {"seconds": wall, "images_per_s": wall, "history": [{"epoch": 1, "time": wall, "loss": loss}]}
        )
    )
    (det / "model.pt").write_bytes(weights)
    (root / "shards").mkdir()
    (root / "shards" / "a.tar").write_bytes(b"tar")
    (det / "data").mkdir()
    (det / "data" / "images").symlink_to(root / "shards", target_is_directory=True)  # not followed
    return root


def test_timings_and_logs_may_differ_nothing_else(tmp_path: Path) -> None:
    a = repro.snapshot(_tree(tmp_path / "a", loss=1.0, wall=3.0, log="t=1", weights=b"w"))
    b = repro.snapshot(_tree(tmp_path / "b", loss=1.0, wall=9.5, log="t=2", weights=b"w"))
    assert repro.differences(a, b) == []
    assert "detector/model/data/images/a.tar" not in a

    c = repro.snapshot(_tree(tmp_path / "c", loss=1.5, wall=3.0, log="t=1", weights=b"w"))
    assert repro.differences(a, c) == [
        "detector/model/train.json",
        "encoders/tiny/steps.parquet",
        "encoders/tiny/train.json",
    ]
    d = repro.snapshot(_tree(tmp_path / "d", loss=1.0, wall=3.0, log="t=1", weights=b"W"))
    assert repro.differences(a, d) == ["detector/model/model.pt"]
    (tmp_path / "d" / "shards" / "b.tar").write_bytes(b"x")
    assert "shards/b.tar" in repro.differences(a, repro.snapshot(tmp_path / "d"))


def test_snakemake_directory_markers_are_bookkeeping(tmp_path: Path) -> None:
    """A run killed between a directory job's end and Snakemake's marker leaves the folder
    complete without ``.snakemake_timestamp``: not a difference in the outputs."""
    for name in ("a", "b"):
        (tmp_path / name / "shard_chunks" / "c1").mkdir(parents=True)
        (tmp_path / name / "shard_chunks" / "c1" / "x.tar").write_bytes(b"t")
    (tmp_path / "a" / "shard_chunks" / "c1" / ".snakemake_timestamp").write_bytes(b"")
    a, b = repro.snapshot(tmp_path / "a"), repro.snapshot(tmp_path / "b")
    assert repro.differences(a, b) == [] and list(a) == ["shard_chunks/c1/x.tar"]
