"""Box evaluation: COCO mAP (pycocotools) and F1 at IoU 0.5 with a tuned score threshold.

Evaluation is class-agnostic (every ground-truth and predicted box is a "subfigure"), so real
COCO files with other category ids (e.g. ImageCLEF 2016 converted to COCO) can be used as is.

F1: within each image, predictions are matched greedily in descending score order to the
still-unmatched ground-truth box of highest IoU (>= ``iou``).  Because a prediction's match only
depends on higher-scored predictions, thresholding the matched list at any score ``t`` gives the
same result as re-matching the predictions above ``t``; sweeping every distinct score therefore
yields the exact precision/recall curve and the best F1 with its threshold.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pmcflow.detect.base import DEFAULT_SCORE_THRESHOLD
from pmcflow.tables import write_json, write_table

PR_SCHEMA = pa.schema(
    [
        pa.field("threshold", pa.float64(), nullable=False),
        pa.field("precision", pa.float64(), nullable=False),
        pa.field("recall", pa.float64(), nullable=False),
        pa.field("f1", pa.float64(), nullable=False),
        pa.field("tp", pa.int64(), nullable=False),
        pa.field("fp", pa.int64(), nullable=False),
        pa.field("fn", pa.int64(), nullable=False),
    ]
)


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------
def load_gt(gt: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Load a COCO ground-truth file (or copy a dict) and make it class-agnostic (category 1)."""
    if isinstance(gt, Mapping):
        data = copy.deepcopy(dict(gt))
    else:
        with open(gt, encoding="utf-8") as fh:
            data = json.load(fh)
    for key in ("images", "annotations"):
        data.setdefault(key, [])
    for i, a in enumerate(data["annotations"]):
        a["category_id"] = 1
        a.setdefault("id", i + 1)
        a.setdefault("iscrowd", 0)
        a.setdefault("area", float(a["bbox"][2]) * float(a["bbox"][3]))
    data["categories"] = [{"id": 1, "name": "subfigure"}]
    return data


def _image_index(gt: Mapping[str, Any]) -> dict[str, int]:
    """Lookup from file name, base name and stem to GT image id."""
    index: dict[str, int] = {}
    for im in gt["images"]:
        name = str(im["file_name"])
        for key in (name, Path(name).name, Path(name).stem):
            index.setdefault(key, int(im["id"]))
    return index


def normalise_preds(
    preds: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | Mapping[str, Any], gt: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], int]:
    """Turn predictions into COCO results with integer image ids of ``gt``.

    ``preds`` is a COCO results file or list (``image_id`` an int or a file name; names match the
    GT ``file_name``, its base name or stem), or a mapping ``file name -> list[Box]``.
    Returns ``(results, n_unmatched)``: results whose image is not in ``gt`` are dropped and counted.
    """
    if isinstance(preds, str | os.PathLike):
        with open(preds, encoding="utf-8") as fh:
            preds = json.load(fh)
    rows: Iterable[Mapping[str, Any]]
    if isinstance(preds, Mapping):
        flat: list[dict[str, Any]] = []
        for name, boxes in preds.items():
            for b in boxes:
                flat.append({"image_id": name, "bbox": [b.x, b.y, b.w, b.h], "score": b.score})
        rows = flat
    else:
        rows = preds
    index = _image_index(gt)
    ids = {int(im["id"]) for im in gt["images"]}
    out: list[dict[str, Any]] = []
    unmatched = 0
    for r in rows:
        raw = r["image_id"]
        img_id: int | None
        if isinstance(raw, int | np.integer) and not isinstance(raw, bool):
            img_id = int(raw) if int(raw) in ids else None
        else:
            s = str(raw)
            img_id = index.get(s, index.get(Path(s).name, index.get(Path(s).stem)))
            if img_id is None and s.isdigit() and int(s) in ids:
                img_id = int(s)
        if img_id is None:
            unmatched += 1
            continue
        x, y, w, h = (float(v) for v in r["bbox"])
        out.append(
            {"image_id": img_id, "category_id": 1, "bbox": [x, y, w, h], "score": float(r.get("score", 1.0))}
        )
    return out, unmatched


# ----------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------
def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of xywh boxes ``a`` (n, 4) and ``b`` (m, 4)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    ax1, ay1, ax2, ay2 = a[:, 0], a[:, 1], a[:, 0] + a[:, 2], a[:, 1] + a[:, 3]
    bx1, by1, bx2, by2 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    iw = np.clip(np.minimum(ax2[:, None], bx2[None]) - np.maximum(ax1[:, None], bx1[None]), 0, None)
    ih = np.clip(np.minimum(ay2[:, None], by2[None]) - np.maximum(ay1[:, None], by1[None]), 0, None)
    inter = iw * ih
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def coco_map(gt: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """COCO bbox mAP@[.5:.95], mAP@.5 and mAP@.75 (pycocotools, its prints silenced).

    Returns 0.0 for empty predictions and NaN when there is no ground truth at all.
    """
    if not gt["annotations"]:
        return {"map": float("nan"), "map50": float("nan"), "map75": float("nan")}
    if not results:
        return {"map": 0.0, "map50": 0.0, "map75": 0.0}
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(dict(gt))
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes([dict(r) for r in results])
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.params.maxDets = [1, 10, 100]
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = ev.stats
    return {
        "map": max(0.0, float(stats[0])),
        "map50": max(0.0, float(stats[1])),
        "map75": max(0.0, float(stats[2])),
    }


def match_greedy(
    gt: Mapping[str, Any], results: Sequence[Mapping[str, Any]], iou: float = 0.5
) -> tuple[np.ndarray, np.ndarray, int]:
    """Greedy score-ordered matching; returns ``(scores, is_tp, n_gt)`` over all predictions."""
    gt_boxes: dict[int, list[list[float]]] = {int(im["id"]): [] for im in gt["images"]}
    for a in gt["annotations"]:
        if not a.get("iscrowd", 0):
            gt_boxes.setdefault(int(a["image_id"]), []).append([float(v) for v in a["bbox"]])
    pred_by_image: dict[int, list[Mapping[str, Any]]] = {}
    for r in results:
        pred_by_image.setdefault(int(r["image_id"]), []).append(r)
    scores: list[float] = []
    tps: list[bool] = []
    for img_id, plist in pred_by_image.items():
        plist = sorted(plist, key=lambda r: -float(r["score"]))
        g = np.asarray(gt_boxes.get(img_id, []), dtype=np.float64).reshape(-1, 4)
        p = np.asarray([r["bbox"] for r in plist], dtype=np.float64).reshape(-1, 4)
        ious = iou_matrix(p, g)
        used = np.zeros(len(g), dtype=bool)
        for i, r in enumerate(plist):
            scores.append(float(r["score"]))
            if len(g) == 0:
                tps.append(False)
                continue
            cand = np.where(used, -1.0, ious[i])
            j = int(np.argmax(cand))
            if cand[j] >= iou:
                used[j] = True
                tps.append(True)
            else:
                tps.append(False)
    n_gt = sum(len(v) for v in gt_boxes.values())
    return np.asarray(scores, dtype=np.float64), np.asarray(tps, dtype=bool), n_gt


def pr_curve(scores: np.ndarray, is_tp: np.ndarray, n_gt: int) -> list[dict[str, float]]:
    """Precision/recall/F1 at every distinct score threshold (predictions with score >= t kept)."""
    if len(scores) == 0:
        return []
    order = np.argsort(-scores, kind="stable")
    s, t = scores[order], is_tp[order]
    tp = np.cumsum(t)
    fp = np.cumsum(~t)
    # Last index of each distinct score: the point where every prediction with that score is in.
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]
    points = []
    for k in last:
        tpk, fpk = int(tp[k]), int(fp[k])
        prec = tpk / (tpk + fpk) if tpk + fpk else 0.0
        rec = tpk / n_gt if n_gt else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        points.append(
            {
                "threshold": float(s[k]),
                "precision": prec,
                "recall": rec,
                "f1": f1,
                "tp": tpk,
                "fp": fpk,
                "fn": n_gt - tpk,
            }
        )
    return points


def f1_at(points: Sequence[Mapping[str, float]], threshold: float, n_gt: int) -> dict[str, float]:
    """Precision/recall/F1 when keeping predictions with score >= ``threshold``."""
    eligible = [p for p in points if p["threshold"] >= threshold]
    if not eligible:
        return {
            "threshold": threshold,
            "precision": 0.0,
            "recall": 0.0,
            "f1": 0.0,
            "tp": 0,
            "fp": 0,
            "fn": n_gt,
        }
    p = min(eligible, key=lambda q: q["threshold"])
    return {**p, "threshold": threshold}


def evaluate(
    gt: str | os.PathLike[str] | Mapping[str, Any],
    preds: str | os.PathLike[str] | Sequence[Mapping[str, Any]] | Mapping[str, Any],
    iou: float = 0.5,
    fixed_threshold: float | None = DEFAULT_SCORE_THRESHOLD,
) -> dict[str, Any]:
    """All box metrics for ``preds`` against ``gt``.

    Keys: ``map``, ``map50``, ``map75`` (COCO), ``f1``, ``precision``, ``recall``, ``threshold``
    (best F1 over the threshold sweep), ``at_fixed`` (the same at ``fixed_threshold``, the
    production score threshold), ``n_images``, ``n_gt``, ``n_pred``, ``n_unmatched_preds`` and
    ``pr_curve`` (one point per distinct score).
    """
    gt_d = load_gt(gt)
    results, unmatched = normalise_preds(preds, gt_d)
    metrics: dict[str, Any] = dict(coco_map(gt_d, results))
    scores, is_tp, n_gt = match_greedy(gt_d, results, iou=iou)
    points = pr_curve(scores, is_tp, n_gt)
    if points:
        best = max(points, key=lambda p: (p["f1"], p["threshold"]))
    elif n_gt == 0:
        best = {"threshold": 0.0, "precision": 1.0, "recall": 1.0, "f1": 1.0, "tp": 0, "fp": 0, "fn": 0}
    else:
        best = {"threshold": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0, "tp": 0, "fp": 0, "fn": n_gt}
    metrics.update(
        {
            "f1": best["f1"],
            "precision": best["precision"],
            "recall": best["recall"],
            "threshold": best["threshold"],
            "iou": iou,
            "n_images": len(gt_d["images"]),
            "n_gt": n_gt,
            "n_pred": len(results),
            "n_unmatched_preds": unmatched,
            "pr_curve": points,
        }
    )
    if fixed_threshold is not None:
        metrics["at_fixed"] = f1_at(points, fixed_threshold, n_gt)
    return metrics


def write_report(
    metrics: Mapping[str, Any],
    json_path: str | os.PathLike[str],
    pr_parquet: str | os.PathLike[str] | None = None,
) -> None:
    """Write the metrics JSON (NaN as null) and, optionally, the PR points as Parquet."""
    write_json(json_path, json_safe(dict(metrics)))
    if pr_parquet is not None:
        write_table(list(metrics.get("pr_curve", [])), PR_SCHEMA, pr_parquet)


def json_safe(v: Any) -> Any:
    """Replace NaN/inf by None (recursively) so the output is strict JSON."""
    if isinstance(v, float) and not np.isfinite(v):
        return None
    if isinstance(v, Mapping):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_safe(x) for x in v]
    return v


def summary(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The headline numbers, without the PR curve (strict JSON)."""
    return json_safe({k: v for k, v in metrics.items() if k != "pr_curve"})
