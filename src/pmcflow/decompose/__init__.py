"""Decompose compound figures into subfigures: boxes, crops, reading order and panel letters.

* :func:`decompose_chunk` -- the workflow stage (FIGURES -> SUBFIGURES, rejections, counts, crops);
* :func:`cli` -- ``pmcflow decompose --out DIR IMAGE...`` for ad-hoc images;
* :mod:`pmcflow.decompose.order` -- reading order (rows, then columns) and letter assignment;
* :mod:`pmcflow.decompose.labelreader` -- the printed panel-letter reader (torch, scipy).
"""

from __future__ import annotations

from pmcflow.decompose.cli import cli
from pmcflow.decompose.stage import STAGE, decompose_chunk, settings

__all__ = ["STAGE", "cli", "decompose_chunk", "settings"]
