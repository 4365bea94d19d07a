"""Caption -> subcaption for each subfigure, behind one interface chosen in config.

Backends (``enrich.subcaption.backend``):

``rules``         :func:`pmcflow.enrich.rules.split_caption` + :func:`~pmcflow.enrich.rules.assign`
                  (CPU, no weights; the demo default).
``transformers``  the paper's Figure 7 prompt through a local HF model (text-only models get the
                  caption and the panel label instead of the image).
``vllm``          the Figure 7 prompt, the subfigure image and the caption through vLLM on GPU
                  (Qwen2.5-VL-32B-Instruct by default), batched with prefix caching.

Every LLM answer is parsed from ``<caption>…</caption>`` and must be a verbatim substring of the
caption (whitespace-normalised); otherwise it is replaced by the rules result (or the full caption)
and the reason is recorded (see :mod:`pmcflow.enrich.validate`). Every result carries its
provenance: source (``rules`` | ``vlm`` | ``fallback-full``), model, revision, prompt sha256 and
sampling parameters.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from pmcflow.enrich.llm import Generator, GenRequest, ImageInput, make_generator
from pmcflow.enrich.prompts import load_prompt, subcaption_text
from pmcflow.enrich.rules import (
    Assignment,
    Segment,
    assign,
    assign_by_order,
    assign_detailed,
    n_panels_from_json,
    order_pieces,
    panel_segments,
    segments_to_json,
    shared_text,
    split_caption,
)
from pmcflow.enrich.settings import SubcaptionSettings
from pmcflow.enrich.text import normalize_ws
from pmcflow.enrich.validate import check_subcaption

__all__ = [
    "Segment",
    "split_caption",
    "assign",
    "SubcaptionRequest",
    "SubcaptionResult",
    "RulesSubcaptioner",
    "LLMSubcaptioner",
    "make_subcaptioner",
    "cli",
]


@dataclass(frozen=True)
class SubcaptionRequest:
    """One subfigure: its figure's caption, its panel letter (if known) and its crop."""

    key: str  # subfigure_uid
    caption: str
    letter: str | None = None
    image: ImageInput | None = None
    title: str | None = None  # JATS caption title, when separate
    group: str = ""  # figure_uid: subfigures of one figure share the prompt prefix
    # the figure's subfigure count and this one's reading-order index (0-based), when known: a
    # caption that names no label is matched to subfigures by order (rules.assign_by_order)
    n_panels: int | None = None
    order: int | None = None


@dataclass(frozen=True)
class SubcaptionResult:
    key: str
    text: str
    source: str  # rules | vlm | fallback-full
    reason: str | None  # why a fallback was used (or the rules' own reason), else None
    labels: list[str] = field(default_factory=list)
    shared_text: str = ""  # caption title + lead that describe every panel ("" on fallback)
    model: str = "rules"
    revision: str | None = None
    prompt_sha256: str | None = None
    sampling: dict[str, Any] | None = None

    def to_row(self) -> dict[str, Any]:
        """Columns of the ``enriched`` table (plus ``subcaption_sampling``, JSON)."""
        model = self.model if not self.revision else f"{self.model}@{self.revision}"
        return {
            "subcaption": self.text,
            "shared_text": self.shared_text,
            "subcaption_source": self.source,
            "subcaption_reason": self.reason,
            "subcaption_model": model,
            "subcaption_prompt_sha256": self.prompt_sha256,
            "subcaption_sampling": json.dumps(self.sampling, sort_keys=True) if self.sampling else None,
        }


class Subcaptioner(Protocol):
    name: str

    def extract(self, requests: Sequence[SubcaptionRequest]) -> list[SubcaptionResult]: ...


def _split(req: SubcaptionRequest, cache: dict[tuple[str, str | None], list[Segment]]) -> list[Segment]:
    ck = (req.caption, req.title)
    if ck not in cache:
        cache[ck] = split_caption(req.caption, req.title)
    return cache[ck]


@lru_cache(maxsize=256)
def _order_pieces(caption: str, title: str | None) -> tuple[Segment, ...] | None:
    """:func:`~pmcflow.enrich.rules.order_pieces` once per caption, not once per subfigure (the
    subfigures of a figure come together)."""
    pieces = order_pieces(caption, title)
    return None if pieces is None else tuple(pieces)


def _place(req: SubcaptionRequest) -> int | None:
    """The subfigure's place among its figure's panels: its letter's (a -> 0) when it has one
    that fits the count, else its reading order."""
    letter = str(req.letter or "").strip().lower()
    if len(letter) == 1 and "a" <= letter <= "z" and req.n_panels is not None and ord(letter) - 97 < req.n_panels:
        return ord(letter) - 97
    return req.order


def _rules_assignment(
    req: SubcaptionRequest, cache: dict[tuple[str, str | None], list[Segment]]
) -> Assignment:
    segments = _split(req, cache)
    full = normalize_ws(req.caption)
    if not full:
        return Assignment("", "fallback-full", "empty_caption", [])
    if not any(s.labels for s in segments) and req.n_panels is not None:
        by_order = assign_by_order(_order_pieces(req.caption, req.title), req.n_panels, _place(req))
        if by_order is not None:
            return by_order
    if req.letter is None or not str(req.letter).strip():
        # the caption names no panel (its whole text is the description) or the subfigure's letter
        # is unknown (the caption has labels, alignment could not place this subfigure)
        reason = "no_panel_label" if any(s.labels for s in segments) else "no_labels"
        return Assignment(full, "fallback-full", reason, [])
    letter = str(req.letter).strip().lower()
    return assign_detailed(segments, [letter], caption=req.caption)[letter]


@dataclass
class RulesSubcaptioner:
    """CPU rule splitter; one split per distinct caption."""

    name: str = "rules"

    def extract(self, requests: Sequence[SubcaptionRequest]) -> list[SubcaptionResult]:
        cache: dict[tuple[str, str | None], list[Segment]] = {}
        out: list[SubcaptionResult] = []
        for r in requests:
            a = _rules_assignment(r, cache)
            out.append(
                SubcaptionResult(r.key, a.text, a.source, a.reason, a.labels, a.shared_text, model="rules")
            )
        return out


@dataclass
class LLMSubcaptioner:
    """Figure 7 prompt through a :class:`~pmcflow.enrich.llm.Generator`, validated, with fallback."""

    generator: Generator
    fallback: str = "rules"  # rules | full
    label_hint: str = "auto"  # auto | always | never
    name: str = "llm"

    def _hint(self, letter: str | None) -> str | None:
        if not letter:
            return None
        if self.label_hint == "always" or (self.label_hint == "auto" and not self.generator.supports_images):
            return str(letter).strip().lower()
        return None

    def extract(self, requests: Sequence[SubcaptionRequest]) -> list[SubcaptionResult]:
        prompt = load_prompt("subcaption")
        valid = [i for i, r in enumerate(requests) if normalize_ws(r.caption)]
        gen_reqs = [
            GenRequest(
                subcaption_text(
                    requests[i].caption,
                    self._hint(requests[i].letter),
                    with_image=self.generator.supports_images and requests[i].image is not None,
                ),
                image=requests[i].image if self.generator.supports_images else None,
                group=requests[i].group or requests[i].caption,
            )
            for i in valid
        ]
        answers = dict(zip(valid, self.generator.generate(gen_reqs), strict=True))
        cache: dict[tuple[str, str | None], list[Segment]] = {}
        provenance = {
            "model": self.generator.model_id,
            "revision": self.generator.revision_id,
            "prompt_sha256": prompt.sha256,
            "sampling": self.generator.sampling,
        }
        out: list[SubcaptionResult] = []
        for i, r in enumerate(requests):
            if i not in answers:
                out.append(SubcaptionResult(r.key, "", "fallback-full", "empty_caption", [], **provenance))
                continue
            ans = answers[i]
            checked = check_subcaption(ans.text, r.caption, truncated=ans.truncated)
            if checked.ok and checked.text is not None:
                # the model's answer may already hold the lead; the shared text is kept apart anyway
                lead = shared_text(_split(r, cache))
                out.append(SubcaptionResult(r.key, checked.text, "vlm", None, [], lead, **provenance))
                continue
            if self.fallback == "rules":
                a = _rules_assignment(r, cache)
                reason = checked.reason if a.reason is None else f"{checked.reason}+{a.reason}"
                out.append(
                    SubcaptionResult(r.key, a.text, a.source, reason, a.labels, a.shared_text, **provenance)
                )
            else:
                out.append(
                    SubcaptionResult(
                        r.key, normalize_ws(r.caption), "fallback-full", checked.reason, [], **provenance
                    )
                )
        return out


def make_subcaptioner(cfg: SubcaptionSettings | Mapping[str, Any] | None = None) -> Subcaptioner:
    """Build the backend from the ``enrich.subcaption`` settings (or that section as a mapping:
    missing keys take the schema's defaults; an unknown key or a bad value raises
    :class:`pmcflow.config.ConfigError`)."""
    merged = SubcaptionSettings.from_section(cfg)
    backend = merged.backend
    if backend == "rules":
        return RulesSubcaptioner()
    if backend in ("transformers", "vllm"):
        gen = make_generator(backend, merged)
        return LLMSubcaptioner(
            gen,
            fallback=merged.fallback,
            label_hint=merged.label_hint,
            name=backend,
        )
    raise ValueError(f"unknown subcaption backend {backend!r} (rules | transformers | vllm)")


# ---------------------------------------------------------------------------------------------
# pmcflow split-caption
# ---------------------------------------------------------------------------------------------


def cli(argv: Sequence[str] | None = None) -> int:
    """``pmcflow split-caption``: JSON lines ``{"caption": …}`` in, ``{"segments": […], "shared_text": …}`` out.

    ``segments`` are the panel segments (labels + verbatim text); a caption without labels gives
    its body as unlabelled segments, cut between sentences by the panel-boundary model (one
    segment for most single-panel legends). ``shared_text`` is the title and lead that describe
    every panel (for a caption without labels, its ``"title"`` when given, else ""). One output
    line per non-blank input line, in order. A bad line (invalid JSON, not an object, no string
    ``caption``, a ``n_panels`` that is not a positive integer) is reported on stderr with its line
    number and answered with ``{"segments": []}`` so outputs stay aligned with inputs; the exit
    code is then 1. Optional fields: ``"title"`` (the caption title) and ``"n_panels"`` (the
    number of subfigures, when known: a caption without labels is cut into that many segments).
    """
    parser = argparse.ArgumentParser(
        prog="pmcflow split-caption",
        description="Split figure captions into labelled segments with the rule splitter.",
    )
    parser.add_argument("--input", "-i", default="-", help="JSON-lines file (default: stdin)")
    parser.add_argument("--output", "-o", default="-", help="JSON-lines file (default: stdout)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    fin = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    fout = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    errors = 0
    try:
        for lineno, line in enumerate(fin, start=1):
            if not line.strip():
                continue
            segments: list[Segment] = []
            shared = ""
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                caption = obj.get("caption")
                if not isinstance(caption, str):
                    raise ValueError('missing or non-string "caption"')
                title = obj.get("title")
                n_panels = n_panels_from_json(obj)
                split = split_caption(caption, title if isinstance(title, str) else None, n_panels=n_panels)
                segments, shared = panel_segments(split), shared_text(split)
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                errors += 1
                print(f"pmcflow split-caption: line {lineno}: {exc}", file=sys.stderr)
            record = {"segments": segments_to_json(segments), "shared_text": shared}
            fout.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        if fin is not sys.stdin:
            fin.close()
        if fout is not sys.stdout:
            fout.close()
    if errors:
        print(f"pmcflow split-caption: {errors} bad line(s)", file=sys.stderr)
        return 1
    return 0
