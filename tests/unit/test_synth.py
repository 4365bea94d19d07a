"""Compositor: labels, caption letters, layouts, bad sources, determinism, sharding, COCO/YOLO."""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from pmcflow.seeding import derive_seed, rng_for
from pmcflow.synth import labels as L
from pmcflow.synth.compose import FigureParams, compose, sample_figure
from pmcflow.synth.layout import LayoutParams, boxes_overlap, sample_layout
from pmcflow.synth.render import figure_indices, merge_shards, png_bytes, render
from pmcflow.synth.sources import BadImage, builtin_pool, decode_image, pool_from_config, to_rgb


@pytest.fixture(scope="module")
def pool():
    p = builtin_pool(max_side=256)
    p.validate_all()
    return p


# ---------------------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    "grammar, expected",
    [
        ("num", ["1", "2", "3"]),
        ("lower", ["a", "b", "c"]),
        ("upper", ["A", "B", "C"]),
        ("paren_l", ["(a)", "(b)", "(c)"]),
        ("close_l", ["a)", "b)", "c)"]),
        ("paren_u", ["(A)", "(B)", "(C)"]),
        ("dot_u", ["A.", "B.", "C."]),
        ("roman", ["i", "ii", "iii"]),
    ],
)
def test_flat_grammars(grammar, expected):
    assert [L.label_text(grammar, k) for k in range(3)] == expected


def test_hierarchical_grammars_and_helpers():
    # rows of 2: (group, index in group)
    pos = [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [L.label_text("num_l", k, g, j) for k, (g, j) in enumerate(pos)] == ["1a", "1b", "2a", "2b"]
    assert [L.label_text("l_num", k, g, j) for k, (g, j) in enumerate(pos)] == ["a-1", "a-2", "b-1", "b-2"]
    assert [L.roman(n) for n in (4, 9, 14, 19, 24, 40)] == ["iv", "ix", "xiv", "xix", "xxiv", "xl"]
    assert L.letters(25) == "z" and L.letters(26) == "aa" and L.letters(0, upper=True) == "A"
    assert len(L.GRAMMARS) == 10 and len(set(L.GRAMMARS)) == 10
    with pytest.raises(ValueError):
        L.label_text("klingon", 0)


@pytest.mark.parametrize(
    "caption, expected",
    [
        ("Title. (A) first. (B) second. (C) third.", ["A", "B", "C"]),
        ("Effects (A-C) and (D).", ["A", "B", "C", "D"]),
        ("Panels (A\u2013C) show x; (E) shows y.", ["A", "B", "C", "D", "E"]),
        ("Chemical structures of A, THL and B, MmPPOX.", ["A", "B"]),
        ("Distribution within (a) clean and (b) contaminated samples", ["a", "b"]),
        ("Rates in females (A), and in both sexes (B).", ["A", "B"]),
        ("(A, B) Parental patterns. (C) Cross.", ["A", "B", "C"]),
        ("Relative abundance of bacterial phyla", []),
        ("As in Figure 1B, embryos at 10 hr (see Figure 4A).", []),  # other figures' panels
        ("Significant (P) values; vitamin (A) only.", []),  # a lone (A) is not a compound figure
        ("(A) x. (B) y. (Q) an outlier letter.", ["A", "B"]),
    ],
)
def test_caption_panel_labels(caption, expected):
    assert L.caption_panel_labels(caption) == expected


def test_fonts_ship_with_licence():
    assert (L.FONT_DIR / "LICENSE_DEJAVU").exists()
    for name in L.FONTS:
        assert L.font(name, 12).getbbox("(a)")[2] > 0


# ---------------------------------------------------------------------------------- layouts


def test_layout_boxes_inside_and_grid_disjoint():
    kinds = set()
    for i in range(400):
        rng = rng_for(1, "layout-test", i)
        lay = sample_layout(
            rng, 512, 512, params=LayoutParams(special_rate=0.3), reserve=(0, int(i % 3) * 10)
        )
        kinds.add(lay.kind)
        boxes = [s.box for s in lay.slots]
        assert 1 <= len(boxes) <= 25
        for x, y, w, h in boxes:
            assert x >= 0 and y >= 0 and w > 0 and h > 0 and x + w <= 512 and y + h <= 512
        for a in range(len(boxes)):
            for b in range(a + 1, len(boxes)):
                assert not boxes_overlap(boxes[a], boxes[b]), (lay.kind, boxes[a], boxes[b])
    assert kinds == {"grid", "rows", "columns", "big_stack", "inset"}


def test_forced_panel_counts():
    for n in range(1, 26):
        for i in range(5):
            lay = sample_layout(rng_for(2, "n", f"{n}/{i}"), 640, 480, n_panels=n)
            assert len(lay.slots) == n


def test_gap_distribution_is_beta_2_10_times_50():
    gaps = [sample_layout(rng_for(3, "g", i), 512, 512).gap_x for i in range(2000)]
    # Beta(2,10) mean = 1/6 -> 8.3 px at 512 px; max well below 50
    assert 6.5 < float(np.mean(gaps)) < 10.5 and max(gaps) < 50


# ---------------------------------------------------------------------------------- compose


def test_compose_annotations_and_labels(pool):
    seen_placements, seen_modalities = set(), set()
    for i in range(60):
        spec, panels = sample_figure(rng_for(5, "synth", i), pool, 384, 320)
        im, anns = compose(spec, panels)
        assert im.size == (384, 320) and im.mode == "RGB"
        assert len(anns) == len(spec.panels) >= 1
        for a in anns:
            x, y, w, h = a["bbox"]
            assert 0 <= x and 0 <= y and x + w <= 384 and y + h <= 320
            if a["label_bbox"] is not None:
                lx, ly, lw, lh = a["label_bbox"]
                assert 0 <= lx and 0 <= ly and lx + lw <= 384 and ly + lh <= 320 and lw > 0 and lh > 0
                assert a["label"]
            seen_modalities.add(a["modality"])
        seen_placements.add(spec.placement)
        json.dumps(spec.to_record())  # every parameter is JSON-able
    assert seen_modalities == set(pool.modalities)
    assert len(seen_placements) >= 5


def test_forced_labels(pool):
    spec, panels = sample_figure(rng_for(6, "x", 0), pool, 640, 480, labels=["A", "B", "C", "D"])
    _, anns = compose(spec, panels)
    assert [a["label"] for a in anns] == ["A", "B", "C", "D"]
    spec, panels = sample_figure(rng_for(6, "x", 1), pool, 640, 480, labels=[], n_panels=1)
    _, anns = compose(spec, panels)
    assert len(anns) == 1 and anns[0]["label"] is None


def test_seed_derivation_is_stable():
    assert derive_seed(1, "synth", 0) == derive_seed(1, "synth", 0) != derive_seed(1, "synth", 1)
    assert rng_for(9, "s", 3).random() == rng_for(9, "s", 3).random()


# ---------------------------------------------------------------------------------- sources


def _png(im: Image.Image, **kw) -> bytes:
    b = io.BytesIO()
    im.save(b, "PNG", **kw)
    return b.getvalue()


def _bad_images(d: Path) -> dict[str, str | None]:
    """Write one file per bad-image kind; value = expected rejection reason (None = usable)."""
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 255, (96, 128, 3), dtype=np.uint8)
    rgb = Image.fromarray(noise, "RGB")
    d.mkdir(parents=True, exist_ok=True)
    good = _png(rgb)
    (d / "good.png").write_bytes(good)
    (d / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(rng.integers(0, 255, 300, dtype=np.uint8)))
    (d / "notimage.jpg").write_bytes(b"hello, this is text")
    (d / "truncated.png").write_bytes(good[: len(good) // 2])
    jb = io.BytesIO()
    rgb.save(jb, "JPEG", quality=90)
    (d / "truncated.jpg").write_bytes(jb.getvalue()[: len(jb.getvalue()) // 3])
    cmyk = io.BytesIO()
    rgb.convert("CMYK").save(cmyk, "JPEG", quality=90)
    (d / "cmyk.jpg").write_bytes(cmyk.getvalue())
    i16 = Image.fromarray((rng.integers(0, 4000, (80, 80))).astype(np.uint16))
    (d / "sixteen.png").write_bytes(_png(i16))
    (d / "palette.png").write_bytes(_png(rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)))
    pt = rgb.convert("P", palette=Image.Palette.ADAPTIVE, colors=64)
    (d / "palette_alpha.png").write_bytes(_png(pt, transparency=0))
    (d / "rgba.png").write_bytes(_png(rgb.convert("RGBA")))
    frames = [Image.fromarray(np.roll(noise, k, axis=1), "RGB").convert("P") for k in range(3)]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    (d / "animated.gif").write_bytes(gif.getvalue())
    (d / "tiny.png").write_bytes(_png(Image.new("RGB", (12, 40), (10, 20, 30))))
    (d / "blank.png").write_bytes(_png(Image.new("RGB", (64, 64), (200, 200, 200))))
    # a PNG whose header claims 30000 x 30000 pixels (a decompression bomb): only the header
    bomb = bytearray(_png(Image.new("L", (1, 1))))
    bomb[16:24] = (30000).to_bytes(4, "big") + (30000).to_bytes(4, "big")
    bomb[29:33] = (zlib.crc32(bytes(bomb[12:29])) & 0xFFFFFFFF).to_bytes(4, "big")
    (d / "bomb.png").write_bytes(bytes(bomb))
    return {
        "good.png": None,
        "corrupt.png": "corrupt",
        "notimage.jpg": "corrupt",
        "truncated.png": "truncated",
        "truncated.jpg": "truncated",
        "cmyk.jpg": None,
        "sixteen.png": None,
        "palette.png": None,
        "palette_alpha.png": None,
        "rgba.png": None,
        "animated.gif": "animated",
        "tiny.png": "too_small",
        "blank.png": "blank",
        "bomb.png": "decompression_bomb",
    }


def test_every_bad_image_kind_is_converted_or_rejected(tmp_path):
    expected = _bad_images(tmp_path / "imgs")
    pool = pool_from_config({"microscopy": [tmp_path / "imgs"]}, max_side=256)
    usable = pool.validate_all()
    got = {sid.split("/", 1)[1]: reason for sid, (_, reason, _) in pool.rejections.items()}
    for name, reason in expected.items():
        assert got.get(name) == reason, (name, got.get(name), pool.rejections.get(f"microscopy:imgs/{name}"))
    assert usable == {"microscopy": sum(r is None for r in expected.values())}
    notes = {sid.split("/", 1)[1]: n for sid, n in pool.conversions.items()}
    assert notes["cmyk.jpg"] == "CMYK->RGB" and notes["sixteen.png"].endswith("->8bit")
    assert notes["palette.png"] == "palette->RGB" and notes["palette_alpha.png"] == "palette+alpha->RGB"
    # rendering with a pool full of bad files never crashes and only uses usable sources
    for i in range(10):
        spec, panels = sample_figure(rng_for(1, "bad", i), pool, 200, 200)
        compose(spec, panels)
        assert all(
            p.source_id.split("/", 1)[1] in {k for k, v in expected.items() if v is None} for p in spec.panels
        )


def test_decode_limits_and_modes():
    with pytest.raises(BadImage) as e:
        decode_image(_png(Image.new("RGB", (300, 300), (1, 2, 3))), max_pixels=1000)
    assert e.value.reason == "decompression_bomb"
    f = Image.fromarray(np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64), "F")
    rgb, note = to_rgb(f)
    assert rgb.mode == "RGB" and note == "F->8bit" and rgb.getextrema()[0] == (0, 255)


def test_jpeg_sources_decode_at_reduced_scale():
    arr = np.random.default_rng(2).integers(0, 255, (900, 1400, 3), dtype=np.uint8)
    b = io.BytesIO()
    Image.fromarray(arr, "RGB").save(b, "JPEG", quality=80)
    assert decode_image(b.getvalue()).size == (1400, 900)
    assert decode_image(b.getvalue(), draft_side=200).size == (350, 225)  # 1/4 scale, both sides >= 200


def test_parquet_sources(tmp_path):
    expected = _bad_images(tmp_path / "imgs")
    names = sorted(expected)
    table = pa.table({"id": names, "image": [(tmp_path / "imgs" / n).read_bytes() for n in names]})
    pq.write_table(table, tmp_path / "src.parquet", row_group_size=4)
    pq.write_table(pa.table({"path": ["imgs/good.png", "imgs/missing.png"]}), tmp_path / "paths.parquet")
    pool = pool_from_config({"plot": [tmp_path / "src.parquet"], "radiology": [tmp_path / "paths.parquet"]})
    usable = pool.validate_all()
    assert usable == {"plot": sum(r is None for r in expected.values()), "radiology": 1}
    reasons = {sid: r for sid, (_, r, _) in pool.rejections.items()}
    assert reasons["plot:src.parquet#bomb.png"] == "decompression_bomb"
    assert reasons["radiology:paths.parquet#1"] == "missing"


# ---------------------------------------------------------------------------------- render


def _files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _image(files: dict[str, bytes], i: int) -> tuple[str, bytes]:
    """The one image file of figure ``i`` (PNG or JPEG, per synth.elements)."""
    (name,) = [k for k in files if k.startswith(f"images/synth_{i:08d}.")]
    return name, files[name]


def test_render_is_byte_identical_and_shardable(tmp_path, pool):
    # the schema's element defaults (JPEG share, captions, marks, ...): deliberately part of this test
    a = render(9, 11, tmp_path / "a", size=(192, 160), sources=pool, validate_sources=True)
    render(9, 11, tmp_path / "b", size=(192, 160), sources=pool, validate_sources=True)
    fa, fb = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert fa == fb
    assert a["kept"] == 9 and len([k for k in fa if k.startswith("images/")]) == 9
    # figure 5 alone == figure 5 in the batch
    render(1, 11, tmp_path / "one", size=(192, 160), sources=pool, start=5)
    assert _image(_files(tmp_path / "one"), 5) == _image(fa, 5)
    # three shards == the whole run, and the merge equals the single-run annotations
    for k in range(3):
        render(
            9,
            11,
            tmp_path / f"s{k}",
            size=(192, 160),
            sources=pool,
            shard=k,
            num_shards=3,
            validate_sources=True,
        )
        fs = _files(tmp_path / f"s{k}")
        for i in figure_indices(9, k, 3):
            name = f"synth_{i:08d}"
            assert _image(fs, i) == _image(fa, i)
            assert fs[f"labels/{name}.txt"] == fa[f"labels/{name}.txt"]
    total = merge_shards([tmp_path / "s2", tmp_path / "s0", tmp_path / "s1"], tmp_path / "merged")
    assert total["kept"] == 9 and total["n_chunks"] == 3
    merged = json.loads((tmp_path / "merged/annotations.json").read_text())
    single = json.loads(fa["annotations.json"])
    for key in ("annotations", "label_annotations", "categories"):
        assert merged[key] == single[key]
    assert [im["file_name"] for im in merged["images"]][:2] == [
        f"../s0/{_image(fa, 0)[0]}",
        f"../s1/{_image(fa, 1)[0]}",
    ]
    assert (tmp_path / "merged/records.jsonl").read_bytes() == fa["records.jsonl"]


def test_coco_yolo_and_counts(tmp_path, pool):
    from pycocotools.coco import COCO

    render(12, 3, tmp_path / "r", size=256, sources=pool)
    coco = COCO(str(tmp_path / "r/annotations.json"))
    assert coco.getCatIds() == [1] and len(coco.getImgIds()) == 12
    data = json.loads((tmp_path / "r/annotations.json").read_text())
    assert len({a["id"] for a in data["annotations"]}) == len(data["annotations"])
    for img in data["images"]:
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[img["id"]]))
        assert anns and all(a["iscrowd"] == 0 and a["area"] == a["bbox"][2] * a["bbox"][3] for a in anns)
        lines = (tmp_path / "r/labels" / (Path(img["file_name"]).stem + ".txt")).read_text().splitlines()
        assert len(lines) == len(anns)
        iw, ih = img["width"], img["height"]  # each figure's own canvas (synth.canvas grows it)
        for line, a in zip(lines, anns, strict=True):
            c, cx, cy, w, h = line.split()
            x, y, bw, bh = a["bbox"]
            assert c == "0" and abs(float(cx) * iw - (x + bw / 2)) < 0.01 and abs(float(w) * iw - bw) < 0.01
            assert abs(float(cy) * ih - (y + bh / 2)) < 0.01 and abs(float(h) * ih - bh) < 0.01
        with Image.open(tmp_path / "r" / img["file_name"]) as im:
            assert im.size == (iw, ih) and im.mode == "RGB"
            assert im.format == {".png": "PNG", ".jpg": "JPEG"}[Path(img["file_name"]).suffix]
            # no metadata: nothing in a PNG, only the JFIF header in a JPEG (no EXIF, ICC, dpi)
            assert set(im.info) <= {"jfif", "jfif_version", "jfif_unit", "jfif_density"}
    for la in data["label_annotations"]:
        assert la["panel_id"] in {a["id"] for a in data["annotations"]}
    counts = json.loads((tmp_path / "r/counts.json").read_text())
    assert counts["in"] == counts["kept"] == 12 and counts["stage"] == "render"
    recs = [json.loads(x) for x in (tmp_path / "r/records.jsonl").read_text().splitlines()]
    assert [r["index"] for r in recs] == list(range(12)) and all(r["spec"]["panels"] for r in recs)
    assert pq.read_table(tmp_path / "r/rejections.parquet").num_rows == 0


def test_png_writer_roundtrip():
    arr = np.random.default_rng(1).integers(0, 255, (37, 53, 3), dtype=np.uint8)
    data = png_bytes(Image.fromarray(arr, "RGB"))
    assert data == png_bytes(Image.fromarray(arr, "RGB"))
    with Image.open(io.BytesIO(data)) as im:
        assert np.array_equal(np.asarray(im), arr)


def test_cli_render(tmp_path):
    from pmcflow.synth.render import cli

    assert cli(["--n", "2", "--seed", "1", "--out", str(tmp_path / "c"), "--size", "128x96"]) == 0
    assert sorted(p.stem for p in (tmp_path / "c/images").iterdir()) == ["synth_00000000", "synth_00000001"]
    assert cli(["--merge", str(tmp_path / "c"), "--out", str(tmp_path / "m")]) == 0
    # --no-elements: PNGs only; --element overrides one setting; a rerun leaves no stale twin
    assert (
        cli(["--n", "2", "--seed", "1", "--out", str(tmp_path / "c"), "--size", "128x96", "--no-elements"])
        == 0
    )
    assert sorted(p.name for p in (tmp_path / "c/images").iterdir()) == [
        "synth_00000000.png",
        "synth_00000001.png",
    ]
    args = [
        "--n",
        "2",
        "--seed",
        "1",
        "--out",
        str(tmp_path / "c"),
        "--size",
        "128x96",
        "--element",
        "jpeg_rate=1",
    ]
    assert cli(args) == 0
    assert sorted(p.name for p in (tmp_path / "c/images").iterdir()) == [
        "synth_00000000.jpg",
        "synth_00000001.jpg",
    ]


def test_figure_params_defaults_follow_reference():
    p = FigureParams()
    assert (
        p.layout.max_grid == 5
        and p.layout.special_rate == pytest.approx(0.10)
        and p.layout.gap_scale_px == 50
    )


def test_figures_without_usable_sources_are_counted_not_crashed(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.png").write_bytes(b"not an image")
    counts = render(3, 1, tmp_path / "r", size=64, sources={"radiology": [str(tmp_path / "bad")]})
    assert counts["in"] == 3 and counts["kept"] == 0 and counts["rejected"] == {"no_usable_source": 3}
    assert pq.read_table(tmp_path / "r/rejections.parquet").column("reason").to_pylist() == ["corrupt"]
    assert len(json.loads((tmp_path / "r/failures.json").read_text())) == 3


def test_panel_counts_follow_real_figures_unless_asked_for_grids() -> None:
    """Figures have 2-6 panels most of the time (real figures: 3.8 per figure in demo/real-figures),
    some a single one; the old m x n grid draw (mean 9) stays available."""
    from pmcflow.synth.layout import LayoutParams, sample_layout

    rng = np.random.default_rng(5)
    counts = np.array([len(sample_layout(rng, 640, 480).slots) for _ in range(600)])
    assert 4.0 <= counts.mean() <= 5.6
    assert 0.05 <= (counts == 1).mean() <= 0.16 and (counts <= 6).mean() >= 0.7 and counts.max() <= 25
    grids = np.array(
        [
            len(sample_layout(rng, 640, 480, params=LayoutParams(panel_count_weights=())).slots)
            for _ in range(600)
        ]
    )
    assert grids.mean() > 7.5
    # a forced count still wins (the demo corpus: one panel per caption letter)
    assert len(sample_layout(rng, 640, 480, n_panels=7).slots) == 7


# ---------------------------------------------------------------------------------- modality weights


def _figure_modalities(pool, weights, n=120):
    from collections import Counter

    params = FigureParams(modality_weights=tuple(weights.items()))
    specs = [sample_figure(rng_for(5, "weights", i), pool, 256, 256, params=params)[0] for i in range(n)]
    return Counter(s.figure_modality for s in specs), Counter(p.modality for s in specs for p in s.panels)


def test_modality_weights_shift_the_figure_mix(pool):
    """synth.modality_weights: unlisted weigh 1; all ones is the uniform draw, to the byte."""
    mods = sorted(pool.modalities)
    uniform, _ = _figure_modalities(pool, {})
    assert _figure_modalities(pool, dict.fromkeys(mods, 1.0))[0] == uniform  # same stream as no weights
    assert max(uniform.values()) < 0.45 * 120  # the uniform draw spreads over the modalities
    figs, panels = _figure_modalities(pool, {"plot": 6.0})
    assert figs["plot"] > 2 * uniform["plot"] and figs["plot"] > 0.4 * 120
    only, only_panels = _figure_modalities(pool, {**dict.fromkeys(mods, 0.0), "plot": 1.0, "mixed": 0.0})
    assert set(only) == {"plot"} and set(only_panels) == {"plot"}
    # mixed figures draw their panels with the same weights ("mixed" itself left out)
    _, mixed_panels = _figure_modalities(pool, {**dict.fromkeys(mods, 0.0), "mixed": 1.0, "plot": 1.0, "radiology": 1.0})
    assert set(mixed_panels) == {"plot", "radiology"}


@pytest.mark.parametrize(
    "weights, message",
    [({"plots": 2.0}, "not a modality"), ({"plot": -1.0}, ">= 0"), ({"plot": 0.0, "radiology": 0.0}, "weighs 0")],
)
def test_modality_weights_are_checked_against_the_pool(pool, weights, message):
    small = type(pool)({m: pool.refs[m] for m in ("plot", "radiology")}, max_side=256)
    with pytest.raises(ValueError, match=message):
        sample_figure(rng_for(1, "w", 0), small, 256, 256, params=FigureParams(modality_weights=tuple(weights.items())))


def test_modality_weights_are_recorded_and_kept_apart_in_merges(tmp_path):
    from pmcflow.config import ConfigError
    from pmcflow.synth.render import cli

    base = ["--n", "4", "--seed", "3", "--size", "128x96", "--num-shards", "2"]
    assert cli([*base, "--shard", "0", "--out", str(tmp_path / "a"), "--modality-weight", "plot=5"]) == 0
    assert cli([*base, "--shard", "1", "--out", str(tmp_path / "b")]) == 0
    info = json.loads((tmp_path / "a/annotations.json").read_text())["info"]
    assert info["modality_weights"] == {"plot": 5.0}
    assert "modality_weights" not in json.loads((tmp_path / "b/annotations.json").read_text())["info"]
    with pytest.raises(ValueError, match="different settings"):
        merge_shards([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    with pytest.raises(ConfigError, match="modality_weights"):
        cli([*base, "--out", str(tmp_path / "c"), "--modality-weight", "plot=-2"])
