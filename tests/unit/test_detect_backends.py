"""Learned backends: each trains 1-2 steps on a tiny synthetic set, reloads and predicts valid boxes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pmcflow_testing.detect_toydata import make_dataset

from pmcflow.detect import Box, get_detector, run_detection
from pmcflow.detect.base import read_dataset


@pytest.fixture(scope="module")
def tiny_sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return make_dataset(root / "train", 4, seed=1, size=(128, 96)), make_dataset(
        root / "val", 2, seed=2, size=(96, 128)
    )


def _check_boxes(preds: list[list[Box]], images: list[Path]) -> None:
    from PIL import Image

    assert len(preds) == len(images)
    for boxes, path in zip(preds, images, strict=True):
        w, h = Image.open(path).size
        for b in boxes:
            assert 0 <= b.x <= w and 0 <= b.y <= h and b.w > 0 and b.h > 0
            assert b.x + b.w <= w + 1e-3 and b.y + b.h <= h + 1e-3 and 0.0 <= b.score <= 1.0
        assert [b.score for b in boxes] == sorted((b.score for b in boxes), reverse=True)


def test_ultralytics_train_and_predict(tmp_path: Path, tiny_sets: tuple[Path, Path]) -> None:
    train, val = tiny_sets
    det = get_detector("ultralytics")
    res = det.train(
        train, val, tmp_path, {"epochs": 1, "imgsz": 64, "batch_size": 4, "workers": 0, "device": "cpu"}
    )
    assert res.checkpoint == tmp_path / "model.pt" and res.checkpoint.is_file()
    assert res.history and "train/box_loss" in res.history[0] and res.images_per_s > 0
    images = [it.path for it in read_dataset(val)]
    again = get_detector("ultralytics", checkpoint=tmp_path, device="cpu")
    preds = again.predict(images, score_threshold=0.0, nms_iou=0.7)
    _check_boxes(preds, images)
    assert again.params["imgsz"] == 64  # taken from the checkpoint's train args


def test_ultralytics_training_is_reproducible_and_leaves_the_dataset_alone(
    tmp_path: Path, tiny_sets: tuple[Path, Path]
) -> None:
    """Same data, params and seed, same output dir: the same model.pt bytes; no labels.cache
    (or anything else) written into the datasets, which are another rule's outputs."""
    train, val = tiny_sets
    before = sorted(p.relative_to(train.parent) for d in (train, val) for p in d.rglob("*"))
    params = {"epochs": 1, "imgsz": 64, "batch_size": 4, "workers": 0, "device": "cpu"}
    out = tmp_path / "det"
    first = get_detector("ultralytics").train(train, val, out, params).checkpoint.read_bytes()
    for p in sorted(out.iterdir()):  # a fresh run in the same place
        if p.is_dir() and not p.is_symlink():
            import shutil

            shutil.rmtree(p)
        else:
            p.unlink()
    second = get_detector("ultralytics").train(train, val, out, params).checkpoint.read_bytes()
    assert first == second
    assert sorted(p.relative_to(train.parent) for d in (train, val) for p in d.rglob("*")) == before
    # YOLO read through the mirror, and its label cache (written there) is gone afterwards
    assert (out / "data" / "train" / "images").is_symlink() and not list(out.rglob("*.cache"))
    import torch

    for w in ("model.pt", "run/weights/best.pt", "run/weights/last.pt"):  # no wall-clock dates
        assert torch.load(out / w, map_location="cpu", weights_only=False)["date"] is None


def test_transformers_train_and_predict(tmp_path: Path, tiny_sets: tuple[Path, Path]) -> None:
    train, val = tiny_sets
    det = get_detector("transformers")
    params = {
        "preset": "tiny",
        "epochs": 1,
        "imgsz": 64,
        "batch_size": 2,
        "workers": 0,
        "device": "cpu",
        "max_steps": 2,
    }
    res = det.train(train, val, tmp_path, params)
    assert (res.checkpoint / "config.json").is_file() and (res.checkpoint / "pmcflow_detector.json").is_file()
    assert res.history[0]["step"] == 2 and np.isfinite(res.history[0]["loss"]) and "val_map" in res.history[0]
    images = [it.path for it in read_dataset(val)]
    again = get_detector("transformers", checkpoint=tmp_path, device="cpu")
    preds = again.predict(images, score_threshold=0.0, nms_iou=1.0)
    _check_boxes(preds, images)
    assert again.params["imgsz"] == 64 and max(len(p) for p in preds) > 0
    # the full set of queries is returned before NMS/threshold; a threshold above every score empties it
    assert again.predict(images, score_threshold=1.01) == [[], []]


def test_transformers_drops_degenerate_boxes(tmp_path: Path) -> None:
    from pmcflow.detect.hf_dabdetr import _TrainSet

    ds = make_dataset(tmp_path, 2, seed=4, size=(64, 64))
    coco = json.loads((ds / "annotations.json").read_text())
    n_good = len(coco["annotations"])
    extra = [[10, 10, 0, 5], [70, 70, 5, 5], [3, 3, 0.4, 20]]  # zero width, outside the image, sub-pixel
    for b in extra:
        coco["annotations"].append(
            {
                "id": len(coco["annotations"]) + 1,
                "image_id": 1,
                "bbox": b,
                "area": 0,
                "iscrowd": 0,
                "category_id": 1,
            }
        )
    (ds / "annotations.json").write_text(json.dumps(coco))
    data = _TrainSet(ds, 64, 0.0, 1.0, 0)
    assert data.dropped == 3 and sum(len(b) for b in data.boxes) == n_good
    _, _, target = data[0]
    t = target["boxes"].numpy()
    assert ((t > 0) & (t <= 1)).all()


def test_transformers_preprocess_roundtrip() -> None:
    from PIL import Image

    from pmcflow.detect.hf_dabdetr import boxes_to_targets, preprocess

    canvas, mask, scale = preprocess(Image.new("RGB", (200, 100), "white"), 64)
    assert (
        canvas.shape == (3, 64, 64)
        and mask[:32].all()
        and not mask[33:].any()
        and scale == pytest.approx(0.32)
    )
    t = boxes_to_targets(np.array([[0, 0, 200, 100]]), scale, 64)
    assert t[0].tolist() == pytest.approx([0.5, 0.25, 1.0, 0.5])


def test_cli_detect_with_trained_transformers(tmp_path: Path, tiny_sets: tuple[Path, Path]) -> None:
    from pmcflow.cli import main

    train, val = tiny_sets
    out = tmp_path / "train"
    assert (
        main(
            [
                "train-detector",
                "--backend",
                "transformers",
                "--train",
                str(train),
                "--out",
                str(out),
                "--set",
                "preset=tiny",
                "--set",
                "epochs=1",
                "--set",
                "imgsz=64",
                "--set",
                "batch_size=4",
                "--set",
                "workers=0",
                "--set",
                "device=cpu",
            ]
        )
        == 0
    )
    images = [str(p) for p in sorted((val / "images").glob("*.png"))]
    preds = tmp_path / "preds.json"
    assert (
        main(
            [
                "detect",
                "--backend",
                "transformers",
                "--checkpoint",
                str(out),
                "--score-threshold",
                "0",
                "--out",
                str(preds),
                *images,
            ]
        )
        == 0
    )
    rows = json.loads(preds.read_text())
    assert all(r["category_id"] == 1 and r["image_id"].endswith(".png") for r in rows)
    res = run_detection(
        get_detector("transformers", checkpoint=out), [Path(images[0]), tmp_path / "missing.png"]
    )
    assert res[1].reason == "missing" and res[0].error is None


def test_shipped_default_detector_finds_panels(tiny_sets: tuple[Path, Path]) -> None:
    from pmcflow.detect.default import SHIPPED_DIR, default_detector, shipped_model

    found = shipped_model()
    if found is None:
        pytest.skip(f"no detector shipped in {SHIPPED_DIR}")
    backend, ckpt = found
    assert ckpt.exists() and (SHIPPED_DIR / "MODEL_CARD.md").is_file()
    name, det = default_detector(device="cpu")
    assert name == backend
    train, _ = tiny_sets
    items = read_dataset(train)
    preds = det.predict([it.path for it in items])
    _check_boxes(preds, [it.path for it in items])
    assert sum(len(p) for p in preds) > 0


def test_shipped_detector_boxes_do_not_depend_on_the_batch() -> None:
    """A figure's boxes are the same alone, beside a figure of another shape and beside one of its
    own shape: ultralytics letterboxes a batch of equal shapes differently unless told not to."""
    from PIL import Image

    from pmcflow.detect.default import shipped_model

    backend, ckpt = shipped_model()
    root = Path(__file__).resolve().parents[2] / "demo" / "real-figures"
    files = sorted((root / "images").iterdir())
    im = Image.open(files[0]).convert("RGB")
    other = next(Image.open(f).convert("RGB") for f in files[1:] if Image.open(f).size != im.size)
    detector = get_detector(backend, checkpoint=ckpt, device="cpu")

    def boxes(batch: list[Image.Image]) -> list[list[float]]:
        return [[round(v, 3) for v in (*b.as_list(), b.score)] for b in detector.predict(batch, batch_size=len(batch))[0]]

    alone = boxes([im])
    assert alone
    assert boxes([im, other]) == alone
    assert boxes([im, im.copy()]) == alone


@pytest.mark.parametrize(
    "folder, key", [("real-figures", "real_figures_metrics"), ("real-figures-test", "real_figures_test_metrics")]
)
def test_shipped_detector_numbers_are_what_it_does_on_the_real_figures(folder: str, key: str) -> None:
    """detector.json's real-figure metrics (README, model card) are re-measured here on
    demo/real-figures (development) and demo/real-figures-test (held out), all figures and the
    compound ones; its sha256 and score threshold are the shipped file's."""
    import hashlib

    from pmcflow.decompose.lettermerge import letter_refiner
    from pmcflow.detect.default import SHIPPED_DIR, checkpoint_threshold, shipped_model
    from pmcflow.detect.settings import DetectorSettings
    from pmcflow.detect.stage import _score

    backend, ckpt = shipped_model()
    meta = json.loads((SHIPPED_DIR / "detector.json").read_text())
    assert hashlib.sha256(ckpt.read_bytes()).hexdigest() == meta["sha256"]
    assert checkpoint_threshold(backend, None) == meta["score_threshold"]
    root = Path(__file__).resolve().parents[2] / "demo" / folder
    gt = json.loads((root / "annotations.json").read_text())
    compound = {im["id"] for im in gt["images"] if im["compound"]}
    sets = {
        "all": gt,
        "compound": {
            **gt,
            "images": [im for im in gt["images"] if im["id"] in compound],
            "annotations": [a for a in gt["annotations"] if a["image_id"] in compound],
        },
    }
    detector = get_detector(backend, checkpoint=ckpt, device="cpu")
    # the detector's own boxes, then with the boxes split off a lettered panel merged (the default)
    for merge, recorded in ((False, meta[key]), (True, meta[key]["letter_merged"])):
        for part, g in sets.items():
            metrics, errors = _score(DetectorSettings.from_section({}), detector, g, str(root), letter_refiner() if merge else None)
            rec = recorded[part]
            assert errors == 0 and rec["n_boxes"] == len(g["annotations"]) and rec["n_images"] == len(g["images"])
            assert metrics["f1"] == pytest.approx(rec["f1"], abs=0.01), (merge, part)
            assert metrics["at_fixed"]["f1"] == pytest.approx(rec["f1_at_0.2"], abs=0.01), (merge, part)
            assert metrics["map50"] == pytest.approx(rec["map50"], abs=0.01), (merge, part)
    assert DetectorSettings.from_section({}).letter_merge is True
