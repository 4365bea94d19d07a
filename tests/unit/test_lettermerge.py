"""Letter-aware merging (pmcflow.decompose.lettermerge): a panel is what its letter names."""

from __future__ import annotations

from pmcflow.decompose.lettermerge import letter_boxes, merge_by_letters
from pmcflow.detect.base import Box


def test_one_box_per_letter_of_the_run_from_a_or_of_the_caption() -> None:
    read = {0: ("a", 0.95), 1: ("b", 0.99), 2: ("p", 0.97), 3: ("b", 0.92), 4: ("d", 0.99)}
    # no caption: the run a, b, d read from "a" (c went unread; the stray p lies far past d);
    # of the two boxes read as "b" the more probable one
    assert letter_boxes(read) == {0: "a", 1: "b", 4: "d"}
    # up to two letters in a row may go unread (a, b, e, h: c, d, f, g missed); three end the run
    gaps = {0: ("a", 0.99), 1: ("b", 0.99), 2: ("e", 0.99), 3: ("h", 0.99), 4: ("l", 0.99)}
    assert letter_boxes(gaps) == {0: "a", 1: "b", 2: "e", 3: "h"}
    # the caption names A-D: every one of them that was read, in any case, besides the run
    read = {0: ("a", 0.95), 1: ("b", 0.99), 2: ("p", 0.97), 3: ("f", 0.92), 4: ("g", 0.99)}
    assert letter_boxes(read) == {0: "a", 1: "b"}
    assert letter_boxes(read, ["A", "B", "C", "G"]) == {0: "a", 1: "b", 4: "g"}
    # a caption naming fewer panels than the figure prints does not cut the run
    assert letter_boxes({0: ("a", 0.99), 1: ("b", 0.99), 2: ("c", 0.99)}, ["a", "b"]) == {0: "a", 1: "b", 2: "c"}
    # fewer than two panel letters: nothing to merge by
    assert letter_boxes({0: ("a", 0.99)}) == {}
    assert letter_boxes({0: ("b", 0.99), 1: ("c", 0.99)}) == {}
    assert letter_boxes({0: ("d", 0.99), 1: ("e", 0.99)}, ["x", "y"]) == {}


def test_fragments_join_their_lettered_panel_and_never_swallow_another() -> None:
    boxes = [
        Box(0, 0, 40, 40, 0.9),  # A's lettered field: a grid whose fields were boxed one by one
        Box(45, 45, 40, 40, 0.5),  # A's diagonal field: joins once its neighbours have
        Box(45, 0, 40, 40, 0.6),  # A's other field in the first row
        Box(0, 45, 40, 40, 0.7),  # and in the second
        Box(110, 0, 60, 85, 0.8),  # B, right
        Box(400, 400, 20, 20, 0.3),  # far from both: mostly new area either way, it stays
    ]
    out = merge_by_letters(boxes, {0: "a", 4: "b"}, max_overlap=0.1)
    assert [(b.x, b.y, b.w, b.h, b.score) for b in out] == [
        (0, 0, 85, 85, 0.9),
        (110, 0, 60, 85, 0.8),
        (400, 400, 20, 20, 0.3),
    ]


def test_a_box_that_would_cover_another_panel_stays_and_no_letters_change_nothing() -> None:
    boxes = [Box(0, 0, 40, 40), Box(100, 0, 40, 40), Box(45, 0, 50, 40, 0.4)]  # A, B, and between
    # joining the middle box to A would cover half of... nothing; to B neither: it joins A (less growth)
    assert len(merge_by_letters(boxes, {0: "a", 1: "b"}, 0.1)) == 2
    # a middle box under both panels: any union covers the other panel, so it stays
    under = [Box(0, 0, 40, 40), Box(100, 0, 40, 40), Box(0, 50, 140, 30)]
    assert merge_by_letters(under, {0: "a", 1: "b"}, 0.1) == under
    assert merge_by_letters(boxes, {}, 0.1) == boxes
    assert merge_by_letters(boxes, {0: "a"}, 0.1) == boxes
