"""Rule-based caption splitter: caption -> labelled segments, CPU only, no weights.

How it works
------------
1. **Candidates.** Every place that *could* be a panel label is collected with its style:
   ``(A)`` / ``(A–C)`` / ``(A and B)`` / ``(A, C)`` in parentheses (at a sentence start, or inline
   as in "Axial (A) and coronal (B) …"), ``A)``, ``A.`` / ``A:``, ``A,`` and a bare ``A`` followed
   by a capitalised word — the last four only at a sentence start (after ``.;:!?`` or the start of
   the caption). A label is a single letter, a roman numeral (i–xx) or a 1–2 digit number; ranges
   (``A–C``, ``a to c``) and lists (``A and B``, ``A, C``, ``(A/B)``, ``E. and F.``) are
   expanded; sub-panel labels (``A1``, ``A′``, ``Aii``, ``AI``) name their panel, and a bracket may
   add a note to its label (``(H, arrow)``). Position words ("Left panel:", "Top:", "Upper
   panels,") are a last-resort family.
2. **One consistent chain.** Real labels form an increasing sequence in one family (upper-case
   letters, lower-case letters, upper/lower roman, digits) whereas false candidates ("E. coli",
   a back-reference "as in (A)", "(n = 3)" never even matches) break it. A dynamic programme picks
   the chain with the best score: strong styles score more, skipped labels and a start after the
   first label cost, and so does switching style between consecutive markers. Cost is
   O(candidates × alphabet): no quadratic or exponential behaviour on 7,000-token captions.
   Bracketed letters that abbreviate the words before them and are out of panel order in one
   sentence ("longitudinal muscle (L) and circular muscle (C)") are not panel labels. Mid-sentence
   markers join a chain of sentence-initial ones only to fill its gaps, in order ("D. … Energy
   content (E) per gram. Lipids (F) per gram. G. …"), or to continue it by exactly the next label
   at its end; "as in (E)" before a leading "E." fills no gap and stays in its panel's text. A
   caption labelled only after its phrases reads letters and roman numerals there, not numbers:
   "magnetic lignite (1) and magnetic char (2)" numbers samples, not panels.
3. **Restatements.** Captions repeat labels the chain already has: an overview before its panels
   ("(A–D) Hemilineage 1A. (A, B) The 1A neurons …"), a note after them ("(B–F) Data are
   mean ± SEM."), genotypes listed per panel at the end. Sentence-initial markers of the chain's
   family within its range open segments of their own too (labels repeat across segments).
4. **Segments.** A leading marker starts its segment at the marker. An inline marker placed
   *after* its phrase starts it at the beginning of its sentence (after a "Heading: " for the
   first one), several such labels in one sentence make one joint segment ("Axial (A) and coronal
   (B) CT" -> labels ``["a", "b"]``) unless a comma or semicolon closes a clause of its own
   ("… in females (A), and reduced levels in males (B)"). Inline markers placed *before* their
   phrases in a list ("stained for (A) actin, (B) tubulin and (C) DAPI") each open a segment at
   the marker. Text before the first segment is the *lead* (figure title / shared description),
   returned as a first segment with no labels. A marker with no text of its own ("(A) (B) Western
   blots …") joins the next segment; consecutive sub-panels ("A1 …", "A2 …") make one segment.

Segment texts are verbatim substrings of the whitespace-normalised caption (markers included);
labels are lower-case strings ("a", "ii", "3", "left").
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import accumulate

from pmcflow.enrich.boundaries import (
    RE_FINITE_VERB,
    BoundaryModel,
    cut_features,
    default_model,
    pieces_between,
    segment_body,
    sentence_spans,
)
from pmcflow.enrich.text import is_abbreviation_stop, normalize_ws, split_sentences

# ---------------------------------------------------------------------------------------------
# Public record
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A piece of a caption and the panel labels it describes (empty for the lead / unlabelled).

    ``shared`` marks the known title of a caption that names no label: text every panel shares,
    not a panel's own (it does not take part in equality).
    """

    labels: list[str]
    text: str
    shared: bool = field(default=False, compare=False)

    def to_json(self) -> dict[str, object]:
        return {"labels": list(self.labels), "text": self.text}


# ---------------------------------------------------------------------------------------------
# Label grammar
# ---------------------------------------------------------------------------------------------
# a sub-panel label: "A1", "b2", "A′", "Aii", "AI" (a roman numeral after the panel letter)
_PRIMES = "′″‴’'"  # the characters that prime a sub-panel label ("A′", "C″", "B’")
_PRIME_COUNT = {"″": 2, "‴": 3}  # primes a character stands for in a sub-panel label ("C″" = "C′′")
_SUB_ATOM = rf"[A-Za-z](?:\d{{1,2}}|[{_PRIMES}]{{1,3}}|i{{1,3}}|iv)|[A-Z]I{{1,3}}"
_ATOM = rf"(?:[A-Za-z]{{1,5}}|\d{{1,2}}|{_SUB_ATOM})(?![A-Za-z0-9{_PRIMES}])"
_SEP = r"(?:\s*[-–—‐‑−]\s*|\s*,?\s*(?:and|to|through|&)\s+|\s*,\s*)"
_SEP_DOT = r"(?:\.?\s*[-–—‐‑−]\s*|\.?\s*,?\s*(?:and|to|through|&)\s+|\.?\s*,\s*)"
_SEP_PAREN = rf"(?:{_SEP}|\s*/\s*)"  # inside brackets "A/B" is a list too
_LIST = rf"{_ATOM}(?:{_SEP}{_ATOM}){{0,8}}"
_LIST_DOT = rf"{_ATOM}(?:{_SEP_DOT}{_ATOM}){{0,8}}"
_LIST_PAREN = rf"{_ATOM}(?:{_SEP_PAREN}{_ATOM}){{0,8}}"
_NO_WORD_BEFORE = r"(?<![\w'’′.\-/])"

_PANEL_IN_BRACKET = r"(?:[Pp]anels?\s+)?"  # "(panel a)", "(panels B–D)": the word adds nothing
_RE_PAREN = re.compile(rf"[(\[]\s*{_PANEL_IN_BRACKET}({_LIST_PAREN})\.?\s*[)\]]")
_RE_PAREN_RANGE = re.compile(
    rf"[(\[]\s*({_ATOM})\s*[)\]](?:\s*[-–—‐‑−]\s*|\s*(?:to|through)\s+)[(\[]\s*({_ATOM})\s*[)\]]"
)
# the first and last panels of a series after their items: "from 2014 (A) to 2018 (E)"
_RE_PAREN_SPAN = re.compile(
    r"(?<=\bfrom )[^()\[\];,.]{1,40}?\s\(([A-Za-z])\)\s+(?:to|through)\s+[^()\[\];,.]{1,40}?\s\(([A-Za-z])\)"
)
# an abbreviation, then the panels it is shown in: "(GMSAT, a–c)"
_RE_NOTE_PAREN = re.compile(rf"\((?:[A-Z][A-Za-z0-9-]{{1,9}}),\s+({_LIST})\)")
# a note, then the panels it is about, after a semicolon: "H2O2 levels (μM g−1 FW; A)"
_RE_NOTE_SEMI_PAREN = re.compile(rf"\([^()\[\];]{{1,30}};\s*({_LIST})\)")
# a label and a note in one bracket: "(H, arrow)", "(R, 37 °C)", "(A; top)"
_RE_PAREN_NOTE = re.compile(rf"[(\[]\s*{_PANEL_IN_BRACKET}({_LIST})\s*[,;]\s+[^()\[\]]{{1,40}}?[)\]]")


def _bracket_key(item: str, sep: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A bracket of two or more ``item``s (group 1: the labels) separated by ``sep`` (a character
    class), the last maybe after "and", and the pattern of one item inside such a bracket."""
    whole = re.compile(rf"\(\s*{item}(?:{sep}\s*(?:and\s+)?{item})+\)")
    one = re.compile(rf"(?:^\(|{sep})\s*(?:and\s+)?{item}(?={sep}|\)$)")
    return whole, one


# labels, each with its note, in one bracket after a phrase: "(B, representative image; C,
# quantitation result)"
_RE_PAREN_KEY, _RE_PAREN_KEY_ITEM = _bracket_key(rf"({_LIST})\s*,\s+[^()\[\];]{{1,40}}?", "[;]")
# ... or each label "for" its item: "(A for γ-gliadin, B for δ-gliadin, C for ω-gliadin, and D for LMW-GS)"
_RE_PAREN_FOR, _RE_PAREN_FOR_ITEM = _bracket_key(rf"({_LIST})\s+for\s+[^()\[\];,]{{1,40}}?", "[;,]")
# ... or each lower-case letter before its item: "aphid traits (a first generation, b second generation, c
# third generation)"
_RE_PAREN_BARE, _RE_PAREN_BARE_ITEM = _bracket_key(r"([a-h])\s+(?!(?:and|or|to|of|in)\b)[^()\[\];,\s][^()\[\];,]{0,39}?", "[;,]")
# "AI", "BII": a sub-panel only where a marker opens a sentence ("95 % CI (CI)" is no label)
_RE_UPPER_ROMAN_SUB = re.compile(r"[A-Z]I{1,3}")
_RE_OPEN = re.compile(rf"[(\[]\s*({_LIST})(?=\s+[A-Z0-9][a-z0-9])")
_RE_CLOSE = re.compile(rf"{_NO_WORD_BEFORE}(?<![(\[])({_LIST})\)")
_RE_CLOSE_RANGE = re.compile(rf"{_NO_WORD_BEFORE}(?<![(\[])({_ATOM})\)\s*[-–—‐‑−]\s*({_ATOM})\)")
_RE_DOT = re.compile(rf"{_NO_WORD_BEFORE}({_LIST_DOT})\s?[.:](?![\w.])")
_RE_COMMA = re.compile(rf"{_NO_WORD_BEFORE}({_LIST}),(?=\s)")
_RE_COMMA_ONE = re.compile(rf"{_NO_WORD_BEFORE}({_ATOM}),(?=\s)")
_RE_BARE = re.compile(rf"{_NO_WORD_BEFORE}({_LIST})(?=\s+[A-Z0-9(\[α-ωΑ-Ω])")
_RE_BARE_LC = re.compile(rf"{_NO_WORD_BEFORE}({_LIST})(?=\s+([a-z][a-z-]*))")
# a grid's row or column named with its panels: "Left column a, d, g, CO2 …", "Top row (A–C): …"
_RE_GRID_WORD = re.compile(
    r"(?:Left|Middle|Centre|Center|Right|Top|Bottom|Upper|Lower|First|Second|Third|Fourth)\s+"
    rf"(?:columns?|rows?)\s+\(?({_LIST})\)?(?=\s*[,:])"
)
# "Panel A, genomic map …", "In panels B–D, …", "Panel C: …", "Panel B (δH 2.4-4.0 ppm) shows …"
# opening a sentence (not "Panels B, G, and I were …": no label may follow the comma)
_RE_PANEL_WORD = re.compile(
    rf"(?:In\s+)?[Pp]anels?\s+({_LIST})(?:\s*[,:](?=\s)(?!\s+(?:(?:and|or)\s+)?[A-Za-z]\d?\b)|(?=\s+\())"
)
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
_RE_LIST_TOKEN = re.compile(rf"(?:{_SUB_ATOM})(?![A-Za-z0-9])|[A-Za-z]+|\d+|[-–—‐‑−]|[,&/]")
_RE_SUB_ATOM = re.compile(_SUB_ATOM)
_RANGE_WORDS = frozenset({"-", "–", "—", "‐", "‑", "−", "to", "through"})
_LIST_WORDS = frozenset({",", "&", "and", "/"})
_SENTENCE_PUNCT = ";:!?。；：！？"
_RE_WORD = re.compile(r" *([∆]?[^\W_]+)")  # "∆disA": the increment sign opens a mutant's name
_RE_WORDS_BEFORE = re.compile(r"[^\W\d_]+")
# words after an inline label that show it closes the phrase before it ("dorsal (A) and ventral
# (B) views", "image (B) shows"): the label is not placed before its own description
_POSTFIX_WORDS = frozenset(
    {"and", "or", "but", "nor", "with", "without", "in", "on", "at", "of", "for", "from", "to", "by",
     "as", "vs", "versus", "respectively", "while", "whereas", "which", "that", "is", "are", "was",
     "were", "show", "shows", "showed", "shown", "indicate", "indicates", "represent", "represents",
     "depict", "depicts", "summarize", "summarizes", "summarise", "summarises", "illustrate",
     "illustrates", "display", "displays", "present", "presents", "compare", "compares"}
)  # fmt: skip

_BARE_CONJUNCTIONS = frozenset({"and", "or", "&", "and/or"})

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
    # a bare list of letters opening a sentence before a capitalised word: "b, c, d Spatial
    # patterns …", "a–h Decomposition of …", "B–G Model calibration …" (one marker, several panels)
    "bare_list": 2.5,
    "inline": 1.5,
    "position": 1.0,
}
STRONG_STYLES = frozenset({"paren", "close", "dot", "bare_list"})
_BARE_STYLES = frozenset({"bare", "bare_lc", "bare_list"})
FAMILY_PENALTY: dict[str, float] = {
    "upper": 0.0,
    "lower": 0.0,
    "roman_upper": 0.5,
    "roman_lower": 0.25,
    "digit": 1.0,
    "position": 0.0,
}
# a sub-panel is numbered up to this: "A1"-"A12" are panel A's parts; "C28", "C30" (chain lengths),
# "p53" or "C57" name something else
MAX_SUB_INDEX = 12
SUB = 100  # ordinal = top-level label * SUB + sub-label index ("A" = 100, "A1" = 101, "A2" = 102)
GAP_PENALTY = 0.75  # per label skipped between two consecutive markers
START_PENALTY = 1.0  # per label skipped before the first marker
SWITCH_PENALTY = 1.0  # consecutive markers in different styles
ABBREVIATION_WORDS = 3  # "circular muscle layer (C)": words an abbreviating letter may come from
ABBREVIATION_MAX_STEP = 3  # "(C) … (L)" in one sentence: too far apart to be consecutive panels
TRAILING_LABEL_MAX_WORDS = 3  # "free fatty acids (J) in …": words before a trailing label
CLAUSE_MIN_WORDS = 5  # "… (A), and reduced levels of Y in males (B)": a clause of its own
# "… dry heath (B) and the Barrow wet meadow (C).": words after the conjunction that make the
# phrase ending a sentence with its own label a description of its own (not "dorsal (A) and ventral (B).")
CONJUNCT_MIN_WORDS = 4
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
    after_period: bool = field(default=False, compare=False)  # opens the text or follows a "."


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
    low = atom.lower()
    if _RE_SUB_ATOM.fullmatch(atom) and low not in _ROMAN:  # "A1", "b2", "A′", "Aii": a sub-panel
        letter, tail = atom[0], atom[1:]
        if tail.isdigit():
            index = int(tail)
        elif tail.lower() in _ROMAN:
            index = _ROMAN[tail.lower()]
        else:
            index = sum(_PRIME_COUNT.get(ch, 1) for ch in tail)  # "A′" 1, "A″" 2, "A″′" 3
        if 1 <= index <= MAX_SUB_INDEX:
            fam = "upper" if letter.isupper() else "lower"
            out.append((fam, (ord(letter.lower()) - 96) * SUB + index, letter.lower()))
        return out
    if len(atom) == 1:
        out.append(("upper" if atom.isupper() else "lower", (ord(atom.lower()) - 96) * SUB, atom.lower()))
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


def _follows(prev: Sequence[int], nxt: Sequence[int], leading: bool = False) -> bool:
    """May a marker with ordinals ``nxt`` come after one with ``prev`` in a chain?

    Increasing ("(A) … (B)", "A1 … A2 … B"), or interleaved lists ("A,C … B,D": later start,
    later end, no shared label). A ``leading`` marker (one that opens its sentence) may also end
    earlier, a grid caption's panel of one row between two of rows and columns ("g, n SST …. h
    Mg/Ca-derived SST …. i, o Antarctic …"); a mid-sentence one may not ("The scale bar in (I)").
    """
    if prev[-1] < nxt[0]:
        return True
    return nxt[0] > prev[0] and (leading or nxt[-1] > prev[-1]) and not set(prev) & set(nxt)


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
            elif is_range:  # "A–C", "A1–C1": one step per panel; "A–C′": the panels between, then C′
                if _top(nxt) - _top(last) > 12:
                    ok = False
                    break
                if last % SUB == nxt % SUB:
                    ords.extend(range(last + SUB, nxt + 1, SUB))
                else:
                    ords.extend([*range((_top(last) + 1) * SUB, _top(nxt) * SUB, SUB), nxt])
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


_RE_CONJUNCTION_BEFORE = re.compile(r"[;；] *(?:and|or),? *$")


def _back_over_spaces(text: str, pos: int, floor: int = 0) -> int:
    """``pos`` moved back over the spaces before it, not below ``floor``."""
    q = pos
    while q > floor and text[q - 1] == " ":
        q -= 1
    return q


def _boundary_kind(text: str, pos: int, floor: int) -> str | None:
    """How the marker at ``pos`` is preceded: "start", "sentence", "glued" or None (inline).

    ``floor`` is where the body starts (after a known title): a marker right there is at a start.
    """
    q = _back_over_spaces(text, pos, floor)
    if q <= floor:
        return "start"
    m = _RE_CONJUNCTION_BEFORE.search(text, max(floor, q - 8), q)
    if m is not None and m.end() == q and pos > q:
        q = m.start() + 1  # "A, dorsal; and B, ventral views": the "and" after ";" opens the panel
    ch = text[q - 1]
    if ch in ";；" and q == pos:
        return None  # "gs1;2: grey column": a name with a semicolon in it, not a clause's start
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


def _weight(style: str, family: str, ords: Sequence[int]) -> float:
    """A marker's weight: its style's, a bonus per extra label it lists, less its family's penalty."""
    return STYLE_WEIGHT[style] * (1 + EXTRA_LABEL_BONUS * (len(ords) - 1)) - FAMILY_PENALTY[family]


def _candidates(text: str, floor: int) -> list[_Candidate]:
    """Every possible label marker; ``at_boundary`` False for mid-sentence ones.

    Mid-sentence parenthesised labels have style "inline"; mid-sentence "A." / bare "A Foo"
    markers (a missing period before them: "… were quantified B Size of …") are kept for the
    gap-filling pass only, letters only.
    """
    found: dict[tuple[int, str, str, tuple[int, ...]], _Candidate] = {}

    def add(start: int, end: int, style: str, list_text: str, at_boundary: bool, after_period: bool = False) -> bool:
        """Record the readings of one marker; False when its text reads as no label list."""
        readings = _expand(list_text)
        for fam, ords, labels in readings:
            if fam == "digit" and style in ("bare", "bare_lc", "comma"):
                continue  # "3 mice were …", "2, 4 and 6 h": quantities, not labels
            if style == "bare_lc" and fam not in ("upper", "lower"):
                continue  # "I think", "ii the": roman numerals need a clearer marker
            if not at_boundary and style != "inline" and fam not in ("upper", "lower"):
                continue
            if style == "inline" and _has_upper_roman_sub(list_text):
                continue  # "(CI)", "(KI)" inside a sentence: abbreviations
            if style == "bare" and at_boundary and len(ords) > 1 and fam in ("upper", "lower"):
                style = "bare_list"
            w = _weight(style, fam, ords)
            key = (start, fam, style, ords)  # a bracketed range "(B)–(F)" beside its "(B)"
            if key not in found:
                found[key] = _Candidate(start, end, style, fam, ords, labels, w, at_boundary, after_period)
        return bool(readings)

    paren_starts: set[int] = set()
    opening_ranges: set[int] = set()
    for m in _RE_PAREN_RANGE.finditer(text):  # "(a)–(d)": one marker for a to d
        kind = _boundary_kind(text, m.start(), floor)
        if kind is None and _names_letters(text, m.start()):
            continue
        if add(m.start(), m.end(), "paren" if kind else "inline", f"{m.group(1)}–{m.group(2)}", kind is not None):
            paren_starts.add(m.start())
            if kind is not None:
                opening_ranges.add(m.start())
    for m in _RE_CLOSE_RANGE.finditer(text, floor):
        # "A)–C) Statistical parametric mapping …: A) …, B) …": the range opening its sentence
        if _boundary_kind(text, m.start(), floor) is not None and add(
            m.start(), m.end(), "close", f"{m.group(1)}–{m.group(2)}", True
        ):
            opening_ranges.add(m.start())
    for m in _RE_PAREN_SPAN.finditer(text, floor):
        # "The 15-most biased terms … on a yearly basis, from 2014 (A) to 2018 (E).": A to E, one
        # inline marker from the first bracket to the last
        if m.group(1).isupper() == m.group(2).isupper():
            add(m.start(1) - 1, m.end(), "inline", f"{m.group(1)}–{m.group(2)}", False)
    for m in _RE_PAREN.finditer(text):
        if m.start() in opening_ranges:
            continue  # "(A)–(C) Maps …" opening a sentence: the range, not its first panel alone
        kind = _boundary_kind(text, m.start(), floor)
        if kind is None and _names_letters(text, m.start()):
            paren_starts.add(m.start())  # "Different letters (a–c) indicate …": not panels, not a note
            continue
        if add(m.start(), m.end(), "paren" if kind else "inline", m.group(1), kind is not None):
            paren_starts.add(m.start())  # "(H, arrow)" reads as no list ("arrow" is no label): a note
    for m in _RE_PAREN_NOTE.finditer(text):
        if m.start() not in paren_starts:
            kind = _boundary_kind(text, m.start(), floor)
            add(m.start(), m.end(), "paren" if kind else "inline", m.group(1), kind is not None)
    keys: list[tuple[int, int]] = []
    for key, item in (
        (_RE_PAREN_KEY, _RE_PAREN_KEY_ITEM),
        (_RE_PAREN_FOR, _RE_PAREN_FOR_ITEM),
        (_RE_PAREN_BARE, _RE_PAREN_BARE_ITEM),
    ):
        for m in key.finditer(text, floor):
            # "… 4 weeks after MI (B, representative image; C, quantitation result)", "Phylogenetic
            # trees (A for γ-gliadin, B for …)": the phrase's panels, each with a note; no label
            # inside opens a segment
            if _boundary_kind(text, m.start(), floor) is None:
                items = [i.group(1) for i in item.finditer(m.group(0))]
                if add(m.start(), m.end(), "inline", ", ".join(items), False):
                    keys.append((m.start(), m.end()))
    for m in _RE_NOTE_SEMI_PAREN.finditer(text, floor):
        # "Heatmaps show the H2O2 levels (μM g−1 FW; A), SOD activity (Unit g−1 FW; C) …": the
        # phrase's panel after its unit; "A)" inside opens no segment
        kind = _boundary_kind(text, m.start(), floor)
        if add(m.start(), m.end(), "paren" if kind else "inline", m.group(1), kind is not None):
            keys.append((m.start(), m.end()))  # "(Top; A-D) Profiles of …" opens a sentence: before its phrase
    for m in _RE_NOTE_PAREN.finditer(text, floor):
        # "surface air temperature (GMSAT, a–c)": an abbreviation, then the panels it is shown in
        if len(_list_letters(m.group(1)) or []) >= 2:
            add(m.start(), m.end(), "inline", m.group(1), False)
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
        for m in _matches(regex, style, text):
            if style == "bare" and _names_letters(text, m.start(), m.end()):
                continue  # "a,b Different letters indicate …"
            if style == "comma" and _bare_list_at(text, m):
                continue  # "a, d Salinity. b, e …": a list of two panels, not "a, dorsal view"
            kind = _boundary_kind(text, m.start(), floor)
            if style == "dot" and text[m.end() - 1] == "." and not _dot_followed_ok(text, m.end()):
                continue  # "E. coli"; a colon label may open lower case ("A: the region in green")
            if style == "close" and _closes_open_bracket(text, m.start(), floor):
                continue  # "Error bars (95% CI) were …": the end of a bracket, not "C) …"
            if style == "close" and m.start() in opening_ranges:
                continue  # "A)–C) …": the range, not its first panel alone
            if kind is None or (kind == "glued" and style not in ("dot", "close")):
                if style in ("dot", "bare", "close") and _relaxed_ok(text, m.start()):
                    add(m.start(), m.end(), style, m.group(1), False)
                elif (
                    style == "comma"
                    and (
                        _RE_OF_BEFORE.search(text, max(0, m.start() - 6), m.start())
                        or _RE_CAPITALISED_AFTER.match(text, m.end())
                    )
                    and not _RE_OPERATOR_BEFORE.search(text, max(0, m.start() - 3), m.start())
                ):
                    # "Left squamosals of A, UA 9629; B, …": the first of a list after its noun, or
                    # the last after "and" ("of A, LipH; B, LipN and C, LipY"); "… by the Cre
                    # recombinase B, Dark-field image of …" (a lost period); they only fill gaps
                    add(m.start(), m.end(), style, m.group(1), False)
                continue
            add(m.start(), m.end(), style, m.group(1), True, kind == "start" or _after_period(text, m.start()))
    for m in _RE_LISTED_MARKER.finditer(text, floor):
        # "A. Reference, B. Mild asthma, C. …": listed after a comma, for gap filling and the tail
        # (a pass of its own: the lists above may have swallowed the word before the comma)
        style = "close" if m.group(0).endswith(")") else "dot"
        if text[m.end() - 1] == "." and not _dot_followed_ok(text, m.end()):
            continue
        if style == "close" and _closes_open_bracket(text, m.start(), floor):
            continue  # "(c, h–j) indicate": the end of a bracketed list, not "h–j) …"
        add(m.start(), m.end(), style, m.group(1), False)
    for listed in (_RE_LISTED_BARE, _RE_LISTED_BARE_LIST):
        # "c Peak temperature, d long-term stabilisation …, and e duration …", "…, c, d ORC3b (…)":
        # Nature-style panels listed inside one sentence; for gap filling and the tail only (exact
        # continuations)
        for m in listed.finditer(text, floor):
            if _listed_at(text, m.start(), _RE_LISTED_BEFORE):
                add(m.start(), m.end(), "bare_lc", m.group(1), False)
    for m in _RE_LISTED_FIRST.finditer(text, floor):
        # "derived from: a the total …; b the common …": the first of such a list
        if _listed_first_at(text, m.start()):
            add(m.start(), m.end(), "bare_lc", "a", False)
    for m in _RE_REFERENCE.finditer(text, floor):
        add(m.start(1), m.end(1), "inline", m.group(1), False)
    scale = _RE_SCALE_ZERO.search(text, floor)
    if scale is not None:  # "(0: Major worsening; 1: Moderate worsening; 2: …)": a scale, not panels
        found = {k: c for k, c in found.items() if c.family != "digit" or c.start < scale.start()}
    dropped = _key_list_starts(text, found.values())
    return sorted(
        (
            c
            for c in found.values()
            if c.start not in dropped and not any(a < c.start < b or (a == c.start and c.end < b) for a, b in keys)
        ),
        key=lambda c: (c.start, -c.weight),
    )


KEY_LIST_MIN_ITEMS = 3  # "A1, green; F1, purple; E, orange": items of a colour key
KEY_ITEM_MAX_CHARS = 60  # text between two items of a key


def _key_list_starts(text: str, cands: Iterable[_Candidate]) -> set[int]:
    """Starts of "comma" markers that are the items of a key ("Members are colored according to
    cluster: A1, green; F1, purple; E, orange; I1, blue; B3, yellow"): at least
    :data:`KEY_LIST_MIN_ITEMS` of them in one sentence, separated by semicolons, their labels not in
    increasing order. Panels listed so increase ("A, UA 9629; B, FMNH …; and C, …")."""
    cands = list(cands)
    commas = sorted((c for c in cands if c.style == "comma"), key=lambda c: c.start)
    out: set[int] = set()
    run: list[_Candidate] = []
    for c in [*commas, None]:
        if c is not None and run:
            between = text[run[-1].end : c.start]
            if ";" in between and ". " not in between and len(between) <= KEY_ITEM_MAX_CHARS:
                run.append(c)
                continue
        if len(run) >= KEY_LIST_MIN_ITEMS and (
            any(b.ords[0] <= a.ords[-1] for a, b in zip(run, run[1:], strict=False)) or _restarts_chain(run, cands)
        ):
            out.update(x.start for x in run)
        run = [c] if c is not None else []
    # "V: blood vessels" is a "dot" marker with a colon
    colons = [c for c in cands if c.style == "dot" and text[c.start : c.end].rstrip().endswith(":")]
    return out | _glossary_starts(text, [*commas, *colons])


def _restarts_chain(run: Sequence[_Candidate], cands: Iterable[_Candidate]) -> bool:
    """The key ``run`` names again letters that opened panels of their own before it: "(A) Healthy
    pulp group. (B) …. (C) …. Green circles indicate the excised spots. A, type II keratin; B,
    annexin V; C, …; D, …" (the spots' key, not panels A to F again)."""
    opened = {
        c.ords[0]
        for c in cands
        if c.at_boundary and c.style in STRONG_STYLES and len(c.ords) == 1 and c.start < run[0].start
    }
    return all(x.ords[0] in opened for x in run[:2])


# an item of a glossary: its term (up to 12 characters) before a comma or colon; the sentence's first
# item may follow a lead ("Custom mesoscope C, collimation lens; DC, …") that ends no sentence (the
# sentence splitter keeps "… progenies. a, At 23 DAH …" whole: "a," opens a panel, not a term)
_RE_GLOSSARY_TERM = re.compile(r"\s*(?:and\s+)?([^\s;,:]{1,12})[,:]\s")
_RE_GLOSSARY_FIRST = re.compile(r"(?:[^;,.]|\.(?!\s))*?\s([^\s;,:]{1,12})[,:]\s")
# a term that could be a panel label: "C", "A2", "B′" (not "C26": sub-panels are numbered from 1 to
# MAX_SUB_INDEX, as the label grammar reads them)
_SUB_NUMBER = "|".join(str(i) for i in range(MAX_SUB_INDEX, 0, -1))
_RE_LABEL_LIKE = re.compile(rf"[A-Za-z](?:{_SUB_NUMBER}|[′’']{{1,2}})?")


def _glossary_starts(text: str, markers: Sequence[_Candidate]) -> set[int]:
    """Starts of "comma" (or colon) markers that are the terms of a glossary of abbreviations ("C,
    collimation lens; DC, dichroic mirror; DMD, …; F, filter; L, lens", "OT, olfactory tubercle; …;
    D1, dopamine receptor D1; D2, …", "Ep: epidermis; Der: dermis; V: blood vessels; …; C:
    collagen"): items "term, meaning" or "term: meaning" separated by semicolons in one sentence, at
    least :data:`KEY_LIST_MIN_ITEMS` of them, one term or more no panel label could be ("DC"). Only
    the sentences of ``markers`` are read."""
    out: set[int] = set()
    if not markers:
        return out
    spans = split_sentences(text)
    starts = [a for a, _ in spans]
    seen: set[int] = set()
    for c in markers:
        k = bisect_right(starts, c.start) - 1
        if k < 0 or k in seen:
            continue
        seen.add(k)
        start, end = spans[k]
        terms: list[tuple[int, str]] = []
        pos = start
        for i, item in enumerate(text[start:end].split(";")):
            m = _RE_GLOSSARY_TERM.match(item) or (_RE_GLOSSARY_FIRST.match(item) if i == 0 else None)
            if m is not None:
                terms.append((pos + m.start(1), m.group(1)))
            pos += len(item) + 1
        if len(terms) >= KEY_LIST_MIN_ITEMS and not all(_RE_LABEL_LIKE.fullmatch(t) for _, t in terms):
            out.update(p for p, _ in terms)
    return out


def _matches(regex: re.Pattern[str], style: str, text: str) -> Iterator[re.Match[str]]:
    """``regex.finditer(text)``, except that a "comma" list that reads as no labels ("B, LipN and C,
    LipY": the list ran on into a name) gives its first label alone ("B,") and the search goes on
    after it (so "C," is found too)."""
    pos = 0
    while (m := regex.search(text, pos)) is not None:
        if style == "comma" and not _expand(m.group(1)):
            one = _RE_COMMA_ONE.match(text, m.start())
            pos = one.end() if one is not None else m.start() + 1
            if one is not None:
                yield one
            continue
        if m.end(1) > m.start(1) + 1 and not _expand(m.group(1)):
            # "pain and B: consistency …": a list that ran in from the words before reads as no
            # labels; the search goes on after its first word (so "B:" is found)
            pos = m.start() + 1
            continue
        pos = m.end()
        yield m


def _after_period(text: str, pos: int) -> bool:
    """The last non-space character before ``pos`` is a period."""
    q = _back_over_spaces(text, pos)
    return q > 0 and text[q - 1] == "."


def _bare_list_at(text: str, comma: re.Match[str]) -> bool:
    """A "comma" marker ("a,") whose comma only separates it from more labels read as one bare
    list before a capitalised word: "a, d Salinity. b, e Potential temperature." (the grid
    captions of Nature-family journals: one description for the panels of a row or column)."""
    for regex in (_RE_BARE, _RE_CLOSE):  # also "(…; d, h)": the list "d, h)", not "d," before "h)"
        m = regex.match(text, comma.start())
        if m is not None and m.end(1) > comma.end(1) and any(len(ords) > 1 for _, ords, _ in _expand(m.group(1))):
            return True  # not "A, slice YZ 386"
    return False


# a panel named where its description says what it shows: "The dot blots in B depict …", "The
# scatter plots in C and D summarize …" (upper-case letters: "in a show" is no label)
_RE_REFERENCE = re.compile(
    r"(?<=\b(?:in|of) )(?:panels? )?([A-Z](?:(?:, | and |[-–])[A-Z])*) (?=(?:show|depict|summari[sz]e|"
    r"illustrate|display|present|compare|represent|indicate)s?\b)"
)


# letters that name things in the image, not panels: "Different letters (a–c) indicate significant
# differences", "Lake basins are identified by letters (A–F)", "letters above the bars (a, b)"
_RE_LETTERS_BEFORE = re.compile(r"(?i)\bletter(?:s|ed|ing)?(?:\s+[\w-]+){0,2}\s*$")
LETTERS_CONTEXT_CHARS = 40  # how far back "letters" may stand before the bracket


# … or right after them: "a,b Different letters indicate significant differences"
_RE_LETTERS_AFTER = re.compile(r"(?i)\s+(?:[\w-]+\s+)?letters?\b")


def _names_letters(text: str, pos: int, end: int | None = None) -> bool:
    """The letters at ``pos`` (a bracket; a bare list ending at ``end``) are what the sentence calls
    letters (see _RE_LETTERS_BEFORE, _RE_LETTERS_AFTER), not panel labels."""
    if _RE_LETTERS_BEFORE.search(text[max(0, pos - LETTERS_CONTEXT_CHARS) : pos]) is not None:
        return True
    return end is not None and _RE_LETTERS_AFTER.match(text, end) is not None


def _closes_open_bracket(text: str, pos: int, floor: int) -> bool:
    """A bracket opened earlier in the sentence of ``pos`` is still open there."""
    depth = 0
    for i in range(pos - 1, _sentence_start(text, pos, floor) - 1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            if depth == 0:
                return True
            depth -= 1
    return False


# a lower-case letter (not the article "a", nor "i") listed after ", " / "; " / "and " / "for " /
# "at " (:data:`_RE_LISTED_BEFORE`, checked apart: lookbehinds at every position were slow) before
# the words of its description ("…, d absolute salinity (g kg−1), e potential density …",
# "distributions for b plane 1, c plane 2, …")
_RE_LISTED_BARE = re.compile(
    r"(?<= )([b-hj-z](?:[–-][b-hj-z])?)"
    r"(?= (?!(?:and|or|to|is|are|was|were|has|have|denotes?|represents?|indicates?)\b)[A-Za-z(0-9])"
)
# ... several of them together: "b Gibberellin receptor GID1 (TRpn_57024), c, d ORC3b (…). e, f …", "a,
# b, d–g Sea level pressure anomalies … and c, h–j the implied rates …"
_RE_LISTED_BARE_LIST = re.compile(
    r"(?<= )([b-hj-z](?:(?:, ?|[–-])[b-hj-z]){1,3})(?= (?!(?:and|or|to|as|is|are|was|were)\b)[A-Za-z(0-9])"
)
_RE_LISTED_BEFORE = re.compile(r"(?:[,;]|\band|\bor|\bfor|\bat) $")
# the first of letters listed inside a sentence, after its noun, "the", "with", "via" or a colon
# (:data:`_RE_LISTED_FIRST_BEFORE`): "curves of a GEMIN7, b OAS1, …", "for: a premeiosis … and b …",
# "presented as a malate efflux per root apex, or b …", "via a stool and b urine",
# "for the a meteorological winter … and b …" (not the Latin "a priori"); after any word when an
# article follows it ("Box plots showing a the leaf number …, and b the diameter …")
_RE_LISTED_FIRST = re.compile(r"(?<= )a(?= (?!(?:and|or|to|is|priori|posteriori|fortiori)\b)[A-Za-z(0-9])")
# letters listed each before a quantity: "at three different temperatures a 30 °C, b 50 °C, and c 70 °C"
_RE_LISTED_QUANTITIES = re.compile(r"a \d[^.;,]{0,20}, (?:and )?b \d")
_RE_LISTED_FIRST_BEFORE = re.compile(r"(?:\bof|\bfor|\bfrom|\bthe|\bwith|\bas|\bvia|:) $")


def _listed_at(text: str, pos: int, before: re.Pattern[str]) -> bool:
    """The words right before ``pos`` are those ``before`` asks for (it ends in " $")."""
    return before.search(text, max(0, pos - 6), pos) is not None


def _listed_first_at(text: str, pos: int) -> bool:
    """An "a" at ``pos`` opens letters listed in its sentence (:data:`_RE_LISTED_FIRST`)."""
    if _RE_LISTED_FIRST.match(text, pos) is None:
        return False
    if text[pos + 2 : pos + 3].isdigit():
        return _RE_LISTED_QUANTITIES.match(text, pos) is not None
    return _listed_at(text, pos, _RE_LISTED_FIRST_BEFORE) or text.startswith(("a the ", "a an "), pos)


_RE_LISTED_MARKER = re.compile(rf"(?<=, )({_LIST_DOT})(?:\s?[.:](?![\w.])|\)(?=\s))")
# the first item of a numbered scale: "0:", "0)", "(0)" (panels are numbered from 1)
_RE_SCALE_ZERO = re.compile(r"(?:(?<=[\s(\[;,])|^)(?:0\s?[:)]|\(0\))(?=\s)")


def _has_upper_roman_sub(list_text: str) -> bool:
    """A label list with an "AI"-style sub-panel (letter + upper-case roman; not "II" itself)."""
    return any(
        _RE_UPPER_ROMAN_SUB.fullmatch(t) and t.lower() not in _ROMAN
        for t in _RE_LIST_TOKEN.findall(list_text)
    )


# a capitalised word after a "comma" label that lost its period ("… recombinase B, Dark-field …")
_RE_CAPITALISED_AFTER = re.compile(r" [A-Z][a-z]")
# the word before a "comma" label that opens ("of A, …") or closes ("… and C, …") a labelled list
_RE_OF_BEFORE = re.compile(r"\s(?:of|in|for|from|and)\s$")
# an operator before a letter makes it an operand, not a label: "(placebo, Ca + D, Ca-D)"
_RE_OPERATOR_BEFORE = re.compile(r"[-+=×*/<>±&]\s$")


# the period of "vs." ends no sentence: the letter after it is the second item of a comparison
# ("… genes in Sp. LK vs. C. LK.": "C. LK", control, is no lost label)
_RE_VERSUS_BEFORE = re.compile(r"\bvs?\. $", re.IGNORECASE)


def _relaxed_ok(text: str, pos: int) -> bool:
    """A mid-sentence marker candidate must follow a space and a word/closing character, or an
    abbreviation's period ("… shown in S1A Fig. C. Motion patterns …"), but not "vs."."""
    return (
        pos >= 2
        and text[pos - 1] == " "
        and (text[pos - 2].isalnum() or text[pos - 2] in ")]%.")
        and _RE_VERSUS_BEFORE.search(text, max(0, pos - 8), pos) is None
    )


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


def _panel_word_candidates(text: str, floor: int) -> list[_Candidate]:
    """Labels named with the word "panel" at a sentence start: "Panel A, …", "In panel C, …".

    Used only for captions without any other label marker: in a labelled caption such a sentence
    is a note about panels already described ("In panels D–F, the GFP concentrates in …").
    """
    return _word_candidates(_RE_PANEL_WORD, text, floor, ("upper", "lower", "digit"), 1)


def _word_candidates(
    regex: re.Pattern[str],
    text: str,
    floor: int,
    families: Sequence[str],
    min_labels: int,
    *,
    inline: bool = False,
) -> list[_Candidate]:
    """Labels named after a word (``regex``'s group 1), read in ``families`` and listing at least
    ``min_labels``: at a sentence start as sentence-initial "dot" markers, or, ``inline``, anywhere
    as mid-sentence markers placed after their phrase."""
    style = "inline" if inline else "dot"
    out: list[_Candidate] = []
    for m in regex.finditer(text, floor):
        if not inline and _boundary_kind(text, m.start(), floor) not in ("start", "sentence"):
            continue
        for fam, ords, labels in _expand(m.group(1)):
            if fam in families and len(ords) >= min_labels:
                out.append(
                    _Candidate(m.start(), m.end(), style, fam, ords, labels, _weight(style, fam, ords), not inline)
                )
    return out


_RE_GRAPH_WORD = re.compile(rf"(?<=\bin )(?:[Gg]raphs?|[Pp]anels?)\s+({_LIST})(?=[,;.]?\s|[,;.]?$)")


def _graph_word_candidates(text: str, floor: int) -> list[_Candidate]:
    """Letters named mid-sentence after "in graph" / "in panel" ("presented in Graph A, performed
    …"), as inline markers placed after their phrase: only for captions with no other marker."""
    return _word_candidates(_RE_GRAPH_WORD, text, floor, ("upper", "lower"), 1, inline=True)


def _grid_word_candidates(text: str, floor: int) -> list[_Candidate]:
    """A grid's row or column named at a sentence start with its panels: "Left column a, d, g, j, m,
    CO2 follows …", "Top row (A–C): …". Only restatements (:func:`_restatements`): they name panels
    the chain has named already, one per row."""
    return _word_candidates(_RE_GRID_WORD, text, floor, ("upper", "lower"), 2)


def _position_candidates(text: str, floor: int) -> list[_Candidate]:
    """Position words opening a sentence: "Left panel:", "Top,", "(Left) …", "(bottom) …"."""
    out: list[_Candidate] = []
    matches = sorted(
        [*_RE_POSITION.finditer(text), *_RE_POSITION_PAREN.finditer(text)], key=lambda m: m.start()
    )
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
    if {a, b} <= _BARE_STYLES:
        return 0.0
    return SWITCH_PENALTY


def _filler_index(extras: Sequence[_Candidate], abbreviations: frozenset[int]) -> dict[tuple[str, int], list[int]]:
    """Starts of the single-label mid-sentence markers and of the inline lists, per (family,
    top-level label): the labels :func:`_fill_gaps` could supply between two chain markers."""
    index: dict[tuple[str, int], list[int]] = {}
    for c in extras:
        if c.start in abbreviations:
            continue
        if len(c.ords) == 1:
            index.setdefault((c.family, _top(c.ords[0])), []).append(c.start)
        elif c.style == "inline":
            for o in c.ords:
                index.setdefault((c.family, _top(o)), []).append(c.start)
    for starts in index.values():
        starts.sort()
    return index


def _gap_filled(fillers: Mapping[tuple[str, int], list[int]], fam: str, prev: _Candidate, c: _Candidate) -> bool:
    """Every top-level label skipped between chain markers ``prev`` and ``c`` is named by a
    mid-sentence marker between them ("B) Early induced …. Genes with increasing (C) or decreased
    (D) levels. (E) …")."""
    for top in range(_top(prev.ords[-1]) + 1, _top(c.ords[0])):
        starts = fillers.get((fam, top), [])
        i = bisect_left(starts, prev.end)
        if i >= len(starts) or starts[i] >= c.start:
            return False
    return True


def _family_chains(
    cands: Sequence[_Candidate], fillers: Mapping[tuple[str, int], list[int]] | None = None
) -> dict[str, tuple[float, list[_Candidate]]]:
    """Per family, the highest-scoring acceptable chain: strictly increasing labels, in text order,
    non-overlapping. Dynamic programme over (ordinals, style) states of earlier markers: linear in the
    candidates times the distinct markers of one family (small: markers repeat their labels).
    ``fillers`` (:func:`_filler_index`): a gap whose every label a mid-sentence marker between the
    two chain markers names costs no penalty (gap filling will supply them)."""
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
                if not _follows(prev_ords, c.ords, c.at_boundary and c.style != "inline"):
                    continue
                gap = _gap(prev_ords[-1], first)
                if gap and fillers and _gap_filled(fillers, fam, fam_cands[j], c):
                    gap = 0
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
    cands: Sequence[_Candidate],
    extras: Sequence[_Candidate] = (),
    abbreviations: frozenset[int] = frozenset(),
) -> tuple[float, list[_Candidate]]:
    """The chain to use, after gap filling with ``extras`` (see :func:`_fill_gaps`).

    A letter chain with two or more markers wins outright (roman numerals and digits are mostly
    sub-items inside lettered panels); otherwise the best-scoring family.
    """
    chains = {
        fam: (score, _fill_gaps(chain, extras, abbreviations) if extras else list(chain))
        for fam, (score, chain) in _family_chains(
            cands, _filler_index(extras, abbreviations) if extras else None
        ).items()
    }
    if not chains:
        return 0.0, []
    letter = [chains[f] for f in ("upper", "lower") if f in chains and len(chains[f][1]) >= 2]
    if letter:
        return max(letter, key=lambda x: (x[0], -x[1][0].start))
    fam = max(chains, key=lambda f: (chains[f][0], -FAMILY_PRIORITY.index(f)))
    return chains[fam]


def _fill_gaps(
    chain: Sequence[_Candidate], extra: Sequence[_Candidate], abbreviations: frozenset[int] = frozenset()
) -> list[_Candidate]:
    """Add mid-sentence markers ("(C)" inline, "… quantified B Size …") that supply labels missing
    between two chain markers, or that continue the chain by exactly the next label at its end
    (unless it reads as an abbreviation: "longitudinal (L) and circular (C) muscle")."""
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
        last_ords: tuple[int, ...] = prev.ords if prev else (0,)
        j = k
        while j < len(pool) and pool[j].start < hi_pos:
            c = pool[j]
            j += 1
            if c.start < last_end or c.end > hi_pos:
                continue
            if nxt is None and (not _is_next(last_ord, c.ords[0]) or c.start in abbreviations):
                continue  # at the tail only an exact continuation counts
            if nxt is None and prev is None:
                continue
            # a second inline list interleaved with the filler before it ("mCherry (c, e) as well
            # as c-Fos (d, f)") supplies its labels too
            interleaved = bool(out) and out[-1] is not prev and c.style == "inline" and _follows(last_ords, c.ords)
            # an inline list interleaved with the chain marker after it ("…, (a, d) miR1862d and its
            # target. (b, e) …") supplies its labels too
            before_next = c.ords[-1] < hi_ord or (
                nxt is not None
                and len(c.ords) > 1
                and c.style == "inline"
                and _follows(c.ords, nxt.ords)
                and not {_top(o) for o in c.ords} & {_top(o) for o in nxt.ords}
            )
            if (last_ord < c.ords[0] or interleaved) and before_next:
                out.append(c)
                last_ord, last_end, last_ords = max(last_ord, c.ords[-1]), c.end, c.ords
        if nxt is not None:
            out.append(nxt)
        prev = nxt if nxt is not None else prev
    return out


def _abbreviations(text: str, cands: Sequence[_Candidate]) -> frozenset[int]:
    """Starts of inline letters that abbreviate the words before them, next to another such letter
    of their sentence that is out of panel order: "… longitudinal muscle (L) and circular muscle
    (C)" names two muscles, not panels L and C ("axial (A) and coronal (B)" stays: increasing), or
    far from the inline letters of their sentence beside them ("(A) … region (R) …"; not "(h) southern
    ice, and (i) mixed layer" after (a)-(g), nor "mean (a) CO2, (b) …, (c) …": consecutive panels).
    Linear in the candidates (a running maximum and minimum per sentence)."""
    groups: dict[tuple[str, int], list[_Candidate]] = {}
    letters: dict[tuple[str, int], list[_Candidate]] = {}  # every inline letter of the sentence
    for c in cands:
        if c.style != "inline" or len(c.labels) != 1 or len(c.labels[0]) != 1:
            continue
        key = (c.family, _sentence_start(text, c.start, 0))
        letters.setdefault(key, []).append(c)
        words = _RE_WORDS_BEFORE.findall(text[max(0, c.start - 60) : c.start])[-ABBREVIATION_WORDS:]
        if any(w[0].lower() == c.labels[0] for w in words):
            groups.setdefault(key, []).append(c)
    out: set[int] = set()
    for key, group in groups.items():
        group.sort(key=lambda c: c.start)
        tops = [_top(c.ords[0]) for c in group]
        n = len(tops)
        # the highest of these letters up to each one, the lowest from each one on (order breaks)
        highest = list(accumulate(tops, max))
        lowest = list(accumulate(reversed(tops), min))[::-1]
        sentence = sorted(letters[key], key=lambda c: c.start)
        where = {c.start: j for j, c in enumerate(sentence)}
        for i, t in enumerate(tops):
            j = where[group[i].start]
            far = (j > 0 and abs(t - _top(sentence[j - 1].ords[0])) > ABBREVIATION_MAX_STEP) or (
                j + 1 < len(sentence) and abs(_top(sentence[j + 1].ords[0]) - t) > ABBREVIATION_MAX_STEP
            )
            before = i > 0 and highest[i - 1] >= t
            after = i < n - 1 and lowest[i + 1] <= t
            if (before or after or far) and n > 1:
                out.add(group[i].start)
    return frozenset(out)


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
        if c.style == "bare" and c.family == "lower" and c.ords[0] == SUB and c.after_period:
            # "Title. a Randomly selected trajectories …": no sentence opens with "a Foo" (after a
            # colon one may: "Schematic: a Cre-dependent vector")
            return True
        return c.style in STRONG_STYLES or (c.style == "inline" and len(c.ords) >= 2 and c.family != "digit")
    bare = all(c.style in _BARE_STYLES for c in chain)
    ranges = all(c.style == "bare_list" for c in chain)
    if bare and not ranges and chain[0].family != "lower" and len(chain) < 3:
        # "A Western blot … B-cell counts …": two upper-case bare letters count only as "A … B …",
        # each opening a sentence with its own description (two sentence-opening lists or ranges,
        # "B-C PBMC cells …. G-H ELISA assays …", are markers however many letters lie between)
        tops = sorted({_top(o) for c in chain for o in c.ords})
        return len(chain) == 2 and tops == list(range(1, len(tops) + 1))
    return True


# ---------------------------------------------------------------------------------------------
# Segments
# ---------------------------------------------------------------------------------------------


def _bracketed_semicolons(text: str) -> set[int]:
    """Positions of the semicolons inside a closed pair of round brackets ("(lane 1: marker; lane
    1–4 enzyme)", "(psu; a, e)"): a note's clauses, not the caption's. An unclosed bracket keeps
    none."""
    out: set[int] = set()
    pending: list[list[int]] = []
    if ";" not in text and "；" not in text:
        return out
    for i, ch in enumerate(text):
        if ch == "(":
            pending.append([])
        elif ch == ")" and pending:
            out.update(pending.pop())
        elif ch in ";；" and pending:
            pending[-1].append(i)
    return out


def _glued_semicolon(text: str, i: int) -> bool:
    """A ";" with a word character right after it is part of a name, not a clause's end: gene and
    allele names ("gs1;2", "OsTIP2;6", "Vmat2lox/lox;NEX-Cre", "unc-116;unc-104")."""
    return text[i] == ";" and i + 1 < len(text) and text[i + 1].isalnum()


@lru_cache(maxsize=4)
def _sentence_breaks(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Positions right after a sentence-ending mark (``.;!?``, not ":"; a period only before a
    space and not closing an abbreviation): ``(starts, ends)``. ``starts`` omits a period at the
    very end of the text, ``ends`` keeps it. One pass; the lookups below bisect these lists, so
    sentence queries stay logarithmic on 7,000-token captions."""
    starts: list[int] = []
    ends: list[int] = []
    n = len(text)
    inside = _bracketed_semicolons(text)
    for i, ch in enumerate(text):
        if ch in _SENTENCE_PUNCT and ch not in ":：" and i not in inside and not _glued_semicolon(text, i):
            starts.append(i + 1)
            ends.append(i + 1)
        elif ch == "." and (i + 1 == n or text[i + 1] == " ") and not is_abbreviation_stop(text, i):
            if i + 1 < n:
                starts.append(i + 1)
            ends.append(i + 1)
    return tuple(starts), tuple(ends)


def _before_semicolons(text: str, start: int, floor: int) -> int:
    """``start`` (a sentence start) moved back over clauses that end in ";" and hold no marker (none
    before ``floor``): "Locations of new isolates …; locations of previous ones are shown in black
    (D)." is one description of D."""
    while start > floor:
        head = text[:start].rstrip(" ")
        if not head.endswith(";"):
            break
        prev = _sentence_start(text, len(head) - 1, floor)
        if prev >= start or not text[floor:prev].strip():
            break  # a marker ends in that clause (only spaces between it and the clause)
        start = prev
    return start


def _sentence_start(text: str, pos: int, floor: int) -> int:
    """Start of the sentence containing ``pos``, not before ``floor`` (leading spaces skipped)."""
    starts = _sentence_breaks(text)[0]
    k = bisect_right(starts, pos)
    i = starts[k - 1] if k and starts[k - 1] > floor else floor
    while i < pos and text[i] == " ":
        i += 1
    return i


@dataclass
class _Opening:
    """Where one segment starts, the labels it names and the span of its markers."""

    start: int
    labels: list[str]
    marker_start: int
    marker_end: int


def _next_word(text: str, pos: int) -> str:
    """The word right after ``pos`` (spaces skipped), lower-cased; "" when punctuation follows."""
    m = _RE_WORD.match(text, pos)
    return m.group(1).lower() if m else ""


def _lower_word_after(text: str, pos: int) -> bool:
    """The word after ``pos`` is all lower case ("after", "per"; not "Trypan", "lacZ", "3D")."""
    m = _RE_WORD.match(text, pos)
    return bool(m) and m.group(1).islower()


def _is_prefix(text: str, c: _Candidate) -> bool:
    """An inline marker placed *before* the phrase it labels: "for (A) WT mice, (B) KO mice"
    (not "dorsal (A), ventral (B) views", "(A) and", "image (B) shows")."""
    word = _next_word(text, c.end)
    return bool(word) and word not in _POSTFIX_WORDS


_PREPOSITIONS = frozenset({"in", "on", "at", "with", "without", "for", "from", "to", "by"})


def _after_clause_mark(text: str, pos: int) -> bool:
    """A comma, semicolon or colon (spaces aside) right before ``pos``."""
    q = _back_over_spaces(text, pos)
    return q > 0 and text[q - 1] in ",;:"


def _prefixes(text: str, markers: Sequence[_Candidate]) -> list[bool]:
    """Per marker, whether it is a label placed before its phrase (:func:`_is_prefix`), also when
    its phrase opens with a preposition inside a comma list of such phrases: "Relative expression
    of OkHMGR (A) in different tissues, (B) in response to methyl jasmonate, (C) in response to
    …" (not "in dorsal (A), in ventral (B) views", each label after its phrase)."""
    prefix = [c.style == "inline" and _is_prefix(text, c) for c in markers]
    prep = [
        c.style == "inline" and not prefix[k] and _next_word(text, c.end) in _PREPOSITIONS
        for k, c in enumerate(markers)
    ]
    listed = [prep[k] and _after_clause_mark(text, c.start) for k, c in enumerate(markers)]
    out = list(prefix)
    for k, c in enumerate(markers):
        if listed[k]:
            out[k] = True
        elif prep[k] and k + 1 < len(markers) and listed[k + 1]:
            between = text[c.end : markers[k + 1].start]
            out[k] = _same_sentence(text, c.end, markers[k + 1].start) and between.rstrip().endswith(",")
    for k in range(1, len(markers) - 1):
        c = markers[k]
        if not out[k] and out[k - 1] and out[k + 1] and c.style == "inline" and text.startswith(", ", c.end):
            # "(b) surface air temperatures, (c), Atlantic … strengths, (d) ocean CO2 uptakes": a stray
            # comma after a label inside a list of labels before their phrases
            out[k] = (
                _after_clause_mark(text, c.start)
                and _next_word(text, c.end + 1) not in ("", *_POSTFIX_WORDS)
                and _same_sentence(text, markers[k - 1].end, markers[k + 1].start)
            )
    return out


def _same_sentence(text: str, a: int, b: int) -> bool:
    """No sentence boundary between positions ``a`` and ``b``."""
    return not text[a : _sentence_start(text, b, a)].strip()


def _after_heading_colon(text: str, start: int, pos: int) -> int:
    """After the last "heading: " (a colon before a capital letter) in ``text[start:pos]``, else ``start``."""
    cut = start
    i = text.find(": ", start, pos)
    while i >= 0:
        if i + 2 < pos and text[i + 2].isupper():
            cut = i + 2
        i = text.find(": ", i + 1, pos)
    return cut


def _prefix_runs(text: str, markers: Sequence[_Candidate], prefix: Sequence[bool]) -> list[int]:
    """Per marker, the length of its run of consecutive labels-before-phrase in one sentence."""
    out = [0] * len(markers)
    k = 0
    while k < len(markers):
        j = k
        while prefix[k] and j + 1 < len(markers) and prefix[j + 1]:
            if not _same_sentence(text, markers[j].end, markers[j + 1].start):
                break
            j += 1
        for i in range(k, j + 1):
            out[i] = j - k + 1 if prefix[k] else 0
        k = j + 1
    return out


def _listed(
    text: str, markers: Sequence[_Candidate], prefix: Sequence[bool], run: Sequence[int], k: int
) -> bool:
    """Markers ``k`` and ``k + 1`` are items of one list of labels placed before their phrases:
    three or more in a run, or two separated by a comma or semicolon ("(A) WT mice, (B) KO mice";
    not "induced (B) JA and (C) JA-Ile accumulation") or by nothing but the first one's phrase
    ("(a) cultured in the absence of host extract (b) cultured in …", :data:`_RE_UNJOINED`)."""
    if k + 1 >= len(markers) or not (prefix[k] and prefix[k + 1]) or run[k] < 2:
        return False
    if not _same_sentence(text, markers[k].end, markers[k + 1].start):
        return False
    between = text[markers[k].end : markers[k + 1].start]
    return run[k] >= 3 or "," in between or ";" in between or _RE_UNJOINED.fullmatch(between) is not None


def _paired(
    text: str, markers: Sequence[_Candidate], prefix: Sequence[bool], run: Sequence[int], k: int
) -> bool:
    """Markers ``k`` and ``k + 1`` are the two labels of one sentence, each placed before its phrase,
    the first phrase ending in "and" / "or", and no verb after them: "(a) CS and (b) CS/rosemary …
    films", "for (A) 24 hours and (B) 48 hours" (not "Levels of (A) IL-6 and (B) TNF protein in serum
    were measured.", one subject of two panels)."""
    if k + 1 >= len(markers) or not (prefix[k] and prefix[k + 1]) or run[k] != 2:
        return False
    first, second = markers[k], markers[k + 1]
    if not _same_sentence(text, first.end, second.start):
        return False
    if not _RE_PAIR_JOIN.search(text, first.end, second.start):
        return False
    rest = _RE_BRACKETED.sub(" ", text[second.end : _sentence_end(text, second.end)])
    return not RE_FINITE_VERB.search(rest)  # (a verb inside brackets is a note's: "(thin curves show …)")


_RE_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
# the phrase of a label-before-phrase that runs into the next label with no separator ("(a) cultured
# in the absence of host extract (b) cultured in …"): three words or more, the last no conjunction
# or preposition
_RE_UNJOINED = re.compile(r" (?:[^\s,;]+ ){2,}?(?!(?:and|or|of|in|on|at|to|for|from|with|by|the|a|an|vs)\b)[^\s,;()]+ ")
_RE_PAIR_JOIN = re.compile(r"\S\s+(?:and|or)\s*$")
_RE_CONJUNCT = re.compile(r" +((?:and|or) )")
_RE_CONTRAST = re.compile(r"[ ,]((?:while|whereas) )")


def _closes_sentence(text: str, pos: int) -> bool:
    """Only a sentence end (or the caption's end) follows ``pos``."""
    rest = text[pos:].lstrip(" ")
    return not rest or rest[0] in ".;"


def _opens_clause(text: str, start: int) -> bool:
    """A segment starting at ``start`` opens a clause of its sentence: after a comma or semicolon,
    or with a conjunction ("Map (A), and photographs …", "…, Km (B); the maximum rate …")."""
    return text[:start].rstrip(" ")[-1:] in (",", ";") or text.startswith(("and ", "or "), start)


def _clause_start(
    text: str, prev: _Candidate, c: _Candidate, *, enumerating: bool = False, list_cut: bool = False
) -> int | None:
    """Start of the clause of a trailing label after a previous trailing label of its sentence,
    when a comma or semicolon closes the previous one's clause and the new clause is long enough
    to be a description of its own: "… in females (A), and reduced levels in males (B)" -> "and";
    or, when the sentence is ``enumerating`` panels already (the previous label's clause did not
    open the sentence), when a conjunction follows the previous label and the new label ends the
    sentence after a phrase of its own: "Map (A), and photographs of dry heath (B) and the Barrow
    wet meadow (C)." -> "and" (not "… for the sex effect (A) and for the location effect (B).",
    one description of two panels, nor "total delay (A) and nuclear delay (B) diagrams …"). When
    the previous label's clause was itself cut off a comma list of them (``list_cut``), the phrase
    after the conjunction is the list's last item, however short: "…, Functional Assessment of
    Chronic Illness Therapy-Fatigue (FACIT-F) (f) and SF-36 domain scores (g);" -> "and" (a list
    is cut at every item or none, :func:`_short_comma_item`).
    """
    i = prev.end
    if i >= len(text):
        return None
    contrast = max(_RE_CONTRAST.finditer(text, i, c.start), key=lambda m: m.start(), default=None)
    if contrast is not None and _closes_sentence(text, c.end):
        # "… show the decline of B-cells (in %) while the percentage of Tregs was unaltered (D).":
        # a contrasting clause closed by its own label describes that panel
        return contrast.start(1)
    if text[i] not in ",;":
        m = _RE_CONJUNCT.match(text, i)
        if m is None or not enumerating or not _closes_sentence(text, c.end):
            return None
        return m.start(1) if list_cut or len(text[m.end() : c.start].split()) >= CONJUNCT_MIN_WORDS else None
    j = i + 1
    while j < c.start and text[j] == " ":
        j += 1
    min_words = 1 if text[i] == ";" else CLAUSE_MIN_WORDS
    return j if len(text[j : c.start].split()) >= min_words else None


def _comma_items(text: str, markers: Sequence[_Candidate], k: int) -> Iterator[str]:
    """The items of the comma list of trailing labels around marker ``k``: the text between each
    inline marker and the next one of its sentence, where a comma follows the first
    ("DLBP vs. LDH (B), DLBP vs. N (C), CLBP of unknown origin vs. LDH (D), …" -> "DLBP vs. N",
    "CLBP of unknown origin vs. LDH", …)."""

    def linked(i: int) -> bool:
        a, b = markers[i], markers[i + 1]
        return (
            a.style == b.style == "inline"
            and text[a.end : a.end + 1] == ","
            and _same_sentence(text, a.end, b.start)
        )

    first = k
    while first > 0 and linked(first - 1):
        first -= 1
    i = first
    while i + 1 < len(markers) and linked(i):
        yield text[markers[i].end + 1 : markers[i + 1].start]
        i += 1


def _short_comma_item(text: str, markers: Sequence[_Candidate], k: int) -> bool:
    """Some item of the comma list around marker ``k`` is too short to be a clause of its own
    (:data:`CLAUSE_MIN_WORDS`): the list is one description of all its panels, not cut at the
    items long enough ("… (A), DLBP vs. LDH (B), …, CLBP of unknown origin vs. LDH (D), …" had been
    cut before D alone)."""
    return any(len(item.split()) < CLAUSE_MIN_WORDS for item in _comma_items(text, markers, k))


def _continues_restated_list(text: str, overview: _Candidate, prev: _Candidate, c: _Candidate) -> bool:
    """``c`` (before its phrase) takes up the next letter after the restated marker ``prev`` in
    its sentence, after a comma, semicolon or conjunction, both within the chain's ``overview``
    marker before them: the list "(a) hydro, (b) wind, …" restating the overview "a–d.", or
    "(D–F) The levels … were determined. (D) Representative immunoblots and (E,F) quantification
    …"."""
    return (
        {*prev.ords, *c.ords} <= set(overview.ords)
        and _top(c.ords[0]) == _top(prev.ords[-1]) + 1
        and _same_sentence(text, prev.end, c.start)
        and text[: c.start].rstrip().endswith((",", " and", " or", ";"))
    )


OPENING_PHRASE_MAX_WORDS = 5


def _opens_its_sentence(
    text: str, c: _Candidate, top: int, chain: Sequence[_Candidate] = (), k: int = 0
) -> bool:
    """An inline list of labels right after a short opening phrase, before a comma, and the only
    bracket of the caption's labels (up to ``top``) in its sentence: "In the first column (A and
    C), Alcian Blue staining …", "In (a, b), the shaded color … depth (z) bin …", "Panels (c, f, i)
    depict …" describe those panels (not "Expression of twi (A, E, H, L), sim (B, F, I, M), …").
    A single label only after "In" or "In panel", naming one of the panels the sentence of
    ``chain[k - 1]`` (the chain's marker before it) describes: "… (a) and the other patients (b).
    In (a), the numbers of patients …. In (b), …" (not "(C–E) HEK293 cells …. In (A), cells were
    mock-transfected …")."""
    if ";" in text[c.start : c.end]:
        return False  # "salinity (psu; a, e), …": a note, then the labels of the phrase before it
    start = _sentence_start(text, c.start, 0)
    opening = [w.lower() for w in text[start : c.start].split()]
    if len(opening) > OPENING_PHRASE_MAX_WORDS:
        return False
    if not text.startswith(",", c.end) and opening not in (["panel"], ["panels"]):
        return False  # "Panels (c, f, i) depict differences …" needs no comma
    end = _sentence_end(text, c.end)
    if len(c.ords) < 2:
        if opening not in (["in"], ["in", "panel"]) or not k or not set(c.ords) <= _sentence_ords(text, chain, k - 1):
            return False  # "In (a), …", "In panel (A), …" only
        # no other label up to the sentence's period either, past its semicolons: "In (C), **P =
        # 0.0029; in (D), …" is one note on both
        spans = split_sentences(text)
        end = max(end, spans[bisect_right([a for a, _ in spans], c.start) - 1][1])
    return not any(o <= top for o in _named_letters(text[c.end : end]))


def _sentence_ords(text: str, chain: Sequence[_Candidate], i: int) -> frozenset[int]:
    """The ordinals the chain's markers name in the sentence of ``chain[i]``."""
    start = _sentence_start(text, chain[i].start, 0)
    return frozenset(o for m in chain if _sentence_start(text, m.start, 0) == start for o in m.ords)


def _notes_every_panel(text: str, c: _Candidate, chain: Sequence[_Candidate], top: int) -> bool:
    """An inline list that closes its sentence, after the chain's last marker, naming every panel
    from the first to the last, the only bracket of labels in its sentence: "Corresponding
    representative dotplots or histograms are displayed on the right (A-E)." is a note for all."""
    tops = sorted({_top(o) for o in c.ords})
    if len(tops) < 3 or tops[0] != 1 or tops[-1] != top or c.start < chain[-1].end:
        return False
    if not _closes_sentence(text, c.end):
        return False
    start = _sentence_start(text, c.start, 0)
    return not any(o <= top for o in _named_letters(text[start : c.start]))


def _restatements(text: str, cands: Sequence[_Candidate], chain: Sequence[_Candidate]) -> list[_Candidate]:
    """Markers outside the chain that still open a segment of their own.

    The chain only increases, but captions restate labels: an overview before its panels
    ("(A–D) Hemilineage 1A. (A, B) The 1A neurons …"), a note for several panels after them
    ("(B–F) Data are mean ± SEM."), a repeated marker, genotypes listed per panel at the end. Kept:
    sentence-initial markers of the chain's family whose labels lie within the chain's range, in a
    strong style (or a list in the chain's own style), and inline markers placed before their
    phrase next to chain markers of that kind ("with (A/B) NaCl, (C) KCl, …").
    """
    if not chain or chain[0].family == "position":
        return []
    fam = chain[0].family
    top_max = max(_top(o) for c in chain for o in c.ords)
    styles = {c.style for c in chain}
    chain_starts = [c.start for c in chain]
    noted = _bracketed_semicolons(text)
    out: list[_Candidate] = []
    for c in sorted(cands, key=lambda c: (c.start, -c.weight)):
        if c.family != fam or any(_top(o) > top_max + 1 for o in c.ords):
            continue
        beyond = any(_top(o) > top_max for o in c.ords)
        k = bisect_left(chain_starts, c.end)  # chain[k]: the first chain marker from c's end on
        # a list right after its sentence's opening words (the label after the chain's last counts
        # among the other brackets of that sentence when the list names it too)
        opening = c.style == "inline" and _opens_its_sentence(text, c, top_max + 1 if beyond else top_max, chain, k)
        if beyond and not opening:
            continue  # only a sentence's opening list may name the next label too ("Panels (c, f, i) …")
        if (k and chain[k - 1].end > c.start) or (out and out[-1].end > c.start):
            continue  # overlaps a chain marker or a restatement already kept
        if _back_over_spaces(text, c.start) - 1 in noted:
            continue  # "e−h As in a−d, … (f: p = 0.2; h: p = 0.17, n = 3)": a clause of a bracketed note
        if opening and not beyond and k and set(chain[k - 1].ords) <= set(c.ords):
            if not (out and out[-1].start > chain[k - 1].start):
                continue  # "(C, D) …. In (C, D), see inset …": a note on the panels just described
        if c.at_boundary and c.style != "inline":
            if (
                c.style not in STRONG_STYLES
                and not (c.style in styles and len(c.ords) > 1)
                and not (k and _restates_overview(chain[k - 1], out[-1] if out else None, c))
                and not _continues_restated_walk(chain[k - 1] if k else None, out[-1] if out else None, c)
            ):
                continue
        elif c.style == "inline" and _is_prefix(text, c):
            nxt = chain[k] if k < len(chain) else None
            if k and out and _continues_restated_list(text, chain[k - 1], out[-1], c):
                pass  # "a–d. … facilities: (a) hydro, (b) wind, (c) biopower, and (d) …"
            elif nxt is None or nxt.style != "inline" or not _is_prefix(text, nxt):
                continue
            elif not _same_sentence(text, c.end, nxt.start):
                continue
        elif not (opening or (c.style == "inline" and _notes_every_panel(text, c, chain, top_max))):
            continue
        out.append(c)
    return out


def _overview_walks(
    text: str, cands: Sequence[_Candidate], chain: Sequence[_Candidate], restated: Sequence[_Candidate]
) -> list[_Candidate]:
    """Inline markers of the sentences that walk through an overview's labels one after another,
    each sentence naming the labels after the previous one's ("a–e Mice were orally vaccinated
    …. Levels of total serum anti-HA IgG (a), IgG1 and IgG2a (b), n = 8 …. Levels of IgA … (c).
    Levels of serum IgG … (d)."): they open a segment per sentence, as a restated marker would.

    Only for an overview (a sentence-initial marker of two labels or more) whose own sentence names
    none of its labels again, and where two sentences or more naming labels of the family walk on
    from the overview's first label without a gap up to the chain's next marker, or to a sentence
    that names other panels too ("Data were analyzed by … (a–f, h, i)"); a restated marker in the
    span is a step of the walk ("(E–I) NRCMs were pretreated …. (E) MTT assays …. Annexin V staining
    (F) and quantitation (G) …"). A sentence naming every label of the overview is a note on all of
    them ("The genotype key in (B) applies to both (B) and (C).") and no walk.
    """
    out: list[_Candidate] = []
    starts = sorted(c.start for c in chain)
    for c in chain:
        if len(c.ords) < 2 or not c.at_boundary or c.style == "inline":
            continue
        k = bisect_right(starts, c.start)
        end = starts[k] if k < len(starts) else len(text)
        own_end = _sentence_end(text, c.end)
        inline = sorted(
            (x for x in cands if x.family == c.family and x.style == "inline" and c.end <= x.start and x.end <= end),
            key=lambda x: (x.start, -x.weight),
        )
        if any(x.start < own_end for x in inline):
            continue  # "(C–H) … in APP mice (C, arrowheads) …": the overview describes them itself
        # restated markers in the span walk along ("(E–I) …. (E) MTT assays …. Annexin V (F) …")
        steps_in_span = sorted([*(r for r in restated if c.end <= r.start < end), *inline], key=lambda x: x.start)
        sentences: dict[int, list[_Candidate]] = {}
        last_end = -1
        for x in steps_in_span:
            if x.start >= last_end:
                sentences.setdefault(_sentence_start(text, x.start, 0), []).append(x)
                last_end = x.end
        overview = sorted({_top(o) for o in c.ords})
        nxt, walk, steps = overview[0], [], 0
        for group in sentences.values():
            tops = sorted({_top(o) for x in group for o in x.ords})
            if not set(tops) <= set(overview):
                break  # a note naming other panels too ("Data were analyzed by … (a–f, h, i) …")
            if tops[0] != nxt or tops == overview:
                steps = 0
                break
            walk += group
            nxt, steps = tops[-1] + 1, steps + 1
        if steps >= 2:
            out += [x for x in walk if x.style == "inline" and x not in restated]
    return out


def _restates_overview(overview: _Candidate, last: _Candidate | None, c: _Candidate) -> bool:
    """``c`` opens a sentence naming letters of the chain marker ``overview`` before it, that names
    two or more, in order after any earlier such restatement, both bare (the Nature style): "c, d
    Images of the MOSD wrapped around nerves. c Mouse C7 nerve. d Mouse sciatic nerve." (the overview,
    then a segment per panel; not "(F–H) Adult nervous systems …. H shows a higher power view …")."""
    if overview.style not in _BARE_STYLES or c.style not in _BARE_STYLES:
        return False
    if len(overview.ords) < 2 or not set(c.ords) <= set(overview.ords):
        return False
    return last is None or last.start < overview.start or last.ords[-1] < c.ords[0]


def _continues_restated_walk(before: _Candidate | None, last: _Candidate | None, c: _Candidate) -> bool:
    """``c`` opens a sentence with the label right after those of the restated bare list ``last``,
    itself after the chain marker ``before``: the caption walks through its panels a second time,
    "…. e Weighted combined baseline score. a-d Treatment group baselines. e Weighted combined
    baseline across all treatment groups." (the second "e" opens a segment as "a-d" does)."""
    if last is None or last.style not in _BARE_STYLES or c.style not in _BARE_STYLES or len(last.ords) < 2:
        return False
    return (before is None or last.start > before.start) and _is_next(last.ords[-1], c.ords[0])


def _continues_sub_panel(prev: _Candidate | None, c: _Candidate) -> bool:
    """``c`` opens the next sub-panel of the panel ``prev`` opened a sub-panel of ("A1 …" "A2 …")."""
    if prev is None or prev.style == "inline" or c.style == "inline":
        return False
    last, first = prev.ords[-1], c.ords[0]
    return _top(last) == _top(first) and last % SUB != 0 and first % SUB != 0 and first > last


def _build_segments(text: str, markers: Sequence[_Candidate], floor: int) -> list[Segment]:
    """Segments from the chosen markers (chain and restatements, in text order)."""
    opens: list[_Opening] = []
    prefix = _prefixes(text, markers)
    run = _prefix_runs(text, markers, prefix)
    prev_floor = floor
    prev: _Candidate | None = None
    paired = False  # the previous marker opened the first clause of a pair (:func:`_paired`)
    led = False  # the open segment was opened by a sentence-initial marker in this sentence
    cut_item: _Candidate | None = None  # the last trailing label whose comma-list item was cut off
    for k, c in enumerate(markers):
        joint = False
        if (
            c.style == "inline"
            and opens
            and set(c.labels) <= set(opens[-1].labels)
            and _same_sentence(text, opens[-1].marker_end, c.start)
        ):
            # "(B, C, E) Localization … either X (B, C) or Y (E) mRNA.": labels the open segment's
            # marker already named, in its sentence, refer back to it
            continue
        if (
            c.style == "inline"
            and prev is not None
            and prev.style != "inline"
            and all(o % SUB for o in c.ords)
            and {_top(o) for o in c.ords} <= {_top(o) for o in prev.ords}
        ):
            # "(A) Extracellular recordings … (A1). LFPs evoked by photostimulation (A2, blue lines)
            # …": sub-panels named inside their panel's description belong to it
            continue
        if c.style == "inline":
            sentence = _sentence_start(text, c.start, prev_floor)
            same = prev is not None and not text[prev_floor:sentence].strip()
            nxt = markers[k + 1] if k + 1 < len(markers) else None
            clause = (
                _clause_start(
                    text,
                    prev,
                    c,
                    enumerating=bool(opens) and _opens_clause(text, opens[-1].start),
                    list_cut=cut_item is prev,
                )
                if same and prev is not None and prev.style == "inline"
                else None
            )
            if clause is not None and text[prev.end] == "," and _short_comma_item(text, markers, k):
                clause = None  # a list cut at some items only: one description of all its panels
            listed = k > 0 and (_listed(text, markers, prefix, run, k - 1) or paired)
            paired = False
            if same and (led or listed):
                # "(B) Intracellular lactate (C) external acidification", "for (A) WT, (B) KO, (C)":
                # a label before its phrase opens its own clause-level panel
                seg_start = c.start
            elif (
                not opens
                and nxt is not None
                and ((prefix[k] and nxt.style != "inline") or _listed(text, markers, prefix, run, k))
            ):
                # "Spectra of X showing (A) Y; (B) Z", "for (A) X, (B) Y": the text before the first
                # label is the lead
                seg_start = c.start
            elif not opens and _paired(text, markers, prefix, run, k):
                # "SEM images of (a) CS and (b) CS/rosemary … films": the caption's first two labels,
                # each before its phrase, joined by "and": the lead, then one clause per panel
                seg_start, paired = c.start, True
            elif clause is not None:
                seg_start = clause
                cut_item = c if text[prev.end] == "," else None
            elif same:
                seg_start, joint = sentence, True
            elif (
                prefix[k]
                and prev is not None
                and (prev.style != "inline" or (opens and opens[-1].start == prev.start))
                and len(text[sentence : c.start].split()) > TRAILING_LABEL_MAX_WORDS
                and (nxt is None or not _same_sentence(text, c.end, nxt.start))
                and not _lower_word_after(text, c.end)
            ):
                # "… with vehicle (B) Trypan blue assay …": a leading label that lost its period (its
                # description opens like a sentence; "urea and sodium (C, D) after 4 weeks" ends a phrase),
                # also after an inline label that lost its own ("… inhibition (E) C. limon …. Only cell
                # fragments … were seen (F) P. citrosum …")
                seg_start = c.start
            elif not opens:
                # "Analyses of X: Heatmap after (A) and before (B) …": a heading before a colon is lead
                seg_start = _after_heading_colon(text, sentence, c.start)
            else:
                seg_start = _before_semicolons(text, sentence, prev_floor)
            led = led and same and not joint
        else:
            seg_start = _colon_heading_start(text, c, prev_floor) if opens else c.start
            joint = _continues_sub_panel(prev, c)
            led = True
        prev = c
        if opens and (joint or seg_start <= opens[-1].start):
            # same sentence as the previous segment's start: a joint description
            opens[-1].labels.extend(c.labels)
            opens[-1].marker_end = c.end
        else:
            opens.append(_Opening(seg_start, list(c.labels), c.start, c.end))
        prev_floor = max(prev_floor, c.end)
    segments: list[Segment] = []
    title = text[:floor].strip()
    if title:
        segments.append(Segment([], title))
    if opens:
        segments.extend(_lead_segments(text, floor, opens[0].start, markers))
    elif text[floor:].strip():
        segments.append(Segment([], text[floor:].strip()))
    pending_labels: list[str] = []
    pending_start: int | None = None
    for k, op in enumerate(opens):
        e = opens[k + 1].start if k + 1 < len(opens) else len(text)
        # a segment's own text: before its first marker (a label after its phrase) or after its last
        own = (text[op.start : op.marker_start] + " " + text[op.marker_end : max(e, op.marker_end)]).strip(
            " .,;:"
        )
        if own in _BARE_CONJUNCTIONS:
            own = ""  # "(B) and (C) The evolution …", "b) and c) give …": one description of both
        if not own and k + 1 < len(opens):
            # label(s) with no text of their own: they share the next segment's description
            pending_labels.extend(op.labels)
            pending_start = op.start if pending_start is None else pending_start
            continue
        seg_text = text[(pending_start if pending_start is not None else op.start) : e].strip()
        all_labels = _dedupe(pending_labels + op.labels)
        pending_labels, pending_start = [], None
        if not own and segments and segments[-1].labels:
            # trailing marker without text: attach to the previous segment
            last = segments.pop()
            segments.append(Segment(_dedupe(last.labels + all_labels), (last.text + " " + seg_text).strip()))
            continue
        if (
            k
            and segments
            and segments[-1].labels == all_labels
            and any(ch in _PRIMES for o in (opens[k - 1], op) for ch in text[o.marker_start : o.marker_end])
        ):
            # "(C–C″) Quantification …. (C–C′) Example image …. (C) GFP fluorescence. (C′) TH
            # staining.": primed sub-panels of one panel, one after the other, are that panel's
            last = segments.pop()
            segments.append(Segment(all_labels, (last.text + " " + seg_text).strip()))
            continue
        segments.append(Segment(all_labels, seg_text))
    return segments


def _colon_heading_start(text: str, c: _Candidate, floor: int) -> int:
    """Where the segment of the sentence-opening marker ``c`` starts: at a sentence of its own
    that ends in a colon right before it ("(D) Densitometric analysis …. The levels of SNCA
    oligomers were determined in: (E) SNpc; (F) …"), which introduces it, else at ``c``. The
    sentence starts after ``floor`` (the previous marker), past a sentence of the previous panel."""
    head = text[floor : c.start].rstrip()
    if not head.endswith(":"):
        return c.start
    start = _sentence_start(text, len(head) + floor - 1, floor)
    heading = text[start : floor + len(head) - 1]
    if not text[floor:start].strip() or not heading[:1].isupper() or any(ch in heading for ch in ":;"):
        return c.start  # "… see Supplementary file 1; for the remainder: (I) …" is the panel before's
    return start


def _lead_segments(text: str, floor: int, end: int, markers: Sequence[_Candidate]) -> list[Segment]:
    """The lead before the first panel segment: shared text, except from the first sentence that
    names two or more of the panels in brackets on ("The horizontal maps show FWFsalt′ (a–e),
    FWFdye′ (f–j), and their differences (k–o) at …. a, f, k At year 10. …"), which describes
    those panels -- all it names -- as the annotation guide has it (a segment starts at the
    sentence of a label placed after its phrase)."""
    lead = text[floor:end]
    if not lead.strip():
        return []
    top = max((o for c in markers for o in (_letter_ordinals(list(c.labels)) or [])), default=0)
    starts = [floor] + [b for b in _sentence_breaks(text)[0] if floor < b < end]
    for s in starts:
        named = {o for o in _lead_letters(text[s:end]) if o <= top} | _listed_next(text[s:end], top)
        if len(named) < 2:
            continue
        if len(_lead_letters(text[s : _sentence_end(text, s + 1)])) < 2:
            continue
        shared = text[floor:s].strip()
        return ([Segment([], shared)] if shared else []) + [
            Segment([chr(96 + o) for o in sorted(named)], text[s:end].strip())
        ]
    return [Segment([], lead.strip())]


def _listed_next(text: str, top: int) -> set[int]:
    """The letter after ``top`` (the last the markers name) when a bracket of ``text`` lists it with
    two or more letters up to ``top``: the last panel, named only in the lead ("… rice (WT) (a, c,
    d, f, g, i) and … mutants (b, e, h) …" with markers up to "h"); not "(T1, T2, T3 …)" alone."""
    return {
        top + 1
        for _, ords in _bracket_letters(text)
        if top + 1 in ords and sum(1 for o in ords if o <= top) >= 2
    }


def _lead_letters(text: str) -> set[int]:
    """Ordinals of the letters ``text`` names in brackets, notes too ("threshold (a, 0.25 mm)",
    "salinity (psu; a, e)"), or lists bare in one sentence, each before its phrase ("Excretion of
    sodium via a stool and b urine …")."""
    return (
        _named_letters(text)
        | {o for pattern in (_RE_PAREN_NOTE, _RE_NOTE_SEMI_PAREN) for _, ords in _bracket_letters(text, pattern) for o in ords}
        | _listed_bare_letters(text)
    )


def _listed_bare_letters(text: str) -> set[int]:
    """Ordinals of the letters a, b, … listed bare in one sentence of ``text``, each before its
    phrase, as :func:`_listed_letters_chain` reads them: "via a stool and b urine"."""
    if " a " not in text:
        return set()  # no list's first letter: spare the candidates
    return {_top(o) for c in _listed_letters_chain(text, 0, _candidates(text, 0)) for o in c.ords}


def _dedupe(labels: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for lab in labels:
        seen.setdefault(lab, None)
    return list(seen)


def split_caption(
    caption: str, title: str | None = None, *, n_panels: int | None = None, model: BoundaryModel | None = None
) -> list[Segment]:
    """Split ``caption`` into labelled segments (see the module docstring).

    ``title``: the caption's title when known (JATS ``<caption><title>``); when the caption starts
    with it, labels are searched only after it and a label right after it counts as a sentence start.
    The lead (title or shared text before the first label) comes back as a first segment with no
    labels; it is never dropped.

    A labelled segment whose labels show that the text lost another panel's label (the label sits
    after its phrase, or the next labelled segment skips labels) is cut after its own description
    where the panel-boundary model is confident (:func:`_cut_lost_panels`); the pieces after the
    cut come back as unlabelled panel segments.

    A caption with no usable labels comes back as its title (when known, ``shared``) and its body
    cut into unlabelled panel segments between sentences by the panel-boundary model
    (:mod:`pmcflow.enrich.boundaries`); ``n_panels`` (the number of subfigures, when known) makes
    it cut into that many. A single-panel legend normally stays one segment. ``model``: another
    panel-boundary model than the shipped one (cross-validation).
    """
    text, floor, segments = _split_labels(caption, title)
    if not text:
        return segments
    segments = _claim_listed_after(segments)
    places = False
    if any(s.labels for s in segments):
        if not _places_inside_panels(text, floor, segments, model):
            return _cut_lost_panels(segments, model)
        places = True
    head = [Segment([], text[:floor].strip(), shared=True)] if floor and text[:floor].strip() else []
    start = floor if head else 0
    if places and n_panels is None:
        body = _place_pieces(text, start, floor, model)
    else:
        body = segment_body(text, start, n_panels=n_panels, model=model)
    return head + [Segment([], text[a:b]) for a, b in body]


# a place word anywhere in a sentence ("Relative levels of (left) ATP and (right) NADH …")
_RE_PLACE_WORD = re.compile(rf"(?i)\b{_POSITION_WORDS}\b")


def _place_pieces(text: str, start: int, floor: int, model: BoundaryModel | None) -> list[tuple[int, int]]:
    """Panel spans of the body (from ``start``) of a legend whose places name parts of its panels
    (:func:`_places_inside_panels`): the panel-boundary model's cuts, mended by the places. A
    sentence that opens with a later place ("Right:", "Bottom:") continues the panel of the place
    before it, and one that opens with the first place ("Left:", "Top:") opens a panel ("… similar
    results. Left: Representative Western blot …. Right: Quantification …. Left: Representative
    microphotographs …") unless the sentence before it names the places ("Relative levels of
    (left) ATP and (right) NADH …. Left: Graphs represent …", where the model decides)."""
    spans = sentence_spans(text, start)
    if not spans:
        return []
    m = model or default_model()
    probs = m.probabilities(text, spans)
    places = {c.start: c.ords[0] for c in _position_candidates(text, floor)}
    chosen: list[int] = []
    for k, p in enumerate(probs):
        place = places.get(spans[k + 1][0])
        if place is None or (place == SUB and _RE_PLACE_WORD.search(text, *spans[k])):
            cut = p >= m.threshold
        else:
            cut = place == SUB
        if cut:
            chosen.append(k)
    return pieces_between(spans, chosen)


def _places_inside_panels(
    text: str, floor: int, segments: Sequence[Segment], model: BoundaryModel | None
) -> bool:
    """Whether a caption labelled only by places ("Left: … Right: …") names places inside its panels
    rather than its panels: it names a place twice ("Left: … Right: … Left: … Right: …"), or the
    text between the title and the first place already describes panels of its own (the
    panel-boundary model cuts it; a lead sentence or two that every panel shares is not cut).
    Such a legend lost its letters, and the model cuts it as a legend without labels."""
    labelled = [s for s in segments if s.labels]
    if not labelled or any(x not in POSITION_LABELS for s in labelled for x in s.labels):
        return False
    named = [c.labels[0] for c in _position_candidates(text, floor)]
    if len(set(named)) < len(named):
        return True  # a place named twice ("Left: … Right: … Left: … Right: …") is not a panel
    before = text[: text.find(labelled[0].text, floor)]
    spans = sentence_spans(before, floor)
    if len(spans) < 2:
        return False
    m = model or default_model()
    return any(p >= m.threshold for p in m.probabilities(before, spans))


# a labelled segment is cut after its own panel where a panel boundary is this likely (the model's
# 0.5 cuts label-less legends; inside a labelled segment most sentences after the first continue its
# panel -- "Scale bar …", "Data are mean ± SEM" -- so only confident cuts are made). 0.8 keeps the PMC
# and PLOS label-wise segments as they were (0.5-0.6 cut 1-2 % of them wrongly) and gains SourceData
# segments whose label the reconstruction dropped: dev 410 -> 420 of 516, test 76 -> 80 of 87
LOST_PANEL_THRESHOLD = 0.8
# when the letters say how many panels a labelled segment lost (:func:`_lost_count`), that many of
# its most likely boundaries are cut as long as each reaches this floor (the model's own 0.5 less a
# margin: 0.3-0.5 gain the same SourceData segments, dev 423 -> 430 of 516; 0.2 cuts PMC-style
# label-wise segments wrongly)
LOST_COUNT_FLOOR = 0.3
MAX_LOST = 6  # at most this many lost panels are read from a run of letters
_LEAD_ATOM = r"[A-Za-z]\d{0,2}[′’']?(?![A-Za-z0-9])"
# a segment that opens with its marker: "(A)", "(A–C)", "A.", "B-C ", "A1)", "Panel A"
_RE_LEADING_LABEL = re.compile(
    rf"[(\[]\s*{_LIST_PAREN}\.?\s*[)\]]|{_LEAD_ATOM}(?:\s*[-–—‐‑−,]\s*{_LEAD_ATOM}|\s+and\s+{_LEAD_ATOM})*"
    rf"\s?[.):,]?(?=[\s—–‐‑−-]|$)|(?i:panels?\s)"
)


def _letter_ordinals(labels: Sequence[str]) -> list[int] | None:
    """[1, 3] for ["a", "c"]; None when a label is not a single letter (roman, digits, places)."""
    if not labels or not all(len(x) == 1 and "a" <= x <= "z" for x in labels):
        return None
    return [ord(x) - 96 for x in labels]


def _loses_panels(seg: Segment, nxt: Segment | None, lossy: bool = False) -> bool:
    """Whether ``seg``'s text likely holds a panel whose label the text lost: its label sits
    after its phrase ("Changes in X are inversely related (C), …": the sentence is that panel's, what
    follows may be the next one's), it names a place rather than a panel ("Right: …"), the next
    labelled segment skips letters ("A. … E. …"), or the caption's letters skip some anywhere
    (``lossy``, :func:`_skips_letters`)."""
    if any(x in POSITION_LABELS for x in seg.labels):
        return True  # "Left: … Right: …" name places in one panel; the text after them may be the next
    here = _letter_ordinals(seg.labels)
    if here is None:
        return False  # roman numerals, digits: their markers lead ("ii. …", "3) …")
    if not _RE_LEADING_LABEL.match(seg.text):
        return True
    if lossy:
        return True
    there = _letter_ordinals(nxt.labels) if nxt is not None else None
    return there is not None and min(there) - max(here) > 1


def _skips_letters(segments: Sequence[Segment]) -> bool:
    """The caption's letter labels skip some ("B–C … G–H …", first label "B"): its text lost markers."""
    seen = sorted({o for s in segments for o in (_letter_ordinals(s.labels) or [])})
    return bool(seen) and (seen[0] > 1 or any(b - a > 1 for a, b in zip(seen, seen[1:], strict=False)))


def _list_letters(list_text: str) -> list[int] | None:
    """The ordinals of a label list's letters ("A, C" -> [1, 3]); None unless all are single letters."""
    return _letter_ordinals(sorted(_paren_labels(list_text)))


def _bracket_letters(text: str, pattern: re.Pattern[str] = _RE_PAREN) -> Iterator[tuple[str, list[int]]]:
    """Each bracket of single letters in ``text``: its inside and the letters' ordinals ("(A, C)" ->
    ("A, C", [1, 3])); brackets of other labels (roman numerals, digits) are left out. ``pattern``:
    :data:`_RE_PAREN_NOTE` for brackets of letters and a note ("(a, 0.25 mm)")."""
    for x in pattern.finditer(text):
        ords = _list_letters(x.group(1))
        if ords:
            yield x.group(1), ords


def _named_letters(text: str) -> set[int]:
    """Ordinals of the letters ``text`` names in brackets ("(A, C)" -> {1, 3})."""
    return {o for _, ords in _bracket_letters(text) for o in ords}


def _after_phrase_letters(seg: Segment, top: int) -> list[int]:
    """Letters after ``top`` that ``seg``'s text names alone in brackets, in the case of its own label
    ("H. … Triglycerides in …. free fatty acids (J) in …": J); not "(d)" for dorsal after "(A)", nor
    a list that also names the segment's own letters ("(F, J, K, L)")."""
    own = seg.labels[0]
    letter = rf"(?<![A-Za-z]){re.escape(own)}(?![A-Za-z])"
    m = re.search(letter, seg.text[:12], re.IGNORECASE)
    if m is None:
        bracket = next((x for x in _RE_PAREN.finditer(seg.text) if own in _paren_labels(x.group(1))), None)
        m = re.search(letter, bracket.group(1), re.IGNORECASE) if bracket else None
    if m is None:
        return []
    upper = m.group(0).isupper()
    out: set[int] = set()
    for inside, ords in _bracket_letters(seg.text):
        if min(ords) > top and all(ch.isupper() == upper for ch in inside if ch.isalpha()):
            out.update(ords)
    return sorted(out)


def _claim_listed_after(segments: Sequence[Segment]) -> list[Segment]:
    """A labelled segment before the last whose label sits after its phrase, in a sentence that also
    names the letters from the one after the caption's last label on, each alone in brackets after
    its own phrase ("The level of H2O2 (a), SA (c), ABA (d) and JA (e) …. (b) DAB staining …": c,
    d and e, which no marker names), describes those panels too. Letters in the last labelled
    segment are lost panels instead (:func:`_lost_count`)."""
    labelled = [k for k, seg in enumerate(segments) if seg.labels]
    ords = [_letter_ordinals(segments[k].labels) for k in labelled]
    if len(labelled) < 2 or any(o is None for o in ords):
        return list(segments)
    top = max(o for os_ in ords if os_ for o in os_)
    out = list(segments)
    for k in labelled[:-1]:
        seg = out[k]
        own = seg.labels[0]
        if _RE_LEADING_LABEL.match(seg.text):
            continue  # its label leads it ("c Nyquist plots of … (a) FTO, … (e) …": items, not panels)
        m = re.search(rf"(?<=\S )\(({re.escape(own)}|{re.escape(own.upper())})\)", seg.text)
        if m is None:
            continue  # its label is no bracket after a phrase
        sentence = seg.text[: _sentence_end(seg.text, m.end())]
        case = str.isupper if m.group(1).isupper() else str.islower
        named = {ord(x.lower()) - 96 for x in re.findall(r"(?<=\S )\(([A-Za-z])\)", sentence) if case(x)}
        run = top
        while run + 1 in named:
            run += 1
        if run > top:
            out[k] = Segment([*seg.labels, *(chr(96 + o) for o in range(top + 1, run + 1))], seg.text, seg.shared)
            top = run
    return out


def _after_phrase_end(seg: Segment, top: int) -> int:
    """The last letter of the run from ``top`` on that ``seg`` names after phrases (``top`` if none)."""
    end = top
    for o in _after_phrase_letters(seg, top):
        if o - end > 2:  # "(A) … (d)orsal": not a run of letters
            break
        end = o
    return end


def _lost_count(seg: Segment, nxt: Segment | None, named_elsewhere: set[int]) -> int:
    """How many panels ``seg``'s text holds besides its own, by the letters: those the next labelled
    segment skips ("B-C … G-H …": D, E, F) or, in the last one, those up to the letters it names
    after their phrases ("H. … (J) … (L) …": I, J, K, L); minus letters the caption names
    elsewhere (a lead's "(A, C, E)") and letters glued to a sentence end in its text ("… test.B. …",
    which curated legends keep in one panel with the letter before). 0: the letters do not say."""
    here = _letter_ordinals(seg.labels)
    if here is None:
        return 0
    top = max(here)
    there = _letter_ordinals(nxt.labels) if nxt is not None else None
    if there is not None:
        end = min(there)
    elif nxt is not None:
        return 0
    else:
        end = _after_phrase_end(seg, top) + 1
    lost = 0
    for o in range(top + 1, end):
        letter = chr(96 + o)
        if o in named_elsewhere or re.search(rf"[.;)\]](?:{letter}|{letter.upper()})[.)]\s", seg.text):
            continue
        lost += 1
    return min(lost, MAX_LOST)


def _cut_lost_panels(segments: Sequence[Segment], model: BoundaryModel | None) -> list[Segment]:
    """Cut labelled segments that likely hold a panel whose label was lost (:func:`_loses_panels`)
    at the sentence boundaries the panel-boundary model scores >= :data:`LOST_PANEL_THRESHOLD`,
    never before a sentence that names the segment's own labels; the pieces after the first are
    unlabelled panel segments. Where the letters say how many panels it lost (:func:`_lost_count`),
    its that-many most likely boundaries are cut too if each scores >= :data:`LOST_COUNT_FLOOR`.
    Verbatim: the pieces join back to the segment's text."""
    m = model or default_model()
    labelled = [k for k, s in enumerate(segments) if s.labels]
    next_labelled = dict(zip(labelled, [segments[j] for j in labelled[1:]], strict=False))
    lossy = _skips_letters(segments)
    present = {o for s in segments for o in (_letter_ordinals(s.labels) or [])}
    bracketed = [_named_letters(s.text) for s in segments]
    naming = Counter(o for letters in bracketed for o in letters)
    out: list[Segment] = []
    for k, seg in enumerate(segments):
        lost = 0
        nxt = next_labelled.get(k)
        if seg.labels:
            elsewhere = present | {o for o, n in naming.items() if n > (o in bracketed[k])}
            lost = _lost_count(seg, nxt, elsewhere)
        if not seg.labels or not (lost or _loses_panels(seg, nxt, lossy)):
            out.append(seg)
            continue
        text = seg.text
        spans = sentence_spans(text)
        probs = [m.probability(f) for f in cut_features(text, spans)] if len(spans) > 1 else []
        own = {x.lower() for x in seg.labels}
        named = max((x.end() for x in _RE_PAREN.finditer(text) if own & _paren_labels(x.group(1))), default=0)
        allowed = [c for c, p in enumerate(probs) if spans[c + 1][0] >= named]
        if lost:
            ranked = sorted((c for c in allowed if probs[c] >= LOST_COUNT_FLOOR), key=lambda c: (-probs[c], c))
            chosen = sorted(set(ranked[:lost]) | {c for c in allowed if probs[c] >= LOST_PANEL_THRESHOLD})
        else:
            chosen = [c for c in allowed if probs[c] >= LOST_PANEL_THRESHOLD]
        pieces: list[tuple[int, int]] = []
        open_at = spans[0][0] if spans else 0
        for c in chosen:
            pieces.append((open_at, spans[c][1]))
            open_at = spans[c + 1][0]
        pieces.append((open_at, len(text)))
        out.append(Segment(seg.labels, text[pieces[0][0] : pieces[0][1]]))
        out.extend(Segment([], text[a:b]) for a, b in pieces[1:])
    return out


def _paren_labels(list_text: str) -> set[str]:
    return {lab for _, _, labels in _expand(list_text) for lab in labels}


def _split_labels(caption: str, title: str | None) -> tuple[str, int, list[Segment]]:
    """The label grammar alone: (normalised caption, where the title ends, segments).

    The segments are labelled when the caption names labels; otherwise they are the title and body
    uncut (the panel-boundary model is :func:`split_caption`'s step, which only it needs).
    """
    text = normalize_ws(caption)
    if not text:
        return text, 0, []
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
            return text, 0, whole
    return text, floor, segments


def _listed_letters_chain(text: str, floor: int, cands: Sequence[_Candidate]) -> list[_Candidate]:
    """Letters a, b, c, … listed in one sentence, each before its phrase, the first after its noun
    or a colon and the others after a comma, semicolon or "and" (:data:`_RE_LISTED_BARE`), as
    inline markers: the chain of a caption that names its panels only so."""
    listed = sorted(
        (c for c in cands if c.style == "bare_lc" and len(c.ords) == 1),
        key=lambda c: c.start,
    )
    # the first "a" may also have been read as a marker opening its clause (": a premeiosis …")
    for first in (c for c in listed if c.ords == (SUB,) and _listed_first_at(text, c.start)):
        run = [first]
        for c in listed:
            if c.start > run[-1].end and _top(c.ords[0]) == _top(run[-1].ords[0]) + 1:
                if not _same_sentence(text, run[-1].end, c.start):
                    break
                run.append(c)
        if len(run) >= 2:
            return [replace(c, style="inline") for c in run]
    return []


ITEM_MAX_WORDS = 4


def _numbered_items(text: str, chain: Sequence[_Candidate]) -> bool:
    """A chain of numbers inside one sentence, each before a short item: "(1) Faraday cage, (2) coil
    probe, (3) supporter, …", "four domains of life: (1) animals; (2) fungi; …"."""
    if len(chain) < 2:
        return False
    span = next(((a, b) for a, b in split_sentences(text) if a <= chain[0].start < b), None)
    if span is None or any(not (span[0] <= c.start < span[1]) for c in chain):
        return False
    ends = [c.start for c in chain[1:]] + [span[1]]
    words = sorted(len(text[c.end : e].split()) for c, e in zip(chain, ends, strict=True))
    return words[len(words) // 2] <= ITEM_MAX_WORDS


_RE_POINTER_BEFORE = re.compile(r"(?i)\b(?:in|of|see|from|as|to|than|like|with|by|on)\s+(?:panels?\s+)?$")


def _missing_letters(
    text: str,
    chain: Sequence[_Candidate],
    markers: Sequence[_Candidate],
    cands: Sequence[_Candidate],
    labels: set[str],
) -> list[_Candidate]:
    """Inline markers within the chain's range, out of the chain's order, naming a letter that no
    segment built from ``markers`` (the chain with its restatements) has among its ``labels``: "The
    expression levels … in PFC (a) and NAc (c) …. The ratio … in PFC (b) and NAc (d).", "(A,F) MTT
    …. (B,G) …. (C,H) …. The levels of SOD (D), NADPH oxidase (E) activity …" describe B and D, D
    and E too; "(A) Wild-type TC65 and (B, C) glup6. (C) Shows …" B (with C). Not a pointer to a
    panel ("the area indicated in (B)")."""
    fam = chain[0].family
    top_max = max(_top(o) for c in chain for o in c.ords)
    named = {ord(x) - 96 for x in labels if len(x) == 1 and "a" <= x <= "z"}
    taken = sorted((c.start, c.end) for c in markers)
    out: list[_Candidate] = []
    for c in cands:
        if c.family != fam or c.style != "inline":
            continue
        tops = {_top(o) for o in c.ords}
        if not tops or max(tops) > top_max or not tops - named:
            continue
        if any(a < c.end and c.start < b for a, b in taken):
            continue
        if _RE_POINTER_BEFORE.search(text, max(0, c.start - 12), c.start):
            continue  # "the area indicated in (B)": a pointer to a panel, not its description
        out.append(c)
        named |= tops
        taken.append((c.start, c.end))
    return out


def _split_after(text: str, floor: int) -> list[Segment]:
    """:func:`split_caption` on normalised ``text`` with labels searched from ``floor`` on."""
    cands = [c for c in _candidates(text, floor) if c.start >= floor]
    leading = [c for c in cands if c.at_boundary]
    # 1. the chain of sentence-initial markers; 2. mid-sentence markers only fill its gaps;
    # 3. captions labelled only mid-sentence ("Axial (A) and coronal (B) …") use inline markers.
    abbreviations = _abbreviations(text, cands)

    def inline_pass(c: _Candidate) -> bool:
        """A marker the chain of a caption labelled mid-sentence may use."""
        return (c.at_boundary or c.style == "inline") and c.start not in abbreviations

    _, chain = _best_chain(leading, [c for c in cands if not c.at_boundary], abbreviations)
    if not chain:
        # numbers after their phrase are mostly items, not panels: "magnetic lignite (1) and magnetic
        # char (2)", "Tulsi extract (1), AgNO3 (2), …", "ocimicides A1 (1) and B1 (3)", phases of a
        # movement "(1–2), strike (3–14) …" (7 of the 9 development-split captions so read were no panels)
        _, chain = _best_chain([c for c in cands if inline_pass(c) and (c.at_boundary or c.family != "digit")])
    if not chain or chain[0].family not in ("upper", "lower"):
        # "Kaplan–Meier survival curves of a GEMIN7, b OAS1, c APOBEC3H, …": Nature-style letters
        # listed inside one sentence, the caption's only labels (before numbers: "strains: a S.
        # aureus, b K. pneumonia, …. Numbers of 1 through 6 … denote: (1) nickel chloride, …")
        chain = _listed_letters_chain(text, floor, cands) or chain
    # the candidates the chain came from: the caption's own, or a fallback's below (its restatements
    # are read among those; numbered items and missing letters among the caption's own)
    source = cands
    if not chain:
        # "In panel A, …. In panel C, …. In panel B and D, …": restated in their own words too
        source = _panel_word_candidates(text, floor)
        _, chain = _best_chain(source)
    if not chain:
        # "Effort test T0, presented in Graph A, …; T7 effort test, presented in Graph B, …": panels
        # named after their phrase with the word "graph" or "panel", the caption's only labels
        source = _graph_word_candidates(text, floor)
        _, chain = _best_chain(source)
        if len(chain) < 2:
            chain = []
    if not chain:
        _, chain = _best_chain([c for c in _position_candidates(text, floor) if c.start >= floor])
        if len(chain) < 2:
            chain = []
    if chain and chain[0].family == "digit" and _numbered_items(text, chain):
        # numbered items of one list, not panels: the caption's letters, if any, are its labels
        _, chain = _best_chain([c for c in cands if inline_pass(c) and c.family != "digit"])
    if not chain:
        if floor and text[floor:].strip():
            return [Segment([], text[:floor].strip()), Segment([], text[floor:].strip())]
        return [Segment([], text)]
    restated = _restatements(text, [*source, *_grid_word_candidates(text, floor)], chain)
    restated += _overview_walks(text, source, chain, restated)
    markers = sorted([*chain, *restated], key=lambda c: c.start)
    segments = _build_segments(text, markers, floor)
    if chain[0].family in ("upper", "lower"):
        named = {lab for seg in segments for lab in seg.labels}
        extra = _missing_letters(text, chain, markers, cands, named)
        if extra:
            segments = _build_segments(text, sorted([*markers, *extra], key=lambda c: c.start), floor)
    return segments


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
    body's segments are the panel segments (see :func:`panel_segments`).
    """
    if not any(s.labels for s in segments):
        return " ".join(s.text for s in segments if s.shared)
    return " ".join(lead_segments(segments))


def panel_segments(segments: Sequence[Segment]) -> list[Segment]:
    """The segments that describe panels: from the first labelled one on, or the unlabelled body
    segments.

    The title and lead go to :func:`shared_text` instead. After the first labelled segment, an
    unlabelled one is a panel whose label the text lost (see :func:`split_caption`). A caption
    without labels gives its text after the title (or the whole caption) as unlabelled segments,
    one per panel the panel-boundary model finds.
    """
    first = next((k for k, s in enumerate(segments) if s.labels), None)
    if first is not None:
        return list(segments[first:])
    return [s for s in segments if not s.shared]


def _is_letter(label: str) -> bool:
    return len(label) == 1 and label.isalpha()


def assign_detailed(
    segments: Sequence[Segment],
    letters: Iterable[str | None],
    *,
    caption: str | None = None,
) -> dict[str, Assignment]:
    """Map each panel letter to its segment, with the source and fallback reason.

    Letters are matched to segment labels (case-insensitive). A letter that several segments name
    (an overview "(A–D) …" before "(A, B) …", a note "(B–F) Data are mean ± SEM." after the panels)
    gets the stretch of caption its adjacent segments cover, around the most specific one (fewest
    labels), so the text stays one verbatim piece of the caption. When the caption is labelled in
    another family (roman numerals, digits, positions) and no letter matches, the k-th letter goes
    to the k-th labelled segment in caption order. A letter the caption skipped gets the unlabelled
    segment that stands in its place when their counts agree (``reason="gap"``, see
    :func:`_gap_pieces`). A letter with no segment gets the full caption
    (``source="fallback-full"``), so nothing is dropped. The text is a verbatim substring of the
    caption (only the ``mention`` path joins sentences); the title and lead every panel shares come
    separately as ``shared_text``.
    """
    full = normalize_ws(caption) if caption is not None else " ".join(s.text for s in segments)
    labelled = [s for s in segments if s.labels]
    lead = shared_text(segments)
    by_label = _segments_by_label(full, segments)
    in_gaps = _gap_pieces(segments)
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
        if letter in in_gaps:  # "(A) … . [lost B] … . (C) …": the one piece between them
            out[letter] = Assignment(in_gaps[letter].text, "rules", "gap", [letter], lead)
            continue
        mentioned = mention_sentences(full, letter) if _is_letter(letter) else ""
        if mentioned:  # named only inside label lists: "twi (A, E, H, L), sim (B, F, I, M) …"
            out[letter] = Assignment(mentioned, "rules", "mention", [letter], lead)
        else:
            reason = "no_labels" if not labelled else "label_not_found"
            out[letter] = Assignment(full, "fallback-full", reason, [])
    return out


# a caption that names no label is matched to subfigures by order only where the panel-boundary
# model is decided at every sentence boundary of its body: each probability at least this far from
# the model's threshold. Chosen by the 5-fold cross-validation by article over the SourceData dev
# legends that lost their labels (models fitted on the other folds; `boundaries.cross_validate`):
# pieces right / assigned 27/31 with no margin, 26/28 with 0.02, 17/19 with 0.05, 15/17 with 0.1
# (the model before openings such as "qRT-PCR …" stopped counting as lower case: 27/31, 26/28,
# 26/28, 15/17 -- the nine panels of emmm.202012834 fig. 4 now have a boundary at 0.52 in their
# fold; 0.02 does for both models what 0.05 did for the old one). It also keeps "Title. This
# figure presents X. We expect Y." (p = 0.51 between them) whole
ORDER_MARGIN = 0.02


def order_pieces(caption: str, title: str | None, *, model: BoundaryModel | None = None) -> list[Segment] | None:
    """The pieces a caption that names no panel label is matched to subfigures with, by order
    (:func:`assign_by_order`): its title (``shared``, when known) and its body as the
    panel-boundary model cuts it without ``n_panels`` -- or None when the caption names labels or
    the model is in doubt at a sentence boundary (:data:`ORDER_MARGIN`)."""
    text, floor, segments = _split_labels(caption, title)
    if not text or any(s.labels for s in segments):
        return None
    start = floor if text[:floor].strip() else 0
    body = (model or default_model()).decided_cuts(text, start, ORDER_MARGIN)
    if body is None:
        return None
    head = [Segment([], text[:start].strip(), shared=True)] if start else []
    return head + [Segment([], text[a:b]) for a, b in body]


def assign_by_order(pieces: Sequence[Segment] | None, n_panels: int | None, index: int | None) -> Assignment | None:
    """The text of one subfigure of a caption that names no panel label, by its place in the figure.

    ``pieces``: the caption's :func:`order_pieces` (computed once for all the figure's
    subfigures). ``n_panels``: how many subfigures the figure was cut into; ``index``: this
    subfigure's place among them (0-based: its letter's place in the alphabet when the letter was
    read on the image, else its reading order). When the body was cut into exactly ``n_panels``
    pieces, the ``index``-th describes the subfigure (``source: rules``, reason ``reading_order``;
    authors describe panels in their order), and the title is its shared text. Otherwise -- no
    pieces (labels, a boundary in doubt), counts that disagree -- None: a guess would attach one
    panel's text to another."""
    if n_panels is None or n_panels < 2 or index is None or not 0 <= index < n_panels:
        return None
    if pieces is None:
        return None
    panels = panel_segments(pieces)
    if len(panels) != n_panels:
        return None
    return Assignment(panels[index].text, "rules", "reading_order", [], shared_text(pieces))


def _gap_pieces(segments: Sequence[Segment]) -> dict[str, Segment]:
    """Letters the caption skipped, matched to the unlabelled panel segments that stand in their
    place: between labelled segments "A" and "D", two unlabelled ones are "b" and "c", in order
    (see :func:`_cut_lost_panels`); only when the counts agree exactly."""
    labelled = [k for k, s in enumerate(segments) if s.labels]
    gaps: list[tuple[range, Sequence[Segment]]] = []
    for a, b in zip(labelled, labelled[1:], strict=False):
        run = segments[a + 1 : b]
        lo, hi = _letter_ordinals(segments[a].labels), _letter_ordinals(segments[b].labels)
        if run and lo is not None and hi is not None:
            gaps.append((range(max(lo) + 1, min(hi)), run))
    # after the last labelled segment: the letters up to those its pieces name after their phrases
    # ("H. … . Triglycerides … . free fatty acids (J) … . Energy … . energy intake (L) …": I to L)
    if labelled and labelled[-1] + 1 < len(segments):
        last, run = segments[labelled[-1]], segments[labelled[-1] + 1 :]
        lo = _letter_ordinals(last.labels)
        if lo is not None and not any(s.labels or s.shared for s in run):
            whole = Segment(last.labels, " ".join([last.text, *(s.text for s in run)]))
            gaps.append((range(max(lo) + 1, _after_phrase_end(whole, max(lo)) + 1), run))
    out: dict[str, Segment] = {}
    for missing, run in gaps:
        if len(missing) == len(run):
            for ordinal, seg in zip(missing, run, strict=True):
                out[chr(96 + ordinal)] = Segment([chr(96 + ordinal)], seg.text)
    return out


def _segments_by_label(full: str, segments: Sequence[Segment]) -> dict[str, Segment]:
    """Per label, its segment; for a label several segments name, the run of adjacent ones around
    the most specific (fewest labels, first) as one segment whose text is that stretch of ``full``.
    """
    spans: list[tuple[int, int]] = []
    cursor = 0
    for seg in segments:  # segments are consecutive, non-overlapping pieces of the caption
        at = full.find(seg.text, cursor)
        if at < 0:
            spans = []
            break
        spans.append((at, at + len(seg.text)))
        cursor = at + len(seg.text)
    naming: dict[str, list[int]] = {}
    for i, seg in enumerate(segments):
        for lab in _dedupe(x.lower() for x in seg.labels):
            naming.setdefault(lab, []).append(i)
    out: dict[str, Segment] = {}
    for lab, idx in naming.items():
        best = min(idx, key=lambda i: (len(segments[i].labels), i))
        lo = hi = best
        if spans:
            while lo - 1 in idx:
                lo -= 1
            while hi + 1 in idx:
                hi += 1
        run = segments[lo : hi + 1]
        text = full[spans[lo][0] : spans[hi][1]] if lo < hi else segments[best].text
        out[lab] = Segment(_dedupe(x for seg in run for x in seg.labels), text)
    return out


def _sentence_end(text: str, pos: int) -> int:
    """End (exclusive, after its punctuation) of the sentence containing ``pos``."""
    ends = _sentence_breaks(text)[1]
    k = bisect_right(ends, pos)
    return ends[k] if k < len(ends) else len(text)


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


def segments_from_json(items: object) -> list[Segment]:
    """The ``segments`` of a ``split-caption`` output line; ``ValueError`` unless a list of
    objects with a string ``text`` (and a list of ``labels``, when given)."""
    if not isinstance(items, list) or not all(isinstance(it, dict) and isinstance(it.get("text"), str) for it in items):
        raise ValueError('"segments" must be a list of objects with a string "text"')
    out: list[Segment] = []
    for it in items:
        labels = it.get("labels") or []
        if not isinstance(labels, list):
            raise ValueError("segment labels must be a list")
        out.append(Segment([str(x) for x in labels], it["text"]))
    return out


def n_panels_from_json(obj: Mapping[str, object], key: str = "n_panels") -> int | None:
    """The optional panel count of a ``split-caption`` input line (``None`` when absent);
    ``ValueError`` unless a positive integer."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'"{key}" must be a positive integer, not {value!r}')
    return value


def caption_positions(caption: str, title: str | None = None) -> list[str]:
    """The places a caption labels its panels by ("left", "right"; "top", "bottom"; "top left"...),
    in caption order, when it names places and no panel letter; else ``[]``.

    Read with :func:`split_caption`'s label grammar; these labels are what the segments carry, so a subfigure given
    one (:func:`pmcflow.decompose.order.assign_positions`) finds its segment by it.
    """
    labels = [lab for s in _split_labels(caption, title)[2] for lab in s.labels]
    if not labels or any(lab not in POSITION_LABELS for lab in labels):
        return []
    return list(dict.fromkeys(labels))


def caption_letters(caption: str, title: str | None = None) -> list[str]:
    """The panel letters a caption names, as the contiguous run ``a..last`` (lower case).

    Read with :func:`split_caption`'s label grammar (one for the whole pipeline). Authors label
    panels contiguously even where a caption skips one, so the run is filled up to the last
    letter. Labels in another family (roman numerals, digits, positions), a lone "a" and no labels
    give ``[]``.
    """
    found = {
        lab for s in _split_labels(caption, title)[2] for lab in s.labels if len(lab) == 1 and lab.isalpha()
    }
    if not found or max(found) == "a":
        return []
    return [chr(c) for c in range(ord("a"), ord(max(found)) + 1)]
