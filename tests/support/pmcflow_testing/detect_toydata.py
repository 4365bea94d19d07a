"""Tiny synthetic compound-figure datasets with exact boxes, for tests and benchmarks.

Not the production renderer (that is ``pmcflow render`` in :mod:`pmcflow.synth`): this draws grids
of rectangles / noise / line-plot panels on a plain background with gutters, and writes the same
dataset layout (``images/*.png``, COCO ``annotations.json``, YOLO ``labels/*.txt``) so every
detector backend can be exercised without the renderer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from pmcflow.tables import write_json


def _panel(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    kind = int(rng.integers(0, 3))
    if kind == 0:  # noise texture (microscopy-like)
        base = rng.integers(20, 200, size=3)
        arr = (base[None, None, :] + rng.normal(0, 30, size=(h, w, 3))).clip(0, 255).astype(np.uint8)
        return Image.fromarray(arr, "RGB")
    if kind == 1:  # dark frame with bright blobs (radiology-like)
        img = Image.new("RGB", (w, h), (10, 10, 10))
        d = ImageDraw.Draw(img)
        for _ in range(4):
            cx, cy = rng.integers(0, w), rng.integers(0, h)
            r = int(rng.integers(3, max(4, min(w, h) // 3)))
            g = int(rng.integers(80, 255))
            d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=(g, g, g))
        return img
    # bordered plot with a polyline
    img = Image.new("RGB", (w, h), (245, 245, 250))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, w - 1, h - 1], outline=(0, 0, 0), width=2)
    xs = np.linspace(4, w - 4, 12)
    ys = rng.uniform(4, h - 4, size=12)
    d.line(
        list(zip(xs.tolist(), ys.tolist(), strict=True)),
        fill=tuple(int(v) for v in rng.integers(0, 200, 3)),
        width=2,
    )
    return img


def make_figure(
    rng: np.random.Generator,
    size: tuple[int, int] = (256, 256),
    background: tuple[int, int, int] = (255, 255, 255),
) -> tuple[Image.Image, list[list[float]]]:
    """One grid figure (1-3 rows x 1-3 columns) and its xywh panel boxes."""
    width, height = size
    rows, cols = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    margin, gap = int(rng.integers(2, 10)), int(rng.integers(6, 16))
    pw = (width - 2 * margin - (cols - 1) * gap) // cols
    ph = (height - 2 * margin - (rows - 1) * gap) // rows
    img = Image.new("RGB", (width, height), background)
    boxes = []
    for r in range(rows):
        for c in range(cols):
            x, y = margin + c * (pw + gap), margin + r * (ph + gap)
            img.paste(_panel(rng, pw, ph), (x, y))
            boxes.append([float(x), float(y), float(pw), float(ph)])
    return img, boxes


def coco_annotation(ann_id: int, image_id: int, box: list[float]) -> dict[str, Any]:
    """One COCO subfigure annotation (category 1) for an ``[x, y, w, h]`` box."""
    return {
        "id": ann_id,
        "image_id": image_id,
        "bbox": box,
        "area": box[2] * box[3],
        "iscrowd": 0,
        "category_id": 1,
    }


def make_dataset(
    out: str | os.PathLike[str],
    n: int,
    seed: int = 0,
    size: tuple[int, int] = (256, 256),
    background: tuple[int, int, int] = (255, 255, 255),
) -> Path:
    """Write ``n`` figures in the pmcflow dataset layout under ``out``; returns ``out``."""
    root = Path(out)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    images: list[dict[str, Any]] = []
    anns: list[dict[str, Any]] = []
    for i in range(n):
        img, boxes = make_figure(rng, size, background)
        name = f"fig{i:05d}"
        img.save(root / "images" / f"{name}.png")
        images.append({"id": i + 1, "file_name": f"{name}.png", "width": img.width, "height": img.height})
        lines = []
        for b in boxes:
            anns.append(coco_annotation(len(anns) + 1, i + 1, b))
            cx, cy = (b[0] + b[2] / 2) / img.width, (b[1] + b[3] / 2) / img.height
            lines.append(f"0 {cx:.6f} {cy:.6f} {b[2] / img.width:.6f} {b[3] / img.height:.6f}")
        (root / "labels" / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_json(
        root / "annotations.json",
        {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "subfigure"}]},
    )
    return root
