"""In-text reference summaries for a subfigure.

1. :func:`select_mentions` keeps the mentions of the subfigure's figure that are figure-level (no
   panel letter) or name its panel letter; one paragraph is used once.
2. A backend summarises the selected paragraphs (the *context passage*):

``extractive``    CPU, no weights: sentences ranked by BM25 against the subcaption (and, at half
                  weight, the caption), with a bonus for sentences that carry the figure reference
                  and a larger one when it names the panel; the best sentences up to ``max_words``
                  are returned in their original order. Deterministic.
``transformers``  the paper's Figure 8 prompt through a local HF model, ≤ ``max_new_tokens`` (256).
``vllm``          Figure 8 prompt through vLLM (Qwen2.5-14B-Instruct), batched, prefix caching.

LLM answers are parsed from ``<summary>…</summary>`` and checked (:func:`validate.check_summary`);
a rejected one is replaced by the extractive summary with the reason recorded.
No mention at all gives an empty summary with ``source="none"`` and ``reason="no_mentions"``.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pmcflow.enrich.llm import Generator, GenRequest, make_generator
from pmcflow.enrich.prompts import load_prompt, summary_text
from pmcflow.enrich.settings import SummarySettings
from pmcflow.enrich.text import normalize_ws, split_sentences, tokens
from pmcflow.enrich.validate import check_summary

_STOP = frozenset(
    "a an the of in on at to for from by with and or as is are was were be been this that these those "
    "it its into than then which who whom whose what when where how not no nor but also both each all "
    "any such can may might could would should will shall has have had do does did we our they their "
    "there here fig figs figure figures panel panels shown show shows indicated respectively".split()
)
_LABEL_TOKEN = re.compile(r"^[a-z]$")


# ---------------------------------------------------------------------------------------------
# Mention selection
# ---------------------------------------------------------------------------------------------


def select_mentions(
    mentions: Sequence[Mapping[str, Any]], figure_id: str, letter: str | None
) -> list[Mapping[str, Any]]:
    """Mentions of ``figure_id`` that are figure-level or name ``letter``; one per paragraph.

    ``letter`` None (panel unknown, or a single-panel figure) keeps every mention of the figure.
    Order: paragraph order (``paragraph_index`` when present, else input order).
    """
    want = letter.strip().lower() if letter else None
    chosen: list[tuple[int, int, Mapping[str, Any]]] = []
    seen_paragraphs: set[str] = set()
    for pos, m in enumerate(mentions):
        if figure_id not in (m.get("figure_ids") or []):
            continue
        panels = [str(p).lower() for p in (m.get("panels") or [])]
        if want is not None and panels and want not in panels:
            continue
        para = normalize_ws(str(m.get("paragraph") or ""))
        if not para or para in seen_paragraphs:
            continue
        seen_paragraphs.add(para)
        idx = m.get("paragraph_index")
        chosen.append((int(idx) if isinstance(idx, int) else pos, pos, m))
    chosen.sort(key=lambda x: (x[0], x[1]))
    return [m for _, _, m in chosen]


def context_passage(mentions: Sequence[Mapping[str, Any]]) -> str:
    return "\n\n".join(normalize_ws(str(m.get("paragraph") or "")) for m in mentions)


# ---------------------------------------------------------------------------------------------
# Extractive
# ---------------------------------------------------------------------------------------------


def _content(text: str) -> list[str]:
    return [t for t in tokens(text) if t not in _STOP and not _LABEL_TOKEN.match(t)]


def extractive_summary(
    subcaption: str,
    caption: str,
    mentions: Sequence[Mapping[str, Any]],
    letter: str | None = None,
    *,
    max_words: int = 120,
    k1: float = 1.2,
    b: float = 0.75,
) -> str:
    """The highest-scoring sentences of the mention paragraphs, ≤ ``max_words``, in text order."""
    sents: list[str] = []
    owners: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    for m in mentions:
        para = normalize_ws(str(m.get("paragraph") or ""))
        for a, e in split_sentences(para):
            s = para[a:e].strip()
            if s and s not in seen:
                seen.add(s)
                sents.append(s)
                owners.append(m)
    if not sents:
        return ""
    docs = [_content(s) for s in sents]
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    query: Counter[str] = Counter()
    for t in _content(subcaption):
        query[t] += 1.0
    for t in _content(caption):
        query[t] += 0.5
    want = letter.strip().lower() if letter else None
    ref_texts = [
        (normalize_ws(str(m.get("text") or "")), [str(p).lower() for p in (m.get("panels") or [])])
        for m in mentions
    ]
    scored: list[tuple[float, int]] = []
    for i, (s, d) in enumerate(zip(sents, docs, strict=True)):
        tf = Counter(d)
        score = 0.0
        for t, qw in query.items():
            f = tf.get(t, 0)
            if not f:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += qw * idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avgdl))
        for ref, panels in ref_texts:
            if ref and ref in s:
                score += 1.0
                if want and want in panels:
                    score += 2.0
        scored.append((score, i))
    scored.sort(key=lambda x: (-x[0], x[1]))
    picked: list[int] = []
    words = 0
    for score, i in scored:
        if score <= 0 and picked:
            break
        w = len(sents[i].split())
        if words + w > max_words:
            if not picked:  # the best sentence alone is too long: cut it at a word boundary
                return " ".join(sents[i].split()[:max_words])
            continue
        picked.append(i)
        words += w
    return " ".join(sents[i] for i in sorted(picked))


# ---------------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryRequest:
    key: str  # subfigure_uid
    figure_id: str
    caption: str
    subcaption: str
    mentions: Sequence[Mapping[str, Any]]  # every mention of the article (or of the figure)
    letter: str | None = None
    group: str = ""  # figure_uid


@dataclass(frozen=True)
class SummaryResult:
    key: str
    text: str
    source: str  # extractive | llm | none
    reason: str | None
    mention_uids: list[str] = field(default_factory=list)
    model: str = "extractive"
    revision: str | None = None
    prompt_sha256: str | None = None
    sampling: dict[str, Any] | None = None

    def to_row(self) -> dict[str, Any]:
        model = self.model if not self.revision else f"{self.model}@{self.revision}"
        return {
            "summary": self.text,
            "summary_source": self.source,
            "summary_reason": self.reason,
            "summary_model": model,
            "summary_prompt_sha256": self.prompt_sha256,
            "summary_sampling": json.dumps(self.sampling, sort_keys=True) if self.sampling else None,
            "mention_uids": list(self.mention_uids),
        }


class Summarizer(Protocol):
    name: str

    def summarize(self, requests: Sequence[SummaryRequest]) -> list[SummaryResult]: ...


def _uids(selected: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(m["mention_uid"]) for m in selected if m.get("mention_uid")]


@dataclass
class ExtractiveSummarizer:
    max_words: int = 120
    name: str = "extractive"

    def summarize(self, requests: Sequence[SummaryRequest]) -> list[SummaryResult]:
        out: list[SummaryResult] = []
        for r in requests:
            sel = select_mentions(r.mentions, r.figure_id, r.letter)
            if not sel:
                out.append(SummaryResult(r.key, "", "none", "no_mentions"))
                continue
            text = extractive_summary(r.subcaption, r.caption, sel, r.letter, max_words=self.max_words)
            if not text:
                out.append(SummaryResult(r.key, "", "none", "empty_context", _uids(sel)))
                continue
            out.append(SummaryResult(r.key, text, "extractive", None, _uids(sel)))
        return out


@dataclass
class LLMSummarizer:
    """Figure 8 prompt through a generator; rejected answers fall back to the extractive summary."""

    generator: Generator
    max_words: int = 120
    llm_max_words: int = 200
    min_support: float = 0.5
    name: str = "llm"

    def summarize(self, requests: Sequence[SummaryRequest]) -> list[SummaryResult]:
        prompt = load_prompt("summary")
        selected = [select_mentions(r.mentions, r.figure_id, r.letter) for r in requests]
        todo = [i for i, sel in enumerate(selected) if sel]
        contexts = {i: context_passage(selected[i]) for i in todo}
        gen_reqs = [
            GenRequest(
                summary_text(
                    normalize_ws(requests[i].subcaption), normalize_ws(requests[i].caption), contexts[i]
                ),
                group=requests[i].group or requests[i].caption,
            )
            for i in todo
        ]
        answers = dict(zip(todo, self.generator.generate(gen_reqs), strict=True))
        prov = {
            "model": self.generator.model_id,
            "revision": self.generator.revision_id,
            "prompt_sha256": prompt.sha256,
            "sampling": self.generator.sampling,
        }
        out: list[SummaryResult] = []
        for i, r in enumerate(requests):
            sel = selected[i]
            if i not in answers:
                out.append(SummaryResult(r.key, "", "none", "no_mentions"))
                continue
            inputs = " ".join([r.subcaption, r.caption, contexts[i]])
            ans = answers[i]
            checked = check_summary(
                ans.text,
                inputs,
                max_words=self.llm_max_words,
                min_support=self.min_support,
                truncated=ans.truncated,
            )
            if checked.ok and checked.text is not None:
                out.append(SummaryResult(r.key, checked.text, "llm", None, _uids(sel), **prov))
                continue
            text = extractive_summary(r.subcaption, r.caption, sel, r.letter, max_words=self.max_words)
            source = "extractive" if text else "none"
            out.append(SummaryResult(r.key, text, source, checked.reason, _uids(sel), **prov))
        return out


def make_summarizer(cfg: SummarySettings | Mapping[str, Any] | None = None) -> Summarizer:
    """Build the backend from the ``enrich.summary`` settings (or that section as a mapping: missing
    keys take the schema's defaults; an unknown key or a bad value raises
    :class:`pmcflow.config.ConfigError`)."""
    merged = SummarySettings.from_section(cfg)
    backend = merged.backend
    if backend == "extractive":
        return ExtractiveSummarizer(max_words=merged.max_words)
    if backend in ("transformers", "vllm"):
        return LLMSummarizer(
            make_generator(backend, merged),
            max_words=merged.max_words,
            llm_max_words=merged.llm_max_words,
            min_support=merged.min_support,
            name=backend,
        )
    raise ValueError(f"unknown summary backend {backend!r} (extractive | transformers | vllm)")
