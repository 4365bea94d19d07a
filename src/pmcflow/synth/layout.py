"""Panel arrangements on a given canvas (a figure's own: :mod:`pmcflow.synth.canvas`).

A layout is a list of panel rectangles on a ``width x height`` canvas.  Kinds:

* ``grid``      m x n, up to 5 x 5 (every row has the same count);
* ``rows``      rows of unequal counts (e.g. 3 + 2), each row its own height share;
* ``columns``   the transpose: columns of unequal counts;
* ``big_stack`` one large panel beside a vertical stack of 2-4 smaller ones (either side);
* ``inset``     a grid where some panels carry a zoomed inset (the inset is part of its host
  panel, not a separate subfigure; see :mod:`pmcflow.synth.compose`).

Margins and gutters follow the public generator: Beta(2, 10) x 50 px (scaled by
``min(width, height) / 512``).  Panels keep one aspect ratio per figure (or per row) when
``aspect_mode`` says so, centred or top-left aligned in their cell; ``fill`` uses the cell.
Outside labels reserve a band above (``outside_top``) or left of (``outside_left``) every cell.

Two options serve :mod:`pmcflow.synth.elements` and take no extra random draws (a layout drawn
with them has the same kind, structure and margins as without): ``no_gutter`` sets both gutters
to 0 and makes every panel fill its cell, so neighbouring panels touch (their boxes are adjacent
and disjoint: cells are cut at shared rounded edges); ``bottom_band`` keeps that many pixels free
under the layout (a caption band).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_GRID = 5
ASPECTS: tuple[float, ...] = (1.0, 4 / 3, 3 / 4, 3 / 2, 2 / 3, 16 / 9, 9 / 16, 5 / 4, 4 / 5)
MIN_FILL = 0.35  # a fixed-aspect panel must cover at least this share of its cell
SPECIAL_KINDS: tuple[str, ...] = ("rows", "columns", "big_stack", "inset")


@dataclass
class Slot:
    """One panel rectangle.  ``group``/``index_in_group`` drive hierarchical labels."""

    x: int
    y: int
    w: int
    h: int
    group: int = 0
    index_in_group: int = 0

    @property
    def box(self) -> tuple[int, int, int, int]:
        return (self.x, self.y, self.w, self.h)


@dataclass
class Layout:
    width: int
    height: int
    kind: str
    structure: list[int]  # panels per row (rows/grid/inset) or per column (columns); big_stack: [1, k]
    slots: list[Slot]
    gap_x: int
    gap_y: int
    margins: tuple[int, int, int, int]  # left, top, right, bottom
    aspect_mode: str
    align: str
    reserve: tuple[int, int] = (0, 0)  # (left, top) label bands per cell
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "width": self.width,
            "height": self.height,
            "kind": self.kind,
            "structure": list(self.structure),
            "slots": [[s.x, s.y, s.w, s.h] for s in self.slots],
            "gap_x": self.gap_x,
            "gap_y": self.gap_y,
            "margins": list(self.margins),
            "aspect_mode": self.aspect_mode,
            "align": self.align,
            "reserve": list(self.reserve),
            "meta": dict(self.meta),
        }


# Panels per figure (weights for 1, 2, 3, ...): real compound figures mostly have 2-6 panels (the
# real-figure development set in demo/real-figures: 3.8 boxes per figure; 8 or more is rare), where
# an m x n grid with m, n uniform in 1..5 averages 9. A single panel teaches the detector that a
# whole chart is one box. Mean 4.8.
PANEL_COUNT_WEIGHTS: tuple[float, ...] = (
    0.10, 0.19, 0.14, 0.16, 0.08, 0.12, 0.03, 0.06, 0.04, 0.02, 0.01, 0.02, 0.0, 0.0, 0.01, 0.01, 0.0, 0.0, 0.0, 0.01,
)  # fmt: skip


@dataclass(frozen=True)
class LayoutParams:
    max_grid: int = MAX_GRID
    # panels per figure when the caller does not force a count; () = an m x n grid, m and n
    # uniform in 1..max_grid (the renderer before PMC-like counts)
    panel_count_weights: tuple[float, ...] = PANEL_COUNT_WEIGHTS
    special_rate: float = 0.10
    gap_scale_px: float = 50.0  # Beta(2,10) x this, at 512 px
    aspect_modes: tuple[tuple[str, float], ...] = (("figure", 0.5), ("row", 0.15), ("fill", 0.35))
    min_panel_px: int = 16


def _beta_px(rng: np.random.Generator, scale: float) -> int:
    return int(round(float(rng.beta(2.0, 10.0)) * scale))


def _split(start: int, length: int, n: int, gap: int, reserve: int) -> list[tuple[int, int]]:
    """Cut ``length`` into ``n`` cells separated by ``gap``, each preceded by ``reserve``."""
    usable = length - gap * (n - 1) - reserve * n
    cell = usable / n
    out = []
    pos = float(start)
    for _ in range(n):
        a = int(round(pos + reserve))
        b = int(round(pos + reserve + cell))
        out.append((a, max(1, b - a)))
        pos += reserve + cell + gap
    return out


def _fit(cx: int, cy: int, cw: int, ch: int, aspect: float | None, align: str) -> tuple[int, int, int, int]:
    """The largest ``aspect`` (w/h) rectangle inside a cell (or the cell for None)."""
    if aspect is None:
        return cx, cy, cw, ch
    if cw / ch > aspect:
        w, h = max(1, int(round(ch * aspect))), ch
    else:
        w, h = cw, max(1, int(round(cw / aspect)))
    if w * h < MIN_FILL * cw * ch:  # an aspect far from the cell's would leave a sliver: fill instead
        return cx, cy, cw, ch
    if align == "center":
        return cx + (cw - w) // 2, cy + (ch - h) // 2, w, h
    return cx, cy, w, h


def partition(n: int, parts: int, rng: np.random.Generator, max_per_part: int = MAX_GRID) -> list[int]:
    """Split ``n`` panels into ``parts`` rows of 1..max_per_part panels, nearly even, shuffled."""
    base, extra = divmod(n, parts)
    counts = [base + (1 if i < extra else 0) for i in range(parts)]
    # perturb: move one panel between two rows now and then, keeping bounds
    if parts > 1 and rng.random() < 0.5:
        i, j = (int(v) for v in rng.choice(parts, size=2, replace=False))
        if counts[i] > 1 and counts[j] < max_per_part:
            counts[i] -= 1
            counts[j] += 1
    rng.shuffle(counts)
    return [int(c) for c in counts]


def choose_structure(
    rng: np.random.Generator, params: LayoutParams, n_panels: int | None = None
) -> tuple[str, list[int]]:
    """Pick a layout kind and its per-row (or per-column) panel counts."""
    g = params.max_grid
    special = rng.random() < params.special_rate
    if n_panels is None and params.panel_count_weights:
        w = np.asarray(params.panel_count_weights, dtype=float)
        n_panels = 1 + int(rng.choice(len(w), p=w / w.sum()))
    if n_panels is None:
        if special:
            kind = SPECIAL_KINDS[int(rng.integers(len(SPECIAL_KINDS)))]
            if kind == "big_stack":
                return kind, [1, int(rng.integers(2, 5))]
            if kind in ("rows", "columns"):
                parts = int(rng.integers(2, g + 1))
                counts = [int(rng.integers(1, g + 1)) for _ in range(parts)]
                if len(set(counts)) == 1:  # make it unequal
                    k = int(rng.integers(parts))
                    counts[k] = counts[k] % g + 1
                return kind, counts
            m, n = int(rng.integers(1, g + 1)), int(rng.integers(1, g + 1))
            return "inset", [n] * m
        m, n = int(rng.integers(1, g + 1)), int(rng.integers(1, g + 1))
        return "grid", [n] * m
    n = max(1, min(int(n_panels), g * g))
    if n == 1:
        return ("inset", [1]) if special else ("grid", [1])
    if special and 3 <= n <= 5 and rng.random() < 0.5:
        return "big_stack", [1, n - 1]
    # rows: between ceil(n/g) and min(n, g) rows
    lo, hi = -(-n // g), min(n, g)
    # prefer a near-square arrangement for the figure's panel count
    target = max(lo, min(hi, int(round(np.sqrt(n)))))
    r = int(rng.choice([max(lo, target - 1), target, min(hi, target + 1)]))
    if n % r == 0 and not special:
        return "grid", [n // r] * r
    counts = partition(n, r, rng, g)
    kind = "columns" if special and rng.random() < 0.5 else "rows"
    return kind, counts


def sample_layout(
    rng: np.random.Generator,
    width: int,
    height: int,
    *,
    params: LayoutParams = LayoutParams(),
    n_panels: int | None = None,
    reserve: tuple[int, int] = (0, 0),
    no_gutter: bool = False,
    bottom_band: int = 0,
    structure: tuple[str, list[int]] | None = None,
) -> Layout:
    """Sample a layout for a ``width x height`` canvas (``n_panels`` forces the panel count).

    ``no_gutter``: gutters 0 and panels filling their cells (touching panels); ``bottom_band``:
    pixels kept free below the layout.  Neither changes the random draws.  ``structure``: a kind
    and panel counts drawn beforehand (:func:`choose_structure`; a canvas sized for its grid,
    :mod:`pmcflow.synth.canvas`): ``rng`` then draws only the rest.
    """
    kind, counts = structure if structure is not None else choose_structure(rng, params, n_panels)
    counts = list(counts)
    scale = params.gap_scale_px * min(width, height) / 512.0
    gap_x, gap_y = _beta_px(rng, scale), _beta_px(rng, scale)
    margins = tuple(_beta_px(rng, scale) for _ in range(4))
    modes, probs = zip(*params.aspect_modes, strict=True)
    p = np.asarray(probs, dtype=float)
    aspect_mode = str(modes[int(rng.choice(len(modes), p=p / p.sum()))])
    align = "center" if rng.random() < 0.6 else "start"
    fig_aspect = float(ASPECTS[int(rng.integers(len(ASPECTS)))])
    row_aspects = [float(ASPECTS[int(rng.integers(len(ASPECTS)))]) for _ in counts]
    big_frac = float(rng.uniform(0.45, 0.66))
    big_left = bool(rng.random() < 0.75)
    if no_gutter:  # after every draw: the stream is the same with and without
        gap_x = gap_y = 0
        aspect_mode = "fill"
    area_h = height - max(0, int(bottom_band))
    if area_h < 1:
        raise ValueError(f"bottom_band {bottom_band} leaves no room on a {width}x{height} canvas")

    def aspect_for(i: int) -> float | None:
        if aspect_mode == "fill":
            return None
        return row_aspects[i] if aspect_mode == "row" else fig_aspect

    # shrink gutters and margins when panels would get too small (many panels, small canvas)
    for _ in range(4):
        slots = _build(
            kind,
            counts,
            width,
            area_h,
            margins,
            gap_x,
            gap_y,
            reserve,
            aspect_for,
            align,
            big_frac,
            big_left,
        )
        if min(min(s.w, s.h) for s in slots) >= params.min_panel_px:
            break
        gap_x, gap_y = gap_x // 2, gap_y // 2
        margins = tuple(m // 2 for m in margins)
    ml, mt, mr, mb = margins
    rl, rt = reserve
    meta: dict[str, Any] = {"figure_aspect": round(fig_aspect, 4)}
    if no_gutter:
        meta["no_gutter"] = True
    if bottom_band:
        meta["bottom_band"] = int(bottom_band)

    return Layout(
        width=width,
        height=height,
        kind=kind,
        structure=list(counts),
        slots=slots,
        gap_x=gap_x,
        gap_y=gap_y,
        margins=(ml, mt, mr, mb),
        aspect_mode=aspect_mode,
        align=align,
        reserve=(rl, rt),
        meta=meta,
    )


def _build(
    kind: str,
    structure: list[int],
    width: int,
    height: int,
    margins: tuple[int, ...],
    gap_x: int,
    gap_y: int,
    reserve: tuple[int, int],
    aspect_for: Any,
    align: str,
    big_frac: float,
    big_left: bool,
) -> list[Slot]:
    ml, mt, mr, mb = margins
    rl, rt = reserve
    x0, y0, aw, ah = ml, mt, width - ml - mr, height - mt - mb
    slots: list[Slot] = []
    if kind in ("grid", "rows", "inset"):
        rows = _split(y0, ah, len(structure), gap_y, rt)
        for r, ((ry, rh), count) in enumerate(zip(rows, structure, strict=True)):
            a = aspect_for(r)
            for c, (cx, cw) in enumerate(_split(x0, aw, count, gap_x, rl)):
                slots.append(Slot(*_fit(cx, ry, cw, rh, a, align), group=r, index_in_group=c))
    elif kind == "columns":
        cols = _split(x0, aw, len(structure), gap_x, rl)
        for c, ((cx, cw), count) in enumerate(zip(cols, structure, strict=True)):
            a = aspect_for(c)
            for r, (ry, rh) in enumerate(_split(y0, ah, count, gap_y, rt)):
                slots.append(Slot(*_fit(cx, ry, cw, rh, a, align), group=c, index_in_group=r))
    elif kind == "big_stack":
        k = structure[1]
        big_w = int(round((aw - gap_x) * big_frac))
        bx = x0 if big_left else x0 + aw - big_w
        sx = x0 + big_w + gap_x if big_left else x0
        sw = aw - big_w - gap_x
        a = aspect_for(0)
        big = Slot(*_fit(bx + rl, y0 + rt, big_w - rl, ah - rt, a, align))
        stack = [Slot(*_fit(sx + rl, sy, sw - rl, sh, a, align)) for sy, sh in _split(y0, ah, k, gap_y, rt)]
        slots = [big, *stack] if big_left else [*stack, big]
        for i, s in enumerate(slots):
            s.index_in_group = i
    else:
        raise ValueError(f"unknown layout kind {kind!r}")
    return slots


def boxes_overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return ax < bx + bw and bx < ax + aw and ay < by + bh and by < ay + ah
