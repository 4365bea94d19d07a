"""Embedding analysis between evaluated models: t-SNE maps and MMD tests on the same images.

Seed 000 (section 3.6, appendix C.1) embeds one benchmark's images with two vision encoders and
compares the two embedding distributions: a t-SNE plot of each and an MMD permutation test.  This
module does that for every benchmark that every given model embedded (``embeddings.npz`` of
:func:`pmcflow.encoders.evaluate.evaluate_encoder`: the test image features, in the benchmark's
order) and every pair of models (trained runs and baselines):

* the same seeded subset of at most ``max_images`` images for every model;
* one t-SNE map per model (each in its own space: models may differ in width), drawn side by side,
  coloured by the benchmark's labels where it has them;
* per pair, MMD^2 with the median-heuristic RBF kernel and ``permutations`` reassignments
  (:func:`pmcflow.encoders.embedding.mmd_permutation_test`); a pair whose embeddings differ in
  width cannot be pooled and gets a row with the reason instead of numbers.

Outputs (the rule's, by name): ``mmd`` (``mmd.parquet``), ``tsne`` (``tsne.parquet``, the points),
``plots`` (``tsne/<benchmark>.png``) and ``summary`` (``embeddings.json``: models, benchmarks,
settings).  Byte-reproducible for the same inputs.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pmcflow.encoders.embedding import mmd_permutation_test, plot_tsne, tsne_2d
from pmcflow.encoders.settings import EmbeddingSettings
from pmcflow.seeding import derive_seed, seeded_subset
from pmcflow.tables import Outputs, stage_outputs, write_json, write_table

STAGE = "compare_embeddings"
MMD_SCHEMA = pa.schema(
    [
        pa.field("benchmark", pa.string()),
        pa.field("model_a", pa.string()),
        pa.field("model_b", pa.string()),
        pa.field("n", pa.int64()),
        pa.field("mmd2", pa.float64()),
        pa.field("p_value", pa.float64()),
        pa.field("null_low", pa.float64()),
        pa.field("null_high", pa.float64()),
        pa.field("permutations", pa.int64()),
        pa.field("bandwidth", pa.float64()),
        pa.field("skipped", pa.string()),  # why there are no numbers (null when there are)
    ]
)
TSNE_SCHEMA = pa.schema(
    [
        pa.field("benchmark", pa.string()),
        pa.field("model", pa.string()),
        pa.field("index", pa.int64()),  # position in the benchmark's test images
        pa.field("label", pa.string()),
        pa.field("x", pa.float64()),
        pa.field("y", pa.float64()),
    ]
)


class CompareError(ValueError):
    pass


def read_embeddings(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """``(features by benchmark, labels by benchmark)`` from an ``embeddings.npz``."""
    feats: dict[str, np.ndarray] = {}
    labels: dict[str, list[str]] = {}
    with np.load(path, allow_pickle=False) as z:
        for name in z.files:
            if name.endswith(":labels"):
                labels[name[: -len(":labels")]] = [str(v) for v in z[name].tolist()]
            else:
                feats[name] = np.asarray(z[name], dtype=np.float32)
    return feats, labels


def subset(n: int, max_images: int, seed: int, benchmark: str) -> np.ndarray:
    """Indices of a seeded subset of ``min(n, max_images)`` of ``range(n)``, in increasing order."""
    items = [f"{benchmark}\x1f{i}" for i in range(n)]
    return np.asarray(seeded_subset(seed, "compare_embeddings", items, max_images), dtype=np.int64)


def _png_name(benchmark: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", benchmark) + ".png"


def compare_models(
    models: Mapping[str, str | os.PathLike[str]],
    settings: EmbeddingSettings | Mapping[str, Any] | None,
    seed: int,
    outputs: Outputs,
    *,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Compare the models' ``embeddings.npz`` (``{model name: path}``, in display order) into the
    ``compare_embeddings`` rule's outputs ``mmd``, ``tsne``, ``summary`` and ``plots`` (a folder) --
    the rule's named outputs, or a folder (:func:`pmcflow.tables.stage_outputs`).

    ``settings``: ``evaluate.embedding`` (:class:`~pmcflow.encoders.settings.EmbeddingSettings`, or
    that section as a mapping, filled from the schema).
    """
    if len(models) < 2:
        raise CompareError(f"an embedding comparison needs two or more models, got {list(models)}")
    say = log or (lambda _msg: None)
    emb = EmbeddingSettings.from_section(settings)
    max_images, n_perm, perplexity = emb.max_images, emb.permutations, float(emb.perplexity)
    out = stage_outputs("compare_embeddings", outputs)
    out["plots"].mkdir(parents=True, exist_ok=True)
    loaded = {name: read_embeddings(path) for name, path in models.items()}
    names = list(models)
    common = sorted(set.intersection(*(set(f) for f, _ in loaded.values())))
    mmd_rows: list[dict[str, Any]] = []
    tsne_rows: list[dict[str, Any]] = []
    benches: dict[str, Any] = {}
    for bench in common:
        sizes = {m: len(loaded[m][0][bench]) for m in names}
        if len(set(sizes.values())) != 1:
            benches[bench] = {"skipped": f"the models embedded different numbers of images: {sizes}"}
            continue
        n = next(iter(sizes.values()))
        if n < 3:
            benches[bench] = {"skipped": f"{n} images (need >= 3)"}
            continue
        idx = subset(n, max_images, seed, bench)
        labels = next((loaded[m][1][bench] for m in names if bench in loaded[m][1]), None)
        lab = [labels[i] for i in idx] if labels is not None else None
        feats = {m: loaded[m][0][bench][idx] for m in names}
        points = {}
        for m in names:
            points[m] = tsne_2d(feats[m], seed, perplexity)
            tsne_rows += [
                {"benchmark": bench, "model": m, "index": int(i), "label": None if lab is None else lab[j],
                 "x": float(p[0]), "y": float(p[1])}
                for j, (i, p) in enumerate(zip(idx, points[m], strict=True))
            ]  # fmt: skip
        png_path = out["plots"] / _png_name(bench)
        png = Path(os.path.relpath(png_path, out["summary"].parent)).as_posix()  # as the summary reads it
        plot_tsne(
            points,
            lab,
            png_path,
            title=f"t-SNE of the test image embeddings: {bench} ({len(idx)} images)",
            point_size=max(4.0, min(30.0, 2000.0 / len(idx))),  # few points: larger dots
        )
        for a, b in itertools.combinations(names, 2):
            row: dict[str, Any] = {"benchmark": bench, "model_a": a, "model_b": b, "n": len(idx),
                                   "permutations": n_perm}  # fmt: skip
            da, db = feats[a].shape[1], feats[b].shape[1]
            if da != db:
                row["skipped"] = (
                    f"embedding widths differ ({a}: {da}, {b}: {db}): the samples cannot be pooled"
                )
            else:
                r = mmd_permutation_test(
                    feats[a], feats[b], n_perm, derive_seed(seed, "mmd", f"{bench}\x1f{a}\x1f{b}") % 2**32
                )
                row |= {"mmd2": r.mmd, "p_value": r.p_value, "null_low": r.null_low, "null_high": r.null_high,
                        "bandwidth": r.bandwidth}  # fmt: skip
            mmd_rows.append(row)
        benches[bench] = {
            "n_images": int(n),
            "n_used": len(idx),
            "labelled": lab is not None,
            "tsne_png": png,
        }
        say(f"{STAGE}: {bench}: {len(idx)} of {n} images, {len(names)} models")
    for bench in sorted({b for f, _ in loaded.values() for b in f} - set(common)):
        have = [m for m in names if bench in loaded[m][0]]
        benches[bench] = {"skipped": f"embedded by {have} only, not by every model"}
    write_table(mmd_rows, MMD_SCHEMA, out["mmd"])
    write_table(tsne_rows, TSNE_SCHEMA, out["tsne"])
    summary = {
        "stage": STAGE,
        "seed": int(seed),
        "models": names,
        "settings": {"max_images": max_images, "permutations": n_perm, "perplexity": perplexity},
        "benchmarks": benches,
    }
    write_json(out["summary"], summary)
    return summary
