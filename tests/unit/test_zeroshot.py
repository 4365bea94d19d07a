"""Zero-shot modality backend (filter.modality.backend: openclip) with the tiny local open_clip model.

``tiny-vit-bpe`` has random weights (seeded): these tests check the mechanics -- prompts from the
config, class embeddings, probabilities, determinism, errors, what the filter records -- not accuracy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.filter import checks as C
from pmcflow.filter.checks import FilterSettings
from pmcflow.filter.modality import SHIPPED_CHECKPOINT, load_backend
from pmcflow.filter.stage import filter_chunk, phash_chunk
from pmcflow.filter.zeroshot import (
    DEFAULT_PROMPTS,
    ZeroShotClassifier,
    ZeroShotError,
    backend_name,
    resolve_prompts,
)

CAPTION = "Axial CT of the chest showing a ground-glass opacity in the right lower lobe."
PROMPTS = {
    "radiology": ["a CT scan", "an X-ray radiograph"],
    "histopathology": ["an H&E stained tissue section"],
    "other": ["a photograph", "a chemical structure", "a diagram"],
}


def _settings(**kw: Any) -> C.OpenClipSettings:
    oc: dict[str, Any] = {"model": "tiny-vit-bpe", "prompts": PROMPTS, "seed": 7}
    oc.update(kw)
    return C.OpenClipSettings.from_mapping(oc)


def _images() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    out = [Image.fromarray((rng.random((48 + 8 * k, 64, 3)) * 255).astype(np.uint8), "RGB") for k in range(4)]
    out.append(Image.new("L", (70, 50), 128))  # a grey image is converted
    return out


@pytest.fixture(scope="module")
def clf() -> ZeroShotClassifier:
    return ZeroShotClassifier(_settings())


def test_classes_and_prompts_come_from_the_config(clf: ZeroShotClassifier) -> None:
    assert clf.classes == ["radiology", "histopathology", "other"]
    assert clf.prompts == PROMPTS
    assert clf.text_features.shape == (3, 64)  # tiny-vit-bpe embeds in 64 dimensions
    assert np.allclose(np.linalg.norm(clf.text_features, axis=1), 1.0)
    # the class embedding is the normalised mean of its normalised prompt embeddings
    emb = clf.encoder.texts(PROMPTS["radiology"], batch_size=8).astype(np.float64)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    mean = emb.mean(0)
    assert np.allclose(clf.text_features[0], mean / np.linalg.norm(mean), atol=1e-6)
    assert clf.name == "openclip:tiny-vit-bpe@random-init(seed=7)"


def test_probabilities_shapes_sum_to_one_and_are_deterministic(clf: ZeroShotClassifier) -> None:
    images = _images()
    p = clf.probabilities(images, batch_size=2)
    assert p.shape == (len(images), 3)
    assert np.allclose(p.sum(axis=1), 1.0) and (p > 0).all()
    again = ZeroShotClassifier(_settings()).probabilities(images, batch_size=5)  # fresh model, other batching
    assert np.allclose(p, again, atol=1e-6)
    preds = clf.predict(images, batch_size=3)
    assert [lbl for lbl, _ in preds] == [clf.classes[i] for i in p.argmax(1)]
    assert [s for _, s in preds] == [round(float(v), 6) for v in p.max(1)]
    assert clf.probabilities([], batch_size=4).shape == (0, 3)


def test_other_prompts_give_other_scores(clf: ZeroShotClassifier) -> None:
    other = ZeroShotClassifier(
        _settings(
            prompts={
                "radiology": ["a chest radiograph"],
                "histopathology": ["a micrograph"],
                "other": ["a logo"],
            }
        )
    )
    assert not np.allclose(other.text_features, clf.text_features)
    assert not np.allclose(other.probabilities(_images()), clf.probabilities(_images()))
    # classes picks and orders the scored classes
    two = ZeroShotClassifier(_settings(classes=["other", "radiology"]))
    assert two.classes == ["other", "radiology"] and two.probabilities(_images()).shape == (5, 2)


def test_missing_class_or_prompt_is_a_clear_error() -> None:
    with pytest.raises(
        ZeroShotError, match=r"no prompts for class\(es\) \['retina'\].*filter\.modality\.openclip\.prompts"
    ):
        resolve_prompts(PROMPTS, ["radiology", "retina"])
    with pytest.raises(ZeroShotError, match=r"\['dermatology'\].*built-in prompts"):
        resolve_prompts(None, ["radiology", "dermatology"])
    with pytest.raises(ValueError, match=r"openclip\.prompts\.retina: \[\] should be non-empty"):
        C.OpenClipSettings.from_mapping({"prompts": {"retina": []}})
    with pytest.raises(ValueError, match=r"openclip\.prompts\.retina"):
        C.OpenClipSettings.from_mapping({"prompts": {"retina": ["  "]}})
    with pytest.raises(ValueError, match=r"filter\.modality\.openclip\.prompt: unknown key"):
        C.OpenClipSettings.from_mapping({"prompt": {}})
    with pytest.raises(ZeroShotError, match="at least two classes"):
        resolve_prompts({"radiology": ["a CT scan"]})
    with pytest.raises(ZeroShotError, match="local config, so pretrained must be a checkpoint file"):
        ZeroShotClassifier(_settings(pretrained="openai"))
    with pytest.raises(ValueError, match=r"filter\.modality\.backend: 'clip' is not one of"):
        C.FilterSettings.from_config({"filter": {"modality": {"backend": "clip"}}})
    assert resolve_prompts(None) == {c: list(p) for c, p in DEFAULT_PROMPTS.items()}


def test_backend_names() -> None:
    assert backend_name(C.OpenClipSettings.from_mapping({"model": "hf-hub:org/m"})) == "openclip:hf-hub:org/m"
    assert (
        backend_name(C.OpenClipSettings.from_mapping({"model": "ViT-B-16", "pretrained": "openai"}))
        == "openclip:ViT-B-16@openai"
    )
    named = C.OpenClipSettings.from_mapping({"model": "local-dir:/x/model", "checkpoint": "/r/epoch_2.pt"})
    assert backend_name(named) == "openclip:local-dir:/x/model+epoch_2.pt"


def test_a_trained_checkpoint_is_loaded(tmp_path: Path, clf: ZeroShotClassifier) -> None:
    """checkpoint: an open_clip state dict (what open_clip training writes) replaces the weights."""
    import torch

    donor = ZeroShotClassifier(_settings(seed=99))
    ckpt = tmp_path / "epoch_1.pt"
    torch.save({"epoch": 1, "state_dict": donor.encoder.model.state_dict()}, ckpt)
    loaded = ZeroShotClassifier(_settings(seed=7, checkpoint=str(ckpt)))
    assert loaded.name == "openclip:tiny-vit-bpe+epoch_1.pt"
    assert np.allclose(loaded.probabilities(_images()), donor.probabilities(_images()), atol=1e-6)
    assert not np.allclose(loaded.probabilities(_images()), clf.probabilities(_images()))
    with pytest.raises(ZeroShotError, match="not found"):
        ZeroShotClassifier(_settings(checkpoint=str(tmp_path / "missing.pt")))


def _chunk(tmp_path: Path) -> Path:
    rows = []
    for k in range(3):
        crop = tmp_path / f"c{k}.png"
        _images()[k].resize((96, 80)).save(crop)
        rows.append(
            {
                "subfigure_uid": f"PMC3.1/f1/s{k}",
                "figure_uid": "PMC3.1/f1",
                "article_uid": "PMC3.1",
                "pmcid": "PMC3",
                "version": 1,
                "chunk": "c0",
                "crop_path": str(crop),
                "crop_width": 96,
                "crop_height": 80,
                "license_code": "CC BY",
                "is_retracted": False,
                "caption": CAPTION,
                "subcaption": CAPTION,
            }
        )
    enr = tmp_path / "e.parquet"
    T.write_table(rows, S.ENRICHED, enr)
    return enr


def test_filter_stage_records_the_openclip_backend(tmp_path: Path, clf: ZeroShotClassifier) -> None:
    enr = _chunk(tmp_path)
    oc = {"model": "tiny-vit-bpe", "prompts": PROMPTS, "seed": 7}
    cfg: dict[str, Any] = {
        "filter": {
            "modality": {"backend": "openclip", "openclip": oc, "keep": list(PROMPTS), "drop": []},
            "dedup": {"enabled": False},
        }
    }
    phash_chunk(FilterSettings.from_config(cfg), "c0", enr, tmp_path / "phash.parquet")
    ph = T.read_rows(tmp_path / "phash.parquet")
    assert [r["modality_backend"] for r in ph] == [clf.name] * 3
    expected = clf.predict([Image.open(tmp_path / f"c{k}.png") for k in range(3)])
    assert [r["modality"] for r in ph] == [lbl for lbl, _ in expected]
    assert np.allclose(
        [r["modality_score"] for r in ph], [s for _, s in expected], atol=1e-5
    )  # stored as float32
    rec = filter_chunk(FilterSettings.from_config(cfg), "c0", enr, tmp_path / "o", phash_path=tmp_path / "phash.parquet")
    out = T.read_rows(tmp_path / "o" / "dataset.parquet")
    assert rec["kept"] == 3 and {r["modality_backend"] for r in out} == {clf.name}
    # drop every class: the rejection detail names the backend
    cfg["filter"]["modality"]["keep"], cfg["filter"]["modality"]["drop"] = [], list(PROMPTS)
    rec = filter_chunk(FilterSettings.from_config(cfg), "c0", enr, tmp_path / "o2")
    assert rec["rejected"] == {"modality_dropped": 3}
    assert all(
        f"backend={clf.name}" in r["detail"] for r in T.read_rows(tmp_path / "o2" / "rejections.parquet")
    )


def test_load_backend_dispatch() -> None:
    s = C.FilterSettings.from_config(
        {
            "filter": {
                "modality": {
                    "backend": "openclip",
                    "openclip": {"model": "tiny-vit-bpe", "prompts": PROMPTS, "seed": 7},
                }
            }
        }
    )
    b = load_backend(s.modality)
    assert isinstance(b, ZeroShotClassifier) and b is load_backend(s.modality)  # cached per settings
    t = load_backend(C.FilterSettings.from_config({}).modality)
    assert t.name == f"timm:mobilenetv3_small_050@modality.pt#{T.file_sha256(SHIPPED_CHECKPOINT)[:12]}"
    assert t.classes == ["histopathology", "microscopy", "other", "plot", "radiology", "retina"]
