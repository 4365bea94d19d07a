"""``pmcflow decompose --out DIR IMAGE...``: decompose ad-hoc images with the stage's own code.

Writes ``DIR/subfigures.json`` (a list, one object per subfigure: ``image``, ``bbox`` [x, y, w, h],
``score``, ``panel_label``, ``label_source``, ``is_single_panel``, ``crop``) and the crops under
``DIR/crops/``; images that cannot be used are listed in ``DIR/rejections.json`` and on stderr.
Exit status 1 if any image was rejected and ``--strict`` is given.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pmcflow import schema as S
from pmcflow import tables as T


def _figure_rows(images: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for i, img in enumerate(images):
        stem = Path(img).stem
        rows.append(
            {
                "figure_uid": f"images/{i}",
                "article_uid": "images",
                "pmcid": "-",
                "version": 0,
                "chunk": "cli",
                "figure_id": f"{i:04d}_{stem}",
                "caption": None,
                "graphics": [img],
                "graphic_paths": [img],
            }
        )
    return rows


def cli(argv: Sequence[str] | None = None) -> int:
    from pmcflow.config import load_config, parse_sets
    from pmcflow.decompose.settings import DecomposeSettings
    from pmcflow.decompose.stage import decompose_chunk
    from pmcflow.detect.base import DEFAULT_SCORE_THRESHOLD

    ap = argparse.ArgumentParser(prog="pmcflow decompose", description=__doc__.split("\n")[0])
    ap.add_argument("images", nargs="+", metavar="IMAGE")
    ap.add_argument("--out", required=True, help="output folder (subfigures.json, crops/)")
    ap.add_argument(
        "--config", "-c", action="append", default=[], metavar="FILE",
        help="config file(s) whose decompose section is the starting point (default: the schema's defaults)",
    )
    # Each option below overrides that one decompose key; unset, the config's (or the schema's) value.
    ap.add_argument("--backend", help="auto (shipped detector, else xycut) or a backend name")
    ap.add_argument("--checkpoint", help="'shipped', a checkpoint path, or 'none'")
    ap.add_argument(
        "--score-threshold", type=float,
        help=f"minimum box score (default: the checkpoint's own threshold, else {DEFAULT_SCORE_THRESHOLD})",
    )
    ap.add_argument("--nms-iou", type=float)
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--min-box-px", type=int)
    ap.add_argument("--crop-format", choices=("png", "source"))
    ap.add_argument("--no-label-reading", action="store_true", help="do not read printed panel letters")
    ap.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="params",
        help="detector parameter (repeatable), e.g. --set min_gutter_px=5",
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 if any image was rejected")
    args = ap.parse_args(argv)

    section = dict(load_config(args.config).get("decompose") or {}) if args.config else {}
    flags = {
        "backend": args.backend,
        "checkpoint": args.checkpoint,
        "score_threshold": args.score_threshold,
        "nms_iou": args.nms_iou,
        "batch_size": args.batch_size,
        "min_box_px": args.min_box_px,
        "crop_format": args.crop_format,
    }
    section.update({k: v for k, v in flags.items() if v is not None})
    if str(section.get("checkpoint", "")).lower() == "none":
        section["checkpoint"] = None
    if args.no_label_reading:
        section["label_reading"] = False
    if args.params:
        section["detector_params"] = {**(section.get("detector_params") or {}), **parse_sets(args.params)}
    settings = DecomposeSettings.from_section(section)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".decompose-", dir=out) as tmp:
        figs = Path(tmp) / "figures.parquet"
        T.write_table(_figure_rows(args.images), S.FIGURES, figs)
        work = Path(tmp) / "stage"
        decompose_chunk(settings, "cli", str(figs), str(work))
        crops = out / "crops"
        if crops.exists():
            shutil.rmtree(crops)
        src_dir = work / "crops" / "images"
        crops.mkdir(parents=True)
        if src_dir.is_dir():
            for f in sorted(src_dir.iterdir()):
                shutil.move(str(f), crops / f.name)
        subs = T.read_rows(work / "subfigures.parquet")
        rejections = T.read_rows(work / "rejections.parquet")
    records = [
        {
            "image": r["image_path"],
            "bbox": [float(v) for v in r["bbox"]],
            "score": float(r["score"]),
            "panel_label": r["panel_label"],
            "label_source": r["label_source"],
            "is_single_panel": bool(r["is_single_panel"]),
            "subfigure_index": int(r["subfigure_index"]),
            "crop": str(crops / Path(r["crop_path"]).name),
            "crop_width": int(r["crop_width"]),
            "crop_height": int(r["crop_height"]),
            "detector": r["detector"],
            "detector_checkpoint_sha256": r["detector_checkpoint_sha256"],
        }
        for r in subs
    ]
    index = {f"images/{i}/g0": img for i, img in enumerate(args.images)}
    bad = [{"image": index.get(r["item_id"], r["item_id"]), "reason": r["reason"], "detail": r["detail"]} for r in rejections]
    T.write_json(out / "subfigures.json", records)
    T.write_json(out / "rejections.json", bad)
    for b in bad:
        print(f"rejected {b['image']}: {b['reason']}: {b['detail']}", file=sys.stderr)
    n_img = len(args.images) - len(bad)
    print(f"{n_img} image(s) -> {len(records)} subfigure(s) in {out}", file=sys.stderr)
    return 1 if args.strict and bad else 0


if __name__ == "__main__":
    raise SystemExit(cli())
