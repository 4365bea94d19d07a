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
# `other` is recorded, not dropped, by default: the shipped classifier calls too many medical crops
# `other` (docs/filter.md) for it to decide alone; drop it where the classifier is trusted.
DEFAULT_KEEP: tuple[str, ...] = (
    "radiology",
    "histopathology",
    "microscopy",
    "retina",
    "dermatology",
    "endoscopy",
    "ultrasound",
    "clinical_photo",
    "other",
)
DEFAULT_DROP: tuple[str, ...] = ("plot", "chart", "diagram", "chemical_structure")


BACKENDS: tuple[str, ...] = ("timm", "openclip")
DEFAULT_OPENCLIP_MODEL = "hf-hub:microsoft/BiomedCLIP-PubMedBERT_256-vit_base_patch16_224"


@dataclass(frozen=True)
class OpenClipSettings:
    """``filter.modality.openclip``: the zero-shot backend (:mod:`pmcflow.filter.zeroshot`).

    ``prompts`` is ``((class, (prompt, ...)), ...)`` in config order; empty = the built-in prompts
    (:data:`pmcflow.filter.zeroshot.DEFAULT_PROMPTS`).  ``classes`` (None = every prompted class)
    picks the classes to score; each must have prompts.
    """

    model: str = DEFAULT_OPENCLIP_MODEL
    pretrained: str | None = None
    checkpoint: str | None = None
    prompts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    classes: tuple[str, ...] | None = None
    device: str = "cpu"
    seed: int = 0  # initialisation of weights no checkpoint provides (a model without weights: tests)

    @classmethod
    def from_mapping(cls, oc: Mapping[str, Any] | None) -> OpenClipSettings:
        oc = dict(oc or {})
        unknown = sorted(set(oc) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"filter.modality.openclip: unknown keys {unknown}")
        raw_prompts = oc.get("prompts") or {}
        if not isinstance(raw_prompts, Mapping):
            raise ValueError("filter.modality.openclip.prompts must map each class to a list of prompts")
        prompts = []
        for name, texts in raw_prompts.items():
            items = [texts] if isinstance(texts, str) else list(texts or [])
            if not items or not all(isinstance(t, str) and t.strip() for t in items):
                raise ValueError(
                    f"filter.modality.openclip.prompts.{name}: give at least one non-empty prompt (a list of strings)"
                )
            prompts.append((str(name), tuple(items)))
        classes = oc.get("classes")
        return cls(
            model=str(oc.get("model") or DEFAULT_OPENCLIP_MODEL),
            pretrained=str(oc["pretrained"]) if oc.get("pretrained") else None,
            checkpoint=str(oc["checkpoint"]) if oc.get("checkpoint") else None,
            prompts=tuple(prompts),
            classes=tuple(str(c) for c in classes) if classes else None,
            device=str(oc.get("device") or "cpu"),
            seed=int(oc.get("seed", 0) or 0),
        )


@dataclass(frozen=True)
class ModalitySettings:
    enabled: bool = True
    backend: str = "timm"  # timm (the trained classifier, `checkpoint`) | openclip (zero-shot, `openclip`)
    checkpoint: str = "shipped"
    keep: tuple[str, ...] = DEFAULT_KEEP
    drop: tuple[str, ...] = DEFAULT_DROP
    min_score: float = 0.0
    batch_size: int = 64
    threads: int = 1
    openclip: OpenClipSettings = field(default_factory=OpenClipSettings)


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
        backend = str(m.get("backend") or "timm")
        if backend not in BACKENDS:
            raise ValueError(f"filter.modality.backend must be one of {list(BACKENDS)}, not {backend!r}")
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
                backend=backend,
                checkpoint=str(m.get("checkpoint") or "shipped"),
                keep=tuple(m.get("keep", DEFAULT_KEEP) or ()),
                drop=tuple(m.get("drop", DEFAULT_DROP) or ()),
                min_score=float(m.get("min_score", 0.0)),
                batch_size=int(m.get("batch_size", 64)),
                threads=int(m.get("threads", 1)),
                openclip=OpenClipSettings.from_mapping(m.get("openclip")),
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
