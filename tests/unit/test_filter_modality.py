"""Modality classifier: tiny training run, batched prediction, the shipped checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.filter.checks import FilterSettings
from pmcflow.filter.modality import (
    SHIPPED_CHECKPOINT,
    TrainSettings,
    load_modality_model,
    make_crops,
    predict_modality,
    registry_splits,
    train_modality,
)
from pmcflow.filter.stage import filter_chunk
from pmcflow.imageregistry import load_registry

CAPTION = "Axial CT of the chest showing a ground-glass opacity in the right lower lobe."
TINY = {"epochs": 1, "input_size": 48, "train_crops_per_class": 6, "eval_crops_per_class": 3, "batch_size": 8}


@pytest.fixture(scope="module")
def tiny_modality(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("modality")
    train_modality({"seed": 3, "filter": {"modality": {"train": TINY}}}, out)
    return out / "modality.pt"


def test_tiny_training_writes_checkpoint_and_metrics(tiny_modality: Path) -> None:
    metrics = json.loads((tiny_modality.parent / "metrics.json").read_text())
    assert set(metrics["classes"]) >= {"plot", "radiology", "microscopy"}
    assert metrics["n_train"] == 6 * len(metrics["classes"])
    assert set(metrics["heldout"]["per_class"]) == set(metrics["classes"])
    for cls, split in metrics["split"].items():
        if split["mode"] == "by-source":  # no source on both sides
            assert not set(split["train"]) & set(split["heldout"]), cls
            assert split["train"] and split["heldout"]
    img = Image.new("RGB", (70, 50), (30, 90, 150))
    preds = predict_modality([img, img.copy()], tiny_modality, batch_size=1)
    assert len(preds) == 2 and preds[0] == preds[1]
    assert preds[0][0] in metrics["classes"] and 0 < preds[0][1] <= 1


def test_training_is_deterministic(tmp_path: Path, tiny_modality: Path) -> None:
    train_modality({"seed": 3, "filter": {"modality": {"train": TINY}}}, tmp_path)
    a = json.loads((tmp_path / "metrics.json").read_text())
    b = json.loads((tiny_modality.parent / "metrics.json").read_text())
    assert a["history"] == b["history"] and a["heldout"] == b["heldout"]


def test_modality_rejections_with_a_trained_model(tmp_path: Path, tiny_modality: Path) -> None:
    crop = tmp_path / "x.png"
    rng = np.random.default_rng(0)
    Image.fromarray((rng.random((120, 160, 3)) * 255).astype(np.uint8), "RGB").save(crop)
    row: dict[str, Any] = {
        "subfigure_uid": "PMC3.1/f1/s0", "figure_uid": "PMC3.1/f1", "article_uid": "PMC3.1", "pmcid": "PMC3",
        "version": 1, "chunk": "c0", "crop_path": str(crop), "crop_width": 160, "crop_height": 120,
        "license_code": "CC BY", "is_retracted": False, "caption": CAPTION, "subcaption": CAPTION,
    }
    enr = tmp_path / "e.parquet"
    T.write_table([row], S.ENRICHED, enr)
    classes = json.loads((tiny_modality.parent / "metrics.json").read_text())["classes"]
    cfg: dict[str, Any] = {"filter": {"modality": {"checkpoint": str(tiny_modality), "keep": ["none"], "drop": []}}}
    rec = filter_chunk(FilterSettings.from_config(cfg), "c0", enr, tmp_path / "o")
    assert rec["rejected"] == {"modality_not_kept": 1}
    detail = T.read_rows(tmp_path / "o" / "rejections.parquet")[0]["detail"]
    assert any(f"modality={c}" in detail for c in classes)
    cfg = {"filter": {"modality": {"checkpoint": str(tiny_modality), "keep": classes, "drop": []}}}
    rec = filter_chunk(FilterSettings.from_config(cfg), "c0", enr, tmp_path / "o2")
    out = T.read_rows(tmp_path / "o2" / "dataset.parquet")[0]
    assert rec["kept"] == 1 and out["modality"] in classes and 0.0 < out["modality_score"] <= 1.0
    backend = f"timm:mobilenetv3_small_050@{tiny_modality.name}#{T.file_sha256(tiny_modality)[:12]}"
    assert out["modality_backend"] == backend
    assert detail.endswith(f"backend={backend}")


@pytest.mark.skipif(not SHIPPED_CHECKPOINT.is_file(), reason="no shipped modality checkpoint")
def test_shipped_checkpoint_has_other_and_is_tested_on_classifier_test_images_only() -> None:
    """The shipped model's held-out set is the registry's classifier_test entries (plus plot kinds
    it never trained on), disjoint from its training images, and no render source is among either."""
    reg = load_registry()
    mm = load_modality_model("shipped")
    card = json.loads((SHIPPED_CHECKPOINT.parent / "metrics.json").read_text())
    assert mm.classes == card["classes"] == ["histopathology", "microscopy", "other", "plot", "radiology", "retina"]
    assert card["training_data"]["registry_sha256"] == reg.sha256  # trained on this registry
    train = {sid for sp in card["split"].values() for sid in sp["train"]}
    held = {sid for sp in card["split"].values() for sid in sp["heldout"]}
    assert not train & held
    non_plot_held = {sid for sid in held if not sid.startswith("plot:")}
    assert non_plot_held == set(reg.ids("classifier_test"))
    assert {sid for sid in train if not sid.startswith("plot:")} == set(reg.ids("classifier_train"))
    assert not (train | held) & set(reg.ids("render_source"))
    assert card["heldout"]["chance"] == pytest.approx(1 / 6)
    assert sum(card["heldout"]["images_per_class"].values()) == len(held)
    assert set(card["heldout"]["per_source"]) == held


@pytest.mark.skipif(not SHIPPED_CHECKPOINT.is_file(), reason="no shipped modality checkpoint")
def test_shipped_checkpoint_classifies_heldout_crops() -> None:
    """Fresh crops (another seed) of the images the shipped model never saw, not its own eval set."""
    mm = load_modality_model("shipped")
    card = json.loads((SHIPPED_CHECKPOINT.parent / "metrics.json").read_text())
    settings = TrainSettings.for_run({"seed": card["settings"]["seed"]})
    pool, splits = registry_splits(settings, int(settings.seed or 0))
    assert [s.modality for s in splits] == mm.classes
    for s in splits:
        assert [r.source_id for r in s.heldout] == card["split"][s.modality]["heldout"]
    x, y = make_crops(pool, splits, heldout=True, per_class=12, size=mm.input_size, seed=12345)
    images = [Image.fromarray(a.permute(1, 2, 0).numpy()) for a in x]
    preds = predict_modality(images, mm, batch_size=32)
    correct = np.array([mm.classes.index(p) == int(t) for (p, _), t in zip(preds, y, strict=True)])
    chance = 1 / len(mm.classes)
    assert correct.mean() >= 2.5 * chance, correct.mean()
    # an "other" image (a chemical structure it never saw) is not forced into a medical class
    other = [Image.fromarray(a.permute(1, 2, 0).numpy()) for a, t in zip(x, y, strict=True) if mm.classes[int(t)] == "other"]
    labels = [lbl for lbl, _ in predict_modality(other, mm)]
    assert labels.count("other") / len(labels) >= 0.4, labels


def test_registry_training_never_uses_render_sources(tiny_modality: Path) -> None:
    metrics = json.loads((tiny_modality.parent / "metrics.json").read_text())
    reg = load_registry()
    used = {sid for sp in metrics["split"].values() for sid in sp["train"] + sp["heldout"]}
    assert not used & set(reg.ids("render_source"))
    assert metrics["split"]["microscopy"]["mode"] == "registry, disjoint regions of one image"
    assert metrics["split"]["radiology"]["mode"] == "registry, by image"
    assert "other" in metrics["classes"] and metrics["heldout"]["images_per_class"]["other"] == len(
        [e for e in reg.by_role("classifier_test") if e.cls == "other"]
    )


REAL_FIGURES = Path(__file__).resolve().parents[2] / "demo" / "real-figures"


@pytest.mark.parametrize("folder, key", [("real-figures", "real_panels"), ("real-figures-test", "real_panels_test")])
def test_shipped_classifier_numbers_are_what_it_does_on_real_panels(folder: str, key: str) -> None:
    """metrics.json's `real_panels` and `real_panels_test` (README, model card) are re-measured
    here: the shipped classifier on the hand-labelled panels (modality.json) of demo/real-figures
    and of the held-out demo/real-figures-test."""
    from pmcflow.filter.checks import FilterSettings
    from pmcflow.filter.modality import SHIPPED_DIR, TimmBackend, evaluate_on_panels

    root = REAL_FIGURES.parent / folder
    recorded = json.loads((SHIPPED_DIR / "metrics.json").read_text())[key]
    settings = FilterSettings.from_config({})
    res = evaluate_on_panels(TimmBackend(load_modality_model(None)), root, settings=settings)
    labels = json.loads((root / "modality.json").read_text())["labels"]
    assert res["n"] == len(labels) == len(json.loads((root / "annotations.json").read_text())["annotations"])
    assert res["counts"] == recorded["counts"]
    for key in ("accuracy", "macro_accuracy", "majority_baseline"):
        assert res[key] == pytest.approx(recorded[key], abs=0.01), key
    for key in ("accuracy", "dropped_of_should_drop", "kept_of_should_keep"):
        assert res["decision"][key] == pytest.approx(recorded["decision"][key], abs=0.01), key


def test_panel_evaluation_counts_classes_the_model_lacks_as_wrong_and_refuses_unlabelled_boxes(
    tmp_path: Path,
) -> None:
    from pmcflow.filter.modality import TimmBackend, evaluate_on_panels

    coco = json.loads((REAL_FIGURES / "annotations.json").read_text())
    first = coco["images"][0]
    anns = [a for a in coco["annotations"] if a["image_id"] == first["id"]]
    (tmp_path / "images").mkdir()
    (tmp_path / first["file_name"]).write_bytes((REAL_FIGURES / first["file_name"]).read_bytes())
    (tmp_path / "annotations.json").write_text(json.dumps({**coco, "images": [first], "annotations": anns}))
    backend = TimmBackend(load_modality_model(None))
    labels = {str(a["id"]): {"modality": "gel"} for a in anns}  # a class the classifier does not have
    (tmp_path / "modality.json").write_text(json.dumps({"labels": labels}))
    res = evaluate_on_panels(backend, tmp_path)
    assert res["n"] == len(anns) and res["accuracy"] == 0.0 and res["counts"] == {"gel": len(anns)}
    assert res["confusion"]["classes"][-1] == "gel" and res["per_class"]["gel"] == 0.0
    assert {p["truth"] for p in res["predictions"].values()} == {"gel"}
    (tmp_path / "modality.json").write_text(json.dumps({"labels": {}}))
    with pytest.raises(ValueError, match="no modality label for annotations"):
        evaluate_on_panels(backend, tmp_path)
