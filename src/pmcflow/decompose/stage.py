"""The decompose stage: figure graphics -> subfigure boxes, crops and panel letters.

``decompose_chunk(settings, chunk, figures_path, outputs)`` reads one chunk's FIGURES table (with the
``decompose`` section as a :class:`~pmcflow.decompose.settings.DecomposeSettings`) and writes
the ``decompose_chunk`` rule's outputs (:func:`pmcflow.tables.stage_outputs`)::

    subfigures    schema.SUBFIGURES, one row per subfigure
    rejections    schema.REJECTIONS (unreadable images, figures without graphics...)
    counts        in = graphics considered (+ figures without any graphic),
                  kept = graphics decomposed, rejected by reason;
                  extra: n_subfigures, n_single_panel, labels by source
    crops         a folder: <article_uid>/<figure_id>-g<k>-s<j>.png   (or .jpg, see ``crop_format``)

Every graphic of a figure is decomposed separately (``graphic_index`` k); ``j`` is the
subfigure's reading-order position.  The same input gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.decompose.order import (
    SOURCE_POSITION,
    SOURCE_SINGLE,
    LabelAssignment,
    assign_labels,
    assign_positions,
    reading_order,
)
from pmcflow.decompose.settings import DecomposeSettings
from pmcflow.detect.base import DEFAULT_SCORE_THRESHOLD, Box, Detector, get_detector
from pmcflow.detect.images import ImageError, load_image
from pmcflow.progress import Progress
from pmcflow.settings import thaw
from pmcflow.textclean import over_cap

STAGE = "decompose"
log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_WORD = re.compile(r"[^\W\d_]{2,}")  # a word of two or more letters


# ----------------------------------------------------------------------------------------------
# Detector and its provenance
# ----------------------------------------------------------------------------------------------
def checkpoint_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a checkpoint file, or of a folder (sorted relative paths and file hashes)."""
    p = Path(path)
    if p.is_file():
        return T.file_sha256(p)
    h = hashlib.sha256()
    for f in sorted(q for q in p.rglob("*") if q.is_file()):
        h.update(f"{f.relative_to(p).as_posix()}\0{T.file_sha256(f)}\n".encode())
    return h.hexdigest()


def params_hash(params: Mapping[str, Any]) -> str:
    text = json.dumps(dict(params), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class DetectorInfo:
    """A built detector with the identifiers written to every SUBFIGURES row."""

    detector: Detector
    backend: str
    detector_id: str  # "<backend>" or "<backend>:<checkpoint name>"
    checkpoint_sha256: str  # sha256, or "weight-free:<backend>@<params hash>"
    score_threshold: float = DEFAULT_SCORE_THRESHOLD
    threshold_source: str = "default"  # config | model (the checkpoint's own) | default


def build_detector(dcfg: DecomposeSettings) -> DetectorInfo:
    """The configured detector (``backend``/``checkpoint``/``detector_params`` of ``dcfg``)."""
    from pmcflow.detect.default import resolve_threshold, shipped_checkpoint_for, shipped_model

    backend = dcfg.backend
    ckpt_opt = dcfg.checkpoint
    params = thaw(dcfg.detector_params)
    ckpt: Path | None
    if backend == "auto":
        found = shipped_model() if ckpt_opt in ("shipped", None, "") else None
        if found is not None:
            backend, ckpt = found
        elif ckpt_opt in ("shipped", None, ""):
            backend, ckpt = "xycut", None
        else:
            raise ValueError(
                "decompose.backend=auto takes checkpoint 'shipped'; name the backend of a checkpoint"
            )
    elif ckpt_opt == "shipped":
        ckpt = shipped_checkpoint_for(backend)
        if ckpt is None and backend != "xycut":
            raise ValueError(f"the package ships no {backend!r} checkpoint; set decompose.checkpoint")
    elif ckpt_opt in (None, ""):
        ckpt = None
    else:
        ckpt = Path(str(ckpt_opt))
        if not ckpt.exists():
            raise FileNotFoundError(f"decompose.checkpoint {ckpt} does not exist")
    det = get_detector(backend, checkpoint=ckpt, **params)
    threshold = resolve_threshold(dcfg.score_threshold, backend, ckpt)
    if ckpt is None:
        used = getattr(det, "params", params)
        return DetectorInfo(det, backend, backend, f"weight-free:{backend}@{params_hash(used)}", *threshold)
    return DetectorInfo(det, backend, f"{backend}:{ckpt.name}", checkpoint_sha256(ckpt), *threshold)


# ----------------------------------------------------------------------------------------------
# Boxes -> subfigures
# ----------------------------------------------------------------------------------------------
def clip_boxes(
    boxes: Sequence[Box], width: int, height: int, min_px: float
) -> list[tuple[int, int, int, int, float]]:
    """Integer pixel boxes ``(x, y, w, h, score)`` clipped to the image (rounded outwards).

    Boxes with a non-finite coordinate, or whose clipped width or height is below ``min_px``,
    are dropped; so are exact duplicates (after rounding).  Sorted by descending score.
    """
    out: list[tuple[int, int, int, int, float]] = []
    seen: set[tuple[int, int, int, int]] = set()
    for b in sorted(boxes, key=lambda b: -b.score):
        vals = (b.x, b.y, b.w, b.h)
        if not all(math.isfinite(v) for v in vals) or b.w <= 0 or b.h <= 0:
            continue
        x0 = max(0, min(width, math.floor(b.x)))
        y0 = max(0, min(height, math.floor(b.y)))
        x1 = max(0, min(width, math.ceil(b.x + b.w)))
        y1 = max(0, min(height, math.ceil(b.y + b.h)))
        if x1 - x0 < min_px or y1 - y0 < min_px:
            continue
        key = (x0, y0, x1 - x0, y1 - y0)
        if key in seen:
            continue
        seen.add(key)
        out.append((*key, float(b.score)))
    return out


def is_single_panel(
    boxes: Sequence[tuple[int, int, int, int, float]], width: int, height: int, cover: float
) -> bool:
    """No box at all, or one box covering at least ``cover`` of the image area."""
    if not boxes:
        return True
    if len(boxes) == 1:
        _, _, w, h, _ = boxes[0]
        return w * h >= cover * width * height
    return False


def _safe(name: str) -> str:
    return _SAFE.sub("_", name) or "_"


def crop_ext(fmt: str) -> str:
    return "jpg" if fmt.startswith("jpeg") else "png"


def encode_crop(crop: Image.Image, fmt: str, jpeg_quality: int) -> bytes:
    """Deterministic encoding: PNG without metadata, or baseline JPEG at a fixed quality."""
    import io

    buf = io.BytesIO()
    if fmt.startswith("jpeg"):
        crop.save(buf, "JPEG", quality=int(jpeg_quality), optimize=False, progressive=False, subsampling=0)
    else:
        crop.save(buf, "PNG", compress_level=6, optimize=False)
    return buf.getvalue()


def source_is_jpeg(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(3) == b"\xff\xd8\xff"
    except OSError:
        return False


# ----------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------
@dataclass
class _Item:
    """One figure graphic to decompose."""

    row: Mapping[str, Any]
    k: int
    path: str

    @property
    def item_id(self) -> str:
        return f"{self.row['figure_uid']}/g{self.k}"


@dataclass
class _Totals:
    n_in: int = 0
    n_kept: int = 0
    n_subfigures: int = 0
    n_single: int = 0
    n_letter_merged: int = 0  # boxes merged into the lettered panel they were split off
    label_sources: Counter[str] = field(default_factory=Counter)


def _items(
    rows: Sequence[Mapping[str, Any]], rej: T.Rejections, totals: _Totals, max_caption_chars: int
) -> list[_Item]:
    items: list[_Item] = []
    for row in rows:
        paths = list(row.get("graphic_paths") or [])
        hrefs = list(row.get("graphics") or [])
        if not paths and not hrefs:
            totals.n_in += 1
            rej.add(row["figure_uid"], "no_graphic", "the figure has no graphic", pmcid=row.get("pmcid"))
            continue
        caption = row.get("caption") or ""
        problem = None
        if over_cap(caption, max_caption_chars):  # hostile or broken: no model ever sees it
            problem = ("caption_too_long", f"{len(caption)} characters > decompose.max_caption_chars {max_caption_chars}")
        elif caption.strip() and not _WORD.search(caption):  # ".", "(A)": nothing a pair could be made of
            problem = ("caption_uninformative", f"no word in the caption {caption[:40]!r}")
        if problem is not None:
            for k in range(max(len(paths), len(hrefs))):
                totals.n_in += 1
                rej.add(f"{row['figure_uid']}/g{k}", *problem, pmcid=row.get("pmcid"))
            continue
        for k in range(max(len(paths), len(hrefs))):
            path = paths[k] if k < len(paths) else None
            totals.n_in += 1
            if not path:
                href = hrefs[k] if k < len(hrefs) else "?"
                rej.add(
                    f"{row['figure_uid']}/g{k}",
                    "missing",
                    f"graphic {href!r} was not resolved to a file",
                    pmcid=row.get("pmcid"),
                )
                continue
            items.append(_Item(row, k, str(path)))
    return items


def _detect_batch(
    info: DetectorInfo, images: list[Image.Image], dcfg: DecomposeSettings
) -> list[list[Box] | Exception]:
    """Detect on a batch; if the batch fails, retry image by image so one bad input costs one item."""
    det = info.detector
    kw = {
        "score_threshold": info.score_threshold,
        "nms_iou": dcfg.nms_iou,
        "batch_size": dcfg.batch_size,
    }
    try:
        return list(det.predict(images, **kw))
    except Exception:  # noqa: BLE001 - isolate the failing image below
        out: list[list[Box] | Exception] = []
        for im in images:
            try:
                out.append(det.predict([im], **kw)[0])
            except Exception as exc:  # noqa: BLE001 - recorded as a rejection
                out.append(exc)
        return out


def decompose_chunk(
    settings: DecomposeSettings,
    chunk: str,
    figures_path: str,
    outputs: T.Outputs,
    *,
    trained_model: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Decompose every figure graphic of ``chunk``; write the tables, counts and crops to ``outputs``
    (the rule's named outputs, or a folder: :func:`pmcflow.tables.stage_outputs`).

    ``trained_model``: the folder the detector stage wrote (``decompose.checkpoint: trained``); its
    record names the backend and checkpoint, which replace ``decompose.backend``/``checkpoint``.
    Returns the counts record.  Unreadable, missing or oversized images and figures without a
    graphic become rejection rows; the chunk never fails because of one input.
    """
    from pmcflow.decompose.lettermerge import merge_with_reader
    from pmcflow.detect.default import trained_record
    from pmcflow.enrich.rules import caption_letters, caption_positions

    dcfg = settings
    if trained_model is not None:
        trained = trained_record(trained_model)
        dcfg = dcfg.replace(backend=trained["backend"], checkpoint=trained["checkpoint"])
    out = T.stage_outputs("decompose_chunk", outputs)
    rows = T.read_rows(figures_path)
    rej = T.Rejections(STAGE, chunk)
    totals = _Totals()
    items = _items(rows, rej, totals, dcfg.max_caption_chars)
    info = build_detector(dcfg) if items else None
    use_reader = dcfg.label_reading or dcfg.letter_merge
    loaded = load_label_reader(dcfg) if items and use_reader else None
    reader = loaded if dcfg.label_reading else None  # reads each subfigure's letter
    merger = loaded if dcfg.letter_merge else None  # merges the boxes split off a lettered panel
    fmt_cfg = dcfg.crop_format  # png | source (the schema's enum)
    jpeg_fmt = f"jpeg-q{dcfg.jpeg_quality}"

    crops_final = out["crops"]
    sub_rows: list[dict[str, Any]] = []
    bar = Progress(len(items), desc=f"decompose {chunk}", unit="graphic")
    with T.atomic_dir(crops_final) as crops_tmp, bar:  # the crops appear all at once, or not at all
        bs = max(1, dcfg.batch_size)
        for start in range(0, len(items), bs):
            todo = items[start : start + bs]
            batch: list[tuple[_Item, Image.Image]] = []
            for it in todo:
                try:
                    batch.append((it, load_image(it.path, max_pixels=dcfg.max_pixels)))
                except ImageError as exc:
                    rej.add(it.item_id, exc.reason, exc.detail, pmcid=it.row.get("pmcid"))
            if not batch:
                bar.update(len(todo))
                continue
            assert info is not None
            preds = _detect_batch(info, [im for _, im in batch], dcfg)
            for (it, im), boxes in zip(batch, preds, strict=True):
                if isinstance(boxes, Exception):
                    rej.add(
                        it.item_id,
                        "detector_error",
                        f"{type(boxes).__name__}: {boxes}",
                        pmcid=it.row.get("pmcid"),
                    )
                    continue
                fmt = jpeg_fmt if fmt_cfg == "source" and source_is_jpeg(it.path) else "png"
                caption, title = it.row.get("caption") or "", it.row.get("caption_title")
                letters = caption_letters(caption, title)
                if merger is not None:
                    n_boxes = len(boxes)
                    boxes = merge_with_reader(merger, im, boxes, letters, dcfg.letter_merge_overlap)
                    totals.n_letter_merged += n_boxes - len(boxes)
                places = [] if letters else caption_positions(caption, title)
                new = _subfigures(it, im, boxes, dcfg, info, reader, letters, places, fmt, crops_tmp, crops_final)
                sub_rows.extend(new)
                totals.n_kept += 1
                totals.n_subfigures += len(new)
                totals.n_single += sum(1 for r in new if r["is_single_panel"])
                totals.label_sources.update(
                    f"{r['label_source']}:{'letter' if r['panel_label'] else 'null'}" for r in new
                )
            bar.update(len(todo))
    extra: dict[str, Any] = {
        "n_subfigures": totals.n_subfigures,
        "n_single_panel": totals.n_single,
        "n_letter_merged": totals.n_letter_merged,
        "labels": dict(sorted(totals.label_sources.items())),
    }
    if info is not None:
        extra["detector"] = info.detector_id
        extra["detector_checkpoint_sha256"] = info.checkpoint_sha256
        # a string: merge_counts sums numbers across chunks
        extra["score_threshold"] = f"{info.score_threshold:g} ({info.threshold_source})"
    if reader is not None:
        extra["label_reader_sha256"] = reader.sha256
    elif items and dcfg.label_reading:
        extra["label_reader_sha256"] = "unavailable"
    record = T.counts_record(STAGE, totals.n_in, totals.n_kept, rej.by_reason(), chunk=chunk, extra=extra)
    return T.write_stage(
        out, record, tables={"subfigures": (sub_rows, S.SUBFIGURES)}, rejections={"rejections": rej}
    )


@dataclass(frozen=True)
class Planned:
    """One subfigure of a graphic, before its crop is written (in reading order)."""

    x: int
    y: int
    w: int
    h: int
    score: float
    single: bool
    label: str | None
    source: str


def plan_subfigures(
    im: Image.Image,
    boxes: Sequence[Box],
    dcfg: DecomposeSettings,
    reader: Any = None,
    caption_letters: Sequence[str] = (),
    caption_places: Sequence[str] = (),
) -> list[Planned]:
    """Clip and filter ``boxes``, judge single-panel, order them and assign panel letters.

    A caption that labels its panels by place ("Left: …", "(Top) …") and names no letter gives
    each box the place it sits in (``caption-position``) when every box and every place match up.
    """
    W, H = im.size
    kept = clip_boxes(boxes, W, H, float(dcfg.min_box_px))
    if is_single_panel(kept, W, H, dcfg.single_panel_cover):
        score = kept[0][4] if kept else 1.0
        return [Planned(0, 0, W, H, score, True, None, SOURCE_SINGLE)]
    xywh = [b[:4] for b in kept]
    order = reading_order(xywh)
    readings = reader.read(im, xywh) if reader is not None else None
    assigned = assign_labels(len(kept), order, readings, caption_letters)
    if caption_places and not caption_letters:
        placed = assign_positions(xywh, W, H, caption_places)
        if all(p is not None for p in placed):
            assigned = [LabelAssignment(p, SOURCE_POSITION) for p in placed]
    return [Planned(*kept[i], False, assigned[i].label, assigned[i].source) for i in order]


def _subfigures(
    it: _Item,
    im: Image.Image,
    boxes: Sequence[Box],
    dcfg: DecomposeSettings,
    info: DetectorInfo,
    reader: Any,
    caption_letters: Sequence[str],
    caption_places: Sequence[str],
    fmt: str,
    crops_tmp: Path,
    crops_final: Path,
) -> list[dict[str, Any]]:
    """The SUBFIGURES rows of one graphic (crops written under ``crops_tmp``)."""
    W, H = im.size
    row = it.row
    rel_dir = Path(_safe(str(row["article_uid"])))
    (crops_tmp / rel_dir).mkdir(parents=True, exist_ok=True)
    out: list[dict[str, Any]] = []
    for j, p in enumerate(plan_subfigures(im, boxes, dcfg, reader, caption_letters, caption_places)):
        name = f"{_safe(str(row['figure_id']))}-g{it.k}-s{j}.{crop_ext(fmt)}"
        data = encode_crop(im.crop((p.x, p.y, p.x + p.w, p.y + p.h)), fmt, dcfg.jpeg_quality)
        (crops_tmp / rel_dir / name).write_bytes(data)
        uid = f"{row['figure_uid']}/s{j}" if it.k == 0 else f"{row['figure_uid']}/g{it.k}-s{j}"
        out.append(
            {
                "subfigure_uid": uid,
                "figure_uid": row["figure_uid"],
                "article_uid": row["article_uid"],
                "pmcid": row["pmcid"],
                "version": row["version"],
                "chunk": row["chunk"],
                "graphic_index": it.k,
                "subfigure_index": j,
                "image_path": it.path,
                "image_width": W,
                "image_height": H,
                "bbox": [float(p.x), float(p.y), float(p.w), float(p.h)],
                "score": round(float(p.score), 6),
                "is_single_panel": p.single,
                "panel_label": p.label,
                "label_source": p.source,
                "detector": info.detector_id,
                "detector_checkpoint_sha256": info.checkpoint_sha256,
                "crop_path": str(crops_final / rel_dir / name),
                "crop_format": fmt,
                "crop_width": p.w,
                "crop_height": p.h,
                "crop_sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    return out


def load_label_reader(dcfg: DecomposeSettings) -> Any:
    """The shipped label reader, or None (with a warning) when it or torch/scipy is unavailable."""
    try:
        from pmcflow.decompose.labelreader import LabelReader
    except ImportError as exc:
        log.warning("label reading disabled: %s (install torch and scipy)", exc)
        return None
    reader = LabelReader.shipped(min_prob=dcfg.label_min_prob)
    if reader is None:
        log.warning("label reading disabled: the package ships no label reader weights")
    return reader
