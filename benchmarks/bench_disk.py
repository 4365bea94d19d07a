"""Disk a full PMC OA run takes, computed from bytes measured per item here (issue 10).

Measured (this machine, the project's own code):

* **JATS XML** per article: the real JATS files of the demo corpus (``demo/corpus/pmc-cloud``).
* **Figure images** and **crops**, in bytes per pixel: the 64 real published figures of
  ``demo/real-figures`` and ``demo/real-figures-test``, decomposed by ``pmcflow decompose`` (shipped
  detector) with ``decompose.crop_format`` ``png`` (the default) and ``source`` (JPEG crops of JPEG
  figures at ``jpeg_quality``). Bytes per pixel times BIOMEDICA's median figure area (334,400 px;
  the real sets' figures are larger, so their bytes per figure would overstate PMC's).
* **Shards**: per sample, the members other than the image (texts, JSON, tar headers and padding)
  read from the demo run's shards (``results/demo/shards``; run ``make demo`` first); the image
  member is the crop.
* **Tables** (Parquet) per subfigure: ``results/demo/{parse,decompose,enrich,filter}``.
* **Detector training renders** per figure: ``pmcflow render`` at the production config's
  ``synth.size`` (``--renders`` figures).

Scaled by the counts of all of PMC OA: 6,042,494 articles and ~24M figure images (BIOMEDICA, seed
002), ~32M subfigures before filtering and 18M pairs after (Open-PMC-18M, seed 000), 525k rendered
figures (the production config's ``synth`` counts). Model weights: parameters x 2 bytes (bf16) of the production
models.

Usage:  .venv/bin/python benchmarks/bench_disk.py [--renders 40]
Writes benchmarks/results/disk.json and benchmarks/results/disk.md, prints the Markdown.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image

from pmcflow.config import load_config

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "benchmarks" / "results"
DEMO = ROOT / "results" / "demo"

ARTICLES = 6_042_494  # BIOMEDICA: articles downloaded from PMC OA
FIGURES = 24_000_000  # BIOMEDICA: image-caption pairs (figure images)
SUBFIGURES = 32_000_000  # Open-PMC-18M: subfigures before filtering
PAIRS = 18_000_000  # Open-PMC-18M: pairs after filtering
MEDIAN_FIGURE_AREA = 334_400  # BIOMEDICA: median figure area in pixels
# the production config's renders: synth.size and synth.n_train + n_val + n_holdout
PRODUCTION_SYNTH = load_config([ROOT / "config" / "config.yaml"])["synth"]
RENDERED = sum(int(PRODUCTION_SYNTH[k]) for k in ("n_train", "n_val", "n_holdout"))
# production models (config/config.yaml), parameters in billions, stored in bf16
MODELS_BPARAMS = {
    "Qwen2.5-VL-32B-Instruct (subcaptions)": 33.5,
    "Qwen2.5-14B-Instruct (summaries)": 14.8,
    "ViT-B/16 + PubMedBERT (encoder init)": 0.2,
    "DAB-DETR R50-DC5 (detector init)": 0.045,
}
TB = 1e12


def _files(pattern: str) -> list[Path]:
    return [Path(p) for p in sorted(glob.glob(pattern, recursive=True)) if os.path.isfile(p)]


def _pixels(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        with Image.open(p) as im:
            total += im.size[0] * im.size[1]
    return total


PMCFLOW = str(Path(sys.executable).parent / "pmcflow")  # the CLI of this venv


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed:\n{proc.stderr[-3000:]}")


def _decompose(images: list[Path], crop_format: str, out: Path) -> list[Path]:
    _run([PMCFLOW, "decompose", "--out", str(out), "--crop-format", crop_format, *map(str, images)])
    return _files(str(out / "crops" / "**" / "*"))


def _shard_overhead() -> dict[str, float]:
    tars = _files(str(DEMO / "shards" / "*" / "*.tar"))
    if not tars:
        raise SystemExit(f"no shards under {DEMO / 'shards'}: run `make demo` first")
    image = other = samples = 0
    for t in tars:
        with tarfile.open(t) as tf:
            for m in tf.getmembers():
                size = 512 + ((m.size + 511) // 512) * 512
                if m.name.rsplit(".", 1)[-1] in ("png", "jpg", "jpeg", "webp"):
                    image += size
                    samples += 1
                else:
                    other += size
    return {
        "samples": samples,
        "image_bytes_per_sample": image / samples,
        "other_bytes_per_sample": other / samples,
    }


def _table_bytes_per_subfigure() -> dict[str, float]:
    counts = json.loads((DEMO / "decompose" / "counts.json").read_text())
    n = int(counts["extra"]["n_subfigures"])
    out = {}
    for stage in ("parse", "decompose", "enrich", "filter"):
        out[stage] = sum(p.stat().st_size for p in _files(str(DEMO / stage / "**" / "*.parquet"))) / n
    return out


def measure(renders: int) -> dict[str, Any]:
    xml = _files(str(ROOT / "demo" / "corpus" / "pmc-cloud" / "**" / "*.xml"))
    figures = _files(str(ROOT / "demo" / "real-figures" / "images" / "*")) + _files(
        str(ROOT / "demo" / "real-figures-test" / "images" / "*")
    )
    fig_pixels = _pixels(figures)
    fig_bytes = sum(p.stat().st_size for p in figures)
    crops: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("png", "source"):
            files = _decompose(figures, fmt, Path(tmp) / fmt)
            crops[fmt] = {
                "crops": len(files),
                "bytes": sum(p.stat().st_size for p in files),
                "bytes_per_figure_pixel": sum(p.stat().st_size for p in files) / fig_pixels,
            }
        size = str(PRODUCTION_SYNTH["size"])
        out = Path(tmp) / "render"
        _run([PMCFLOW, "render", "--n", str(renders), "--seed", "7", "--size", size, "--out", str(out)])
        rendered = [p for p in _files(str(out / "**" / "*")) if p.suffix in (".png", ".jpg")]
        render_bytes = sum(p.stat().st_size for p in rendered) / len(rendered)
    return {
        "xml": {"articles": len(xml), "bytes_per_article": sum(p.stat().st_size for p in xml) / len(xml)},
        "figures": {
            "images": len(figures),
            "bytes": fig_bytes,
            "pixels": fig_pixels,
            "bytes_per_pixel": fig_bytes / fig_pixels,
        },
        "crops": crops,
        "shards": _shard_overhead(),
        "tables_bytes_per_subfigure": _table_bytes_per_subfigure(),
        "render": {"figures": len(rendered), "size": size, "bytes_per_figure": render_bytes},
    }


def estimate(m: dict[str, Any]) -> dict[str, Any]:
    fig_bytes = m["figures"]["bytes_per_pixel"] * MEDIAN_FIGURE_AREA
    rows: dict[str, dict[str, float]] = {}
    rows["download: JATS XML"] = {"tb": ARTICLES * m["xml"]["bytes_per_article"] / TB}
    rows["download: figure images"] = {"tb": FIGURES * fig_bytes / TB}
    rows["detector renders"] = {"tb": RENDERED * m["render"]["bytes_per_figure"] / TB}
    for fmt in ("png", "source"):
        crop_per_figure = m["crops"][fmt]["bytes_per_figure_pixel"] * MEDIAN_FIGURE_AREA
        crop_bytes = FIGURES * crop_per_figure
        rows[f"crops ({fmt})"] = {"tb": crop_bytes / TB}
        # kept pairs carry their crop as the image member; the other members as measured
        shard = crop_bytes * PAIRS / SUBFIGURES + PAIRS * m["shards"]["other_bytes_per_sample"]
        rows[f"shards ({fmt} crops)"] = {"tb": shard / TB}
    rows["tables (Parquet)"] = {"tb": SUBFIGURES * sum(m["tables_bytes_per_subfigure"].values()) / TB}
    rows["model weights (bf16)"] = {"tb": sum(MODELS_BPARAMS.values()) * 1e9 * 2 / TB}
    common = [
        "download: JATS XML",
        "download: figure images",
        "detector renders",
        "tables (Parquet)",
        "model weights (bf16)",
    ]
    totals = {
        fmt: sum(rows[k]["tb"] for k in common)
        + rows[f"crops ({fmt})"]["tb"]
        + rows[f"shards ({fmt} crops)"]["tb"]
        for fmt in ("png", "source")
    }
    return {"rows": rows, "total_tb": totals}


def markdown(result: dict[str, Any]) -> str:
    m, e = result["measured"], result["estimate"]
    per = {
        "download: JATS XML": f"{m['xml']['bytes_per_article'] / 1e3:.0f} kB per article ({m['xml']['articles']} real JATS files) x {ARTICLES:,}",
        "download: figure images": f"{m['figures']['bytes_per_pixel']:.3f} B/px ({m['figures']['images']} real figures) x {MEDIAN_FIGURE_AREA:,} px x {FIGURES / 1e6:.0f}M",
        "detector renders": f"{m['render']['bytes_per_figure'] / 1e3:.0f} kB per figure (size {m['render']['size']}) x {RENDERED:,}",
        "crops (png)": f"{m['crops']['png']['bytes_per_figure_pixel']:.3f} B per figure px x {MEDIAN_FIGURE_AREA:,} px x {FIGURES / 1e6:.0f}M",
        "shards (png crops)": f"crops x {PAIRS / SUBFIGURES:.2f} kept + {m['shards']['other_bytes_per_sample'] / 1e3:.1f} kB other members x {PAIRS / 1e6:.0f}M",
        "crops (source)": f"{m['crops']['source']['bytes_per_figure_pixel']:.3f} B per figure px (JPEG crops) x same",
        "shards (source crops)": "as above with JPEG crops",
        "tables (Parquet)": f"{sum(m['tables_bytes_per_subfigure'].values()) / 1e3:.1f} kB per subfigure x {SUBFIGURES / 1e6:.0f}M",
        "model weights (bf16)": f"{sum(MODELS_BPARAMS.values()):.1f}B parameters x 2 B",
    }
    lines = [
        "## Disk for all of PMC OA (estimate from bytes measured here)",
        "",
        "| what | measured x count | TB |",
        "|---|---|---:|",
    ]
    for k, row in e["rows"].items():
        lines.append(f"| {k} | {per[k]} | {row['tb']:.2f} |")
    t = e["total_tb"]
    lines += [
        f"| **total, PNG crops (default)** | | **{t['png']:.1f}** |",
        f"| **total, JPEG crops (`decompose.crop_format: source`)** | | **{t['source']:.1f}** |",
        "",
        "Scratch that a run can delete once the shards are written: the crops (the shards hold the kept "
        "ones) and the renders. Not counted: the Hugging Face cache of baselines, encoder checkpoints "
        "(open_clip keeps one per saved epoch), Snakemake logs.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--renders", type=int, default=40, help="figures to render for the bytes per render")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("YOLO_OFFLINE", "1")
    measured = measure(args.renders)
    result = {"benchmark": "disk", "measured": measured, "estimate": estimate(measured)}
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "disk.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    md = markdown(result)
    (OUT_DIR / "disk.md").write_text(md, encoding="utf-8")
    sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
