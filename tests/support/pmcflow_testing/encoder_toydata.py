"""A tiny, real-image DATASET table for tests, benchmarks and the CPU demo of shard -> train -> evaluate.

Images are crops of real single-panel images that ship with scikit-image (``cell``: phase-contrast
microscopy; ``immunohistochemistry``: IHC-stained tissue; ``retina``: a fundus photograph;
``microaneurysms``: a retinal angiography detail) and small matplotlib charts drawn from seeded
random data.  Each class has its own text vocabulary, so a tiny CLIP model can learn something
in one epoch.  Crops are written as PNG or JPEG (alternating) to exercise both tar extensions.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from pmcflow import schema as S
from pmcflow.tables import write_table

CLASSES = ("microscopy", "retinal fundus", "chart")

_MICRO_SUB = [
    "Phase-contrast micrograph of cultured cells",
    "Immunohistochemistry staining of tissue section",
    "Microscopy of stained nuclei in tissue",
    "Light micrograph showing cell morphology",
]
_MICRO_SUM = [
    "The cells show clear nuclei under the microscope.",
    "Staining highlights tissue architecture at high magnification.",
    "Histology reveals cellular detail in the specimen.",
]
_RETINA_SUB = [
    "Colour fundus photograph of the retina",
    "Retinal image showing the optic disc and vessels",
    "Fundus photography of the posterior pole",
    "Retinal angiography detail with microaneurysms",
]
_RETINA_SUM = [
    "The retina was imaged to assess retinopathy.",
    "Ophthalmic examination of retinal vessels and the macula.",
    "Fundus findings are consistent with diabetic retinopathy.",
]
_CHART_SUB = [
    "Line chart of measured values over time",
    "Bar chart comparing groups",
    "Scatter plot of two variables",
    "Plot of the quantitative results",
]
_CHART_SUM = [
    "The graph shows the statistical comparison between conditions.",
    "Quantification is plotted with error bars for each group.",
    "The chart summarises the experimental measurements.",
]


def _sources() -> dict[str, list[np.ndarray]]:
    import skimage.data

    cell = skimage.data.cell()
    ihc = skimage.data.immunohistochemistry()
    retina = skimage.data.retina()
    micro = skimage.data.microaneurysms()
    grey3 = lambda a: np.stack([a] * 3, axis=-1)  # noqa: E731
    return {"microscopy": [grey3(cell), ihc], "retinal fundus": [retina, grey3(micro)]}


def _crop(rng: np.random.Generator, img: np.ndarray, size: int) -> Image.Image:
    h, w = img.shape[:2]
    side = int(min(h, w) * rng.uniform(0.35, 0.9))
    y = int(rng.integers(0, h - side + 1))
    x = int(rng.integers(0, w - side + 1))
    aspect = rng.uniform(0.75, 1.33)
    out_w, out_h = size, max(16, int(size * aspect))
    return Image.fromarray(img[y : y + side, x : x + side]).resize((out_w, out_h), Image.Resampling.BILINEAR)


def _chart(rng: np.random.Generator, size: int) -> Image.Image:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(size / 50, size / 50), dpi=50)
    kind = int(rng.integers(0, 3))
    x = np.arange(8)
    y = rng.normal(size=8).cumsum()
    if kind == 0:
        ax.plot(x, y, color="C0")
    elif kind == 1:
        ax.bar(x, np.abs(y) + 0.2, color="C1")
    else:
        ax.scatter(rng.normal(size=20), rng.normal(size=20), s=6, color="C2")
    ax.tick_params(labelsize=5)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    buf.seek(0)
    return Image.open(buf).convert("RGB")


def make_toy_dataset(
    out_dir: str | os.PathLike[str],
    n_per_class: int = 14,
    seed: int = 0,
    size: int = 64,
    subfigures_per_article: int = 2,
) -> Path:
    """Write crops under ``out_dir/crops`` and ``out_dir/dataset.parquet`` (DATASET schema).

    ``crop_path`` values are relative to ``out_dir``.  Returns the Parquet path.
    """
    out = Path(out_dir)
    (out / "crops").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    sources = _sources()
    texts = {
        "microscopy": (_MICRO_SUB, _MICRO_SUM),
        "retinal fundus": (_RETINA_SUB, _RETINA_SUM),
        "chart": (_CHART_SUB, _CHART_SUM),
    }
    rows: list[dict[str, Any]] = []
    n = 0
    for cls in CLASSES:
        for j in range(n_per_class):
            if cls == "chart":
                img = _chart(rng, size)
            else:
                srcs = sources[cls]
                img = _crop(rng, srcs[j % len(srcs)], size)
            art = 1000000 + n // subfigures_per_article
            pmcid = f"PMC{art}"
            article_uid = f"{pmcid}.1"
            figure_uid = f"{article_uid}/F{(n // subfigures_per_article) % 3 + 1}"
            sub_index = n % subfigures_per_article
            uid = f"{figure_uid}/s{sub_index}"
            fmt = "png" if n % 2 == 0 else "jpg"
            rel = f"crops/{pmcid}_{n:04d}.{fmt}"
            if fmt == "png":
                img.save(out / rel, format="PNG")
            else:
                img.convert("RGB").save(out / rel, format="JPEG", quality=92)
            subs, sums = texts[cls]
            sub = f"({chr(97 + sub_index)}) {subs[int(rng.integers(len(subs)))]}."
            summ = sums[int(rng.integers(len(sums)))]
            rows.append(
                {
                    "subfigure_uid": uid,
                    "figure_uid": figure_uid,
                    "article_uid": article_uid,
                    "pmcid": pmcid,
                    "version": 1,
                    "chunk": "c0100",
                    "graphic_index": 0,
                    "subfigure_index": sub_index,
                    "image_path": rel,
                    "crop_path": rel,
                    "crop_format": fmt,
                    "crop_width": img.width,
                    "crop_height": img.height,
                    "bbox": [0.0, 0.0, float(img.width), float(img.height)],
                    "score": 0.9,
                    "is_single_panel": False,
                    "panel_label": chr(97 + sub_index),
                    "license_code": "CC BY" if n % 3 else "CC0",
                    "caption": f"Figure. {sub} {subs[0]}.",
                    "subcaption": sub,
                    "subcaption_source": "rules",
                    "summary": summ,
                    "summary_source": "extractive",
                    "modality": cls,
                    "modality_score": 0.99,
                    "modality_backend": "timm:mobilenetv3_small_050@modality.pt#a8414f1f780b",
                }
            )
            n += 1
    path = out / "dataset.parquet"
    write_table(rows, S.DATASET, path)
    return path
