"""The detector stage as the workflow runs it: train on the rendered set, evaluate on every set.

* :func:`train_stage` trains the configured backend on ``results/synth/train`` (validation on
  ``results/synth/val``) and writes ``train.json`` naming the backend and checkpoint, which the
  decompose stage reads when ``decompose.checkpoint: trained``.
* :func:`evaluate_stage` runs that detector (or the shipped / weight-free one) over each evaluation
  set -- the synthetic holdout, the demo corpus figures (known panels) and any real COCO set named in
  ``detector.eval.real_coco`` -- and writes ``eval.json`` plus one PR-curve Parquet per set.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pmcflow import layout
from pmcflow import tables as T
from pmcflow.config import section as config_section
from pmcflow.detect.base import get_detector, run_detection
from pmcflow.detect.default import TRAIN_RECORD, default_detector, trained_record
from pmcflow.detect.evaluate import evaluate, summary, write_report

log = logging.getLogger(__name__)

def section(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The ``detector`` section with the schema's defaults (config/schema/config.schema.yaml)."""
    return config_section(cfg, "detector")


def train_stage(cfg: Mapping[str, Any], train_dir: str, val_dir: str | None, out_dir: str) -> dict[str, Any]:
    """Train ``detector.backend`` and write its record ``out_dir/train.json`` (:data:`TRAIN_RECORD`)."""
    dcfg = section(cfg)
    out = Path(out_dir)
    detector = get_detector(dcfg["backend"])
    # the run's seed, for the backends that draw random numbers (xycut has no seed parameter)
    seed = {"seed": int(cfg.get("seed", 0))} if "seed" in getattr(detector, "params", {}) else {}
    params = {**seed, **dict(dcfg["params"].get(dcfg["backend"]) or {})}
    result = detector.train(Path(train_dir), Path(val_dir) if val_dir else None, out, params)
    record = {"backend": dcfg["backend"], **result.to_json(), **_own_threshold(dcfg, result.checkpoint, val_dir)}
    T.write_json(out / TRAIN_RECORD, record)
    log.info("trained %s -> %s (%.1f images/s)", dcfg["backend"], result.checkpoint, result.images_per_s)
    return record


def _own_threshold(dcfg: Mapping[str, Any], checkpoint: Path, val_dir: str | None) -> dict[str, Any]:
    """The threshold that travels with a trained checkpoint (``score_threshold`` in train.json,
    read by :func:`pmcflow.detect.default.resolve_threshold`): the best-F1 threshold on the
    validation renders, or none without a validation set."""
    if not val_dir or not (Path(val_dir) / "annotations.json").is_file():
        return {}
    gt = json.loads((Path(val_dir) / "annotations.json").read_text(encoding="utf-8"))
    metrics, _ = _score(dcfg, get_detector(dcfg["backend"], checkpoint=checkpoint), gt, str(val_dir))
    if not isinstance(metrics.get("threshold"), int | float) or not metrics.get("f1"):
        return {}  # nothing detected on the validation set: no threshold to recommend
    return {
        "score_threshold": round(float(metrics["threshold"]), 4),
        "score_threshold_chosen_on": f"best F1@{dcfg['eval']['iou']} on the validation renders ({val_dir})",
    }


def demo_figures_to_coco(
    figures_jsonl: str | os.PathLike[str], corpus_root: str | os.PathLike[str]
) -> dict[str, Any]:
    """COCO ground truth for the demo corpus figures (panel boxes the compositor drew).

    ``file_name`` is the image path inside the cloud layout (``PMC<id>.<v>/<media>``).
    """
    images, anns = [], []
    with open(figures_jsonl, encoding="utf-8") as fh:
        for img_id, line in enumerate(fh, start=1):
            rec = json.loads(line)
            if rec.get("kind") != "fig":
                continue
            name = f"{rec['pmcid']}.{rec['version']}/{rec['media']}"
            if not (Path(corpus_root) / name).is_file():
                continue
            images.append({"id": img_id, "file_name": name, "width": rec["width"], "height": rec["height"]})
            for k, p in enumerate(rec["panels"]):
                x, y, w, h = p["bbox"]
                anns.append(
                    {
                        "id": img_id * 100 + k,
                        "image_id": img_id,
                        "category_id": 1,
                        "bbox": [x, y, w, h],
                        "area": w * h,
                        "iscrowd": 0,
                    }
                )
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "subfigure"}]}


def _detectors(trained: Mapping[str, Any] | None) -> list[tuple[str, str, Any]]:
    """(name, checkpoint, detector) to evaluate: the trained one (if any) and the default one."""
    out = []
    if trained is not None:
        out.append(
            (
                f"{trained['backend']}-trained",
                str(trained["checkpoint"]),
                get_detector(trained["backend"], checkpoint=trained["checkpoint"]),
            )
        )
    name, det = default_detector()
    out.append((f"{name}-default", "shipped" if name != "xycut" else "weight-free", det))
    return out


def _score(
    dcfg: Mapping[str, Any], detector: Any, gt_d: Mapping[str, Any], root: str
) -> tuple[dict[str, Any], int]:
    paths = [str(Path(root) / im["file_name"]) for im in gt_d["images"]]
    refine = None
    if dcfg["letter_merge"]:  # boxes kept at the threshold, then merged: the sweep starts there
        from pmcflow.decompose.lettermerge import letter_refiner

        refine = letter_refiner()
    results = run_detection(
        detector,
        paths,
        # without merging score everything; the PR sweep picks the threshold
        score_threshold=float(dcfg["score_threshold"]) if refine is not None else 0.0,
        nms_iou=float(dcfg["nms_iou"]),
        batch_size=int(dcfg["batch_size"]),
        refine=refine,
    )
    preds = []
    for im, res in zip(gt_d["images"], results, strict=True):
        for b in res.boxes:
            preds.append(
                {"image_id": im["id"], "category_id": 1, "bbox": b.as_list(), "score": float(b.score)}
            )
    metrics = evaluate(
        gt_d, preds, iou=float(dcfg["eval"]["iou"]), fixed_threshold=float(dcfg["score_threshold"])
    )
    return metrics, sum(1 for r in results if r.error)


def evaluate_stage(
    cfg: Mapping[str, Any],
    sets: Mapping[str, tuple[str | Mapping[str, Any], str]],
    eval_path: str | os.PathLike[str],
    *,
    trained_model: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Evaluate on ``sets`` = {name: (COCO gt json path or dict, image root)} the shipped default
    detector and, with ``trained_model`` (the folder :func:`train_stage` wrote), the trained one.

    Writes ``eval_path`` (the rule's ``eval``) = {"detectors": {name: {"checkpoint", "sets": {set:
    metrics summary}}}} and beside it, per detector and set, the full metrics and the PR curve
    (named by :func:`pmcflow.layout.detector_metrics` and :func:`~pmcflow.layout.detector_pr`).
    """
    dcfg = section(cfg)
    out = Path(eval_path).parent
    out.mkdir(parents=True, exist_ok=True)
    trained = trained_record(trained_model) if trained_model else None
    gts = {
        name: (gt if isinstance(gt, Mapping) else json.loads(Path(gt).read_text()), root)
        for name, (gt, root) in sorted(sets.items())
    }
    report: dict[str, Any] = {"detectors": {}, "iou": float(dcfg["eval"]["iou"])}
    for det_name, ckpt, detector in _detectors(trained):
        entry: dict[str, Any] = {"checkpoint": ckpt, "sets": {}}
        for set_name, (gt_d, root) in gts.items():
            metrics, n_errors = _score(dcfg, detector, gt_d, root)
            write_report(
                metrics,
                out / Path(layout.detector_metrics(det_name, set_name)).name,
                out / Path(layout.detector_pr(det_name, set_name)).name,
            )
            entry["sets"][set_name] = {**summary(metrics), "n_errors": n_errors}
            log.info("eval %s on %s: %s", det_name, set_name, entry["sets"][set_name])
        report["detectors"][det_name] = entry
    T.write_json(eval_path, report)
    return report


def eval_sets_from_config(
    cfg: Mapping[str, Any], holdout_dir: str | None
) -> dict[str, tuple[str | Mapping[str, Any], str]]:
    """The evaluation sets a run uses: synthetic holdout, demo figures, configured real COCO sets."""
    dcfg = section(cfg)
    sets: dict[str, tuple[str | Mapping[str, Any], str]] = {}
    if holdout_dir:
        sets["synthetic_holdout"] = (str(Path(holdout_dir) / "annotations.json"), holdout_dir)
    demo = dcfg["eval"].get("demo_figures")
    if demo:
        corpus = Path(demo).parent / "pmc-cloud"
        sets["demo_figures"] = (demo_figures_to_coco(demo, corpus), str(corpus))
    real: Sequence[Mapping[str, str]] = dcfg["eval"].get("real_coco") or []
    for item in real:
        sets[str(item["name"])] = (str(item["annotations"]), str(item["images"]))
    return sets
