"""The detector training stage as the workflow runs it (rule ``train_detector``).

:func:`train_stage` trains the configured backend on ``results/synth/train`` (validation on
``results/synth/val``) and writes ``train.json`` naming the backend, the checkpoint and the score
threshold chosen on the validation renders, which the decompose stage reads when
``decompose.checkpoint: trained``.  The evaluation stage is :mod:`pmcflow.detect.eval_stage`: kept
apart so that editing how detectors are evaluated (or merged by panel letter) does not retrain one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pmcflow import tables as T
from pmcflow.detect.base import Box, get_detector, run_detection
from pmcflow.detect.default import TRAIN_RECORD
from pmcflow.detect.evaluate import evaluate
from pmcflow.detect.settings import DetectorSettings

log = logging.getLogger(__name__)

def train_stage(
    dcfg: DetectorSettings, seed: int, train_dir: str, val_dir: str | None, out_dir: str
) -> dict[str, Any]:
    """Train ``detector.backend`` and write its record ``out_dir/train.json`` (:data:`TRAIN_RECORD`);
    ``seed`` is the run's, for the backends that draw random numbers."""
    out = Path(out_dir)
    detector = get_detector(dcfg.backend)
    # the run's seed, for the backends that draw random numbers (xycut has no seed parameter)
    seeded = {"seed": int(seed)} if "seed" in getattr(detector, "params", {}) else {}
    params = {**seeded, **dcfg.backend_params()}
    result = detector.train(Path(train_dir), Path(val_dir) if val_dir else None, out, params)
    record = {"backend": dcfg.backend, **result.to_json(), **_own_threshold(dcfg, result.checkpoint, val_dir)}
    T.write_json(out / TRAIN_RECORD, record)
    log.info("trained %s -> %s (%.1f images/s)", dcfg.backend, result.checkpoint, result.images_per_s)
    return record


def _own_threshold(dcfg: DetectorSettings, checkpoint: Path, val_dir: str | None) -> dict[str, Any]:
    """The threshold that travels with a trained checkpoint (``score_threshold`` in train.json,
    read by :func:`pmcflow.detect.default.resolve_threshold`): the best-F1 threshold on the
    validation renders, or none without a validation set."""
    if not val_dir or not (Path(val_dir) / "annotations.json").is_file():
        return {}
    gt = json.loads((Path(val_dir) / "annotations.json").read_text(encoding="utf-8"))
    metrics, _ = _score(dcfg, get_detector(dcfg.backend, checkpoint=checkpoint), gt, str(val_dir))
    if not isinstance(metrics.get("threshold"), int | float) or not metrics.get("f1"):
        return {}  # nothing detected on the validation set: no threshold to recommend
    return {
        "score_threshold": round(float(metrics["threshold"]), 4),
        "score_threshold_chosen_on": f"best F1@{dcfg.eval.iou} on the validation renders ({val_dir})",
    }


def _score(
    dcfg: DetectorSettings,
    detector: Any,
    gt_d: Mapping[str, Any],
    root: str,
    refine: Callable[[Any, list[Box]], list[Box]] | None = None,
) -> tuple[dict[str, Any], int]:
    """Box metrics of ``detector`` on one COCO set.  Without ``refine`` every box is scored and the
    PR sweep picks the threshold; with it (:mod:`pmcflow.detect.eval_stage`: merging by panel
    letter) the boxes are kept at ``score_threshold``, refined, then swept from there."""
    paths = [str(Path(root) / im["file_name"]) for im in gt_d["images"]]
    results = run_detection(
        detector,
        paths,
        score_threshold=dcfg.score_threshold if refine is not None else 0.0,
        nms_iou=dcfg.nms_iou,
        batch_size=dcfg.batch_size,
        refine=refine,
    )
    preds = []
    for im, res in zip(gt_d["images"], results, strict=True):
        for b in res.boxes:
            preds.append(
                {"image_id": im["id"], "category_id": 1, "bbox": b.as_list(), "score": float(b.score)}
            )
    metrics = evaluate(
        gt_d, preds, iou=dcfg.eval.iou, fixed_threshold=dcfg.score_threshold
    )
    return metrics, sum(1 for r in results if r.error)
