"""Letter-aware merging (pmcflow.decompose.lettermerge): a panel is what its letter names."""

from __future__ import annotations

from pmcflow.decompose.lettermerge import fill_unread, letter_boxes, merge_by_letters, merge_with_reader
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


def test_the_letters_the_run_skipped_go_to_the_boxes_where_they_stand_in_reading_order() -> None:
    # a row of four panels and a second row of two: a . c d / . f, read a, c, d, f
    boxes = [Box(0, 0, 40, 40), Box(50, 0, 40, 40), Box(100, 0, 40, 40), Box(150, 0, 40, 40),
             Box(0, 50, 90, 40), Box(100, 50, 90, 40)]
    letters = {0: "a", 2: "c", 3: "d", 5: "f"}
    assert fill_unread(boxes, letters) == {0: "a", 1: "b", 2: "c", 3: "d", 4: "e", 5: "f"}
    # two boxes where one letter is missing: a fragment among them, which one is unknown
    assert fill_unread(boxes, {0: "a", 3: "c"}) == {0: "a", 3: "c"}
    # no box between, or a letter that is out of reading order: nothing filled
    assert fill_unread(boxes, {0: "a", 1: "c"}) == {0: "a", 1: "c"}
    assert fill_unread(boxes, {0: "c", 2: "a", 5: "e"}) == {0: "c", 2: "a", 5: "e"}
    # several boxes after the last letter (how many panels they make is unknown): nothing filled;
    # one letter: nothing
    assert fill_unread(boxes, {0: "a", 1: "b"}) == {0: "a", 1: "b"}
    assert fill_unread(boxes, {0: "a"}) == {0: "a"}


def test_one_panel_sized_box_after_the_last_letter_is_the_next_panel() -> None:
    # a 2 x 2 grid read a, b, c: the fourth panel's "d" went unread (resonance-sfig1 in
    # demo/real-figures, where the reader saw "o")
    grid = [Box(0, 0, 50, 50), Box(60, 0, 50, 50), Box(0, 60, 50, 50), Box(60, 60, 50, 50)]
    assert fill_unread(grid, {0: "a", 1: "b", 2: "c"}) == {0: "a", 1: "b", 2: "c", 3: "d"}
    # with the fill between: a, one box (b), c, then the lone last box (d)
    assert fill_unread(grid, {0: "a", 2: "c"}) == {0: "a", 1: "b", 2: "c", 3: "d"}
    # a small box after the last letter is a fragment of the last panel (under half the median
    # lettered area): not a panel
    small = [*grid[:3], Box(60, 60, 20, 20)]
    assert fill_unread(small, {0: "a", 1: "b", 2: "c"}) == {0: "a", 1: "b", 2: "c"}
    # the next letter already on another box (a caption letter): nothing
    assert fill_unread(grid, {0: "a", 1: "b", 2: "c", 3: "d"}) == {0: "a", 1: "b", 2: "c", 3: "d"}
    # and the merge keeps that panel instead of joining it to C
    reader = _Reader({(0, 0): "a", (60, 0): "b", (0, 60): "c"})
    assert merge_with_reader(reader, None, grid, None, 0.1) == grid


class _Reader:
    """A label reader that reads what it is told, one letter per box position."""

    def __init__(self, letters: dict[tuple[float, float], str]) -> None:
        self.letters = letters

    def read(self, image: object, boxes: list[list[float]]) -> dict[int, tuple[str, float]]:
        return {i: (self.letters[(b[0], b[1])], 0.99) for i, b in enumerate(boxes) if (b[0], b[1]) in self.letters}


def test_a_panel_whose_letter_went_unread_is_not_merged_into_its_neighbour() -> None:
    # A | B | C in a row, B's letter unread: B stays a panel (before, it joined A or C)
    boxes = [Box(0, 0, 40, 40, 0.9), Box(45, 0, 40, 40, 0.8), Box(90, 0, 40, 40, 0.7)]
    reader = _Reader({(0, 0): "a", (90, 0): "c"})
    assert merge_with_reader(reader, None, boxes, None, 0.1) == boxes
    # a fragment beside A and B's letter read: the fragment still joins its panel
    frag = [Box(0, 0, 40, 40, 0.9), Box(0, 45, 40, 20, 0.5), Box(90, 0, 40, 65, 0.7)]
    reader = _Reader({(0, 0): "a", (90, 0): "b"})
    assert [(b.x, b.y, b.w, b.h) for b in merge_with_reader(reader, None, frag, None, 0.1)] == [
        (0, 0, 40, 65),
        (90, 0, 40, 65),
    ]
