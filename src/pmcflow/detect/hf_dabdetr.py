"""``transformers``: Hugging Face ``DabDetrForObjectDetection`` built from a config, own training loop.

This is the model family of the reference system (seed 000 fine-tunes HF DAB-DETR from
``IDEA-Research/dab-detr-resnet-50-dc5`` at 480x480, one class, score 0.2, NMS 0.2).  ``init``
(:mod:`pmcflow.detect.init`) names the starting weights: a hub repo id or a local model directory
(its class head is replaced by one ``subfigure`` class; ``preset`` is then not used), or none: a
randomly initialised model built from ``preset``, HF-native ``ResNetConfig`` (``tiny``/``small``)
or timm (``r18``/``r50``).  The backbone never downloads ImageNet weights of its own.

Preprocessing is our own (no image processor): resize so the longer side is ``imgsz``, pad
bottom/right to ``imgsz x imgsz``, normalise with ImageNet mean/std, ``pixel_mask`` marks the real
pixels.  Targets are ``cx, cy, w, h`` normalised by the padded canvas; boxes smaller than
``min_box_px`` after clipping to the image are dropped before training (and counted).

Checkpoint: ``<out>/model/`` (``save_pretrained``) plus ``pmcflow_detector.json`` holding the
preprocessing.  Prediction: sigmoid scores of the single class, score threshold, clip/degenerate
filter, class-agnostic NMS (``torchvision.ops.nms``).
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

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
from pmcflow.tables import write_json

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
META_FILE = "pmcflow_detector.json"


PRESETS: dict[str, dict[str, Any]] = {
    # ~0.5M params: for tests
    "tiny": {
        "backbone": {
            "embedding_size": 16,
            "hidden_sizes": [16, 32, 64, 128],
            "depths": [1, 1, 1, 1],
            "layer_type": "basic",
        },
        "config": {
            "hidden_size": 64,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "encoder_ffn_dim": 128,
            "decoder_ffn_dim": 128,
            "encoder_attention_heads": 4,
            "decoder_attention_heads": 4,
            "num_queries": 20,
        },
    },
    # ~3M params: the CPU demo model
    "small": {
        "backbone": {
            "embedding_size": 32,
            "hidden_sizes": [32, 64, 128, 256],
            "depths": [1, 1, 2, 1],
            "layer_type": "basic",
        },
        "config": {
            "hidden_size": 128,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "encoder_ffn_dim": 512,
            "decoder_ffn_dim": 512,
            "encoder_attention_heads": 8,
            "decoder_attention_heads": 8,
            "num_queries": 50,
        },
    },
    "r18": {"timm": "resnet18", "config": {"encoder_layers": 3, "decoder_layers": 3, "num_queries": 100}},
    "r50": {"timm": "resnet50", "config": {}},
}


def build_config(p: dict[str, Any]) -> Any:
    from transformers import DabDetrConfig, ResNetConfig

    if p["preset"] not in PRESETS:
        raise ValueError(f"unknown preset {p['preset']!r}; choose one of {sorted(PRESETS)}")
    preset = PRESETS[p["preset"]]
    kw: dict[str, Any] = dict(preset["config"])
    kw.update({k.split(".", 1)[1]: v for k, v in p.items() if k.startswith("hf.")})
    if int(p["num_queries"]) > 0:
        kw["num_queries"] = int(p["num_queries"])
    if "timm" in preset:
        return DabDetrConfig(use_timm_backbone=True, backbone=preset["timm"], num_labels=1, **kw)
    backbone = ResNetConfig(**preset["backbone"], out_features=["stage4"])
    return DabDetrConfig(backbone_config=backbone, num_labels=1, **kw)


def init_spec(p: dict[str, Any]) -> Any:
    """The parsed ``init`` of params ``p`` (:class:`pmcflow.detect.init.InitSpec`)."""
    from pmcflow.detect.init import InitError, parse_init

    spec = parse_init(p["init"], "", p["init_revision"], backend="transformers")
    if str(p["init_file"]).strip():
        raise InitError("detector.params.transformers.init_file: the transformers backend loads the whole repo")
    return spec


def build_model(p: dict[str, Any]) -> Any:
    """The model training starts from: ``init``'s weights with a one-class head, or ``preset`` at random."""
    from transformers import DabDetrForObjectDetection

    spec = init_spec(p)
    if spec.kind == "none":
        return DabDetrForObjectDetection(build_config(p))
    from transformers import DabDetrConfig

    from pmcflow.detect.init import init_directory

    folder = str(init_directory(spec))
    config = DabDetrConfig.from_pretrained(folder)
    config.id2label, config.label2id = {0: "subfigure"}, {"subfigure": 0}  # num_labels follows: 1
    for key, value in p.items():
        if key.startswith("hf."):
            setattr(config, key.split(".", 1)[1], value)
    if int(p["num_queries"]) > 0:
        config.num_queries = int(p["num_queries"])
    # The COCO head (91 classes) is replaced by a fresh one-class head; the rest, backbone
    # included, loads from the checkpoint (transformers 5 never fetches timm backbone weights).
    return DabDetrForObjectDetection.from_pretrained(folder, config=config, ignore_mismatched_sizes=True)


# ----------------------------------------------------------------------------------------------
# Preprocessing
# ----------------------------------------------------------------------------------------------
def preprocess(img: Image.Image, imgsz: int) -> tuple[np.ndarray, np.ndarray, float]:
    """RGB image -> (3, S, S) float32 normalised canvas, (S, S) int64 mask, scale factor."""
    scale = imgsz / max(img.width, img.height)
    nw, nh = max(1, round(img.width * scale)), max(1, round(img.height * scale))
    resized = np.asarray(img.resize((nw, nh), Image.BILINEAR), dtype=np.float32) / 255.0
    resized = (resized - np.asarray(MEAN, np.float32)) / np.asarray(STD, np.float32)
    canvas = np.zeros((3, imgsz, imgsz), np.float32)
    canvas[:, :nh, :nw] = resized.transpose(2, 0, 1)
    mask = np.zeros((imgsz, imgsz), np.int64)
    mask[:nh, :nw] = 1
    return canvas, mask, scale


def boxes_to_targets(boxes_xywh: np.ndarray, scale: float, imgsz: int) -> np.ndarray:
    """Pixel xywh boxes -> cxcywh normalised by the padded canvas."""
    b = np.asarray(boxes_xywh, np.float64).reshape(-1, 4) * scale
    return np.stack(
        [(b[:, 0] + b[:, 2] / 2) / imgsz, (b[:, 1] + b[:, 3] / 2) / imgsz, b[:, 2] / imgsz, b[:, 3] / imgsz],
        axis=1,
    ).astype(np.float32)


class _TrainSet:
    """Training items with degenerate boxes removed; ``__getitem__`` returns tensors for the model."""

    def __init__(self, root: Path, imgsz: int, hflip: float, min_box_px: float, seed: int) -> None:
        self.items = read_dataset(root)
        self.imgsz, self.hflip, self.seed = imgsz, hflip, seed
        self.dropped = 0
        self.boxes: list[np.ndarray] = []
        for it in self.items:
            clipped, keep = sanitize_boxes(it.boxes, it.width, it.height, min_box_px)
            self.dropped += int((~keep).sum())
            self.boxes.append(clipped[keep])
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[Any, Any, dict[str, Any]]:
        import torch

        img = as_rgb(self.items[i].path)
        boxes = self.boxes[i].copy()
        rng = random.Random(hash((self.seed, self.epoch, i)))
        if self.hflip > 0 and rng.random() < self.hflip:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
            boxes[:, 0] = img.width - boxes[:, 0] - boxes[:, 2]
        canvas, mask, scale = preprocess(img, self.imgsz)
        target = {
            "class_labels": torch.zeros(len(boxes), dtype=torch.long),
            "boxes": torch.from_numpy(boxes_to_targets(boxes, scale, self.imgsz)),
        }
        return torch.from_numpy(canvas), torch.from_numpy(mask), target


def _collate(batch: list[tuple[Any, Any, dict[str, Any]]]) -> tuple[Any, Any, list[dict[str, Any]]]:
    import torch

    return torch.stack([b[0] for b in batch]), torch.stack([b[1] for b in batch]), [b[2] for b in batch]


class HFDabDetrDetector(EvaluateMixin):
    name = "transformers"

    def __init__(self, checkpoint: str | os.PathLike[str] | None = None, **params: Any) -> None:
        self.params = backend_params("transformers", params)
        self._explicit = set(params)
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        self._model: Any = None

    # -- loading --------------------------------------------------------------------------------
    def _resolve_checkpoint(self) -> Path:
        if self.checkpoint is None:
            from pmcflow.detect.default import shipped_checkpoint_for

            shipped = shipped_checkpoint_for(self.name)
            if shipped is None:
                raise ValueError(
                    "the transformers backend needs --checkpoint (a trained model dir) to predict"
                )
            self.checkpoint = shipped
        ckpt = self.checkpoint
        if (ckpt / "model" / "config.json").is_file():
            ckpt = ckpt / "model"
        if not (ckpt / "config.json").is_file():
            raise FileNotFoundError(f"no DabDetr checkpoint (config.json) in {self.checkpoint}")
        return ckpt

    def _load(self) -> Any:
        if self._model is None:
            import torch
            from transformers import DabDetrForObjectDetection

            ckpt = self._resolve_checkpoint()
            meta_path = ckpt / META_FILE
            if meta_path.is_file() and "imgsz" not in self._explicit:
                self.params["imgsz"] = int(json.loads(meta_path.read_text(encoding="utf-8"))["imgsz"])
            if int(self.params["threads"]) > 0:
                torch.set_num_threads(int(self.params["threads"]))
            model = DabDetrForObjectDetection.from_pretrained(str(ckpt))
            self._model = model.to(resolve_device(self.params["device"])).eval()
        return self._model

    # -- training -------------------------------------------------------------------------------
    def train(self, train_dir: Path, val_dir: Path | None, out_dir: Path, params: Params) -> TrainResult:
        import torch

        p = backend_params("transformers", self.params, params)
        spec = init_spec(p)  # a bad init fails before any data is read
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        device = resolve_device(p["device"])
        if int(p["threads"]) > 0:
            torch.set_num_threads(int(p["threads"]))
        torch.manual_seed(int(p["seed"]))
        np.random.seed(int(p["seed"]))

        data = _TrainSet(
            Path(train_dir), int(p["imgsz"]), float(p["hflip"]), float(p["min_box_px"]), int(p["seed"])
        )
        if len(data) == 0:
            raise ValueError(f"{train_dir}: the training set is empty")
        gen = torch.Generator().manual_seed(int(p["seed"]))
        loader = torch.utils.data.DataLoader(
            data,  # type: ignore[arg-type]
            batch_size=int(p["batch_size"]),
            shuffle=True,
            generator=gen,
            num_workers=int(p["workers"]),
            collate_fn=_collate,
            drop_last=False,
            persistent_workers=False,
        )
        model = build_model(p).to(device)
        backbone = [q for n, q in model.named_parameters() if "backbone" in n and q.requires_grad]
        rest = [q for n, q in model.named_parameters() if "backbone" not in n and q.requires_grad]
        optim = torch.optim.AdamW(
            [{"params": rest, "lr": float(p["lr"])}, {"params": backbone, "lr": float(p["lr_backbone"])}],
            weight_decay=float(p["weight_decay"]),
        )
        total = int(p["epochs"]) * math.ceil(len(data) / int(p["batch_size"]))
        if int(p["max_steps"]) > 0:
            total = min(total, int(p["max_steps"]))
        warm = max(0, min(int(p["warmup_steps"]), total // 10 or 1))

        def lr_factor(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            frac = (step - warm) / max(1, total - warm)
            return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))

        sched = torch.optim.lr_scheduler.LambdaLR(optim, lr_factor)
        use_amp = bool(p["amp"]) and device.startswith("cuda")
        history: list[dict[str, Any]] = []
        step, n_images, train_seconds = 0, 0, 0.0
        best_map = -1.0
        model_dir = out_dir / "model"
        val_items = read_dataset(val_dir) if val_dir is not None else []
        for epoch in range(int(p["epochs"])):
            data.epoch = epoch
            model.train()
            sums: dict[str, float] = {}
            n_batches = 0
            with Timer() as t:
                for pixel_values, pixel_mask, targets in loader:
                    pixel_values, pixel_mask = pixel_values.to(device), pixel_mask.to(device)
                    targets = [{k: v.to(device) for k, v in tg.items()} for tg in targets]
                    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_amp):
                        out = model(pixel_values=pixel_values, pixel_mask=pixel_mask, labels=targets)
                    loss = out.loss
                    if not torch.isfinite(loss):
                        raise FloatingPointError(f"non-finite loss at step {step}: {out.loss_dict}")
                    optim.zero_grad(set_to_none=True)
                    loss.backward()
                    if float(p["grad_clip"]) > 0:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), float(p["grad_clip"]))
                    optim.step()
                    sched.step()
                    step += 1
                    n_batches += 1
                    n_images += len(targets)
                    sums["loss"] = sums.get("loss", 0.0) + float(loss.detach())
                    for k, v in (out.loss_dict or {}).items():
                        sums[k] = sums.get(k, 0.0) + float(v.detach())
                    if int(p["log_every"]) > 0 and step % int(p["log_every"]) == 0:
                        print(
                            f"[transformers] epoch {epoch + 1} step {step}/{total} loss {float(loss):.4f}",
                            flush=True,
                        )
                    if step >= total:
                        break
            train_seconds += t.seconds
            rec: dict[str, Any] = {
                "epoch": epoch + 1,
                "step": step,
                "seconds": t.seconds,
                "lr": sched.get_last_lr()[0],
            }
            rec.update({k: v / max(1, n_batches) for k, v in sums.items()})
            rec["images_per_s"] = n_images / train_seconds if train_seconds > 0 else 0.0
            last = step >= total or epoch + 1 == int(p["epochs"])
            ve = int(p["val_every"])
            if val_items and (last or (ve > 0 and (epoch + 1) % ve == 0)):
                self._model = model.eval()
                self.params = p
                vm = self._validate(val_items)
                rec.update({f"val_{k}": v for k, v in vm.items()})
                if vm["map"] >= best_map:
                    best_map = vm["map"]
                    self._save(model, model_dir, p, data.dropped, spec)
            elif not val_items:
                self._save(model, model_dir, p, data.dropped, spec)
            history.append(rec)
            if step >= total:
                break
        write_json(out_dir / "history.json", history)
        self.checkpoint, self._model, self.params = model_dir, None, p
        ips = n_images / train_seconds if train_seconds > 0 else 0.0
        return TrainResult(
            model_dir, history, ips, train_seconds, {**p, "n_degenerate_boxes_dropped": data.dropped}
        )

    def _save(self, model: Any, model_dir: Path, p: dict[str, Any], dropped: int, spec: Any) -> None:
        model.save_pretrained(str(model_dir))
        meta = {
            "backend": self.name,
            "imgsz": int(p["imgsz"]),
            "mean": MEAN,
            "std": STD,
            "preset": p["preset"] if spec.kind == "none" else None,
            **spec.to_record(),
            "n_degenerate_boxes_dropped": dropped,
        }
        write_json(model_dir / META_FILE, meta)

    def _validate(self, items: Sequence[Any]) -> dict[str, float]:
        from pmcflow.detect.evaluate import evaluate

        gt = {"images": [], "annotations": []}
        preds = []
        boxes = self.predict(
            [it.path for it in items],
            score_threshold=0.0,
            nms_iou=DEFAULT_NMS_IOU,
            batch_size=int(self.params["batch_size"]),
        )
        for i, (it, bs) in enumerate(zip(items, boxes, strict=True)):
            gt["images"].append(
                {"id": i + 1, "file_name": it.path.name, "width": it.width, "height": it.height}
            )
            for b in it.boxes:
                gt["annotations"].append(
                    {"id": len(gt["annotations"]) + 1, "image_id": i + 1, "bbox": list(map(float, b))}
                )
            preds += [{"image_id": i + 1, "bbox": [b.x, b.y, b.w, b.h], "score": b.score} for b in bs]
        m = evaluate(gt, preds)
        return {"map": m["map"], "map50": m["map50"], "f1": m["f1"], "threshold": m["threshold"]}

    # -- inference ------------------------------------------------------------------------------
    def predict(
        self,
        images: Sequence[ImageInput],
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        nms_iou: float = DEFAULT_NMS_IOU,
        batch_size: int = 8,
    ) -> list[list[Box]]:
        import torch

        model = self._load()
        device = next(model.parameters()).device
        imgsz = int(self.params["imgsz"])
        out: list[list[Box]] = []
        for start in range(0, len(images), max(1, batch_size)):
            batch = [as_rgb(im) for im in images[start : start + max(1, batch_size)]]
            prepped = [preprocess(im, imgsz) for im in batch]
            pv = torch.from_numpy(np.stack([c for c, _, _ in prepped])).to(device)
            pm = torch.from_numpy(np.stack([m for _, m, _ in prepped])).to(device)
            with torch.inference_mode():
                res = model(pixel_values=pv, pixel_mask=pm)
            scores = res.logits[..., 0].sigmoid().float().cpu().numpy()
            cxcywh = res.pred_boxes.float().cpu().numpy()
            for img, (_, _, scale), sc, bx in zip(batch, prepped, scores, cxcywh, strict=True):
                keep = sc >= score_threshold
                b = bx[keep] * imgsz / scale
                xywh = np.stack([b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2, b[:, 2], b[:, 3]], axis=1)
                clipped, ok = sanitize_boxes(xywh, img.width, img.height)
                boxes = [Box(*map(float, clipped[i]), float(s)) for i, s in enumerate(sc[keep]) if ok[i]]
                out.append(nms_boxes(boxes, nms_iou))
        return out
