"""Benchmark the subfigure detector backends on CPU.

For each backend: train on a small synthetic set (train images/s), predict a synthetic holdout
(inference images/s) and score it (COCO mAP, mAP@.5, best F1@0.5 and F1 at the production score
threshold 0.2).  Data come from ``pmcflow render`` when the renderer is installed, otherwise from
the built-in toy generator (:mod:`pmcflow_testing.detect_toydata`); the source is recorded.

    .venv/bin/python benchmarks/bench_detect.py                # all available backends
    .venv/bin/python benchmarks/bench_detect.py --backends xycut transformers --n-train 64

Writes ``benchmarks/results/detect.json`` and ``benchmarks/results/detect.md``.
Reference (seed 000, Table 2; DAB-DETR, 500k synthetic figures, 40 epochs on GPUs):
synthetic validation mAP 98.58 / F1 99.96, ImageCLEF 2016 mAP 36.88 / F1 73.55.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "YOLO_OFFLINE": "1",
    "YOLO_AUTOINSTALL": "0",
    "MPLBACKEND": "Agg",
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
}.items():
    os.environ.setdefault(_k, _v)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))  # pmcflow_testing: toy data, workflow copies
RESULTS = REPO / "benchmarks" / "results"

# Demo-scale CPU training settings per backend (override with --set backend.key=value).
TRAIN_PARAMS: dict[str, dict[str, Any]] = {
    "xycut": {"tune": True, "tune_max_images": 32},
    "ultralytics": {
        "model": "yolov8n.yaml",
        "imgsz": 256,
        "epochs": 10,
        "batch_size": 8,
        "workers": 0,
        "device": "cpu",
    },
    "transformers": {
        "preset": "small",
        "imgsz": 256,
        "epochs": 10,
        "batch_size": 4,
        "workers": 0,
        "device": "cpu",
        "lr": 2e-4,
        "warmup_steps": 20,
        "val_every": 0,
        "log_every": 0,
    },
    "mmdet": {"preset": "tiny", "imgsz": 256, "epochs": 3, "batch_size": 4, "workers": 0, "log_every": 10},
}
PREDICT_PARAMS: dict[str, dict[str, Any]] = {
    "ultralytics": {"device": "cpu"},
    "transformers": {"device": "cpu"},
    "mmdet": {"device": "cpu"},
}


def make_data(out: Path, n: int, seed: int, size: int, source: str) -> tuple[Path, str]:
    have_render = importlib.util.find_spec("pmcflow.synth.render") is not None
    if source == "render" or (source == "auto" and have_render):
        cmd = [
            sys.executable,
            "-m",
            "pmcflow.cli",
            "render",
            "--n",
            str(n),
            "--seed",
            str(seed),
            "--size",
            str(size),
            "--out",
            str(out),
        ]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out, "pmcflow render"
    from pmcflow_testing.detect_toydata import make_dataset

    return make_dataset(out, n, seed=seed, size=(size, size)), "pmcflow_testing.detect_toydata"


def score_on_holdout(detector: Any, holdout: Path) -> dict[str, Any]:
    """Inference images/s (after a 2-image warm-up) and COCO metrics of ``detector`` on ``holdout``."""
    from pmcflow.detect.base import read_dataset
    from pmcflow.detect.evaluate import evaluate

    paths = [it.path for it in read_dataset(holdout)]
    detector.predict(paths[:2], score_threshold=0.0)  # warm-up (model load, first-call overheads)
    t0 = time.perf_counter()
    preds = detector.predict(paths, score_threshold=0.0, nms_iou=0.5, batch_size=8)
    infer_s = time.perf_counter() - t0
    rows = [
        {"image_id": p.name, "bbox": [b.x, b.y, b.w, b.h], "score": b.score}
        for p, boxes in zip(paths, preds, strict=True)
        for b in boxes
    ]
    m = evaluate(holdout / "annotations.json", rows)
    return {
        "infer_images_per_s": round(len(paths) / infer_s, 3) if infer_s > 0 else None,
        "map": m["map"],
        "map50": m["map50"],
        "f1": m["f1"],
        "f1_threshold": m["threshold"],
        "precision": m["precision"],
        "recall": m["recall"],
        "f1_at_0.2": m["at_fixed"]["f1"],
    }


def bench_backend(
    name: str, train: Path, val: Path, holdout: Path, work: Path, extra: dict[str, Any]
) -> dict[str, Any]:
    from pmcflow.detect import get_detector

    params = {**TRAIN_PARAMS[name], **extra}
    det = get_detector(name)
    t0 = time.perf_counter()
    res = det.train(train, val, work / name, params)
    train_wall = time.perf_counter() - t0
    predictor = get_detector(name, checkpoint=res.checkpoint, **PREDICT_PARAMS.get(name, {}))
    scores = score_on_holdout(predictor, holdout)
    ckpt = Path(res.checkpoint)
    size = (
        sum(f.stat().st_size for f in ckpt.rglob("*") if f.is_file())
        if ckpt.is_dir()
        else ckpt.stat().st_size
    )
    return {
        "backend": name,
        "train_params": params,
        "train_wall_s": round(train_wall, 2),
        "train_images_per_s": round(res.images_per_s, 3),
        "infer_images_per_s": scores.pop("infer_images_per_s"),
        "checkpoint_mb": round(size / 1e6, 2),
        **scores,
    }


def bench_shipped(holdout: Path) -> dict[str, Any]:
    """Inference-only: the detector shipped in pmcflow/data/detector on the same holdout."""
    from pmcflow.detect.default import default_detector

    name, det = default_detector(device="cpu")
    scores = score_on_holdout(det, holdout)
    return {
        "backend": f"shipped ({name})",
        "train_params": {},
        "train_wall_s": None,
        "train_images_per_s": None,
        "infer_images_per_s": scores.pop("infer_images_per_s"),
        "checkpoint_mb": None,
        **scores,
    }


def _fmt(v: Any, spec: str, scale: float = 1.0) -> str:
    return "–" if v is None else format(scale * v, spec)


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Subfigure detectors (CPU benchmark)",
        "",
        f"Data: {report['data_source']}; train {report['n_train']}, val {report['n_val']}, holdout {report['n_holdout']} "
        f"figures; machine: {report['machine']}; threads {report['threads']}.",
        "",
        "| backend | train img/s | infer img/s | mAP | mAP@.5 | best F1@.5 (thr) | F1 @ 0.2 | ckpt MB | train wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        if "error" in r:
            lines.append(f"| {r['backend']} | – | – | – | – | – | – | – | error: {r['error'][:80]} |")
            continue
        lines.append(
            f"| {r['backend']} | {_fmt(r['train_images_per_s'], '.2f')} | {_fmt(r['infer_images_per_s'], '.2f')} | "
            f"{_fmt(r['map'], '.2f', 100)} | {_fmt(r['map50'], '.2f', 100)} | {_fmt(r['f1'], '.2f', 100)} "
            f"({_fmt(r['f1_threshold'], '.2f')}) | {_fmt(r['f1_at_0.2'], '.2f', 100)} | "
            f"{_fmt(r['checkpoint_mb'], '.1f')} | {_fmt(r['train_wall_s'], '.1f')} |"
        )
    lines += [
        "",
        "Reference (seed 000, Table 2, DAB-DETR on 500k synthetic figures, GPUs): synthetic mAP 98.58 / F1 99.96; "
        "ImageCLEF 2016 mAP 36.88 / F1 73.55.  CPU demo-scale numbers here are not comparable in training budget.",
        "xycut 'train img/s' is the tuning grid's detection throughput (it has no weights).  'shipped' is the",
        "packaged detector (src/pmcflow/data/detector, see its MODEL_CARD.md), scored on the same holdout.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--backends",
        nargs="+",
        default=["xycut", "ultralytics", "transformers", "mmdet", "shipped"],
        help="backends to train and score; 'shipped' scores the packaged detector (inference only)",
    )
    ap.add_argument(
        "--merge", action="store_true", help="replace only these backends' rows in an existing --out"
    )
    ap.add_argument("--n-train", type=int, default=48)
    ap.add_argument("--n-val", type=int, default=8)
    ap.add_argument("--n-holdout", type=int, default=24)
    ap.add_argument("--size", type=int, default=320, help="figure canvas size in pixels (square)")
    ap.add_argument("--data-source", choices=["auto", "render", "toy"], default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="BACKEND.KEY=VALUE")
    ap.add_argument("--out", type=Path, default=RESULTS / "detect.json")
    args = ap.parse_args(argv)

    import torch

    from pmcflow.config import parse_sets

    overrides: dict[str, dict[str, Any]] = {}
    for key, value in parse_sets(args.sets).items():
        backend, k = key.split(".", 1)
        overrides.setdefault(backend, {})[k] = value

    with tempfile.TemporaryDirectory(prefix="bench-detect-") as tmp:
        tmpd = Path(tmp)
        train, source = make_data(tmpd / "train", args.n_train, args.seed, args.size, args.data_source)
        val, _ = make_data(tmpd / "val", args.n_val, args.seed + 1, args.size, args.data_source)
        holdout, _ = make_data(tmpd / "holdout", args.n_holdout, args.seed + 2, args.size, args.data_source)
        results = []
        for name in args.backends:
            print(f"[bench_detect] {name} ...", file=sys.stderr, flush=True)
            try:
                if name == "shipped":
                    r = bench_shipped(holdout)
                else:
                    r = bench_backend(name, train, val, holdout, tmpd / "work", overrides.get(name, {}))
            except ImportError as exc:  # e.g. mmcv not built
                r = {"backend": name, "error": str(exc)}
            results.append(r)
            print(json.dumps(r, default=str), file=sys.stderr, flush=True)

    if args.merge and args.out.is_file():
        with open(args.out, encoding="utf-8") as fh:
            old = json.load(fh)
        same = all(
            old.get(k) == v
            for k, v in {
                "n_train": args.n_train,
                "n_val": args.n_val,
                "n_holdout": args.n_holdout,
                "size": args.size,
                "seed": args.seed,
            }.items()
        )
        if not same:
            raise SystemExit("--merge: the existing report used other data settings")
        names = {r["backend"] for r in results}
        results = [
            r
            for r in old["results"]
            if r["backend"] not in names
            and not (r["backend"].startswith("shipped") and "shipped" in args.backends)
        ] + results

    report = {
        "data_source": source,
        "n_train": args.n_train,
        "n_val": args.n_val,
        "n_holdout": args.n_holdout,
        "size": args.size,
        "seed": args.seed,
        "machine": f"{platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}, cuda {torch.cuda.is_available()}",
        "threads": torch.get_num_threads(),
        "results": results,
    }
    from pmcflow.tables import write_json

    write_json(args.out, report)
    args.out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
