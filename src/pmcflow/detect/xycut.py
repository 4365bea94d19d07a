"""``xycut``: a weight-free recursive XY-cut on whitespace gutters.

1. Estimate the background colour as the per-channel median of the image border and mark
   foreground where any channel differs from it by more than ``bg_tolerance`` (so grey, black or
   coloured figure backgrounds work as well as white).
2. Recursively, on a region: trim empty margins; find *gutters* -- runs of at least ``min_gutter``
   rows (or columns) whose foreground fraction is at most ``gutter_max_fill``; cut along the axis
   holding the widest gutter, at every gutter on that axis; recurse into each piece.  Pieces smaller
   than the minimum panel size (stray panel labels, specks) are dropped.
   Where a region has no gutter, it is cut at straight colour *seams* instead (``seam_split``):
   boundaries where at least ``seam_min_frac`` of the rows (columns) change abruptly and stay
   changed two pixels on -- abutting panels with no whitespace between them.
3. A leaf is a panel.  Its score grows with the width of the weakest gutter that isolated it:
   ``0.5 + 0.5 * min(1, width / (3 * min_gutter))`` (a seam counts ``0.6 * its edge fraction``);
   a figure with no gutter or seam at all is one panel with score 0.5.

Training records the parameters; with ``tune=true`` it grid-searches ``min_gutter_px`` and
``bg_tolerance`` on the training set for the best F1@0.5.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from pmcflow.detect.base import (
    DEFAULT_NMS_IOU,
    DEFAULT_SCORE_THRESHOLD,
    Box,
    EvaluateMixin,
    ImageInput,
    Params,
    Timer,
    TrainResult,
    as_rgb,
    backend_params,
    nms_boxes,
    read_dataset,
)
from pmcflow.tables import write_json


def foreground_mask(rgb: np.ndarray, tolerance: float) -> np.ndarray:
    """Boolean mask of pixels that differ from the border colour by more than ``tolerance``."""
    border = np.concatenate([rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1]], axis=0).astype(np.int16)
    bg = np.median(border, axis=0)
    diff = np.abs(rgb.astype(np.int16) - bg.astype(np.int16)).max(axis=-1)
    return diff > tolerance


def _gutters(profile: np.ndarray, max_fill: float, min_width: int) -> list[tuple[int, int]]:
    """Internal runs ``[start, end)`` of empty entries at least ``min_width`` long."""
    empty = profile <= max_fill
    runs: list[tuple[int, int]] = []
    n = len(profile)
    i = 0
    while i < n:
        if empty[i]:
            j = i
            while j < n and empty[j]:
                j += 1
            if i > 0 and j < n and j - i >= min_width:
                runs.append((i, j))
            i = j
        else:
            i += 1
    return runs


def _seams(
    region: np.ndarray, tol: float, min_frac: float, min_contrast: float, min_seg: float
) -> list[tuple[int, float]]:
    """Straight seams across ``region`` (h, w, 3 int16) between columns: ``(boundary, strength)``.

    A boundary between columns ``i`` and ``i + 1`` is a seam when at least ``min_frac`` of the rows
    jump by more than ``tol`` there *and* still differ between columns ``i - 1`` and ``i + 2`` (a
    step edge, not a thin line such as a plot axis), and that fraction exceeds the median of the 17
    nearest boundaries by ``min_contrast`` (noisy textures have edges everywhere).  Seams closer
    than ``min_seg`` to each other or to the region edge are not used.
    """
    w = region.shape[1]
    if w < 2 * min_seg or w < 6:
        return []
    step = (np.abs(region[:, 1:] - region[:, :-1]).max(axis=-1) > tol).mean(axis=0)  # boundary i | i+1
    wide = (np.abs(region[:, 3:] - region[:, :-3]).max(axis=-1) > tol).mean(axis=0)  # cols i-1 vs i+2
    # Contrast with the neighbourhood, so noisy textures (edges everywhere) do not make seams.
    local = np.median(np.lib.stride_tricks.sliding_window_view(np.pad(step, 8, mode="edge"), 17), axis=-1)
    score = np.zeros(w - 1)
    score[1 : w - 2] = np.minimum(step[1 : w - 2], wide)
    score[score - local < min_contrast] = 0.0
    chosen: list[tuple[int, float]] = []
    for i in np.argsort(-score, kind="stable"):
        if score[i] < min_frac:
            break
        b = int(i) + 1
        if b < min_seg or w - b < min_seg or any(abs(b - c) < min_seg for c, _ in chosen):
            continue
        chosen.append((b, float(score[i])))
    return sorted(chosen)


class XYCut:
    """The cut itself, on a foreground mask (and the RGB image for seams); boxes in mask pixels."""

    def __init__(self, p: dict[str, Any], rgb: np.ndarray | None = None) -> None:
        self.p = p
        self.rgb = None if rgb is None else rgb.astype(np.int16)

    def run(self, mask: np.ndarray) -> list[tuple[float, float, float, float, float]]:
        h, w = mask.shape
        self.min_panel = max(float(self.p["min_panel_px"]), float(self.p["min_panel_frac"]) * min(h, w))
        out: list[tuple[float, float, float, float, float]] = []
        self._cut(mask, 0, 0, w, h, 0, None, out)
        return out

    def _cut(
        self,
        mask: np.ndarray,
        x0: int,
        y0: int,
        x1: int,
        y1: int,
        depth: int,
        strength: float | None,
        out: list[tuple[float, float, float, float, float]],
    ) -> None:
        p = self.p
        sub = mask[y0:y1, x0:x1]
        if sub.size == 0:
            return
        rows = sub.mean(axis=1)
        cols = sub.mean(axis=0)
        max_fill = float(p["gutter_max_fill"])
        r_nz = np.nonzero(rows > max_fill)[0]
        c_nz = np.nonzero(cols > max_fill)[0]
        if len(r_nz) == 0 or len(c_nz) == 0:
            return
        # Trim empty margins.
        ty0, ty1 = y0 + int(r_nz[0]), y0 + int(r_nz[-1]) + 1
        tx0, tx1 = x0 + int(c_nz[0]), x0 + int(c_nz[-1]) + 1
        rows = rows[r_nz[0] : r_nz[-1] + 1]
        cols = cols[c_nz[0] : c_nz[-1] + 1]
        min_g = int(p["min_gutter_px"])
        if depth < int(p["max_depth"]):
            candidates = []
            for axis, prof in (("y", rows), ("x", cols)):
                g = _gutters(prof, max_fill, min_g)
                if g:
                    candidates.append((max(e - s for s, e in g), axis, g))
            for _, axis, gutters in sorted(candidates, key=lambda c: -c[0]):
                lo = ty0 if axis == "y" else tx0
                length = len(rows) if axis == "y" else len(cols)
                # Segments between gutters, with the widths of the gutters on either side.
                bounds = [0] + [v for s, e in gutters for v in (s, e)] + [length]
                widths = [None] + [e - s for s, e in gutters] + [None]
                segments = []
                for k in range(len(gutters) + 1):
                    a, b = bounds[2 * k], bounds[2 * k + 1]
                    if b - a >= self.min_panel:
                        near = [wd for wd in (widths[k], widths[k + 1]) if wd is not None]
                        segments.append((lo + a, lo + b, min(near)))
                if len(segments) < 2:
                    continue
                for a, b, gw in segments:
                    s = min(1.0, gw / (3.0 * max(1, min_g)))
                    s = s if strength is None else min(strength, s)
                    if axis == "y":
                        self._cut(mask, tx0, a, tx1, b, depth + 1, s, out)
                    else:
                        self._cut(mask, a, ty0, b, ty1, depth + 1, s, out)
                return
            if (
                p["seam_split"]
                and self.rgb is not None
                and self._seam_cut(mask, tx0, ty0, tx1, ty1, depth, strength, out)
            ):
                return
        bw, bh = tx1 - tx0, ty1 - ty0
        if bw < self.min_panel or bh < self.min_panel:
            return
        if float(mask[ty0:ty1, tx0:tx1].mean()) < float(p["min_density"]):
            return
        score = 0.5 if strength is None else 0.5 + 0.5 * strength
        out.append((float(tx0), float(ty0), float(bw), float(bh), score))

    def _seam_cut(
        self,
        mask: np.ndarray,
        x0: int,
        y0: int,
        x1: int,
        y1: int,
        depth: int,
        strength: float | None,
        out: list[tuple[float, float, float, float, float]],
    ) -> bool:
        """Cut the region at colour seams (the axis with the stronger seams); False if none."""
        assert self.rgb is not None
        region = self.rgb[y0:y1, x0:x1]
        tol, frac, con = (
            float(self.p["seam_tol"]),
            float(self.p["seam_min_frac"]),
            float(self.p["seam_min_contrast"]),
        )
        by_x = _seams(region, tol, frac, con, self.min_panel)
        by_y = _seams(region.transpose(1, 0, 2), tol, frac, con, self.min_panel)
        options = [(max(sc for _, sc in c), axis, c) for axis, c in (("x", by_x), ("y", by_y)) if c]
        if not options:
            return False
        _, axis, seams = max(options, key=lambda o: o[0])
        length = (x1 - x0) if axis == "x" else (y1 - y0)
        bounds = [0] + [b for b, _ in seams] + [length]
        for k in range(len(bounds) - 1):
            near = [sc for j, (_, sc) in enumerate(seams) if j in (k - 1, k)]
            # Seams are weaker evidence than whitespace gutters: strength at most 0.6.
            sk = 0.6 * min(near)
            sk = sk if strength is None else min(strength, sk)
            a, b = bounds[k], bounds[k + 1]
            if axis == "x":
                self._cut(mask, x0 + a, y0, x0 + b, y1, depth + 1, sk, out)
            else:
                self._cut(mask, x0, y0 + a, x1, y0 + b, depth + 1, sk, out)
        return True


class XYCutDetector(EvaluateMixin):
    name = "xycut"

    def __init__(self, checkpoint: str | os.PathLike[str] | None = None, **params: Any) -> None:
        base: dict[str, Any] = {}
        if checkpoint is not None:
            import json

            path = Path(checkpoint)
            if path.is_dir():
                path = path / "xycut.json"
            with open(path, encoding="utf-8") as fh:
                base = dict(json.load(fh)["params"])
        self.params = backend_params("xycut", base, params)

    # -- inference ------------------------------------------------------------------------------
    def detect_one(self, img: Image.Image, params: dict[str, Any] | None = None) -> list[Box]:
        p = params or self.params
        w, h = img.size
        scale = min(1.0, float(p["work_size"]) / max(w, h))
        work = (
            img
            if scale >= 1.0
            else img.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BOX)
        )
        rgb = np.asarray(work)
        mask = foreground_mask(rgb, float(p["bg_tolerance"]))
        raw = XYCut(p, rgb).run(mask)
        sx, sy = w / work.width, h / work.height
        return [Box(x * sx, y * sy, bw * sx, bh * sy, s) for x, y, bw, bh, s in raw]

    def predict(
        self,
        images: Sequence[ImageInput],
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        nms_iou: float = DEFAULT_NMS_IOU,
        batch_size: int = 8,
    ) -> list[list[Box]]:
        out = []
        for image in images:
            boxes = [b for b in self.detect_one(as_rgb(image)) if b.score >= score_threshold]
            out.append(nms_boxes(boxes, nms_iou))
        return out

    # -- "training" -----------------------------------------------------------------------------
    def train(self, train_dir: Path, val_dir: Path | None, out_dir: Path, params: Params) -> TrainResult:
        from pmcflow.detect.evaluate import evaluate

        p = backend_params("xycut", self.params, params)
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        history: list[dict[str, Any]] = []
        n_seen = 0
        with Timer() as t:
            if p["tune"]:
                items = read_dataset(train_dir)[: int(p["tune_max_images"])]
                images = [as_rgb(it.path) for it in items]
                gt = _gt_from_items(items)
                best: tuple[float, dict[str, Any]] | None = None
                for mg, tol in itertools.product(p["tune_min_gutter_px"], p["tune_bg_tolerance"]):
                    trial = {**p, "min_gutter_px": int(mg), "bg_tolerance": int(tol)}
                    preds = [
                        {"image_id": i + 1, "bbox": [b.x, b.y, b.w, b.h], "score": b.score}
                        for i, img in enumerate(images)
                        for b in self.detect_one(img, trial)
                    ]
                    n_seen += len(images)
                    m = evaluate(gt, preds)
                    history.append(
                        {
                            "min_gutter_px": int(mg),
                            "bg_tolerance": int(tol),
                            "f1": m["f1"],
                            "map": m["map"],
                            "threshold": m["threshold"],
                        }
                    )
                    if best is None or m["f1"] > best[0]:
                        best = (m["f1"], trial)
                assert best is not None
                p = best[1]
        self.params = p
        record = {"backend": self.name, "params": p, "history": history}
        if val_dir is not None and Path(val_dir, "annotations.json").is_file():
            items = read_dataset(val_dir)
            preds = [
                {"image_id": i + 1, "bbox": [b.x, b.y, b.w, b.h], "score": b.score}
                for i, it in enumerate(items)
                for b in self.detect_one(as_rgb(it.path))
            ]
            val = evaluate(_gt_from_items(items), preds)
            record["val"] = {k: val[k] for k in ("map", "map50", "f1", "threshold", "precision", "recall")}
            history.append({"split": "val", **record["val"]})
        ckpt = out_dir / "xycut.json"
        write_json(ckpt, record)
        ips = n_seen / t.seconds if n_seen and t.seconds > 0 else 0.0
        return TrainResult(ckpt, history, ips, t.seconds, p)


def _gt_from_items(items: Sequence[Any]) -> dict[str, Any]:
    images, anns = [], []
    for i, it in enumerate(items):
        images.append({"id": i + 1, "file_name": it.path.name, "width": it.width, "height": it.height})
        for b in it.boxes:
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i + 1,
                    "bbox": [float(v) for v in b],
                    "area": float(b[2] * b[3]),
                    "iscrowd": 0,
                    "category_id": 1,
                }
            )
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "subfigure"}]}
