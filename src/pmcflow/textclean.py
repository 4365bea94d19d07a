"""Text on its way into tables and shards: normalised, free of control characters, capped.

Everything a stage writes as text goes through :func:`clean_text` first (parse for captions,
titles and mentions; enrich for generated subcaptions and summaries; shard for the ``.txt``):

* Unicode NFC, so the same caption is the same bytes whichever way its source composed accents;
* C0 and C1 control characters (NUL included), lone surrogates and non-characters removed, except
  tab and newline; ``\\r\\n`` and ``\\r`` become ``\\n``;
* nothing else is changed (no whitespace collapsing, no case folding): the verbatim text is what
  the paper's recipe trains on.

XML 1.0 already refuses NUL and most C0 characters (the article is rejected as ``xml_malformed``);
C1 characters, metadata JSON and model outputs can still carry them, hence this module.

Length caps (``parse.max_caption_chars``, ``parse.max_mention_chars``, ``enrich.max_*_chars``) are
applied by the stages before any model sees the text; :func:`over_cap` is the one test they use.
"""

from __future__ import annotations

import re
import unicodedata

# C0 except \t \n \r, DEL, C1, surrogates, U+FFFE/U+FFFF and the other non-characters.
_BAD_RE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]"
)
_CR_RE = re.compile(r"\r\n?")


def clean_text(text: str | None) -> str | None:
    """``text`` normalised (NFC, controls removed, newlines unified); None stays None."""
    if text is None:
        return None
    if text.isascii() and text.isprintable():
        return text  # the common case, unchanged and fast
    out = _CR_RE.sub("\n", text)
    out = _BAD_RE.sub("", out)
    return unicodedata.normalize("NFC", out)


def needs_cleaning(text: str | None) -> bool:
    return text is not None and clean_text(text) != text


def over_cap(text: str | None, cap: int | None) -> bool:
    """True when ``text`` is longer than ``cap`` characters (``cap`` None or 0 = no cap)."""
    return bool(cap) and text is not None and len(text) > int(cap)  # type: ignore[arg-type]
