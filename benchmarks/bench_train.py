"""Benchmark CPU training throughput of the tiny open_clip configs through ``pmcflow.encoders.train``.

Builds a toy DATASET of real crops, shards it, and trains each model for ``--epochs`` epochs with
``open_clip_train`` as a subprocess (exactly what the workflow rule runs).  Reported per model:
the median of open_clip's logged samples/s (first step excluded: it includes start-up), the
end-to-end samples/s of the whole subprocess (imports, model build, data, checkpoint), the first
and last logged loss, and the checkpoint size.  The machine's 2 cores are shared, so throughput is
indicative; the paper's production run (ViT-B/16 + PubMedBERT, 8xA100, 5 days for 64 epochs of
18M pairs, i.e. ~2,700 samples/s) cannot be reproduced here.

    .venv/bin/python benchmarks/bench_train.py                       # tiny-vit-bpe, 1 epoch
    .venv/bin/python benchmarks/bench_train.py --models tiny-vit-bpe tiny-vit-minilm

Writes ``benchmarks/results/train.json`` and ``benchmarks/results/train.md``.
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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests" / "support"))  # pmcflow_testing: toy data, workflow copies

from pmcflow_testing.encoder_toydata import make_toy_dataset  # noqa: E402

from pmcflow.encoders.train import train_encoder  # noqa: E402
from pmcflow.shard import shard_dataset  # noqa: E402

# Open-PMC-18M: 18M pairs x 64 epochs on 8 A100 in about 5 days.
REFERENCE_SAMPLES_PER_S = round(18e6 * 64 / (5 * 86400), 0)


def bench(models: list[str], per_class: int, epochs: int, batch_size: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-train-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        dataset = make_toy_dataset(work / "toy", n_per_class=per_class, seed=2, size=96)
        m = shard_dataset(
            {"splits": {"train": 1.0}, "max_samples_per_shard": 64}, 3, [str(dataset)], str(work / "shards"),
            base_dir=str(work / "toy"),
        )  # fmt: skip
        res: dict[str, Any] = {"n_train": m["splits"]["train"]["n_samples"], "models": {}}
        for model in models:
            rec = train_encoder(
                {"model": model, "epochs": epochs, "batch_size": batch_size, "use_val": False},
                3,
                str(work / "shards"),
                str(work / f"train-{model}"),
            )
            res["models"][model] = {
                "epochs": epochs,
                "batch_size": batch_size,
                "steps": rec["n_steps_logged"],
                "wall_s": round(rec["wall_s"], 2),
                "samples_per_s_median": rec["samples_per_s_median"],
                "samples_per_s_end_to_end": round(rec["samples_per_s_end_to_end"], 2),
                "first_loss": rec["first_loss"],
                "final_loss": rec["final_loss"],
                "checkpoint_mb": round(rec["checkpoint_bytes"] / 1e6, 1),
            }
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Encoder training benchmark (CPU)",
        "",
        f"{res['n_train']} training pairs (real crops, 96 px source, 64 px model input); {res['machine']}; "
        "open_clip_train as a subprocess, fp32, `train.threads: 1` (OMP_NUM_THREADS=1). With torch's default "
        "2 threads on this shared machine the same tiny-vit-bpe run measured 3.2 samples/s (median step): "
        "thread oversubscription, not compute, dominated.",
        "",
        "| model | epochs | batch | steps | samples/s (median step) | samples/s (end to end) | wall s | loss first -> last | checkpoint MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in res["models"].items():
        lines.append(
            f"| {name} | {r['epochs']} | {r['batch_size']} | {r['steps']} | {r['samples_per_s_median']} | "
            f"{r['samples_per_s_end_to_end']} | {r['wall_s']} | {r['first_loss']} -> {r['final_loss']} | {r['checkpoint_mb']} |"
        )
    lines += [
        "",
        f"Reference (Open-PMC-18M, ViT-B/16 + PubMedBERT on 8xA100): about {REFERENCE_SAMPLES_PER_S:.0f} samples/s "
        "(18M pairs x 64 epochs in ~5 days); not reproducible on this CPU machine.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["tiny-vit-bpe"])
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args()
    res = bench(args.models, args.per_class, args.epochs, args.batch_size)
    res.update(
        {
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
            "date": time.strftime("%Y-%m-%d"),
            "reference_samples_per_s": REFERENCE_SAMPLES_PER_S,
        }
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / "train.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    main()
