"""The detector evaluation stage as the workflow runs it (rule ``evaluate_detector``).

:func:`evaluate_stage` runs the detector this run trained (its folder, :mod:`pmcflow.detect.stage`)
and the shipped / weight-free default over each evaluation set -- the synthetic holdout, the demo
corpus figures (known panels) and any real COCO set named in ``detector.eval.real_coco`` -- and
writes ``eval.json`` plus, per detector and set, the full metrics and the PR curve.  With
``detector.letter_merge`` (default) the boxes are merged by panel letter as decomposition merges
them (:mod:`pmcflow.decompose.lettermerge`).
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
from pmcflow.detect.base import get_detector
from pmcflow.detect.default import default_detector, trained_record
from pmcflow.detect.evaluate import summary, write_report
from pmcflow.detect.settings import DetectorSettings
from pmcflow.detect.stage import _score

log = logging.getLogger(__name__)


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


def evaluate_stage(
    dcfg: DetectorSettings,
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
    out = Path(eval_path).parent
    out.mkdir(parents=True, exist_ok=True)
    trained = trained_record(trained_model) if trained_model else None
    gts = {
        name: (gt if isinstance(gt, Mapping) else json.loads(Path(gt).read_text()), root)
        for name, (gt, root) in sorted(sets.items())
    }
    report: dict[str, Any] = {"detectors": {}, "iou": dcfg.eval.iou}
    refine = None
    if dcfg.letter_merge:  # as decomposition does: boxes kept at the threshold, then merged
        from pmcflow.decompose.lettermerge import letter_refiner

        refine = letter_refiner()
    for det_name, ckpt, detector in _detectors(trained):
        entry: dict[str, Any] = {"checkpoint": ckpt, "sets": {}}
        for set_name, (gt_d, root) in gts.items():
            metrics, n_errors = _score(dcfg, detector, gt_d, root, refine)
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
    dcfg: DetectorSettings, holdout_dir: str | None
) -> dict[str, tuple[str | Mapping[str, Any], str]]:
    """The evaluation sets a run uses: synthetic holdout, demo figures, configured real COCO sets."""
    sets: dict[str, tuple[str | Mapping[str, Any], str]] = {}
    if holdout_dir:
        sets["synthetic_holdout"] = (str(Path(holdout_dir) / "annotations.json"), holdout_dir)
    demo = dcfg.eval.demo_figures
    if demo:
        corpus = Path(demo).parent / "pmc-cloud"
        sets["demo_figures"] = (demo_figures_to_coco(demo, corpus), str(corpus))
    real: Sequence[Mapping[str, Any]] = dcfg.eval.real_coco
    for item in real:
        sets[str(item["name"])] = (str(item["annotations"]), str(item["images"]))
    return sets
