"""Decompose stage: compositor figures -> xycut -> subfigure rows, crops, labels, rejections, counts."""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.config import ConfigError
from pmcflow.decompose import stage as stage_mod
from pmcflow.decompose.cli import cli
from pmcflow.decompose.order import assign_labels, reading_order
from pmcflow.decompose.settings import DecomposeSettings
from pmcflow.decompose.stage import clip_boxes, decompose_chunk, is_single_panel, plan_subfigures
from pmcflow.detect.base import Box
from pmcflow.detect.evaluate import iou_matrix
from pmcflow.seeding import rng_for
from pmcflow.synth.compose import compose, sample_figure
from pmcflow.synth.sources import builtin_pool

settings = DecomposeSettings.from_config  # a config's decompose section, typed
CFG = {"decompose": {"backend": "xycut", "checkpoint": None, "label_reading": False}}
LETTERS = "ABCDEFGH"


@pytest.fixture(scope="module")
def pool():
    p = builtin_pool(max_side=256)
    p.validate_all()
    return p


def _figure(pool, i: int, n: int, size: tuple[int, int] = (420, 360)):
    """A compositor figure with ``n`` panels labelled A, B, ... (the caption's letters)."""
    labels = list(LETTERS[:n]) if n > 1 else []
    spec, panels = sample_figure(rng_for(11, "test-decompose", i), pool, *size, n_panels=n, labels=labels)
    im, anns = compose(spec, panels)
    caption = " ".join(f"({c}) panel {c.lower()}." for c in labels) or "A single image."
    return im, anns, caption


def _png(im: Image.Image) -> bytes:
    b = io.BytesIO()
    im.save(b, "PNG")
    return b.getvalue()


def _row(uid: str, paths: list[str], caption: str = "") -> dict:
    return {
        "figure_uid": f"PMC1.1/{uid}",
        "article_uid": "PMC1.1",
        "pmcid": "PMC1",
        "version": 1,
        "chunk": "c0",
        "figure_id": uid,
        "caption": caption,
        "graphics": [Path(p).stem for p in paths],
        "graphic_paths": paths,
    }


@pytest.fixture(scope="module")
def chunk(tmp_path_factory, pool):
    """A FIGURES table: 6 compound figures, 1 single panel, a 2-graphic figure and bad files."""
    d = tmp_path_factory.mktemp("figs")
    rows, truth = [], {}
    for i, n in enumerate((2, 3, 4, 4, 6, 2)):
        im, anns, caption = _figure(pool, i, n)
        p = d / f"f{i}.png"
        p.write_bytes(_png(im))
        rows.append(_row(f"f{i}", [str(p)], caption))
        truth[f"f{i}"] = anns
    im, anns, _ = _figure(pool, 50, 1)
    (d / "single.png").write_bytes(_png(im))
    rows.append(_row("single", [str(d / "single.png")], "An X-ray."))
    # two graphics in one figure: a compound one and a JPEG copy of another
    im2, anns2, cap2 = _figure(pool, 60, 3)
    im2.save(d / "two-b.jpg", "JPEG", quality=92)
    rows.append(_row("two", [str(d / "f0.png"), str(d / "two-b.jpg")], cap2))
    truth["two"] = anns2
    # bad inputs
    rng = np.random.default_rng(0)
    (d / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(rng.integers(0, 255, 300, dtype=np.uint8)))
    good = _png(im)
    (d / "trunc.png").write_bytes(good[: len(good) // 2])
    bomb = bytearray(_png(Image.new("L", (1, 1))))
    bomb[16:24] = (30000).to_bytes(4, "big") + (30000).to_bytes(4, "big")
    bomb[29:33] = (zlib.crc32(bytes(bomb[12:29])) & 0xFFFFFFFF).to_bytes(4, "big")
    (d / "bomb.png").write_bytes(bytes(bomb))
    figim, _, _ = _figure(pool, 0, 2)
    figim.convert("CMYK").save(d / "cmyk.jpg", "JPEG", quality=90)
    Image.fromarray(np.asarray(figim.convert("L")).astype(np.uint16) * 200).save(d / "i16.png")
    figim.convert("P", palette=Image.Palette.ADAPTIVE, colors=64).save(d / "pal.png")
    frames = [figim.convert("P"), figim.transpose(Image.Transpose.FLIP_LEFT_RIGHT).convert("P")]
    frames[0].save(d / "anim.gif", save_all=True, append_images=frames[1:], duration=50, loop=0)
    for name in ("corrupt.png", "trunc.png", "bomb.png", "cmyk.jpg", "i16.png", "pal.png", "anim.gif"):
        rows.append(_row(name.replace(".", "_"), [str(d / name)], "(A) Panel a. (B) Panel b."))
    rows.append(_row("missing", [str(d / "nope.png")]))
    rows.append(_row("nographic", []))
    unresolved = _row("unresolved", [])
    unresolved["graphics"] = ["href-not-found"]
    rows.append(unresolved)
    path = d / "figures.parquet"
    T.write_table(rows, S.FIGURES, path)
    return path, truth


@pytest.fixture(scope="module")
def result(chunk, tmp_path_factory):
    path, _ = chunk
    out = tmp_path_factory.mktemp("dec") / "c0"
    rec = decompose_chunk(settings(CFG), "c0", str(path), str(out))
    return out, rec, T.read_rows(out / "subfigures.parquet"), T.read_rows(out / "rejections.parquet")


def test_boxes_match_the_compositor(chunk, result):
    _, truth = chunk
    _, _, rows, _ = result
    ious = []
    for fid, anns in truth.items():
        got = [r for r in rows if r["figure_uid"] == f"PMC1.1/{fid}" and r["graphic_index"] == (1 if fid == "two" else 0)]
        pred = np.asarray([r["bbox"] for r in got], dtype=float)
        gt = np.asarray([a["bbox"] for a in anns], dtype=float)
        m = iou_matrix(gt, pred)
        ious += list(m.max(axis=1)) if m.size else [0.0] * len(gt)
    ious = np.asarray(ious)
    assert (ious >= 0.8).mean() >= 0.75, ious


def test_rows_crops_and_labels(result):
    out, _, rows, _ = result
    assert rows, "no subfigures"
    for r in rows:
        crop = Path(r["crop_path"])
        assert crop.is_file() and crop.parent.parent == out / "crops"
        with Image.open(crop) as im:
            assert im.format == "PNG" and im.size == (r["crop_width"], r["crop_height"])
        x, y, w, h = r["bbox"]
        assert 0 <= x and 0 <= y and x + w <= r["image_width"] and y + h <= r["image_height"]
        assert (w, h) == (r["crop_width"], r["crop_height"])
        assert r["detector"] == "xycut" and r["detector_checkpoint_sha256"].startswith("weight-free:xycut@")
        assert r["crop_format"] == "png"
        assert crop.name == f"{r['figure_uid'].split('/')[1]}-g{r['graphic_index']}-s{r['subfigure_index']}.png"
    uids = [r["subfigure_uid"] for r in rows]
    assert len(uids) == len(set(uids))
    # caption letters in reading order when the box count matches
    by_fig: dict[str, list[dict]] = {}
    for r in rows:
        by_fig.setdefault(r["figure_uid"], []).append(r)
    labelled = 0
    for fid, rs in by_fig.items():
        rs.sort(key=lambda r: (r["graphic_index"], r["subfigure_index"]))
        if rs[0]["is_single_panel"]:
            continue
        letters = [r["panel_label"] for r in rs if r["graphic_index"] == 0]
        if all(letters):
            labelled += 1
            assert letters == [chr(ord("a") + k) for k in range(len(letters))], fid
            assert {r["label_source"] for r in rs if r["graphic_index"] == 0} == {"reading-order"}
        else:
            assert all(r["panel_label"] is None for r in rs if r["graphic_index"] == 0)
    assert labelled >= 4


def test_single_panel(result):
    _, _, rows, _ = result
    single = [r for r in rows if r["figure_uid"] == "PMC1.1/single"]
    assert len(single) == 1
    r = single[0]
    assert r["is_single_panel"] and r["label_source"] == "single" and r["panel_label"] is None
    assert r["bbox"] == [0.0, 0.0, float(r["image_width"]), float(r["image_height"])]


def test_two_graphics_are_decomposed_separately(result):
    _, _, rows, _ = result
    two = [r for r in rows if r["figure_uid"] == "PMC1.1/two"]
    assert {r["graphic_index"] for r in two} == {0, 1}
    assert any(r["subfigure_uid"].startswith("PMC1.1/two/g1-s") for r in two)
    assert any(r["subfigure_uid"] == "PMC1.1/two/s0" for r in two)


def test_bad_images_and_counts_reconcile(result):
    out, rec, rows, rej = result
    reasons = {r["item_id"]: r["reason"] for r in rej}
    assert reasons["PMC1.1/corrupt_png/g0"] == "unreadable"
    assert reasons["PMC1.1/trunc_png/g0"] == "truncated"
    assert reasons["PMC1.1/bomb_png/g0"] == "too_large"
    assert reasons["PMC1.1/missing/g0"] == "missing"
    assert reasons["PMC1.1/unresolved/g0"] == "missing"
    assert reasons["PMC1.1/nographic"] == "no_graphic"
    # convertible images are decomposed, not rejected
    for name in ("cmyk_jpg", "i16_png", "pal_png", "anim_gif"):
        assert f"PMC1.1/{name}/g0" not in reasons
        assert any(r["figure_uid"] == f"PMC1.1/{name}" for r in rows)
    assert rec["in"] == rec["kept"] + sum(rec["rejected"].values())
    assert rec["in"] == 6 + 1 + 2 + 7 + 1 + 1 + 1
    assert rec["extra"]["n_subfigures"] == len(rows)
    assert rec["extra"]["n_single_panel"] == sum(r["is_single_panel"] for r in rows)
    assert T.read_counts(out / "counts.json") == rec


def test_deterministic(chunk, result, tmp_path):
    path, _ = chunk
    out, _, _, _ = result
    again = tmp_path / "c0"
    decompose_chunk(settings(CFG), "c0", str(path), str(again))
    a = sorted(p.relative_to(out / "crops") for p in (out / "crops").rglob("*.png"))
    b = sorted(p.relative_to(again / "crops") for p in (again / "crops").rglob("*.png"))
    assert a == b
    assert all((out / "crops" / p).read_bytes() == (again / "crops" / p).read_bytes() for p in a)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "crop_path"} for r in rows]  # noqa: E731
    assert strip(T.read_rows(out / "subfigures.parquet")) == strip(T.read_rows(again / "subfigures.parquet"))
    # same output folder twice: identical bytes, no stale crops
    first = (again / "subfigures.parquet").read_bytes()
    decompose_chunk(settings(CFG), "c0", str(path), str(again))
    assert (again / "subfigures.parquet").read_bytes() == first
    assert not [p for p in again.iterdir() if p.name.startswith(".crops.tmp-")]


def test_empty_chunk(tmp_path):
    figs = tmp_path / "figures.parquet"
    T.write_table([], S.FIGURES, figs)
    rec = decompose_chunk(settings(CFG), "c9", str(figs), str(tmp_path / "out"))
    assert rec["in"] == rec["kept"] == 0 and rec["rejected"] == {}
    assert T.read_rows(tmp_path / "out" / "subfigures.parquet") == []
    assert T.read_table(tmp_path / "out" / "subfigures.parquet").schema.names == S.SUBFIGURES.names
    assert (tmp_path / "out" / "crops").is_dir()


def test_jpeg_crops_when_configured(chunk, tmp_path):
    path, _ = chunk
    cfg = {"decompose": {**CFG["decompose"], "crop_format": "source", "jpeg_quality": 90}}
    decompose_chunk(settings(cfg), "c0", str(path), str(tmp_path / "o"))
    rows = T.read_rows(tmp_path / "o" / "subfigures.parquet")
    jpg = [r for r in rows if r["image_path"].endswith(".jpg")]
    png = [r for r in rows if r["image_path"].endswith(".png")]
    assert jpg and png
    assert all(r["crop_format"] == "jpeg-q90" and r["crop_path"].endswith(".jpg") for r in jpg)
    assert all(r["crop_format"] == "png" for r in png)


class _FakeDetector:
    """Returns fixed boxes, some outside the image, one degenerate; raises on 1-pixel-wide images."""

    name = "fake"
    params: dict = {}

    def predict(self, images, score_threshold=0.2, nms_iou=0.2, batch_size=8):
        out = []
        for im in images:
            if im.width == 33:
                raise RuntimeError("boom")
            w, h = im.size
            out.append(
                [
                    Box(-20, -10, w / 2 + 20, h + 30, 0.9),  # spills out left, top and bottom
                    Box(w / 2, 0, w, h, 0.8),  # spills out right
                    Box(5, 5, 3, 40, 0.7),  # thinner than min_box_px
                    Box(float("nan"), 0, 10, 10, 0.6),
                ]
            )
        return out


def test_boxes_outside_clipped_and_detector_errors_isolated(tmp_path, monkeypatch):
    monkeypatch.setattr(stage_mod, "get_detector", lambda name, checkpoint=None, **kw: _FakeDetector())
    d = tmp_path / "imgs"
    d.mkdir()
    Image.new("RGB", (200, 100), (250, 250, 250)).save(d / "a.png")
    Image.new("RGB", (33, 100), (250, 250, 250)).save(d / "boom.png")
    figs = tmp_path / "figures.parquet"
    T.write_table([_row("a", [str(d / "a.png")]), _row("boom", [str(d / "boom.png")])], S.FIGURES, figs)
    rec = decompose_chunk(settings(CFG), "c0", str(figs), str(tmp_path / "out"))
    rows = T.read_rows(tmp_path / "out" / "subfigures.parquet")
    assert [r["bbox"] for r in rows] == [[0.0, 0.0, 100.0, 100.0], [100.0, 0.0, 100.0, 100.0]]
    assert rec["rejected"] == {"detector_error": 1} and rec["kept"] == 1


def test_clip_and_single_panel_helpers():
    kept = clip_boxes([Box(-5.5, 2.2, 50, 50, 0.5), Box(10, 10, 0, 5, 0.9), Box(0, 0, 100, 100, 0.3)], 60, 40, 4)
    assert kept == [(0, 2, 45, 38, 0.5), (0, 0, 60, 40, 0.3)]
    assert is_single_panel([], 10, 10, 0.8)
    assert is_single_panel([(0, 0, 9, 9, 1.0)], 10, 10, 0.8)
    assert not is_single_panel([(0, 0, 5, 5, 1.0)], 10, 10, 0.8)
    dcfg = settings({"decompose": {"min_box_px": 4}})
    plan = plan_subfigures(Image.new("RGB", (100, 80)), [Box(0, 0, 30, 30, 0.9)], dcfg)
    assert len(plan) == 1 and not plan[0].single and plan[0].label is None


def test_settings_defaults_and_overrides():
    s = settings({})
    assert s.score_threshold is None and s.nms_iou == 0.2 and s.crop_format == "png"
    assert settings({"decompose": {"nms_iou": 0.5}}).nms_iou == 0.5


def test_the_score_threshold_travels_with_the_checkpoint(tmp_path):
    """null in the config: the checkpoint's own threshold (the shipped model's detector.json, a
    trained run's train.json next to its weights); a configured value wins; xycut has none."""
    import json

    from pmcflow.decompose.stage import build_detector
    from pmcflow.detect.default import checkpoint_threshold, resolve_threshold, shipped_model

    info = build_detector(settings({}))
    assert (info.score_threshold, info.threshold_source) == (0.2, "model")  # detector.json
    info = build_detector(settings({"decompose": {"score_threshold": 0.35}}))
    assert (info.score_threshold, info.threshold_source) == (0.35, "config")
    backend, shipped = shipped_model()
    trained = tmp_path / "detector"
    trained.mkdir()
    (trained / shipped.name).write_bytes(shipped.read_bytes())
    assert checkpoint_threshold(backend, trained / shipped.name) is None  # a bare checkpoint
    assert resolve_threshold(None, backend, trained / shipped.name) == (0.2, "default")
    (trained / "train.json").write_text(json.dumps({"backend": backend, "score_threshold": 0.47}))
    cfg = {"decompose": {"backend": backend, "checkpoint": str(trained / shipped.name)}}
    info = build_detector(settings(cfg))
    assert (info.score_threshold, info.threshold_source) == (0.47, "model")
    assert resolve_threshold(None, "xycut", None) == (0.2, "default")


def test_trained_model_folder_names_the_detector(chunk, tmp_path):
    """decompose.checkpoint: trained: the detector stage's folder and its record decide the backend
    and checkpoint (the rule passes the folder; the stage reads its record)."""
    from pmcflow.detect.default import trained_record
    from pmcflow.tables import file_sha256

    path, _ = chunk
    model = tmp_path / "model"
    model.mkdir()
    ckpt = model / "xycut.json"
    ckpt.write_text(json.dumps({"params": {"min_gutter_px": 5}}))
    (model / "train.json").write_text(json.dumps({"backend": "xycut", "checkpoint": str(ckpt)}))
    cfg = {"decompose": {"backend": "ultralytics", "checkpoint": "shipped"}}  # replaced by the record
    decompose_chunk(settings(cfg), "c0", str(path), str(tmp_path / "out"), trained_model=str(model))
    rows = T.read_rows(tmp_path / "out" / "subfigures.parquet")
    assert rows and {(r["detector"].split(":")[0], r["detector_checkpoint_sha256"]) for r in rows} == {
        ("xycut", file_sha256(ckpt))
    }
    (model / "train.json").write_text(json.dumps({"backend": "xycut"}))
    with pytest.raises(ValueError, match="no backend or checkpoint"):
        trained_record(model)


# ------------------------------------------------------------------------------- reading order


def test_reading_order_rows_then_columns():
    # 2 rows x 3 columns, shuffled, with jitter in y and unequal heights
    grid = [(x * 100 + 3, y * 120 + (7 if x == 1 else 0), 90, 100 + 10 * x) for y in range(2) for x in range(3)]
    perm = [4, 0, 5, 2, 1, 3]
    boxes = [grid[p] for p in perm]
    assert [perm[i] for i in reading_order(boxes)] == [0, 1, 2, 3, 4, 5]
    # a tall panel on the left spanning two rows on the right: tall first, then the right column
    boxes = [(0, 0, 100, 200), (110, 0, 100, 95), (110, 105, 100, 95)]
    assert reading_order(boxes) == [0, 1, 2]
    assert reading_order([]) == []


def test_assign_labels_rules():
    order = [0, 1, 2]
    # caption letters in reading order when the count matches
    got = assign_labels(3, order, None, ["A", "B", "C"])
    assert [(a.label, a.source) for a in got] == [("a", "reading-order"), ("b", "reading-order"), ("c", "reading-order")]
    # count mismatch: no letters, index only
    assert [a.label for a in assign_labels(3, order, None, ["A", "B"])] == [None, None, None]
    assert [a.label for a in assign_labels(3, order, None, [])] == [None, None, None]
    # printed letters win; the rest filled from the caption when consistent
    got = assign_labels(3, order, {0: ("A", 0.99)}, ["a", "b", "c"])
    assert [(a.label, a.source) for a in got] == [("a", "detected-label"), ("b", "reading-order"), ("c", "reading-order")]
    # printed letters disagree with reading order (column-major labelling): no caption fill
    got = assign_labels(3, order, {0: ("a", 0.99), 1: ("c", 0.95)}, ["a", "b", "c"])
    assert [(a.label, a.source) for a in got] == [("a", "detected-label"), ("c", "detected-label"), (None, "reading-order")]
    # duplicated reading dropped on both boxes; letter not in caption dropped
    got = assign_labels(3, order, {0: ("b", 0.99), 1: ("b", 0.95), 2: ("z", 0.99)}, ["a", "b", "c"])
    assert all(a.source == "reading-order" for a in got)
    assert [a.label for a in got] == ["a", "b", "c"]


# ------------------------------------------------------------------------------------------- CLI


def test_cli(tmp_path, pool):
    im, _, _ = _figure(pool, 3, 4)
    img = tmp_path / "fig.png"
    im.save(img)
    (tmp_path / "bad.png").write_bytes(b"not an image")
    out = tmp_path / "out"
    rc = cli(
        [str(img), str(tmp_path / "bad.png"), "--out", str(out), "--backend", "xycut", "--checkpoint", "none",
         "--score-threshold", "0.3", "--nms-iou", "0.2", "--no-label-reading"]
    )
    assert rc == 0
    subs = json.loads((out / "subfigures.json").read_text())
    assert len(subs) >= 2 and all(Path(s["crop"]).is_file() for s in subs)
    assert {"image", "bbox", "score", "panel_label", "crop"} <= set(subs[0])
    assert all(s["image"] == str(img) for s in subs)
    bad = json.loads((out / "rejections.json").read_text())
    assert bad == [{"image": str(tmp_path / "bad.png"), "reason": "unreadable", "detail": "not a recognised image format"}]
    assert cli([str(tmp_path / "bad.png"), "--out", str(out), "--backend", "xycut", "--checkpoint", "none", "--strict"]) == 1


def test_cli_starts_from_a_config_and_flags_override_single_keys(tmp_path, pool):
    """`pmcflow decompose --config` reads the file's decompose section; a flag overrides one key and
    an unset flag leaves the config's value (no defaults of the CLI's own)."""
    im, _, _ = _figure(pool, 3, 4)
    img = tmp_path / "fig.png"
    im.save(img)
    conf = tmp_path / "c.yaml"
    conf.write_text(
        "decompose: {backend: xycut, checkpoint: null, label_reading: false, min_box_px: 4000}\n"
    )
    assert cli([str(img), "--out", str(tmp_path / "cfg"), "--config", str(conf)]) == 0
    big = json.loads((tmp_path / "cfg" / "subfigures.json").read_text())
    assert cli([str(img), "--out", str(tmp_path / "flag"), "--config", str(conf), "--min-box-px", "4"]) == 0
    small = json.loads((tmp_path / "flag" / "subfigures.json").read_text())
    # min_box_px 4000 drops every detected box (the whole image stays one panel); the flag restores them
    assert len(big) == 1 and len(small) >= 2
    assert {s["detector"] for s in small} == {"xycut"}  # the config's backend, not a CLI default
    conf.write_text("decompose: {backend: xycut, crop_format: gif}\n")
    with pytest.raises(ConfigError, match=r"decompose\.crop_format"):
        cli([str(img), "--out", str(tmp_path / "x"), "--config", str(conf)])
    with pytest.raises(ConfigError, match="--set expects KEY=VALUE"):
        cli([str(img), "--out", str(tmp_path / "x"), "--backend", "xycut", "--set", "bad"])


# ------------------------------------------------------------------------------------ evaluation


def test_demo_evaluation_small():
    from pmcflow.decompose.evaluate import evaluate_decomposition, load_demo

    repo = Path(__file__).resolve().parents[2]
    figs = load_demo(repo / "demo/corpus/figures.jsonl", repo / "demo/corpus")
    assert len(figs) >= 100 and all(f.image.is_file() for f in figs)
    sub = [f for f in figs if len(f.boxes) > 1][:3]
    res = evaluate_decomposition(CFG, sub)
    assert res["n_images"] == 3 and res["detection_raw"]["n_gt"] == sum(len(f.boxes) for f in sub)
    oracle = res["labels_oracle_boxes"]["order-only"]
    # ground-truth boxes + caption letters in reading order: the compositor labels in reading order
    assert oracle["matched"] == oracle["n_gt_labels"] and oracle["correct"] == oracle["n_gt_labels"]
    assert res["labels"]["reader-only"]["labelled"] == 0  # label reading is off in CFG


def test_assign_labels_inherits_the_panel_letter_for_over_split_boxes() -> None:
    # a blot and its chart under one printed "A": the unlettered box after "A" in reading order
    order = [0, 1, 2]
    got = assign_labels(3, order, {0: ("A", 0.99), 2: ("B", 0.97)}, ["a", "b"])
    assert [(a.label, a.source) for a in got] == [("a", "detected-label"), ("a", "inherited"), ("b", "detected-label")]
    # a gap of as many boxes as missing caption letters is filled in order: "A ? C" -> B
    got = assign_labels(3, order, {0: ("A", 0.99), 2: ("C", 0.97)}, ["a", "b", "c", "d"])
    assert (got[1].label, got[1].source) == ("b", "reading-order")
    # a caption panel not on any box and a gap that does not fit: nothing is guessed or inherited
    got = assign_labels(4, [0, 1, 2, 3], {0: ("A", 0.99), 3: ("C", 0.97)}, ["a", "b", "c", "d"])
    assert [a.label for a in got] == ["a", None, None, "c"]
    # boxes before the first lettered box, when every caption panel is on a box: a part split off
    # the first panel (its axis title, its legend), which takes its letter
    got = assign_labels(3, order, {1: ("A", 0.99), 2: ("B", 0.97)}, ["a", "b"])
    assert (got[0].label, got[0].source) == ("a", "inherited")
    # ... but not when a caption panel is on no box: the leading box may be that panel
    got = assign_labels(3, order, {1: ("A", 0.99), 2: ("B", 0.97)}, ["a", "b", "c", "d"])
    assert [a.label for a in got] == [None, "a", "b"]
