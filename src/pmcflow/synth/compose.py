"""Sample a figure specification and compose it into one compound image with its boxes.

``sample_figure(rng, pool, ...)`` draws every random choice of one figure (layout, modalities,
sources, crops, flips, colour jitter, label grammar/placement/font/colour, borders, background,
and with ``FigureParams.elements`` the realistic extras of :mod:`pmcflow.synth.elements`: dark
figures, no-gutter layouts with separators, a caption band, round masks, scale bars / arrows /
asterisks / text on photographic panels, JPEG encoding) into a JSON-able :class:`FigureSpec`;
``compose(spec, panels)`` is the deterministic drawing step (no randomness) and returns the image
and one annotation per panel::

    {"bbox": [x, y, w, h], "label": "b", "label_bbox": [x, y, w, h] | None,
     "modality": "radiology", "source_id": "pydicom:CT_small.dcm"}

Drawing order per panel: the tile (crop and scale, or a chart on its fill), jitter, round mask,
marks (drawn on the tile, so they cannot leave the panel), paste, separator, inset, border,
label; after all panels the caption band (below every panel box, not annotated).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from pmcflow.synth import elements as E
from pmcflow.synth import labels as L
from pmcflow.synth.canvas import CanvasParams, sample_canvas
from pmcflow.synth.layout import Layout, LayoutParams, choose_structure, sample_layout
from pmcflow.synth.sources import SourcePool

MIXED = "mixed"
MAX_SOURCE_LEVEL = 3
# Plot-like panels (charts, blots, gels, multi-part chart panels) are shown whole: the source is
# scaled into its slot with its aspect kept (up to ``FigureParams.max_plot_stretch``), never
# cropped, flipped, rotated, colour-jittered or given an inset, so the panel box holds the axis
# titles, tick labels and legends; an inside label gets a band above or a gutter left of the
# chart, inside the box (a panel includes its letter).
PLOT_LIKE_MODALITIES = frozenset({"plot", "blot"})
NO_FLIP_MODALITIES = PLOT_LIKE_MODALITIES


@dataclass
class LabelSpec:
    text: str
    x: int
    y: int
    font: str
    size: int
    color: tuple[int, int, int]
    box: tuple[int, int, int, int] | None  # background box [x, y, w, h] (drawn under the text)
    box_color: tuple[int, int, int] | None
    bbox: tuple[int, int, int, int]  # tight box of what is drawn (text, or its background box)


@dataclass
class PanelSpec:
    x: int
    y: int
    w: int
    h: int
    modality: str
    source_id: str
    crop: tuple[float, float, float, float]  # box in source pixels (l, t, r, b)
    transpose: int | None  # a PIL Image.Transpose value, or None
    jitter: tuple[float, float] | None  # (brightness offset, contrast gain)
    border: tuple[int, tuple[int, int, int]] | None
    label: LabelSpec | None
    inset: dict[str, Any] | None = None  # zoomed inset: {"x","y","w","h","crop","border"}
    source_level: int = 0  # crop is in the coordinates of the source reduced by 2**source_level
    # plot-like panels: the crop is drawn into this box (dx, dy, w, h, relative to the panel),
    # the rest of the panel (the label band) is filled with ``fill``
    content: tuple[int, int, int, int] | None = None
    fill: tuple[int, int, int] | None = None
    # realistic elements (pmcflow.synth.elements): a round mask {"cx","cy","r"} in panel
    # coordinates, and marks (scale bars, arrows, asterisks, text) in canvas coordinates
    mask: dict[str, float] | None = None
    marks: list[dict[str, Any]] = field(default_factory=list)

    def to_record(self) -> dict[str, Any]:
        lab = self.label
        return {
            "bbox": [self.x, self.y, self.w, self.h],
            "modality": self.modality,
            "source_id": self.source_id,
            "crop": list(self.crop),
            "source_level": self.source_level,
            "transpose": self.transpose,
            "jitter": None if self.jitter is None else list(self.jitter),
            "border": None if self.border is None else [self.border[0], list(self.border[1])],
            "inset": self.inset,
            "content": None if self.content is None else list(self.content),
            "fill": None if self.fill is None else list(self.fill),
            "mask": self.mask,
            "marks": self.marks,
            "label": None
            if lab is None
            else {
                "text": lab.text,
                "xy": [lab.x, lab.y],
                "font": lab.font,
                "size": lab.size,
                "color": list(lab.color),
                "box_color": None if lab.box_color is None else list(lab.box_color),
                "bbox": list(lab.bbox),
            },
        }


@dataclass
class FigureSpec:
    width: int
    height: int
    background: tuple[int, int, int]
    figure_modality: str  # one modality or "mixed"
    grammar: str | None
    placement: str | None
    layout: dict[str, Any]
    panels: list[PanelSpec] = field(default_factory=list)
    elements: E.FigureElements | None = None  # None: drawn without realistic elements
    caption: E.CaptionSpec | None = None  # the distractor caption band (not annotated)
    canvas: dict[str, Any] | None = None  # a grown canvas: what was drawn (None: the canvas given)

    @property
    def encoding(self) -> dict[str, Any]:
        """How the render writes the figure: ``{"format": "png"}`` or a JPEG with its quality."""
        return dict(self.elements.encoding) if self.elements is not None else {"format": "png"}

    def to_record(self) -> dict[str, Any]:
        """A JSON-able dict of every parameter (hand-written: ``asdict`` is slow on hot paths)."""
        rec = {
            "width": self.width,
            "height": self.height,
            "background": list(self.background),
            "figure_modality": self.figure_modality,
            "grammar": self.grammar,
            "placement": self.placement,
            "layout": self.layout,
            "panels": [p.to_record() for p in self.panels],
        }
        if self.elements is not None:
            rec["elements"] = self.elements.to_record()
            rec["caption"] = None if self.caption is None else self.caption.to_record()
        if self.canvas is not None:
            rec["canvas"] = self.canvas
        return rec


@dataclass(frozen=True)
class FigureParams:
    """Knobs of the sampler (defaults follow the Open-PMC-18M generator description)."""

    layout: LayoutParams = LayoutParams()
    unlabeled_rate: float = 0.08
    label_box_rate: float = 0.35
    border_rate: float = 0.2
    jitter_rate: float = 0.3
    flip_rate: float = 0.3
    rotate_rate: float = 0.1
    inset_rate: float = 0.35  # share of panels with an inset in an "inset" layout
    min_crop: float = 0.55  # smallest crop side as a fraction of the largest same-aspect crop
    max_plot_stretch: float = 1.08  # a plot-like source may be stretched this much along one axis
    backgrounds: tuple[tuple[tuple[int, int, int], float], ...] = (
        ((255, 255, 255), 0.80),
        ((0, 0, 0), 0.12),
        ((240, 240, 240), 0.08),
    )
    # realistic elements (JPEG, caption band, marks, round masks, dark, no gutter); None = none.
    # The render stage fills them from the config schema (``ElementParams.from_config``).
    elements: E.ElementParams | None = None
    # the canvas per figure (pmcflow.synth.canvas); None or mode "fixed": the width x height given.
    # The render stage fills it from the config schema (``CanvasParams.from_config``).
    canvas: CanvasParams | None = None
    # relative weight per figure modality (a pool modality or "mixed"; unlisted: 1); () = uniform,
    # as the Open-PMC-18M generator. The render stage fills it from ``synth.modality_weights``.
    modality_weights: tuple[tuple[str, float], ...] = ()


def _choice(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def _contrast(color: tuple[int, int, int]) -> tuple[int, int, int]:
    lum = 0.299 * color[0] + 0.587 * color[1] + 0.114 * color[2]
    return (0, 0, 0) if lum > 127 else (255, 255, 255)


def _crop_box(
    rng: np.random.Generator, sw: int, sh: int, aspect: float, min_crop: float
) -> tuple[float, float, float, float]:
    """A random crop of aspect ``aspect`` (w/h) inside a ``sw x sh`` source."""
    if sw / sh > aspect:
        cw, ch = sh * aspect, float(sh)
    else:
        cw, ch = float(sw), sw / aspect
    s = float(rng.uniform(min_crop, 1.0))
    cw, ch = cw * s, ch * s
    x = float(rng.uniform(0, sw - cw))
    y = float(rng.uniform(0, sh - ch))
    return (round(x, 2), round(y, 2), round(x + cw, 2), round(y + ch, 2))


def _label_font_size(rng: np.random.Generator, width: int, height: int) -> int:
    s = min(width, height)
    return int(rng.integers(max(9, round(0.026 * s)), max(11, round(0.055 * s)) + 1))


_text_size = L.text_size


def _place_label(
    text: str,
    placement: str,
    slot: tuple[int, int, int, int],
    font_name: str,
    size: int,
    with_box: bool,
    canvas: tuple[int, int],
) -> tuple[int, int, tuple[int, int, int, int], tuple[int, int, int, int] | None]:
    """Text origin, drawn bbox and optional background box for a label at ``placement``."""
    x, y, w, h = slot
    # never let the label dominate a small panel
    ox, oy, tw, th = _text_size(font_name, size, text)
    pad = max(1, size // 6) if with_box else 0
    bw, bh = tw + 2 * pad, th + 2 * pad
    inset = max(1, min(w, h) // 40)
    if placement == "inside_tl":
        bx, by = x + inset, y + inset
    elif placement == "inside_tr":
        bx, by = x + w - inset - bw, y + inset
    elif placement == "inside_bl":
        bx, by = x + inset, y + h - inset - bh
    elif placement == "inside_br":
        bx, by = x + w - inset - bw, y + h - inset - bh
    elif placement == "outside_top":
        bx, by = x, y - bh - 2
    elif placement == "outside_left":
        bx, by = x - bw - 2, y
    else:
        raise ValueError(f"unknown placement {placement!r}")
    cw, ch = canvas
    bx = max(0, min(bx, cw - bw))
    by = max(0, min(by, ch - bh))
    tx, ty = bx + pad - ox, by + pad - oy
    bbox = (bx, by, bw, bh)
    return tx, ty, bbox, (bbox if with_box else None)


def label_reserve(placement: str | None, font_name: str, size: int, max_text: str) -> tuple[int, int]:
    """Space (left, top) the layout must keep free per cell for outside labels."""
    if placement == "outside_top":
        return (0, _text_size(font_name, size, "Ag(")[3] + 4)
    if placement == "outside_left":
        return (_text_size(font_name, size, max_text)[2] + 4, 0)
    return (0, 0)


def sample_figure(
    rng: np.random.Generator,
    pool: SourcePool,
    width: int,
    height: int,
    *,
    params: FigureParams = FigureParams(),
    n_panels: int | None = None,
    labels: Sequence[str] | None = None,
    modality: str | None = None,
) -> tuple[FigureSpec, list[Image.Image]]:
    """Draw one figure's specification and its source images (pure function of ``rng``).

    ``n_panels``/``labels`` force the panel count and label texts (demo corpus: the caption's
    letters); ``modality`` forces the figure modality (a pool modality or ``"mixed"``).
    ``width x height`` is the canvas, or with a growing ``params.canvas`` the base the figure's
    own canvas is drawn from (``spec.width``/``spec.height`` are the canvas drawn).
    """
    modalities = pool.modalities
    if not modalities:
        raise ValueError("the source pool is empty")
    if labels is not None and n_panels is None:
        n_panels = max(1, len(labels))
    # the elements' own stream: child 0 of the figure's generator (spawning leaves its stream as
    # it is, so the panels, crops and labels are drawn as without elements); a growing canvas
    # draws the panel grid and the canvas from child 1 (so the elements' stream is the same with
    # and without it, and switching elements off leaves the canvas alone)
    grow = params.canvas is not None and params.canvas.grows
    kids = rng.spawn(2) if grow else rng.spawn(1) if params.elements is not None else []
    erng = kids[0] if params.elements is not None else None
    structure: tuple[str, list[int]] | None = None
    canvas_rec: dict[str, Any] | None = None
    if grow and params.canvas is not None:
        crng = kids[1]
        structure = choose_structure(crng, params.layout, n_panels)
        width, height, canvas_rec = sample_canvas(crng, params.canvas, width, height, *structure)
    options = [*modalities, MIXED] if len(modalities) > 1 else list(modalities)
    weights = _modality_weights(params.modality_weights, modalities)
    if modality:
        fig_modality = modality
    elif weights is None:
        fig_modality = _choice(rng, options)
    else:
        fig_modality = _choice_weighted(rng, [(m, weights.get(m, 1.0)) for m in options])
    bg = _choice_weighted(rng, params.backgrounds)
    if fig_modality in PLOT_LIKE_MODALITIES:
        bg = (255, 255, 255)  # chart figures are printed on white
    fe: E.FigureElements | None = None
    if erng is not None and params.elements is not None:
        fe = E.sample_figure_elements(
            erng, params.elements, width, height, chart_figure=fig_modality in PLOT_LIKE_MODALITIES
        )
        if fe.dark:
            bg = E.DARK_BACKGROUND
    # labels=[] forces an unlabelled figure (a single-panel figure whose caption names no panel)
    unlabeled = rng.random() < params.unlabeled_rate if labels is None else len(labels) == 0
    grammar = None if unlabeled or labels is not None else _choice(rng, L.GRAMMARS)
    placement = None if unlabeled else _choice(rng, L.PLACEMENTS)
    font_name = _choice(rng, L.FONTS)
    size = _label_font_size(rng, width, height)
    with_box_fig = rng.random() < params.label_box_rate
    no_gutter = fe is not None and fe.no_gutter
    if no_gutter and placement is not None and placement.startswith("outside"):
        placement = NO_GUTTER_PLACEMENT[placement]  # touching panels leave no room outside them
    reserve = label_reserve(placement, font_name, size, "(mm)") if placement else (0, 0)
    layout: Layout = sample_layout(
        rng,
        width,
        height,
        params=params.layout,
        n_panels=n_panels,
        reserve=reserve,
        no_gutter=no_gutter,
        bottom_band=fe.caption_band if fe is not None else 0,
        structure=structure,
    )
    panel_rngs = erng.spawn(len(layout.slots)) if erng is not None else None

    border_fig = None
    if rng.random() < params.border_rate:
        border_fig = (int(rng.integers(1, 3)), _choice(rng, [(0, 0, 0), (128, 128, 128), (255, 255, 255)]))
    if border_fig is not None and border_fig[1] == bg:
        border_fig = (border_fig[0], _contrast(bg))

    panels: list[PanelSpec] = []
    images: list[Image.Image] = []
    used: set[str] = set()
    for k, slot in enumerate(layout.slots):
        if fig_modality != MIXED:
            m = fig_modality
        elif weights is None:
            m = _choice(rng, modalities)
        else:
            m = _choice_weighted(rng, [(x, weights.get(x, 1.0)) for x in modalities])
        ref, src = pool.pick(m, rng)
        if m in PLOT_LIKE_MODALITIES:  # a chart is shown whole: never twice in one figure
            for _ in range(3):
                if ref.source_id not in used:
                    break
                ref, src = pool.pick(m, rng)
            used.add(ref.source_id)
        text, psize = None, 0
        if placement is not None:
            text = (
                labels[k]
                if labels is not None and k < len(labels)
                else L.label_text(grammar or "upper", k, slot.group, slot.index_in_group)
            )
            psize = max(8, min(size, int(min(slot.w, slot.h) * 0.4)))
        with_box = with_box_fig and placement is not None and placement.startswith("inside")
        if m in PLOT_LIKE_MODALITIES:
            # shown whole: no crop, flip, rotation, jitter or inset; an inside label sits in a
            # band above or a gutter left of the chart (inside the panel box)
            box_place = placement
            pads = (0, 0, 0)  # label room (top, left, right) inside the panel box
            if text is not None and placement is not None and placement.startswith("inside"):
                _, _, tw, th = _text_size(font_name, psize, text)
                extra = (
                    2 * (max(1, psize // 6) if with_box else 0) + 2 * max(1, min(slot.w, slot.h) // 40) + 1
                )
                box_place = "inside_tl"  # a chart's letter sits at its top left, as in papers
                options = [(th + extra, 0, 0), (0, tw + extra, 0)]
                # the band above or the gutter beside the chart, whichever leaves the larger chart
                best = max(
                    (o for o in options if o[0] <= 0.35 * slot.h and o[1] + o[2] <= 0.35 * slot.w),
                    key=lambda o: _plot_area(src.width, src.height, slot.box, o, params.max_plot_stretch),
                    default=None,
                )
                if best is None:
                    box_place = placement  # a tiny slot: the label goes over the chart
                else:
                    pads = best
            (px, py, pw, ph), content = _fit_plot(
                src.width, src.height, slot.box, pads, layout.align, params.max_plot_stretch
            )
            label_box = (px, py, pw, ph)
            if no_gutter:  # the panel is its whole cell (touching its neighbours), the chart inside
                content = (px - slot.x + content[0], py - slot.y + content[1], content[2], content[3])
                px, py, pw, ph = slot.box
            crop = (0.0, 0.0, float(src.width), float(src.height))
            fill = tuple(int(v) for v in src.getpixel((0, 0)))
            level = 0
            scale = src.width / max(1, content[2])
            while level < MAX_SOURCE_LEVEL and scale >= 2 ** (level + 1):
                level += 1
            if level:
                src = pool.level(ref, level)
                crop = (0.0, 0.0, float(src.width), float(src.height))
            label = _label_spec(
                rng, text, box_place, label_box, font_name, psize, with_box, (width, height), bg
            )
            if fe is not None:
                _light_label(label, fe)
            panels.append(
                PanelSpec(
                    px,
                    py,
                    pw,
                    ph,
                    m,
                    ref.source_id,
                    crop,
                    None,
                    None,
                    border_fig,
                    label,
                    None,
                    level,
                    content,
                    fill,
                )
            )
            images.append(src)
            continue
        aspect = slot.w / slot.h
        transpose = None
        if rng.random() < params.rotate_rate:
            transpose = int(_choice(rng, [Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270]))
        elif rng.random() < params.flip_rate:
            transpose = int(Image.Transpose.FLIP_LEFT_RIGHT)
        crop_aspect = (
            1 / aspect if transpose in (Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270) else aspect
        )
        crop = _crop_box(rng, src.width, src.height, crop_aspect, params.min_crop)
        jitter = None
        if rng.random() < params.jitter_rate:
            jitter = (round(float(rng.uniform(-25, 25)), 2), round(float(rng.uniform(0.8, 1.25)), 3))
        inset = None
        if layout.kind == "inset" and rng.random() < params.inset_rate and min(slot.w, slot.h) >= 60:
            f = float(rng.uniform(0.28, 0.4))
            iw, ih = max(12, int(slot.w * f)), max(12, int(slot.h * f))
            corner = _choice(rng, ["tr", "br", "bl"])
            m_ = max(2, min(slot.w, slot.h) // 30)
            ix = slot.x + slot.w - iw - m_ if corner in ("tr", "br") else slot.x + m_
            iy = slot.y + m_ if corner == "tr" else slot.y + slot.h - ih - m_
            l_, t_, r_, b_ = crop
            zw, zh = (r_ - l_) * 0.3, (b_ - t_) * 0.3
            zx = float(rng.uniform(l_, r_ - zw))
            zy = float(rng.uniform(t_, b_ - zh))
            inset = {
                "x": ix,
                "y": iy,
                "w": iw,
                "h": ih,
                "crop": (round(zx, 2), round(zy, 2), round(zx + zw, 2), round(zy + zh, 2)),
                "border": (1, _choice(rng, [(255, 255, 255), (255, 255, 0), (0, 0, 0)])),
            }
        # read from a cached 2^k-reduced copy when the panel shrinks the crop by >= 2x, so the
        # per-panel resize touches few pixels (insets keep full resolution for their zoom)
        level = 0
        if inset is None:
            target_w = (
                slot.h if transpose in (Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270) else slot.w
            )
            scale = (crop[2] - crop[0]) / max(1, target_w)
            while level < MAX_SOURCE_LEVEL and scale >= 2 ** (level + 1):
                level += 1
        if level:
            src = pool.level(ref, level)
            f = float(2**level)
            crop = (
                round(crop[0] / f, 2),
                round(crop[1] / f, 2),
                round(crop[2] / f, 2),
                round(crop[3] / f, 2),
            )
        label = _label_spec(rng, text, placement, slot.box, font_name, psize, with_box, (width, height), bg)
        mask, marks = None, []
        if fe is not None and panel_rngs is not None and params.elements is not None:
            _light_label(label, fe)
            avoid = [] if label is None else [label.bbox]
            if inset is not None:
                avoid.append((inset["x"], inset["y"], inset["w"], inset["h"]))
            mask, marks = _photo_elements(
                panel_rngs[k], params.elements, slot.box, bg, inset is not None, avoid
            )
        panels.append(
            PanelSpec(
                slot.x,
                slot.y,
                slot.w,
                slot.h,
                m,
                ref.source_id,
                crop,
                transpose,
                jitter,
                border_fig,
                label,
                inset,
                level,
                mask=mask,
                marks=marks,
            )
        )
        images.append(src)

    caption = None
    if fe is not None:
        caption = E.sample_caption(fe, width, height, layout.margins[0], layout.margins[2], bg)
    spec = FigureSpec(
        width=width,
        height=height,
        background=bg,
        figure_modality=fig_modality,
        grammar=grammar if labels is None else "given",
        placement=placement,
        layout=layout.to_dict(),
        panels=panels,
        elements=fe,
        caption=caption,
        canvas=canvas_rec,
    )
    return spec, images


# in a no-gutter figure an outside placement moves to the nearest inside corner
NO_GUTTER_PLACEMENT = {"outside_top": "inside_tl", "outside_left": "inside_tl"}


def _light_label(label: LabelSpec | None, fe: E.FigureElements) -> None:
    """A dark figure's labels are light (on a black box where the label has one)."""
    if label is None or fe.label_color is None:
        return
    label.color = fe.label_color
    if label.box is not None:
        label.box_color = (0, 0, 0)


def _photo_elements(
    rng: np.random.Generator,
    p: E.ElementParams,
    box: tuple[int, int, int, int],
    bg: tuple[int, int, int],
    has_inset: bool,
    avoid: list[tuple[int, int, int, int]],
) -> tuple[dict[str, float] | None, list[dict[str, Any]]]:
    """The round mask and marks of one photographic panel, from the panel's own stream.

    Two uniforms first (mask?, marks?) and the mask's geometry always, so switching one of the
    two off leaves the other's draws alone.  No mask on a dark background (the panel's edge would
    vanish) or on a panel with an inset, too small or too elongated.
    """
    u_mask, u_marks = rng.random(2)
    circle = E.sample_round_mask(rng, box[2], box[3])
    lum = 0.299 * bg[0] + 0.587 * bg[1] + 0.114 * bg[2]
    short, long_ = min(box[2], box[3]), max(box[2], box[3])
    use_mask = (
        u_mask < p.round_mask_rate
        and lum >= 80
        and not has_inset
        and short >= E.MIN_MASK_PANEL
        and long_ <= E.MASK_MAX_ASPECT * short
    )
    mask = circle if use_mask else None
    marks = E.sample_marks(rng, p, box, mask, avoid) if u_marks < p.annotation_rate else []
    return mask, marks


def _fit_plot(
    src_w: int,
    src_h: int,
    slot: tuple[int, int, int, int],
    pads: tuple[int, int, int],
    align: str,
    max_stretch: float,
) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """The panel box of a whole chart in ``slot`` and where the chart goes inside it (dx, dy, w, h).

    The chart keeps its aspect (stretched at most ``max_stretch`` towards the slot's); ``pads``
    (top, left, right) is room for the panel's label inside the box.
    """
    x, y, w, h = slot
    top, left, right = pads
    aw, ah = max(1, w - left - right), max(1, h - top)
    a_src = src_w / src_h
    a_slot = aw / ah
    a = min(max(a_slot, a_src / max_stretch), a_src * max_stretch)
    if a_slot > a:
        ch = ah
        cw = max(1, min(aw, int(round(ch * a))))
    else:
        cw = aw
        ch = max(1, min(ah, int(round(cw / a))))
    pw, ph = cw + left + right, ch + top
    if align == "center":
        px, py = x + (w - pw) // 2, y + (h - ph) // 2
    else:
        px, py = x, y
    return (px, py, pw, ph), (left, top, cw, ch)


def _plot_area(
    src_w: int, src_h: int, slot: tuple[int, int, int, int], pads: tuple[int, int, int], max_stretch: float
) -> int:
    _, (_, _, cw, ch) = _fit_plot(src_w, src_h, slot, pads, "start", max_stretch)
    return cw * ch


def _label_spec(
    rng: np.random.Generator,
    text: str | None,
    placement: str | None,
    box: tuple[int, int, int, int],
    font_name: str,
    psize: int,
    with_box: bool,
    canvas: tuple[int, int],
    bg: tuple[int, int, int],
) -> LabelSpec | None:
    """The label of a panel whose box is ``box`` (None for an unlabelled figure)."""
    if text is None or placement is None:
        return None
    tx, ty, bbox, lbox = _place_label(text, placement, box, font_name, psize, with_box, canvas)
    if placement.startswith("outside"):
        color, box_color = _contrast(bg), None
    elif with_box:
        box_color = (255, 255, 255) if rng.random() < 0.7 else (0, 0, 0)
        color = _contrast(box_color)
    else:
        box_color = None
        color = None  # decided from the pixels under the label at compose time
    label = LabelSpec(text, tx, ty, font_name, psize, color or (0, 0, 0), lbox, box_color, bbox)
    if color is None:
        label.color = (-1, -1, -1)  # auto
    return label


def _modality_weights(given: Sequence[tuple[str, float]], modalities: Sequence[str]) -> dict[str, float] | None:
    """``synth.modality_weights`` checked against the pool: None when every weight is 1 (uniform)."""
    weights = {str(m): float(w) for m, w in given}
    unknown = sorted(set(weights) - {*modalities, MIXED})
    if unknown:
        raise ValueError(
            f"synth.modality_weights: {unknown} not a modality of the sources ({', '.join(modalities)}) or {MIXED!r}"
        )
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"synth.modality_weights: weights must be >= 0, got {weights}")
    if not any(weights.get(m, 1.0) > 0 for m in modalities):
        raise ValueError(f"synth.modality_weights: every modality of the sources weighs 0 ({weights})")
    return None if all(w == 1.0 for w in weights.values()) else weights


def _choice_weighted(rng: np.random.Generator, items: Sequence[tuple[Any, float]]) -> Any:
    w = np.asarray([p for _, p in items], dtype=float)
    return items[int(rng.choice(len(items), p=w / w.sum()))][0]


def _jitter_lut(offset: float, gain: float) -> np.ndarray:
    v = np.clip((np.arange(256, dtype=np.float64) - 128.0) * gain + 128.0 + offset, 0, 255)
    return np.round(v).astype(np.uint8)


def _render_panel(
    src: Image.Image, w: int, h: int, crop: Sequence[float], transpose: int | None
) -> Image.Image:
    rotated = transpose in (Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_270)
    size = (h, w) if rotated else (w, h)
    out = src.resize(size, Image.Resampling.BILINEAR, box=tuple(crop), reducing_gap=None)
    if transpose is not None:
        out = out.transpose(Image.Transpose(transpose))
    return out


def compose(spec: FigureSpec, panels: Sequence[Image.Image]) -> tuple[Image.Image, list[dict[str, Any]]]:
    """Draw ``spec`` with the given source images; return the RGB image and annotations."""
    if len(panels) != len(spec.panels):
        raise ValueError(f"{len(spec.panels)} panel specs but {len(panels)} images")
    canvas = Image.new("RGB", (spec.width, spec.height), tuple(spec.background))
    draw = ImageDraw.Draw(canvas)
    anns: list[dict[str, Any]] = []
    separator = spec.elements.separator if spec.elements is not None else None
    first_x = min((p.x for p in spec.panels), default=0)
    first_y = min((p.y for p in spec.panels), default=0)
    for p, src in zip(spec.panels, panels, strict=True):
        if p.content is not None:
            dx, dy, cw, ch = p.content
            tile = Image.new("RGB", (p.w, p.h), tuple(p.fill or (255, 255, 255)))
            tile.paste(_render_panel(src, cw, ch, p.crop, None), (dx, dy))
        else:
            tile = _render_panel(src, p.w, p.h, p.crop, p.transpose)
        if p.jitter is not None:
            tile = Image.fromarray(_jitter_lut(*p.jitter)[np.asarray(tile)], "RGB")
        if p.mask is not None:
            tile = E.apply_round_mask(tile, p.mask)
        if p.marks:
            E.draw_marks(tile, (p.x, p.y), p.marks)
        canvas.paste(tile, (p.x, p.y))
        if separator is not None:
            E.draw_separator(draw, (p.x, p.y, p.w, p.h), first_x, first_y, separator)
        if p.inset is not None:
            ins = p.inset
            zoom = src.resize((ins["w"], ins["h"]), Image.Resampling.BILINEAR, box=tuple(ins["crop"]))
            if p.transpose == Image.Transpose.FLIP_LEFT_RIGHT:
                zoom = zoom.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            canvas.paste(zoom, (ins["x"], ins["y"]))
            bw, bc = ins["border"]
            draw.rectangle(
                (ins["x"], ins["y"], ins["x"] + ins["w"] - 1, ins["y"] + ins["h"] - 1),
                outline=tuple(bc),
                width=bw,
            )
        if p.border is not None:
            bw, bc = p.border
            draw.rectangle((p.x, p.y, p.x + p.w - 1, p.y + p.h - 1), outline=tuple(bc), width=bw)
        ann: dict[str, Any] = {
            "bbox": [p.x, p.y, p.w, p.h],
            "label": None,
            "label_bbox": None,
            "modality": p.modality,
            "source_id": p.source_id,
        }
        lab = p.label
        if lab is not None:
            if lab.box is not None:
                x, y, w, h = lab.box
                draw.rectangle((x, y, x + w - 1, y + h - 1), fill=tuple(lab.box_color or (255, 255, 255)))
            color = tuple(lab.color)
            if color == (-1, -1, -1):
                x, y, w, h = lab.bbox
                patch = canvas.crop((x, y, x + max(1, w), y + max(1, h))).convert("L")
                mean = float(np.asarray(patch).mean())
                color = (0, 0, 0) if mean > 110 else (255, 255, 255)
                lab.color = color  # recorded as drawn
            mask, (ox, oy) = L.text_mask(lab.font, lab.size, lab.text)
            canvas.paste(
                color, (lab.x + ox, lab.y + oy, lab.x + ox + mask.width, lab.y + oy + mask.height), mask
            )
            ann["label"] = lab.text
            ann["label_bbox"] = list(lab.bbox)
        anns.append(ann)
    if spec.caption is not None:
        E.draw_caption(draw, spec.caption)
    return canvas, anns
