"""Stateless, stable chunking of article versions.

An article's chunk depends only on its PMCID number and the configured span, so a refresh that
adds articles touches only the chunks their PMCIDs fall in, and a chunk's identity never moves.
Each chunk's content digest (over its listing rows) lets the workflow rerun exactly the chunks
whose rows changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

_PMCID_RE = re.compile(r"^(?:PMC)?(\d+)$", re.IGNORECASE)
CHUNK_RE = re.compile(r"^c\d{6,}$")


def chunk_of(pmcid_num: int, span: int) -> str:
    """The chunk id of PMCID number ``pmcid_num``: ``f"c{pmcid_num // span:06d}"``."""
    if span < 1:
        raise ValueError(f"chunk span must be >= 1, got {span}")
    if pmcid_num < 0:
        raise ValueError(f"PMCID number must be >= 0, got {pmcid_num}")
    return f"c{pmcid_num // span:06d}"


def pmcid_number(pmcid: str) -> int:
    """``"PMC13900"`` (or ``"13900"``) -> ``13900``; raises ValueError otherwise."""
    m = _PMCID_RE.match(pmcid.strip())
    if not m:
        raise ValueError(f"not a PMCID: {pmcid!r}")
    return int(m.group(1))


DIGEST_FIELDS = ("article_uid", "key", "license_code", "is_retracted")


def chunk_digest(rows: Iterable[Mapping[str, Any]]) -> str:
    """sha256 over the chunk's sorted ``(article_uid, key, license_code, is_retracted)`` tuples.

    Each tuple is serialised as one compact JSON array per line (``null`` for unknown values),
    lines sorted, joined with ``\\n``.
    """
    lines = sorted(
        json.dumps([r.get(f) for f in DIGEST_FIELDS], separators=(",", ":"), ensure_ascii=False)
        for r in rows
    )
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def chunk_manifest(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{chunk: {"n": rows in chunk, "digest": chunk_digest(rows)}}``, sorted by chunk id."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r["chunk"]), []).append(r)
    return {c: {"n": len(g), "digest": chunk_digest(g)} for c, g in sorted(groups.items())}
