"""Panel-label grammars, placements, the shipped fonts, and panel letters found in captions.

Grammars (10, as in the public Open-PMC-18M generator's count):

========== ===================== ==========================================
name        example (panels 1..3) notes
========== ===================== ==========================================
``num``     1 2 3
``lower``   a b c
``upper``   A B C
``paren_l`` (a) (b) (c)
``close_l`` a) b) c)
``paren_u`` (A) (B) (C)
``dot_u``   A. B. C.
``num_l``   1a 1b 2a               group number + letter within the group
``l_num``   a-1 a-2 b-1            group letter + number within the group
``roman``   i ii iii
========== ===================== ==========================================

"Group" is the layout row (or column for column layouts), so hierarchical labels follow the
figure's structure the way authors use them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

GRAMMARS: tuple[str, ...] = (
    "num",
    "lower",
    "upper",
    "paren_l",
    "close_l",
    "paren_u",
    "dot_u",
    "num_l",
    "l_num",
    "roman",
)

# inside_* corners are inside the panel rectangle; outside_top sits above the panel's top-left
# corner, outside_left to the left of it (space is reserved in the layout).
PLACEMENTS: tuple[str, ...] = (
    "inside_tl",
    "inside_tr",
    "inside_bl",
    "inside_br",
    "outside_top",
    "outside_left",
)

FONT_DIR = Path(__file__).resolve().parent / "fonts"
FONTS: tuple[str, ...] = ("DejaVuSans-Bold", "DejaVuSans", "DejaVuSerif-Bold", "DejaVuSerif")


@lru_cache(maxsize=512)
def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    """A shipped font at ``size`` px (cached)."""
    if name not in FONTS:
        raise ValueError(f"unknown font {name!r}; shipped: {FONTS}")
    return ImageFont.truetype(str(FONT_DIR / f"{name}.ttf"), size)


@lru_cache(maxsize=8192)
def text_size(name: str, size: int, text: str) -> tuple[int, int, int, int]:
    """(offset_x, offset_y, width, height) of ``text``'s ink relative to the draw origin."""
    l_, t, r, b = font(name, size).getbbox(text)
    return l_, t, r - l_, b - t


@lru_cache(maxsize=8192)
def text_mask(name: str, size: int, text: str) -> tuple[Image.Image, tuple[int, int]]:
    """The rendered (anti-aliased) mask of ``text`` and its offset from the draw origin (cached)."""
    f = font(name, size)
    l_, t, r, b = f.getbbox(text)
    im = Image.new("L", (max(1, r - l_), max(1, b - t)), 0)
    ImageDraw.Draw(im).text((-l_, -t), text, font=f, fill=255)
    return im, (l_, t)


def letters(k: int, upper: bool = False) -> str:
    """0 -> a, 25 -> z, 26 -> aa (spreadsheet style)."""
    out = ""
    k += 1
    while k > 0:
        k, r = divmod(k - 1, 26)
        out = chr(ord("a") + r) + out
    return out.upper() if upper else out


_ROMAN = ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"))


def roman(n: int) -> str:
    """1 -> i, 4 -> iv, 14 -> xiv (lower case)."""
    if n < 1:
        raise ValueError("roman numerals start at 1")
    out = []
    for value, sym in _ROMAN:
        while n >= value:
            out.append(sym)
            n -= value
    return "".join(out)


def label_text(grammar: str, index: int, group: int = 0, index_in_group: int | None = None) -> str:
    """The label of panel ``index`` (0-based, reading order) in ``grammar``.

    ``group`` / ``index_in_group`` (0-based) are used by the hierarchical grammars.
    """
    j = index if index_in_group is None else index_in_group
    if grammar == "num":
        return str(index + 1)
    if grammar == "lower":
        return letters(index)
    if grammar == "upper":
        return letters(index, upper=True)
    if grammar == "paren_l":
        return f"({letters(index)})"
    if grammar == "close_l":
        return f"{letters(index)})"
    if grammar == "paren_u":
        return f"({letters(index, upper=True)})"
    if grammar == "dot_u":
        return f"{letters(index, upper=True)}."
    if grammar == "num_l":
        return f"{group + 1}{letters(j)}"
    if grammar == "l_num":
        return f"{letters(group)}-{j + 1}"
    if grammar == "roman":
        return roman(index + 1)
    raise ValueError(f"unknown label grammar {grammar!r}")


# ----------------------------------------------------------------------------------------------
# panel letters in captions
# ----------------------------------------------------------------------------------------------

_DASH = "-\u2010\u2011\u2012\u2013\u2014\u2212"
# a single letter, a range "A-C", or a list "A, B and D" inside parentheses: (A), (A-C), (a,b)
_PAREN = re.compile(
    rf"\(\s*([A-Za-z](?:\s*(?:[{_DASH},]|and|&)\s*[A-Za-z])*)\s*[\),;:]"
)
# a label opening a sentence or the caption: "A, ...", "B: ...", "(C) ...", "D) ...", "E. The ..."
_LEAD = re.compile(rf"(?:^|[.;:]\s+|\)\s+)\(?([A-Za-z])(?:\s*[{_DASH}]\s*([A-Za-z]))?(?:[,:)]|\.(?=\s+[A-Z(]))\s")
# an upper-case letter used as a label mid-sentence: "structures of A, THL and B, MmPPOX"
_INLINE = re.compile(r"(?<=\s)([A-Z])[,:]\s")
# a bare range "A-C" / "panels a and b" in running text
_PANELS_WORD = re.compile(rf"\bpanels?\s+([A-Za-z])(?:\s*(?:[{_DASH}]|and|to)\s*([A-Za-z]))?\b", re.I)
# "Figure 1A", "Fig. 2B-D": letters glued to a figure number refer to *another* figure's panels
_FIGREF = re.compile(r"\b(?:Fig(?:ure)?s?\.?)\s*\d+[A-Za-z]", re.I)

MAX_PANELS = 25


def _expand(a: str, b: str) -> list[str]:
    if a.islower() != b.islower() or ord(b) < ord(a) or ord(b) - ord(a) >= MAX_PANELS:
        return [a]
    return [chr(c) for c in range(ord(a), ord(b) + 1)]


def _letters_in(group: str) -> list[str]:
    out: list[str] = []
    parts = re.split(r"\s*(?:,|and|&)\s*", group)
    for part in parts:
        m = re.fullmatch(rf"([A-Za-z])\s*[{_DASH}]\s*([A-Za-z])", part.strip())
        if m:
            out += _expand(m.group(1), m.group(2))
        elif len(part.strip()) == 1:
            out.append(part.strip())
    return out


def caption_panel_labels(caption: str) -> list[str]:
    """The panel labels a caption names, as a contiguous run from the first letter.

    Recognises "(A)", "(A-C)", "(a, b)", "A, ..." / "B: ..." / "C) ..." at sentence starts,
    and "panels A and B".  Letters glued to figure numbers ("Figure 1A") are ignored.  The
    case seen most often wins; the result is ``a..max`` in that case (authors label panels
    contiguously even when the caption skips one).  No letters, or only "a" -> ``[]``
    (a single-panel figure).
    """
    text = _FIGREF.sub(" ", " ".join(caption.split()))
    found: list[str] = []
    for m in _PAREN.finditer(text):
        found += _letters_in(m.group(1))
    for m in _LEAD.finditer(text):
        if m.group(2):
            found += _expand(m.group(1), m.group(2))
        else:
            found.append(m.group(1))
    for m in _INLINE.finditer(text):
        found.append(m.group(1))
    for m in _PANELS_WORD.finditer(text):
        found += _expand(m.group(1), m.group(2)) if m.group(2) else [m.group(1)]
    if not found:
        return []
    n_upper = sum(c.isupper() for c in found)
    upper = n_upper * 2 >= len(found)
    same = sorted({c for c in found if c.isupper() == upper})
    if not same:
        return []
    start = "A" if upper else "a"
    # keep only a plausible run: letters must start at a/A and be reasonably dense
    present = {ord(c) - ord(start) for c in same if 0 <= ord(c) - ord(start) < MAX_PANELS}
    if 0 not in present:
        return []
    top = 0
    for k in sorted(present):
        if k - top > 3:  # a far-away letter ("(P)" for a p-value, "(n)") is not a panel
            break
        top = k
    if top == 0:
        return []
    return [chr(ord(start) + k) for k in range(top + 1)]
