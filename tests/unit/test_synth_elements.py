"""Realistic elements of rendered figures (synth.elements): JPEG output, caption distractors,
marks on photographic panels, round masks, dark figures, no-gutter layouts; their settings."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, JpegImagePlugin

from pmcflow.config import ConfigError, load_config, load_schema
from pmcflow.seeding import rng_for
from pmcflow.synth import elements as E
from pmcflow.synth.compose import PLOT_LIKE_MODALITIES, FigureParams, compose, sample_figure
from pmcflow.synth.layout import boxes_overlap
from pmcflow.synth.render import merge_shards, render
from pmcflow.synth.sources import builtin_pool

SIZE = (256, 224)


@pytest.fixture(scope="module")
def pool():
    return builtin_pool(max_side=256)


def _params(**rates: float) -> FigureParams:
    """Every element off except the given settings."""
    return FigureParams(elements=replace(E.ElementParams.off(), **rates))


def _figures(pool, params: FigureParams, n: int, tag: str, size=SIZE):
    for i in range(n):
        spec, images = sample_figure(rng_for(3, tag, i), pool, *size, params=params)
        yield i, spec, images


def _inside(inner, outer) -> bool:
    return (
        inner[0] >= outer[0]
        and inner[1] >= outer[1]
        and inner[0] + inner[2] <= outer[0] + outer[2]
        and inner[1] + inner[3] <= outer[1] + outer[3]
    )


def _touch(b, c) -> bool:
    """Boxes ``b`` and ``c`` share a stretch of edge."""
    side = b[0] + b[2] == c[0] or c[0] + c[2] == b[0]
    stacked = b[1] + b[3] == c[1] or c[1] + c[3] == b[1]
    return (side and b[1] < c[1] + c[3] and c[1] < b[1] + b[3]) or (
        stacked and b[0] < c[0] + c[2] and c[0] < b[0] + b[2]
    )


def _changed(a: Image.Image, b: Image.Image) -> np.ndarray:
    return np.any(np.asarray(a, dtype=np.int16) != np.asarray(b, dtype=np.int16), axis=2)


# ---------------------------------------------------------------------------------- settings


def test_schema_defaults_validate_and_are_the_params_defaults():
    props = load_schema()["properties"]["synth"]["properties"]["elements"]["properties"]
    for key, spec in props.items():  # typed, described, defaulted
        assert {"type", "description", "default"} <= set(spec), key
    cfg = load_config([])
    elements = cfg["synth"]["elements"]
    assert elements == {key: spec["default"] for key, spec in props.items()}
    p = E.ElementParams.from_config(None)
    assert p == E.ElementParams.from_config(elements)
    assert p.jpeg_rate == pytest.approx(0.6) and p.jpeg_quality == (70, 95) and p.jpeg_subsampling == "4:2:0"
    assert p.caption_rate == pytest.approx(0.15) and p.caption_lines == (2, 5)
    assert p.annotation_rate == pytest.approx(0.35) and set(p.annotation_kinds) == set(E.MARK_KINDS)
    assert p.round_mask_rate == pytest.approx(0.08) and p.dark_rate == pytest.approx(0.08)
    assert p.no_gutter_rate == pytest.approx(0.1)
    assert set(E.RATE_KEYS) <= set(props) and all(getattr(E.ElementParams.off(), k) == 0 for k in E.RATE_KEYS)
    # a partial mapping keeps the other defaults
    assert E.ElementParams.from_config({"jpeg_rate": 0}) == replace(p, jpeg_rate=0.0)


@pytest.mark.parametrize(
    "override, match",
    [
        ("synth.elements.jpeg_rate=1.5", "jpeg_rate"),
        ("synth.elements.jpeg_quality=[95, 70]", "jpeg_quality: low 95 is above high 70"),
        ("synth.elements.jpeg_quality=[0, 90]", "jpeg_quality"),
        ("synth.elements.jpeg_subsampling=4:1:1", "jpeg_subsampling"),
        ("synth.elements.caption_lines=[5, 2]", "caption_lines"),
        ("synth.elements.annotation_kinds=[halo]", "annotation_kinds"),
        ("synth.elements.glitter_rate=0.1", r"synth\.elements\.glitter_rate: unknown key"),
    ],
)
def test_bad_element_settings_fail_at_load_time(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config([], [override])


def test_params_refuse_bad_ranges_for_library_callers():
    with pytest.raises(ValueError, match="jpeg_quality"):
        E.ElementParams.from_config({"jpeg_quality": [95, 70]})
    with pytest.raises(ConfigError, match="annotation_max"):
        E.ElementParams.from_config({"annotation_max": 0})


# ---------------------------------------------------------------------------------- switched off


def test_rates_zero_draw_exactly_the_figures_without_elements(pool):
    off, none = _params(), FigureParams()
    for i in range(12):
        a, ia = sample_figure(rng_for(4, "off", i), pool, *SIZE, params=off)
        b, ib = sample_figure(rng_for(4, "off", i), pool, *SIZE, params=none)
        ima, anns_a = compose(a, ia)
        imb, anns_b = compose(b, ib)
        assert np.array_equal(np.asarray(ima), np.asarray(imb)) and anns_a == anns_b
        assert a.encoding == {"format": "png"} and a.caption is None
        assert all(p.mask is None and not p.marks for p in a.panels)
        rec = a.to_record()["elements"]
        assert (
            not rec["dark"] and not rec["no_gutter"] and rec["separator"] is None and rec["caption_band"] == 0
        )


ALL_ON = {
    "jpeg_rate": 1.0,
    "caption_rate": 1.0,
    "annotation_rate": 1.0,
    "round_mask_rate": 1.0,
    "dark_rate": 1.0,
    "no_gutter_rate": 1.0,
}


@pytest.mark.parametrize("key", E.RATE_KEYS)
def test_one_rate_at_zero_switches_that_element_off(pool, key):
    params = _params(**{**ALL_ON, key: 0.0})
    seen = {"marks": 0, "masks": 0}
    for _, spec, _ in _figures(pool, params, 8, f"one-off-{key}"):
        fe = spec.elements
        assert (fe.encoding["format"] == "png") == (key == "jpeg_rate")
        assert (spec.caption is None) == (key == "caption_rate")
        chart = spec.figure_modality in PLOT_LIKE_MODALITIES
        assert fe.dark == (key != "dark_rate" and not chart)
        assert fe.no_gutter == (key != "no_gutter_rate")
        seen["marks"] += sum(len(p.marks) for p in spec.panels)
        seen["masks"] += sum(p.mask is not None for p in spec.panels)
    if key == "annotation_rate":
        assert seen["marks"] == 0
    elif key == "round_mask_rate":
        assert seen["masks"] == 0
    else:
        assert seen["marks"] > 0


def test_switching_one_element_leaves_the_panels_alone(pool):
    """The elements draw from their own child stream: the panels' sources, crops and labels do not
    depend on them (only the geometry a caption band or a no-gutter layout needs changes)."""
    for i in range(10):
        base, _ = sample_figure(rng_for(5, "iso", i), pool, *SIZE, params=_params())
        marked, _ = sample_figure(
            rng_for(5, "iso", i), pool, *SIZE, params=_params(annotation_rate=1.0, jpeg_rate=1.0)
        )
        strip = lambda s: [{k: v for k, v in p.to_record().items() if k != "marks"} for p in s.panels]  # noqa: E731
        assert strip(base) == strip(marked)
        captioned, _ = sample_figure(rng_for(5, "iso", i), pool, *SIZE, params=_params(caption_rate=1.0))
        assert [p.source_id for p in captioned.panels] == [p.source_id for p in base.panels]


# ---------------------------------------------------------------------------------- JPEG


def test_jpeg_share_names_quality_and_bytes(tmp_path, pool):
    n = 40
    counts = render(n, 8, tmp_path / "a", size=(96, 80), sources=pool)  # schema defaults
    coco = json.loads((tmp_path / "a/annotations.json").read_text())
    names = [im["file_name"] for im in coco["images"]]
    sizes = {im["file_name"]: (im["width"], im["height"]) for im in coco["images"]}  # grown per figure
    on_disk = sorted(p.relative_to(tmp_path / "a").as_posix() for p in (tmp_path / "a/images").iterdir())
    assert sorted(names) == on_disk and counts["kept"] == n  # one file per figure, named as written
    jpegs = [f for f in names if f.endswith(".jpg")]
    assert all(f.endswith((".jpg", ".png")) for f in names)
    assert 0.35 <= len(jpegs) / n <= 0.85  # default share 0.6 (binomial, n = 40)
    assert coco["info"]["elements"] == E.ElementParams.from_config(None).to_dict()
    recs = {
        json.loads(line)["name"]: json.loads(line)["spec"] for line in (tmp_path / "a/records.jsonl").open()
    }
    for f in names:
        data = (tmp_path / "a" / f).read_bytes()
        enc = recs[Path(f).stem]["elements"]["encoding"]
        if f.endswith(".jpg"):
            assert data[:2] == b"\xff\xd8" and enc["format"] == "jpeg" and 70 <= enc["quality"] <= 95
            with Image.open(tmp_path / "a" / f) as im:
                assert im.format == "JPEG" and im.mode == "RGB" and im.size == sizes[f]
                assert JpegImagePlugin.get_sampling(im) == 2  # 4:2:0
                assert "exif" not in im.info and "icc_profile" not in im.info
        else:
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and enc == {"format": "png"}
    assert len({recs[Path(f).stem]["elements"]["encoding"]["quality"] for f in jpegs}) > 3  # drawn per figure
    # same config and seed -> the same bytes (JPEG included), also in shards and after a merge
    render(n, 8, tmp_path / "b", size=(96, 80), sources=pool)
    a = {p.name: p.read_bytes() for p in (tmp_path / "a/images").iterdir()}
    assert a == {p.name: p.read_bytes() for p in (tmp_path / "b/images").iterdir()}
    for k in range(2):
        render(n, 8, tmp_path / f"s{k}", size=(96, 80), sources=pool, shard=k, num_shards=2)
        for p in (tmp_path / f"s{k}/images").iterdir():
            assert p.read_bytes() == a[p.name]
    merge_shards([tmp_path / "s1", tmp_path / "s0"], tmp_path / "m")
    merged = json.loads((tmp_path / "m/annotations.json").read_text())
    assert [Path(im["file_name"]).name for im in merged["images"]] == [Path(f).name for f in names]
    for im in merged["images"]:
        assert (tmp_path / "m" / im["file_name"]).is_file()
    # shards rendered with other element settings do not merge with these
    render(
        2,
        8,
        tmp_path / "other",
        size=(96, 80),
        sources=pool,
        shard=0,
        num_shards=2,
        elements={"jpeg_rate": 0},
    )
    with pytest.raises(ValueError, match="different settings"):
        merge_shards([tmp_path / "s0", tmp_path / "other"], tmp_path / "bad")


def test_jpeg_rate_extremes_and_stale_files(tmp_path, pool):
    render(
        4, 2, tmp_path / "r", size=(96, 80), sources=pool, elements={"jpeg_rate": 1, "jpeg_quality": [90, 90]}
    )
    recs = [json.loads(line)["spec"] for line in (tmp_path / "r/records.jsonl").open()]
    assert all(r["elements"]["encoding"]["quality"] == 90 for r in recs)
    assert sorted(p.suffix for p in (tmp_path / "r/images").iterdir()) == [".jpg"] * 4
    render(4, 2, tmp_path / "r", size=(96, 80), sources=pool, elements=E.ElementParams.off())
    assert sorted(p.suffix for p in (tmp_path / "r/images").iterdir()) == [".png"] * 4  # no stale .jpg


# ---------------------------------------------------------------------------------- caption band


def test_caption_text_lies_outside_every_box(pool):
    params = _params(caption_rate=1.0, annotation_rate=0.5)
    drawn = 0
    for size in (SIZE, (512, 512), (640, 400)):
        for i, spec, images in _figures(pool, params, 10, f"caption-{size}", size=size):
            cap = spec.caption
            assert cap is not None
            assert 2 <= len(cap.lines) <= 5 and all(line.strip() for line in cap.lines)
            assert cap.prefix.split()[0] in ("Figure", "Fig.", "FIGURE", "Supplementary")
            assert all(ch.isascii() for line in cap.lines for ch in line)  # the shipped fonts are ASCII
            im, anns = compose(spec, images)
            boxes = [a["bbox"] for a in anns] + [a["label_bbox"] for a in anns if a["label_bbox"]]
            assert _inside(cap.bbox, (0, 0, *size))
            for b in boxes:
                assert not boxes_overlap(tuple(cap.bbox), tuple(b)), (i, cap.bbox, b)
                assert b[1] + b[3] <= cap.bbox[1]  # the band is below every box
            # every pixel the caption changes is inside its (unannotated) ink box
            bare = copy.deepcopy(spec)
            bare.caption = None
            changed = _changed(im, compose(bare, images)[0])
            ys, xs = np.nonzero(changed)
            assert len(ys) > 0
            x, y, w, h = cap.bbox
            assert xs.min() >= x and xs.max() < x + w and ys.min() >= y and ys.max() < y + h
            drawn += 1
    assert drawn == 30


def test_caption_words_are_deterministic_and_shipped():
    a = E.caption_words(np.random.default_rng(1), 60)
    assert a == E.caption_words(np.random.default_rng(1), 60) and len(a[1]) >= 60
    assert E.caption_words(np.random.default_rng(2), 60) != a


# ---------------------------------------------------------------------------------- no gutter


def test_no_gutter_boxes_are_adjacent_and_disjoint(pool):
    params = _params(no_gutter_rate=1.0, annotation_rate=0.5)
    multi = 0
    for size in (SIZE, (512, 512), (333, 517)):
        for i, spec, images in _figures(pool, params, 25, f"nogutter-{size}", size=size):
            assert spec.layout["gap_x"] == spec.layout["gap_y"] == 0 and spec.layout["aspect_mode"] == "fill"
            assert spec.placement is None or spec.placement.startswith("inside")
            _, anns = compose(spec, images)
            boxes = [tuple(a["bbox"]) for a in anns]
            for a in range(len(boxes)):
                for b in range(a + 1, len(boxes)):
                    assert not boxes_overlap(boxes[a], boxes[b]), (i, boxes[a], boxes[b])
            # the boxes tile their bounding rectangle: no gap anywhere between them
            x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
            x1, y1 = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
            assert sum(b[2] * b[3] for b in boxes) == (x1 - x0) * (y1 - y0), (i, spec.layout["kind"], boxes)
            if len(boxes) > 1:
                multi += 1
                for k, b in enumerate(boxes):  # every panel touches another along an edge
                    assert any(_touch(b, c) for j, c in enumerate(boxes) if j != k), (i, b)
            for a in anns:
                if a["label_bbox"]:
                    assert _inside(a["label_bbox"], a["bbox"])
    assert multi > 40


def test_separator_lines_stay_inside_the_boxes(pool):
    params = _params(no_gutter_rate=1.0)
    seen = 0
    for _, spec, images in _figures(
        pool, replace(params, elements=replace(params.elements, separator_rate=1.0)), 12, "sep"
    ):
        assert spec.elements.separator is not None and spec.elements.separator[0] in (1, 2)
        im, anns = compose(spec, images)
        bare = copy.deepcopy(spec)
        bare.elements.separator = None
        changed = _changed(im, compose(bare, images)[0])
        inside = np.zeros_like(changed)
        for x, y, w, h in (a["bbox"] for a in anns):
            inside[y : y + h, x : x + w] = True
        assert not (changed & ~inside).any()
        seen += bool(changed.any())
    assert seen > 0


# ---------------------------------------------------------------------------------- marks, masks, dark


def test_marks_stay_inside_their_panel_box(pool):
    params = _params(annotation_rate=1.0, round_mask_rate=0.4)
    kinds: set[str] = set()
    for i, spec, images in _figures(pool, params, 30, "marks"):
        im, anns = compose(spec, images)
        bare = copy.deepcopy(spec)
        allowed = np.zeros(im.size[::-1], dtype=bool)
        for p, bp in zip(spec.panels, bare.panels, strict=True):
            if p.modality in PLOT_LIKE_MODALITIES:
                assert not p.marks and p.mask is None  # never on charts, blots or gels
            for m in p.marks:
                kinds.add(m["kind"])
                assert _inside(m["bbox"], (p.x, p.y, p.w, p.h)), (i, m)
                if p.mask is not None:
                    assert _inside(m["bbox"], E.mark_region((p.x, p.y, p.w, p.h), p.mask))
                if p.label is not None:
                    assert not boxes_overlap(tuple(m["bbox"]), tuple(p.label.bbox))
                assert m["color"] is not None and len(m["color"]) == 3  # "auto" recorded as drawn
                x, y, w, h = m["bbox"]
                allowed[y : y + h, x : x + w] = True
            bp.marks = []
        changed = _changed(im, compose(bare, images)[0])
        assert not (changed & ~allowed).any(), i
    assert kinds == set(E.MARK_KINDS)


def test_round_masks_are_black_outside_the_circle(pool):
    params = _params(round_mask_rate=1.0)
    masked = 0
    for _, spec, images in _figures(pool, params, 20, "mask"):
        im, _ = compose(spec, images)
        a = np.asarray(im)
        for p in spec.panels:
            if p.mask is None:
                continue
            masked += 1
            assert p.inset is None and max(p.w, p.h) <= E.MASK_MAX_ASPECT * min(p.w, p.h)
            yy, xx = np.mgrid[0 : p.h, 0 : p.w]
            d = np.hypot(xx + 0.5 - p.mask["cx"], yy + 0.5 - p.mask["cy"])
            tile = a[p.y : p.y + p.h, p.x : p.x + p.w]
            outside = d > p.mask["r"] + 1.5
            if p.border is not None:  # the figure's panel border is drawn over the tile edge
                bw = p.border[0]
                outside[:bw], outside[-bw:], outside[:, :bw], outside[:, -bw:] = False, False, False, False
            if p.label is not None:  # ... and so is its letter (often in a black corner of the mask)
                lx, ly, lw, lh = p.label.bbox
                outside[max(0, ly - p.y) : ly - p.y + lh, max(0, lx - p.x) : lx - p.x + lw] = False
            assert (tile[outside] == 0).all()
    assert masked > 5


def test_dark_figures_have_a_black_background_and_light_labels(pool):
    params = _params(dark_rate=1.0)
    dark = 0
    for _, spec, images in _figures(pool, params, 20, "dark"):
        if spec.figure_modality in PLOT_LIKE_MODALITIES:
            assert not spec.elements.dark and spec.background == (255, 255, 255)
            continue
        dark += 1
        assert spec.elements.dark and spec.background == E.DARK_BACKGROUND
        compose(spec, images)
        for p in spec.panels:
            if p.label is not None:
                assert min(p.label.color) >= 150, p.label.color
                assert p.label.box_color in (None, (0, 0, 0))
    assert dark > 5
