"""The printed panel-letter reader: candidates, zones, shipped weights, reading on compositor figures."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("scipy")
pytest.importorskip("torch")

from pmcflow import schema as S  # noqa: E402
from pmcflow import tables as T  # noqa: E402
from pmcflow.decompose.labelreader import (  # noqa: E402
    CLASSES,
    META,
    SHIPPED_DIR,
    WEIGHTS,
    Candidate,
    LabelReader,
    glyph_candidates,
    zone_owner,
)
from pmcflow.decompose.settings import DecomposeSettings  # noqa: E402
from pmcflow.decompose.stage import decompose_chunk  # noqa: E402
from pmcflow.decompose.train_labelreader import char_boxes  # noqa: E402
from pmcflow.detect.evaluate import iou_matrix  # noqa: E402
from pmcflow.seeding import rng_for  # noqa: E402
from pmcflow.synth.compose import compose, sample_figure  # noqa: E402
from pmcflow.synth.sources import builtin_pool  # noqa: E402


@pytest.fixture(scope="module")
def pool():
    p = builtin_pool(max_side=256)
    p.validate_all()
    return p


@pytest.fixture(scope="module")
def reader():
    r = LabelReader.shipped()
    assert r is not None, "the package must ship the label reader weights"
    return r


def _figure(pool, i: int, labels: list[str], size=(480, 400)):
    spec, panels = sample_figure(rng_for(5, "test-labels", i), pool, *size, n_panels=len(labels), labels=labels)
    im, anns = compose(spec, panels)
    return spec, im, anns


def test_shipped_weights_are_small_and_documented():
    w = SHIPPED_DIR / WEIGHTS
    assert w.is_file() and w.stat().st_size < 2 * 1024 * 1024
    meta = json.loads((SHIPPED_DIR / META).read_text())
    assert meta["classes"] == list(CLASSES) and meta["seed"] and meta["command"].startswith("python -m")
    card = (SHIPPED_DIR / "MODEL_CARD.md").read_text()
    assert "train_labelreader" in card and "accuracy" in card.lower()


def test_candidates_cover_the_printed_letters(pool):
    hit = total = 0
    for i in range(6):
        spec, im, _ = _figure(pool, i, ["A", "B", "C", "D"])
        cands, inputs = glyph_candidates(im)
        assert inputs.shape == (len(cands), 2, 32, 32) and inputs.dtype == np.float32
        cb = np.asarray([[c.x, c.y, c.w, c.h] for c in cands], dtype=float).reshape(-1, 4)
        for p in spec.panels:
            (_, box), = char_boxes(p.label.font, p.label.size, p.label.text, p.label.x, p.label.y)
            total += 1
            hit += int(len(cb) > 0 and iou_matrix(np.asarray([box]), cb).max() >= 0.5)
    assert hit / total >= 0.85


def test_zone_owner():
    boxes = [(100, 100, 200, 200), (320, 100, 200, 200)]
    assert zone_owner(Candidate(104, 104, 10, 14, False), boxes) == 0  # inside, top-left corner
    assert zone_owner(Candidate(500, 280, 10, 14, False), boxes) == 1  # inside, bottom-right corner
    assert zone_owner(Candidate(190, 190, 10, 14, False), boxes) is None  # panel centre
    assert zone_owner(Candidate(100, 80, 10, 14, False), boxes) == 0  # just above the top-left corner
    assert zone_owner(Candidate(306, 100, 10, 14, False), boxes) == 1  # in the gutter, left of box 1
    assert zone_owner(Candidate(10, 10, 10, 14, False), boxes) is None


def test_reader_reads_letters_on_compositor_figures(pool, reader):
    rng = np.random.default_rng(3)
    read = correct = total = 0
    for i in range(8):
        letters = [chr(c) for c in sorted(rng.choice(np.arange(ord("A"), ord("Z") + 1), 4, replace=False))]
        if i % 2:
            letters = [c.lower() for c in letters]
        _, im, anns = _figure(pool, 100 + i, letters)
        got = reader.read(im, [a["bbox"] for a in anns])
        total += len(anns)
        read += len(got)
        correct += sum(got[k][0] == anns[k]["label"].lower() for k in got)
        assert all(0.0 <= p <= 1.0 for _, p in got.values())
    assert read / total >= 0.6
    assert correct / max(1, read) >= 0.9


def test_stage_uses_printed_letters_when_counts_disagree(tmp_path, pool, reader):
    """The caption names 3 letters but the figure has 4 panels: only reading can label them."""
    rows = []
    for i in range(4):
        _, im, _ = _figure(pool, 200 + i, ["A", "B", "C", "D"])
        p = tmp_path / f"f{i}.png"
        im.save(p)
        rows.append(
            {
                "figure_uid": f"PMC1.1/f{i}", "article_uid": "PMC1.1", "pmcid": "PMC1", "version": 1,
                "chunk": "c0", "figure_id": f"f{i}", "caption": "(A) Cells. (B) Tissue. (C) Organ.",
                "graphics": [p.stem], "graphic_paths": [str(p)],
            }
        )
    figs = tmp_path / "figures.parquet"
    T.write_table(rows, S.FIGURES, figs)
    cfg = {"decompose": {"backend": "xycut", "checkpoint": None}}
    rec = decompose_chunk(DecomposeSettings.from_config(cfg), "c0", str(figs), str(tmp_path / "on"))
    on = T.read_rows(tmp_path / "on" / "subfigures.parquet")
    assert rec["extra"]["label_reader_sha256"] == reader.sha256
    detected = [r for r in on if r["label_source"] == "detected-label"]
    assert detected and all(r["panel_label"] in {"a", "b", "c"} for r in detected)
    # no letter read at all (the letter merge reads them too: in figure 3 the reader misses "C", the
    # run a, b, d merges C's box into a neighbour, and 3 boxes meet the caption's 3 letters)
    off = {**cfg["decompose"], "label_reading": False, "letter_merge": False}
    decompose_chunk(DecomposeSettings.from_section(off), "c0", str(figs), str(tmp_path / "off"))
    assert all(r["panel_label"] is None for r in T.read_rows(tmp_path / "off" / "subfigures.parquet") if not r["is_single_panel"])


def test_reader_is_deterministic(pool, reader):
    _, im, anns = _figure(pool, 300, ["a", "b"])
    boxes = [a["bbox"] for a in anns]
    assert reader.read(im, boxes) == reader.read(im, boxes)
    assert reader.read(im, []) == {}


# ------------------------------------------------------------------------------------------------
# Captions that label panels by place ("Left: ...", "(Top) ...")
# ------------------------------------------------------------------------------------------------
def test_caption_positions_only_for_place_labelled_captions():
    from pmcflow.enrich.rules import caption_positions

    assert caption_positions("Survival. (Left) Kaplan-Meier curves. (Right) Hazard ratios.") == ["left", "right"]
    assert caption_positions("Staining. Top: control embryos. Bottom: knockdown embryos.") == ["top", "bottom"]
    assert caption_positions("Effects. (A) Control. (B) Treated.") == []
    assert caption_positions("One plot of everything.") == []


def test_boxes_get_the_place_they_sit_in():
    from pmcflow.decompose.order import assign_positions

    W, H = 400, 200
    halves = [(10, 10, 150, 80), (10, 110, 150, 80), (220, 10, 150, 80), (220, 110, 150, 80)]
    assert assign_positions(halves, W, H, ["left", "right"]) == ["left", "left", "right", "right"]
    assert assign_positions(halves, W, H, ["top", "bottom"]) == ["top", "bottom", "top", "bottom"]
    quads = ["top left", "bottom left", "top right", "bottom right"]
    assert assign_positions(halves, W, H, ["top left", "top right", "bottom left", "bottom right"]) == quads
    thirds = [(5, 10, 120, 180), (140, 10, 120, 180), (275, 10, 120, 180)]
    assert assign_positions(thirds, W, H, ["left", "middle", "right"]) == ["left", "middle", "right"]


def test_places_that_do_not_match_up_are_not_guessed():
    from pmcflow.decompose.order import assign_positions

    W, H = 400, 200
    # a box on the midline belongs to neither half
    assert assign_positions([(10, 10, 150, 80), (120, 10, 160, 80)], W, H, ["left", "right"]) == [None, None]
    # a place no box sits in: the caption describes panels the detector did not find
    assert assign_positions([(10, 10, 150, 80), (20, 110, 150, 80)], W, H, ["left", "right"]) == [None, None]
    # "middle" with places on both axes is ambiguous
    assert assign_positions([(10, 10, 100, 80)], W, H, ["top", "left", "middle"]) == [None]


def test_plan_gives_place_labels_only_without_caption_letters():
    from PIL import Image

    from pmcflow.decompose.stage import plan_subfigures
    from pmcflow.detect.base import Box

    im = Image.new("RGB", (400, 200), "white")
    boxes = [Box(10, 10, 150, 180, 0.9), Box(220, 10, 150, 180, 0.9)]
    dcfg = DecomposeSettings.from_section({"min_box_px": 16, "single_panel_cover": 0.5})
    planned = plan_subfigures(im, boxes, dcfg, None, [], ["left", "right"])
    assert [(p.label, p.source) for p in planned] == [("left", "caption-position"), ("right", "caption-position")]
    lettered = plan_subfigures(im, boxes, dcfg, None, ["a", "b"], ["left", "right"])
    assert [(p.label, p.source) for p in lettered] == [("a", "reading-order"), ("b", "reading-order")]
