"""The detector shipped with the package (``pmcflow/data/detector/``) and the CPU default.

:func:`default_detector` returns the shipped ``transformers`` DAB-DETR checkpoint when the
package contains one, and the weight-free ``xycut`` baseline otherwise, so decomposition always
has a detector without any download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pmcflow.detect.base import Detector, get_detector

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "data" / "detector"


def default_checkpoint() -> Path | None:
    """The shipped transformers checkpoint dir, or None when the package has none."""
    for cand in (SHIPPED_DIR / "model", SHIPPED_DIR):
        if (cand / "config.json").is_file() and any(cand.glob("*.safetensors")):
            return cand
    return None


def default_detector(**params: Any) -> tuple[str, Detector]:
    """``(backend name, detector)`` for decomposition when the config names no checkpoint."""
    ckpt = default_checkpoint()
    if ckpt is not None:
        return "transformers", get_detector("transformers", checkpoint=ckpt, **params)
    return "xycut", get_detector("xycut", **params)
