"""The detector shipped with the package (``pmcflow/data/detector/``) and the CPU default.

``pmcflow/data/detector/detector.json`` names the backend and the checkpoint file or folder next
to it (see ``MODEL_CARD.md`` there for how it was trained).  :func:`default_detector` returns that
model when the package ships one and the weight-free ``xycut`` baseline otherwise, so
decomposition always has a detector without any download.  A learned backend asked to predict
without ``--checkpoint`` uses the shipped model when it is of the same backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pmcflow.detect.base import Detector, get_detector

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
