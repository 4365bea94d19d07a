"""Per-row checks of the filter stage: settings, licence codes, caption quality.

Check order (the first failing check is the row's recorded reason):

1. ``license_not_allowed``  -- normalised licence code not in ``filter.licenses``
2. ``retracted``            -- ``is_retracted`` and not ``filter.include_retracted``
3. ``crop_too_small``       -- shorter crop side < ``filter.min_side_px``
4. ``crop_unreadable``      -- the crop file is missing, corrupt, truncated or too large
5. caption quality on the subcaption (the full caption when the subcaption is empty):
   ``caption_empty``, ``caption_too_short``, ``caption_few_words``, ``caption_not_text``
6. modality: ``modality_low_confidence``, ``modality_dropped``, ``modality_not_kept``
7. ``near_duplicate``       -- listed by the corpus-wide duplicate search
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pmcflow import licenses as L

REASONS: tuple[str, ...] = (
    "license_not_allowed",
    "retracted",
    "crop_too_small",
    "crop_unreadable",
    "caption_empty",
    "caption_too_short",
    "caption_few_words",
    "caption_not_text",
    "modality_low_confidence",
    "modality_dropped",
    "modality_not_kept",
    "near_duplicate",
)

# Clinical imaging + microscopy (seed 000's modality filter); plots and charts are dropped.
DEFAULT_KEEP: tuple[str, ...] = (
    "radiology",
    "histopathology",
    "microscopy",
    "retina",
    "dermatology",
    "endoscopy",
    "ultrasound",
    "clinical_photo",
)
DEFAULT_DROP: tuple[str, ...] = ("plot", "chart", "diagram", "chemical_structure", "other")


@dataclass(frozen=True)
class ModalitySettings:
    enabled: bool = True
    checkpoint: str = "shipped"
    keep: tuple[str, ...] = DEFAULT_KEEP
    drop: tuple[str, ...] = DEFAULT_DROP
    min_score: float = 0.0
    batch_size: int = 64
    threads: int = 1


@dataclass(frozen=True)
class DedupSettings:
    enabled: bool = True
    max_hamming: int = 6
    scope: str = "corpus"  # corpus | chunk


@dataclass(frozen=True)
class FilterSettings:
    """``config["filter"]`` with defaults (every key read with ``.get``)."""

    licenses: frozenset[str] | None = frozenset(L.COMMERCIAL)  # None = every licence
    include_retracted: bool = False
    min_side_px: int = 64
    min_subcaption_chars: int = 20
    min_alpha_tokens: int = 3
    min_alpha_fraction: float = 0.5
    modality: ModalitySettings = field(default_factory=ModalitySettings)
    dedup: DedupSettings = field(default_factory=DedupSettings)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> FilterSettings:
        f = dict((cfg or {}).get("filter") or {})
        lic_raw = f.get("licenses", list(L.COMMERCIAL))
        licenses: frozenset[str] | None
        if lic_raw is None or (isinstance(lic_raw, Iterable) and not isinstance(lic_raw, str) and not list(lic_raw)):
            licenses = None  # an empty list keeps every licence (as select.licenses does)
        else:
            items = [lic_raw] if isinstance(lic_raw, str) else list(lic_raw)
            licenses = frozenset(x for x in (L.normalise(v) for v in items) if x)
        m = dict(f.get("modality") or {})
        d = dict(f.get("dedup") or {})
        scope = str(d.get("scope", "corpus"))
        if scope not in {"corpus", "chunk"}:
            raise ValueError(f"filter.dedup.scope must be 'corpus' or 'chunk', not {scope!r}")
        return cls(
            licenses=licenses,
            include_retracted=bool(f.get("include_retracted", False)),
            min_side_px=int(f.get("min_side_px", 64)),
            min_subcaption_chars=int(f.get("min_subcaption_chars", 20)),
            min_alpha_tokens=int(f.get("min_alpha_tokens", 3)),
            min_alpha_fraction=float(f.get("min_alpha_fraction", 0.5)),
            modality=ModalitySettings(
                enabled=bool(m.get("enabled", True)),
                checkpoint=str(m.get("checkpoint") or "shipped"),
                keep=tuple(m.get("keep", DEFAULT_KEEP) or ()),
                drop=tuple(m.get("drop", DEFAULT_DROP) or ()),
                min_score=float(m.get("min_score", 0.0)),
                batch_size=int(m.get("batch_size", 64)),
                threads=int(m.get("threads", 1)),
            ),
            dedup=DedupSettings(
                enabled=bool(d.get("enabled", True)),
                max_hamming=int(d.get("max_hamming", 6)),
                scope=scope,
            ),
        )


# ----------------------------------------------------------------------------------------------
# row checks (each returns (reason, detail) or None)
# ----------------------------------------------------------------------------------------------

Verdict = tuple[str, str] | None

_WORD_RE = re.compile(r"[^\W\d_]{2,}")


def check_license(code: str | None, s: FilterSettings) -> Verdict:
    if s.licenses is None:
        return None
    norm = L.normalise(code)
    if norm not in s.licenses:
        return "license_not_allowed", f"license {code!r} (normalised {norm!r}) not in {sorted(s.licenses)}"
    return None


def check_retraction(is_retracted: bool | None, s: FilterSettings) -> Verdict:
    if is_retracted and not s.include_retracted:
        return "retracted", "the article is retracted"
    return None


def check_size(width: int | None, height: int | None, s: FilterSettings) -> Verdict:
    if width is None or height is None:
        return None  # unknown from the table; checked again on the decoded crop
    if min(width, height) < s.min_side_px:
        return "crop_too_small", f"{width}x{height} < {s.min_side_px} px"
    return None


def caption_text(row: Mapping[str, Any]) -> str:
    """The text a row is judged (and trained) on: its subcaption, else the full caption."""
    sub = (row.get("subcaption") or "").strip()
    return sub or (row.get("caption") or "").strip()


def check_caption(text: str, s: FilterSettings) -> Verdict:
    t = " ".join(text.split())
    if not t:
        return "caption_empty", "no subcaption and no caption"
    if len(t) < s.min_subcaption_chars:
        return "caption_too_short", f"{len(t)} characters < {s.min_subcaption_chars}"
    words = _WORD_RE.findall(t)
    if len(words) < s.min_alpha_tokens:
        return "caption_few_words", f"{len(words)} alphabetic words < {s.min_alpha_tokens}"
    visible = [c for c in t if not c.isspace()]
    frac = sum(c.isalpha() for c in visible) / len(visible)
    if frac < s.min_alpha_fraction:
        return "caption_not_text", f"letters are {frac:.2f} of the characters < {s.min_alpha_fraction}"
    return None


def check_modality(label: str, score: float, s: FilterSettings) -> Verdict:
    m = s.modality
    if score < m.min_score:
        return "modality_low_confidence", f"modality={label} score={score:.3f} < {m.min_score}"
    if label in m.drop:
        return "modality_dropped", f"modality={label} score={score:.3f} is in the drop set"
    if m.keep and label not in m.keep:
        return "modality_not_kept", f"modality={label} score={score:.3f} is not in the keep set"
    return None
