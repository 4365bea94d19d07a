"""The ``decompose`` config section, typed and frozen (:class:`pmcflow.settings.Settings`).

Its own module, so that the code that only reads these settings (letter merging in the detector's
evaluation) does not import the decompose stage, and editing the stage does not rerun it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pmcflow.settings import Settings


@dataclass(frozen=True)
class DecomposeSettings(Settings):
    """``decompose``: the detector over real figure graphics, crops and panel letters (defaults,
    ranges and meanings in config/schema/config.schema.yaml)."""

    SECTION: ClassVar[tuple[str, ...]] = ("decompose",)

    gpus: int  # the rule's GPU request (resources), not read by the stage code
    backend: str
    checkpoint: str | None
    detector_params: Mapping[str, Any]
    score_threshold: float | None
    nms_iou: float
    batch_size: int
    min_box_px: int
    single_panel_cover: float
    crop_format: str
    jpeg_quality: int
    label_reading: bool
    label_min_prob: float
    letter_merge: bool
    letter_merge_overlap: float
    max_pixels: int
    max_caption_chars: int
