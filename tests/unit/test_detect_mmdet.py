"""mmdet DAB-DETR backend: tiny config trains one iteration with the mmengine Runner, reloads, predicts.

Skipped only when mmcv (with compiled ops) is absent -- ``make venv`` builds it, so CI runs these.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pmcflow_testing.detect_toydata import make_dataset

from pmcflow.detect import get_detector
from pmcflow.detect.base import read_dataset
from pmcflow.detect.mm_dabdetr import MMCV_HINT, MmcvMissingError, mmcv_available

needs_mmcv = pytest.mark.skipif(not mmcv_available(), reason=f"mmcv with ops is not installed: {MMCV_HINT}")


def test_missing_mmcv_gives_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kw: object) -> object:
        if name == "mmcv._ext" or name == "mmcv":
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(MmcvMissingError, match="scripts/setup/build_mmcv.sh"):
        get_detector("mmdet")


@needs_mmcv
def test_config_changes() -> None:
    from pmcflow.detect.base import backend_params
    from pmcflow.detect.mm_dabdetr import build_config

    cfg = build_config(
        backend_params("mmdet", {"preset": "tiny", "imgsz": 96}), Path("/data/train"), None, Path("/tmp/w")
    )
    assert cfg.model.bbox_head.num_classes == 1 and cfg.model.backbone.init_cfg is None
    assert (
        cfg.model.backbone.depth == 18 and cfg.model.neck.in_channels == [512] and cfg.model.num_queries == 20
    )
    assert cfg.train_dataloader.dataset.metainfo["classes"] == ("subfigure",)
    assert cfg.val_dataloader is None and cfg.train_pipeline[3]["scale"] == (96, 96)
    assert "paramwise_cfg" not in cfg.optim_wrapper  # lr_backbone == lr: one group
    tuned = build_config(
        backend_params("mmdet", {"lr": 1e-4, "lr_backbone": 1e-5}), None, None, Path("/tmp/w")
    )
    assert tuned.optim_wrapper.paramwise_cfg.custom_keys["backbone"]["lr_mult"] == pytest.approx(0.1)


@needs_mmcv
@pytest.mark.slow
def test_mmdet_train_and_predict(tmp_path: Path) -> None:
    train = make_dataset(tmp_path / "train", 2, seed=1, size=(96, 96))
    val = make_dataset(tmp_path / "val", 2, seed=2, size=(96, 80))
    det = get_detector("mmdet")
    params = {"preset": "tiny", "epochs": 1, "imgsz": 64, "batch_size": 2, "workers": 0, "log_every": 1}
    res = det.train(train, val, tmp_path / "out", params)
    assert res.checkpoint.name == "model.pth" and res.checkpoint.is_file()
    assert (tmp_path / "out" / "model_config.py").is_file()
    assert not [p for p in (tmp_path / "out").glob("*.pth") if p.name != "model.pth"]
    assert any("coco/bbox_mAP" in row for row in res.history)
    images = [it.path for it in read_dataset(val)]
    again = get_detector("mmdet", checkpoint=tmp_path / "out", device="cpu")
    preds = again.predict(images, score_threshold=0.0, nms_iou=1.0)
    assert len(preds) == 2 and max(len(p) for p in preds) > 0
    for boxes, it in zip(preds, read_dataset(val), strict=True):
        for b in boxes:
            assert b.w > 0 and b.h > 0 and b.x + b.w <= it.width + 1e-3 and b.y + b.h <= it.height + 1e-3
    out = tmp_path / "preds.json"
    from pmcflow.cli import main

    assert (
        main(
            [
                "detect",
                "--backend",
                "mmdet",
                "--checkpoint",
                str(tmp_path / "out"),
                "--out",
                str(out),
                *map(str, images),
            ]
        )
        == 0
    )
    assert isinstance(json.loads(out.read_text()), list)

    # init: a second run starts from the first one's weights (mmengine load_from). At a learning
    # rate of ~0 its parameters stay the loaded ones; a run without init starts elsewhere.
    import torch

    def weights(path: Path) -> dict[str, torch.Tensor]:
        state = torch.load(path, map_location="cpu", weights_only=False)["state_dict"]
        return {k: v for k, v in state.items() if "running_" not in k and "num_batches" not in k}

    first = weights(tmp_path / "out" / "model.pth")
    still = {**params, "lr": 1e-12, "lr_backbone": 1e-12, "grad_clip": 0.0, "seed": 5}
    res2 = get_detector("mmdet").train(
        train, None, tmp_path / "init", {**still, "init": str(tmp_path / "out" / "model.pth")}
    )
    assert res2.params["init_kind"] == "local"
    loaded = weights(res2.checkpoint)
    assert all(torch.allclose(loaded[k].float(), v.float(), atol=1e-6) for k, v in first.items())
    fresh = weights(get_detector("mmdet").train(train, None, tmp_path / "fresh", still).checkpoint)
    assert not all(torch.allclose(fresh[k].float(), v.float(), atol=1e-6) for k, v in first.items())
