"""Realistic extras of rendered figures (config ``synth.elements``): what real PMC figures have
besides their panels, so the detector does not learn that everything it sees is a clean panel.

=================== ======================================================================== =======
element             what                                                                      default
=================== ======================================================================== =======
JPEG output         a share of figures written as JPEG (quality drawn from a range, 4:2:0)   0.6
caption distractor  2-5 lines of caption-like text in a band under the panels ("Figure 3.    0.15
                    ..."), never inside a box and never annotated
marks               scale bars, arrows, asterisks and short text drawn inside photographic    0.35
                    panels (never on charts, blots or gels)
round mask          a photographic panel shown through a circle, black outside (endoscopy,   0.08
                    fundus, dermoscopy)
dark figure         black background with light labels (CT/MRI figures)                      0.08
no gutter           panels touching each other (optionally a 1-2 px separator line drawn     0.1
                    inside the boxes); boxes stay adjacent and disjoint
=================== ======================================================================== =======

The defaults live in the config schema only (``synth.elements``); :meth:`ElementParams.from_config`
fills them, :meth:`ElementParams.off` is every rate at 0.  ``FigureParams(elements=None)`` (the
demo corpus, the label-reader data) draws none of them.

Randomness: :func:`pmcflow.synth.compose.sample_figure` spawns a child of the figure's own
generator (``rng.spawn``, which leaves the parent's stream untouched), so with every rate at 0 a
figure's panels, crops and labels are the same pixels as without elements.  Figure-level choices
take a fixed number of draws (:func:`sample_figure_elements`) and each panel has its own child
stream, so switching one element on or off leaves the choices of the others alone (only geometry
that depends on them moves: a caption band shortens the layout, a round mask keeps marks inside the
circle).  Nothing here reads pixels except the "auto" mark colour, decided at drawing time from the
pixels under the mark and recorded as drawn (as label colours are).

The caption text comes from the small vocabulary below (written for this module, no real
captions): sentences like "Figure 3. Representative confocal images of liver sections from
wild-type and knockout mice (A-C). Scale bars, 50 um." ASCII only, as the shipped fonts are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from pmcflow.synth import labels as L

Color = tuple[int, int, int]
Box = tuple[int, int, int, int]  # x, y, w, h

RATE_KEYS: tuple[str, ...] = (
    "jpeg_rate",
    "caption_rate",
    "annotation_rate",
    "round_mask_rate",
    "dark_rate",
    "no_gutter_rate",
)
MARK_KINDS: tuple[str, ...] = ("scale_bar", "arrow", "asterisk", "text")
SUBSAMPLINGS: tuple[str, ...] = ("4:4:4", "4:2:2", "4:2:0")
CAPTION_MAX_SHARE = 0.25  # a caption band takes at most this share of the canvas height
MIN_MARK_PANEL = 40  # panels with a shorter side get no marks
MIN_MASK_PANEL = 40  # ... and no round mask
MASK_MAX_ASPECT = 1.6  # nor a panel longer than this times its width (a dot in a black strip)
DARK_BACKGROUND: Color = (0, 0, 0)
LIGHT_LABELS: tuple[Color, ...] = ((255, 255, 255), (255, 255, 255), (235, 235, 235), (255, 255, 150))
MARK_COLORS: tuple[Color, ...] = ((255, 255, 255), (255, 230, 0), (230, 30, 30), (0, 0, 0), (0, 220, 255))
SEPARATOR_COLORS: tuple[Color, ...] = ((255, 255, 255), (255, 255, 255), (0, 0, 0))
CAPTION_FONTS: tuple[tuple[str, str], ...] = (
    ("DejaVuSans", "DejaVuSans-Bold"),
    ("DejaVuSerif", "DejaVuSerif-Bold"),
)


# ----------------------------------------------------------------------------------------------
# settings
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ElementParams:
    """The ``synth.elements`` settings (see the schema for each key's meaning and default)."""

    jpeg_rate: float
    jpeg_quality: tuple[int, int]
    jpeg_subsampling: str
    caption_rate: float
    caption_lines: tuple[int, int]
    annotation_rate: float
    annotation_kinds: tuple[str, ...]
    annotation_max: int
    round_mask_rate: float
    dark_rate: float
    no_gutter_rate: float
    separator_rate: float

    def __post_init__(self) -> None:
        for key in (*RATE_KEYS, "separator_rate"):
            v = getattr(self, key)
            if not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"synth.elements.{key}: {v} is not in [0, 1]")
        q_lo, q_hi = self.jpeg_quality
        if not 1 <= q_lo <= q_hi <= 100:
            raise ValueError(
                f"synth.elements.jpeg_quality: {list(self.jpeg_quality)} is not [low, high] in 1..100"
            )
        c_lo, c_hi = self.caption_lines
        if not 1 <= c_lo <= c_hi:
            raise ValueError(
                f"synth.elements.caption_lines: {list(self.caption_lines)} is not [low, high] >= 1"
            )
        if self.jpeg_subsampling not in SUBSAMPLINGS:
            raise ValueError(
                f"synth.elements.jpeg_subsampling: {self.jpeg_subsampling!r} not in {SUBSAMPLINGS}"
            )
        unknown = set(self.annotation_kinds) - set(MARK_KINDS)
        if unknown or not self.annotation_kinds:
            raise ValueError(
                f"synth.elements.annotation_kinds: {list(self.annotation_kinds)} (use some of {MARK_KINDS})"
            )
        if self.annotation_max < 1:
            raise ValueError("synth.elements.annotation_max: must be >= 1")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None = None) -> ElementParams:
        """The settings of ``cfg`` (a possibly partial ``synth.elements`` mapping) with the schema's
        defaults filled in and checked (:func:`pmcflow.config.subsection`)."""
        from pmcflow.config import subsection

        e = subsection(cfg, "synth", "elements")
        return cls(
            jpeg_rate=float(e["jpeg_rate"]),
            jpeg_quality=(int(e["jpeg_quality"][0]), int(e["jpeg_quality"][1])),
            jpeg_subsampling=str(e["jpeg_subsampling"]),
            caption_rate=float(e["caption_rate"]),
            caption_lines=(int(e["caption_lines"][0]), int(e["caption_lines"][1])),
            annotation_rate=float(e["annotation_rate"]),
            annotation_kinds=tuple(str(k) for k in e["annotation_kinds"]),
            annotation_max=int(e["annotation_max"]),
            round_mask_rate=float(e["round_mask_rate"]),
            dark_rate=float(e["dark_rate"]),
            no_gutter_rate=float(e["no_gutter_rate"]),
            separator_rate=float(e["separator_rate"]),
        )

    @classmethod
    def off(cls) -> ElementParams:
        """Every element switched off (all rates 0): PNG figures as drawn without elements."""
        return cls.from_config(dict.fromkeys(RATE_KEYS, 0.0))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


# ----------------------------------------------------------------------------------------------
# figure-level choices
# ----------------------------------------------------------------------------------------------


@dataclass
class FigureElements:
    """The figure-level choices of one figure (JSON-able through :meth:`to_record`)."""

    dark: bool
    label_color: Color | None  # light label colour of a dark figure
    no_gutter: bool
    separator: tuple[int, Color] | None  # (width px, colour) between touching panels
    caption_band: int  # px kept free under the layout for the caption (0: none)
    caption_lines: int
    caption_size: int
    caption_fonts: tuple[str, str]  # (regular, bold)
    caption_seed: int
    encoding: dict[str, Any]  # {"format": "png"} or {"format": "jpeg", "quality", "subsampling"}

    def to_record(self) -> dict[str, Any]:
        return {
            "dark": self.dark,
            "label_color": None if self.label_color is None else list(self.label_color),
            "no_gutter": self.no_gutter,
            "separator": None if self.separator is None else [self.separator[0], list(self.separator[1])],
            "caption_band": self.caption_band,
            "encoding": dict(self.encoding),
        }


def caption_font_size(width: int, height: int, u: float) -> int:
    """Caption text size: 1.8-2.6 % of the canvas' short side (9-13 px at 512), at least 7 px."""
    return max(7, int(round(min(width, height) * (0.018 + 0.008 * u))))


def caption_band_height(n_lines: int, size: int) -> int:
    """Height of a caption band of ``n_lines`` lines of ``size`` px text (with its padding)."""
    return 2 * max(2, size // 2) + n_lines * line_height(size)


def line_height(size: int) -> int:
    return int(math.ceil(size * 1.25))


def sample_figure_elements(
    rng: np.random.Generator, p: ElementParams, width: int, height: int, *, chart_figure: bool
) -> FigureElements:
    """Draw the figure-level choices (a fixed number of draws, whatever the rates).

    ``chart_figure``: a figure of a plot-like modality (never dark: charts are printed on white).
    """
    u = rng.random(10)
    q = int(rng.integers(p.jpeg_quality[0], p.jpeg_quality[1] + 1))
    n_lines = int(rng.integers(p.caption_lines[0], p.caption_lines[1] + 1))
    caption_seed = int(rng.integers(0, 2**62))
    dark = bool(u[0] < p.dark_rate) and not chart_figure
    no_gutter = bool(u[1] < p.no_gutter_rate)
    separator = None
    if no_gutter and u[2] < p.separator_rate:
        separator = (1 + int(u[3] < 0.5), SEPARATOR_COLORS[int(u[4] * len(SEPARATOR_COLORS))])
    fonts = CAPTION_FONTS[int(u[5] * len(CAPTION_FONTS))]
    size = caption_font_size(width, height, float(u[6]))
    band = 0
    if u[7] < p.caption_rate:
        # as many of the drawn lines as fit in CAPTION_MAX_SHARE of the height (none if one does not)
        while n_lines > 1 and caption_band_height(n_lines, size) > CAPTION_MAX_SHARE * height:
            n_lines -= 1
        if caption_band_height(n_lines, size) <= CAPTION_MAX_SHARE * height:
            band = caption_band_height(n_lines, size)
    encoding: dict[str, Any] = {"format": "png"}
    if u[8] < p.jpeg_rate:
        encoding = {"format": "jpeg", "quality": q, "subsampling": p.jpeg_subsampling}
    label_color = LIGHT_LABELS[int(u[9] * len(LIGHT_LABELS))] if dark else None
    return FigureElements(
        dark=dark,
        label_color=label_color,
        no_gutter=no_gutter,
        separator=separator,
        caption_band=band,
        caption_lines=n_lines if band else 0,
        caption_size=size,
        caption_fonts=fonts,
        caption_seed=caption_seed,
        encoding=encoding,
    )


# ----------------------------------------------------------------------------------------------
# caption distractor
# ----------------------------------------------------------------------------------------------

_OPEN = (
    "Representative",
    "Quantitative analysis of",
    "Comparison of",
    "Characterization of",
    "Time course of",
    "Expression of",
    "Distribution of",
    "Effect of treatment on",
    "Overview of",
)
_IMAGING = (
    "confocal images",
    "bright-field images",
    "H&E-stained sections",
    "immunofluorescence images",
    "axial CT images",
    "T2-weighted MR images",
    "fundus photographs",
    "dermoscopic images",
    "electron micrographs",
    "ultrasound images",
    "endoscopic views",
    "phase-contrast images",
)
_TISSUE = (
    "liver sections",
    "the retina",
    "cortical neurons",
    "lung tissue",
    "skin biopsies",
    "kidney sections",
    "the hippocampus",
    "cultured HeLa cells",
    "primary fibroblasts",
    "tumour xenografts",
    "the colonic mucosa",
    "cardiac muscle",
    "the spinal cord",
    "lymph nodes",
)
_GROUP = (
    "wild-type",
    "knockout",
    "vehicle-treated",
    "drug-treated",
    "sham-operated",
    "control",
    "untreated",
    "transgenic",
    "aged",
    "young",
)
_SUBJECT = ("mice", "rats", "patients", "donors", "zebrafish larvae", "organoids")
_FEATURE = (
    "inflammatory infiltrates",
    "the lesion margin",
    "fibrotic areas",
    "apoptotic cells",
    "vascular structures",
    "necrotic regions",
    "positive nuclei",
    "the region enlarged in the inset",
    "collagen deposition",
    "calcifications",
)
_TIME = ("24 h", "48 h", "72 h", "day 7", "day 14", "week 4", "baseline", "follow-up")
_MARKER = ("Ki-67", "CD31", "GFAP", "DAPI", "CD68", "alpha-SMA", "E-cadherin", "p53", "HER2", "NeuN")
_STAT = (
    "Student's t-test",
    "one-way ANOVA",
    "two-way ANOVA with Tukey's test",
    "Mann-Whitney test",
    "log-rank test",
)
_SCALE = ("10", "20", "50", "100", "200", "500")


def _pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return items[int(rng.integers(len(items)))]


def _panel_ref(rng: np.random.Generator) -> str:
    """A panel reference as captions write them: (A), (B-D), (c), (E and F)."""
    upper = bool(rng.random() < 0.6)
    a = int(rng.integers(0, 6))
    first = L.letters(a, upper)
    r = rng.random()
    if r < 0.5:
        return f"({first})"
    if r < 0.8:
        return f"({first}-{L.letters(a + int(rng.integers(1, 4)), upper)})"
    return f"({first} and {L.letters(a + 1, upper)})"


def caption_sentence(rng: np.random.Generator) -> str:
    """One caption-like sentence from the vocabulary of this module."""
    k = int(rng.integers(8))
    if k == 0:
        return f"{_pick(rng, _OPEN)} {_pick(rng, _IMAGING)} of {_pick(rng, _TISSUE)} from {_pick(rng, _GROUP)} and {_pick(rng, _GROUP)} {_pick(rng, _SUBJECT)} {_panel_ref(rng)}."
    if k == 1:
        return f"{_panel_ref(rng)} {_pick(rng, _MARKER)} staining of {_pick(rng, _TISSUE)} at {_pick(rng, _TIME)}."
    if k == 2:
        return f"Arrows indicate {_pick(rng, _FEATURE)}; asterisks mark {_pick(rng, _FEATURE)}."
    if k == 3:
        return f"Scale bars, {_pick(rng, _SCALE)} um."
    if k == 4:
        n = int(rng.integers(3, 13))
        return f"Data are mean +/- SEM (n = {n} per group); *P < 0.05, **P < 0.01 ({_pick(rng, _STAT)})."
    if k == 5:
        return f"{_panel_ref(rng)} Quantification of {_pick(rng, _FEATURE)} in {_pick(rng, _GROUP)} {_pick(rng, _SUBJECT)}."
    if k == 6:
        return f"{_pick(rng, _IMAGING).capitalize()} showing {_pick(rng, _FEATURE)} at {_pick(rng, _TIME)} {_panel_ref(rng)}."
    return f"The boxed area is shown at higher magnification {_panel_ref(rng)}."


def caption_words(rng: np.random.Generator, n_words: int) -> tuple[str, list[str]]:
    """``(bold prefix, words)``: "Figure 3." (or "Fig. 3", "Supplementary Figure S2.") and at least
    ``n_words`` words of sentences."""
    num = int(rng.integers(1, 9))
    prefix = ("Figure {n}.", "Fig. {n}", "FIGURE {n}.", "Supplementary Figure S{n}.")[
        int(rng.integers(4))
    ].format(n=num)
    words: list[str] = []
    while len(words) < n_words:
        words += caption_sentence(rng).split()
    return prefix, words


@dataclass
class CaptionSpec:
    """A caption band: ``lines`` of text from ``(x, y)``, the first opening with ``prefix`` in bold."""

    x: int
    y: int
    size: int
    font: str
    bold_font: str
    color: Color
    prefix: str
    lines: list[str]
    bbox: Box  # the ink of every line (never inside a panel box; not annotated)

    def to_record(self) -> dict[str, Any]:
        return {
            "xy": [self.x, self.y],
            "size": self.size,
            "font": self.font,
            "bold_font": self.bold_font,
            "color": list(self.color),
            "prefix": self.prefix,
            "lines": list(self.lines),
            "bbox": list(self.bbox),
        }


def _wrap(prefix_w: float, words: Sequence[str], font: Any, max_w: float, n_lines: int) -> list[str]:
    """Greedy word wrap into ``n_lines`` lines of at most ``max_w`` px (the first after the prefix)."""
    space = font.getlength(" ")
    lines: list[str] = []
    cur: list[str] = []
    used = prefix_w + space if prefix_w else 0.0
    for w in words:
        ww = font.getlength(w)
        if cur and used + ww > max_w:
            lines.append(" ".join(cur))
            if len(lines) == n_lines:
                return lines
            cur, used = [], 0.0
        cur.append(w)
        used += ww + space
    if cur and len(lines) < n_lines:
        lines.append(" ".join(cur))
    return lines


def sample_caption(
    fe: FigureElements, width: int, height: int, left: int, right: int, background: Color
) -> CaptionSpec | None:
    """The caption band of a figure whose layout leaves ``fe.caption_band`` px free at the bottom.

    Text starts at the layout's left margin ``left`` and wraps before ``width - right``.
    """
    if not fe.caption_band:
        return None
    rng = np.random.default_rng(fe.caption_seed)
    size = fe.caption_size
    regular, bold = fe.caption_fonts
    f, fb = L.font(regular, size), L.font(bold, size)
    x = max(2, left)
    max_w = max(40.0, float(width - x - max(2, right)))
    prefix, words = caption_words(rng, 40 * fe.caption_lines)
    lines = _wrap(fb.getlength(prefix), words, f, max_w, fe.caption_lines)
    y = height - fe.caption_band + max(2, size // 2)
    lum = 0.299 * background[0] + 0.587 * background[1] + 0.114 * background[2]
    color: Color = (20, 20, 20) if lum > 127 else (225, 225, 225)
    cap = CaptionSpec(x, y, size, regular, bold, color, prefix, lines, (0, 0, 0, 0))
    cap.bbox = _caption_ink(cap)
    return cap


def _caption_runs(cap: CaptionSpec) -> list[tuple[float, int, str, str]]:
    """``(x, y, text, font name)`` of every run of text in the caption."""
    runs: list[tuple[float, int, str, str]] = []
    lh = line_height(cap.size)
    for k, line in enumerate(cap.lines):
        x, y = float(cap.x), cap.y + k * lh
        if k == 0 and cap.prefix:
            runs.append((x, y, cap.prefix, cap.bold_font))
            x += L.font(cap.bold_font, cap.size).getlength(cap.prefix + " ")
        runs.append((x, y, line, cap.font))
    return runs


def _caption_ink(cap: CaptionSpec) -> Box:
    boxes = [L.font(name, cap.size).getbbox(text) for _, _, text, name in _caption_runs(cap)]
    runs = _caption_runs(cap)
    x0 = min(int(math.floor(x + b[0])) for (x, _, _, _), b in zip(runs, boxes, strict=True))
    y0 = min(y + b[1] for (_, y, _, _), b in zip(runs, boxes, strict=True))
    x1 = max(int(math.ceil(x + b[2])) for (x, _, _, _), b in zip(runs, boxes, strict=True))
    y1 = max(y + b[3] for (_, y, _, _), b in zip(runs, boxes, strict=True))
    return (x0, y0, max(1, x1 - x0), max(1, y1 - y0))


def draw_caption(draw: ImageDraw.ImageDraw, cap: CaptionSpec) -> None:
    """Draw the caption's text, left aligned (no box, no background)."""
    for x, y, text, name in _caption_runs(cap):
        draw.text((x, y), text, font=L.font(name, cap.size), fill=tuple(cap.color))


# ----------------------------------------------------------------------------------------------
# panel-level: round masks and marks (scale bars, arrows, asterisks, text)
# ----------------------------------------------------------------------------------------------


def sample_round_mask(rng: np.random.Generator, w: int, h: int) -> dict[str, float]:
    """A circle in panel coordinates: centred (+-3 %), radius 0.42-0.56 of the short side (so a
    wide panel gets black sides and a large circle is cut by the edges, as endoscopy and fundus
    images are)."""
    s = min(w, h)
    cx = w / 2 + float(rng.uniform(-0.03, 0.03)) * w
    cy = h / 2 + float(rng.uniform(-0.03, 0.03)) * h
    r = s * float(rng.uniform(0.42, 0.56))
    return {"cx": round(cx, 2), "cy": round(cy, 2), "r": round(r, 2)}


def apply_round_mask(tile: Image.Image, mask: Mapping[str, float]) -> Image.Image:
    """``tile`` black outside the circle (edges anti-aliased by drawing at 2x and reducing)."""
    w, h = tile.size
    m = Image.new("L", (2 * w, 2 * h), 0)
    cx, cy, r = 2 * mask["cx"], 2 * mask["cy"], 2 * mask["r"]
    ImageDraw.Draw(m).ellipse((cx - r, cy - r, cx + r, cy + r), fill=255)
    m = m.reduce(2)
    out = Image.new("RGB", (w, h), (0, 0, 0))
    out.paste(tile, (0, 0), m)
    return out


def mark_region(box: Box, mask: Mapping[str, float] | None) -> Box:
    """Where marks may go: the panel less a small margin, or the square inscribed in its circle."""
    x, y, w, h = box
    m = max(2, min(w, h) // 25)
    rx0, ry0, rx1, ry1 = x + m, y + m, x + w - m, y + h - m
    if mask is not None:
        half = mask["r"] / math.sqrt(2) - 1
        rx0 = max(rx0, int(math.ceil(x + mask["cx"] - half)))
        ry0 = max(ry0, int(math.ceil(y + mask["cy"] - half)))
        rx1 = min(rx1, int(math.floor(x + mask["cx"] + half)))
        ry1 = min(ry1, int(math.floor(y + mask["cy"] + half)))
    return (rx0, ry0, max(0, rx1 - rx0), max(0, ry1 - ry0))


def _inside(b: Box, region: Box) -> bool:
    return (
        b[0] >= region[0]
        and b[1] >= region[1]
        and b[0] + b[2] <= region[0] + region[2]
        and b[1] + b[3] <= region[1] + region[3]
    )


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def _mark_color(rng: np.random.Generator) -> Color | None:
    """None = "auto" (black or white from the pixels under the mark), else a palette colour."""
    if rng.random() < 0.5:
        return None
    return MARK_COLORS[int(rng.integers(len(MARK_COLORS)))]


def _text_mark(
    rng: np.random.Generator, kind: str, text: str, size: int, region: Box, where: str
) -> dict[str, Any] | None:
    font = "DejaVuSans-Bold" if kind == "asterisk" or rng.random() < 0.5 else "DejaVuSans"
    ox, oy, tw, th = L.text_size(font, size, text)
    rx, ry, rw, rh = region
    if tw > rw or th > rh:
        return None
    if where == "any":
        bx, by = rx + int(rng.integers(0, rw - tw + 1)), ry + int(rng.integers(0, rh - th + 1))
    else:
        bx = rx if where.endswith("l") else rx + rw - tw if where.endswith("r") else rx + (rw - tw) // 2
        by = ry if where.startswith("t") else ry + rh - th
    return {
        "kind": kind,
        "text": text,
        "font": font,
        "size": size,
        "xy": [bx - ox, by - oy],
        "bbox": [bx, by, tw, th],
        "color": _mark_color(rng),
    }


def scale_bar_mark(rng: np.random.Generator, box: Box, region: Box) -> dict[str, Any] | None:
    """A horizontal bar in a bottom corner, 12-30 % of the panel wide, sometimes with its length
    written above it ("50 um")."""
    rx, ry, rw, rh = region
    s = min(box[2], box[3])
    length = max(6, int(round(rw * float(rng.uniform(0.12, 0.3)))))
    thick = max(2, int(round(s * float(rng.uniform(0.012, 0.028)))))
    right = bool(rng.random() < 0.7)
    text = None
    if rng.random() < 0.5:
        text = f"{_pick(rng, _SCALE)} {_pick(rng, ('um', 'um', 'mm', 'nm'))}"
    color = _mark_color(rng)
    tsize = max(8, int(round(s * float(rng.uniform(0.05, 0.08)))))
    tw = th = ox = oy = 0
    if text is not None:
        ox, oy, tw, th = L.text_size("DejaVuSans-Bold", tsize, text)
        if tw > rw or th + thick + 2 > rh:
            text = None
            tw = th = 0
    width = max(length, tw)
    if width > rw or thick > rh:
        return None
    x0 = rx + rw - width if right else rx
    bar = [x0 + (width - length) // 2, ry + rh - thick, length, thick]
    bbox = [x0, bar[1] - (th + 2 if text else 0), width, thick + (th + 2 if text else 0)]
    mark: dict[str, Any] = {"kind": "scale_bar", "rect": bar, "bbox": bbox, "color": color}
    if text is not None:
        tx = x0 + (width - tw) // 2
        mark.update({"text": text, "font": "DejaVuSans-Bold", "size": tsize, "xy": [tx - ox, bbox[1] - oy]})
    return mark


def arrow_mark(rng: np.random.Generator, box: Box, region: Box) -> dict[str, Any] | None:
    """A filled arrow (shaft + triangular head) pointing at a point of the panel, 10-22 % of its
    short side long, in one of 8 directions."""
    rx, ry, rw, rh = region
    s = min(box[2], box[3])
    length = s * float(rng.uniform(0.1, 0.22))
    head = max(4.0, length * 0.38)
    shaft = max(1, int(round(length / 9)))
    tip = (rx + float(rng.uniform(0.15, 0.85)) * rw, ry + float(rng.uniform(0.15, 0.85)) * rh)
    start = int(rng.integers(8))
    color = _mark_color(rng)
    for k in range(8):  # the first of the 8 directions whose arrow fits the region
        ang = (start + k) * math.pi / 4
        dx, dy = math.cos(ang), math.sin(ang)
        tail = (tip[0] - dx * length, tip[1] - dy * length)
        base = (tip[0] - dx * head, tip[1] - dy * head)
        px, py = -dy * head * 0.5, dx * head * 0.5
        tri = [tip, (base[0] + px, base[1] + py), (base[0] - px, base[1] - py)]
        pts = [*tri, tail]
        pad = shaft / 2 + 1
        x0, y0 = math.floor(min(p[0] for p in pts) - pad), math.floor(min(p[1] for p in pts) - pad)
        x1, y1 = math.ceil(max(p[0] for p in pts) + pad), math.ceil(max(p[1] for p in pts) + pad)
        bbox = (int(x0), int(y0), int(x1 - x0), int(y1 - y0))
        if _inside(bbox, region):
            r2 = lambda p: [round(p[0], 2), round(p[1], 2)]  # noqa: E731
            return {
                "kind": "arrow",
                "head": [r2(p) for p in tri],
                "shaft": [r2(tail), r2(base)],
                "width": shaft,
                "bbox": list(bbox),
                "color": color,
            }
    return None


def sample_marks(
    rng: np.random.Generator,
    p: ElementParams,
    box: Box,
    mask: Mapping[str, float] | None,
    avoid: Sequence[Box],
) -> list[dict[str, Any]]:
    """1..``annotation_max`` marks of ``annotation_kinds`` inside the panel ``box`` (canvas
    coordinates), none over the ``avoid`` boxes (its label, its inset) or over each other."""
    region = mark_region(box, mask)
    if min(box[2], box[3]) < MIN_MARK_PANEL or region[2] < 12 or region[3] < 12:
        return []
    n = int(rng.integers(1, p.annotation_max + 1))
    s = min(box[2], box[3])
    taken = [tuple(a) for a in avoid]
    marks: list[dict[str, Any]] = []
    has_bar = False
    for _ in range(n):
        kind = p.annotation_kinds[int(rng.integers(len(p.annotation_kinds)))]
        for _try in range(4):
            if kind == "scale_bar":
                m = None if has_bar else scale_bar_mark(rng, box, region)
            elif kind == "arrow":
                m = arrow_mark(rng, box, region)
            elif kind == "asterisk":
                size = max(10, int(round(s * float(rng.uniform(0.08, 0.16)))))
                m = _text_mark(
                    rng, "asterisk", _pick(rng, ("*", "*", "**", "#", "+", "***")), size, region, "any"
                )
            else:
                size = max(8, int(round(s * float(rng.uniform(0.055, 0.1)))))
                m = _text_mark(
                    rng,
                    "text",
                    _pick(rng, _ANNOTATION_WORDS),
                    size,
                    region,
                    _pick(rng, ("tr", "bl", "tc", "bc", "tl", "br")),
                )
            if m is None:
                break
            b = tuple(m["bbox"])
            if _inside(b, region) and not any(_overlaps(b, t) for t in taken):
                marks.append(m)
                taken.append(b)
                has_bar = has_bar or kind == "scale_bar"
                break
    return marks


_ANNOTATION_WORDS = (
    "DAPI",
    "Merge",
    "CD31",
    "Ki-67",
    "H&E",
    "Control",
    "KO",
    "WT",
    "L",
    "R",
    "T2",
    "FLAIR",
    "T1+C",
    "24 h",
    "48 h",
    "Day 7",
    "Tumor",
    "Normal",
    "x40",
    "x200",
    "Pre",
    "Post",
    "GFP",
    "Sham",
    "Vehicle",
    "Baseline",
    "ADC",
    "DWI",
    "Axial",
    "Sagittal",
)


def draw_marks(tile: Image.Image, origin: tuple[int, int], marks: Sequence[dict[str, Any]]) -> None:
    """Draw ``marks`` (canvas coordinates) onto the panel ``tile`` whose top-left is ``origin``:
    nothing can leave the panel.  An "auto" colour (None) becomes black or white from the pixels
    under the mark and is recorded in the mark as drawn."""
    ox, oy = origin
    draw = ImageDraw.Draw(tile)
    for m in marks:
        x, y, w, h = m["bbox"]
        if m["color"] is None:
            patch = tile.crop((x - ox, y - oy, x - ox + w, y - oy + h)).convert("L")
            m["color"] = [0, 0, 0] if float(np.asarray(patch).mean()) > 110 else [255, 255, 255]
        color = tuple(m["color"])
        if m["kind"] == "scale_bar":
            bx, by, bw, bh = m["rect"]
            draw.rectangle((bx - ox, by - oy, bx - ox + bw - 1, by - oy + bh - 1), fill=color)
        elif m["kind"] == "arrow":
            (tx, ty), (bx, by) = m["shaft"]
            draw.line((tx - ox, ty - oy, bx - ox, by - oy), fill=color, width=int(m["width"]))
            draw.polygon([(px - ox, py - oy) for px, py in m["head"]], fill=color)
        if "text" in m:
            mask, (mx, my) = L.text_mask(m["font"], m["size"], m["text"])
            tx, ty = m["xy"]
            tile.paste(
                color,
                (tx - ox + mx, ty - oy + my, tx - ox + mx + mask.width, ty - oy + my + mask.height),
                mask,
            )


def draw_separator(
    draw: ImageDraw.ImageDraw, box: Box, first_x: int, first_y: int, sep: tuple[int, Color]
) -> None:
    """A separator line along the left and top edges of a panel that has a neighbour there, drawn
    inside the panel's box (boxes of a no-gutter figure touch, so the line is the seam)."""
    x, y, w, h = box
    width, color = sep
    if x > first_x:
        draw.rectangle((x, y, x + width - 1, y + h - 1), fill=tuple(color))
    if y > first_y:
        draw.rectangle((x, y, x + w - 1, y + width - 1), fill=tuple(color))
