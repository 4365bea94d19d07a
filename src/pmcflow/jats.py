"""The JATS parse stage: articles, figures and in-text figure mentions from PMC XML.

One safe lxml parse per file (no DTD, no entity expansion, no network, bounded size), then a few
targeted walks over the tree:

* **article** metadata -- ids, title, journal, type, publication date, licence code, retraction
  signals;
* **figures** -- every ``<fig>`` in document order (body, boxed text, appendices, supplementary
  sections, sub-articles), with label, whitespace-correct caption, ``fig-group`` membership,
  eLife figure supplements (``specific-use="child-fig"``) and graphic hrefs resolved to media files;
* **mentions** -- every ``<xref ref-type="fig">`` with its text, target ids, the panel letters it
  names (see :func:`panels_from_text`), its enclosing paragraph and section.

:func:`parse_chunk` is the Snakemake-facing stage: ACQUIRED rows in, ARTICLES / FIGURES / MENTIONS /
REJECTIONS tables and ``counts.json`` out.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import html.entities
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lxml import etree

from pmcflow import schema as S
from pmcflow.config import schema_default
from pmcflow.errors import RejectionError
from pmcflow.licenses import from_jats
from pmcflow.progress import echo, progress
from pmcflow.settings import Settings
from pmcflow.tables import Outputs, Rejections, counts_record, file_md5, read_rows, stage_outputs, write_stage
from pmcflow.textclean import clean_text, over_cap

XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
# The library's size limit is the config's (parse.max_xml_mb), read from the schema: written once.
DEFAULT_MAX_BYTES = int(float(schema_default("parse", "max_xml_mb")) * 2**20)

__all__ = [
    "JatsError",
    "ParsedArticle",
    "cli",
    "cli_parse_chunk",
    "panels_from_text",
    "parse_bytes",
    "parse_chunk",
    "parse_file",
    "resolve_media",
]


# ======================================================================================
# Errors and results
# ======================================================================================
class JatsError(RejectionError):
    """A file that cannot be parsed as a JATS article.

    ``reason`` is a short machine-readable code (it becomes the rejection row's ``reason``):
    ``xml_too_large``, ``xml_unsafe_dtd``, ``xml_malformed``, ``xml_empty``, ``not_jats``,
    ``xml_unreadable``.
    """


@dataclass
class ParsedArticle:
    """One parsed article.  Dict keys are column names of ARTICLES / FIGURES / MENTIONS."""

    article: dict[str, Any]
    figures: list[dict[str, Any]]
    mentions: list[dict[str, Any]]
    xml_ids: dict[str, Any] = field(default_factory=dict)  # pmcid/pmid/doi/version as in the XML


# ======================================================================================
# Safe parsing
# ======================================================================================
def _make_parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        # collect_ids=False would make libxml2 fetch the external DTD (to learn which attributes
        # are IDs) and fail on an http system id under no_network: every PLOS / older-NLM article
        # whose text has no named entity reference came back "xml_malformed".
    )


_PARSER = _make_parser()
# An internal DTD subset that declares entities: XXE, billion laughs, or just unexpandable.
_DOCTYPE_RE = re.compile(rb"<!DOCTYPE\b", re.IGNORECASE)
_ENTITY_DECL_RE = re.compile(rb"<!ENTITY\b", re.IGNORECASE)
_ROOT_START_RE = re.compile(rb"<[A-Za-z_]")


def _check_prolog(data: bytes) -> None:
    """Reject a DOCTYPE whose internal subset declares entities, before parsing anything."""
    m = _DOCTYPE_RE.search(data, 0, 1 << 20)
    if m is None:
        return
    # The internal subset ends before the root element starts; scan up to there.
    root = _ROOT_START_RE.search(data, m.end())
    end = root.start() if root else len(data)
    if _ENTITY_DECL_RE.search(data, m.end(), end):
        raise JatsError("xml_unsafe_dtd", "DOCTYPE declares entities (XXE / entity expansion refused)")


def _parse_root(data: bytes) -> etree._Element:
    if not data or (len(data) < 4096 and not data.strip()):
        raise JatsError("xml_empty", "empty input")
    _check_prolog(data)
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise JatsError("xml_malformed", str(exc)) from None
    if root is None:
        raise JatsError("xml_empty", "no root element")
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and any(True for _ in dtd.entities()):
        raise JatsError("xml_unsafe_dtd", "DOCTYPE declares entities (XXE / entity expansion refused)")
    return root


def _find_article(root: etree._Element) -> etree._Element:
    """The ``<article>`` element: the root, or inside an OAI-PMH envelope; namespaces removed."""
    if root.tag == "article":
        article = root
    else:
        article = next(root.iter("{*}article"), None)
        if article is None:
            raise JatsError("not_jats", f"no <article> element (root is {_local(root.tag)!r})")
    ns = _namespace(article.tag)
    if ns:
        # OAI-PMH answers put the article in a default namespace; drop it so that plain tag
        # names work below (xlink/mml/ali namespaces are left alone).
        prefix = "{" + ns + "}"
        for el in article.iter(f"{prefix}*"):
            el.tag = el.tag[len(prefix) :]
    return article


def _namespace(tag: Any) -> str:
    if isinstance(tag, str) and tag.startswith("{"):
        return tag[1 : tag.index("}")]
    return ""


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _replace_entity_refs(entities: Iterable[etree._Element]) -> None:
    """Undeclared named entities (``&mdash;`` with no DTD loaded) -> their character, as text."""
    for ent in entities:
        name = ent.text[1:-1] if ent.text else ""
        cp = html.entities.name2codepoint.get(name)
        repl = (chr(cp) if cp is not None else "") + (ent.tail or "")
        parent = ent.getparent()
        if parent is None:
            continue
        prev = ent.getprevious()
        if prev is None:
            parent.text = (parent.text or "") + repl
        else:
            prev.tail = (prev.tail or "") + repl
        parent.remove(ent)


# ======================================================================================
# Text extraction (whitespace-correct)
# ======================================================================================
# Elements that start a new block of text: a space separates them from their neighbours.
_BLOCK_TAGS = frozenset(
    "p title label caption list list-item def-list def-item term def table thead tbody tfoot tr td th "
    "disp-quote disp-formula disp-formula-group sec statement verse-group verse-line speech "
    "array boxed-text ref mixed-citation element-citation attrib break".split()
)
# Floating objects embedded in a paragraph: their text is not the paragraph's text.
_SKIP_TAGS = frozenset(
    "fig fig-group table-wrap table-wrap-group supplementary-material media graphic".split()
)
# Descendants that make an element need the careful walk.  Every other block or float element
# only ever occurs below one of these (list -> list-item, fig-group -> fig, table/array -> tr,
# boxed-text / disp-quote / statement -> p or title, ...).
_SLOW_TRIGGERS = (
    "p", "list-item", "def-item", "title", "label", "break", "fig", "table-wrap", "tr",
    "supplementary-material", "media", "alternatives", "disp-formula", "verse-line", "tex-math",
)
_TO_SPACE = str.maketrans({"\n": " ", "\t": " ", "\r": " ", "\xa0": " ", "\u2028": " ", "\u2029": " "})


def _norm(text: str) -> str:
    """Collapse runs of whitespace (ASCII whitespace and no-break space) into one space; strip.

    Typographic spaces (thin, hair, ...) inside the text are kept as they were typeset.
    """
    if text.isascii():
        return " ".join(text.split())
    if "\n" in text or "\t" in text or "\r" in text or "\xa0" in text or "\u2028" in text or "\u2029" in text:
        text = text.translate(_TO_SPACE)
    while "  " in text:
        text = text.replace("  ", " ")
    return text.strip()


_TEX_DOCUMENT = re.compile(r"\\begin\{document\}(.*?)\\end\{document\}", re.S)


def _tex_body(tex: str) -> str:
    """The formula of a ``<tex-math>``: PMC wraps it in a whole LaTeX document
    (``\\documentclass ... \\begin{document}$$x$$\\end{document}``); keep what is between
    ``\\begin{document}`` and ``\\end{document}``, without its ``$`` delimiters."""
    m = _TEX_DOCUMENT.search(tex)
    return (m.group(1) if m else tex).strip().strip("$").strip()


def _rendering(alternatives: etree._Element) -> etree._Element | None:
    """The one rendering of an ``<alternatives>`` whose text is read: MathML (its text is the
    formula's characters) before TeX markup, else the first child (graphic vs table, ...)."""
    children = [c for c in alternatives if isinstance(c.tag, str)]
    for name in ("math", "tex-math"):
        for c in children:
            if _local(c.tag) == name:
                return c
    return children[0] if children else None


def _collect(el: etree._Element, out: list[str]) -> None:
    if el.text:
        out.append(el.text)
    for child in el:
        _collect_element(child, out)
        if child.tail:
            out.append(child.tail)


def _collect_element(el: etree._Element, out: list[str]) -> None:
    """The text one child element adds to its parent's (its tail aside)."""
    tag = el.tag
    if tag in _BLOCK_TAGS:
        out.append(" ")
        _collect(el, out)
        out.append(" ")
    elif tag in _SKIP_TAGS:
        out.append(" ")
    elif tag == "tex-math":  # inline, like the formula it renders
        out.append(_tex_body(el.text or ""))
    elif tag == "alternatives":
        chosen = _rendering(el)  # one rendering only (mml:math before tex-math, ...)
        if chosen is not None:
            _collect_element(chosen, out)
    elif len(el):
        _collect(el, out)
    elif el.text and isinstance(tag, str):
        out.append(el.text)


def text_of(el: etree._Element | None, marks: _SlowMarks | None = None) -> str:
    """Whitespace-correct text of an element.

    Inline markup (``<italic>``, ``<sup>``, ``<xref>`` ...) is kept without adding spaces; block
    elements (paragraphs, titles, list items, table cells ...) are separated by one space; floats
    embedded in the element (figures, tables, supplementary material) are left out; runs of
    whitespace (including no-break spaces) become one space.  ``marks`` (optional) answers "does
    this element contain block or float markup" for a whole article at once.
    """
    if el is None:
        return ""
    if not len(el):
        return _norm(el.text or "")
    slow = marks.contains_blocks(el) if marks is not None else _has_blocks(el)
    if not slow:
        return _norm(etree.tostring(el, method="text", encoding="unicode", with_tail=False))
    out: list[str] = []
    _collect(el, out)
    return _norm("".join(out))


def _has_blocks(el: etree._Element) -> bool:
    return next(el.iterdescendants(*_SLOW_TRIGGERS), None) is not None


# Block / float elements that are not themselves paragraphs: their ancestors need the careful walk.
_MARK_TRIGGERS = (
    "list", "def-list", "disp-quote", "statement", "boxed-text", "speech", "verse-group", "break", "fig",
    "table-wrap", "array", "supplementary-material", "media", "alternatives", "disp-formula", "tex-math",
)
_MAX_MARK_HITS = 400


class _SlowMarks:
    """The elements of one article that contain block or float markup, found in one pass.

    Paragraph-in-paragraph only happens through the containers above (lists, quotes, boxes ...),
    so ``p`` itself is not a trigger; table cells, which may hold bare ``<p>``s, are always
    checked directly.  Articles with very many triggers (formula-heavy) fall back to checking
    each element on demand.
    """

    def __init__(self, hits: Sequence[etree._Element]) -> None:
        self.marked: set[etree._Element] | None = None
        if len(hits) > _MAX_MARK_HITS:
            return
        marked: set[etree._Element] = set()
        for hit in hits:
            for anc in hit.iterancestors():
                if anc in marked:
                    break
                marked.add(anc)
        self.marked = marked

    def contains_blocks(self, el: etree._Element) -> bool:
        if self.marked is None or el.tag in ("td", "th"):
            return _has_blocks(el)
        return el in self.marked


# ======================================================================================
# Panel letters
# ======================================================================================
_DASHES = "\\-\u2010\u2011\u2012\u2013\u2014\u2015\u2212"
_NUM_RE = re.compile(r"(?<![0-9])(?:(?<![A-Za-z])[Ss])?(\d+(?:\.\d+)*)")
# A panel item: one letter, optionally followed by a sub-panel (Aii, A(ii), A(1), A1), not part of
# a word ("and", "in" are not panels).
_ITEM_RE = re.compile(
    r"([A-Za-z])(?P<sub>[ivx]{1,4}(?![A-Za-z])|\((?:[ivx]{1,4}|\d{1,2})\)|\d{1,2}(?![0-9.]))?(?![A-Za-z])"
)
_ROMAN_ONLY_RE = re.compile(r"(?:[ivx]{2,4}|\((?:[ivx]{1,4})\))(?![A-Za-z])")
_RANGE_RE = re.compile(rf"\s*(?:[{_DASHES}]|\s(?:to|through)\s)\s*(\d+(?:\.\d+)*)?")
_SUBRANGE_RE = re.compile(rf"[{_DASHES}](?:[ivx]{{1,4}}|\d{{1,2}})(?![A-Za-z])")
_SEP_RE = re.compile(r"\s*(?:,\s*(?:and\s+|or\s+|&\s*)?|\s(?:and|or)\s+|&\s*|/\s*|\+\s*)")
_LEAD_RE = re.compile(r"(?:\s*,?\s*panels?\s+|\s?)(\(\s*)?")
_CLOSE_RE = re.compile(r"\s*\)")


@dataclass
class _PanelScan:
    letters: list[str]  # in the order written (ranges expanded)
    end: int  # position just after the last letter consumed (or the start when none)


def _letter_range(a: str, b: str) -> list[str]:
    lo, hi = a.lower(), b.lower()
    if a.isupper() == b.isupper() and lo <= hi and ord(hi) - ord(lo) < 26:
        return [chr(c) for c in range(ord(lo), ord(hi) + 1)]
    return [lo, hi]


def _scan_list(s: str, pos: int, number: str | None) -> _PanelScan:
    """Scan a panel list starting exactly at ``pos``: ``A``, ``A,B``, ``A and B``, ``C–E``, ``Aii``.

    ``number`` is the figure number just before (so ``2A–2C`` is read as a range).
    """
    letters: list[str] = []
    end = pos
    i = pos
    while True:
        rm = _ROMAN_ONLY_RE.match(s, i)
        if rm is not None:  # roman-numeral panel ("ii"): consumed, but it is not a letter
            i = end = rm.end()
        else:
            m = _ITEM_RE.match(s, i)
            if m is None:
                break
            first = m.group(1)
            i = end = m.end()
            if m.group("sub"):
                sub = _SUBRANGE_RE.match(s, i)  # "Ai–iii": a range of sub-panels of A
                if sub is not None:
                    i = end = sub.end()
            got = [first.lower()]
            r = _RANGE_RE.match(s, i)
            if r is not None and (r.group(1) is None or r.group(1) == number):
                m2 = _ITEM_RE.match(s, r.end())
                if m2 is not None:
                    got = _letter_range(first, m2.group(1))
                    i = end = m2.end()
            letters.extend(got)
        sep = _SEP_RE.match(s, i)
        if sep is None:
            break
        i = sep.end()
    return _PanelScan(letters, end)


def _scan_after_number(s: str, pos: int, number: str) -> _PanelScan:
    """Panels written after a figure number: ``2B``, ``2 B-D``, ``2(a)``, ``2, panel C``."""
    lead = _LEAD_RE.match(s, pos)
    start = lead.end() if lead else pos
    scan = _scan_list(s, start, number)
    if lead is not None and lead.group(1) and scan.letters:
        close = _CLOSE_RE.match(s, scan.end)
        if close is not None:
            scan.end = close.end()
    return scan


_LETTERS_ONLY_RE = re.compile(r"\s*(?:panels?\s+)?\(?\s*")


@dataclass(frozen=True)
class _TextPanels:
    letters: tuple[str, ...]  # in the order written
    ends_with_number: bool  # "Figure 2" / "2": letters may follow right after the xref
    ends_with_letter: bool  # "Figure 2A": a list may continue after the xref


_SIMPLE_RE = re.compile(r"(?:Fig(?:ure)?s?\.?\s*)?[Ss]?\d+([A-Za-z])?")


def _scan_text(text: str) -> _TextPanels:
    """Panels named in an xref-like text."""
    simple = _SIMPLE_RE.fullmatch(text)  # fast path for the usual "Figure 2" / "Fig. 2B" / "3"
    if simple is not None:
        letter = simple.group(1)
        return _TextPanels((letter.lower(),), False, True) if letter else _TextPanels((), True, False)
    letters: list[str] = []
    ends_with_number = False
    last_end = -1
    for m in _NUM_RE.finditer(text):
        if m.start() < last_end:
            continue
        scan = _scan_after_number(text, m.end(), m.group(1))
        letters.extend(scan.letters)
        last_end = scan.end if scan.letters else m.end()
    if last_end == -1:
        # No number at all: a text made of panel letters only ("B", "(C-E)", "b and c").
        lead = _LETTERS_ONLY_RE.match(text)
        scan = _scan_list(text, lead.end() if lead else 0, None)
        if scan.letters and not text[scan.end :].strip(" \t\n)].,;:"):
            letters.extend(scan.letters)
            last_end = scan.end
    rest = text[last_end:].strip() if last_end >= 0 else text
    ends_with_number = last_end >= 0 and not rest and text[last_end - 1 : last_end].isdigit()
    ends_with_letter = bool(letters) and not rest.strip(")")
    return _TextPanels(tuple(letters), ends_with_number, ends_with_letter)


def _ordered(letters: Iterable[str]) -> list[str]:
    return sorted(set(letters))


def panels_from_text(text: str) -> list[str]:
    """Panel letters named by a figure reference text, lower-case, sorted, de-duplicated.

    >>> panels_from_text("Figures 1C–E")
    ['c', 'd', 'e']
    >>> panels_from_text("Figure 1—figure supplement 1A")
    ['a']
    >>> panels_from_text("Figures 2 and 3")
    []
    """
    return _ordered(_scan_text(text.replace("\u00a0", " ")).letters)


# Tail text right after an xref: "<xref>Figure 2</xref>B", "<xref>Fig. 2</xref>, C and D)".
_TAIL_SPACE_RE = re.compile(r"(?:\s*,\s*|\s+)(?:panels?\s+)?")
_TERM_STRONG_RE = re.compile(r"\s*[)\];]")
_TERM_WEAK_RE = re.compile(r"\s*(?:[)\];:]|,\s)")


_TAIL_STOP = frozenset(").];:'\"")


def _tail_panels(tail: str, found: _TextPanels, open_end: bool) -> list[str]:
    """Panel letters in the text right after an xref -- conservative.

    * Glued to a bare number (``<xref>2</xref>B``, ``<xref>3</xref>a, b and``): accepted.
    * After a space or comma (``<xref>Fig. 2</xref>, C and D)``), or continuing a list that the
      xref started (``<xref>Figure 2A</xref>, B)``, ``<xref>Figure 2A</xref>–C)``): accepted only
      when the letters are followed by a closing bracket or semicolon (or, for two or more
      letters, a colon or a comma), or end the text run with nothing or another xref after it.
    """
    if not tail or tail[0] in _TAIL_STOP or not (found.ends_with_number or found.ends_with_letter):
        return []
    tail = tail.replace("\u00a0", " ")
    if found.ends_with_number and _ITEM_RE.match(tail):
        return _scan_list(tail, 0, None).letters
    range_from: str | None = None
    if found.ends_with_letter:
        lead = _SEP_RE.match(tail)
        if lead is None:
            lead = _RANGE_RE.match(tail)
            if lead is None or lead.group(1):
                return []
            range_from = found.letters[-1]
    else:
        lead = _TAIL_SPACE_RE.match(tail)
        if lead is None:
            return []
    scan = _scan_list(tail, lead.end(), None)
    if not scan.letters:
        return []
    strong = _TERM_STRONG_RE.match(tail, scan.end)
    weak = _TERM_WEAK_RE.match(tail, scan.end)
    n = len(scan.letters) + (1 if found.ends_with_letter else 0)
    if not (strong or (n >= 2 and weak) or (open_end and not tail[scan.end :].strip())):
        return []
    if range_from is not None:
        return _letter_range(range_from, scan.letters[0]) + scan.letters[1:]
    return scan.letters


# Reference texts repeat a lot ("Figure 2", "Figure 3B"): remember the scans.
_scan_text_cached = functools.lru_cache(maxsize=16384)(_scan_text)


def _xref_panels(text: str, tail: str | None, open_end: bool) -> tuple[list[str], list[str]]:
    """(panels named inside the xref, panels named right after it); ``text`` is normalised."""
    found = _scan_text_cached(text)
    return list(found.letters), _tail_panels(tail or "", found, open_end)


# ======================================================================================
# Metadata
# ======================================================================================
_PUB_PREFERENCE = ("epub", "pub", "epub-ppub", "ppub")
_MONTHS = {m.lower(): i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}


def _int(text: str | None) -> int | None:
    if not text:
        return None
    m = re.search(r"\d+", text)
    return int(m.group(0)) if m else None


def _month(text: str | None) -> int | None:
    if not text:
        return None
    t = text.strip()
    if t.isdigit():
        v = int(t)
        return v if 1 <= v <= 12 else None
    return _MONTHS.get(t[:3].lower()) if re.fullmatch(r"[A-Za-z]+\.?", t) else None


def _date_parts(el: etree._Element) -> tuple[int, int | None, int | None] | None:
    iso = el.get("iso-8601-date")
    if iso:
        m = re.fullmatch(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?", iso.strip())
        if m:
            y, mo, d = int(m.group(1)), _int(m.group(2)), _int(m.group(3))
            return _valid_date(y, mo, d)
    year = _int(el.findtext("year"))
    if year is None:
        return None
    return _valid_date(year, _month(el.findtext("month")), _int(el.findtext("day")))


def _valid_date(y: int, mo: int | None, d: int | None) -> tuple[int, int | None, int | None] | None:
    if not 1000 <= y <= 2999:
        return None
    if mo is None or not 1 <= mo <= 12:
        return (y, None, None)
    if d is not None:
        try:
            _dt.date(y, mo, d)
        except ValueError:
            d = None
    return (y, mo, d)


def _iso(parts: tuple[int, int | None, int | None]) -> str:
    y, mo, d = parts
    if mo is None:
        return f"{y:04d}"
    if d is None:
        return f"{y:04d}-{mo:02d}"
    return f"{y:04d}-{mo:02d}-{d:02d}"


def _pub_kind(el: etree._Element) -> str:
    kind = el.get("pub-type")
    if kind:
        return kind.lower()
    dtype = (el.get("date-type") or "").lower()
    fmt = (el.get("publication-format") or "").lower()
    if dtype == "pub":
        return {"electronic": "epub", "print": "ppub"}.get(fmt, "pub")
    return dtype or "pub"


def _pub_date(meta: etree._Element | None) -> tuple[str | None, int | None]:
    """Most precise publication date: epub / pub / ppub first, then collection, then anything."""
    if meta is None:
        return None, None
    found: dict[str, tuple[int, int | None, int | None]] = {}
    for el in meta.iterchildren("pub-date"):
        parts = _date_parts(el)
        if parts is not None:
            found.setdefault(_pub_kind(el), parts)
    if not found:
        return None, None

    def precision(p: tuple[int, int | None, int | None]) -> int:
        return sum(x is not None for x in p)

    chosen = None
    primary = [found[k] for k in _PUB_PREFERENCE if k in found]
    if primary:
        chosen = max(primary, key=precision)  # max keeps the first of equal precision
    elif "collection" in found:
        chosen = found["collection"]
    else:
        chosen = next(iter(found.values()))
    return _iso(chosen), chosen[0]


def _license(meta: etree._Element | None) -> tuple[str | None, str | None]:
    if meta is None:
        return None, None
    perms = meta.find("permissions")
    if perms is None:
        return None, None
    hrefs: list[str] = [el.text or "" for el in perms.iter("{*}license_ref")]
    types: list[str] = []
    licenses = list(perms.iter("license"))
    for lic in licenses:
        href = lic.get(XLINK_HREF)
        if href:
            hrefs.append(href)
        if lic.get("license-type"):
            types.append(lic.get("license-type", ""))
    code, url = from_jats(hrefs, types)
    if code is not None:
        return code, url  # the licence text is only read when the URLs and types say nothing
    texts: list[str] = []
    for lic in licenses:
        for p in lic.iter("license-p"):
            texts.append(text_of(p))
            texts.extend(a.get(XLINK_HREF, "") for a in p.iter("ext-link", "uri"))
    return from_jats(hrefs, types, texts)


_RETRACTED_TITLE_RE = re.compile(r"^\s*(?:RETRACTED\b|Retracted(?:\s+article)?\s*:)")
_RETRACTION_RELATED = frozenset({"retracted-article", "retraction-forward", "retraction"})


def _retraction(article: etree._Element, meta: etree._Element | None, title: str | None) -> str | None:
    if (article.get("article-type") or "").lower() == "retraction":
        return "jats-article-type"
    if meta is not None:
        for rel in meta.iter("related-article"):
            if (rel.get("related-article-type") or "").lower() in _RETRACTION_RELATED:
                return "jats-related-article"
    if title and _RETRACTED_TITLE_RE.match(title):
        return "title"
    return None


_PMCID_RE = re.compile(r"(?:PMC)?(\d+)(?:\.(\d+))?", re.IGNORECASE)


def _norm_pmcid(value: str | None) -> tuple[str | None, int | None]:
    if not value:
        return None, None
    m = _PMCID_RE.fullmatch(value.strip())
    if not m:
        return None, None
    return f"PMC{int(m.group(1))}", (int(m.group(2)) if m.group(2) else None)


def _ids(meta: etree._Element | None) -> dict[str, Any]:
    out: dict[str, Any] = {"pmcid": None, "pmid": None, "doi": None, "version": None}
    if meta is None:
        return out
    for el in meta.iterchildren("article-id"):
        kind = (el.get("pub-id-type") or "").lower()
        value = (el.text or "").strip()
        if not value:
            continue
        if kind in {"pmc", "pmcid", "pmc-uid", "pmcaid", "pmcid-ver"} and out["pmcid"] is None:
            pmcid, ver = _norm_pmcid(value)
            out["pmcid"] = pmcid
            if ver is not None:
                out["version"] = ver
        elif kind == "pmid" and out["pmid"] is None:
            out["pmid"] = value
        elif kind == "doi" and out["doi"] is None:
            out["doi"] = value
    if out["version"] is None:
        out["version"] = _int(meta.findtext("article-version"))
    return out


def _journal(front: etree._Element | None) -> str | None:
    if front is None:
        return None
    jm = front.find("journal-meta")
    if jm is None:
        return None
    for path in ("journal-title-group/journal-title", "journal-title", "journal-id"):
        el = jm.find(path)
        if el is not None:
            t = text_of(el)
            if t:
                return t
    return None


# ======================================================================================
# Media resolution
# ======================================================================================
_EXT_RANK = {".jpg": 0, ".jpeg": 1, ".png": 2, ".gif": 3, ".tif": 4, ".tiff": 5}


class _MediaIndex:
    """Look up a graphic href among the available media file names."""

    def __init__(self, names: Iterable[str]) -> None:
        self.exact: dict[str, str] = {}
        self.lower: dict[str, str] = {}
        self.stem: dict[str, list[str]] = {}
        self.stem_lower: dict[str, list[str]] = {}
        for name in names:
            base = _basename(name)
            self.exact.setdefault(base, name)
            self.lower.setdefault(base.lower(), name)
            stem = _stem(base)
            self.stem.setdefault(stem, []).append(name)
            self.stem_lower.setdefault(stem.lower(), []).append(name)

    @staticmethod
    def _best(cands: list[str]) -> str:
        return min(cands, key=lambda n: (_EXT_RANK.get(os.path.splitext(n)[1].lower(), 9), n))

    def resolve(self, href: str) -> str | None:
        base = _basename(href)
        if not base:
            return None
        hit = self.exact.get(base)
        if hit is not None:
            return hit
        for key in (base, _stem(base)):
            cands = self.stem.get(key)
            if cands:
                return self._best(cands)
        hit = self.lower.get(base.lower())
        if hit is not None:
            return hit
        for key in (base.lower(), _stem(base).lower()):
            cands = self.stem_lower.get(key)
            if cands:
                return self._best(cands)
        return None


def _basename(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1].strip()


def _stem(name: str) -> str:
    root, ext = os.path.splitext(name)
    return root if ext.lower() in _EXT_RANK or ext.lower() in {".eps", ".bmp", ".svg", ".webp"} else name


def resolve_media(href: str, media_names: Sequence[str]) -> str | None:
    """The media file name that a ``<graphic xlink:href>`` refers to, or None.

    Exact name first; then the same name with any image extension (``.jpg`` preferred over
    ``.jpeg``, ``.png``, ``.gif``, ``.tif``); then the same, case-insensitively.
    """
    return _MediaIndex(media_names).resolve(href)


# ======================================================================================
# The article walk
# ======================================================================================
_PARA_TAGS = ("p", "td", "th", "title")
_PARA_TAG_SET = frozenset(_PARA_TAGS)
_SECTION_TAGS = ("sec", "app", "boxed-text", "ack", "abstract", "trans-abstract", "glossary", "sub-article")
_DOI_PARA_RE = re.compile(r"^DOI:\s*\S+$")


class _Walker:
    """Extracts figures and mentions from one ``<article>`` (caches per paragraph / section)."""

    def __init__(
        self,
        article: etree._Element,
        media: _MediaIndex | None = None,
        media_dir: str | None = None,
        *,
        pmcid: str | None = None,
        version: int = 1,
    ) -> None:
        self.article = article
        self.media = media
        self.media_dir = media_dir
        self.set_ids(pmcid, version)
        self._figures: list[dict[str, Any]] = []
        self._para: dict[etree._Element, tuple[etree._Element | None, str, str | None]] = {}
        self._section: dict[etree._Element, str | None] = {}
        self._section_by_parent: dict[etree._Element | None, str | None] = {}
        # One walk over the tree finds everything the later steps iterate over.
        entities: list[etree._Element] = []
        self._fig_els: list[etree._Element] = []
        self._xref_els: list[etree._Element] = []
        hits: list[etree._Element] = []
        for el in article.iter(etree.Entity, "fig", "xref", *_MARK_TRIGGERS):
            tag = el.tag
            if tag == "xref":
                if el.get("ref-type") == "fig":
                    self._xref_els.append(el)
            elif tag == "fig":
                self._fig_els.append(el)
                hits.append(el)
            elif tag is etree.Entity:
                entities.append(el)
            else:
                hits.append(el)
        if entities:
            _replace_entity_refs(entities)
        self.marks = _SlowMarks(hits)

    def set_ids(self, pmcid: str | None, version: int) -> None:
        self.pmcid = pmcid
        self.version = version
        self.uid = f"{pmcid}.{version}" if pmcid else None

    # ---------------------------------------------------------------- figures
    def figures(self) -> list[dict[str, Any]]:
        figs: list[dict[str, Any]] = []
        seen: set[str] = set()
        group_ids: dict[etree._Element, str] = {}
        last_parent: str | None = None
        for ordinal, fig in enumerate(self._fig_els):
            fid = (fig.get("id") or "").strip()
            synthetic = not fid or fid in seen
            if synthetic:
                fid = f"fig-auto-{ordinal}"
            seen.add(fid)

            group = fig.getparent()
            group_id: str | None = None
            group_caption = ""
            if group is not None and group.tag == "fig-group":
                if group not in group_ids:
                    group_ids[group] = (group.get("id") or "").strip() or f"fig-group-auto-{len(group_ids)}"
                group_id = group_ids[group]
                group_caption = self._caption(group.find("caption"))[1]

            is_child = (fig.get("specific-use") or "").lower() == "child-fig"
            parent_id: str | None = None
            if is_child:
                parent_id = self._parent_of(fig, fid, group, seen) or last_parent
            else:
                last_parent = fid

            title, caption = self._caption(fig.find("caption"))
            if group_caption:
                caption = f"{group_caption} {caption}".strip()
            graphics = [g.get(XLINK_HREF) or "" for g in fig.iter("graphic")]
            figs.append(
                {
                    "figure_id": fid,
                    "figure_id_synthetic": synthetic,
                    "ordinal": ordinal,
                    "label": text_of(fig.find("label")) or None,
                    "caption_title": title or None,
                    "caption": caption or None,
                    "fig_group_id": group_id,
                    "parent_figure_id": parent_id,
                    "graphics": graphics,
                    "graphic_paths": [self._resolve(h) for h in graphics],
                    "n_mentions": 0,
                    "figure_uid": f"{self.uid}/{fid}" if self.uid else None,
                    "article_uid": self.uid,
                    "pmcid": self.pmcid,
                    "version": self.version,
                    "chunk": None,
                }
            )
        self._figures = figs
        return figs

    @staticmethod
    def _parent_of(fig: etree._Element, fid: str, group: etree._Element | None, seen: set[str]) -> str | None:
        if group is not None and group.tag == "fig-group":
            for sib in group.iterchildren("fig"):
                if sib is fig:
                    break
                if (sib.get("specific-use") or "").lower() != "child-fig" and sib.get("id"):
                    return sib.get("id")
        m = re.fullmatch(r"(.+?)s\d+", fid)
        if m and m.group(1) in seen:
            return m.group(1)
        return None

    def _caption(self, cap: etree._Element | None) -> tuple[str, str]:
        """(title, caption) where caption = title + paragraphs (eLife "DOI:" lines dropped)."""
        if cap is None:
            return "", ""
        parts: list[str] = []  # each already normalised
        title = ""
        if cap.text and not cap.text.isspace():
            parts.append(_norm(cap.text))
        for child in cap:
            tag = child.tag
            if tag == "title":
                title = text_of(child, self.marks)
                parts.append(title)
            elif isinstance(tag, str):
                t = text_of(child, self.marks)
                if not (tag == "p" and _DOI_PARA_RE.match(t)):
                    parts.append(t)
            if child.tail and not child.tail.isspace():
                parts.append(_norm(child.tail))
        return title, " ".join(p for p in parts if p)

    def _resolve(self, href: str) -> str | None:
        if self.media is None or not href:
            return None
        name = self.media.resolve(href)
        if name is None:
            return None
        return os.path.join(self.media_dir, name) if self.media_dir else name

    # ---------------------------------------------------------------- mentions
    def mentions(self) -> list[dict[str, Any]]:
        """Every ``<xref ref-type="fig">``, linked to the figures (call :meth:`figures` first)."""
        out: list[dict[str, Any]] = []
        linker = _Linker(self._figures)
        by_id = {f["figure_id"]: f for f in self._figures}
        uid = self.uid
        marks = self.marks
        for xref in self._xref_els:
            text = text_of(xref, marks)
            found = _scan_text_cached(text)
            letters = found.letters
            tail = xref.tail
            extra: list[str] = []
            if tail and tail[0] not in _TAIL_STOP and (found.ends_with_number or found.ends_with_letter):
                nxt = xref.getnext()
                extra = _tail_panels(tail, found, nxt is None or nxt.tag == "xref")
            block, para, section = self._paragraph_info(xref)
            rids = (xref.get("rid") or "").split()
            targets = linker.targets(rids)
            for fid in targets:
                by_id[fid]["n_mentions"] += 1
            ordinal = len(out)
            out.append(
                {
                    "mention_uid": f"{uid}/m{ordinal}" if uid else None,
                    "article_uid": uid,
                    "pmcid": self.pmcid,
                    "chunk": None,
                    "ordinal": ordinal,
                    "text": text,
                    "figure_ids": rids,
                    "figure_uids": [f"{uid}/{t}" for t in targets] if uid else [],
                    "panels": _ordered(letters + tuple(extra)) if extra or len(letters) > 1 else list(letters),
                    "paragraph_index": block,  # replaced by the block's index below
                    "paragraph": para,
                    "section": section,
                }
            )
        index = self._block_indexes({m["paragraph_index"] for m in out} - {None})
        for m in out:
            m["paragraph_index"] = index.get(m["paragraph_index"])
        return out

    def _block_indexes(self, blocks: set[etree._Element]) -> dict[etree._Element, int]:
        """Document-order index of text blocks (p, td, th, title) -- stops once all are found."""
        out: dict[etree._Element, int] = {}
        if not blocks:
            return out
        for i, el in enumerate(self.article.iter(*_PARA_TAGS)):
            if el in blocks:
                out[el] = i
                if len(out) == len(blocks):
                    break
        return out

    def _paragraph_info(self, xref: etree._Element) -> tuple[etree._Element | None, str, str | None]:
        """(block element, text, section title) of the block enclosing ``xref`` -- cached per block."""
        el = xref.getparent()
        if el is None:
            return None, text_of(xref), None
        if el.tag not in _PARA_TAG_SET:
            el = next(xref.iterancestors(*_PARA_TAGS), el)
        info = self._para.get(el)
        if info is None:
            parent = el.getparent()
            if parent in self._section_by_parent:
                section = self._section_by_parent[parent]
            else:
                section = self._section_by_parent[parent] = self._section_of(el)
            info = self._para[el] = (el, text_of(el, self.marks), section)
        return info

    def _section_of(self, el: etree._Element) -> str | None:
        for anc in el.iterancestors(*_SECTION_TAGS):
            if anc in self._section:
                name = self._section[anc]
            elif anc.tag == "sub-article":
                name = text_of(anc.find("front-stub/title-group/article-title")) or None
            else:
                title = anc.find("title")
                name = text_of(title) if title is not None else None
                if not name and anc.tag == "abstract":
                    name = "Abstract"
            self._section[anc] = name
            if name or anc.tag == "sub-article":
                return name
        return None


class _Linker:
    """Figure ids an xref's rids point to (a rid naming a fig-group means all its members)."""

    def __init__(self, figures: Sequence[Mapping[str, Any]]) -> None:
        self.ids = {f["figure_id"] for f in figures if not f["figure_id_synthetic"]}
        self.groups: dict[str, list[str]] = {}
        for f in figures:
            if f["fig_group_id"]:
                self.groups.setdefault(f["fig_group_id"], []).append(f["figure_id"])

    def targets(self, rids: Sequence[str]) -> list[str]:
        if len(rids) == 1 and rids[0] in self.ids:
            return [rids[0]]
        out: list[str] = []
        for rid in rids:
            if rid in self.ids:
                out.append(rid)
            else:
                out.extend(self.groups.get(rid, ()))
        return list(dict.fromkeys(out)) if len(out) > 1 else out


def _parse_tree(
    root: etree._Element,
    *,
    media_names: Sequence[str],
    media_dir: str | None,
    pmcid: str | None,
    version: int | None,
    xml_path: str | None,
) -> ParsedArticle:
    article = _find_article(root)
    if media_dir and not media_names:
        try:
            media_names = sorted(os.listdir(media_dir))
        except OSError:
            media_names = ()
    walker = _Walker(article, _MediaIndex(media_names) if media_names else None, media_dir)
    front = article.find("front")
    meta = front.find("article-meta") if front is not None else None
    ids = _ids(meta)
    if ids["pmcid"] is None and article is not root:
        # OAI-PMH header: <identifier>oai:pubmedcentral.nih.gov:156895</identifier>
        ident = next((el.text for el in root.iter("{*}identifier") if el.text), None)
        if ident and ident.rsplit(":", 1)[-1].isdigit():
            ids["pmcid"] = f"PMC{int(ident.rsplit(':', 1)[-1])}"
    pmcid_final = _norm_pmcid(pmcid)[0] if pmcid else ids["pmcid"]
    version_final = int(version) if version is not None else (ids["version"] or 1)
    article_uid = f"{pmcid_final}.{version_final}" if pmcid_final else None

    title = text_of(meta.find("title-group/article-title")) if meta is not None else ""
    pub_date, year = _pub_date(meta)
    lic_code, lic_url = _license(meta)
    retraction = _retraction(article, meta, title)

    walker.set_ids(pmcid_final, version_final)
    figures = walker.figures()
    mentions = walker.mentions()

    art = {
        "article_uid": article_uid,
        "pmcid": pmcid_final,
        "version": version_final,
        "chunk": None,
        "pmid": ids["pmid"],
        "doi": ids["doi"],
        "title": title or None,
        "journal": _journal(front),
        "article_type": article.get("article-type"),
        "pub_date": pub_date,
        "year": year,
        "license_code": lic_code,
        "license_url": lic_url,
        "is_retracted": retraction is not None,
        "retraction_source": retraction,
        "n_figures": len(figures),
        "n_mentions": len(mentions),
        "xml_path": xml_path,
    }
    return ParsedArticle(art, figures, mentions, xml_ids=ids)


def parse_bytes(
    data: bytes,
    *,
    media_names: Sequence[str] = (),
    media_dir: str | None = None,
    pmcid: str | None = None,
    version: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    xml_path: str | None = None,
) -> ParsedArticle:
    """Parse one JATS article (or OAI-PMH GetRecord answer) from bytes.

    ``media_names``: file names available for the article (graphic hrefs are resolved against
    them; ``media_dir`` is joined to the resolved name).  ``pmcid`` / ``version`` override the
    XML's.  Raises :class:`JatsError` for oversized, unsafe, malformed or non-JATS input.
    """
    if len(data) > max_bytes:
        raise JatsError("xml_too_large", f"{len(data)} bytes > limit {max_bytes}")
    root = _parse_root(data)
    return _parse_tree(
        root, media_names=media_names, media_dir=media_dir, pmcid=pmcid, version=version, xml_path=xml_path
    )


def parse_file(
    path: str | os.PathLike[str],
    *,
    media_names: Sequence[str] = (),
    media_dir: str | None = None,
    pmcid: str | None = None,
    version: int | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ParsedArticle:
    """Parse one JATS file (see :func:`parse_bytes`); the size limit is checked before reading."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise JatsError("xml_too_large", f"{path}: {size} bytes > limit {max_bytes}")
        data = p.read_bytes()
    except OSError as exc:
        raise JatsError("xml_unreadable", f"{path}: {exc}") from None
    return parse_bytes(
        data,
        media_names=media_names,
        media_dir=media_dir,
        pmcid=pmcid,
        version=version,
        max_bytes=max_bytes,
        xml_path=str(path),
    )


# ======================================================================================
# The chunk stage
# ======================================================================================
@dataclass(frozen=True)
class ParseSettings(Settings):
    """``parse``, typed and frozen (defaults and ranges in config/schema/config.schema.yaml)."""

    SECTION: ClassVar[tuple[str, ...]] = ("parse",)

    max_xml_mb: float
    max_mention_chars: int
    verify_checksums: bool

    @property
    def max_bytes(self) -> int:
        return int(self.max_xml_mb * 2**20)


def _merge_source(art: dict[str, Any], row: Mapping[str, Any]) -> None:
    """Source metadata (ACQUIRED) wins over the XML; retraction signals are OR-ed."""
    for key in ("pmid", "doi", "license_code"):
        if row.get(key):
            art[key] = row[key]
    if row.get("is_retracted"):
        art["is_retracted"] = True
        art["retraction_source"] = "metadata"


def _changed_since_download(path: str, md5: str | None) -> str | None:
    """Why a cached file no longer is what was downloaded (missing, other md5), or None."""
    if not md5:
        return None
    try:
        actual = file_md5(path)
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    if actual != md5.lower():
        return f"md5 {actual} != {md5} recorded when it was downloaded"
    return None


def _clean_row(row: dict[str, Any]) -> bool:
    """Normalise every text field of a parsed row in place (pmcflow.textclean); True if any changed."""
    changed = False
    for k, v in row.items():
        if isinstance(v, str):
            c = clean_text(v)
            if c != v:
                row[k], changed = c, True
        elif isinstance(v, list) and any(isinstance(x, str) for x in v):
            c_list = [clean_text(x) if isinstance(x, str) else x for x in v]
            if c_list != v:
                row[k], changed = c_list, True
    return changed


def parse_chunk(
    settings: ParseSettings, chunk: str, acquired_path: str, outputs: Outputs
) -> dict[str, Any]:
    """Parse every acquired article of one chunk.

    Writes the ``parse_chunk`` rule's outputs (``articles``, ``figures``, ``mentions``,
    ``rejections``, ``counts``; :func:`pmcflow.tables.stage_outputs`: the rule's named outputs, or a
    folder) and returns the counts record.
    """
    out = stage_outputs("parse_chunk", outputs)
    max_bytes = settings.max_bytes
    rows = read_rows(acquired_path)
    rej = Rejections("parse", chunk)
    articles: list[dict[str, Any]] = []
    figures: list[dict[str, Any]] = []
    mentions: list[dict[str, Any]] = []
    seen: set[str] = set()
    stats = {"figures": 0, "mentions": 0, "mentions_with_panels": 0, "mentions_unlinked": 0,
             "graphics": 0, "graphics_unresolved": 0, "figure_ids_synthetic": 0, "pmcid_mismatch": 0,
             "text_normalised": 0, "mentions_over_cap": 0, "media_checksum_mismatch": 0}
    max_mention, verify = settings.max_mention_chars, settings.verify_checksums

    for row in progress(rows, desc=f"parse {chunk}", unit="article"):
        uid = str(row["article_uid"])
        pmcid = str(row["pmcid"])
        if uid in seen:
            rej.add(uid, "duplicate_article", "article_uid listed twice in ACQUIRED", pmcid)
            continue
        seen.add(uid)
        media = [m for m in (row.get("media") or []) if m and m.get("name")]
        path_of = {m["name"]: m.get("path") for m in media}
        if verify:  # what acquisition verified may have changed on disk since: check again on read
            bad = _changed_since_download(row["xml_path"], row.get("xml_md5"))
            if bad:
                rej.add(uid, "checksum_mismatch", f"{row['xml_path']}: {bad}", pmcid)
                continue
            for m in media:
                if m.get("path") and _changed_since_download(m["path"], m.get("md5")):
                    path_of[m["name"]] = None  # the graphic is then unresolved (decompose: missing)
                    stats["media_checksum_mismatch"] += 1
        try:
            parsed = parse_file(
                row["xml_path"],
                media_names=list(path_of),
                pmcid=pmcid,
                version=row.get("version"),
                max_bytes=max_bytes,
            )
        except JatsError as exc:
            rej.add(uid, exc.reason, exc.detail, pmcid)
            continue

        art = parsed.article
        stats["text_normalised"] += sum(
            _clean_row(r) for r in (art, *parsed.figures, *parsed.mentions)
        )
        if parsed.xml_ids.get("pmcid") and parsed.xml_ids["pmcid"] != art["pmcid"]:
            stats["pmcid_mismatch"] += 1
        _merge_source(art, row)
        art.update(article_uid=uid, chunk=chunk)
        articles.append(art)
        for f in parsed.figures:
            f.update(article_uid=uid, chunk=chunk, figure_uid=f"{uid}/{f['figure_id']}")
            f["graphic_paths"] = [path_of.get(n) if n else None for n in f["graphic_paths"]]
            stats["graphics"] += len(f["graphics"])
            stats["graphics_unresolved"] += sum(p is None for p in f["graphic_paths"])
            stats["figure_ids_synthetic"] += bool(f["figure_id_synthetic"])
            figures.append(f)
        for m in parsed.mentions:
            if over_cap(m.get("text"), max_mention):  # never handed to a summariser whole
                stats["mentions_over_cap"] += 1
                continue
            targets = [u.split("/", 1)[1] for u in m["figure_uids"]]
            m.update(article_uid=uid, chunk=chunk, mention_uid=f"{uid}/m{m['ordinal']}")
            m["figure_uids"] = [f"{uid}/{t}" for t in targets]
            stats["mentions_with_panels"] += bool(m["panels"])
            stats["mentions_unlinked"] += not m["figure_uids"]
            mentions.append(m)
    stats["figures"] = len(figures)
    stats["mentions"] = len(mentions)

    record = counts_record("parse", len(rows), len(articles), rej.by_reason(), chunk=chunk, extra=stats)
    return write_stage(
        out,
        record,
        tables={
            "articles": (articles, S.ARTICLES),
            "figures": (figures, S.FIGURES),
            "mentions": (mentions, S.MENTIONS),
        },
        rejections={"rejections": rej},
    )


# ======================================================================================
# Command line
# ======================================================================================
def cli(argv: Sequence[str]) -> int:
    """``pmcflow jats FILE...``: one JSON object per figure per line."""
    ap = argparse.ArgumentParser(prog="pmcflow jats", description="Parse JATS files; print figures as JSON lines.")
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--media-dir", default=None, help="Directory holding the article's media files.")
    ap.add_argument("--max-xml-mb", type=float, help="size limit per XML file (default: parse.max_xml_mb's)")
    args = ap.parse_args(list(argv))
    limits = {} if args.max_xml_mb is None else {"max_xml_mb": args.max_xml_mb}
    max_bytes = ParseSettings.from_section(limits).max_bytes
    failed = 0
    # JSON lines go to stdout: a bar on stderr only when they do not share the terminal with it
    files = args.files if sys.stdout.isatty() else progress(args.files, desc="jats", unit="file", summary=False)
    for path in files:
        try:
            parsed = parse_file(path, media_dir=args.media_dir, max_bytes=max_bytes)
        except JatsError as exc:
            echo(f"pmcflow jats: {path}: {exc.reason}: {exc.detail}")
            failed += 1
            continue
        by_fig: dict[str, list[dict[str, Any]]] = {f["figure_id"]: [] for f in parsed.figures}
        linker = _Linker(parsed.figures)
        for m in parsed.mentions:
            for fid in linker.targets(m["figure_ids"]):
                by_fig[fid].append({"text": m["text"], "figure_ids": m["figure_ids"], "panels": m["panels"]})
        for f in parsed.figures:
            rec = {
                "pmcid": parsed.article["pmcid"],
                "figure_id": f["figure_id"],
                "label": f["label"],
                "caption": f["caption"],
                "graphics": f["graphics"],
                "mentions": by_fig[f["figure_id"]],
            }
            sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return 1 if failed else 0


def cli_parse_chunk(argv: Sequence[str]) -> int:
    """``pmcflow parse-chunk --chunk C --acquired acquired.parquet --out DIR``."""
    from pmcflow.config import add_config_args, config_from_args

    ap = argparse.ArgumentParser(prog="pmcflow parse-chunk", description="Parse one acquired chunk.")
    add_config_args(ap)
    ap.add_argument("--chunk", required=True)
    ap.add_argument("--acquired", required=True, help="ACQUIRED parquet of the chunk.")
    ap.add_argument("--out", required=True, help="Output directory.")
    args = ap.parse_args(list(argv))
    cfg = config_from_args(args)
    record = parse_chunk(ParseSettings.from_config(cfg), args.chunk, args.acquired, args.out)
    print(json.dumps(record, sort_keys=True))
    return 0
