"""Licences, in one place: what a JATS ``<license>`` says, and one canonical code for any spelling.

Codes: ``CC0``, ``CC BY``, ``CC BY-SA``, ``CC BY-ND``, ``CC BY-NC``, ``CC BY-NC-SA``,
``CC BY-NC-ND`` and ``PD`` (public domain). The parser (:func:`from_jats`), the listing-time
selection (``select.licenses``) and the filter stage (``filter.licenses``) all use
:func:`normalise`, so a licence is never kept by one and refused by another for its spelling.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# Licences that allow commercial use (the default of filter.licenses).
COMMERCIAL = ("CC0", "CC BY", "CC BY-SA", "CC BY-ND")

_CC_URL_RE = re.compile(r"creativecommons\.org/(licenses|publicdomain)/([a-z0-9.-]+)", re.IGNORECASE)
_URL_RE = re.compile(r"https?://[^\s\"'<>)\]]+", re.IGNORECASE)


def _cc_from_parts(parts: Iterable[str]) -> str | None:
    ps = {p for p in parts if p}
    if "by" not in ps:
        return None
    code = "CC BY"
    if "nc" in ps:
        code += "-NC"
    if "sa" in ps:
        code += "-SA"
    elif "nd" in ps:
        code += "-ND"
    return code


def _license_from_url(url: str) -> str | None:
    m = _CC_URL_RE.search(url)
    if m is None:
        return None
    kind, what = m.group(1).lower(), m.group(2).lower()
    if kind == "publicdomain":
        if what.startswith("zero"):
            return "CC0"
        if what.startswith("mark"):
            return "PD"
        return None
    if what.startswith("publicdomain"):
        return "PD"
    return _cc_from_parts(what.split("-"))


def _license_from_type(value: str) -> str | None:
    v = re.sub(r"[\s_]+", "-", value.strip().lower())
    if re.fullmatch(r"cc-?(?:0|zero)(?:-\d+(?:\.\d+)*)?", v):
        return "CC0"
    v = re.sub(r"-?\d+(?:\.\d+)*$", "", v)  # version suffix: cc-by-4.0
    if v in {"public-domain", "publicdomain", "pd", "public-domain-mark"}:
        return "PD"
    m = re.fullmatch(r"(?:cc-?)?(by(?:-?(?:nc|sa|nd))*)(?:-license|-licence)?", v)
    if m:
        return _cc_from_parts(re.findall(r"by|nc|sa|nd", m.group(1)))
    return None


_FREE_CC_TOKEN_RE = re.compile(r"\bcc[\s-]?(by(?:[\s-](?:nc|sa|nd))*)\b", re.IGNORECASE)
_FREE_ATTRIB_RE = re.compile(r"creative\s+commons\s+attribution", re.IGNORECASE)


def _license_from_text(text: str) -> str | None:
    low = text.lower()
    m = _FREE_CC_TOKEN_RE.search(text)
    if m:
        return _cc_from_parts(re.split(r"[\s-]", m.group(1).lower()))
    m = _FREE_ATTRIB_RE.search(text)
    if m:
        window = low[m.end() : m.end() + 60]
        parts = ["by"]
        if re.search(r"non[\s-]?commercial", window):
            parts.append("nc")
        if re.search(r"share[\s-]?alike", window):
            parts.append("sa")
        elif re.search(r"no[\s-]?deriv", window):
            parts.append("nd")
        return _cc_from_parts(parts)
    if re.search(r"\bcc0\b|creative\s+commons\s+zero|public\s+domain\s+dedication", low):
        return "CC0"
    if "public domain" in low:
        return "PD"
    return None


def from_jats(
    hrefs: Sequence[str] = (), types: Sequence[str] = (), texts: Sequence[str] = ()
) -> tuple[str | None, str | None]:
    """(code, url) from ``<ali:license_ref>``/``xlink:href`` URLs, ``license-type`` and free text.

    Codes: ``CC0``, ``CC BY``, ``CC BY-SA``, ``CC BY-ND``, ``CC BY-NC``, ``CC BY-NC-SA``,
    ``CC BY-NC-ND``, ``PD`` (public domain); ``None`` when unrecognised (the URL is kept).
    URLs win over ``license-type``, which wins over the licence text; inside the text a
    ``/licenses/`` link wins over a CC0 data waiver mentioned alongside it.
    """
    url = next((h.strip() for h in hrefs if h and h.strip()), None)
    for h in hrefs:
        code = _license_from_url(h or "")
        if code:
            return code, h.strip()
    for t in types:
        code = _license_from_type(t or "")
        if code:
            return code, url
    text_urls = [u for t in texts for u in _URL_RE.findall(t)]
    ranked = sorted(text_urls, key=lambda u: 0 if "/licenses/" in u.lower() else 1)
    for u in ranked:
        code = _license_from_url(u)
        if code:
            return code, url or u
    for t in texts:
        code = _license_from_text(t)
        if code:
            return code, url or (text_urls[0] if text_urls else None)
    return None, url or (text_urls[0] if text_urls else None)


def _tidy(code: str) -> str | None:
    """Upper-case with single spaces, ``CC-X`` -> ``CC X``, ``CC 0`` -> ``CC0``."""
    s = " ".join(code.strip().upper().split())
    if not s:
        return None
    if s.startswith("CC-") and not s.startswith("CC-0"):
        s = "CC " + s[3:]
    if s in ("CC-0", "CC 0", "CC ZERO"):
        s = "CC0"
    return s


def normalise(code: str | None) -> str | None:
    """Canonical licence code: ``"cc-by-4.0"``, ``"CC BY 4.0"``, a CC URL -> ``"CC BY"``.

    Anything unrecognised comes back upper-cased with single spaces (``"NO-CC CODE"``);
    None or blank -> None.
    """
    if code is None or not str(code).strip():
        return None
    text = str(code).strip()
    if "creativecommons.org" in text.lower():
        found, _ = from_jats(hrefs=[text])
    else:
        found, _ = from_jats(types=[text])
    return found or _tidy(text)
