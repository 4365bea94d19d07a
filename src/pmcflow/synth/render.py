"""Render synthetic compound figures with COCO and YOLO annotations (detector training data).

Figure ``i`` of a run is a pure function of ``(seed, i)`` and the source set: its random stream
is :func:`pmcflow.seeding.rng_for` ``(seed, "synth", i)``, so a 500k render can be a job
array (shard ``k`` of ``K`` renders ``i = k, k+K, k+2K, ...``) and :func:`merge_shards`
combines the shard COCO files into the same annotations a single run would write.

Output of one run (or shard) in ``out_dir``::

    images/synth_<i:08d>.png      RGB PNG, fixed options, no metadata
    images/synth_<i:08d>.jpg      ... or RGB JPEG (baseline, quality and subsampling per figure)
    labels/synth_<i:08d>.txt      YOLO: "0 cx cy w h" (normalised), one line per panel
    annotations.json              COCO; panel labels under "label_annotations"
    records.jsonl                 every parameter used per figure (the sampled FigureSpec)
    counts.json                   tables.counts_record("render", ...)
    rejections.parquet            source images rejected (schema.REJECTIONS), with reasons
    sources.json                  the source pool (id and origin of every image, by modality)

With a ``datasets`` sources file (:func:`pmcflow.synth.sources.parse_sources`) each split draws
from its own datasets (``split=``); every COCO annotation then names its ``dataset`` and
``license`` (an id into the COCO ``licenses`` list), ``datasets`` lists each dataset's modality,
licence and URL, ``info.split`` and ``sources.json`` name the split.  Builtin pools and old-format
``{modality: [paths]}`` files add none of these keys, so their outputs are unchanged.

Realistic elements (:mod:`pmcflow.synth.elements`, config ``synth.elements``, ``elements=``): a
share of figures is written as JPEG (``file_name`` ``images/synth_<i>.jpg``; each figure's
format and quality come from its own random stream, so a figure has the same bytes in any shard),
the rest as PNG; ``info.elements`` records the settings, so shards rendered with different
settings do not merge.  Every consumer reads the image named by ``file_name``, never assumes
``.png``.

Canvases (:mod:`pmcflow.synth.canvas`, config ``synth.canvas``, ``canvas=``): by default each
figure's canvas grows with its panel grid around ``size`` (drawn from the figure's own stream), so
images differ in size: COCO ``images`` carry each figure's ``width``/``height``, YOLO labels are
normalised by them, ``records.jsonl`` holds the drawn canvas (``spec.canvas``); ``info.size`` is
the base and ``info.canvas`` the settings (shards merge when the settings match, whatever their
figures' sizes).  ``mode: fixed`` draws every figure on ``size`` as before this setting.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import io
import json
import os
import struct
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from pmcflow import __version__
from pmcflow import tables as T
from pmcflow.config import parse_sets, subsection
from pmcflow.progress import progress
from pmcflow.seeding import rng_for
from pmcflow.synth.canvas import CanvasParams
from pmcflow.synth.compose import FigureParams, compose, sample_figure
from pmcflow.synth.elements import RATE_KEYS, ElementParams
from pmcflow.synth.sources import (
    SPLITS,
    NoUsableSource,
    SourcePool,
    SourcesSpec,
    builtin_pool,
    load_sources_file,
    parse_sources,
    pool_for_split,
)

STAGE = "render"
ANN_ID_STRIDE = 100  # annotation id = (figure index + 1) * 100 + panel number: unique across shards
CATEGORIES = [{"id": 1, "name": "subfigure", "supercategory": "figure"}]


def figure_name(i: int) -> str:
    return f"synth_{i:08d}"


def figure_indices(n: int, shard: int | None = None, num_shards: int = 1, start: int = 0) -> range:
    """The figure indices of ``shard`` (round-robin: ``i % num_shards == shard``)."""
    if num_shards < 1:
        raise ValueError("num_shards must be >= 1")
    if shard is None:
        if num_shards != 1:
            raise ValueError("give shard with num_shards")
        return range(start, start + n)
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard {shard} not in [0, {num_shards})")
    first = start + ((shard - start) % num_shards)
    return range(first, start + n, num_shards)


def parse_size(size: int | str | Sequence[int]) -> tuple[int, int]:
    """512 -> (512, 512); "410x400" -> (410, 400)."""
    if isinstance(size, int):
        return size, size
    if isinstance(size, str):
        if "x" in size:
            w, h = size.lower().split("x", 1)
            return int(w), int(h)
        return int(size), int(size)
    w, h = size
    return int(w), int(h)


def source_side(width: int, height: int, canvas: CanvasParams | None) -> int:
    """The long side sources are cached at: the base canvas's long side, or for grown canvases the
    longest side one can have, capped at twice the base (a panel is a fraction of its canvas: over
    2,000 figures at base 512 the largest panel side was 911 px, the 99.9th percentile 806), so the
    source cache (512 entries) stays within ``render_shard``'s memory."""
    base = max(width, height)
    return min(canvas.largest_side(width, height), 2 * base) if canvas is not None else base


Sources = SourcePool | SourcesSpec | Mapping[str, Any] | None


def make_pool(sources: Sources, max_side: int, split: str | None = None) -> SourcePool:
    """The pool figures of ``split`` draw from.

    ``sources``: a ready pool (used as is), a parsed sources file, a sources mapping in either
    format (:func:`pmcflow.synth.sources.parse_sources`; relative paths stay relative to the working
    directory), or None / empty for the builtin pool.
    """
    if isinstance(sources, SourcePool):
        return sources
    spec = sources if isinstance(sources, SourcesSpec) else parse_sources(sources) if sources else None
    if spec is not None and spec.datasets:
        return pool_for_split(spec, split, max_side=max_side)
    return builtin_pool(max_side=max_side)


def provenance(pool: SourcePool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """COCO ``licenses`` and ``datasets`` lists of a ``datasets`` pool, and dataset -> licence id.

    Licence ids number the distinct licence texts in sorted order, so every shard of a split gets
    the same ids.  All three are empty for builtin and old-format pools.
    """
    if not pool.datasets:
        return [], [], {}
    texts = sorted({ds.licence or "" for ds in pool.datasets.values()})
    ids = {text: k + 1 for k, text in enumerate(texts)}
    licenses = [{"id": ids[text], "name": text} for text in texts]
    datasets = [
        {
            "name": ds.name,
            "modality": ds.modality,
            "licence": ds.licence,
            "license": ids[ds.licence or ""],
            "url": ds.url,
            "splits": list(ds.splits),
        }
        for ds in sorted(pool.datasets.values(), key=lambda d: d.name)
    ]
    return licenses, datasets, {ds.name: ids[ds.licence or ""] for ds in pool.datasets.values()}


def render_one(
    i: int, seed: int, pool: SourcePool, width: int, height: int, params: FigureParams
) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """Render figure ``i``: (image, annotations, record).  The record's ``elements.encoding``
    (present with ``params.elements``) says how to write the image (:func:`encode_figure`).
    With a growing ``params.canvas``, ``width x height`` is the base and the image has its own
    size (``record["width"]``, ``record["height"]``; ``record["canvas"]`` says what was drawn)."""
    spec, panels = sample_figure(rng_for(seed, "synth", i), pool, width, height, params=params)
    im, anns = compose(spec, panels)
    return im, anns, spec.to_record()


IMAGE_EXTENSIONS = {"png": ".png", "jpeg": ".jpg"}


def jpeg_bytes(im: Image.Image, quality: int, subsampling: str = "4:2:0") -> bytes:
    """Encode an RGB image as a baseline JPEG: fixed quality and chroma subsampling, no EXIF/ICC,
    no optimised tables (output depends only on the pixels, the options and the libjpeg build)."""
    if im.mode != "RGB":
        im = im.convert("RGB")
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=int(quality), subsampling=subsampling, optimize=False, progressive=False)
    return buf.getvalue()


def encode_figure(
    im: Image.Image, encoding: Mapping[str, Any] | None, compress_level: int = 1
) -> tuple[bytes, str]:
    """``(bytes, extension)`` of a figure: PNG (:func:`png_bytes`) or JPEG (:func:`jpeg_bytes`)."""
    enc = encoding or {"format": "png"}
    if enc["format"] == "jpeg":
        return jpeg_bytes(im, int(enc["quality"]), str(enc.get("subsampling", "4:2:0"))), IMAGE_EXTENSIONS[
            "jpeg"
        ]
    if enc["format"] != "png":
        raise ValueError(f"unknown image format {enc['format']!r}")
    return png_bytes(im, compress_level), IMAGE_EXTENSIONS["png"]


def element_params(elements: ElementParams | Mapping[str, Any] | None) -> ElementParams:
    """``synth.elements`` settings: as given, or a (partial) mapping with the schema's defaults."""
    return elements if isinstance(elements, ElementParams) else ElementParams.from_config(elements)


def canvas_params(canvas: CanvasParams | Mapping[str, Any] | None) -> CanvasParams:
    """``synth.canvas`` settings: as given, or a (partial) mapping with the schema's defaults."""
    return canvas if isinstance(canvas, CanvasParams) else CanvasParams.from_config(canvas)


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)


def png_bytes(im: Image.Image, level: int = 1) -> bytes:
    """Encode an RGB image as PNG: "Up" filter on every row but the first, zlib RLE strategy.

    About 2x faster than Pillow's adaptive-filter encoder at a similar size, and byte-stable:
    no timestamps, no text chunks, fixed filter and zlib settings (output depends only on the
    pixels and the zlib build).
    """
    if im.mode != "RGB":
        im = im.convert("RGB")
    a = np.asarray(im)
    h, w, _ = a.shape
    rows = a.reshape(h, w * 3)
    raw = np.empty((h, w * 3 + 1), dtype=np.uint8)
    raw[:, 0] = 2  # filter type Up
    raw[0, 0] = 0  # first row: None
    raw[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=raw[1:, 1:])  # uint8 wrap-around = PNG's mod-256
    comp = zlib.compressobj(level, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    idat = comp.compress(memoryview(raw).cast("B")) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", idat)
        + _png_chunk(b"IEND", b"")
    )


def _yolo_lines(anns: Iterable[Mapping[str, Any]], width: int, height: int) -> str:
    lines = []
    for a in anns:
        x, y, w, h = a["bbox"]
        lines.append(
            f"0 {(x + w / 2) / width:.6f} {(y + h / 2) / height:.6f} {w / width:.6f} {h / height:.6f}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def _write_compact_json(path: Path, obj: Any) -> None:
    """Sorted keys, no indentation (the C encoder: a 500k-figure COCO file stays fast to write)."""
    _write_bytes(
        path, (json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
    )


def _write_bytes(path: Path, data: bytes) -> None:
    with T.atomic_path(path) as tmp:
        tmp.write_bytes(data)


def _render_into(
    i: int,
    seed: int,
    pool: SourcePool,
    width: int,
    height: int,
    params: FigureParams,
    out: Path,
    compress_level: int,
    rec_fh: Any,
    images: list[dict[str, Any]],
    annotations: list[dict[str, Any]],
    label_annotations: list[dict[str, Any]],
    failed: Counter[str],
    failures: list[dict[str, Any]],
    license_of: Mapping[str, int],
) -> None:
    """Render figure ``i`` and append its files, COCO rows and record.

    ``license_of`` (dataset name -> COCO licence id) is empty unless the pool names datasets; then
    each annotation also carries its ``dataset`` and ``license``.
    """
    name = figure_name(i)
    try:
        im, anns, rec = render_one(i, seed, pool, width, height, params)
    except NoUsableSource as e:
        failed["no_usable_source"] += 1
        failures.append({"index": i, "reason": "no_usable_source", "detail": str(e)})
        return
    # per-figure files are written in place (one open each; atomic renames cost more than the
    # encoding at this rate); annotations.json and counts.json, written atomically last, mark
    # a complete run, and a rerun rewrites every file identically.
    data, ext = encode_figure(im, (rec.get("elements") or {}).get("encoding"), compress_level)
    (out / "images" / f"{name}{ext}").write_bytes(data)
    for other in IMAGE_EXTENSIONS.values():  # a rerun with other settings leaves no stale twin
        if other != ext:
            (out / "images" / f"{name}{other}").unlink(missing_ok=True)
    fig_w, fig_h = im.size  # the figure's own canvas (grown per figure, or the fixed size)
    (out / "labels" / f"{name}.txt").write_bytes(_yolo_lines(anns, fig_w, fig_h).encode())
    image_id = i + 1
    images.append({"id": image_id, "file_name": f"images/{name}{ext}", "width": fig_w, "height": fig_h})
    for k, a in enumerate(anns):
        ann_id = image_id * ANN_ID_STRIDE + k
        x, y, w, h = a["bbox"]
        row: dict[str, Any] = {
            "id": ann_id,
            "image_id": image_id,
            "category_id": 1,
            "bbox": [x, y, w, h],
            "area": w * h,
            "iscrowd": 0,
            "label": a["label"],
            "modality": a["modality"],
        }
        if license_of:
            ds = pool.dataset_of(a["source_id"])
            if ds is None:  # a datasets pool only holds ids of its own datasets
                raise RuntimeError(f"source {a['source_id']!r} belongs to no dataset of the pool")
            row["dataset"] = ds.name
            row["license"] = license_of[ds.name]
        annotations.append(row)
        if a["label_bbox"] is not None:
            lx, ly, lw, lh = a["label_bbox"]
            label_annotations.append(
                {
                    "id": ann_id,
                    "image_id": image_id,
                    "panel_id": ann_id,
                    "text": a["label"],
                    "bbox": [lx, ly, lw, lh],
                    "area": lw * lh,
                }
            )
    rec_fh.write(
        json.dumps(
            {"index": i, "name": name, "seed": seed, "spec": rec}, sort_keys=True, separators=(",", ":")
        )
        + "\n"
    )


def render(
    n: int,
    seed: int,
    out_dir: str | os.PathLike[str],
    *,
    size: int | str | Sequence[int] = 512,
    shard: int | None = None,
    num_shards: int = 1,
    start: int = 0,
    sources: Sources = None,
    params: FigureParams | None = None,
    compress_level: int = 1,
    validate_sources: bool = False,
    split: str | None = None,
    elements: ElementParams | Mapping[str, Any] | None = None,
    canvas: CanvasParams | Mapping[str, Any] | None = None,
    modality_weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Render figures ``start .. start+n-1`` (or one shard of them) into ``out_dir``.

    Returns the counts record (also written to ``counts.json``).  ``validate_sources`` decodes
    every source up front so all bad sources are listed even if no figure drew them (cheap for
    the builtin pool, slow for a large production pool).  ``split`` (train, val, holdout) picks
    the datasets of a ``datasets`` sources file; builtin and old-format sources ignore it.
    ``elements``: the ``synth.elements`` settings (a partial mapping is completed with the
    schema's defaults; None = the defaults; :meth:`ElementParams.off` = none); they replace
    ``params.elements``.  ``canvas``: the ``synth.canvas`` settings, likewise (None = the defaults,
    canvases that grow with their panels around ``size``; :meth:`CanvasParams.fixed` = every
    figure ``size``); they replace ``params.canvas``.  ``modality_weights``: the
    ``synth.modality_weights`` (None or empty = every figure modality equally likely).
    """
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (use {', '.join(SPLITS)})")
    width, height = parse_size(size)
    params = replace(
        params or FigureParams(), elements=element_params(elements), canvas=canvas_params(canvas)
    )
    if modality_weights:
        params = replace(params, modality_weights=tuple(sorted((str(m), float(w)) for m, w in modality_weights.items())))
    # sources are cached at the longest side a canvas can have (a bad sources file fails before any output)
    pool = make_pool(sources, max_side=source_side(width, height, params.canvas), split=split)
    licenses, datasets, license_of = provenance(pool)
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "labels").mkdir(parents=True, exist_ok=True)
    if validate_sources:
        pool.validate_all()
    indices = figure_indices(n, shard, num_shards, start)

    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    label_annotations: list[dict[str, Any]] = []
    failed: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with T.atomic_open(out / "records.jsonl", "w", encoding="utf-8") as rec_fh:  # streamed: bounded memory
        desc = "render" if shard is None else f"render shard-{shard:04d}"
        for i in progress(indices, desc=desc, unit="figure"):
            _render_into(
                i,
                seed,
                pool,
                width,
                height,
                params,
                out,
                compress_level,
                rec_fh,
                images,
                annotations,
                label_annotations,
                failed,
                failures,
                license_of,
            )
    panels = len(annotations)
    elapsed = time.perf_counter() - t0

    coco: dict[str, Any] = {
        "info": {
            "description": "pmcflow synthetic compound figures",
            "version": __version__,
            "seed": seed,
            "start": start,
            "n": n,
            "shard": shard,
            "num_shards": num_shards,
            "size": [width, height],
            "elements": params.elements.to_dict() if params.elements is not None else None,
            "canvas": params.canvas.to_dict() if params.canvas is not None else None,
            # only when set: renders without it keep their bytes (and merge with each other)
            **({"modality_weights": dict(params.modality_weights)} if params.modality_weights else {}),
        },
        "licenses": licenses,
        "categories": CATEGORIES,
        "images": images,
        "annotations": annotations,
        "label_annotations": label_annotations,
    }
    sources_doc: dict[str, Any] = {
        "modalities": {
            m: [{"id": r.source_id, "origin": r.origin} for r in refs] for m, refs in pool.refs.items()
        },
        "unavailable": pool.unavailable,
    }
    if datasets:
        coco["info"]["split"] = pool.split
        coco["datasets"] = datasets
        sources_doc["split"] = pool.split
        sources_doc["datasets"] = {name: ds.to_record() for name, ds in sorted(pool.datasets.items())}
    _write_compact_json(out / "annotations.json", coco)
    _write_compact_json(out / "sources.json", sources_doc)
    rej = T.Rejections(STAGE, chunk=None if shard is None else f"shard-{shard:04d}")
    for row in pool.rejection_rows():
        rej.add(row["source_id"], row["reason"], f"{row['modality']}: {row['detail']}")
    rej.write(out / "rejections.parquet")
    if failures:
        T.write_json(out / "failures.json", failures)
    counts = T.counts_record(
        STAGE,
        len(indices),
        len(images),
        failed,
        chunk=None if shard is None else f"shard-{shard:04d}",
        extra={
            "panels": panels,
            "label_boxes": len(label_annotations),
            "source_rejections": len(rej),
            "sources": len(pool),
            "source_conversions": len(pool.conversions),
        },
    )
    T.write_counts(out / "counts.json", counts)
    counts = dict(counts)
    counts["seconds"] = round(elapsed, 3)  # returned only; files stay byte-reproducible
    return counts


def merge_shards(shard_dirs: Sequence[str | os.PathLike[str]], outputs: T.Outputs) -> dict[str, Any]:
    """Merge shard outputs into the ``render_merge`` rule's outputs ``annotations`` (one COCO file),
    ``records`` and ``counts`` (the rule's named outputs, or a folder: :func:`pmcflow.tables.stage_outputs`).

    Images stay where they are; ``file_name`` is rewritten relative to the annotations' folder.
    The result does not depend on the order of ``shard_dirs``.
    """
    paths = T.stage_outputs("render_merge", outputs)
    out = paths["annotations"].parent
    images: list[dict[str, Any]] = []
    anns: list[dict[str, Any]] = []
    labs: list[dict[str, Any]] = []
    record_files: list[Path] = []
    counts = []
    info: dict[str, Any] | None = None
    sources_key: tuple[Any, Any] | None = None  # (licenses, datasets): the same in every shard of a split
    for d in sorted(Path(s) for s in shard_dirs):
        with open(d / "annotations.json", encoding="utf-8") as fh:
            coco = json.load(fh)
        if coco["categories"] != CATEGORIES:
            raise ValueError(f"{d}: unexpected categories {coco['categories']}")
        key = {k: v for k, v in coco["info"].items() if k not in ("shard",)}
        if info is None:
            info = key
        elif key != info:
            raise ValueError(f"{d}: shard was rendered with different settings: {key} vs {info}")
        shard_sources = (coco.get("licenses", []), coco.get("datasets"))
        if sources_key is None:
            sources_key = shard_sources
        elif shard_sources != sources_key:
            raise ValueError(f"{d}: shard was rendered from different source datasets than the others")
        rel = Path(os.path.relpath(d, out))
        for im in coco["images"]:
            images.append({**im, "file_name": (rel / im["file_name"]).as_posix()})
        anns += coco["annotations"]
        labs += coco.get("label_annotations", [])
        record_files.append(d / "records.jsonl")
        counts.append(T.read_counts(d / "counts.json"))
    if info is None or sources_key is None:
        raise ValueError("no shard directories given")
    ids = [im["id"] for im in images]
    if len(ids) != len(set(ids)):
        raise ValueError("the same figure appears in two shards")
    merged: dict[str, Any] = {
        "info": {**info, "shard": None, "merged_shards": len(counts)},
        "licenses": sources_key[0],
        "categories": CATEGORIES,
        "images": sorted(images, key=lambda r: r["id"]),
        "annotations": sorted(anns, key=lambda r: r["id"]),
        "label_annotations": sorted(labs, key=lambda r: r["id"]),
    }
    if sources_key[1] is not None:
        merged["datasets"] = sources_key[1]
    _write_compact_json(paths["annotations"], merged)
    with contextlib.ExitStack() as stack, T.atomic_open(paths["records"], "w", encoding="utf-8") as dst:
        streams = [_records_by_index(stack.enter_context(open(f, encoding="utf-8"))) for f in record_files]
        for _, line in heapq.merge(*streams):  # each shard's records are in index order
            dst.write(line)
    total = T.merge_counts(STAGE, counts)
    return T.write_stage(paths, total)


def _records_by_index(fh: Iterable[str]) -> Iterator[tuple[int, str]]:
    for line in fh:
        if line.strip():
            yield json.loads(line)["index"], line if line.endswith("\n") else line + "\n"


def cli(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="pmcflow render", description="Render synthetic compound figures (COCO + YOLO)."
    )
    ap.add_argument("--n", type=int, help="number of figures in the whole run")
    ap.add_argument("--seed", type=int, help="default: the config schema's seed")
    ap.add_argument("--out", required=True, help="output directory (of this shard, or of the merge)")
    ap.add_argument(
        "--size",
        help="canvas: 512 or WxH (e.g. 410x400); the base the canvases grow around unless canvas mode=fixed "
        "(default: synth.size's)",
    )
    ap.add_argument("--start", type=int, default=0, help="first figure index (e.g. a validation split)")
    ap.add_argument("--shard", type=int, default=None)
    ap.add_argument("--num-shards", type=int, default=1)
    ap.add_argument(
        "--sources",
        default=None,
        help="YAML/JSON sources file: {datasets: {name: {modality, path, licence, splits}}} or {modality: [dirs or .parquet]}; default: builtin panels",
    )
    ap.add_argument(
        "--split",
        choices=SPLITS,
        default=None,
        help="the split to render: picks its datasets from a datasets sources file",
    )
    ap.add_argument("--compress-level", type=int, help="PNG zlib level (fixed per run; default: synth.compress_level's)")
    ap.add_argument(
        "--element",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a synth.elements setting (e.g. jpeg_rate=0, jpeg_quality=[80,90]); repeatable; the rest: schema defaults",
    )
    ap.add_argument("--no-elements", action="store_true", help="every synth.elements rate 0 (PNG, no extras)")
    ap.add_argument(
        "--canvas",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a synth.canvas setting (e.g. mode=fixed, max_side=2); repeatable; the rest: schema defaults",
    )
    ap.add_argument(
        "--modality-weight",
        action="append",
        default=[],
        metavar="MODALITY=WEIGHT",
        help="a synth.modality_weights entry (e.g. plot=3, mixed=0.5); repeatable; the rest weigh 1",
    )
    ap.add_argument(
        "--validate-sources", action="store_true", help="decode every source first and list all bad ones"
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="SHARD_DIR",
        help="merge these shard outputs into --out instead of rendering",
    )
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.merge:
        total = merge_shards(args.merge, args.out)
        print(f"merged {total['n_chunks']} shards: {total['kept']} figures -> {args.out}")
        return 0
    if args.n is None:
        ap.error("--n is required unless --merge is given")
    # what the flags leave unset: the schema's defaults
    from pmcflow.config import schema_default
    from pmcflow.synth.settings import SynthSettings

    synth = SynthSettings.from_section(None)
    seed = int(schema_default("seed")) if args.seed is None else args.seed
    size = synth.size if args.size is None else args.size
    compress_level = synth.compress_level if args.compress_level is None else args.compress_level
    sources = load_sources_file(args.sources) if args.sources else None
    elements: dict[str, Any] = dict.fromkeys(RATE_KEYS, 0.0) if args.no_elements else {}
    elements.update(parse_sets(args.element, "--element"))
    canvas = parse_sets(args.canvas, "--canvas")
    counts = render(
        args.n,
        seed,
        args.out,
        size=size,
        shard=args.shard,
        num_shards=args.num_shards,
        start=args.start,
        sources=sources,
        compress_level=compress_level,
        validate_sources=args.validate_sources,
        split=args.split,
        elements=element_params(elements),
        canvas=canvas_params(canvas),
        modality_weights=subsection(
            {"modality_weights": parse_sets(args.modality_weight, "--modality-weight")}, "synth"
        )["modality_weights"],
    )
    rate = counts["kept"] / counts["seconds"] if counts["seconds"] else float("nan")
    print(
        f"rendered {counts['kept']}/{counts['in']} figures ({counts['extra']['panels']} panels) in {counts['seconds']:.1f}s = {rate:.1f}/s -> {args.out}"
    )
    return 0 if counts["kept"] == counts["in"] else 1
