"""Chart, blot and gel panels (pmcflow.synth.charts): sizes, determinism, nothing cut, pool, compose."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from pmcflow.seeding import rng_for
from pmcflow.synth import charts as C
from pmcflow.synth.compose import PLOT_LIKE_MODALITIES, FigureParams, compose, sample_figure
from pmcflow.synth.layout import LayoutParams
from pmcflow.synth.sources import SourcePool, builtin_pool

# kinds whose left strip holds y tick labels / row names and whose bottom strip holds x tick
# labels, an axis title, a risk table or the last blot row
AXES_KINDS = (
    "bar",
    "line",
    "scatter",
    "box",
    "violin",
    "heatmap",
    "survival",
    "flow",
    "gel",
    "blot_quant",
    "image_graph",
)


@pytest.fixture(scope="module")
def canvases() -> dict[tuple[str, int], tuple[np.ndarray, int]]:
    """Every registered variant's full canvas (before the crop) and its crop margin."""
    return {(kind, k): C.render_canvas(kind, k) for kind in C.CHART_KINDS for k in range(C.variants(kind))}


def _crop(canvases, kind: str, k: int) -> np.ndarray:
    arr, margin = canvases[(kind, k)]
    return C._autocrop(arr, margin)


def _ink(a: np.ndarray, level: int = 110) -> np.ndarray:
    """Text-coloured (dark) pixels."""
    return a.astype(int).sum(axis=2) < 3 * level


@pytest.mark.parametrize("kind", C.CHART_KINDS)
def test_every_kind_renders_an_rgb_image_of_sane_size(kind, canvases):
    for k in range(C.variants(kind)):
        a = _crop(canvases, kind, k)
        h, w = a.shape[:2]
        assert a.dtype == np.uint8 and a.shape[2] == 3
        min_h = 90 if kind == "image_grid" else 120  # one row of small fields is a short strip
        assert 150 <= w <= 1600 and min_h <= h <= 1600, (kind, k, w, h)
        assert 0.2 <= w / h <= 5.0, (kind, k, w, h)
        assert _ink(a).mean() > 0.003  # something is drawn
    im = C.render_chart(kind, 0)
    assert im.mode == "RGB" and im.size == (
        _crop(canvases, kind, 0).shape[1],
        _crop(canvases, kind, 0).shape[0],
    )


@pytest.mark.parametrize("kind", C.CHART_KINDS)
def test_nothing_is_cut_at_the_canvas_edge(kind, canvases):
    """Labels, legends and tick labels are inside the canvas: its outer 2 px are untouched."""
    for k in range(C.variants(kind)):
        arr, margin = canvases[(kind, k)]
        frame = np.concatenate(
            [
                arr[:2].reshape(-1, 3),
                arr[-2:].reshape(-1, 3),
                arr[:, :2].reshape(-1, 3),
                arr[:, -2:].reshape(-1, 3),
            ]
        )
        assert (frame >= C.BG_THRESHOLD).all(), (kind, k)
        # the crop keeps all of the content: a white margin of `margin` px and ink right inside it
        a = C._autocrop(arr, margin)
        assert (a[:margin] == 255).all() and (a[-margin:] == 255).all()
        assert (a[:, :margin] == 255).all() and (a[:, -margin:] == 255).all()
        core = a[margin:-margin, margin:-margin]
        for edge in (core[0], core[-1], core[:, 0], core[:, -1]):
            assert (edge < C.BG_THRESHOLD).any(), (kind, k)


@pytest.mark.parametrize("kind", AXES_KINDS)
def test_axis_labels_are_inside_the_image(kind, canvases):
    """The left and bottom 10 % strips carry text-coloured pixels (tick labels, axis titles)."""
    for k in range(C.VARIANTS):
        a = _crop(canvases, kind, k)
        h, w = a.shape[:2]
        left, bottom = a[:, : max(3, w // 10)], a[h - max(3, h // 10) :]
        assert _ink(left).sum() >= 15, (kind, k, "left")
        assert _ink(bottom).sum() >= 15, (kind, k, "bottom")


def test_blots_have_names_left_and_markers_right(canvases):
    for k in range(C.VARIANTS):
        a = _crop(canvases, "blot", k)
        h, w = a.shape[:2]
        assert _ink(a[:, : w // 8]).sum() >= 15 and _ink(a[:, -w // 8 :]).sum() >= 15, k


def test_image_grids_are_one_panel_of_many_fields():
    """An image grid is rows x columns of micrograph fields in one source image (one box, one
    letter), with the extras real grids carry across the variants."""
    shapes = []
    for k in range(C.variants("image_grid")):
        rng = C.rng_for(C.CHART_SEED, "chart", f"image_grid/{k}")
        style = C.Style(rng)
        fig = C._figure(style, 3.0, 3.0)
        C._image_grid(fig, rng, style)
        fields = [ax for ax in fig.axes if ax.images and ax.get_label() != "inset"]
        rows = {round(ax.get_position().y0, 4) for ax in fields}
        cols = {round(ax.get_position().x0, 4) for ax in fields}
        assert len(fields) == len(rows) * len(cols) >= 2, k  # a full grid
        assert 2 <= len(cols) <= 5 and 1 <= len(rows) <= 4, k
        shapes.append((len(rows), len(cols)))
    assert len(set(shapes)) >= 6  # the variants differ in shape
    assert C.variants("image_grid") > C.VARIANTS and "image_grid" in C.MULTIPART_KINDS
    assert len(C.chart_source_ids()) == sum(C.variants(kind) for kind in C.CHART_KINDS)


def test_same_key_same_bytes_and_different_variants_differ(canvases):
    for kind in C.CHART_KINDS:
        a = np.asarray(C.render_chart(kind, 1))
        assert np.array_equal(a, _crop(canvases, kind, 1)), kind  # rendered again in this process
        b = _crop(canvases, kind, 2)
        assert a.shape != b.shape or not np.array_equal(a, b), kind


def test_bytes_do_not_depend_on_the_process():
    code = (
        "import hashlib; from pmcflow.synth.charts import render_chart; "
        "print(hashlib.sha256(render_chart('blot_quant', 3).tobytes()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "MPLBACKEND": "Agg"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    assert out == hashlib.sha256(C.render_chart("blot_quant", 3).tobytes()).hexdigest()


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown chart kind"):
        C.render_chart("pie3d", 0)


# ---------------------------------------------------------------------------------- pool and compose


@pytest.fixture(scope="module")
def chart_pool() -> SourcePool:
    """The builtin pool's plot refs of variant 0 and 1 of every chart kind (rendered lazily)."""
    full = builtin_pool(max_side=512)
    refs = [
        r
        for r in full.refs["plot"]
        if r.source_id.startswith("chart:") and r.source_id.endswith((":0", ":1"))
    ]
    return SourcePool({"plot": refs}, max_side=512)


def test_builtin_pool_exposes_the_chart_refs():
    pool = builtin_pool(max_side=256)
    ids = {r.source_id for r in pool.refs["plot"]}
    assert set(C.chart_source_ids()) <= ids
    assert {
        f"plot:{k}" for k in ("bc_hist_radius", "eeg_traces", "membrane_psd")
    } <= ids  # the older plots stay
    ref = next(r for r in pool.refs["plot"] if r.source_id == "chart:blot_quant:0")
    im = pool.load(ref)
    assert im is not None and im.mode == "RGB" and max(im.size) <= 256
    assert pool.load(ref) is im  # cached
    assert "plot" in PLOT_LIKE_MODALITIES and "blot" in PLOT_LIKE_MODALITIES


def test_plot_panels_are_shown_whole_and_their_box_holds_the_chart(chart_pool):
    params = FigureParams(
        layout=LayoutParams(special_rate=0.5), inset_rate=1.0, flip_rate=1.0, jitter_rate=1.0, rotate_rate=0.5
    )
    seen_bands = 0
    for i in range(40):
        spec, images = sample_figure(rng_for(7, "charts", i), chart_pool, 640, 512, params=params)
        rec = spec.to_record()
        assert json.loads(json.dumps(rec)) == rec  # JSON-able
        again, _ = sample_figure(rng_for(7, "charts", i), chart_pool, 640, 512, params=params)
        assert again.to_record() == rec  # deterministic
        im, anns = compose(spec, images)
        assert spec.background == (255, 255, 255)
        for p, src, ann, slot in zip(spec.panels, images, anns, spec.layout["slots"], strict=True):
            # no crop (the crop is the whole, possibly 2^k-reduced, source), flip, jitter or inset
            assert p.crop == (0.0, 0.0, float(src.width), float(src.height))
            assert p.transpose is None and p.jitter is None and p.inset is None
            full = chart_pool.load(next(r for r in chart_pool.refs["plot"] if r.source_id == p.source_id))
            assert (
                abs(src.width - full.width / 2**p.source_level) < 1
                and abs(src.height - full.height / 2**p.source_level) < 1
            )
            # the chart goes inside the annotated box, which lies inside the layout slot
            dx, dy, cw, ch = p.content
            assert ann["bbox"] == [p.x, p.y, p.w, p.h]
            assert 0 <= dx and 0 <= dy and dx + cw <= p.w and dy + ch <= p.h
            sx, sy, sw, sh = slot
            assert sx <= p.x and sy <= p.y and p.x + p.w <= sx + sw and p.y + p.h <= sy + sh
            # aspect kept (up to the allowed stretch; 1.5 px of rounding)
            a_src = full.width / full.height
            lo, hi = (cw - 1.5) / (ch + 1.5), (cw + 1.5) / max(1.0, ch - 1.5)
            assert lo <= a_src * params.max_plot_stretch and hi >= a_src / params.max_plot_stretch, (
                p.source_id,
                cw,
                ch,
                a_src,
            )
            # an inside label sits in the band/gutter of the box, off the chart
            if p.label is not None and spec.placement.startswith("inside") and (dx or dy or cw < p.w):
                lx, ly, lw, lh = p.label.bbox
                assert p.x <= lx and p.y <= ly and lx + lw <= p.x + p.w and ly + lh <= p.y + p.h
                chart = (p.x + dx, p.y + dy, p.x + dx + cw, p.y + dy + ch)
                assert lx + lw <= chart[0] or lx >= chart[2] or ly + lh <= chart[1], (p.label.bbox, chart)
                seen_bands += 1
            # the pixels of the content box are the whole chart, scaled (inside a border)
            box = (p.x + dx, p.y + dy, p.x + dx + cw, p.y + dy + ch)
            tile = np.asarray(im.crop(box).convert("L"), dtype=float)[3:-3, 3:-3]
            ref = np.asarray(full.resize((cw, ch), Image.Resampling.BILINEAR).convert("L"), dtype=float)[
                3:-3, 3:-3
            ]
            assert np.abs(tile - ref).mean() < 20, p.source_id
    assert seen_bands > 0


def test_mixed_figures_keep_cropping_photos(chart_pool):
    full = builtin_pool(max_side=256)
    pool = SourcePool(
        {"plot": chart_pool.refs["plot"][:4], "microscopy": full.refs["microscopy"]}, max_side=256
    )
    cropped = 0
    for i in range(20):
        spec, images = sample_figure(rng_for(8, "mixed", i), pool, 384, 320, modality="mixed")
        for p, src in zip(spec.panels, images, strict=True):
            if p.modality == "microscopy":
                assert p.content is None
                cropped += p.crop != (0.0, 0.0, float(src.width), float(src.height))
            else:
                assert p.content is not None
    assert cropped > 0


def test_schematic_kinds_are_text_and_lines_on_white(canvases, monkeypatch):
    """diagram and network panels (pmcflow.synth.diagrams): mostly white, with dark text and every
    diagram layout drawn by some variant; their graphs are one component."""
    from pmcflow.synth import diagrams as D

    for kind in ("diagram", "network"):
        for k in range(C.variants(kind)):
            a = _crop(canvases, kind, k)
            white = (a >= C.BG_THRESHOLD).all(axis=2).mean()
            assert 0.2 < white < 0.98 and _ink(a).sum() > 200, (kind, k, white)  # boxes may be filled
    layouts: set[str] = set()
    for name in ("_row", "_column", "_tree", "_cycle", "_cascade"):
        draw = getattr(D, name)
        monkeypatch.setattr(D, name, lambda *a, _d=draw, _n=name: (layouts.add(_n[1:]), _d(*a))[1])
    for k in range(C.variants("diagram")):
        C.render_canvas("diagram", k)
    monkeypatch.undo()
    assert layouts == {"row", "column", "tree", "cycle", "cascade"}
    rng = np.random.default_rng(0)
    adj = np.zeros((9, 9), bool)
    adj[0, 1] = adj[1, 0] = adj[3, 4] = adj[4, 3] = True  # three islands and isolated nodes
    D._connect(adj, rng)
    seen, stack = {0}, [0]
    while stack:
        for j in np.flatnonzero(adj[stack.pop()]):
            if int(j) not in seen:
                seen.add(int(j))
                stack.append(int(j))
    assert seen == set(range(9))
    p1 = D._spring(adj, np.random.default_rng(3))
    assert np.array_equal(p1, D._spring(adj, np.random.default_rng(3))) and p1.min() >= 0 and p1.max() <= 1
