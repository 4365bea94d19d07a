"""Canvases per figure (synth.canvas): sizes and shapes that grow with the panel grid, bounds,
determinism, the fixed canvas (the renders before this setting), COCO/YOLO and merges."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pmcflow.config import ConfigError, load_config, load_schema
from pmcflow.seeding import rng_for
from pmcflow.synth.canvas import CanvasParams, grid_ratio, sample_canvas
from pmcflow.synth.compose import FigureParams, compose, sample_figure
from pmcflow.synth.elements import ElementParams
from pmcflow.synth.render import figure_indices, merge_shards, render, source_side
from pmcflow.synth.sources import builtin_pool

GROW = CanvasParams.from_config(None)
BASE = (192, 160)


@pytest.fixture(scope="module")
def pool():
    return builtin_pool(max_side=256)


def _grow(elements: ElementParams | None = None, **canvas) -> FigureParams:
    return FigureParams(canvas=replace(GROW, **canvas), elements=elements)


def _inside(box, w: int, h: int) -> bool:
    x, y, bw, bh = box
    return x >= 0 and y >= 0 and x + bw <= w and y + bh <= h


# ---------------------------------------------------------------------------------- settings


def test_schema_defaults_validate_and_are_the_params_defaults():
    props = load_schema()["properties"]["synth"]["properties"]["canvas"]["properties"]
    for key, spec in props.items():  # typed, described, defaulted
        assert {"type", "description", "default"} <= set(spec), key
    canvas = load_config([])["synth"]["canvas"]
    assert canvas == {key: spec["default"] for key, spec in props.items()}
    assert CanvasParams.from_config(canvas) == GROW and GROW.grows and GROW.mode == "grow"
    assert GROW.to_dict() == canvas
    assert CanvasParams.from_config({"max_side": 2}) == replace(GROW, max_side=2.0)  # partial: defaults
    assert CanvasParams.fixed().mode == "fixed" and not CanvasParams.fixed().grows


@pytest.mark.parametrize(
    "override, match",
    [
        ("synth.canvas.mode=square", "synth.canvas.mode"),
        ("synth.canvas.aspect_range=[3, 1]", "aspect_range"),
        ("synth.canvas.aspect_range=[2, 3]", "around panel_aspect"),
        ("synth.canvas.min_side=0", "min_side"),
        ("synth.canvas.max_side=0.5", "max_side"),
        ("synth.canvas.area_power=2", "area_power"),
        ("synth.canvas.shape=wide", r"synth\.canvas\.shape: unknown key"),
    ],
)
def test_bad_canvas_settings_fail_at_load_time(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config([], [override])


def test_params_refuse_bad_settings_for_library_callers():
    with pytest.raises(ValueError, match="aspect_range"):
        CanvasParams.from_config({"aspect_range": [2, 3]})
    with pytest.raises(ValueError, match="mode"):
        replace(GROW, mode="square")
    with pytest.raises(ValueError, match="min_side"):
        replace(GROW, min_side=1.5)


def test_sources_are_cached_at_the_longest_canvas_side():
    assert GROW.side_bounds(512, 512) == (256, 1536)
    assert source_side(512, 512, GROW) == 1024 and source_side(410, 400, CanvasParams.fixed()) == 410
    assert source_side(512, 512, CanvasParams.from_config({"max_side": 1.5})) == 768  # below the cap
    assert source_side(320, 320, None) == 320


# ---------------------------------------------------------------------------------- the draw


def test_canvas_formula_without_jitter():
    p = replace(GROW, area_jitter=0.0, aspect_jitter=0.0)
    rng = np.random.default_rng(0)
    # a 2x2 grid: the base area, aspect panel_aspect * 4^-decay
    w, h, rec = sample_canvas(rng, p, 512, 512, "grid", [2, 2])
    a = 1.25 * 4**-0.15
    assert (w, h) == (round(512 * math.sqrt(a)), round(512 / math.sqrt(a)))
    assert rec["grid"] == [2.0, 2.0] and rec["area_scale"] == 1.0 and rec["size"] == [w, h]
    # a 1x3 row: wider by 3^0.8, area (3/4)^0.5
    w, h, _ = sample_canvas(rng, p, 512, 512, "rows", [3])
    a = 1.25 * 3**-0.15 * 3**0.8
    assert w / h == pytest.approx(a, rel=0.01) and w * h == pytest.approx(512**2 * 0.75**0.5, rel=0.01)
    # 16 panels in 4x4: area 2x the base; 1 panel: 0.5x
    w16, h16, _ = sample_canvas(rng, p, 512, 512, "grid", [4] * 4)
    w1, h1, _ = sample_canvas(rng, p, 512, 512, "grid", [1])
    assert w16 * h16 == pytest.approx(2 * 512**2, rel=0.01) and w1 * h1 == pytest.approx(512**2 / 2, rel=0.01)
    assert w1 / h1 == pytest.approx(1.25, rel=0.01)
    # the aspect range and the side bounds hold: a 1x5 row (3.55:1) clipped to 2:1, and 25 panels
    # (2.5x the base area) kept to 1.2x the base side
    w, h, _ = sample_canvas(rng, replace(p, aspect_range=(0.5, 2.0)), 512, 512, "rows", [5])
    assert w / h == pytest.approx(2.0, rel=0.01)
    w, h, _ = sample_canvas(rng, replace(p, max_side=1.2), 512, 512, "grid", [5] * 5)
    assert max(w, h) == math.floor(1.2 * 512) and w / h == pytest.approx(1.25 * 25**-0.15, rel=0.01)
    # ... and with a short side of at least 0.9 x 512, a 1x5 row can be at most 1536 / 461 wide
    w, h, _ = sample_canvas(rng, replace(p, min_side=0.9), 512, 512, "rows", [5])
    assert (w, h) == (1536, math.ceil(0.9 * 512))
    assert grid_ratio("columns", [2, 3]) == (3.0, 2.0) and grid_ratio("big_stack", [1, 3]) == (3.0, 4.0)
    assert grid_ratio("rows", [3, 2]) == (2.0, 3.0) and grid_ratio("inset", [2, 2, 2]) == (3.0, 2.0)


def test_sizes_vary_and_grow_with_the_panel_count(pool):
    params = _grow(ElementParams.from_config(None))
    lo, hi = GROW.side_bounds(*BASE)
    by_n: dict[int, list[tuple[int, int]]] = {}
    rows_aspect, cols_aspect = [], []
    for i in range(60):
        spec, images = sample_figure(rng_for(4, "canvas", i), pool, *BASE, params=params)
        w, h = spec.width, spec.height
        assert lo <= w <= hi and lo <= h <= hi
        assert 0.5 * 0.98 <= w / h <= 4.0 * 1.02
        assert spec.layout["width"] == w and spec.layout["height"] == h and spec.canvas["size"] == [w, h]
        for p in spec.panels:
            assert _inside((p.x, p.y, p.w, p.h), w, h)
            if p.label is not None:
                assert _inside(p.label.bbox, w, h)
        if spec.caption is not None:  # the caption band stays under the panels, inside the canvas
            cx, cy, _, ch = spec.caption.bbox  # (a word can run off a canvas under ~150 px wide)
            assert cx >= 0 and cy + ch <= h and all(cy >= p.y + p.h for p in spec.panels)
        by_n.setdefault(len(spec.panels), []).append((w, h))
        structure = spec.layout["structure"]
        if spec.layout["kind"] in ("grid", "rows", "inset") and len(structure) == 1 and structure[0] >= 2:
            rows_aspect.append(w / h)
        if spec.layout["kind"] in ("grid", "rows", "inset") and len(structure) >= 2 and max(structure) == 1:
            cols_aspect.append(w / h)
        if i < 12:  # the drawn image is the canvas, every box inside it
            im, anns = compose(spec, images)
            assert im.size == (w, h) and all(_inside(a["bbox"], w, h) for a in anns)
    sizes = {s for v in by_n.values() for s in v}
    assert len(sizes) > 40  # figures differ in size
    small = [w * h for n, v in by_n.items() if n <= 2 for w, h in v]
    large = [w * h for n, v in by_n.items() if n >= 6 for w, h in v]
    assert len(small) >= 8 and len(large) >= 8
    assert np.mean(large) > 1.5 * np.mean(small)
    assert rows_aspect and min(rows_aspect) > 1.0  # a row of panels is wide
    assert not cols_aspect or np.mean(cols_aspect) < 1.0  # a column of panels is tall


def test_forced_panel_counts_and_labels_size_the_canvas(pool):
    params = _grow()
    areas: dict[int, list[int]] = {1: [], 9: []}
    for i in range(12):
        spec, _ = sample_figure(rng_for(5, "forced", i), pool, *BASE, params=params, labels=list("ABCDEFGHI"))
        assert [p.label.text for p in spec.panels if p.label] == list("ABCDEFGHI")
        areas[9].append(spec.width * spec.height)
        spec, _ = sample_figure(rng_for(5, "forced", i), pool, *BASE, params=params, labels=[], n_panels=1)
        assert len(spec.panels) == 1 and all(p.label is None for p in spec.panels)
        areas[1].append(spec.width * spec.height)
    assert np.mean(areas[9]) > 2 * np.mean(areas[1])


def test_elements_and_fixed_canvas_keep_their_streams(pool):
    for i in range(8):
        rng = rng_for(6, "streams", i)
        # elements absent or all off: the same canvas, layout and pixels (the canvas has its own stream)
        a, ia = sample_figure(rng, pool, *BASE, params=_grow(None))
        b, ib = sample_figure(rng_for(6, "streams", i), pool, *BASE, params=_grow(ElementParams.off()))
        assert (a.width, a.height, a.layout) == (b.width, b.height, b.layout)
        assert compose(a, ia)[0].tobytes() == compose(b, ib)[0].tobytes()
        # a fixed canvas (or none) draws the figure as without this setting
        f, _ = sample_figure(rng_for(6, "streams", i), pool, *BASE, params=FigureParams())
        g, _ = sample_figure(
            rng_for(6, "streams", i), pool, *BASE, params=FigureParams(canvas=CanvasParams.fixed())
        )
        assert (
            f.to_record() == g.to_record() and (g.width, g.height) == BASE and "canvas" not in g.to_record()
        )


# ---------------------------------------------------------------------------------- renders


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_renders_are_deterministic_shardable_and_merge_with_varying_sizes(tmp_path, pool):
    a = render(10, 3, tmp_path / "a", size=BASE, sources=pool)
    render(10, 3, tmp_path / "b", size=BASE, sources=pool)
    fa = _files(tmp_path / "a")
    assert a["kept"] == 10 and fa == _files(tmp_path / "b")
    coco = json.loads(fa["annotations.json"])
    assert coco["info"]["size"] == list(BASE) and coco["info"]["canvas"] == GROW.to_dict()
    sizes = {(im["width"], im["height"]) for im in coco["images"]}
    assert len(sizes) >= 6
    recs = [json.loads(line)["spec"] for line in fa["records.jsonl"].decode().splitlines()]
    for im, rec in zip(coco["images"], recs, strict=True):
        w, h = im["width"], im["height"]
        assert (rec["width"], rec["height"]) == (w, h) and rec["canvas"]["base"] == list(BASE)
        with Image.open(tmp_path / "a" / im["file_name"]) as pic:
            assert pic.size == (w, h)
        anns = [x for x in coco["annotations"] if x["image_id"] == im["id"]]
        lines = fa[f"labels/{Path(im['file_name']).stem}.txt"].decode().splitlines()
        for line, ann in zip(lines, anns, strict=True):  # YOLO normalised by the figure's own size
            _, cx, cy, bw, bh = (float(v) for v in line.split())
            x, y, ww, hh = ann["bbox"]
            assert _inside(ann["bbox"], w, h)
            assert cx * w == pytest.approx(x + ww / 2, abs=0.01) and bh * h == pytest.approx(hh, abs=0.01)
            assert 0 < cx < 1 and 0 < cy < 1 and 0 < bw <= 1 and 0 < bh <= 1
    # figure 7 alone, and every figure of two shards, is the same file as in the whole run
    render(1, 3, tmp_path / "one", size=BASE, sources=pool, start=7)
    one = _files(tmp_path / "one")
    assert all(fa[k] == v for k, v in one.items() if k.startswith(("images/", "labels/")))
    for k in range(2):
        render(10, 3, tmp_path / f"s{k}", size=BASE, sources=pool, shard=k, num_shards=2)
        fs = _files(tmp_path / f"s{k}")
        for i in figure_indices(10, k, 2):
            for key, v in fs.items():
                if key.startswith(("images/", "labels/")) and f"synth_{i:08d}" in key:
                    assert v == fa[key]
    total = merge_shards([tmp_path / "s1", tmp_path / "s0"], tmp_path / "m")
    merged = json.loads((tmp_path / "m/annotations.json").read_text())
    assert total["kept"] == 10 and merged["annotations"] == coco["annotations"]
    assert [(im["width"], im["height"]) for im in merged["images"]] == [
        (im["width"], im["height"]) for im in coco["images"]
    ]
    assert merged["info"]["canvas"] == GROW.to_dict()
    # other canvas settings (or a fixed canvas) do not merge with these
    for k, canvas in enumerate(({"max_side": 2}, {"mode": "fixed"})):
        render(2, 3, tmp_path / f"o{k}", size=BASE, sources=pool, shard=0, num_shards=2, canvas=canvas)
        with pytest.raises(ValueError, match="different settings"):
            merge_shards([tmp_path / "s1", tmp_path / f"o{k}"], tmp_path / f"bad{k}")


# Digests of images/, labels/ and records.jsonl of the two renders below, made by the renderer
# before synth.canvas existed (commits 4e1948a and b72b3a3 draw the same bytes here) in the locked
# environment: mode fixed must keep drawing those bytes. The sources are generated images (not the
# builtin pool, so new builtin charts leave this alone); pixels depend on the library builds, so
# the check runs where they match. A later change that redraws these figures on purpose must
# re-record the digests (print _digest(out)).
BEFORE_CANVAS = {
    "elements": "569cad194628b126dba9ab00c670f76fd4be17dc9d3d5487edfdd42e1c166b71",
    "off": "bebac88aa9e33d54abf2e5f89810ca4e7f62893baae1339de1c81a8d3228ffec",
}
LOCKED = {"PIL": "13.0.0", "numpy": "2.4.6"}


def _digest(out: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if p.is_file() and (rel.startswith(("images/", "labels/")) or rel == "records.jsonl"):
            h.update(rel.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _generated_sources(root: Path) -> dict[str, list[str]]:
    """Three modalities of four deterministic images each (waves and noise)."""
    rng = np.random.default_rng(20260415)
    out = {}
    for m, (w, h) in (("radiology", (300, 260)), ("microscopy", (420, 320)), ("plot", (360, 240))):
        d = root / m
        d.mkdir(parents=True)
        for k in range(4):
            yy, xx = np.mgrid[0:h, 0:w]
            base = (np.sin(xx / (7 + 5 * k)) + np.cos(yy / (11 + 3 * k))) * 60 + 128
            arr = np.stack([base + rng.normal(0, 12, (h, w)) + 20 * c for c in range(3)], axis=2)
            Image.fromarray(arr.clip(0, 255).astype(np.uint8), "RGB").save(d / f"{m}_{k}.png")
        out[m] = [str(d)]
    return out


def test_fixed_canvas_renders_the_figures_from_before_canvases(tmp_path):
    import importlib

    from pmcflow.synth.sources import pool_from_config

    versions = {m: importlib.import_module(m).__version__ for m in LOCKED}
    if versions != LOCKED:
        pytest.skip(f"digests recorded with {LOCKED}, not {versions}")
    pool = pool_from_config(_generated_sources(tmp_path / "src"), max_side=256)
    for name, elements in (("elements", None), ("off", ElementParams.off())):
        out = tmp_path / name
        render(12, 20260415, out, size=BASE, sources=pool, elements=elements, canvas={"mode": "fixed"})
        assert _digest(out) == BEFORE_CANVAS[name], name
        coco = json.loads((out / "annotations.json").read_text())
        assert {(im["width"], im["height"]) for im in coco["images"]} == {BASE}
        assert coco["info"]["canvas"]["mode"] == "fixed"


def test_cli_canvas_settings(tmp_path):
    from pmcflow.synth.render import cli

    out = tmp_path / "c"
    assert (
        cli(["--n", "3", "--seed", "1", "--out", str(out), "--size", "128x96", "--canvas", "mode=fixed"]) == 0
    )
    coco = json.loads((out / "annotations.json").read_text())
    assert {(im["width"], im["height"]) for im in coco["images"]} == {(128, 96)}
    assert (
        cli(["--n", "3", "--seed", "1", "--out", str(out), "--size", "128", "--canvas", "max_side=1.5"]) == 0
    )
    coco = json.loads((out / "annotations.json").read_text())
    assert coco["info"]["canvas"] == replace(GROW, max_side=1.5).to_dict()
    assert all(
        64 <= min(im["width"], im["height"]) <= max(im["width"], im["height"]) <= 192 for im in coco["images"]
    )
