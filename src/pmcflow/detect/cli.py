"""``pmcflow train-detector``, ``pmcflow detect`` and ``pmcflow eval-boxes``.

Each function takes argv (without the command name) and returns an exit code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pmcflow.detect.base import BACKENDS, DEFAULT_SCORE_THRESHOLD


def train(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="pmcflow train-detector", description="Train a subfigure detector backend."
    )
    ap.add_argument("--backend", required=True, choices=sorted(BACKENDS))
    ap.add_argument(
        "--train", required=True, type=Path, help="dataset dir (images/, annotations.json, labels/)"
    )
    ap.add_argument("--val", type=Path, default=None, help="validation dataset dir")
    ap.add_argument(
        "--out", required=True, type=Path, help="output dir (checkpoint, history, train_result.json)"
    )
    ap.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend parameter (repeatable), e.g. --set epochs=2 --set device=cuda",
    )
    args = ap.parse_args(list(argv))

    from pmcflow.config import parse_sets  # keys of detector.params.<backend>
    from pmcflow.detect.base import get_detector
    from pmcflow.tables import write_json

    params = parse_sets(args.sets)
    detector = get_detector(args.backend)
    result = detector.train(args.train, args.val, args.out, params)
    record = {"backend": args.backend, **result.to_json()}
    write_json(args.out / "train_result.json", record)
    print(json.dumps({k: v for k, v in record.items() if k != "history"}, indent=2, default=str))
    return 0


def detect(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="pmcflow detect", description="Detect subfigures; write a COCO results json."
    )
    ap.add_argument("--backend", required=True, choices=sorted(BACKENDS))
    ap.add_argument("--checkpoint", default=None, help="trained checkpoint (file or dir) of the backend")
    ap.add_argument("--out", required=True, type=Path, help="COCO results json to write")
    ap.add_argument(
        "--score-threshold",
        type=float,
        default=None,
        help=f"minimum box score (default: the checkpoint's own threshold, else {DEFAULT_SCORE_THRESHOLD})",
    )
    ap.add_argument("--nms-iou", type=float, help="NMS IoU of the kept boxes (default: detector.nms_iou's)")
    ap.add_argument("--batch-size", type=int, help="images per forward pass (default: detector.batch_size's)")
    ap.add_argument("--errors", type=Path, default=None, help="also write per-image errors as JSON here")
    ap.add_argument("--strict", action="store_true", help="exit 1 if any image could not be read")
    ap.add_argument(
        "--no-letter-merge",
        dest="letter_merge",
        action="store_false",
        help="keep the detector's boxes as they are (default: merge the boxes split off a panel whose "
        "letter the shipped label reader reads on the figure; detector.letter_merge)",
    )
    ap.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend inference parameter, e.g. --set device=cuda --set imgsz=480",
    )
    ap.add_argument("images", nargs="+", type=Path)
    args = ap.parse_args(list(argv))

    from pmcflow.config import parse_sets  # keys of detector.params.<backend>
    from pmcflow.detect.base import DetectionResult, get_detector, run_detection
    from pmcflow.detect.default import resolve_threshold
    from pmcflow.detect.settings import DetectorSettings
    from pmcflow.progress import Progress
    from pmcflow.tables import write_json

    section = DetectorSettings.from_section(None)  # what the flags leave unset: the schema's defaults
    nms_iou = section.nms_iou if args.nms_iou is None else args.nms_iou
    batch_size = section.batch_size if args.batch_size is None else args.batch_size
    detector = get_detector(args.backend, checkpoint=args.checkpoint, **parse_sets(args.sets))
    threshold, source = resolve_threshold(args.score_threshold, args.backend, args.checkpoint)
    print(f"score threshold {threshold:g} ({source})", file=sys.stderr)
    refine = None
    if args.letter_merge:
        from pmcflow.decompose.lettermerge import letter_refiner

        refine = letter_refiner()
    # Batch by batch (the batches run_detection would make), so a bar can follow; the summary line
    # below says the counts.
    bs = max(1, batch_size)
    results: list[DetectionResult] = []
    with Progress(len(args.images), desc="detect", unit="image", summary=False) as bar:
        for start in range(0, len(args.images), bs):
            batch = args.images[start : start + bs]
            results += run_detection(
                detector,
                batch,
                score_threshold=threshold,
                nms_iou=nms_iou,
                batch_size=batch_size,
                refine=refine,
            )
            bar.update(len(batch))
    rows = [
        {
            "image_id": Path(r.image).name,
            "category_id": 1,
            "bbox": b.as_list(),
            "score": round(float(b.score), 5),
        }
        for r in results
        for b in r.boxes
    ]
    write_json(args.out, rows)
    errors = [{"image": r.image, "reason": r.reason, "error": r.error} for r in results if r.error]
    for e in errors:
        print(f"pmcflow detect: skipped {e['error']}", file=sys.stderr)
    if args.errors is not None:
        write_json(args.errors, errors)
    print(
        f"pmcflow detect: {len(results) - len(errors)}/{len(results)} images, {len(rows)} boxes"
        f" ({bar.timing()}) -> {args.out}",
        file=sys.stderr,
    )
    # Nothing detected because nothing could be read is a failure, --strict or not.
    if results and len(errors) == len(results):
        print(f"pmcflow detect: error: none of the {len(results)} images could be read", file=sys.stderr)
        return 1
    return 1 if (args.strict and errors) else 0


def eval_boxes(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="pmcflow eval-boxes", description="COCO mAP and F1@IoU of predictions.")
    ap.add_argument("gt", type=Path, help="COCO ground-truth json")
    ap.add_argument("preds", type=Path, help="COCO results json (image_id = GT file name or int id)")
    ap.add_argument("--iou", type=float, default=0.5, help="IoU for F1 matching (default 0.5)")
    ap.add_argument("--fixed-threshold", type=float, default=DEFAULT_SCORE_THRESHOLD)
    ap.add_argument("--out-json", type=Path, default=None, help="write the full metrics (with PR curve) here")
    ap.add_argument("--pr-parquet", type=Path, default=None, help="write the PR points as Parquet here")
    ap.add_argument("--with-curve", action="store_true", help="include the PR curve in stdout")
    args = ap.parse_args(list(argv))

    from pmcflow.detect.evaluate import evaluate, json_safe, summary, write_report

    metrics = evaluate(args.gt, args.preds, iou=args.iou, fixed_threshold=args.fixed_threshold)
    if args.out_json is not None or args.pr_parquet is not None:
        write_report(metrics, args.out_json or args.pr_parquet.with_suffix(".json"), args.pr_parquet)
    shown = json_safe(metrics) if args.with_curve else summary(metrics)
    print(json.dumps(shown, indent=2, sort_keys=True))
    return 0
