"""Subfigure detectors: one interface, four backends (xycut, ultralytics, transformers, mmdet).

Use :func:`pmcflow.detect.base.get_detector` to build a backend by name, :func:`run_detection`
to detect on a batch of image files without letting one bad file stop the batch, and
:mod:`pmcflow.detect.evaluate` for COCO mAP and F1@0.5.
"""

from __future__ import annotations

from pmcflow.detect.base import (
    BACKENDS,
    Box,
    DetectionResult,
    Detector,
    TrainResult,
    get_detector,
    run_detection,
)
from pmcflow.detect.images import ImageError, load_image

__all__ = [
    "BACKENDS",
    "Box",
    "DetectionResult",
    "Detector",
    "ImageError",
    "TrainResult",
    "get_detector",
    "load_image",
    "run_detection",
]
