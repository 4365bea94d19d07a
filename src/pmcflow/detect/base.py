"""The detector interface shared by every backend, and the helpers around it.

A backend is built by name with :func:`get_detector` and implements :class:`Detector`:

* ``train(train_dir, val_dir, out_dir, params) -> TrainResult`` on datasets in the pmcflow layout
  (``images/<name>.png``, COCO ``annotations.json``, YOLO ``labels/<name>.txt``);
* ``predict(images, score_threshold, nms_iou, batch_size) -> list[list[Box]]`` where ``images`` are
  paths or already-loaded RGB PIL images;
* ``evaluate(gt_json, preds) -> dict`` (COCO mAP and F1@0.5, see :mod:`pmcflow.detect.evaluate`).

Boxes are ``x, y, w, h`` in pixels of the original image, with a score in [0, 1].
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from pmcflow.config import schema_default
from pmcflow.detect.images import DEFAULT_MAX_PIXELS, ImageError, load_image
from pmcflow.devices import resolve_device  # noqa: F401 - re-exported to the backends

ImageInput = str | os.PathLike[str] | Image.Image
Params = Mapping[str, Any]

# Production post-processing of the reference system (seed 000 §2): score 0.2, NMS IoU 0.2 --
# the library's defaults are the config's (detector.score_threshold, detector.nms_iou), read from
# the schema so that the number lives in one place.
DEFAULT_SCORE_THRESHOLD: float = float(schema_default("detector", "score_threshold"))
DEFAULT_NMS_IOU: float = float(schema_default("detector", "nms_iou"))


@dataclass(frozen=True)
class Box:
    """One detected subfigure: top-left corner, size (pixels) and confidence."""

    x: float
    y: float
    w: float
    h: float
    score: float = 1.0

    def xyxy(self) -> tuple[float, float, float, float]:
        return (self.x, self.y, self.x + self.w, self.y + self.h)

    def as_list(self) -> list[float]:
        return [round(self.x, 2), round(self.y, 2), round(self.w, 2), round(self.h, 2)]


TIMING_KEYS = ("images_per_s", "seconds")
HISTORY_TIMING_KEYS = ("time",)  # Ultralytics' results.csv: seconds since the start


@dataclass
class TrainResult:
    """What a training run produced.

    Wall-clock fields (:data:`TIMING_KEYS`, and :data:`HISTORY_TIMING_KEYS` in each history row)
    are the only parts that differ between two runs with the same data, params and seed.
    """

    checkpoint: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    images_per_s: float = 0.0
    seconds: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["checkpoint"] = str(self.checkpoint)
        return d


@dataclass
class DetectionResult:
    """Per-image outcome of :func:`run_detection`: boxes, or the reason the image was skipped."""

    image: str
    boxes: list[Box]
    width: int = 0
    height: int = 0
    error: str | None = None
    reason: str | None = None


@runtime_checkable
class Detector(Protocol):
    name: str

    def train(self, train_dir: Path, val_dir: Path | None, out_dir: Path, params: Params) -> TrainResult: ...

    def predict(
        self,
        images: Sequence[ImageInput],
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        nms_iou: float = DEFAULT_NMS_IOU,
        batch_size: int = 8,
    ) -> list[list[Box]]: ...

    def evaluate(self, gt_json: str | os.PathLike[str], preds: Any) -> dict[str, Any]: ...


# name -> (module, class)
BACKENDS: dict[str, tuple[str, str]] = {
    "xycut": ("pmcflow.detect.xycut", "XYCutDetector"),
    "ultralytics": ("pmcflow.detect.yolo", "UltralyticsDetector"),
    "transformers": ("pmcflow.detect.hf_dabdetr", "HFDabDetrDetector"),
    "mmdet": ("pmcflow.detect.mm_dabdetr", "MMDetDabDetrDetector"),
}


def get_detector(name: str, checkpoint: str | os.PathLike[str] | None = None, **params: Any) -> Detector:
    """Build backend ``name``; ``checkpoint`` loads trained weights (required for learned backends
    before :meth:`Detector.predict`)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown detector backend {name!r}; choose one of {sorted(BACKENDS)}")
    module, cls = BACKENDS[name]
    factory: Callable[..., Detector] = getattr(importlib.import_module(module), cls)
    return factory(checkpoint=checkpoint, **params)


class EvaluateMixin:
    """``evaluate`` is the same for every backend."""

    def evaluate(self, gt_json: str | os.PathLike[str], preds: Any) -> dict[str, Any]:
        from pmcflow.detect.evaluate import evaluate

        return evaluate(gt_json, preds)


# ----------------------------------------------------------------------------------------------
# Images and batches
# ----------------------------------------------------------------------------------------------
def as_rgb(image: ImageInput, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    if isinstance(image, Image.Image):
        return image if image.mode == "RGB" else image.convert("RGB")
    return load_image(image, max_pixels=max_pixels)


def image_name(image: ImageInput, index: int) -> str:
    if isinstance(image, Image.Image):
        return str(getattr(image, "filename", "") or f"image-{index}")
    return str(image)


def run_detection(
    detector: Detector,
    images: Sequence[str | os.PathLike[str]],
    *,
    score_threshold: float = DEFAULT_SCORE_THRESHOLD,
    nms_iou: float = DEFAULT_NMS_IOU,
    batch_size: int = 8,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    refine: Callable[[Image.Image, list[Box]], list[Box]] | None = None,
) -> list[DetectionResult]:
    """Detect on image files; an unreadable file yields a result with ``error`` set, never an exception.

    Images are decoded once, in chunks of ``batch_size`` so memory stays bounded.  ``refine``
    post-processes each image's boxes (e.g. :func:`pmcflow.decompose.lettermerge.merge_with_reader`).
    """
    results: list[DetectionResult] = []
    for start in range(0, len(images), max(1, batch_size)):
        chunk = images[start : start + max(1, batch_size)]
        loaded: list[Image.Image] = []
        slots: list[DetectionResult] = []
        for path in chunk:
            try:
                img = load_image(path, max_pixels=max_pixels)
            except ImageError as exc:
                results.append(DetectionResult(str(path), [], error=str(exc), reason=exc.reason))
                continue
            res = DetectionResult(str(path), [], width=img.width, height=img.height)
            results.append(res)
            slots.append(res)
            loaded.append(img)
        if loaded:
            preds = detector.predict(
                loaded, score_threshold=score_threshold, nms_iou=nms_iou, batch_size=batch_size
            )
            for res, img, boxes in zip(slots, loaded, preds, strict=True):
                res.boxes = refine(img, list(boxes)) if refine is not None else boxes
    return results


# ----------------------------------------------------------------------------------------------
# Boxes
# ----------------------------------------------------------------------------------------------
def sanitize_boxes(
    boxes: np.ndarray, width: float, height: float, min_size: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Clip ``(n, 4)`` xywh boxes to the image and drop degenerate ones.

    Returns ``(clipped_boxes, keep_mask)`` where ``keep_mask`` marks boxes whose clipped width and
    height are both at least ``min_size`` pixels and whose coordinates are finite.
    """
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    finite = np.isfinite(b).all(axis=1)
    b = np.where(np.isfinite(b), b, 0.0)
    x0 = np.clip(b[:, 0], 0, width)
    y0 = np.clip(b[:, 1], 0, height)
    x1 = np.clip(b[:, 0] + b[:, 2], 0, width)
    y1 = np.clip(b[:, 1] + b[:, 3], 0, height)
    out = np.stack([x0, y0, x1 - x0, y1 - y0], axis=1)
    keep = finite & (out[:, 2] >= min_size) & (out[:, 3] >= min_size)
    return out, keep


def nms_boxes(boxes: list[Box], iou: float) -> list[Box]:
    """Class-agnostic NMS (torchvision) keeping boxes sorted by score; ``iou >= 1`` disables it."""
    if not boxes or iou >= 1.0:
        return sorted(boxes, key=lambda b: -b.score)
    import torch
    from torchvision.ops import nms

    xyxy = torch.tensor([b.xyxy() for b in boxes], dtype=torch.float32)
    scores = torch.tensor([b.score for b in boxes], dtype=torch.float32)
    keep = nms(xyxy, scores, float(iou)).tolist()
    return [boxes[i] for i in keep]


# ----------------------------------------------------------------------------------------------
# Datasets in the pmcflow layout
# ----------------------------------------------------------------------------------------------
@dataclass
class DatasetItem:
    path: Path
    width: int
    height: int
    boxes: np.ndarray  # (n, 4) xywh pixels


def read_dataset(root: str | os.PathLike[str]) -> list[DatasetItem]:
    """Read ``root/annotations.json`` (COCO) into items with absolute image paths."""
    root = Path(root)
    ann_path = root / "annotations.json"
    if not ann_path.is_file():
        raise FileNotFoundError(f"{root}: no annotations.json (expected the pmcflow dataset layout)")
    with open(ann_path, encoding="utf-8") as fh:
        coco = json.load(fh)
    by_image: dict[int, list[list[float]]] = {}
    for a in coco.get("annotations", []):
        by_image.setdefault(int(a["image_id"]), []).append([float(v) for v in a["bbox"]])
    items = []
    for im in sorted(coco.get("images", []), key=lambda r: int(r["id"])):
        p = Path(im["file_name"])
        if not p.is_absolute():
            p = root / "images" / p.name if not (root / p).is_file() else root / p
        boxes = np.asarray(by_image.get(int(im["id"]), []), dtype=np.float64).reshape(-1, 4)
        items.append(DatasetItem(p, int(im["width"]), int(im["height"]), boxes))
    return items


def param_defaults(backend: str) -> dict[str, Any]:
    """The parameters of ``backend`` with their defaults, from the config schema
    (``detector.params.<backend>``): the only place they are written."""
    from pmcflow.config import load_schema

    props = load_schema()["properties"]["detector"]["properties"]["params"]["properties"][backend]["properties"]
    # `seed` has no schema default, so that a filled-in config does not hide the run's seed (the
    # detector stage passes it); a backend used on its own (the CLI) starts from 0.
    return {key: copy.deepcopy(spec["default"]) if "default" in spec else 0 for key, spec in props.items()}


def backend_params(backend: str, *layers: Params | None) -> dict[str, Any]:
    """The parameters of ``backend``: ``layers`` merged left to right, with the schema's defaults of
    ``detector.params.<backend>`` filled in and checked by the config loader
    (:func:`pmcflow.config.subsection`), the same way a config file is: a wrong type, a value out of
    range or an unknown key raises :class:`~pmcflow.config.ConfigError` naming the key's path. Keys
    with the backend's pass-through prefix (``ultralytics.``/``mmdet.``/``hf.``) go to the library.
    ``seed`` (where the backend has one) has no schema default, as the detector stage passes the
    run's; on its own it is 0."""
    from pmcflow.config import subsection

    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer or {})
    out = subsection(merged, "detector", "params", backend)
    if "seed" in param_defaults(backend):
        out.setdefault("seed", 0)
    return out


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
