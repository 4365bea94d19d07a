"""Canvas size and shape per figure (config ``synth.canvas``): the composite grows with its panels.

Real compound figures are not all one size: a two-panel figure is often about twice as wide as
tall, a row of three wider still, a figure of 6-12 panels large and about square or portrait, a
single panel near 4:3. The public Open-PMC-18M generator composes the panels at their own sizes
and lets the canvas be what the grid needs; :func:`sample_canvas` draws a canvas of that kind for
the panel grid a figure has drawn (kind and panels per row or column,
:func:`pmcflow.synth.layout.choose_structure`), and the layout is then cut into it as before.

``mode: fixed`` keeps every figure at ``synth.size`` (the renderer before this setting: same
bytes). ``mode: grow`` (the default) treats ``synth.size`` ``W x H`` as the scale: the base side is
``s0 = sqrt(W * H)`` and a figure of ``ref_panels`` panels has the median area ``W * H``.  With
``n`` panels in a grid of ``rows x cols`` (:func:`grid_ratio`)::

    area   = W * H * (n / ref_panels) ** area_power * exp(area_jitter * N(0, 1))
    aspect = panel_aspect * n ** -panel_aspect_decay * (cols / rows) ** grid_power
             * exp(aspect_jitter * N(0, 1))

(the panels of a crowded figure are narrower: one panel about 4:3, a 3 x 3 grid about square, as
page-high figures of many panels are), the aspect (width / height) clipped to ``aspect_range``,
then the canvas scaled, aspect kept, until both sides lie in ``[min_side * s0, max_side * s0]``
(sides rounded to whole pixels).  Two normal draws per figure, from the figure's own child stream
(:func:`pmcflow.synth.compose.sample_figure`).

The defaults live in the config schema only (``synth.canvas``); :meth:`CanvasParams.from_config`
fills them, :meth:`CanvasParams.fixed` is the fixed canvas.  ``FigureParams(canvas=None)`` (the
demo corpus, the label reader's figures, library callers) draws on the canvas it is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MODES: tuple[str, ...] = ("fixed", "grow")


@dataclass(frozen=True)
class CanvasParams:
    """The ``synth.canvas`` settings (see the schema for each key's meaning and default)."""

    mode: str
    ref_panels: int
    area_power: float
    area_jitter: float
    panel_aspect: float
    panel_aspect_decay: float
    grid_power: float
    aspect_jitter: float
    aspect_range: tuple[float, float]
    min_side: float
    max_side: float

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"synth.canvas.mode: {self.mode!r} not in {MODES}")
        if self.ref_panels < 1:
            raise ValueError("synth.canvas.ref_panels: must be >= 1")
        for key in ("area_power", "grid_power", "panel_aspect_decay", "area_jitter", "aspect_jitter"):
            if not 0.0 <= float(getattr(self, key)) <= 1.0:
                raise ValueError(f"synth.canvas.{key}: {getattr(self, key)} is not in [0, 1]")
        lo, hi = self.aspect_range
        if not 0 < lo <= self.panel_aspect <= hi:
            raise ValueError(
                f"synth.canvas.aspect_range: {list(self.aspect_range)} must be [low, high] > 0 "
                f"around panel_aspect {self.panel_aspect}"
            )
        if not 0 < self.min_side <= 1.0 <= self.max_side:
            raise ValueError(
                f"synth.canvas: min_side {self.min_side} and max_side {self.max_side} must keep "
                "0 < min_side <= 1 <= max_side (multiples of the base side)"
            )

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None = None) -> CanvasParams:
        """The settings of ``cfg`` (a possibly partial ``synth.canvas`` mapping) with the schema's
        defaults filled in and checked (:func:`pmcflow.config.subsection`)."""
        from pmcflow.config import subsection

        c = subsection(cfg, "synth", "canvas")
        return cls(
            mode=str(c["mode"]),
            ref_panels=int(c["ref_panels"]),
            area_power=float(c["area_power"]),
            area_jitter=float(c["area_jitter"]),
            panel_aspect=float(c["panel_aspect"]),
            panel_aspect_decay=float(c["panel_aspect_decay"]),
            grid_power=float(c["grid_power"]),
            aspect_jitter=float(c["aspect_jitter"]),
            aspect_range=(float(c["aspect_range"][0]), float(c["aspect_range"][1])),
            min_side=float(c["min_side"]),
            max_side=float(c["max_side"]),
        )

    @classmethod
    def fixed(cls) -> CanvasParams:
        """Every figure on the ``synth.size`` canvas (the other settings: schema defaults, unused)."""
        return cls.from_config({"mode": "fixed"})

    @property
    def grows(self) -> bool:
        return self.mode == "grow"

    def side_bounds(self, width: int, height: int) -> tuple[int, int]:
        """Shortest and longest canvas side (px) for the base ``width x height``."""
        s0 = math.sqrt(width * height)
        return max(1, math.ceil(self.min_side * s0 - 1e-9)), max(1, math.floor(self.max_side * s0 + 1e-9))

    def largest_side(self, width: int, height: int) -> int:
        """The longest side any canvas can have (sizes the source cache: no panel needs more)."""
        return self.side_bounds(width, height)[1] if self.grows else max(width, height)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def grid_ratio(kind: str, structure: Sequence[int]) -> tuple[float, float]:
    """``(rows, cols)`` of a layout as the canvas shape sees it.

    A grid, rows of unequal counts and an inset grid: as many rows as the structure, as many
    columns as its longest row; columns: the transpose; a big panel beside a stack of ``k``: ``k``
    rows of ``k + 1`` columns' width (the big panel about as wide as the stack is tall, the stacked
    panels about square).
    """
    if kind == "columns":
        return float(max(structure)), float(len(structure))
    if kind == "big_stack":
        k = int(structure[1])
        return float(k), float(k + 1)
    return float(len(structure)), float(max(structure))


def sample_canvas(
    rng: np.random.Generator,
    params: CanvasParams,
    width: int,
    height: int,
    kind: str,
    structure: Sequence[int],
) -> tuple[int, int, dict[str, Any]]:
    """``(width, height, record)`` of one figure's canvas for the base ``width x height``.

    Two draws from ``rng`` (area and aspect jitter, always both); ``record`` holds what was drawn.
    """
    z_area, z_aspect = (float(v) for v in rng.standard_normal(2))
    n = sum(int(c) for c in structure)  # big_stack [1, k]: 1 + k panels
    rows, cols = grid_ratio(kind, structure)
    area = (
        width * height * (n / params.ref_panels) ** params.area_power * math.exp(params.area_jitter * z_area)
    )
    lo_side, hi_side = params.side_bounds(width, height)
    a_lo = max(params.aspect_range[0], lo_side / hi_side)
    a_hi = min(params.aspect_range[1], hi_side / lo_side)
    panel = params.panel_aspect * n**-params.panel_aspect_decay  # crowded figures: narrower panels
    drawn = panel * (cols / rows) ** params.grid_power * math.exp(params.aspect_jitter * z_aspect)
    aspect = min(max(drawn, a_lo), a_hi)
    w, h = math.sqrt(area * aspect), math.sqrt(area / aspect)
    if max(w, h) > hi_side:
        f = hi_side / max(w, h)
        w, h = w * f, h * f
    if min(w, h) < lo_side:
        f = lo_side / min(w, h)
        w, h = w * f, h * f
    cw = min(max(int(round(w)), lo_side), hi_side)
    ch = min(max(int(round(h)), lo_side), hi_side)
    record = {
        "mode": params.mode,
        "base": [width, height],
        "grid": [rows, cols],
        "aspect": round(drawn, 4),
        "area_scale": round(area / (width * height), 4),
        "size": [cw, ch],
    }
    return cw, ch, record
