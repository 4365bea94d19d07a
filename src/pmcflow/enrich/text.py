"""Small text utilities shared by the enrichment backends.

Everything here is linear-time (no regular expression with nested unbounded quantifiers), because
captions reach 7,000+ tokens and in-text paragraphs are longer still.
"""

from __future__ import annotations

import re
import unicodedata

_WS = re.compile(r"\s+")
# Word tokens for overlap scores: letters/digits runs (Unicode aware), lower-cased.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

# Abbreviations after which a period does not end a sentence (lower-case, without the period).
ABBREVIATIONS = frozenset(
    {
        "fig", "figs", "al", "e.g", "i.e", "eg", "ie", "vs", "cf", "ref", "refs", "nos", "approx",
        "ca", "resp", "dr", "mr", "mrs", "ms", "prof", "sp", "spp", "ssp", "subsp", "var", "suppl", "supp",
        "eq", "eqs", "vol", "viz", "conc", "inc", "ltd", "co", "jan", "feb", "apr", "jun", "jul",
        "aug", "sept", "oct", "nov", "dec", "tab", "chap", "sect", "pp", "diam",
    }
)  # fmt: skip

# Titles that are abbreviations only when capitalised ("Dr. Smith"); lower case "ms." is milliseconds.
_HONORIFICS = frozenset({"dr", "mr", "mrs", "ms", "prof"})

_SENT_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+")


def normalize_ws(text: str) -> str:
    """Collapse every run of whitespace (including NBSP, newlines, tabs) to one space and strip."""
    return _WS.sub(" ", text).strip()


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (Unicode letters and digits); punctuation is dropped."""
    return [t.lower() for t in _TOKEN.findall(text)]


def _prev_word(text: str, end: int) -> str:
    """The run of non-space characters ending at ``end`` (exclusive), without trailing dots."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end]


def is_abbreviation_stop(text: str, dot_pos: int) -> bool:
    """True when the period at ``dot_pos`` closes an abbreviation or initial, not a sentence.

    Handles "Fig. 2", "et al.", "e.g.", "i.e.", "vs.", single-letter initials ("E. coli",
    "J. Smith") and decimals (the caller only calls this for a period followed by whitespace,
    so "0.05" never reaches it).
    """
    word = _prev_word(text, dot_pos).lstrip("([{\"'“‘")
    if not word:
        return False
    core = word.rstrip(".").lower()
    if core in _HONORIFICS and word[:1].islower():
        return False  # "… delay around 70 ms. B, the …": a unit ending its sentence, not "Ms."
    if core in ABBREVIATIONS:
        return True
    # upper-case initial such as "E." in "E. coli" or "J. Smith" (not "for 24 h." nor "step 2.")
    if len(core) == 1 and word.rstrip(".").isalpha() and word.rstrip(".").isupper():
        return True
    # dotted abbreviations "e.g.", "i.e.", "a.u."
    if "." in core and all(0 < len(p) <= 2 and p.isalpha() for p in core.split(".")):
        return True
    return False


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans ``(start, end)`` of ``text`` (end exclusive, trailing space excluded).

    A boundary is ``[.!?]`` (optionally followed by closing quotes/brackets) and whitespace, where
    the next character is not lower-case and the period does not close an abbreviation
    ("Fig. 2", "et al.", "e.g.", "E. coli") or an initial. Linear in ``len(text)``.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    n = len(text)
    for m in _SENT_END.finditer(text):
        nxt = m.end()
        if nxt >= n:
            break
        following = text[nxt]
        if following.islower():
            continue
        punct_end = m.start() + len(m.group(0).rstrip())
        if text[m.start()] == "." and m.group(0).startswith(".") and not m.group(0).startswith(".."):
            # "Fig. 2" / "et al. (2010)" / "E. coli": the word before the period decides
            if is_abbreviation_stop(text, m.start()):
                continue
        if following.isdigit() and _prev_word(text, m.start()).lower().rstrip(".") in {"fig", "figs"}:
            continue
        spans.append((start, punct_end))
        start = nxt
    if start < n:
        tail_end = len(text.rstrip())
        if tail_end > start:
            spans.append((start, tail_end))
    return spans


def sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


def token_f1(pred: str, gold: str) -> float:
    """SQuAD-style bag-of-tokens F1 between two strings (1.0 when both are empty)."""
    p, g = tokens(pred), tokens(gold)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    counts: dict[str, int] = {}
    for t in g:
        counts[t] = counts.get(t, 0) + 1
    common = 0
    for t in p:
        c = counts.get(t, 0)
        if c > 0:
            common += 1
            counts[t] = c - 1
    if common == 0:
        return 0.0
    precision = common / len(p)
    recall = common / len(g)
    return 2 * precision * recall / (precision + recall)
