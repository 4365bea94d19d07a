"""Quality of a caption splitter against human panel segmentation (EMBO SourceData legends).

The metric
----------
Gold: for each figure legend, the SourceData curators' *panels* — pieces of legend text, each a
verbatim substring of ``caption_reconstructed``. Their ``labels_heuristic`` is only a regex parse,
and the reconstruction dropped some label markers from the text, so gold and predicted segments
are aligned **on text**, not on labels:

1. Predicted panel segments = the splitter's segments minus the figure title (the title is passed
   to the splitter, as JATS gives it separately; gold never contains it).
2. Every (gold, predicted) pair is scored with bag-of-tokens F1 (lower-cased word tokens);
   pairs are matched one-to-one greedily by descending F1 (ties: caption order).
3. Per gold segment: ``token_f1`` of its match (0 when unmatched) and ``exact`` when the
   whitespace-normalised texts are identical. Both are macro-averaged over gold segments.
   ``matched_at_0_9`` (the headline measure): the share of gold segments whose match reaches
   token-F1 >= 0.9.
4. Per figure: ``count_match`` when the number of predicted panel segments equals the number of
   gold segments.
5. ``label_agreement`` (secondary): among matched pairs whose gold segment has heuristic labels,
   the share whose predicted label set equals them (lower-cased).

Reference points reported with the score: ``no_split`` (the whole body as one segment),
``gold_labelled_share`` (gold segments whose text still starts with a label; the rest lost their
marker in the reconstruction, so no label-based splitter can isolate them exactly) and
``labelled_figures``: the same scores restricted to figures whose gold segments all carry a label,
i.e. legends that look like real PMC captions.

Splits: the dev set is divided **by article** (DOI) with a fixed hash, so tuning on ``dev`` never
sees a ``test`` article: ``split_of(doi)``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pmcflow.enrich.boundaries import BoundaryModel
from pmcflow.enrich.rules import (
    POSITION_LABELS,
    Segment,
    assign_by_order,
    n_panels_from_json,
    order_pieces,
    segments_from_json,
    segments_to_json,
    shared_text,
    split_caption,
)
from pmcflow.enrich.text import normalize_ws, token_f1

Splitter = Callable[[str, str | None], list[Segment]]
TEST_FRACTION_BUCKETS = 3  # of 10: ~30 % of articles are held out
MATCH_F1 = 0.9  # a gold segment counts as found when a predicted one reaches this token F1


def split_of(doi: str) -> str:
    """``"test"`` for a fixed ~30 % of articles (sha256 of the DOI), else ``"dev"``."""
    bucket = int(hashlib.sha256(doi.encode("utf-8")).hexdigest(), 16) % 10
    return "test" if bucket < TEST_FRACTION_BUCKETS else "dev"


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass
class FigureScore:
    figure_id: str
    n_gold: int
    n_pred: int
    f1: list[float] = field(default_factory=list)  # per gold segment
    exact: list[bool] = field(default_factory=list)
    label_pairs: list[bool] = field(default_factory=list)

    @property
    def count_match(self) -> bool:
        return self.n_gold == self.n_pred


def panel_segments(segments: Sequence[Segment], title: str | None) -> list[Segment]:
    """Predicted segments minus the title segment."""
    t = normalize_ws(title) if title else ""
    out = list(segments)
    if t and out and not out[0].labels and out[0].text == t:
        out = out[1:]
    return out


def score_figure(
    figure_id: str,
    predicted: Sequence[Segment],
    gold: Sequence[Mapping[str, Any]],
) -> FigureScore:
    gold_texts = [normalize_ws(str(g["text"])) for g in gold]
    pred_texts = [normalize_ws(p.text) for p in predicted]
    pairs = sorted(
        ((token_f1(p, g), gi, pi) for gi, g in enumerate(gold_texts) for pi, p in enumerate(pred_texts)),
        key=lambda x: (-x[0], x[1], x[2]),
    )
    used_g: dict[int, int] = {}
    used_p: set[int] = set()
    for f1, gi, pi in pairs:
        if f1 <= 0.0:
            break
        if gi in used_g or pi in used_p:
            continue
        used_g[gi] = pi
        used_p.add(pi)
    score = FigureScore(figure_id, len(gold_texts), len(pred_texts))
    for gi, g in enumerate(gold_texts):
        pi = used_g.get(gi)
        if pi is None:
            score.f1.append(0.0)
            score.exact.append(False)
            continue
        score.f1.append(token_f1(pred_texts[pi], g))
        score.exact.append(pred_texts[pi] == g)
        gold_labels = [str(x).lower() for x in gold[gi].get("labels_heuristic") or []]
        if gold_labels:
            score.label_pairs.append(sorted(gold_labels) == sorted(x.lower() for x in predicted[pi].labels))
    return score


def _summarise(scores: Sequence[FigureScore]) -> dict[str, Any]:
    f1 = [x for s in scores for x in s.f1]
    exact = [x for s in scores for x in s.exact]
    labels = [x for s in scores for x in s.label_pairs]
    n = len(scores)
    return {
        "figures": n,
        "gold_segments": len(f1),
        "predicted_segments": sum(s.n_pred for s in scores),
        "matched_at_0_9": round(sum(x >= MATCH_F1 for x in f1) / len(f1), 4) if f1 else None,
        "exact_match_rate": round(sum(exact) / len(exact), 4) if exact else None,
        "token_f1_macro": round(sum(f1) / len(f1), 4) if f1 else None,
        "count_match_rate": round(sum(s.count_match for s in scores) / n, 4) if n else None,
        "label_agreement": round(sum(labels) / len(labels), 4) if labels else None,
    }


def _no_split(caption: str, title: str | None) -> list[Segment]:
    text = normalize_ws(caption)
    t = normalize_ws(title) if title else ""
    if t and text.startswith(t) and text[len(t) :].strip():
        return [Segment([], t), Segment([], text[len(t) :].strip())]
    return [Segment([], text)]


def evaluate_splitter(
    rows: Iterable[Mapping[str, Any]],
    splitter: Splitter = split_caption,
    *,
    include_baseline: bool = True,
    panels_hint: bool = False,
    predicted: Sequence[Sequence[Segment]] | None = None,
) -> dict[str, Any]:
    """Scores per split (``dev``, ``test``, ``all``) plus the reference points; see module doc.

    ``panels_hint``: pass each legend's panel count (``n_panels_sourcedata``) to the splitter as
    ``n_panels``, as the pipeline knows the number of subfigures the detector found.
    ``predicted``: each row's segments, already made (another system's output; one per row, in
    order), instead of calling ``splitter``.
    """
    rows = list(rows)
    if predicted is not None and len(predicted) != len(rows):
        raise ValueError(f"{len(predicted)} predictions for {len(rows)} rows")
    per_split: dict[str, list[FigureScore]] = {"dev": [], "test": [], "all": []}
    base_split: dict[str, list[FigureScore]] = {"dev": [], "test": [], "all": []}
    marked: dict[str, list[FigureScore]] = {"dev": [], "test": [], "all": []}
    labelled = {"dev": [0, 0], "test": [0, 0], "all": [0, 0]}
    for k, r in enumerate(rows):
        split = split_of(str(r["doi"]))
        title = r.get("figure_title")
        gold = r["subcaptions"]
        if predicted is not None:
            raw = list(predicted[k])
        elif panels_hint:
            raw = splitter(r["caption_reconstructed"], title, n_panels=int(r["n_panels_sourcedata"]))  # type: ignore[call-arg]
        else:
            raw = splitter(r["caption_reconstructed"], title)
        pred = panel_segments(raw, title)
        sc = score_figure(str(r["id"]), pred, gold)
        per_split[split].append(sc)
        per_split["all"].append(sc)
        if include_baseline:
            base = panel_segments(_no_split(r["caption_reconstructed"], title), title)
            bs = score_figure(str(r["id"]), base, gold)
            base_split[split].append(bs)
            base_split["all"].append(bs)
        n_lab = sum(1 for g in gold if g.get("labels_heuristic"))
        if n_lab == len(gold):
            marked[split].append(sc)
            marked["all"].append(sc)
        for key in (split, "all"):
            labelled[key][0] += n_lab
            labelled[key][1] += len(gold)
    out: dict[str, Any] = {}
    for split in ("dev", "test", "all"):
        entry = _summarise(per_split[split])
        if include_baseline:
            entry["no_split"] = _summarise(base_split[split])
        entry["labelled_figures"] = _summarise(marked[split])
        lab, tot = labelled[split]
        entry["gold_labelled_share"] = round(lab / tot, 4) if tot else None
        out[split] = entry
    return out


def evaluate_order_assignment(
    rows: Iterable[Mapping[str, Any]], model: BoundaryModel | None = None
) -> dict[str, Any]:
    """How well subfigures of captions that name no label get their text by order
    (:func:`pmcflow.enrich.rules.assign_by_order`), per split, on the SourceData legends whose gold
    panels all lost their labels (multi-panel): each gold panel is a subfigure, its place its
    index, the figure's count the number of gold panels (as if the detector found every panel).

    ``panels``: gold panels; ``assigned``: those that got a piece (the rest keep the full caption);
    ``correct``: pieces matching their gold panel at token F1 >= :data:`MATCH_F1`; ``precision`` =
    correct / assigned, ``coverage`` = correct / panels. ``model``: another panel-boundary model
    than the shipped one (cross-validation).
    """
    tally = {k: [0, 0, 0] for k in ("dev", "test", "all")}
    for r in rows:
        gold = r["subcaptions"]
        if len(gold) < 2 or any(g.get("labels_heuristic") for g in gold):
            continue
        pieces = order_pieces(r["caption_reconstructed"], r.get("figure_title"), model=model)
        for k, g in enumerate(gold):
            a = assign_by_order(pieces, len(gold), k)
            hit = a is not None and token_f1(normalize_ws(a.text), normalize_ws(str(g["text"]))) >= MATCH_F1
            for key in (split_of(str(r["doi"])), "all"):
                tally[key][0] += 1
                tally[key][1] += a is not None
                tally[key][2] += hit
    return {
        key: {
            "panels": n,
            "assigned": a,
            "correct": c,
            "precision": round(c / a, 4) if a else None,
            "coverage": round(c / n, 4) if n else None,
        }
        for key, (n, a, c) in tally.items()
    }


def figure_errors(
    rows: Iterable[Mapping[str, Any]], splitter: Splitter = split_caption, split: str | None = "dev"
) -> list[tuple[str, FigureScore, list[Segment]]]:
    """Figures whose segments are not all exact (for error analysis), worst first."""
    bad: list[tuple[str, FigureScore, list[Segment]]] = []
    for r in rows:
        if split and split_of(str(r["doi"])) != split:
            continue
        title = r.get("figure_title")
        pred = panel_segments(splitter(r["caption_reconstructed"], title), title)
        sc = score_figure(str(r["id"]), pred, r["subcaptions"])
        if not all(sc.exact) or not sc.count_match:
            bad.append((str(r["id"]), sc, pred))
    bad.sort(key=lambda x: sum(x[1].f1) / max(1, len(x[1].f1)))
    return bad


# ---------------------------------------------------------------------------------------------
# Label-wise development set: real PMC captions with panel labels and label-wise subcaptions
# ---------------------------------------------------------------------------------------------
# tests/fixtures/subcaptions/pmc_labelwise_dev.jsonl (provenance and licence per row; built from
# CC BY / CC0 / public-domain PMC articles, annotated by reading, see its README). Measures:
#
# * ``label_set_accuracy`` (headline): share of figures whose predicted label set (the union of
#   the panel segments' labels; position words such as "left" are not labels) equals the gold one;
#   captions without labels count too (gold ``[]``).
# * the misses by kind, as in the HES-SO analysis: ``missed_some`` (a strict subset found),
#   ``found_none`` (gold has labels, none found), ``extra_or_different`` (anything else).
# * ``matched_at_0_9`` over gold segments (as for SourceData) and ``shared_text_f1`` (mean token F1
#   of the shared text on labelled captions).

_REGEX_BASELINE = re.compile(r"\(([A-Za-z])\)")


def regex_baseline(caption: str, title: str | None = None) -> list[Segment]:
    """A one-regex splitter, as a reference point: a new segment at every "(X)"."""
    text = normalize_ws(caption)
    cuts = list(_REGEX_BASELINE.finditer(text))
    if not cuts:
        return [Segment([], text)] if text else []
    lead = text[: cuts[0].start()].strip()
    out = [Segment([], lead)] if lead else []
    for k, m in enumerate(cuts):
        end = cuts[k + 1].start() if k + 1 < len(cuts) else len(text)
        out.append(Segment([m.group(1).lower()], text[m.start() : end].strip()))
    return out


def predicted_label_set(segments: Sequence[Segment]) -> set[str]:
    return {lab.lower() for s in segments for lab in s.labels if lab.lower() not in POSITION_LABELS}


def _labelwise_one(
    row: Mapping[str, Any], splitter: Splitter, predicted: Sequence[Segment] | None = None
) -> dict[str, Any]:
    gold = row["gold"]
    split = list(predicted) if predicted is not None else splitter(row["caption"], row.get("title"))
    pred_set = predicted_label_set(split)
    gold_set = {str(x).lower() for x in gold["labels"]}
    gold_segments = [{"text": g["text"], "labels_heuristic": g["labels"]} for g in gold["segments"]]
    panel = [s for s in split if s.labels]
    sc = score_figure(str(row["id"]), panel, gold_segments) if gold_segments else None
    if pred_set == gold_set:
        kind = "ok"
    elif gold_set and not pred_set:
        kind = "found_none"
    elif pred_set < gold_set:
        kind = "missed_some"
    else:
        kind = "extra_or_different"
    shared_f1: float | None = None
    if gold_set and gold.get("shared_text") is not None:
        pred_shared, gold_shared = normalize_ws(shared_text(split)), normalize_ws(gold["shared_text"])
        shared_f1 = 1.0 if not pred_shared and not gold_shared else token_f1(pred_shared, gold_shared)
    return {
        "kind": kind,
        "score": sc,
        "shared_f1": shared_f1,
        "labelled": bool(gold_set),
        "predicted": pred_set,
        "gold_segments": gold_segments,
        "panel_segments": panel,
    }


def _summarise_labelwise(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(items)
    kinds: dict[str, int] = {}
    for it in items:
        kinds[it["kind"]] = kinds.get(it["kind"], 0) + 1
    f1 = [x for it in items if it["score"] is not None for x in it["score"].f1]
    shared = [it["shared_f1"] for it in items if it["shared_f1"] is not None]
    labelled = [it for it in items if it["labelled"]]
    return {
        "figures": n,
        "labelled_figures": len(labelled),
        "label_set_accuracy": round(kinds.get("ok", 0) / n, 4) if n else None,
        "label_set_accuracy_labelled": (
            round(sum(it["kind"] == "ok" for it in labelled) / len(labelled), 4) if labelled else None
        ),
        "misses": {k: v for k, v in sorted(kinds.items()) if k != "ok"},
        "gold_segments": len(f1),
        "matched_at_0_9": round(sum(x >= MATCH_F1 for x in f1) / len(f1), 4) if f1 else None,
        "shared_text_f1": round(sum(shared) / len(shared), 4) if shared else None,
    }


def evaluate_labelwise(
    rows: Iterable[Mapping[str, Any]],
    splitter: Splitter = split_caption,
    *,
    include_baseline: bool = True,
    predicted: Sequence[Sequence[Segment]] | None = None,
) -> dict[str, Any]:
    """Scores per split (``dev``/``test`` by article, ``all``) on the label-wise PMC set.

    ``predicted``: each row's segments, already made, instead of calling ``splitter`` (as in
    :func:`evaluate_splitter`)."""
    rows = list(rows)
    if predicted is not None and len(predicted) != len(rows):
        raise ValueError(f"{len(predicted)} predictions for {len(rows)} rows")
    per: dict[str, list[dict[str, Any]]] = {"dev": [], "test": [], "all": []}
    base: dict[str, list[dict[str, Any]]] = {"dev": [], "test": [], "all": []}
    for k, r in enumerate(rows):
        split = split_of(str(r["article"]))
        one = _labelwise_one(r, splitter, None if predicted is None else predicted[k])
        per[split].append(one)
        per["all"].append(one)
        if include_baseline:
            b = _labelwise_one(r, regex_baseline)
            base[split].append(b)
            base["all"].append(b)
    out: dict[str, Any] = {}
    for split in ("dev", "test", "all"):
        entry = _summarise_labelwise(per[split])
        if include_baseline:
            entry["regex_baseline"] = _summarise_labelwise(base[split])
        out[split] = entry
    return out


def labelwise_errors(
    rows: Iterable[Mapping[str, Any]], splitter: Splitter = split_caption, split: str | None = "dev"
) -> list[tuple[str, str, set[str], set[str]]]:
    """(id, kind, predicted labels, gold labels) of the figures whose label set is wrong."""
    out: list[tuple[str, str, set[str], set[str]]] = []
    for r in rows:
        if split and split_of(str(r["article"])) != split:
            continue
        one = _labelwise_one(r, splitter)
        if one["kind"] != "ok":
            out.append((str(r["id"]), one["kind"], one["predicted"], {str(x).lower() for x in r["gold"]["labels"]}))
    return out


# ---------------------------------------------------------------------------------------------
# pmcflow eval-subcaptions: both measures on any gold file, for the rules or another system
# ---------------------------------------------------------------------------------------------
# A gold line is one of three forms, told apart by its keys:
#
# * SourceData panels: ``caption_reconstructed`` + ``subcaptions`` ([{text, labels_heuristic}]),
#   optional ``figure_title``, ``doi``, ``n_panels_sourcedata`` (tests/fixtures/subcaptions).
# * label-wise: ``caption`` + ``gold`` ({labels, segments: [{labels, text}], shared_text}),
#   optional ``title``, ``article`` (the PMC-style sets of tests/fixtures/subcaptions).
# * the ``split-caption`` contract: ``caption`` + ``segments`` ([{labels, text}]) and/or
#   ``labels`` (a label set alone, as HES-SO/NLM gives it), optional ``title``, ``shared_text``,
#   ``n_panels``, ``article``/``doi``.
#
# Segments that all carry labels are scored label-wise (label set, labelled segments matched,
# shared text); gold with unlabelled panels is scored as SourceData is (every panel matched on
# text, the lead included among the candidates).

PANELS = "panels"
LABEL_WISE = "label_wise"


@dataclass
class GoldRow:
    """One scored gold line, in the form :func:`evaluate_splitter` (``PANELS``) or
    :func:`evaluate_labelwise` (``LABEL_WISE``) reads."""

    file: str
    line: int
    kind: str
    row: dict[str, Any]
    caption: str
    title: str | None

    @property
    def n_panels(self) -> int | None:
        """The panel count ``--n-panels`` gives the splitter: only legends scored as panels."""
        return int(self.row["n_panels_sourcedata"]) if self.kind == PANELS else None


def _label_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        raise ValueError(f"{what} must be a list of non-empty strings")
    return [x.strip().lower() for x in value]


def _gold_segment_list(value: Any, what: str, *, labels_key: str = "labels") -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list")
    out: list[dict[str, Any]] = []
    for k, seg in enumerate(value):
        if not isinstance(seg, dict) or not isinstance(seg.get("text"), str) or not seg["text"].strip():
            raise ValueError(f'{what}[{k}] must be an object with a non-empty string "text"')
        out.append({"text": seg["text"], "labels": _label_list(seg.get(labels_key) or [], f"{what}[{k}].{labels_key}")})
    return out


def _optional_str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f'"{key}" must be a string')
    return value or None


def gold_row(obj: Any, file: str, line: int) -> GoldRow:
    """One gold line in any of the three forms above; ``ValueError`` with the reason otherwise."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    ident = str(obj.get("id") or f"{file}:{line}")
    if "caption_reconstructed" in obj or "subcaptions" in obj:
        return _sourcedata_gold(obj, file, line, ident)
    caption = obj.get("caption")
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError('missing or empty string "caption"')
    title = _optional_str(obj, "title")
    # what --by-split hashes: the article, as the project's label-wise sets are split
    key = str(obj.get("article") or obj.get("doi") or ident)
    if "gold" in obj:
        gold = obj["gold"]
        if not isinstance(gold, dict):
            raise ValueError('"gold" must be an object')
        segments = _gold_segment_list(gold.get("segments", []), '"gold.segments"')
        labels = _label_list(gold.get("labels", []), '"gold.labels"')
        shared: str | None = _optional_str(gold, "shared_text") or ""
        n_panels_from_json(obj)  # checked, though a label-wise gold is split without it
    elif "segments" in obj or "labels" in obj:
        segments = _gold_segment_list(obj.get("segments", []), '"segments"')
        n_panels = n_panels_from_json(obj)
        if any(not s["labels"] for s in segments):  # panels that carry no label: scored on text
            return GoldRow(file, line, PANELS, _panels_row(ident, key, caption, title, segments, n_panels), caption, title)
        if "labels" in obj:
            labels = _label_list(obj["labels"], '"labels"')
        else:
            labels = list(dict.fromkeys(lab for s in segments for lab in s["labels"]))
        # without a "shared_text" the gold does not say it, and it is not scored
        shared = (_optional_str(obj, "shared_text") or "") if "shared_text" in obj else None
    else:
        raise ValueError('no gold: give "subcaptions" (SourceData), "gold" (label-wise), "segments" or "labels"')
    row = {
        "id": ident,
        "article": key,
        "caption": caption,
        "title": title,
        "gold": {"labels": labels, "segments": segments, "shared_text": shared},
    }
    return GoldRow(file, line, LABEL_WISE, row, caption, title)


def _sourcedata_gold(obj: Mapping[str, Any], file: str, line: int, ident: str) -> GoldRow:
    caption = obj.get("caption_reconstructed")
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError('SourceData form: missing or empty string "caption_reconstructed"')
    title = _optional_str(obj, "figure_title")
    panels = _gold_segment_list(obj.get("subcaptions"), '"subcaptions"', labels_key="labels_heuristic")
    if not panels:
        raise ValueError('"subcaptions" is empty')
    n_panels = n_panels_from_json(obj, "n_panels_sourcedata")
    # what --by-split hashes: the DOI, as the SourceData legends are split
    row = _panels_row(ident, str(obj.get("doi") or obj.get("article") or ident), caption, title, panels, n_panels)
    return GoldRow(file, line, PANELS, row, caption, title)


def _panels_row(
    ident: str, key: str, caption: str, title: str | None, panels: Sequence[Mapping[str, Any]], n_panels: int | None
) -> dict[str, Any]:
    return {
        "id": ident,
        "doi": key,
        "figure_title": title,
        "caption_reconstructed": caption,
        "subcaptions": [{"text": p["text"], "labels_heuristic": p["labels"]} for p in panels],
        "n_panels_sourcedata": n_panels or len(panels),
    }


def contract_segments(record: Any, title: str | None) -> list[Segment]:
    """A ``split-caption`` output line (``{"segments": […], "shared_text": …}``) as the segment list
    the splitter gives: the title, the rest of the shared text, then the panel segments.

    Scoring these gives the scores of the splitter itself (the title is cut off the shared text
    as :func:`split_caption` cuts it off the caption).
    """
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    shared = record.get("shared_text") or ""
    if not isinstance(shared, str):
        raise ValueError('"shared_text" must be a string')
    segments = segments_from_json(record.get("segments"))
    unlabelled = not any(s.labels for s in segments)
    shared = normalize_ws(shared)
    t = normalize_ws(title) if title else ""
    out: list[Segment] = []
    if t and shared.startswith(t):
        out.append(Segment([], t, shared=unlabelled))
        shared = shared[len(t) :].strip()
    if shared:
        out.append(Segment([], shared, shared=unlabelled))
    return out + segments


def _split_input(g: GoldRow, use_n_panels: bool) -> dict[str, Any]:
    """The ``split-caption`` input line for a gold row."""
    line: dict[str, Any] = {"caption": g.caption}
    if g.title:
        line["title"] = g.title
    if use_n_panels and g.n_panels:
        line["n_panels"] = g.n_panels
    return line


def _row_details(g: GoldRow, predicted: Sequence[Segment]) -> dict[str, Any] | None:
    """The figure's gold and predicted segments with each gold one's best F1, when any gold
    segment is missed (or, label-wise, the label set is wrong); ``None`` for a perfect figure."""
    if g.kind == PANELS:
        pred = panel_segments(predicted, g.title)
        gold = g.row["subcaptions"]
        sc = score_figure(str(g.row["id"]), pred, gold)
        label_kind = None
    else:
        one = _labelwise_one(g.row, split_caption, predicted)
        pred, gold, sc, label_kind = one["panel_segments"], one["gold_segments"], one["score"], one["kind"]
    f1 = sc.f1 if sc is not None else []
    if all(x >= MATCH_F1 for x in f1) and label_kind in (None, "ok"):
        return None
    out: dict[str, Any] = {"file": g.file, "line": g.line, "id": g.row["id"], "kind": g.kind}
    if label_kind is not None:
        out["label_set"] = label_kind
        out["gold_labels"] = sorted(g.row["gold"]["labels"])
        out["predicted_labels"] = sorted(one["predicted"])
    out["gold"] = [
        {"labels": list(x.get("labels_heuristic") or []), "text": x["text"], "f1": round(f, 4)}
        for x, f in zip(gold, f1, strict=True)
    ]
    out["predicted"] = segments_to_json(pred)
    return out


def _score(
    gold: Sequence[GoldRow], predicted: Sequence[Sequence[Segment]], *, baseline: bool, by_split: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, evaluate in ((PANELS, evaluate_splitter), (LABEL_WISE, evaluate_labelwise)):
        idx = [k for k, g in enumerate(gold) if g.kind == kind]
        if not idx:
            continue
        res = evaluate(  # type: ignore[operator]
            [gold[k].row for k in idx], include_baseline=baseline, predicted=[predicted[k] for k in idx]
        )
        out[kind] = res if by_split else res["all"]
    return out


def _read_jsonl(path: str) -> list[tuple[int, str]]:
    with open(path, encoding="utf-8") as fh:
        return [(n, line) for n, line in enumerate(fh, start=1) if line.strip()]


def cli(argv: Sequence[str] | None = None) -> int:
    """``pmcflow eval-subcaptions``: the splitter's two measures on gold files of real captions.

    Prints one JSON object: per gold file (and pooled, for several) the SourceData-style measure
    (``panels``: gold segments matched at token F1 >= 0.9) and the label-wise ones (``label_wise``:
    figures whose label set equals the gold one, labelled segments matched, shared-text F1), the
    lines read and scored, and every rejected line with its reason. Exit code 1 when a line was
    rejected, 2 when a file cannot be read or the predictions do not line up with the gold.
    """
    parser = argparse.ArgumentParser(
        prog="pmcflow eval-subcaptions",
        description="Score caption splitting against gold panel segmentations (JSON lines): the rule "
        "splitter, or another system's split-caption output given with --predictions.",
    )
    parser.add_argument("gold", nargs="+", help="gold JSON-lines files (SourceData, label-wise or split-caption form)")
    parser.add_argument(
        "--predictions",
        action="append",
        default=None,
        metavar="FILE",
        help="split-caption output for a gold file, one line per non-blank gold line (once per gold file, "
        "in the same order); default: run the rule splitter",
    )
    parser.add_argument(
        "--n-panels",
        action="store_true",
        help="give the splitter each figure's panel count (n_panels, n_panels_sourcedata or the gold "
        "panels), as the pipeline gives it the detected subfigures",
    )
    parser.add_argument("--baseline", action="store_true", help="also score the one-regex and no-split baselines")
    parser.add_argument(
        "--by-split",
        action="store_true",
        help="also score the project's dev/test halves (by a hash of each row's doi/article)",
    )
    parser.add_argument("--errors", metavar="FILE", help="write the figures with a miss as JSON lines")
    parser.add_argument(
        "--write-inputs",
        metavar="FILE",
        help="write the split-caption input lines for the gold (caption, title, n_panels with --n-panels) and exit",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.predictions is not None and len(args.predictions) != len(args.gold):
        parser.error(f"--predictions given {len(args.predictions)} times for {len(args.gold)} gold file(s)")
    if args.write_inputs and args.predictions:
        parser.error("--write-inputs and --predictions exclude each other")

    per_file: list[tuple[str, int, list[GoldRow], list[list[Segment]]]] = []
    rejected: list[dict[str, Any]] = []
    inputs: list[dict[str, Any]] = []
    for n, path in enumerate(args.gold):
        try:
            lines = _read_jsonl(path)
            preds = _read_jsonl(args.predictions[n]) if args.predictions else None
        except OSError as exc:
            print(f"pmcflow eval-subcaptions: {exc}", file=sys.stderr)
            return 2
        if preds is not None and len(preds) != len(lines):
            print(
                f"pmcflow eval-subcaptions: {args.predictions[n]} has {len(preds)} lines for the "
                f"{len(lines)} of {path}",
                file=sys.stderr,
            )
            return 2
        rows: list[GoldRow] = []
        predicted: list[list[Segment]] = []
        for k, (lineno, text) in enumerate(lines):
            try:
                g = gold_row(json.loads(text), path, lineno)
            except ValueError as exc:
                rejected.append({"file": path, "line": lineno, "reason": f"gold: {exc}"})
                continue
            if args.write_inputs:
                inputs.append(_split_input(g, args.n_panels))
                continue
            if preds is not None:
                try:
                    segs = contract_segments(json.loads(preds[k][1]), g.title)
                except ValueError as exc:
                    rejected.append({"file": path, "line": lineno, "reason": f"prediction line {preds[k][0]}: {exc}"})
                    continue
            else:
                segs = split_caption(g.caption, g.title, n_panels=g.n_panels if args.n_panels else None)
            rows.append(g)
            predicted.append(segs)
        per_file.append((path, len(lines), rows, predicted))
    for r in rejected:
        print(f"pmcflow eval-subcaptions: {r['file']}:{r['line']}: {r['reason']}", file=sys.stderr)
    if args.write_inputs:
        with open(args.write_inputs, "w", encoding="utf-8") as fh:
            for line in inputs:
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        return 1 if rejected else 0

    result: dict[str, Any] = {
        "splitter": "predictions" if args.predictions else "rules",
        "n_panels": bool(args.n_panels),
        "files": {},
        "rejected": rejected,
    }
    for path, n_lines, rows, predicted in per_file:
        entry: dict[str, Any] = {
            "lines": n_lines,
            "scored": len(rows),
            "rejected": sum(r["file"] == path for r in rejected),
        }
        entry.update(_score(rows, predicted, baseline=args.baseline, by_split=args.by_split))
        result["files"][path] = entry
    if len(per_file) > 1:
        all_rows = [g for _, _, rows, _ in per_file for g in rows]
        all_pred = [p for _, _, _, predicted in per_file for p in predicted]
        result["pooled"] = _score(all_rows, all_pred, baseline=args.baseline, by_split=args.by_split)
    if args.errors:
        with open(args.errors, "w", encoding="utf-8") as fh:
            for _, _, rows, predicted in per_file:
                for g, segs in zip(rows, predicted, strict=True):
                    details = _row_details(g, segs)
                    if details is not None:
                        fh.write(json.dumps(details, ensure_ascii=False) + "\n")
    print(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False))
    return 1 if rejected else 0
