"""The ``detector`` config section, typed and frozen (:class:`pmcflow.settings.Settings`): which
backend the workflow trains, its parameters, and how detectors are scored. Defaults, enums and
ranges live in the schema only; each backend's parameters are checked there too and reach the
backend through :func:`pmcflow.detect.base.backend_params`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pmcflow.settings import Settings, thaw


@dataclass(frozen=True)
class DetectorEvalSettings(Settings):
    """``detector.eval``: the sets detectors are scored on, and the IoU of a match."""

    iou: float
    demo_figures: str
    real_coco: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class DetectorSettings(Settings):
    """``detector``."""

    SECTION: ClassVar[tuple[str, ...]] = ("detector",)

    train: bool  # the workflow trains a detector (rules), not read by the stage code
    gpus: int  # the training rule's GPU request (resources)
    backend: str
    params: Mapping[str, Any]  # {backend: its parameters}, as the schema filled and checked them
    score_threshold: float
    nms_iou: float
    batch_size: int
    letter_merge: bool
    eval: DetectorEvalSettings

    def backend_params(self, backend: str | None = None) -> dict[str, Any]:
        """The parameters of ``backend`` (default: the configured one) as a plain dict."""
        return thaw(self.params.get(backend or self.backend) or {})
