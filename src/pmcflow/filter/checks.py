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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pmcflow import licenses as L
from pmcflow.config import section as config_section
from pmcflow.config import subsection

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



@dataclass(frozen=True)
class OpenClipSettings:
    """``filter.modality.openclip``: the zero-shot backend (:mod:`pmcflow.filter.zeroshot`).

    ``prompts`` is ``((class, (prompt, ...)), ...)`` in config order; empty = the built-in prompts
    (:data:`pmcflow.filter.zeroshot.DEFAULT_PROMPTS`).  ``classes`` (None = every prompted class)
    picks the classes to score; each must have prompts.  Built with :meth:`from_mapping`: the
    defaults, types and allowed keys are the schema's.
    """

    model: str
    pretrained: str | None
    checkpoint: str | None
    prompts: tuple[tuple[str, tuple[str, ...]], ...]
    classes: tuple[str, ...] | None
    device: str
    seed: int  # initialisation of weights no checkpoint provides (a model without weights: tests)

    @classmethod
    def from_mapping(cls, oc: Mapping[str, Any] | None) -> OpenClipSettings:
        oc = subsection(oc, "filter", "modality", "openclip")  # schema defaults, checked
        prompts = []
        for name, texts in oc["prompts"].items():
            if not all(t.strip() for t in texts):
                raise ValueError(
                    f"filter.modality.openclip.prompts.{name}: give at least one non-empty prompt (a list of strings)"
                )
            prompts.append((str(name), tuple(texts)))
        classes = oc["classes"]
        return cls(
            model=str(oc["model"]),
            pretrained=str(oc["pretrained"]) if oc["pretrained"] else None,
            checkpoint=str(oc["checkpoint"]) if oc["checkpoint"] else None,
            prompts=tuple(prompts),
            classes=tuple(str(c) for c in classes) if classes else None,
            device=str(oc["device"]),
            seed=int(oc["seed"]),
        )


@dataclass(frozen=True)
class ModalitySettings:
    enabled: bool
    backend: str  # timm (the trained classifier, `checkpoint`) | openclip (zero-shot, `openclip`)
    checkpoint: str
    keep: tuple[str, ...]
    drop: tuple[str, ...]
    min_score: float
    batch_size: int
    threads: int
    openclip: OpenClipSettings


@dataclass(frozen=True)
class DedupSettings:
    enabled: bool
    max_hamming: int
    scope: str  # corpus | chunk


@dataclass(frozen=True)
class FilterSettings:
    """``config["filter"]``, typed and frozen; :meth:`from_config` fills it from the schema's
    defaults (config/schema/config.schema.yaml, the one place they live) and checks it."""

    licenses: frozenset[str] | None  # None = every licence
    include_retracted: bool
    min_side_px: int
    min_subcaption_chars: int
    min_alpha_tokens: int
    min_alpha_fraction: float
    modality: ModalitySettings
    dedup: DedupSettings

    @classmethod
    def from_section(cls, value: FilterSettings | Mapping[str, Any] | None) -> FilterSettings:
        """From the ``filter`` section (a rule's ``params.filter``), or an already built object."""
        if isinstance(value, FilterSettings):
            return value
        return cls.from_config({"filter": dict(value or {})})

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> FilterSettings:
        """From the ``filter`` section of a whole config (a CLI's :func:`pmcflow.config.load_config`)."""
        f = config_section(cfg or {}, "filter")
        lic_raw = f["licenses"]
        # an empty list keeps every licence (as select.licenses does)
        licenses = frozenset(x for x in (L.normalise(v) for v in lic_raw) if x) if lic_raw else None
        m, d = f["modality"], f["dedup"]
        return cls(
            licenses=licenses,
            include_retracted=bool(f["include_retracted"]),
            min_side_px=int(f["min_side_px"]),
            min_subcaption_chars=int(f["min_subcaption_chars"]),
            min_alpha_tokens=int(f["min_alpha_tokens"]),
            min_alpha_fraction=float(f["min_alpha_fraction"]),
            modality=ModalitySettings(
                enabled=bool(m["enabled"]),
                backend=str(m["backend"]),
                checkpoint=str(m["checkpoint"]),
                keep=tuple(m["keep"]),
                drop=tuple(m["drop"]),
                min_score=float(m["min_score"]),
                batch_size=int(m["batch_size"]),
                threads=int(m["threads"]),
                openclip=OpenClipSettings.from_mapping(m["openclip"]),
            ),
            dedup=DedupSettings(
                enabled=bool(d["enabled"]), max_hamming=int(d["max_hamming"]), scope=str(d["scope"])
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
