"""The detector shipped with the package (``pmcflow/data/detector/``) and the CPU default.

``pmcflow/data/detector/detector.json`` names the backend and the checkpoint file or folder next
to it (see ``MODEL_CARD.md`` there for how it was trained).  :func:`default_detector` returns that
model when the package ships one and the weight-free ``xycut`` baseline otherwise, so
decomposition always has a detector without any download.  A learned backend asked to predict
without ``--checkpoint`` uses the shipped model when it is of the same backend.

The score threshold travels with the checkpoint: ``score_threshold`` in ``detector.json`` (the
shipped model) or in the ``train.json`` the detector stage writes next to a trained checkpoint.
:func:`resolve_threshold` gives the configured (or ``--score-threshold``) value when there is one,
else the model's own, else :data:`pmcflow.detect.base.DEFAULT_SCORE_THRESHOLD`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pmcflow import layout
from pmcflow.detect.base import DEFAULT_SCORE_THRESHOLD, Detector, get_detector

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "data" / "detector"


def shipped_model() -> tuple[str, Path] | None:
    """``(backend, checkpoint path)`` of the shipped detector, or None when the package has none."""
    meta = SHIPPED_DIR / "detector.json"
    if not meta.is_file():
        return None
    info = json.loads(meta.read_text(encoding="utf-8"))
    ckpt = SHIPPED_DIR / str(info["checkpoint"])
    if not ckpt.exists():
        return None
    return str(info["backend"]), ckpt


def shipped_checkpoint_for(backend: str) -> Path | None:
    found = shipped_model()
    return found[1] if found is not None and found[0] == backend else None


def default_detector(**params: Any) -> tuple[str, Detector]:
    """``(backend name, detector)`` for decomposition when the config names no checkpoint."""
    found = shipped_model()
    if found is not None:
        backend, ckpt = found
        return backend, get_detector(backend, checkpoint=ckpt, **params)
    return "xycut", get_detector("xycut", **params)


# the detector stage's record next to a trained checkpoint, named as in the results layout
TRAIN_RECORD = Path(layout.DETECTOR_TRAIN).name
SIDECARS = (TRAIN_RECORD, "detector.json")  # ... and the shipped model's


def trained_record(model_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The record the detector stage wrote in ``model_dir`` (:data:`TRAIN_RECORD`): ``backend``,
    ``checkpoint``, the training parameters and the checkpoint's own score threshold."""
    path = Path(model_dir) / TRAIN_RECORD
    record = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(record, dict) or not record.get("backend") or not record.get("checkpoint"):
        raise ValueError(f"{path}: not a detector training record (no backend or checkpoint)")
    return record


def checkpoint_threshold(backend: str, checkpoint: str | os.PathLike[str] | None) -> float | None:
    """The score threshold recorded with ``checkpoint`` (None: the shipped model of ``backend``),
    or None when the checkpoint has none (a weight-free backend, a bare checkpoint file)."""
    if checkpoint is None:
        found = shipped_model()
        if found is None or found[0] != backend:
            return None
        checkpoint = found[1]
    ckpt = Path(checkpoint)
    start = ckpt if ckpt.is_dir() else ckpt.parent
    for folder in (start, start.parent):  # <out>/model.pt, <out>/model/ (transformers), <out>/
        for name in SIDECARS:
            sidecar = folder / name
            if not sidecar.is_file():
                continue
            try:
                value = json.loads(sidecar.read_text(encoding="utf-8")).get("score_threshold")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(value, int | float) and 0.0 <= float(value) <= 1.0:
                return float(value)
    return None


def resolve_threshold(
    configured: float | None, backend: str, checkpoint: str | os.PathLike[str] | None
) -> tuple[float, str]:
    """``(threshold, source)``: source is ``config`` (set by the config or a flag), ``model`` (the
    checkpoint's own) or ``default``."""
    if configured is not None:
        return float(configured), "config"
    own = checkpoint_threshold(backend, checkpoint) if backend != "xycut" else None
    if own is not None:
        return own, "model"
    return DEFAULT_SCORE_THRESHOLD, "default"
