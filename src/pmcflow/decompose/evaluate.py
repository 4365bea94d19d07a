"""Decomposition quality on figures with known panels (the demo corpus' ``figures.jsonl``).

For every figure image (``kind == "fig"``) the configured detector runs once; then

* **detection**: COCO mAP and F1@0.5 (:func:`pmcflow.detect.evaluate.evaluate`) of the raw detector
  boxes and of the final subfigure boxes (after clipping, tiny-box removal and the single-panel rule);
* **labels**: every ground-truth panel with a printed letter is matched to a subfigure (IoU >= 0.5,
  greedy by IoU) and its ``panel_label`` compared with the printed letter, for three strategies:
  ``reader+order`` (the stage: printed-letter reading, then caption letters in reading order),
  ``order-only`` (label reading off) and ``reader-only`` (only ``detected-label`` rows count);
  and the same with the ground-truth boxes as detections (``oracle_boxes``), which isolates
  letter assignment from detection errors.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pmcflow.decompose.order import SOURCE_DETECTED
from pmcflow.decompose.settings import DecomposeSettings
from pmcflow.decompose.stage import Planned, build_detector, load_label_reader, plan_subfigures
from pmcflow.detect.base import Box
from pmcflow.detect.evaluate import evaluate, iou_matrix, summary
from pmcflow.detect.images import load_image


@dataclass
class GTFigure:
    image: Path
    width: int
    height: int
    boxes: list[list[float]]
    labels: list[str | None]
    caption_letters: list[str]


def load_demo(figures_jsonl: str | os.PathLike[str], corpus: str | os.PathLike[str]) -> list[GTFigure]:
    """The figure images of the demo corpus (cloud layout) with their panel boxes and labels."""
    root = Path(corpus) / "pmc-cloud"
    out: list[GTFigure] = []
    with open(figures_jsonl, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("kind") != "fig" or not r.get("panels"):
                continue
            path = root / f"{r['pmcid']}.{r['version']}" / r["media"]
            out.append(
                GTFigure(
                    path,
                    int(r["width"]),
                    int(r["height"]),
                    [[float(v) for v in p["bbox"]] for p in r["panels"]],
                    [p.get("label") for p in r["panels"]],
                    list(r.get("caption_panel_labels") or []),
                )
            )
    return out


def _coco(figs: Sequence[GTFigure]) -> dict[str, Any]:
    images, anns = [], []
    for i, f in enumerate(figs):
        images.append({"id": i + 1, "file_name": str(f.image), "width": f.width, "height": f.height})
        for b in f.boxes:
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "bbox": b, "area": b[2] * b[3], "iscrowd": 0})
    return {"images": images, "annotations": anns}


def _letter(label: str | None) -> str | None:
    """The panel letter of a printed label ("A", "(b)", "C." -> "a", "b", "c"); None otherwise."""
    if not label:
        return None
    core = label.strip("().- ")
    return core.lower() if len(core) == 1 and core.isalpha() else None


@dataclass
class LabelTally:
    n_gt: int = 0  # GT panels with a printed letter
    matched: int = 0  # ... matched to a subfigure
    labelled: int = 0  # ... whose subfigure has a letter
    correct: int = 0

    def add(self, fig: GTFigure, planned: Sequence[Planned], only_source: str | None = None) -> None:
        gt_idx = [k for k, lab in enumerate(fig.labels) if _letter(lab) is not None]
        self.n_gt += len(gt_idx)
        if not gt_idx or not planned:
            return
        g = np.asarray([fig.boxes[k] for k in gt_idx], dtype=np.float64)
        p = np.asarray([[s.x, s.y, s.w, s.h] for s in planned], dtype=np.float64)
        ious = iou_matrix(g, p)
        used_gt: set[int] = set()
        used_pred: set[int] = set()
        for flat in np.argsort(-ious, axis=None, kind="stable"):
            gi, pj = divmod(int(flat), len(planned))
            if ious[gi, pj] < 0.5:
                break
            if gi in used_gt or pj in used_pred:
                continue
            used_gt.add(gi)
            used_pred.add(pj)
            self.matched += 1
            s = planned[pj]
            label = s.label if only_source is None or s.source == only_source else None
            if label is not None:
                self.labelled += 1
                self.correct += int(label == _letter(fig.labels[gt_idx[gi]]))

    def to_json(self) -> dict[str, Any]:
        return {
            "n_gt_labels": self.n_gt,
            "matched": self.matched,
            "labelled": self.labelled,
            "correct": self.correct,
            "accuracy": self.correct / self.n_gt if self.n_gt else None,  # over all printed letters
            "accuracy_matched": self.correct / self.matched if self.matched else None,
            "precision": self.correct / self.labelled if self.labelled else None,
            "coverage": self.labelled / self.matched if self.matched else None,
        }


def evaluate_decomposition(
    cfg: Mapping[str, Any], figs: Sequence[GTFigure], *, with_oracle: bool = True
) -> dict[str, Any]:
    """Detection and label metrics of the configured decomposition on ``figs`` (see module doc)."""
    dcfg = DecomposeSettings.from_config(cfg)
    info = build_detector(dcfg)
    reader = load_label_reader(dcfg) if dcfg.label_reading else None
    gt = _coco(figs)
    raw_preds: list[dict[str, Any]] = []
    final_preds: list[dict[str, Any]] = []
    tallies = {name: LabelTally() for name in ("reader+order", "order-only", "reader-only")}
    oracle = {name: LabelTally() for name in ("reader+order", "order-only", "reader-only")}
    t_detect = 0.0
    for i, f in enumerate(figs):
        im = load_image(f.image)
        t0 = time.perf_counter()
        boxes = info.detector.predict(
            [im], score_threshold=info.score_threshold, nms_iou=dcfg.nms_iou, batch_size=1
        )[0]
        t_detect += time.perf_counter() - t0
        raw_preds += [{"image_id": i + 1, "bbox": [b.x, b.y, b.w, b.h], "score": b.score} for b in boxes]
        with_reader = plan_subfigures(im, boxes, dcfg, reader, f.caption_letters)
        order_only = plan_subfigures(im, boxes, dcfg, None, f.caption_letters)
        final_preds += [{"image_id": i + 1, "bbox": [s.x, s.y, s.w, s.h], "score": s.score} for s in with_reader]
        tallies["reader+order"].add(f, with_reader)
        tallies["order-only"].add(f, order_only)
        tallies["reader-only"].add(f, with_reader, only_source=SOURCE_DETECTED)
        if with_oracle:
            gt_boxes = [Box(*b, score=1.0) for b in f.boxes]
            o_reader = plan_subfigures(im, gt_boxes, dcfg, reader, f.caption_letters)
            o_order = plan_subfigures(im, gt_boxes, dcfg, None, f.caption_letters)
            oracle["reader+order"].add(f, o_reader)
            oracle["order-only"].add(f, o_order)
            oracle["reader-only"].add(f, o_reader, only_source=SOURCE_DETECTED)
    out: dict[str, Any] = {
        "detector": info.detector_id,
        "detector_checkpoint_sha256": info.checkpoint_sha256,
        "score_threshold": info.score_threshold,
        "score_threshold_source": info.threshold_source,
        "label_reader_sha256": None if reader is None else reader.sha256,
        "n_images": len(figs),
        "n_panels": sum(len(f.boxes) for f in figs),
        "detect_images_per_s": len(figs) / t_detect if t_detect > 0 else None,
        "detection_raw": _headline(evaluate(gt, raw_preds)),
        "detection_final": _headline(evaluate(gt, final_preds)),
        "labels": {k: v.to_json() for k, v in tallies.items()},
    }
    if with_oracle:
        out["labels_oracle_boxes"] = {k: v.to_json() for k, v in oracle.items()}
    return out


def _headline(metrics: Mapping[str, Any]) -> dict[str, Any]:
    s = summary(metrics)
    keep = ("map", "map50", "map75", "f1", "precision", "recall", "threshold", "at_fixed", "n_gt", "n_pred")
    return {k: s[k] for k in keep if k in s}
