"""Benchmark sharding and the open_clip loader on the shards, next to a plain copy of the same bytes.

A toy DATASET of real crops (:mod:`pmcflow_testing.encoder_toydata`: scikit-image microscopy / fundus
images and matplotlib charts, PNG and JPEG) is built once; then, in the same process:

* ``copy``            ``shutil.copyfileobj`` of every crop file into one output file: the I/O floor;
* ``shard[decode]``   :func:`pmcflow.shard.shard_dataset` with full image decoding (the default);
* ``shard[header]``   the same, identifying the format from the header only;
* ``loader``          samples/s through ``open_clip_train.data.get_wds_dataset`` (decode + the tiny
                      model's train transform + tokenizer, ``workers=0``) over the train shards.

CPU time (``time.process_time``) and wall time are both recorded (the machine is shared).  MB/s are
image megabytes (10^6 bytes of crop files) per second.

    .venv/bin/python benchmarks/bench_shard.py                 # 3 x 150 crops of 256 px
    .venv/bin/python benchmarks/bench_shard.py --per-class 400 --size 384

Writes ``benchmarks/results/shard.json`` and ``benchmarks/results/shard.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests" / "support"))  # pmcflow_testing: toy data, workflow copies

import pyarrow.parquet as pq  # noqa: E402
from pmcflow_testing.encoder_toydata import make_toy_dataset  # noqa: E402

from pmcflow.shard import shard_dataset  # noqa: E402


def _clock() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.process_time() - t[0], time.perf_counter() - t[1]


def bench(per_class: int, size: int, repeats: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-shard-"))
    try:
        dataset = make_toy_dataset(work / "toy", n_per_class=per_class, seed=1, size=size)
        crops = [
            work / "toy" / p for p in pq.read_table(dataset, columns=["crop_path"]).column(0).to_pylist()
        ]
        n = len(crops)
        mb = sum(p.stat().st_size for p in crops) / 1e6
        results: dict[str, Any] = {"n_images": n, "image_mb": round(mb, 3), "image_px": size, "runs": {}}

        def record(name: str, cpu: float, wall: float, extra: dict[str, Any] | None = None) -> None:
            best = results["runs"].get(name)
            row = {
                "cpu_s": round(cpu, 4),
                "wall_s": round(wall, 4),
                "mb_per_cpu_s": round(mb / cpu, 2) if cpu else None,
                "mb_per_wall_s": round(mb / wall, 2) if wall else None,
                "images_per_cpu_s": round(n / cpu, 1) if cpu else None,
                **(extra or {}),
            }
            if best is None or row["cpu_s"] < best["cpu_s"]:
                results["runs"][name] = row

        cfg = {"splits": {"train": 0.9, "val": 0.05, "test": 0.05}, "max_samples_per_shard": 100}
        for r in range(repeats):
            t = _clock()
            with open(work / f"copy-{r}.bin", "wb") as dst:
                for p in crops:
                    with open(p, "rb") as src:
                        shutil.copyfileobj(src, dst)
                dst.flush()
                os.fsync(dst.fileno())
            record("copy", *_since(t))
            for mode in ("decode", "header"):
                out = work / f"shards-{mode}-{r}"
                t = _clock()
                m = shard_dataset(
                    {**cfg, "verify_images": mode}, 7, [str(dataset)], str(out), base_dir=str(work / "toy")
                )
                cpu, wall = _since(t)
                tar_mb = sum(s["size"] for sp in m["splits"].values() for s in sp["shards"]) / 1e6
                record(
                    f"shard[{mode}]",
                    cpu,
                    wall,
                    {
                        "tar_mb": round(tar_mb, 3),
                        "n_shards": sum(sp["n_shards"] for sp in m["splits"].values()),
                    },
                )
        results["loader"] = loader_bench(work / "shards-decode-0", n_epochs=2)
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def loader_bench(shards: Path, n_epochs: int) -> dict[str, Any]:
    import open_clip
    from open_clip_train.data import get_wds_dataset

    from pmcflow.encoders.train import prepare_model_dir

    manifest = json.loads((shards / "manifest.json").read_text())
    model_id = prepare_model_dir("tiny-vit-bpe", shards.parent / "model")
    _, preprocess_train, _ = open_clip.create_model_and_transforms(model_id, pretrained=None)
    tokenizer = open_clip.get_tokenizer(model_id)
    args = Namespace(
        train_data=manifest["splits"]["train"]["urls"],
        train_num_samples=None,
        dataset_resampled=False,
        train_data_upsampling_factors=None,
        seed=0,
        batch_size=32,
        workers=0,
        world_size=1,
    )
    out: dict[str, Any] = {"batch_size": 32, "workers": 0, "transform": "tiny-vit-bpe train (64 px)"}
    best: tuple[float, float, int] | None = None
    for epoch in range(n_epochs):
        data = get_wds_dataset(args, preprocess_train, is_train=True, epoch=epoch, tokenizer=tokenizer)
        t = _clock()
        seen = sum(images.shape[0] for images, _ in data.dataloader)
        cpu, wall = _since(t)
        if best is None or cpu < best[0]:
            best = (cpu, wall, seen)
    assert best is not None
    out.update(
        {
            "samples": best[2],
            "cpu_s": round(best[0], 4),
            "wall_s": round(best[1], 4),
            "samples_per_cpu_s": round(best[2] / best[0], 1),
            "samples_per_wall_s": round(best[2] / best[1], 1),
        }
    )
    return out


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Shard benchmark",
        "",
        f"{res['n_images']} real crops ({res['image_px']} px wide, PNG + JPEG), {res['image_mb']} MB; "
        f"best of {res['repeats']} runs; {res['machine']}.",
        "",
        "| step | CPU s | wall s | MB / CPU s | MB / wall s | images / CPU s | vs copy (CPU) |",
        "|---|---|---|---|---|---|---|",
    ]
    copy_cpu = res["runs"]["copy"]["cpu_s"]
    for name, r in res["runs"].items():
        ratio = f"{r['cpu_s'] / copy_cpu:.1f}x" if copy_cpu else "-"
        lines.append(
            f"| {name} | {r['cpu_s']} | {r['wall_s']} | {r['mb_per_cpu_s']} | {r['mb_per_wall_s']} | {r['images_per_cpu_s']} | {ratio} |"
        )
    ld = res["loader"]
    lines += [
        "",
        "| loader (open_clip_train get_wds_dataset) | samples | samples / CPU s | samples / wall s |",
        "|---|---|---|---|",
        f"| {ld['transform']}, batch {ld['batch_size']}, workers {ld['workers']} | {ld['samples']} | {ld['samples_per_cpu_s']} | {ld['samples_per_wall_s']} |",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-class", type=int, default=150)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args()
    res = bench(args.per_class, args.size, args.repeats)
    res.update(
        {
            "repeats": args.repeats,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d"),
        }
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "shard.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / "shard.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
