"""The enrich stage: one ``enriched`` table per chunk (subfigure + subcaption + summary + provenance).

Inputs are the chunk's decomposition (``subfigures``) and parse outputs (``figures``, ``mentions``,
``articles``).  Every subfigure yields exactly one enriched row: a subcaption that could not be
found falls back to the full caption and a subfigure without in-text references gets an empty
summary, each with its reason recorded.  Only a subfigure whose figure or article is missing from
the parse tables is rejected (that would be an upstream inconsistency, recorded, never dropped).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.config import add_config_args, config_from_args
from pmcflow.enrich.prompts import load_prompt
from pmcflow.enrich.settings import EnrichSettings
from pmcflow.enrich.subcaption import SubcaptionRequest, make_subcaptioner
from pmcflow.enrich.summary import SummaryRequest, make_summarizer
from pmcflow.enrich.validate import SUMMARY_GATES, summary_gate
from pmcflow.progress import progress
from pmcflow.textclean import clean_text, over_cap

log = logging.getLogger(__name__)
STAGE = "enrich"
# Reasons a summary was taken out of a pair (the pair stays): the gates and the length cap.
SUMMARY_DROPPED = (*SUMMARY_GATES, "summary_too_long")


def _caption_parts(fig: Mapping[str, Any]) -> tuple[str, str | None]:
    return str(fig.get("caption") or ""), fig.get("caption_title")


def _usable(
    subfigures: Sequence[Mapping[str, Any]],
    figs: Mapping[str, Mapping[str, Any]],
    arts: Mapping[str, Mapping[str, Any]],
    rejections: T.Rejections,
) -> list[Mapping[str, Any]]:
    """The subfigures whose figure and article are in the parse tables; the others are rejected."""
    usable: list[Mapping[str, Any]] = []
    for sf in subfigures:
        if sf["figure_uid"] not in figs:
            rejections.add(sf["subfigure_uid"], "figure_missing", "figure not in the parse table", sf["pmcid"])
        elif sf["article_uid"] not in arts:
            rejections.add(sf["subfigure_uid"], "article_missing", "article not in the parse table", sf["pmcid"])
        else:
            usable.append(sf)
    return usable


def _places(subfigures: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int | None, int | None]]:
    """Per subfigure uid: (how many subfigures its figure was cut into, its reading-order index),
    both None when the figure has several graphics (their orders do not make one sequence)."""
    by_figure: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for sf in subfigures:
        by_figure[sf["figure_uid"]].append(sf)
    out: dict[str, tuple[int | None, int | None]] = {}
    for members in by_figure.values():
        one_graphic = len({sf.get("graphic_index") or 0 for sf in members}) == 1
        indices = [sf.get("subfigure_index") for sf in members]
        ordered = (
            one_graphic
            and all(isinstance(i, int) for i in indices)
            and sorted(indices) == list(range(len(members)))
        )
        for sf in members:
            out[sf["subfigure_uid"]] = (len(members), int(sf["subfigure_index"])) if ordered else (None, None)
    return out


def subcaption_rows(
    cfg: EnrichSettings,
    subfigures: Sequence[Mapping[str, Any]],
    figures: Sequence[Mapping[str, Any]],
    articles: Sequence[Mapping[str, Any]],
    rejections: T.Rejections,
) -> list[dict[str, Any]]:
    """The subcaption step: one :data:`~pmcflow.schema.SUBCAPTIONS` row per subfigure that got a
    subcaption (sorted by uid); the others are added to ``rejections``."""
    figs = {f["figure_uid"]: f for f in figures}
    arts = {a["article_uid"]: a for a in articles}
    pmcids = {sf["subfigure_uid"]: sf["pmcid"] for sf in subfigures}
    usable = _usable(subfigures, figs, arts, rejections)
    places = _places(usable)
    sub_requests = []
    for sf in usable:
        caption, title = _caption_parts(figs[sf["figure_uid"]])
        sub_requests.append(
            SubcaptionRequest(
                key=sf["subfigure_uid"],
                caption=caption,
                letter=sf.get("panel_label"),
                image=sf.get("crop_path"),
                title=title,
                group=sf["figure_uid"],
                n_panels=places[sf["subfigure_uid"]][0],
                order=places[sf["subfigure_uid"]][1],
            )
        )
    subcaptioner = make_subcaptioner(cfg.subcaption)
    sub_results = _isolated(subcaptioner.extract, sub_requests, "subcaption_error", pmcids, rejections)
    rows: list[dict[str, Any]] = []
    for sf in usable:
        res = sub_results.get(sf["subfigure_uid"])
        if res is None:
            continue
        if over_cap(res.text, cfg.max_subcaption_chars):
            rejections.add(
                sf["subfigure_uid"],
                "subcaption_too_long",
                f"{len(res.text)} characters > enrich.max_subcaption_chars {cfg.max_subcaption_chars}",
                sf["pmcid"],
            )
            continue
        rows.append({"subfigure_uid": sf["subfigure_uid"], **res.to_row()})
    rows.sort(key=lambda r: r["subfigure_uid"])
    return rows


def summary_rows(
    cfg: EnrichSettings,
    subfigures: Sequence[Mapping[str, Any]],
    subcaptions: Sequence[Mapping[str, Any]],
    figures: Sequence[Mapping[str, Any]],
    mentions: Sequence[Mapping[str, Any]],
    articles: Sequence[Mapping[str, Any]],
    rejections: T.Rejections,
) -> list[dict[str, Any]]:
    """The summary step over the subfigures the subcaption step kept (``subcaptions``): the
    enriched rows; subfigures whose summarisation fails are added to ``rejections``."""
    figs = {f["figure_uid"]: f for f in figures}
    arts = {a["article_uid"]: a for a in articles}
    subs = {r["subfigure_uid"]: r for r in subcaptions}
    by_article: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for m in mentions:
        by_article[m["article_uid"]].append(m)
    pmcids = {sf["subfigure_uid"]: sf["pmcid"] for sf in subfigures}
    usable = [sf for sf in subfigures if sf["subfigure_uid"] in subs]

    sum_requests = []
    for sf in usable:
        fig = figs[sf["figure_uid"]]
        sum_requests.append(
            SummaryRequest(
                key=sf["subfigure_uid"],
                figure_id=fig["figure_id"],
                caption=str(fig.get("caption") or ""),
                subcaption=str(subs[sf["subfigure_uid"]]["subcaption"] or ""),
                mentions=by_article.get(sf["article_uid"], []),
                letter=sf.get("panel_label"),
                group=sf["figure_uid"],
            )
        )
    summarizer = make_summarizer(cfg.summary)
    sum_results = _isolated(summarizer.summarize, sum_requests, "summary_error", pmcids, rejections)
    usable = [sf for sf in usable if sf["subfigure_uid"] in sum_results]
    instructions = load_prompt("summary").instructions
    for key, res in sum_results.items():
        text = clean_text(res.text) or ""
        problem = summary_gate(text, instructions)
        if problem is None and over_cap(text, cfg.max_summary_chars):
            problem = ("summary_too_long", f"{len(text)} characters > enrich.max_summary_chars")
        if problem is not None:  # the pair stays, without the summary; the reason is recorded
            log.info("%s: summary dropped (%s: %s)", key, *problem)
            sum_results[key] = dataclasses.replace(
                res, text="", source="none", reason=problem[0], mention_uids=[]
            )

    rows: list[dict[str, Any]] = []
    for sf in usable:
        fig, art = figs[sf["figure_uid"]], arts[sf["article_uid"]]
        row = {k: sf.get(k) for k in S.SUBFIGURES.names}
        row.update(
            doi=art.get("doi"),
            pmid=art.get("pmid"),
            license_code=art.get("license_code"),
            is_retracted=art.get("is_retracted"),
            figure_label=fig.get("label"),
            caption=fig.get("caption"),
        )
        row.update({c: subs[sf["subfigure_uid"]][c] for c in S.SUBCAPTION_COLUMNS})
        row.update(sum_results[sf["subfigure_uid"]].to_row())
        for k in ("subcaption", "shared_text", "summary"):
            row[k] = clean_text(row[k])
        rows.append(row)
    return rows


def enrich_rows(
    cfg: EnrichSettings,
    subfigures: Sequence[Mapping[str, Any]],
    figures: Sequence[Mapping[str, Any]],
    mentions: Sequence[Mapping[str, Any]],
    articles: Sequence[Mapping[str, Any]],
    rejections: T.Rejections,
) -> list[dict[str, Any]]:
    """Both steps in one process (the workflow runs them as two jobs); rows that cannot be enriched
    are added to ``rejections``."""
    subs = subcaption_rows(cfg, subfigures, figures, articles, rejections)
    return summary_rows(cfg, subfigures, subs, figures, mentions, articles, rejections)


def _isolated(
    fn: Callable[[list[Any]], Sequence[Any]],
    requests: list[Any],
    reason: str,
    pmcids: Mapping[str, str],
    rejections: T.Rejections,
) -> dict[str, Any]:
    """``{key: result}`` of ``fn(requests)``; when the batch fails, each figure group is tried alone
    and the requests of a group that still fails become rejections: one bad item never costs the
    chunk."""
    try:
        return {r.key: r for r in fn(requests)}
    except Exception as exc:  # noqa: BLE001 - isolated below, recorded per item
        log.warning("%s on the whole batch (%s: %s); retrying figure by figure", reason, type(exc).__name__, exc)
    groups: dict[str, list[Any]] = defaultdict(list)
    for r in requests:
        groups[r.group or r.key].append(r)
    out: dict[str, Any] = {}
    for members in progress(groups.values(), desc=f"{reason}: retry by figure", unit="figure"):
        try:
            out.update({r.key: r for r in fn(members)})
        except Exception as exc:  # noqa: BLE001 - recorded as rejections
            for r in members:
                rejections.add(r.key, reason, f"{type(exc).__name__}: {exc}"[:500], pmcids.get(r.key))
    return out


def subcaption_chunk(
    cfg: EnrichSettings,
    chunk: str,
    subfigures_path: str,
    figures_path: str,
    articles_path: str,
    outputs: T.Outputs,
) -> int:
    """The subcaption job of a chunk: the ``enrich_subcaptions`` rule's outputs ``subcaptions``
    (:data:`~pmcflow.schema.SUBCAPTIONS`) and ``rejections`` (:func:`pmcflow.tables.stage_outputs`);
    returns the number of subfigures kept."""
    out = T.stage_outputs("enrich_subcaptions", outputs)
    rejections = T.Rejections(STAGE, chunk=chunk)
    rows = subcaption_rows(
        cfg, T.read_rows(subfigures_path), T.read_rows(figures_path), T.read_rows(articles_path), rejections
    )
    T.write_table(rows, S.SUBCAPTIONS, out["subcaptions"])
    rejections.write(out["rejections"])
    log.info("enrich %s: %d subcaptions, %d rejected", chunk, len(rows), len(rejections))
    return len(rows)


def enrich_chunk(
    cfg: EnrichSettings,
    chunk: str,
    subfigures_path: str,
    figures_path: str,
    mentions_path: str,
    articles_path: str,
    outputs: T.Outputs,
    subcaptions: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Write the ``enrich_chunk`` rule's outputs ``enriched``, ``rejections`` and ``counts`` (the
    rule's named outputs, or a folder: :func:`pmcflow.tables.stage_outputs`).

    ``subcaptions`` is the subcaption job's ``(table, rejections)``: only the summaries are made
    here then (the workflow's two jobs); without it both steps run in this process.
    """
    out = T.stage_outputs("enrich_chunk", outputs)
    subfigures = T.read_rows(subfigures_path)
    figures, articles = T.read_rows(figures_path), T.read_rows(articles_path)
    rejections = T.Rejections(STAGE, chunk=chunk)
    if subcaptions is None:
        subs = subcaption_rows(cfg, subfigures, figures, articles, rejections)
    else:
        subs = T.read_rows(subcaptions[0])
        rejections.extend(T.read_rows(subcaptions[1]))
    rows = summary_rows(cfg, subfigures, subs, figures, T.read_rows(mentions_path), articles, rejections)
    rows.sort(key=lambda r: r["subfigure_uid"])
    sources: dict[str, int] = defaultdict(int)
    for r in rows:
        sources[f"subcaption.{r['subcaption_source']}"] += 1
        sources[f"summary.{r['summary_source']}"] += 1
        if r["summary_reason"] in SUMMARY_DROPPED:
            sources[f"summary_dropped.{r['summary_reason']}"] += 1
    record = T.counts_record(
        STAGE, len(subfigures), len(rows), rejections.by_reason(), chunk=chunk, extra=dict(sorted(sources.items()))
    )
    T.write_stage(out, record, tables={"enriched": (rows, S.ENRICHED)}, rejections={"rejections": rejections})
    log.info("enrich %s: %d subfigures -> %d rows", chunk, len(subfigures), len(rows))
    return record


def cli(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pmcflow enrich-chunk", description=__doc__)
    add_config_args(ap)
    ap.add_argument("--chunk", required=True)
    ap.add_argument("--subfigures", required=True)
    ap.add_argument("--figures", required=True)
    ap.add_argument("--mentions", required=True)
    ap.add_argument("--articles", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--subcaptions",
        nargs=2,
        metavar=("TABLE", "REJECTIONS"),
        help="the output of `pmcflow subcaption-chunk`: make only the summaries here",
    )
    args = ap.parse_args(argv)
    rec = enrich_chunk(
        EnrichSettings.from_config(config_from_args(args)),
        args.chunk,
        args.subfigures,
        args.figures,
        args.mentions,
        args.articles,
        args.out,
        subcaptions=tuple(args.subcaptions) if args.subcaptions else None,
    )
    print(f"enrich {args.chunk}: in={rec['in']} kept={rec['kept']} rejected={rec['rejected']}")
    return 0


def cli_subcaption(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="pmcflow subcaption-chunk",
        description="The subcaption step of one chunk (its own job in the workflow, so that one "
        "vLLM engine owns the GPUs at a time); `pmcflow enrich-chunk --subcaptions` completes it.",
    )
    add_config_args(ap)
    ap.add_argument("--chunk", required=True)
    ap.add_argument("--subfigures", required=True)
    ap.add_argument("--figures", required=True)
    ap.add_argument("--articles", required=True)
    ap.add_argument("--out", required=True, help="subcaptions table (.parquet)")
    ap.add_argument("--rejections", required=True, help="its rejections (.parquet)")
    args = ap.parse_args(argv)
    kept = subcaption_chunk(
        EnrichSettings.from_config(config_from_args(args)),
        args.chunk,
        args.subfigures,
        args.figures,
        args.articles,
        {"subcaptions": args.out, "rejections": args.rejections},
    )
    print(f"subcaptions {args.chunk}: kept={kept}")
    return 0
