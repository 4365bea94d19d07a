"""``mmdet``: DAB-DETR from mmdet's own config, trained with the mmengine ``Runner``.

The base config is ``mmdet/.mim/configs/dab_detr/dab-detr_r50_8xb2-50e_coco.py`` shipped inside the
mmdet wheel.  Changes: one class (``subfigure``), no pretrained backbone (``init_cfg=None``; the
BatchNorm layers are trained instead of frozen because the backbone starts random), a plain
resize-to-``imgsz`` pipeline (compound figures must not be cropped), our dataset paths and a
``CocoMetric`` on the validation set.  Presets: ``tiny`` (ResNet-18, 64-d transformer, 1+1 layers;
for tests), ``r18`` and ``r50`` (the reference architecture).

mmdet needs the full ``mmcv`` with compiled ops, which PyPI does not ship for this torch; run
``scripts/setup/build_mmcv.sh`` (``make venv-mmdet`` does).  Loading mmengine checkpoints on torch >= 2.6
needs ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``; this module sets it (unless the caller did) before
loading.  Checkpoint: ``<out>/model.pth`` (weights only, optimizer stripped) + ``<out>/model_config.py``.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pmcflow.detect.base import (
    DEFAULT_NMS_IOU,
    DEFAULT_SCORE_THRESHOLD,
    Box,
    EvaluateMixin,
    ImageInput,
    Params,
    Timer,
    TrainResult,
    as_rgb,
    backend_params,
    nms_boxes,
    read_dataset,
    resolve_device,
    sanitize_boxes,
)
from pmcflow.detect.init import init_file, parse_init

BASE_CONFIG = "dab_detr/dab-detr_r50_8xb2-50e_coco.py"
CONFIG_FILE = "model_config.py"
WEIGHTS_FILE = "model.pth"


PRESETS: dict[str, dict[str, int]] = {
    "tiny": {"depth": 18, "dims": 64, "heads": 4, "ffn": 128, "enc": 1, "dec": 1, "queries": 20},
    "r18": {"depth": 18, "dims": 256, "heads": 8, "ffn": 1024, "enc": 3, "dec": 3, "queries": 100},
    "r50": {"depth": 50, "dims": 256, "heads": 8, "ffn": 2048, "enc": 6, "dec": 6, "queries": 300},
}


class MmcvMissingError(ImportError):
    pass


MMCV_HINT = (
    "the mmdet backend needs mmcv 2.1.0 with its compiled ops (mmcv._ext), which is not installed; "
    "run scripts/setup/build_mmcv.sh (builds it from the sdist in a few minutes and caches the wheel in "
    "~/.cache/pmcflow/wheels; `make venv-mmdet` runs it, and `make test` runs that)"
)


def mmcv_available() -> bool:
    try:
        require_mmcv()
    except MmcvMissingError:
        return False
    return True


def require_mmcv() -> None:
    """Raise :class:`MmcvMissingError` with the fix when mmcv's compiled ops are missing."""
    try:
        import mmcv  # noqa: F401
        import mmcv._ext  # noqa: F401
        import mmdet  # noqa: F401
    except ImportError as exc:
        raise MmcvMissingError(f"{MMCV_HINT} ({type(exc).__name__}: {exc})") from exc
    except AssertionError as exc:  # mmdet's version check on mmcv
        raise MmcvMissingError(f"{MMCV_HINT}; found an incompatible mmcv: {exc}") from exc


def _allow_full_checkpoint_load() -> None:
    os.environ.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")


def base_config_path() -> Path:
    import mmdet

    path = Path(mmdet.__file__).parent / ".mim" / "configs" / BASE_CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"mmdet's DAB-DETR config is missing from the installed wheel: {path}")
    return path


def _img_prefix(root: Path) -> str:
    """``images/`` unless the COCO file names already start with it."""
    if not (root / "annotations.json").is_file():
        return "images/"
    with open(root / "annotations.json", encoding="utf-8") as fh:
        images = json.load(fh).get("images", [])
    first = str(images[0]["file_name"]) if images else ""
    return "" if first.startswith("images/") else "images/"


def build_config(p: dict[str, Any], train_dir: Path | None, val_dir: Path | None, work_dir: Path) -> Any:
    """The mmengine Config for DAB-DETR on our dataset layout."""
    from mmengine.config import Config

    if p["preset"] not in PRESETS:
        raise ValueError(f"unknown preset {p['preset']!r}; choose one of {sorted(PRESETS)}")
    pr = PRESETS[p["preset"]]
    cfg = Config.fromfile(str(base_config_path()))
    m = cfg.model
    m.num_queries = int(p["num_queries"]) or pr["queries"]
    m.backbone.depth = pr["depth"]
    m.backbone.init_cfg = None
    m.backbone.frozen_stages = -1
    m.backbone.norm_cfg = {"type": "BN", "requires_grad": True}
    m.backbone.norm_eval = False
    m.neck.in_channels = [512 if pr["depth"] < 50 else 2048]
    m.neck.out_channels = pr["dims"]
    for part, n in ((m.encoder, pr["enc"]), (m.decoder, pr["dec"])):
        part.num_layers = n
        attn_keys = ["self_attn_cfg"] + (["cross_attn_cfg"] if "cross_attn_cfg" in part.layer_cfg else [])
        for key in attn_keys:
            part.layer_cfg[key].embed_dims = pr["dims"]
            part.layer_cfg[key].num_heads = pr["heads"]
        part.layer_cfg.ffn_cfg.embed_dims = pr["dims"]
        part.layer_cfg.ffn_cfg.feedforward_channels = pr["ffn"]
    m.positional_encoding.num_feats = pr["dims"] // 2
    m.bbox_head.num_classes = 1
    m.bbox_head.embed_dims = pr["dims"]
    m.test_cfg = {"max_per_img": m.num_queries}

    imgsz = int(p["imgsz"])
    metainfo = {"classes": ("subfigure",)}
    train_pipeline = [
        {"type": "LoadImageFromFile"},
        {"type": "LoadAnnotations", "with_bbox": True},
        {"type": "RandomFlip", "prob": float(p["hflip"])},
        {"type": "Resize", "scale": (imgsz, imgsz), "keep_ratio": True},
        {"type": "PackDetInputs"},
    ]
    meta_keys = ("img_id", "img_path", "ori_shape", "img_shape", "scale_factor")
    test_pipeline = [
        {"type": "LoadImageFromFile"},
        {"type": "Resize", "scale": (imgsz, imgsz), "keep_ratio": True},
        {"type": "PackDetInputs", "meta_keys": meta_keys},
    ]
    val_pipeline = test_pipeline[:2] + [{"type": "LoadAnnotations", "with_bbox": True}, test_pipeline[2]]
    workers = int(p["workers"])

    def loader(root: Path, pipeline: list[dict[str, Any]], train: bool) -> dict[str, Any]:
        return {
            "batch_size": int(p["batch_size"]) if train else 1,
            "num_workers": workers,
            "persistent_workers": workers > 0,
            "drop_last": False,
            "sampler": {"type": "DefaultSampler", "shuffle": train},
            "dataset": {
                "type": "CocoDataset",
                "data_root": str(root),
                "ann_file": "annotations.json",
                "data_prefix": {"img": _img_prefix(root)},
                "metainfo": metainfo,
                "filter_cfg": {"filter_empty_gt": False, "min_size": 1},
                "test_mode": not train,
                "pipeline": pipeline,
            },
        }

    cfg.train_pipeline = train_pipeline
    cfg.test_pipeline = test_pipeline
    if train_dir is not None:
        cfg.train_dataloader = loader(train_dir, train_pipeline, True)
    # The test loader only carries the pipeline used by mmdet.apis.inference_detector.
    cfg.test_dataloader = loader(val_dir or train_dir or work_dir, test_pipeline, False)
    cfg.test_evaluator = {"type": "CocoMetric", "metric": "bbox"}
    if val_dir is not None:
        cfg.val_dataloader = loader(val_dir, val_pipeline, False)
        cfg.val_evaluator = {
            "type": "CocoMetric",
            "ann_file": str(val_dir / "annotations.json"),
            "metric": "bbox",
        }
    else:
        cfg.val_dataloader = cfg.val_evaluator = cfg.val_cfg = None

    epochs = int(p["epochs"])
    cfg.train_cfg = {
        "type": "EpochBasedTrainLoop",
        "max_epochs": epochs,
        "val_interval": int(p["val_every"]) or epochs,
    }
    use_amp = bool(p["amp"]) and resolve_device("auto") == "cuda"
    cfg.optim_wrapper = {
        "type": "AmpOptimWrapper" if use_amp else "OptimWrapper",
        "optimizer": {"type": "AdamW", "lr": float(p["lr"]), "weight_decay": float(p["weight_decay"])},
        "clip_grad": {"max_norm": float(p["grad_clip"]), "norm_type": 2}
        if float(p["grad_clip"]) > 0
        else None,
    }
    if float(p["lr_backbone"]) != float(p["lr"]):
        mult = float(p["lr_backbone"]) / float(p["lr"])
        cfg.optim_wrapper["paramwise_cfg"] = {"custom_keys": {"backbone": {"lr_mult": mult, "decay_mult": 1.0}}}
    drop = int(p["lr_drop_epoch"]) or max(1, int(round(epochs * 0.8)))
    cfg.param_scheduler = [
        {
            "type": "MultiStepLR",
            "begin": 0,
            "end": epochs,
            "by_epoch": True,
            "milestones": [drop],
            "gamma": 0.1,
        }
    ]
    cfg.default_hooks.logger.interval = int(p["log_every"])
    cfg.default_hooks.checkpoint = {"type": "CheckpointHook", "interval": 1, "max_keep_ckpts": 1}
    if val_dir is not None:
        cfg.default_hooks.checkpoint["save_best"] = "coco/bbox_mAP"
        cfg.default_hooks.checkpoint["rule"] = "greater"
    cfg.default_hooks.visualization = {"type": "DetVisualizationHook", "draw": False}
    cfg.randomness = {"seed": int(p["seed"]), "deterministic": False}
    cfg.launcher = str(p["launcher"])
    cfg.work_dir = str(work_dir)
    for k, v in p.items():
        if k.startswith("mmdet."):
            cfg.merge_from_dict({k.split(".", 1)[1]: v})
    return cfg


def _read_history(work_dir: Path) -> list[dict[str, Any]]:
    files = sorted(glob.glob(str(work_dir / "*" / "vis_data" / "scalars.json")))
    rows: list[dict[str, Any]] = []
    if files:
        with open(files[-1], encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
    return rows


class MMDetDabDetrDetector(EvaluateMixin):
    name = "mmdet"

    def __init__(self, checkpoint: str | os.PathLike[str] | None = None, **params: Any) -> None:
        require_mmcv()
        self.params = backend_params("mmdet", params)
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        self._model: Any = None

    def train(self, train_dir: Path, val_dir: Path | None, out_dir: Path, params: Params) -> TrainResult:
        import torch
        from mmengine.runner import Runner

        _allow_full_checkpoint_load()
        p = backend_params("mmdet", self.params, params)
        out_dir = Path(out_dir).resolve()
        out_dir.mkdir(parents=True, exist_ok=True)
        train_dir = Path(train_dir).resolve()
        val = Path(val_dir).resolve() if val_dir is not None else None
        cfg = build_config(p, train_dir, val, out_dir)
        spec = parse_init(p["init"], p["init_file"], p["init_revision"], backend="mmdet")
        if spec.kind != "none":  # loaded non-strictly: a head of another class count is re-initialised
            cfg.load_from = str(init_file(spec))
        n_train = len(read_dataset(train_dir))
        runner = Runner.from_cfg(cfg)
        with Timer() as t:
            runner.train()
        last = out_dir / "last_checkpoint"
        best = sorted(out_dir.glob("best_coco_bbox_mAP_epoch_*.pth"))
        src = best[-1] if best else Path(last.read_text(encoding="utf-8").strip()) if last.is_file() else None
        if src is None or not src.is_file():
            raise RuntimeError(f"mmengine training left no checkpoint in {out_dir}")
        state = torch.load(src, map_location="cpu", weights_only=False)
        meta = {
            "epoch": state.get("meta", {}).get("epoch"),
            "dataset_meta": {"classes": ["subfigure"]},
            "source": src.name,
        }
        torch.save({"state_dict": state["state_dict"], "meta": meta}, out_dir / WEIGHTS_FILE)
        # Keep only the stripped weights: full mmengine checkpoints carry the optimizer state too.
        for f in out_dir.glob("*.pth"):
            if f.name != WEIGHTS_FILE:
                f.unlink()
        infer_cfg = build_config(p, None, val, out_dir)
        infer_cfg.dump(str(out_dir / CONFIG_FILE))
        ips = n_train * int(p["epochs"]) / t.seconds if t.seconds > 0 else 0.0
        self.checkpoint, self._model, self.params = out_dir, None, p
        return TrainResult(out_dir / WEIGHTS_FILE, _read_history(out_dir), ips, t.seconds, {**p, **spec.to_record()})

    def _load(self) -> Any:
        if self._model is None:
            from mmdet.apis import init_detector

            if self.checkpoint is None:
                raise ValueError(
                    "the mmdet backend needs --checkpoint (a trained model dir or model.pth) to predict"
                )
            ckpt_dir = self.checkpoint if self.checkpoint.is_dir() else self.checkpoint.parent
            weights = ckpt_dir / WEIGHTS_FILE if self.checkpoint.is_dir() else self.checkpoint
            cfg_path = ckpt_dir / CONFIG_FILE
            if not weights.is_file() or not cfg_path.is_file():
                raise FileNotFoundError(
                    f"mmdet checkpoint needs {WEIGHTS_FILE} and {CONFIG_FILE} in {ckpt_dir}"
                )
            _allow_full_checkpoint_load()
            self._model = init_detector(
                str(cfg_path), str(weights), device=resolve_device(self.params["device"])
            )
        return self._model

    def predict(
        self,
        images: Sequence[ImageInput],
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        nms_iou: float = DEFAULT_NMS_IOU,
        batch_size: int = 8,
    ) -> list[list[Box]]:
        from mmdet.apis import inference_detector

        model = self._load()
        out: list[list[Box]] = []
        for start in range(0, len(images), max(1, batch_size)):
            batch = [as_rgb(im) for im in images[start : start + max(1, batch_size)]]
            arrays = [np.ascontiguousarray(np.asarray(im)[:, :, ::-1]) for im in batch]  # mmdet wants BGR
            results = inference_detector(model, arrays)
            for img, res in zip(batch, results, strict=True):
                inst = res.pred_instances
                xyxy = inst.bboxes.float().cpu().numpy().reshape(-1, 4)
                scores = inst.scores.float().cpu().numpy().reshape(-1)
                keep = scores >= score_threshold
                xyxy, scores = xyxy[keep], scores[keep]
                xywh = np.concatenate([xyxy[:, :2], xyxy[:, 2:] - xyxy[:, :2]], axis=1)
                clipped, ok = sanitize_boxes(xywh, img.width, img.height)
                boxes = [Box(*map(float, clipped[i]), float(scores[i])) for i in range(len(scores)) if ok[i]]
                out.append(nms_boxes(boxes, nms_iou))
        return out
