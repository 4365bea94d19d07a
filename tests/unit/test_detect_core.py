"""Detector core: image loading, box helpers, xycut, evaluation and the CLI contracts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from pmcflow_testing.detect_toydata import coco_annotation, make_dataset

from pmcflow.config import ConfigError
from pmcflow.detect import Box, get_detector, load_image, run_detection
from pmcflow.detect.base import backend_params, nms_boxes, param_defaults, read_dataset, sanitize_boxes
from pmcflow.detect.evaluate import evaluate, iou_matrix, pr_curve, write_report
from pmcflow.detect.images import ImageError


@pytest.fixture(scope="module")
def grid_ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("grid"), 12, seed=3)


def _gt(boxes_per_image: list[list[list[float]]]) -> dict:
    images, anns = [], []
    for i, boxes in enumerate(boxes_per_image):
        images.append({"id": i + 1, "file_name": f"im{i}.png", "width": 200, "height": 200})
        for b in boxes:
            anns.append(coco_annotation(len(anns) + 1, i + 1, b))
    return {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "subfigure"}]}


GT_BOXES = [[[10.0, 10.0, 80.0, 80.0], [110.0, 10.0, 80.0, 80.0]], [[5.0, 5.0, 190.0, 90.0]]]


# ---------------------------------------------------------------------------------------- images
def test_load_image_modes_are_normalised(tmp_path: Path) -> None:
    rgb = np.zeros((20, 30, 3), np.uint8)
    rgb[..., 0] = 200
    Image.fromarray(rgb).convert("CMYK").save(tmp_path / "cmyk.jpg")
    Image.fromarray((np.arange(600).reshape(20, 30) * 100).astype(np.uint16)).save(tmp_path / "g16.png")
    Image.fromarray(rgb).convert("P").save(tmp_path / "pal.png")
    frames = [Image.new("RGB", (30, 20), c) for c in ((255, 0, 0), (0, 255, 0))]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    Image.new("LA", (30, 20), (0, 0)).save(tmp_path / "la.png")
    for name in ("cmyk.jpg", "g16.png", "pal.png", "anim.gif", "la.png"):
        img = load_image(tmp_path / name)
        assert img.mode == "RGB" and img.size == (30, 20), name
    g16 = np.asarray(load_image(tmp_path / "g16.png"))
    assert g16.min() == 0 and g16.max() == 255  # stretched, not clipped at 255
    assert tuple(np.asarray(load_image(tmp_path / "la.png"))[0, 0]) == (255, 255, 255)  # transparent -> white
    assert np.asarray(load_image(tmp_path / "anim.gif"))[0, 0, 0] > 200  # first frame (red)


def test_load_image_errors(tmp_path: Path) -> None:
    (tmp_path / "junk.png").write_bytes(b"not an image at all")
    buf = tmp_path / "full.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buf)
    (tmp_path / "trunc.png").write_bytes(buf.read_bytes()[:400])
    Image.new("L", (3000, 3000)).save(tmp_path / "big.png")
    cases = {"junk.png": "unreadable", "trunc.png": "truncated", "missing.png": "missing"}
    for name, reason in cases.items():
        with pytest.raises(ImageError) as exc:
            load_image(tmp_path / name)
        assert exc.value.reason == reason, (name, exc.value)
    with pytest.raises(ImageError) as exc:
        load_image(tmp_path / "big.png", max_pixels=1_000_000)
    assert exc.value.reason == "too_large"


def test_bad_images_do_not_stop_the_batch(tmp_path: Path, grid_ds: Path) -> None:
    (tmp_path / "junk.png").write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    good = sorted((grid_ds / "images").glob("*.png"))[:2]
    paths = [good[0], tmp_path / "junk.png", tmp_path / "nope.jpg", good[1]]
    res = run_detection(get_detector("xycut"), paths, score_threshold=0.0)
    assert [r.error is None for r in res] == [True, False, False, True]
    assert (
        res[0].boxes
        and res[3].boxes
        and res[1].reason in {"unreadable", "truncated"}
        and res[2].reason == "missing"
    )


# ----------------------------------------------------------------------------------------- boxes
def test_sanitize_boxes_filters_degenerate() -> None:
    boxes = np.array(
        [
            [10, 10, 50, 50],
            [5, 5, 0, 10],
            [190, 10, 30, 30],
            [-20, -20, 10, 10],
            [1, 1, np.nan, 3],
            [0, 0, 0.5, 9],
        ]
    )
    clipped, keep = sanitize_boxes(boxes, 200, 100)
    assert keep.tolist() == [True, False, True, False, False, False]
    assert clipped[2].tolist() == [190, 10, 10, 30]


def test_nms_keeps_best() -> None:
    boxes = [Box(0, 0, 10, 10, 0.5), Box(1, 1, 10, 10, 0.9), Box(50, 50, 5, 5, 0.3)]
    kept = nms_boxes(boxes, 0.2)
    assert [b.score for b in kept] == [0.9, 0.3]
    assert len(nms_boxes(boxes, 1.0)) == 3


# ----------------------------------------------------------------------------------------- xycut
def test_xycut_finds_clean_grid_panels(grid_ds: Path) -> None:
    det = get_detector("xycut")
    for item in read_dataset(grid_ds):
        (boxes,) = det.predict([item.path], score_threshold=0.0)
        assert len(boxes) == len(item.boxes), item.path
        ious = iou_matrix(np.array([[b.x, b.y, b.w, b.h] for b in boxes]), item.boxes)
        assert (ious.max(axis=0) > 0.9).all()


@pytest.mark.parametrize("bg", [(0, 0, 120), (90, 120, 90)])
def test_xycut_non_white_background(tmp_path: Path, bg: tuple[int, int, int]) -> None:
    ds = make_dataset(tmp_path, 4, seed=7, background=bg)
    preds = {it.path.name: get_detector("xycut").predict([it.path], 0.0)[0] for it in read_dataset(ds)}
    assert evaluate(ds / "annotations.json", preds)["f1"] > 0.9


def test_xycut_train_records_and_tunes(tmp_path: Path, grid_ds: Path) -> None:
    det = get_detector("xycut")
    res = det.train(
        grid_ds,
        grid_ds,
        tmp_path / "out",
        {"tune": True, "tune_max_images": 4, "tune_min_gutter_px": [3, 5], "tune_bg_tolerance": [30]},
    )
    saved = json.loads(res.checkpoint.read_text())
    assert saved["params"]["min_gutter_px"] in (3, 5) and len(saved["history"]) == 3
    assert saved["val"]["f1"] > 0.9
    again = get_detector("xycut", checkpoint=res.checkpoint)
    assert again.params == det.params
    with pytest.raises(ConfigError, match=r"detector\.params\.xycut.*min_gutter"):
        get_detector("xycut", min_gutter=3)


def test_backend_params_are_checked_by_the_config_loader() -> None:
    """One loader, one policy: a backend's parameters are filled and checked by the schema, as in a
    config file, and the error names the key's path."""
    p = backend_params("ultralytics", {"epochs": 3}, {"imgsz": 320, "ultralytics.save_period": 1})
    assert p["epochs"] == 3 and p["imgsz"] == 320 and p["ultralytics.save_period"] == 1
    assert p["batch_size"] == param_defaults("ultralytics")["batch_size"] and p["seed"] == 0
    with pytest.raises(ConfigError, match=r"detector\.params\.ultralytics\.epochs"):
        backend_params("ultralytics", {"epochs": 0})  # minimum 1
    with pytest.raises(ConfigError, match=r"detector\.params\.transformers\.preset"):
        backend_params("transformers", {"preset": "r101"})  # enum
    with pytest.raises(ConfigError, match="mmdet.lr"):
        backend_params("transformers", {"mmdet.lr": 1.0})  # another backend's pass-through prefix
    with pytest.raises(ConfigError, match="bogus"):
        get_detector("ultralytics", bogus=1)


def test_detect_cli_sets_read_as_the_config_loader_reads_them() -> None:
    from pmcflow.config import parse_override, parse_sets

    sets = parse_sets(
        ["lr=1e-4", "epochs=3", "device=cpu", "amp=false", "tune_bg_tolerance=[15, 30]", "init="]
    )
    assert sets == {
        "lr": 1e-4,
        "epochs": 3,
        "device": "cpu",
        "amp": False,
        "tune_bg_tolerance": [15, 30],
        "init": "",
    }
    assert parse_override("train.lr=-2.5E+3") == {"train": {"lr": -2500.0}}
    assert parse_override("x.name=1e-4x") == {"x": {"name": "1e-4x"}}  # not a number: stays a string
    assert parse_override("x.name='1e-4'") == {"x": {"name": "1e-4"}}  # quoted: a string
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_sets(["epochs"])


# ------------------------------------------------------------------------------------ evaluation
def test_eval_perfect_shifted_and_empty() -> None:
    gt = _gt(GT_BOXES)
    perfect = [
        {"image_id": f"im{i}.png", "category_id": 1, "bbox": b, "score": 0.9}
        for i, bs in enumerate(GT_BOXES)
        for b in bs
    ]
    m = evaluate(gt, perfect)
    assert m["map"] == pytest.approx(1.0) and m["map50"] == pytest.approx(1.0) and m["f1"] == 1.0
    shifted = [{**p, "bbox": [p["bbox"][0] + 15, p["bbox"][1] + 15, *p["bbox"][2:]]} for p in perfect]
    ms = evaluate(gt, shifted)
    assert ms["map"] < 0.7 and ms["f1"] <= 1.0
    far = [{**p, "bbox": [p["bbox"][0] + 60, *p["bbox"][1:]]} for p in perfect]
    assert evaluate(gt, far)["f1"] < 0.5
    empty = evaluate(gt, [])
    assert empty["map"] == 0.0 and empty["f1"] == 0.0 and empty["recall"] == 0.0


def test_eval_threshold_sweep_and_int_ids() -> None:
    gt = _gt(GT_BOXES)
    preds = [
        {"image_id": 1, "bbox": GT_BOXES[0][0], "score": 0.9},
        {"image_id": 1, "bbox": GT_BOXES[0][1], "score": 0.8},
        {"image_id": 2, "bbox": GT_BOXES[1][0], "score": 0.7},
        {"image_id": 2, "bbox": [0, 150, 30, 30], "score": 0.3},
        {"image_id": 1, "bbox": GT_BOXES[0][0], "score": 0.6},
        {"image_id": "other.png", "bbox": [0, 0, 1, 1], "score": 1.0},
    ]
    m = evaluate(gt, preds)
    assert m["f1"] == 1.0 and m["threshold"] == 0.7 and m["n_unmatched_preds"] == 1
    assert [round(p["precision"], 3) for p in m["pr_curve"]] == [1.0, 1.0, 1.0, 0.75, 0.6]
    assert m["at_fixed"]["precision"] == 0.6 and m["at_fixed"]["recall"] == 1.0


def test_pr_curve_ties_grouped() -> None:
    pts = pr_curve(np.array([0.5, 0.5, 0.4]), np.array([True, False, True]), 3)
    assert [p["threshold"] for p in pts] == [0.5, 0.4] and pts[0]["tp"] == 1 and pts[0]["fp"] == 1


def test_write_report(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    m = evaluate(_gt(GT_BOXES), [{"image_id": 1, "bbox": GT_BOXES[0][0], "score": 0.5}])
    write_report(m, tmp_path / "m.json", tmp_path / "pr.parquet")
    assert json.loads((tmp_path / "m.json").read_text())["n_pred"] == 1
    assert pq.read_table(tmp_path / "pr.parquet").num_rows == 1
    no_gt = evaluate(
        {"images": [{"id": 1, "file_name": "a.png", "width": 9, "height": 9}], "annotations": []}, []
    )
    assert math.isnan(no_gt["map"]) and no_gt["f1"] == 1.0


# ------------------------------------------------------------------------------------------- CLI
def test_cli_detect_and_eval(tmp_path: Path, grid_ds: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pmcflow.cli import main

    (tmp_path / "bad.png").write_bytes(b"broken")
    images = sorted(str(p) for p in (grid_ds / "images").glob("*.png"))
    out = tmp_path / "preds.json"
    assert (
        main(
            [
                "detect",
                "--backend",
                "xycut",
                "--out",
                str(out),
                "--errors",
                str(tmp_path / "err.json"),
                *images,
                str(tmp_path / "bad.png"),
            ]
        )
        == 0
    )
    rows = json.loads(out.read_text())
    assert rows and set(rows[0]) == {"image_id", "category_id", "bbox", "score"}
    assert rows[0]["image_id"].endswith(".png") and rows[0]["category_id"] == 1 and len(rows[0]["bbox"]) == 4
    assert json.loads((tmp_path / "err.json").read_text())[0]["reason"] == "unreadable"
    capsys.readouterr()
    assert (
        main(
            [
                "eval-boxes",
                str(grid_ds / "annotations.json"),
                str(out),
                "--pr-parquet",
                str(tmp_path / "pr.parquet"),
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed["map"] == pytest.approx(1.0) and printed["f1"] == 1.0 and "pr_curve" not in printed
    assert (tmp_path / "pr.parquet").is_file() and (tmp_path / "pr.json").is_file()
    assert (
        main(["detect", "--backend", "xycut", "--strict", "--out", str(out), str(tmp_path / "bad.png")]) == 1
    )


def test_cli_train_xycut(tmp_path: Path, grid_ds: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pmcflow.cli import main

    assert (
        main(
            [
                "train-detector",
                "--backend",
                "xycut",
                "--train",
                str(grid_ds),
                "--val",
                str(grid_ds),
                "--out",
                str(tmp_path),
                "--set",
                "min_gutter_px=4",
            ]
        )
        == 0
    )
    rec = json.loads((tmp_path / "train_result.json").read_text())
    assert rec["backend"] == "xycut" and rec["params"]["min_gutter_px"] == 4
    assert Path(rec["checkpoint"]).is_file()


def test_xycut_splits_abutting_panels_at_seams(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    img = np.full((120, 200, 3), 255, np.uint8)
    img[10:110, 10:100] = (rng.normal(60, 6, (100, 90, 3))).clip(0, 255).astype(np.uint8)  # dark texture
    img[10:110, 100:190] = (
        (rng.normal(190, 6, (100, 90, 3))).clip(0, 255).astype(np.uint8)
    )  # light texture, no gap
    img[50, 20:90] = 255  # a thin line inside a panel is not a seam
    Image.fromarray(img).save(tmp_path / "abut.png")
    gt = np.array([[10, 10, 90, 100], [100, 10, 90, 100]], float)
    (boxes,) = get_detector("xycut").predict([tmp_path / "abut.png"], score_threshold=0.0)
    assert len(boxes) == 2
    assert (iou_matrix(np.array([[b.x, b.y, b.w, b.h] for b in boxes]), gt).max(axis=0) > 0.9).all()
    (merged,) = get_detector("xycut", seam_split=False).predict([tmp_path / "abut.png"], score_threshold=0.0)
    assert len(merged) == 1
