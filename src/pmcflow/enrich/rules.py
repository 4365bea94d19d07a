"""Rule-based caption splitter: caption -> labelled segments, CPU only, no weights.

How it works
------------
1. **Candidates.** Every place that *could* be a panel label is collected with its style:
   ``(A)`` / ``(A–C)`` / ``(A and B)`` / ``(A, C)`` in parentheses (at a sentence start, or inline
   as in "Axial (A) and coronal (B) …"), ``A)``, ``A.`` / ``A:``, ``A,`` and a bare ``A`` followed
   by a capitalised word — the last four only at a sentence start (after ``.;:!?`` or the start of
   the caption). A label is a single letter, a roman numeral (i–xx) or a 1–2 digit number; ranges
   (``A–C``, ``a to c``) and lists (``A and B``, ``A, C``, ``E. and F.``) are expanded. Position
   words ("Left panel:", "Top:", "Upper panels,") are a last-resort family.
2. **One consistent chain.** Real labels form an increasing sequence in one family (upper-case
   letters, lower-case letters, upper/lower roman, digits) whereas false candidates ("E. coli",
   a back-reference "as in (A)", "(n = 3)" never even matches) break it. A dynamic programme picks
   the chain with the best score: strong styles score more, skipped labels and a start after the
   first label cost, and so does switching style between consecutive markers. Cost is
   O(candidates × alphabet): no quadratic or exponential behaviour on 7,000-token captions.
3. **Segments.** A leading marker starts its segment at the marker; an inline marker starts it at
   the beginning of its sentence, and several labels in one sentence make one joint segment
   ("Axial (A) and coronal (B) CT" -> labels ``["a", "b"]``). Text before the first segment is the
   *lead* (figure title / shared description), returned as a first segment with no labels.
   A marker with no text of its own ("(A) (B) Western blots …") joins the next segment.

Segment texts are verbatim substrings of the whitespace-normalised caption (markers included);
labels are lower-case strings ("a", "ii", "3", "left").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pmcflow.enrich.text import is_abbreviation_stop, normalize_ws

# ---------------------------------------------------------------------------------------------
# Public record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A piece of a caption and the panel labels it describes (empty for the lead / unlabelled)."""

    labels: list[str]
    text: str

    def to_json(self) -> dict[str, object]:
        return {"labels": list(self.labels), "text": self.text}


# ---------------------------------------------------------------------------------------------
# Label grammar
# ---------------------------------------------------------------------------------------------
_SUB_ATOM = r"[A-Za-z](?:\d{1,2}|[′’']{1,2})"  # a sub-panel label: "A1", "b2", "A′"
_ATOM = rf"(?:[A-Za-z]{{1,5}}|\d{{1,2}}|{_SUB_ATOM})(?![A-Za-z0-9'′’])"
_SEP = r"(?:\s*[-–—‐‑−]\s*|\s*,?\s*(?:and|to|&)\s+|\s*,\s*)"
_SEP_DOT = r"(?:\.?\s*[-–—‐‑−]\s*|\.?\s*,?\s*(?:and|to|&)\s+|\.?\s*,\s*)"
_LIST = rf"{_ATOM}(?:{_SEP}{_ATOM}){{0,8}}"
_LIST_DOT = rf"{_ATOM}(?:{_SEP_DOT}{_ATOM}){{0,8}}"
_NO_WORD_BEFORE = r"(?<![\w'’′.\-/])"

_RE_PAREN = re.compile(rf"[(\[]\s*({_LIST})\.?\s*[)\]]")
_RE_OPEN = re.compile(rf"[(\[]\s*({_LIST})(?=\s+[A-Z0-9][a-z0-9])")
_RE_CLOSE = re.compile(rf"{_NO_WORD_BEFORE}(?<![(\[])({_LIST})\)")
_RE_DOT = re.compile(rf"{_NO_WORD_BEFORE}({_LIST_DOT})\s?[.:](?![\w.])")
_RE_COMMA = re.compile(rf"{_NO_WORD_BEFORE}({_LIST}),(?=\s)")
_RE_BARE = re.compile(rf"{_NO_WORD_BEFORE}({_LIST})(?=\s+[A-Z0-9(\[])")
_RE_BARE_LC = re.compile(rf"{_NO_WORD_BEFORE}({_LIST})(?=\s+([a-z][a-z-]*))")
# words after a bare upper-case letter that make it a name, not a label ("B cells", "T lymphocytes")
_BARE_STOP_WORDS = frozenset(
    {"cell", "cells", "lymphocyte", "lymphocytes", "chromosome", "chromosomes", "antigen", "antigens",
     "subunit", "subunits", "chain", "chains", "type", "band", "bands", "wave", "waves", "site", "sites",
     "and", "or", "of", "to", "in", "is", "was", "are", "were", "the", "with", "vs", "versus", "total",
     "number", "few", "single", "series", "set", "large", "small", "new", "similar", "positive", "negative"}
)  # fmt: skip
_POSITION_WORDS = r"(?:upper|lower|top|bottom|middle|centre|center|left|right)"
_RE_POSITION = re.compile(
    rf"(?<![\w])({_POSITION_WORDS}(?:[\s-]+{_POSITION_WORDS})?)"
    r"(?:\s+(?:panels?|rows?|columns?|images?|graphs?))?\s*[:,.]\s",
    re.IGNORECASE,
)
_RE_LIST_TOKEN = re.compile(rf"{_SUB_ATOM}(?![A-Za-z0-9])|[A-Za-z]+|\d+|[-–—‐‑−]|[,&]")
_RE_SUB_ATOM = re.compile(_SUB_ATOM)
_RANGE_WORDS = frozenset({"-", "–", "—", "‐", "‑", "−", "to"})
_LIST_WORDS = frozenset({",", "&", "and"})
_SENTENCE_PUNCT = ";:!?。；：！？"

_ROMAN = {
    "i": 1, "ii": 2, "iii": 3, "iv": 4, "v": 5, "vi": 6, "vii": 7, "viii": 8, "ix": 9, "x": 10,
    "xi": 11, "xii": 12, "xiii": 13, "xiv": 14, "xv": 15, "xvi": 16, "xvii": 17, "xviii": 18,
    "xix": 19, "xx": 20,
}  # fmt: skip
_ROMAN_BY_ORD = {v: k for k, v in _ROMAN.items()}
_POSITION_ORDER = {
    "top": 1, "upper": 1, "left": 1, "top left": 1, "upper left": 1, "middle": 2, "centre": 2,
    "center": 2, "top right": 2, "upper right": 2, "right": 3, "bottom": 3, "lower": 3,
    "bottom left": 3, "lower left": 3, "bottom right": 4, "lower right": 4,
}  # fmt: skip
# Labels the position family produces ("left", "top right"): named places, not panel letters.
POSITION_LABELS = frozenset(_POSITION_ORDER)

# Style -> base weight.  "inline" is a parenthesised label inside a sentence.
STYLE_WEIGHT: dict[str, float] = {
    "paren": 3.0,
    "close": 2.5,
    "open": 1.5,
    "dot": 2.5,
    "comma": 2.0,
    "bare": 1.25,
    "bare_lc": 1.0,  # bare label before a lower-case word: "a corresponding view", "A segments IX–X"
    "inline": 1.5,
    "position": 1.0,
}
STRONG_STYLES = frozenset({"paren", "close", "dot"})
FAMILY_PENALTY: dict[str, float] = {
    "upper": 0.0,
    "lower": 0.0,
    "roman_upper": 0.5,
    "roman_lower": 0.25,
    "digit": 1.0,
    "position": 0.0,
}
SUB = 100  # ordinal = top-level label * SUB + sub-label index ("A" = 100, "A1" = 101, "A2" = 102)
GAP_PENALTY = 0.75  # per label skipped between two consecutive markers
START_PENALTY = 1.0  # per label skipped before the first marker
SWITCH_PENALTY = 1.0  # consecutive markers in different styles
TRAILING_LABEL_MAX_WORDS = 3  # "free fatty acids (J) in …": words before a trailing label
EXTRA_LABEL_BONUS = 0.25  # per label beyond the first in one marker (ranges, lists)


@dataclass(frozen=True)
class _Candidate:
    start: int
    end: int
    style: str
    family: str
    ords: tuple[int, ...]
    labels: tuple[str, ...]
    weight: float = field(compare=False)
    at_boundary: bool = True


# ---------------------------------------------------------------------------------------------
# Candidate extraction
# ---------------------------------------------------------------------------------------------


def _atom_interpretations(atom: str) -> list[tuple[str, int, str]]:
    """(family, ordinal, normalised label) readings of one atom; [] if it cannot be a label."""
    out: list[tuple[str, int, str]] = []
    if atom.isdigit():
        val = int(atom)
        if 1 <= val <= 30:
            out.append(("digit", val * SUB, str(val)))
        return out
    if _RE_SUB_ATOM.fullmatch(atom):  # "A1", "b2", "A′": a sub-panel of the letter's panel
        letter, tail = atom[0], atom[1:]
        index = int(tail) if tail.isdigit() else len(tail)
        if 1 <= index < SUB:
            fam = "upper" if letter.isupper() else "lower"
            out.append((fam, (ord(letter.lower()) - 96) * SUB + index, letter.lower()))
        return out
    if len(atom) == 1:
        out.append(("upper" if atom.isupper() else "lower", (ord(atom.lower()) - 96) * SUB, atom.lower()))
    low = atom.lower()
    if low in _ROMAN and (atom.isupper() or atom.islower()):
        out.append(("roman_upper" if atom.isupper() else "roman_lower", _ROMAN[low] * SUB, low))
    return out


def _top(ordinal: int) -> int:
    return ordinal // SUB


def _gap(last: int, first: int) -> int:
    """Top-level labels skipped between ordinals ``last`` and ``first`` (0 within one panel)."""
    return max(0, _top(first) - _top(last) - 1)


def _is_next(last: int, nxt: int) -> bool:
    """``nxt`` continues ``last`` by exactly one label: the next panel or the next sub-panel."""
    if _top(nxt) == _top(last):
        return nxt == last + 1
    return _top(nxt) == _top(last) + 1 and nxt % SUB in (0, 1)


def _follows(prev: Sequence[int], nxt: Sequence[int]) -> bool:
    """May a marker with ordinals ``nxt`` come after one with ``prev`` in a chain?

    Increasing ("(A) … (B)", "A1 … A2 … B"), or interleaved lists ("A,C … B,D": later start,
    later end, no shared label).
    """
    if prev[-1] < nxt[0]:
        return True
    return nxt[0] > prev[0] and nxt[-1] > prev[-1] and not set(prev) & set(nxt)


def _expand(list_text: str) -> list[tuple[str, tuple[int, ...], tuple[str, ...]]]:
    """Expand a label list ("A–C", "A and B", "E. and F.") into (family, ordinals, labels)."""
    atoms: list[str] = []
    seps_are_range: list[bool] = []
    pending_range = False
    for tok in _RE_LIST_TOKEN.findall(list_text):
        if tok in _RANGE_WORDS:
            pending_range = True
        elif tok in _LIST_WORDS:
            continue
        else:
            if atoms:
                seps_are_range.append(pending_range)
            atoms.append(tok)
            pending_range = False
    if not atoms:
        return []
    readings = [_atom_interpretations(a) for a in atoms]
    if any(not r for r in readings):
        return []
    families = set.intersection(*({f for f, _, _ in r} for r in readings))
    out: list[tuple[str, tuple[int, ...], tuple[str, ...]]] = []
    for fam in sorted(families):
        ords_each = [next(o for f, o, _ in r if f == fam) for r in readings]
        ords: list[int] = [ords_each[0]]
        ok = True
        for i, is_range in enumerate(seps_are_range):
            nxt, last = ords_each[i + 1], ords[-1]
            if nxt <= last:
                ok = False
                break
            if is_range and _top(nxt) == _top(last):  # "b1–b4"
                ords.extend(range(last + 1, nxt + 1))
            elif is_range and last % SUB == 0 and nxt % SUB == 0:  # "A–C"
                if _top(nxt) - _top(last) > 12:
                    ok = False
                    break
                ords.extend(range(last + SUB, nxt + 1, SUB))
            else:
                ords.append(nxt)
        if not ok:
            continue
        labels = tuple(_dedupe(_label_for(fam, o) for o in ords))
        out.append((fam, tuple(ords), labels))
    return out


def _label_for(family: str, ordinal: int) -> str:
    """The normalised label of an ordinal; a sub-panel is named by its panel ("A2" -> "a")."""
    ordinal = _top(ordinal)
    if family in ("upper", "lower"):
        return chr(96 + ordinal)
    if family.startswith("roman"):
        return _ROMAN_BY_ORD[ordinal]
    return str(ordinal)


def _boundary_kind(text: str, pos: int, floor: int) -> str | None:
    """How the marker at ``pos`` is preceded: "start", "sentence", "glued" or None (inline).

    ``floor`` is where the body starts (after a known title): a marker right there is at a start.
    """
    q = pos
    while q > floor and text[q - 1] == " ":
        q -= 1
    if q <= floor:
        return "start"
    ch = text[q - 1]
    if ch in _SENTENCE_PUNCT:
        return "sentence"
    if ch == ".":
        if is_abbreviation_stop(text, q - 1) and not _is_label_dot(text, q - 1):
            return None
        return "sentence" if q < pos else "glued"
    return None


def _is_label_dot(text: str, dot_pos: int) -> bool:
    """A period that closes a previous one-letter label ("A. B. foo"): still a boundary."""
    return dot_pos >= 1 and text[dot_pos - 1].isalpha() and (dot_pos < 2 or not text[dot_pos - 2].isalnum())


def _candidates(text: str, floor: int) -> list[_Candidate]:
    """Every possible label marker; ``at_boundary`` False for mid-sentence ones.

    Mid-sentence parenthesised labels have style "inline"; mid-sentence "A." / bare "A Foo"
    markers (a missing period before them: "… were quantified B Size of …") are kept for the
    gap-filling pass only, letters only.
    """
    found: dict[tuple[int, str, str], _Candidate] = {}

    def add(start: int, end: int, style: str, list_text: str, at_boundary: bool) -> None:
        for fam, ords, labels in _expand(list_text):
            if fam == "digit" and style in ("bare", "bare_lc", "comma"):
                continue  # "3 mice were …", "2, 4 and 6 h": quantities, not labels
            if style == "bare_lc" and fam not in ("upper", "lower"):
                continue  # "I think", "ii the": roman numerals need a clearer marker
            if not at_boundary and style != "inline" and fam not in ("upper", "lower"):
                continue
            w = STYLE_WEIGHT[style] * (1 + EXTRA_LABEL_BONUS * (len(ords) - 1)) - FAMILY_PENALTY[fam]
            key = (start, fam, style)
            if key not in found:
                found[key] = _Candidate(start, end, style, fam, ords, labels, w, at_boundary)

    for m in _RE_PAREN.finditer(text):
        kind = _boundary_kind(text, m.start(), floor)
        add(m.start(), m.end(), "paren" if kind else "inline", m.group(1), kind is not None)
    styles = (
        (_RE_OPEN, "open"),
        (_RE_CLOSE, "close"),
        (_RE_DOT, "dot"),
        (_RE_COMMA, "comma"),
        (_RE_BARE, "bare"),
    )
    for m in _RE_BARE_LC.finditer(text):
        # only at a sentence start; "B cells", "A total of" are names and articles, not labels
        if _boundary_kind(text, m.start(), floor) not in ("start", "sentence"):
            continue
        if (m.group(1)[:1].isupper() or m.group(1) in ("a", "i")) and m.group(2) in _BARE_STOP_WORDS:
            continue
        add(m.start(), m.end(), "bare_lc", m.group(1), True)
    for regex, style in styles:
        for m in regex.finditer(text):
            kind = _boundary_kind(text, m.start(), floor)
            if style == "dot" and not _dot_followed_ok(text, m.end()):
                continue
            if kind is None or (kind == "glued" and style not in ("dot", "close")):
                if style in ("dot", "bare", "close") and _relaxed_ok(text, m.start()):
                    add(m.start(), m.end(), style, m.group(1), False)
                continue
            add(m.start(), m.end(), style, m.group(1), True)
    return sorted(found.values(), key=lambda c: (c.start, -c.weight))


def _relaxed_ok(text: str, pos: int) -> bool:
    """A mid-sentence marker candidate must follow a space and a word/closing character."""
    return pos >= 2 and text[pos - 1] == " " and (text[pos - 2].isalnum() or text[pos - 2] in ")]%")


def _dot_followed_ok(text: str, end: int) -> bool:
    """ "A. Foo", "A. (left)", "A. 3D", end of text: yes; "E. coli": no."""
    i = end
    while i < len(text) and text[i] == " ":
        i += 1
    return i >= len(text) or not text[i].islower()


_RE_POSITION_PAREN = re.compile(
    rf"\(\s*({_POSITION_WORDS}(?:[\s-]+{_POSITION_WORDS})?)(?:\s+(?:panels?|rows?|columns?))?\s*\)(?=\s)",
    re.IGNORECASE,
)


def _position_candidates(text: str, floor: int) -> list[_Candidate]:
    """Position words opening a sentence: "Left panel:", "Top,", "(Left) …", "(bottom) …"."""
    out: list[_Candidate] = []
    matches = sorted([*_RE_POSITION.finditer(text), *_RE_POSITION_PAREN.finditer(text)], key=lambda m: m.start())
    for m in matches:
        if _boundary_kind(text, m.start(), floor) is None:
            continue
        words = " ".join(re.split(r"[\s-]+", m.group(1).lower()))
        ordinal = _POSITION_ORDER.get(words)
        if ordinal is None:
            continue
        out.append(_Candidate(m.start(), m.end(), "position", "position", (ordinal * SUB,), (words,), 1.0))
    return out


# ---------------------------------------------------------------------------------------------
# Chain selection (dynamic programme)
# ---------------------------------------------------------------------------------------------


def _switch_cost(a: str, b: str) -> float:
    if a == b:
        return 0.0
    if {a, b} <= {"paren", "inline"}:
        return 0.25
    if {a, b} <= {"bare", "bare_lc"}:
        return 0.0
    return SWITCH_PENALTY


def _family_chains(cands: Sequence[_Candidate]) -> dict[str, tuple[float, list[_Candidate]]]:
    """Per family, the highest-scoring acceptable chain: strictly increasing labels, in text order,
    non-overlapping. Dynamic programme over (ordinals, style) states of earlier markers: linear in the
    candidates times the distinct markers of one family (small: markers repeat their labels)."""
    out: dict[str, tuple[float, list[_Candidate]]] = {}
    by_family: dict[str, list[_Candidate]] = {}
    for c in cands:
        by_family.setdefault(c.family, []).append(c)
    for fam, fam_cands in by_family.items():
        # table[(ordinals, style)] = (score, index of the chain's last candidate)
        table: dict[tuple[tuple[int, ...], str], tuple[float, int]] = {}
        score: list[float] = []
        back: list[int] = []
        pending: list[int] = []  # candidates that may still overlap the current one
        for i, c in enumerate(fam_cands):
            still: list[int] = []
            for j in pending:
                cj = fam_cands[j]
                if cj.end <= c.start:
                    key = (cj.ords, cj.style)
                    if key not in table or score[j] > table[key][0]:
                        table[key] = (score[j], j)
                else:
                    still.append(j)
            pending = still
            first = c.ords[0]
            s_best = c.weight - START_PENALTY * (_top(first) - 1)
            b_best = -1
            for (prev_ords, style), (s_prev, j) in table.items():
                if not _follows(prev_ords, c.ords):
                    continue
                gap = _gap(prev_ords[-1], first)
                sc = s_prev + c.weight - GAP_PENALTY * gap - _switch_cost(style, c.style)
                if sc > s_best:
                    s_best, b_best = sc, j
            score.append(s_best)
            back.append(b_best)
            pending.append(i)
        for i in sorted(range(len(score)), key=lambda k: (-score[k], k)):
            if score[i] <= 0.0:
                break
            chain = _unwind(fam_cands, back, i)
            if _acceptable(chain):
                out[fam] = (score[i], chain)
                break
    return out


FAMILY_PRIORITY = ("upper", "lower", "roman_lower", "roman_upper", "digit", "position")


def _best_chain(
    cands: Sequence[_Candidate], extras: Sequence[_Candidate] = ()
) -> tuple[float, list[_Candidate]]:
    """The chain to use, after gap filling with ``extras`` (see :func:`_fill_gaps`).

    A letter chain with two or more markers wins outright (roman numerals and digits are mostly
    sub-items inside lettered panels); otherwise the best-scoring family.
    """
    chains = {
        fam: (score, _fill_gaps(chain, extras) if extras else list(chain))
        for fam, (score, chain) in _family_chains(cands).items()
    }
    if not chains:
        return 0.0, []
    letter = [chains[f] for f in ("upper", "lower") if f in chains and len(chains[f][1]) >= 2]
    if letter:
        return max(letter, key=lambda x: (x[0], -x[1][0].start))
    fam = max(chains, key=lambda f: (chains[f][0], -FAMILY_PRIORITY.index(f)))
    return chains[fam]


def _fill_gaps(chain: Sequence[_Candidate], extra: Sequence[_Candidate]) -> list[_Candidate]:
    """Add mid-sentence markers ("(C)" inline, "… quantified B Size …") that supply labels missing
    between two chain markers, or that continue the chain by exactly the next label at its end."""
    if not chain:
        return []
    fam = chain[0].family
    pool = sorted((c for c in extra if c.family == fam), key=lambda c: (c.start, -c.weight))
    out: list[_Candidate] = []
    k = 0
    bounds = list(chain) + [None]
    prev: _Candidate | None = None
    for nxt in bounds:
        lo_pos = prev.end if prev else 0
        lo_ord = prev.ords[-1] if prev else 0
        hi_pos = nxt.start if nxt else 1 << 62
        hi_ord = nxt.ords[0] if nxt else 1 << 30
        while k < len(pool) and pool[k].start < lo_pos:
            k += 1
        last_ord, last_end = lo_ord, lo_pos
        j = k
        while j < len(pool) and pool[j].start < hi_pos:
            c = pool[j]
            j += 1
            if c.start < last_end or c.end > hi_pos:
                continue
            if nxt is None and not _is_next(last_ord, c.ords[0]):
                continue  # at the tail only an exact continuation counts
            if nxt is None and prev is None:
                continue
            if last_ord < c.ords[0] and c.ords[-1] < hi_ord:
                out.append(c)
                last_ord, last_end = c.ords[-1], c.end
        if nxt is not None:
            out.append(nxt)
        prev = nxt if nxt is not None else prev
    return out


def _unwind(cands: Sequence[_Candidate], back: Sequence[int], i: int) -> list[_Candidate]:
    out: list[_Candidate] = []
    while i >= 0:
        out.append(cands[i])
        i = back[i]
    out.reverse()
    return out


def _acceptable(chain: Sequence[_Candidate]) -> bool:
    """A lone marker only counts when it is strong; an inline-only chain needs two labels."""
    if not chain:
        return False
    if len(chain) == 1:
        c = chain[0]
        return c.style in STRONG_STYLES or (c.style == "inline" and len(c.ords) >= 2 and c.family != "digit")
    bare = all(c.style in ("bare", "bare_lc") for c in chain)
    if bare and chain[0].family != "lower" and len(chain) < 3:
        # "A Western blot … B-cell counts …": two upper-case bare letters count only as "A … B …",
        # each opening a sentence with its own description
        tops = sorted({_top(o) for c in chain for o in c.ords})
        return len(chain) == 2 and tops == list(range(1, len(tops) + 1))
    return True


# ---------------------------------------------------------------------------------------------
# Segments
# ---------------------------------------------------------------------------------------------


def _sentence_start(text: str, pos: int, floor: int) -> int:
    """Start of the sentence containing ``pos``, not before ``floor``. Linear scan backwards."""
    i = pos
    while i > floor:
        ch = text[i - 1]
        if ch in _SENTENCE_PUNCT and ch not in ":：":
            break
        if ch == "." and i < len(text) and text[i] == " " and not is_abbreviation_stop(text, i - 1):
            break
        i -= 1
    while i < pos and text[i] == " ":
        i += 1
    return i



def _build_segments(text: str, chain: Sequence[_Candidate], floor: int) -> list[Segment]:
    starts: list[tuple[int, list[str], int]] = []  # (segment start, labels, marker end)
    prev_floor = floor
    prev: _Candidate | None = None
    for c in chain:
        same_sentence = False
        if c.style == "inline":
            seg_start = _sentence_start(text, c.start, prev_floor)
            same_sentence = prev is not None and text[prev_floor:seg_start].strip() == ""
            after_leading = prev is not None and prev.style != "inline"
            if after_leading and same_sentence:
                # "(B) Intracellular lactate (C) external acidification", "(E) X and (F) Y in
                # tumours": after a leading label, an inline one opens its own clause-level panel
                seg_start, same_sentence = c.start, False
            elif after_leading and len(text[seg_start : c.start].split()) > TRAILING_LABEL_MAX_WORDS:
                # "… with vehicle (B) Trypan blue assay …": a leading label that lost its period
                seg_start = c.start
        else:
            seg_start = c.start
        prev = c
        if starts and (same_sentence or seg_start <= starts[-1][0]):
            # same sentence as the previous segment's start: a joint description
            starts[-1][1].extend(c.labels)
            starts[-1] = (starts[-1][0], starts[-1][1], c.end)
        else:
            starts.append((seg_start, list(c.labels), c.end))
        prev_floor = max(prev_floor, c.end)
    segments: list[Segment] = []
    title = text[:floor].strip()
    if title:
        segments.append(Segment([], title))
    lead = text[floor : starts[0][0]].strip() if starts else text[floor:].strip()
    if lead:
        segments.append(Segment([], lead))
    pending_labels: list[str] = []
    pending_start: int | None = None
    for k, (s, labels, marker_end) in enumerate(starts):
        e = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        own = text[marker_end:e].strip(" .,;:") if marker_end <= e else ""
        if not own and k + 1 < len(starts):
            # label(s) with no text of their own: they share the next segment's description
            pending_labels.extend(labels)
            pending_start = s if pending_start is None else pending_start
            continue
        seg_text = text[(pending_start if pending_start is not None else s) : e].strip()
        all_labels = _dedupe(pending_labels + labels)
        pending_labels, pending_start = [], None
        if not own and segments and segments[-1].labels:
            # trailing marker without text: attach to the previous segment
            prev = segments.pop()
            segments.append(Segment(_dedupe(prev.labels + all_labels), (prev.text + " " + seg_text).strip()))
            continue
        segments.append(Segment(all_labels, seg_text))
    return _merge_sub_panels(segments)


def _merge_sub_panels(segments: list[Segment]) -> list[Segment]:
    """Consecutive segments of one panel ("A1 …", "A2 …" both name panel "a") become one."""
    out: list[Segment] = []
    for seg in segments:
        if out and seg.labels and out[-1].labels == seg.labels:
            out[-1] = Segment(seg.labels, f"{out[-1].text} {seg.text}")
        else:
            out.append(seg)
    return out


def _dedupe(labels: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for lab in labels:
        seen.setdefault(lab, None)
    return list(seen)


def split_caption(caption: str, title: str | None = None) -> list[Segment]:
    """Split ``caption`` into labelled segments (see the module docstring).

    ``title``: the caption's title when known (JATS ``<caption><title>``); when the caption starts
    with it, labels are searched only after it and a label right after it counts as a sentence start.
    The lead (title or shared text before the first label) comes back as a first segment with no
    labels; it is never dropped. A caption with no usable labels gives one unlabelled segment.
    """
    text = normalize_ws(caption)
    if not text:
        return []
    floor = 0
    if title:
        t = normalize_ws(title)
        if t and text.startswith(t):
            floor = len(t)
    segments = _split_after(text, floor)
    if floor and not any(s.labels for s in segments):
        # labels inside the title itself ("Dorsal (A) and transverse (B) view of …")
        whole = _split_after(text, 0)
        if any(s.labels for s in whole):
            return whole
    return segments


def _split_after(text: str, floor: int) -> list[Segment]:
    """:func:`split_caption` on normalised ``text`` with labels searched from ``floor`` on."""
    cands = [c for c in _candidates(text, floor) if c.start >= floor]
    leading = [c for c in cands if c.at_boundary]
    # 1. the chain of sentence-initial markers; 2. mid-sentence markers only fill its gaps;
    # 3. captions labelled only mid-sentence ("Axial (A) and coronal (B) …") use inline markers.
    _, chain = _best_chain(leading, [c for c in cands if not c.at_boundary])
    if not chain:
        _, chain = _best_chain([c for c in cands if c.at_boundary or c.style == "inline"])
    if not chain:
        _, chain = _best_chain([c for c in _position_candidates(text, floor) if c.start >= floor])
        if len(chain) < 2:
            chain = []
    if not chain:
        if floor and text[floor:].strip():
            return [Segment([], text[:floor].strip()), Segment([], text[floor:].strip())]
        return [Segment([], text)]
    return _build_segments(text, chain, floor)


# ---------------------------------------------------------------------------------------------
# Letters -> text
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """The text chosen for one panel letter and why."""

    text: str
    source: str  # "rules" | "fallback-full"
    reason: str | None  # None when a labelled segment was found
    labels: list[str]
    shared_text: str = ""  # the caption's title and lead, shared by every panel ("" on fallback)


def lead_segments(segments: Sequence[Segment]) -> list[str]:
    """Texts of the unlabelled segments before the first labelled one (title, shared lead)."""
    out: list[str] = []
    for s in segments:
        if s.labels:
            break
        out.append(s.text)
    return out


def shared_text(segments: Sequence[Segment]) -> str:
    """The text every panel shares: title and lead before the first labelled segment.

    For a caption without labels, the known title (when one was given) and "" otherwise: the
    body is then the one panel segment (see :func:`panel_segments`).
    """
    if not any(s.labels for s in segments):
        return " ".join(s.text for s in segments[:-1])
    return " ".join(lead_segments(segments))


def panel_segments(segments: Sequence[Segment]) -> list[Segment]:
    """The segments that describe panels: the labelled ones, or the one unlabelled body text.

    The title and lead go to :func:`shared_text` instead. A caption without labels gives its text
    after the title (or the whole caption) as one unlabelled segment.
    """
    labelled = [s for s in segments if s.labels]
    if labelled:
        return labelled
    return list(segments[-1:])


def _is_letter(label: str) -> bool:
    return len(label) == 1 and label.isalpha()


def assign_detailed(
    segments: Sequence[Segment],
    letters: Iterable[str | None],
    *,
    caption: str | None = None,
) -> dict[str, Assignment]:
    """Map each panel letter to its segment, with the source and fallback reason.

    Letters are matched to segment labels (case-insensitive). When the caption is labelled in
    another family (roman numerals, digits, positions) and no letter matches, the k-th letter goes
    to the k-th labelled segment in caption order. A letter with no segment gets the full caption
    (``source="fallback-full"``), so nothing is dropped. The segment text stays a verbatim
    substring of the caption; the title and lead every panel shares come separately as
    ``shared_text``.
    """
    full = normalize_ws(caption) if caption is not None else " ".join(s.text for s in segments)
    labelled = [s for s in segments if s.labels]
    lead = shared_text(segments)
    by_label: dict[str, Segment] = {}
    for s in labelled:
        for lab in s.labels:
            by_label.setdefault(lab.lower(), s)
    uses_letters = any(_is_letter(lab) for s in labelled for lab in s.labels)
    out: dict[str, Assignment] = {}
    for raw in letters:
        if raw is None:
            continue
        letter = str(raw).strip().lower()
        if not letter or letter in out:
            continue
        seg = by_label.get(letter)
        if seg is None and labelled and not uses_letters and _is_letter(letter):
            k = ord(letter) - 97
            if 0 <= k < len(labelled):
                seg = labelled[k]
        if seg is not None:
            out[letter] = Assignment(seg.text, "rules", None, list(seg.labels), lead)
            continue
        mentioned = mention_sentences(full, letter) if _is_letter(letter) else ""
        if mentioned:  # named only inside label lists: "twi (A, E, H, L), sim (B, F, I, M) …"
            out[letter] = Assignment(mentioned, "rules", "mention", [letter], lead)
        else:
            reason = "no_labels" if not labelled else "label_not_found"
            out[letter] = Assignment(full, "fallback-full", reason, [])
    return out


def _sentence_end(text: str, pos: int) -> int:
    """End (exclusive, after its punctuation) of the sentence containing ``pos``."""
    i = pos
    while i < len(text):
        ch = text[i]
        if ch in _SENTENCE_PUNCT and ch not in ":：":
            return i + 1
        if ch == "." and (i + 1 == len(text) or text[i + 1] == " ") and not is_abbreviation_stop(text, i):
            return i + 1
        i += 1
    return len(text)


def mention_sentences(caption: str, letter: str) -> str:
    """The sentences of ``caption`` that name panel ``letter`` inside a bracketed label list
    ("Expression of twi (A, E, H, L) …", "in dl1-RNAi embryos (H–J)"), verbatim and in caption
    order, joined by a space; "" when none does.

    For captions that place labels after the phrases they describe rather than opening a segment
    with them: those sentences are what the caption says about the panel.
    """
    letter = letter.lower()
    spans: list[tuple[int, int]] = []
    for m in _RE_PAREN.finditer(caption):
        readings = [labels for fam, _, labels in _expand(m.group(1)) if fam in ("upper", "lower")]
        if not any(letter in labels for labels in readings):
            continue
        span = (_sentence_start(caption, m.start(), 0), _sentence_end(caption, m.end()))
        if span not in spans:
            spans.append(span)
    return " ".join(caption[a:b].strip() for a, b in sorted(spans))


def assign(
    segments: Sequence[Segment],
    letters: Iterable[str | None],
    *,
    caption: str | None = None,
) -> dict[str, str]:
    """``{letter: text}`` for each panel letter (see :func:`assign_detailed`)."""
    detailed = assign_detailed(segments, letters, caption=caption)
    return {k: v.text for k, v in detailed.items()}


def segments_to_json(segments: Sequence[Segment]) -> list[dict[str, object]]:
    return [s.to_json() for s in segments]


def segments_from_json(items: Iterable[Mapping[str, object]]) -> list[Segment]:
    out: list[Segment] = []
    for it in items:
        labels = it.get("labels") or []
        if not isinstance(labels, list):
            raise ValueError("segment labels must be a list")
        out.append(Segment([str(x) for x in labels], str(it.get("text", ""))))
    return out


def caption_positions(caption: str, title: str | None = None) -> list[str]:
    """The places a caption labels its panels by ("left", "right"; "top", "bottom"; "top left"...),
    in caption order, when it names places and no panel letter; else ``[]``.

    Read with :func:`split_caption`; these labels are what the segments carry, so a subfigure given
    one (:func:`pmcflow.decompose.order.assign_positions`) finds its segment by it.
    """
    labels = [lab for s in split_caption(caption, title) for lab in s.labels]
    if not labels or any(lab not in POSITION_LABELS for lab in labels):
        return []
    return list(dict.fromkeys(labels))


def caption_letters(caption: str, title: str | None = None) -> list[str]:
    """The panel letters a caption names, as the contiguous run ``a..last`` (lower case).

    Read with :func:`split_caption` (one caption grammar for the whole pipeline). Authors label
    panels contiguously even where a caption skips one, so the run is filled up to the last
    letter. Labels in another family (roman numerals, digits, positions), a lone "a" and no labels
    give ``[]``.
    """
    found = {lab for s in split_caption(caption, title) for lab in s.labels if len(lab) == 1 and lab.isalpha()}
    if not found or max(found) == "a":
        return []
    return [chr(c) for c in range(ord("a"), ord(max(found)) + 1)]
