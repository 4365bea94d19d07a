"""Benchmark the filter stage: rows/s with and without the modality classifier, pHash/s, dedup time.

Inputs are the demo run's enriched chunks (``results/demo/enrich/*/enriched.parquet`` with their
crops under ``results/demo/decompose``; run the demo workflow first) and random 64-bit hashes.

* ``rows[no-model]``  :func:`pmcflow.filter.stage.evaluate_rows` with the classifier disabled:
                      licence/retraction/size checks, crop decoding, caption checks, pHash;
* ``rows[model]``     the same plus the shipped modality classifier (batches of 64, one thread);
* ``phash``           :func:`pmcflow.filter.phash.phash_hex` alone on crops already decoded;
* ``phash_vs_imagehash`` pmcflow's pHash against ``imagehash.phash`` (the reference it must equal
                      bit for bit) and against the box-filter pHash pmcflow used before (kept
                      here only to measure what compatibility costs), same images, same process:
                      the decoded crops, the demo corpus's figure images and seeded random
                      sub-crops of those figures, ``--phash-images`` in all (default 2,500).
                      Skipped when imagehash is not installed.
* ``dedup``           :func:`pmcflow.filter.phash.cluster_duplicates` over N random hashes with
                      5 % planted near-duplicates (1..6 flipped bits), ``max_hamming`` 6.
* ``demo_modality``   accuracy of the shipped classifier on the demo crops, against the demo
                      corpus's per-panel ground truth (``demo/corpus/figures.jsonl``: the source
                      image and modality of every panel; a crop is matched to the panel it
                      overlaps most, IoU >= 0.5).  Reported separately for panels whose source the
                      classifier held out in training and for sources it trained on.

CPU time (``time.process_time``) and wall time are both recorded (the machine is shared); the
best of ``--repeats`` runs is reported.

    .venv/bin/python benchmarks/bench_filter.py              # demo chunks, 100k hashes
    .venv/bin/python benchmarks/bench_filter.py --hashes 1000000

Writes ``benchmarks/results/filter.json`` and ``benchmarks/results/filter.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from pmcflow import tables as T  # noqa: E402
from pmcflow.detect.images import ImageError, load_image  # noqa: E402
from pmcflow.filter.checks import FilterSettings  # noqa: E402
from pmcflow.filter.modality import SHIPPED_CHECKPOINT, load_modality_model  # noqa: E402
from pmcflow.filter.phash import IMG_SIZE, cluster_duplicates, phash_hex  # noqa: E402
from pmcflow.filter.stage import evaluate_rows  # noqa: E402


def _timed(fn: Any, repeats: int) -> tuple[Any, float, float]:
    best_cpu = best_wall = float("inf")
    out = None
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return out, best_cpu, best_wall


def legacy_box_phash(image: Any) -> str:
    """The pHash pmcflow computed before it matched imagehash (box-filter resize, orthonormal DCT,
    DC left out of the median); kept only to measure the cost of the switch."""
    from PIL import Image
    from scipy.fft import dctn

    grey = image if image.mode == "L" else image.convert("L")
    pixels = np.asarray(grey.resize((32, 32), Image.Resampling.BOX), dtype=np.float64)
    coeffs = dctn(pixels, type=2, norm="ortho")[:8, :8].ravel()
    median = float(np.median(coeffs[1:]))
    value = 0
    for b in coeffs > median:
        value = (value << 1) | int(b)
    return f"{value:016x}"


def phash_images(crops: list[Any], n: int, seed: int) -> list[Any]:
    """``crops`` + the demo corpus's figure images + seeded random sub-crops of the figures (>= 64 px
    a side), ``n`` images in all (at least the crops and figures)."""
    from PIL import Image

    figures = []
    for path in sorted((REPO / "demo" / "corpus").rglob("*.jpg")):
        with Image.open(path) as im:
            figures.append(im.convert("RGB"))
    out = list(crops) + figures
    rng = np.random.default_rng(seed)
    while figures and len(out) < n:
        im = figures[int(rng.integers(len(figures)))]
        w, h = im.size
        cw, ch = int(rng.integers(min(64, w), w + 1)), int(rng.integers(min(64, h), h + 1))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        out.append(im.crop((x, y, x + cw, y + ch)))
    return out


def phash_vs_imagehash(images: list[Any], repeats: int) -> dict[str, Any] | None:
    try:
        import imagehash
    except ImportError:
        print("imagehash is not installed: no phash_vs_imagehash section", file=sys.stderr)
        return None
    from PIL import Image

    n = len(images)
    ours, cpu, wall = _timed(lambda: [phash_hex(im) for im in images], repeats)
    ref, ref_cpu, ref_wall = _timed(lambda: [str(imagehash.phash(im)) for im in images], repeats)
    old, old_cpu, old_wall = _timed(lambda: [legacy_box_phash(im) for im in images], repeats)
    _, rs_cpu, rs_wall = _timed(
        lambda: [(im if im.mode == "L" else im.convert("L")).resize((IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS)
                 for im in images], repeats)
    sizes = np.array([im.width * im.height for im in images])

    def rate(c: float, w: float) -> dict[str, float]:
        return {"per_s_cpu": n / c, "per_s_wall": n / w, "us_per_image_cpu": c / n * 1e6}

    return {
        "images": n, "median_pixels": int(np.median(sizes)), "mean_pixels": int(sizes.mean()),
        "imagehash_version": getattr(imagehash, "__version__", None),
        "pmcflow": rate(cpu, wall), "imagehash": rate(ref_cpu, ref_wall), "legacy_box": rate(old_cpu, old_wall),
        "grey_lanczos_resize_only": rate(rs_cpu, rs_wall),
        "identical_to_imagehash": sum(a == b for a, b in zip(ours, ref, strict=True)),
        "legacy_identical_to_imagehash": sum(a == b for a, b in zip(old, ref, strict=True)),
    }


def _demo_rows(results: Path) -> list[dict[str, Any]]:
    paths = sorted(results.glob("enrich/*/enriched.parquet"))
    if not paths:
        raise SystemExit(f"no enriched tables under {results}/enrich; run the demo workflow first")
    rows = [r for p in paths for r in T.read_rows(p)]
    # every row must reach the expensive steps: lift the licence and size checks
    return [dict(r, license_code="CC BY") for r in rows]


def random_hashes(n: int, dup_fraction: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, np.iinfo(np.int64).max, size=n, dtype=np.int64).astype(np.uint64)
    base ^= rng.integers(0, 2, size=n, dtype=np.int64).astype(np.uint64) << np.uint64(63)
    n_dup = int(n * dup_fraction)
    src = rng.integers(0, n, size=n_dup)
    for k, i in enumerate(rng.choice(n, size=n_dup, replace=False)):
        bits = rng.choice(64, size=int(rng.integers(1, 7)), replace=False)
        base[i] = base[src[k]] ^ np.uint64(sum(1 << int(b) for b in bits))
    return base


def _iou(a: Any, b: Any) -> float:
    ax1, ay1, ax2, ay2 = a[0], a[1], a[0] + a[2], a[1] + a[3]
    bx1, by1, bx2, by2 = b[0], b[1], b[0] + b[2], b[1] + b[3]
    iw, ih = max(0.0, min(ax2, bx2) - max(ax1, bx1)), max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def demo_modality(rows: list[dict[str, Any]], verdicts: list[Any], figures_jsonl: Path) -> dict[str, Any]:
    panels: dict[str, list[dict[str, Any]]] = {}
    for line in figures_jsonl.read_text(encoding="utf-8").splitlines():
        fig = json.loads(line)
        panels[f"{fig['pmcid']}.{fig['version']}/{fig['figure_id']}"] = fig["panels"]
    card = json.loads((SHIPPED_CHECKPOINT.parent / "metrics.json").read_text(encoding="utf-8"))
    # every panel source the classifier did not train on counts as held out (with the registry-trained
    # classifier that is every render source except the plot kinds it trained on)
    trained = {sid for split in card["split"].values() for sid in split["train"]}
    tally: dict[str, dict[str, list[int]]] = {"heldout_sources": {}, "training_sources": {}}
    for row, v in zip(rows, verdicts, strict=True):
        if v.modality is None or not row.get("bbox"):
            continue
        cands = [(_iou(row["bbox"], p["bbox"]), p) for p in panels.get(row["figure_uid"], [])]
        if not cands:
            continue
        iou, panel = max(cands, key=lambda t: t[0])
        if iou < 0.5:
            continue
        side = "training_sources" if panel["source_id"] in trained else "heldout_sources"
        ok_n = tally[side].setdefault(panel["modality"], [0, 0])
        ok_n[0] += int(v.modality == panel["modality"])
        ok_n[1] += 1
    out: dict[str, Any] = {}
    for side, by_cls in tally.items():
        n = sum(t[1] for t in by_cls.values())
        out[side] = {
            "n": n,
            "accuracy": (sum(t[0] for t in by_cls.values()) / n) if n else None,
            "per_class": {c: {"accuracy": t[0] / t[1], "n": t[1]} for c, t in sorted(by_cls.items())},
        }
    return out


def bench(results: Path, n_hashes: int, repeats: int, n_phash: int = 2500) -> dict[str, Any]:
    torch.set_num_threads(1)
    rows = _demo_rows(results)
    n = len(rows)
    out: dict[str, Any] = {"rows": n, "source": str(results.relative_to(REPO) if results.is_relative_to(REPO) else results)}

    base_cfg = {"filter": {"licenses": [], "min_side_px": 1, "min_subcaption_chars": 0, "min_alpha_tokens": 0,
                           "min_alpha_fraction": 0.0}}
    no_model = FilterSettings.from_config({"filter": {**base_cfg["filter"], "modality": {"enabled": False}}})
    with_model = FilterSettings.from_config({"filter": {**base_cfg["filter"], "modality": {"keep": [], "drop": []}}})
    load_modality_model(with_model.modality.checkpoint)  # load once outside the timing

    os.chdir(REPO)  # crop paths are relative to the workflow directory
    verdicts, cpu, wall = _timed(lambda: evaluate_rows(no_model, rows), repeats)
    out["rows[no-model]"] = {"rows_per_s_cpu": n / cpu, "rows_per_s_wall": n / wall,
                             "hashed": sum(v.phash is not None for v in verdicts)}
    verdicts, cpu, wall = _timed(lambda: evaluate_rows(with_model, rows), repeats)
    out["rows[model]"] = {"rows_per_s_cpu": n / cpu, "rows_per_s_wall": n / wall,
                          "classified": sum(v.modality is not None for v in verdicts)}
    figures_jsonl = REPO / "demo" / "corpus" / "figures.jsonl"
    if figures_jsonl.is_file():
        out["demo_modality"] = demo_modality(rows, verdicts, figures_jsonl)

    images = []
    for r in rows:
        try:
            images.append(load_image(r["crop_path"]))
        except ImageError:
            continue
    _, cpu, wall = _timed(lambda: [phash_hex(im) for im in images], repeats)
    sizes = np.array([im.width * im.height for im in images])
    out["phash"] = {"images": len(images), "per_s_cpu": len(images) / cpu, "per_s_wall": len(images) / wall,
                    "median_pixels": int(np.median(sizes))}
    compat = phash_vs_imagehash(phash_images(images, n_phash, seed=11), repeats)
    if compat is not None:
        out["phash_vs_imagehash"] = compat

    hashes = random_hashes(n_hashes, 0.05, seed=7)
    uids = [f"u{k:08d}" for k in range(n_hashes)]
    dups, cpu, wall = _timed(lambda: cluster_duplicates(uids, hashes, 6), repeats)
    out["dedup"] = {"hashes": n_hashes, "max_hamming": 6, "planted_fraction": 0.05, "duplicates_found": len(dups),
                    "seconds_cpu": cpu, "seconds_wall": wall}
    out["machine"] = {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(),
                      "threads": 1, "checkpoint": SHIPPED_CHECKPOINT.name}
    return out


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Filter stage benchmark",
        "",
        f"{res['rows']} enriched rows of the demo run ({res['source']}), one thread, best of the repeats; "
        "CPU and wall time (shared 2-core machine).",
        "",
        "| measurement | CPU | wall | note |",
        "|---|---:|---:|---|",
        f"| filter rows/s, no classifier | {res['rows[no-model]']['rows_per_s_cpu']:.0f} | "
        f"{res['rows[no-model]']['rows_per_s_wall']:.0f} | decode + checks + pHash |",
        f"| filter rows/s, with classifier | {res['rows[model]']['rows_per_s_cpu']:.0f} | "
        f"{res['rows[model]']['rows_per_s_wall']:.0f} | + shipped modality CNN, batch 64 |",
        f"| pHash/s (decoded crops) | {res['phash']['per_s_cpu']:.0f} | {res['phash']['per_s_wall']:.0f} | "
        f"median {res['phash']['median_pixels']} px per crop |",
        f"| dedup of {res['dedup']['hashes']:,} hashes (s) | {res['dedup']['seconds_cpu']:.2f} | "
        f"{res['dedup']['seconds_wall']:.2f} | d<=6, 5 % planted near-duplicates, "
        f"{res['dedup']['duplicates_found']} found |",
        "",
    ]
    pc = res.get("phash_vs_imagehash")
    if pc:
        lines += [
            f"pHash against imagehash {pc['imagehash_version']} on {pc['images']:,} images (decoded demo crops, "
            f"demo figures, seeded sub-crops of the figures; median {pc['median_pixels']:,} px, mean "
            f"{pc['mean_pixels']:,} px), same process, one thread (compare the CPU columns: wall time also "
            "counts whatever else the shared machine was running):",
            "",
            "| implementation | images/s CPU | images/s wall | µs/image CPU | hex identical to imagehash |",
            "|---|---:|---:|---:|---:|",
        ]
        for key, label, same in (
            ("pmcflow", "pmcflow `phash_hex`", pc["identical_to_imagehash"]),
            ("imagehash", "`str(imagehash.phash(im))`", pc["images"]),
            ("legacy_box", "pmcflow before (box resize, orthonormal DCT)", pc["legacy_identical_to_imagehash"]),
            ("grey_lanczos_resize_only", "grey + 32x32 LANCZOS resize alone", None),
        ):
            r = pc[key]
            agree = "-" if same is None else f"{same}/{pc['images']}"
            lines.append(f"| {label} | {r['per_s_cpu']:.0f} | {r['per_s_wall']:.0f} | {r['us_per_image_cpu']:.0f} | "
                         f"{agree} |")
        lines.append("")
    dm = res.get("demo_modality")
    if dm:
        lines += [
            "Shipped modality classifier on the demo crops (ground truth: the demo corpus's panel sources):",
            "",
            "| panels from | crops | accuracy | per class |",
            "|---|---:|---:|---|",
        ]
        for side in ("heldout_sources", "training_sources"):
            d = dm[side]
            per = ", ".join(f"{c} {v['accuracy']:.2f} ({v['n']})" for c, v in d["per_class"].items())
            acc = f"{d['accuracy']:.3f}" if d["accuracy"] is not None else "-"
            lines.append(f"| {side.replace('_', ' ')} | {d['n']} | {acc} | {per} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(REPO / "results" / "demo"))
    ap.add_argument("--hashes", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--phash-images", type=int, default=2500, help="images for the pHash-vs-imagehash timing")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args()
    res = bench(Path(args.results).resolve(), args.hashes, args.repeats, args.phash_images)
    out = Path(args.out)
    T.write_json(out / "filter.json", res)
    md = markdown(res)
    (out / "filter.md").write_text(md, encoding="utf-8")
    print(md)
    print(json.dumps(res["dedup"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
