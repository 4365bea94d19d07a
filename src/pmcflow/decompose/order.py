"""Reading order of subfigure boxes and the assignment of panel letters to them.

Reading order follows MedICaT's alignment heuristic (seed 004 §8): rows first, then columns.
MedICaT puts two boxes in the same row when their top edges differ by < 50 px; that constant
depends on the image size, so here a box joins a row when it overlaps the row's vertical span by
at least half of the smaller height (scale-free, and robust to panels of unequal height).

Letters come from two sources, in this order of trust:

1. ``detected-label``: the letter printed on the panel, read by :mod:`pmcflow.decompose.labelreader`
   and accepted per figure only when unique (see :func:`assign_labels`);
2. ``reading-order``: the caption's panel letters (``a``, ``b``, ... parsed from the caption) given
   to the boxes in reading order, used only when the number of letters equals the number of boxes
   (and agrees with every printed label that was read).  Otherwise the panel letter stays null and
   ``subfigure_index`` (the reading-order position) is all that is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

BoxXYWH = Sequence[float]

SOURCE_DETECTED = "detected-label"
SOURCE_ORDER = "reading-order"
SOURCE_INHERITED = "inherited"  # an unlettered box after a lettered one, in reading order: same panel
SOURCE_SINGLE = "single"
SOURCE_POSITION = "caption-position"  # the caption names places ("left", "top"): the box's place

# The place words of captions (pmcflow.enrich.rules.POSITION_LABELS) on two axes.
_VERTICAL = {"top": 0, "upper": 0, "middle": 1, "centre": 1, "center": 1, "bottom": 2, "lower": 2}
_HORIZONTAL = {"left": 0, "middle": 1, "centre": 1, "center": 1, "right": 2}


def reading_order(boxes: Sequence[BoxXYWH], row_overlap: float = 0.5) -> list[int]:
    """Indices of ``boxes`` (``x, y, w, h``) in reading order: rows top to bottom, left to right.

    Boxes are visited by vertical centre; a box joins the current row when its vertical overlap
    with the row's span is at least ``row_overlap`` times the smaller of the two heights.
    Ties are broken by index, so the order is deterministic.
    """
    if not boxes:
        return []
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][1] + boxes[i][3] / 2, boxes[i][0], i))
    rows: list[list[int]] = []
    spans: list[tuple[float, float]] = []
    for i in order:
        y0, y1 = float(boxes[i][1]), float(boxes[i][1] + boxes[i][3])
        placed = False
        for r, (a, b) in enumerate(spans):
            overlap = min(b, y1) - max(a, y0)
            if overlap >= row_overlap * min(b - a, y1 - y0) and overlap > 0:
                rows[r].append(i)
                spans[r] = (min(a, y0), max(b, y1))
                placed = True
                break
        if not placed:
            rows.append([i])
            spans.append((y0, y1))
    ranked = sorted(range(len(rows)), key=lambda r: (spans[r][0], r))
    out: list[int] = []
    for r in ranked:
        out.extend(sorted(rows[r], key=lambda i: (boxes[i][0], boxes[i][1], i)))
    return out


@dataclass(frozen=True)
class LabelAssignment:
    """The letter of one box (lower case, or None) and where it came from."""

    label: str | None
    source: str


def fill_between(order: Sequence[int], labels: Mapping[int, str], alphabet: Sequence[str]) -> dict[int, str]:
    """Letters for the unlettered boxes: each run of boxes without a label in ``labels``, between
    two lettered boxes in ``order`` (or before the first, or after the last), gets the letters of
    ``alphabet`` missing between its neighbours' letters, when there are exactly as many of them.
    A lettered box whose letter is not in ``alphabet`` stops the filling; a run whose neighbours are
    out of alphabet order gets nothing.  Returns ``{box: letter}`` for the boxes filled."""
    rank = {c: k for k, c in enumerate(alphabet)}
    used = set(labels.values())
    filled: dict[int, str] = {}
    run: list[int] = []
    lo = -1  # rank of the last lettered box passed (-1: none yet)
    for i in [*order, None]:
        label = labels.get(i) if i is not None else None
        if i is not None and label is None:
            run.append(i)
            continue
        if label is not None and label not in rank:
            run, lo = [], len(alphabet)  # a letter outside the alphabet: stop filling
            continue
        hi = rank[label] if label is not None else len(alphabet)
        if run and hi > lo:
            missing = [c for c in alphabet[lo + 1 : hi] if c not in used]
            if len(missing) == len(run):
                filled.update(zip(run, missing, strict=True))
                used.update(missing)
        run, lo = [], max(lo, hi)
    return filled


def _fill_runs(out: list[LabelAssignment], order: Sequence[int], caption: Sequence[str]) -> None:
    """Give runs of unlettered boxes the caption letters missing between their lettered neighbours."""
    labels = {i: a.label for i, a in enumerate(out) if a.label is not None}
    for box, letter in fill_between(order, labels, caption).items():
        out[box] = LabelAssignment(letter, SOURCE_ORDER)


def _place(label: str, axes: set[str]) -> tuple[int | None, int | None] | None:
    """``(row, column)`` a place label asks for (None: any), or None when it is not a place."""
    words = label.replace("-", " ").split()
    if len(words) == 2 and words[0] in _VERTICAL and words[1] in _HORIZONTAL:
        return _VERTICAL[words[0]], _HORIZONTAL[words[1]]
    if len(words) != 1:
        return None
    w = words[0]
    if w in ("middle", "centre", "center"):  # the axis the caption's other places use
        if axes == {"h"}:
            return None, 1
        if axes == {"v"}:
            return 1, None
        return None
    if w in _VERTICAL:
        return _VERTICAL[w], None
    if w in _HORIZONTAL:
        return None, _HORIZONTAL[w]
    return None


def _band(centre: float, size: float, bands: int, margin: float = 0.04) -> int | None:
    """Which of ``bands`` equal bands (2: halves at 0/2, 3: thirds) ``centre`` falls in; None
    within ``margin`` of a border (a box on the line between two places belongs to neither)."""
    f = centre / size if size > 0 else 0.5
    cuts = [k / bands for k in range(1, bands)]
    if any(abs(f - c) < margin for c in cuts):
        return None
    k = sum(f > c for c in cuts)
    return k if bands == 3 else 2 * k  # halves map to the ends: 0 (top/left) and 2 (bottom/right)


def assign_positions(
    boxes: Sequence[BoxXYWH], width: float, height: float, places: Sequence[str]
) -> list[str | None]:
    """Give each box the caption place it sits in, or ``[None] * len(boxes)`` when that is not
    certain for all of them.

    ``places`` are the caption's place labels (:func:`pmcflow.enrich.rules.caption_positions`):
    "left"/"right" split the image in halves, with "middle" in thirds; "top"/"bottom" likewise
    vertically; "top left" both. A box is placed by its centre and must match exactly one label.
    The assignment is kept only when every box has a place and every place has a box: a caption
    whose places the detected boxes do not fill keeps the full-caption fallback.
    """
    words = {w for p in places for w in p.replace("-", " ").split()}
    axes = {"v" for w in words if w in _VERTICAL and w not in _HORIZONTAL} | {
        "h" for w in words if w in _HORIZONTAL and w not in _VERTICAL
    }
    wanted = {p: _place(p, axes) for p in places}
    none: list[str | None] = [None] * len(boxes)
    if not boxes or not places or any(v is None for v in wanted.values()):
        return none
    rows = 3 if any(v is not None and v[0] == 1 for v in wanted.values()) else 2
    cols = 3 if any(v is not None and v[1] == 1 for v in wanted.values()) else 2
    out: list[str | None] = []
    for x, y, w, h in boxes:
        r = _band(float(y) + float(h) / 2, float(height), rows)
        c = _band(float(x) + float(w) / 2, float(width), cols)
        fits = [
            p
            for p, (pr, pc) in wanted.items()  # type: ignore[misc]
            if (pr is None or pr == r) and (pc is None or pc == c)
        ]
        if len(fits) != 1:
            return none
        out.append(fits[0])
    if set(out) != set(places):
        return none
    return out


def normalise_letters(letters: Sequence[str] | None) -> list[str]:
    """Caption letters as lower-case single letters (anything else dropped)."""
    return [c.lower() for c in (letters or []) if isinstance(c, str) and len(c) == 1 and c.isalpha()]


def assign_labels(
    n_boxes: int,
    order: Sequence[int],
    readings: Mapping[int, tuple[str, float]] | None = None,
    caption_letters: Sequence[str] | None = None,
) -> list[LabelAssignment]:
    """Give each of ``n_boxes`` boxes a panel letter.

    ``order`` is :func:`reading_order`'s output; ``readings`` maps a box index to the printed
    letter read on it and its confidence; ``caption_letters`` are the panel letters the caption
    names (``[]``/None when unknown).

    * A printed letter read on two boxes is ambiguous and dropped from both; if the caption names
      letters, a printed letter not among them is dropped too.  The remaining readings are kept
      (``detected-label``).
    * Boxes without an accepted reading get the caption letters in reading order when the caption
      names exactly ``n_boxes`` letters *and* that order agrees with every accepted reading
      (``reading-order``).
    * Gaps: a run of unlettered boxes (in reading order) between two lettered ones, or before the
      first / after the last, gets the caption letters missing in that stretch, in order, when
      there are exactly as many boxes as missing letters (``reading-order``): "A ? C" -> "B".
    * A box still without a letter that follows a lettered box in reading order belongs to that
      box's panel (a chart under its blot, the parts of an over-split panel: a printed letter names
      the region up to the next letter) and takes its letter (``inherited``), but only when no
      panel is missing: every caption letter (or, without caption letters, every letter up to the
      last one assigned) is on some box; otherwise the box may be the missing panel and keeps None
      (``reading-order``, index only). Under the same condition, boxes before the first lettered
      one (an axis title or legend split off the first panel) take the first panel's letter.
    """
    caption = normalise_letters(caption_letters)
    accepted: dict[int, str] = {}
    if readings:
        seen: dict[str, int] = {}
        for letter, _ in readings.values():
            seen[letter.lower()] = seen.get(letter.lower(), 0) + 1
        for i, (letter, _) in readings.items():
            lc = letter.lower()
            if seen[lc] != 1 or (caption and lc not in caption) or not 0 <= i < n_boxes:
                continue
            accepted[i] = lc
    by_order: dict[int, str] = {}
    if caption and len(caption) == n_boxes and len(set(caption)) == n_boxes:
        candidate = {box: caption[k] for k, box in enumerate(order)}
        if all(candidate[i] == lc for i, lc in accepted.items()):
            by_order = candidate
    out: list[LabelAssignment] = []
    for i in range(n_boxes):
        if i in accepted:
            out.append(LabelAssignment(accepted[i], SOURCE_DETECTED))
        else:
            out.append(LabelAssignment(by_order.get(i), SOURCE_ORDER))
    if caption:
        _fill_runs(out, order, caption)
    assigned = {a.label for a in out if a.label is not None}
    if not assigned:
        return out
    single = [x for x in assigned if len(x) == 1 and "a" <= x <= "z"]
    if not caption and len(single) != len(assigned):
        return out
    expected = set(caption) if caption else {chr(c) for c in range(ord("a"), ord(max(single)) + 1)}
    if not expected <= assigned:
        return out
    current: str | None = None
    leading: list[int] = []
    for i in order:
        if out[i].label is not None:
            if current is None:  # boxes before the first lettered one: the start of its panel
                for j in leading:
                    out[j] = LabelAssignment(out[i].label, SOURCE_INHERITED)
            current = out[i].label
        elif current is not None:
            out[i] = LabelAssignment(current, SOURCE_INHERITED)
        else:
            leading.append(i)
    return out
