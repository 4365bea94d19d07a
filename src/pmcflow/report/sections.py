"""Report sections: each takes a :class:`Results` and returns parts (HTML snippets and PNGs).

The notebooks call one function per section (they stay thin); a section whose stage did not run
returns a single "not run in this workflow" note naming the files it looked for.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import polars as pl

from pmcflow import layout as L
from pmcflow.report import load, plots, stats
from pmcflow.report import provenance as prov
from pmcflow.report.html import (
    Html,
    Part,
    Png,
    cards,
    esc,
    figure_png,
    heading,
    not_run,
    note,
    para,
    provenance,
    shorten,
    table,
    thumbnail_uri,
)
from pmcflow.report.load import Results

# Reference numbers of the Open-PMC-18M paper (seed 000), shown next to ours for scale.
PAPER_DETECTOR = [
    {"system": "Open-PMC-18M DAB-DETR", "eval set": "synthetic validation", "mAP": 98.58, "F1": 99.96},
    {"system": "Open-PMC-18M DAB-DETR", "eval set": "ImageCLEF 2016", "mAP": 36.88, "F1": 73.55},
    {"system": "DETR on MedICaT (previous best)", "eval set": "ImageCLEF 2016", "mAP": 28.20, "F1": 64.85},
    {"system": "Qwen2.5-VL-32B zero-shot", "eval set": "ImageCLEF 2016", "mAP": 30.12, "F1": 68.12},
]


# The stages each report's overview covers: the ones its rule takes as inputs (rules/report.smk) and
# the stages those depend on, so the table does not change with which other jobs finished first.
REPORT_STAGES: dict[str, tuple[str, ...]] = {
    "dataset": tuple(s.stage for s in load.STAGES),
    "detector": (
        "list",
        "acquire",
        "parse",
        "decompose",
        "synth",
        "detector training",
        "detector evaluation",
    ),
    "enrichment": ("list", "acquire", "parse", "decompose", "enrich"),
    "training": ("shard", "encoder training", "encoder evaluation"),
}


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    return df.to_dicts()


# ============================================================================================
# Common
# ============================================================================================
def overview(res: Results, title: str, stages: Sequence[str] | None = None) -> list[Part]:
    """Title and, per stage, whether it ran: its numbers if it did, "not run" and why if it did not.

    ``stages``: only these (the ones the report's rule takes as inputs, and what they depend on), so
    what the table says does not depend on which other jobs happened to finish before the report
    ran; default the pipeline stages (:data:`load.STAGES`).  A stage that did not run never shows
    numbers, and one the config turned off says so (when the report was given the config).
    """
    statuses = load.stage_status(res, stages)
    try:
        shown = res.results_dir.relative_to(res.workdir)
    except ValueError:
        shown = res.results_dir
    rows = [
        {
            "stage": st.stage,
            "status": ("ran — check" if st.warning else "ran") if st.ran else "not run",
            "outputs": st.summary if st.ran else "–",
            "note": st.reason or "",
        }
        for st in statuses
    ]
    missing = [st.stage for st in statuses if not st.ran]
    parts: list[Part] = [
        Html(f"<h1>{esc(title)}</h1>"),
        Html(
            f"<p>Results directory: <code>{esc(shown)}</code><br/>"
            f"Stages with outputs: {esc(', '.join(st.stage for st in statuses if st.ran) or 'none')}<br/>"
            f"Stages not run: {esc(', '.join(missing) or 'none')}</p>"
        ),
        table(rows, caption="Stages this report covers (a stage not run shows no numbers)"),
    ]
    if not res.config:
        parts.append(
            note(
                "Run without the workflow config (pmcflow report --config): whether a stage ran is judged "
                "from its outputs only."
            )
        )
    return parts


def _prov(p: prov.Provenance) -> Html:
    return provenance(p.label, smoke=p.is_smoke)


# ============================================================================================
# Dataset report
# ============================================================================================
def funnel(res: Results) -> list[Part]:
    counts = {c.stage: c for c in load.stage_counts(res)}
    if not counts:
        return [not_run("Stage counts", [res.path(f"<stage>/{L.COUNTS}")])]
    statuses = {st.stage: st for st in load.stage_status(res)}
    rows: list[dict[str, Any]] = []
    for spec in load.STAGES:
        c = counts.get(spec.stage)
        st = statuses[spec.stage]
        if c is None:  # no numbers at all for a stage that did not run, not zeros
            rows.append({"stage": spec.stage, "status": "not run", "unit": spec.unit_in, "note": st.reason})
            continue
        rows.append(
            {
                "stage": c.stage,
                "status": "ran — check" if st.warning else "ran",
                "unit": c.unit_in,
                "in": c.n_in,
                "kept": c.kept,
                "rejected": c.n_rejected,
                "kept %": 100.0 * c.kept / c.n_in if c.n_in else None,
                "passed on": c.out,
                "passed-on unit": c.unit_out,
                "note": st.reason,
            }
        )
    cols = [
        "stage",
        "status",
        "unit",
        "in",
        "kept",
        "rejected",
        "kept %",
        "passed on",
        "passed-on unit",
        "note",
    ]
    shown = [counts.get(spec.stage) or spec.stage for spec in load.STAGES]
    parts: list[Part] = [table(rows, cols, digits=1), figure_png(plots.funnel(shown))]
    missing = load.missing_stages(res)
    if missing:
        parts.append(
            note("Not run in this workflow: " + ", ".join(f"{s.stage} (no {s.counts})" for s in missing))
        )
    return parts


def rejection_reasons(res: Results) -> list[Part]:
    counts = load.stage_counts(res)
    if not counts:
        return [not_run("Rejections", [res.path(f"<stage>/{L.COUNTS}")])]
    per_stage = [
        {"stage": c.stage, "reason": reason, "n": n}
        for c in counts
        for reason, n in sorted(c.rejected.items())
    ]
    summary = load.rejection_summary(res)
    parts: list[Part] = []
    if per_stage:
        parts.append(table(per_stage, caption="Rejections by reason (stage counts.json)"))
        merged: Counter[str] = Counter({f"{r['stage']}: {r['reason']}": r["n"] for r in per_stage})
        parts.append(
            figure_png(plots.bar_counts(merged, title="Rejections by stage and reason", xlabel="items"))
        )
    else:
        parts.append(para("No stage rejected anything."))
    missing = load.missing_stages(res)
    if missing:
        parts.append(
            note("No rejections to show for stages not run: " + ", ".join(m.stage for m in missing) + ".")
        )
    if summary.height:
        parts.append(
            table(
                [{**r, "detail": shorten(r["detail"], 120)} for r in _rows(summary)],
                caption="One example per stage and reason (rejections.parquet; 'acquire (media)': media files whose article was kept)",
            )
        )
    return parts


def composition(res: Results) -> list[Part]:
    parts: list[Part] = []
    final = load.final_subfigures(res)
    arts = load.articles(res)
    if final is None and arts is None:
        return [
            not_run(
                "Composition",
                [res.path(L.shown(L.ARTICLES)), res.path(L.shown(L.ENRICHED))],
            )
        ]
    parts.append(heading("Licences"))
    rows: list[dict[str, Any]] = []
    lic_sub: dict[str, int] = {}
    if final is not None:
        stage, df = final
        lic_sub = {
            str(k): int(v) for k, v in df["license_code"].fill_null("unknown").value_counts().iter_rows()
        }
    lic_art: dict[str, int] = {}
    if arts is not None:
        lic_art = {
            str(k): int(v) for k, v in arts["license_code"].fill_null("unknown").value_counts().iter_rows()
        }
    # A count column only for a table that exists: a stage that did not run shows no zeros.
    for code in sorted(
        set(lic_sub) | set(lic_art), key=lambda c: (-lic_sub.get(c, 0), -lic_art.get(c, 0), c)
    ):
        row: dict[str, Any] = {"licence": code}
        if arts is not None:
            row["articles"] = lic_art.get(code, 0)
        if final is not None:
            row["subfigures"] = lic_sub.get(code, 0)
        rows.append(row)
    parts.append(table(rows, caption="Licence codes: parsed articles and subfigures in the final table"))
    if arts is None:
        parts.append(not_run("Parsed articles (licences per article)", [res.path(L.shown(L.ARTICLES))]))
    if final is None:
        parts.append(not_run("Subfigure table (licences per subfigure)", [res.path(L.shown(L.ENRICHED))]))
    if lic_sub:
        parts.append(
            figure_png(plots.bar_counts(lic_sub, title="Subfigures by licence", xlabel="subfigures"))
        )

    parts.append(heading("Modality"))
    ds = load.dataset(res)
    mod_cfg = ((res.config or {}).get("filter") or {}).get("modality") or {}
    if ds is None:
        parts.append(not_run("Modality (filter stage)", [res.path(L.shown(L.DATASET))]))
    elif (
        mod_cfg.get("enabled") is False
        or "modality" not in ds.columns
        or ds["modality"].null_count() == ds.height
    ):
        why = (
            "disabled in the config (filter.modality.enabled: false)"
            if mod_cfg.get("enabled") is False
            else "the filter table has no modality predictions: the classifier was off"
        )
        parts.append(not_run("Modality (filter stage)", [], reason=why))
    else:
        p_mod, rec = prov.modality_record(res)
        mod = {str(k): int(v) for k, v in ds["modality"].fill_null("unknown").value_counts().iter_rows()}
        parts.append(_prov(p_mod))
        parts.append(
            table(
                [
                    {"modality": k, "subfigures": v, "share %": 100.0 * v / max(1, ds.height)}
                    for k, v in sorted(mod.items(), key=lambda kv: (-kv[1], kv[0]))
                ],
                digits=1,
                caption=f"Predicted modality of the kept subfigures (filter stage; classifier: {p_mod.model})",
            )
        )
        fig = plots.bar_counts(mod, title="Subfigures by predicted modality", xlabel="subfigures")
        parts.append(figure_png(plots.footer(fig, p_mod.label, smoke=p_mod.is_smoke, width=110)))
        parts += modality_accuracy(p_mod, rec)

    parts.append(heading("Shards"))
    man = load.shard_manifest(res)
    if man is None:
        parts.append(not_run("Shards", [res.path(L.SHARD_MANIFEST)]))
    else:
        srows = [
            {
                "split": name,
                "samples": sp.get("n_samples"),
                "shards": sp.get("n_shards"),
                "articles": (man.get("n_articles") or {}).get(name),
                "bytes": sum(int(s.get("size", 0)) for s in sp.get("shards") or []),
            }
            for name, sp in sorted((man.get("splits") or {}).items())
        ]
        parts.append(table(srows, caption=f"WebDataset shards per split ({L.SHARD_MANIFEST})"))
    return parts


def modality_accuracy(p_mod: prov.Provenance, rec: dict[str, Any] | None) -> list[Part]:
    """The modality classifier's held-out accuracy (its training record) against chance.

    The record has no interval; the 95 % Wilson interval is computed here from the held-out counts.
    The filter stage itself has no labels, so this is the only accuracy the reports can show.
    """
    held = (rec or {}).get("heldout") or {}
    conf = held.get("confusion") or {}
    classes, matrix = conf.get("classes") or [], conf.get("matrix") or []
    if not classes or len(matrix) != len(classes):
        return [
            note(
                "No held-out evaluation beside the modality checkpoint (metrics.json): its accuracy is unknown."
            )
        ]
    per_class_n = [int(sum(row)) for row in matrix]
    correct = [int(matrix[i][i]) for i in range(len(classes))]
    n, k = sum(per_class_n), len(classes)
    chance = stats.classification_chance(per_class_n)
    rows: list[dict[str, Any]] = []
    bars: list[tuple[str, float | None, tuple[float, float]]] = []
    for c, n_c, ok in [*zip(classes, per_class_n, correct, strict=True), ("all", n, sum(correct))]:
        ci = stats.wilson_interval(ok, n_c)
        value = ok / n_c if n_c else None
        rows.append({"class": c, "n": n_c, "accuracy (recall)": value, "95 % CI": _ci(*ci)})
        bars.append((c, value, ci))
    acc = sum(correct) / n
    rows[-1]["chance (1/k)"] = chance["accuracy_uniform"]
    rows[-1]["majority class"] = chance["accuracy_majority"]
    fig = plots.accuracy_bars(
        bars,
        chance=chance["accuracy_uniform"],
        majority=chance["accuracy_majority"],
        title=f"Modality classifier, held-out accuracy ({n:,} crops, {k} classes)",
        provenance=p_mod.label,
        smoke=p_mod.is_smoke,
    )
    train_acc = (rec or {}).get("train_subset") or {}
    extra = (
        f" Accuracy on a subset of its own training crops: {train_acc['accuracy']:.3f} (n {train_acc.get('n', '?')})."
        if isinstance(train_acc.get("accuracy"), int | float)
        else ""
    )
    return [
        table(
            rows,
            ["class", "n", "accuracy (recall)", "95 % CI", "chance (1/k)", "majority class"],
            digits=3,
            caption=(
                f"Modality classifier on its held-out crops ({p_mod.source}); chance = 1/{k} classes "
                f"(uniform random guess); majority class = share of the largest class; CI: 95 % Wilson interval "
                "computed here (the record has none)"
            ),
        ),
        para(
            f"Held-out accuracy {acc:.3f} vs chance {chance['accuracy_uniform']:.3f}. "
            "These crops are of the classifier's own held-out source images, not of this run's subfigures."
            + extra
        ),
        figure_png(fig),
    ]


def _ci(lo: float | None, hi: float | None) -> str | None:
    """A CI cell ``[lo, hi]``, or ``None`` when the interval was not recorded (or is NaN)."""
    if lo is None or hi is None or lo != lo or hi != hi:
        return None
    return f"[{lo:.3f}, {hi:.3f}]"


def text_lengths(res: Results) -> list[Part]:
    lengths = load.token_lengths(res)
    if not any(lengths.values()):
        return [
            not_run(
                "Text lengths",
                [res.path(L.shown(L.FIGURES)), res.path(L.shown(L.ENRICHED))],
            )
        ]
    rows: list[dict[str, Any]] = []
    for kind in ("caption", "subcaption", "summary"):
        if kind not in lengths:  # its table does not exist: not run, not "0 texts"
            source = "parse figures" if kind == "caption" else "enrich / filter subfigure table"
            rows.append({"text": kind, "status": f"not run (no {source})"})
            continue
        vals = sorted(lengths[kind])
        if not vals:
            rows.append({"text": kind, "status": "ran", "n": 0})
            continue
        n = len(vals)
        rows.append(
            {
                "text": kind,
                "status": "ran",
                "n": n,
                "mean": sum(vals) / n,
                "median": vals[n // 2],
                "p90": vals[min(n - 1, int(0.9 * n))],
                "max": vals[-1],
            }
        )
    return [
        para(
            "Token = whitespace-separated word (str.split), not a model tokenizer; captions are counted once "
            "per figure, subcaptions and summaries once per subfigure (empty summaries left out)."
        ),
        table(rows, ["text", "status", "n", "mean", "median", "p90", "max"], digits=1),
        figure_png(plots.token_histograms(lengths)),
    ]


def tokenized_lengths(res: Results, max_samples: int | None = 5000) -> list[Part]:
    """Token lengths with the configured encoder's tokenizer, per text field and for the composed
    text, and the share of samples the tokenizer truncates at its context length."""
    data = load.tokenizer_lengths(res, max_samples)
    if data is None:
        return [
            not_run(
                "Token lengths (model tokenizer)",
                [res.path(L.shown(L.DATASET)), res.path(L.shown(L.ENRICHED))],
            )
        ]
    tok: load.TextTokenizer = data["tokenizer"]
    texts = data["texts"]
    ctx = tok.context_length
    rows: list[dict[str, Any]] = []
    for label, vals in data["lengths"].items():
        st = load.truncation(vals, ctx)
        what = {
            "txt": f"<key>.txt (composed: {' + '.join(texts['txt_fields'])})",
            "train text": f"train text ({' + '.join(texts['train_fields'] or [])}, composed at load time)",
        }.get(label, f"<key>.{label}.txt")
        n_all = st["n"] + data["empty"][label]
        rows.append(
            {
                "text": what,
                "non-empty": st["n"],
                "empty": f"{data['empty'][label] / n_all:.1%}" if n_all else None,
                "median": st.get("median"),
                "p90": st.get("p90"),
                "p99": st.get("p99"),
                "max": st.get("max"),
                f"> {ctx} tokens": st["truncated"],
                "truncated": None if st["share_truncated"] is None else f"{st['share_truncated']:.1%}",
            }
        )
    subset = (
        f"all {texts['n_samples']:,} samples"
        if texts["n_used"] == texts["n_samples"]
        else f"a seeded subset of {texts['n_used']:,} of the {texts['n_samples']:,} samples"
    )
    parts: list[Part] = [
        para(
            f"Tokenizer: {tok.name}, for the encoder model {tok.model} ({tok.source}); context length "
            f"{ctx} tokens, start/end tokens included. A text longer than that is cut off when training "
            f"(truncated share = texts over {ctx} tokens among the non-empty ones). Texts of {subset} "
            f"({texts['source']}); each field as its own shard member holds it (empty = null field)."
        ),
    ]
    if tok.fallback:
        parts.append(note(f"Not the model's own tokenizer: {tok.fallback}."))
    parts += [
        table(
            rows,
            ["text", "non-empty", "empty", "median", "p90", "p99", "max", f"> {ctx} tokens", "truncated"],
            digits=0,
            caption=f"Token lengths ({tok.name}) and the share truncated at the context length {ctx}",
        ),
        figure_png(plots.context_histograms(data["lengths"], ctx, tok.name.split(" (")[0])),
    ]
    return parts


def examples(res: Results, n: int = 8, seed: int = 0) -> list[Part]:
    final = load.final_subfigures(res)
    if final is None:
        return [not_run("Examples", [res.path(L.shown(L.ENRICHED))])]
    stage, df = final
    # Prefer subfigures whose subcaption is their own (not the full caption) and that have a summary.
    ranked = (
        load.stable_order(df, "subfigure_uid", seed)
        .with_columns(
            (
                (pl.col("subcaption_source") != "fallback-full").cast(pl.Int8)
                + pl.col("summary").is_not_null().cast(pl.Int8)
            ).alias("_score")
        )
        .sort("_score", descending=True, maintain_order=True)
    )
    picked = ranked.group_by("figure_uid", maintain_order=True).head(1).head(n)
    items = [
        {
            "image": thumbnail_uri(res.resolve(r["crop_path"])) if r["crop_path"] else None,
            "title": r["subfigure_uid"],
            "fields": {
                "panel": r["panel_label"],
                "modality": r.get("modality"),
                "subcaption": shorten(r["subcaption"], 300) + f" [{r['subcaption_source']}]",
                "summary": shorten(r["summary"], 300),
                "licence": r["license_code"],
            },
        }
        for r in picked.iter_rows(named=True)
    ]
    return [
        para(f"{len(items)} subfigures from the {stage} table, one per figure, seeded order (seed {seed})."),
        cards(items),
    ]


# ============================================================================================
# Detector report
# ============================================================================================
def _eval_provenance(res: Results, ev: dict[str, Any]) -> dict[str, prov.Provenance]:
    return {
        det: prov.eval_detector(res, det, rec.get("checkpoint"))
        for det, rec in sorted((ev.get("detectors") or {}).items())
    }


def detector_metrics(res: Results) -> list[Part]:
    ev = load.detector_eval(res)
    if ev is None:
        return [not_run("Detector evaluation", [res.path(L.DETECTOR_EVAL)])]
    df = load.detector_metrics(ev)
    provs = _eval_provenance(res, ev)
    rows = [{**r, "model": provs[r["detector"]].kind} for r in _rows(df)] if df.height else []
    parts: list[Part] = [_prov(p) for p in provs.values()]
    parts += [
        para(
            "COCO mAP@[.5:.95] (pycocotools), best F1 at IoU 0.5 over score thresholds, and F1 at the production "
            "score threshold.  Column 'model': shipped (weights in the package), smoke-test (trained in this run "
            "on a tiny set: its numbers are not a quality measure), trained in this run, or weight-free."
        ),
        table(rows, caption=f"Detection metrics per detector and evaluation set ({L.DETECTOR_EVAL})"),
        note(
            "eval.json records no confidence intervals for these metrics; 'images' and 'gt boxes' give the "
            "sample sizes.  No chance line: detection has no class-guessing baseline."
        ),
        table(PAPER_DETECTOR, digits=2, caption="Reference: Open-PMC-18M paper (seed 000), in %"),
    ]
    return parts


def detector_pr(res: Results) -> list[Part]:
    ev = load.detector_eval(res)
    if ev is None:
        return [not_run("PR curves", [res.path(L.DETECTOR_EVAL)])]
    curves = load.pr_curves(res, ev)
    if not curves:
        return [note("eval.json has no PR curve points and no pr_<detector>_<set>.parquet exists.")]
    provs = _eval_provenance(res, ev)
    shown = {d for d, _ in curves}
    text = " | ".join(f"{d}: {p.label}" for d, p in provs.items() if d in shown)
    fig = plots.pr_curves(
        curves,
        load.fixed_threshold(ev),
        kinds={d: p.kind for d, p in provs.items()},
        provenance=text,
        smoke=any(p.is_smoke for d, p in provs.items() if d in shown),
    )
    return [*(_prov(p) for d, p in provs.items() if d in shown), figure_png(fig)]


def detector_training(res: Results) -> list[Part]:
    off = load.disabled_reason(res, "detector training")
    if off is not None:
        return [not_run("Detector training", [res.path(L.DETECTOR_TRAIN)], reason=off)]
    tr = load.detector_train(res)
    if tr is None:
        return [not_run("Detector training", [res.path(L.DETECTOR_TRAIN)])]
    p = prov.trained_detector(res, tr)
    params = tr.get("params") or {}
    rows = [
        {"key": "backend", "value": tr.get("backend")},
        {"key": "training images", "value": prov.detector_training_data(res)},
        {"key": "seconds", "value": tr.get("seconds")},
        {"key": "images/s", "value": tr.get("images_per_s")},
        *({"key": f"params.{k}", "value": json.dumps(v)} for k, v in sorted(params.items())),
    ]
    parts: list[Part] = [_prov(p), table(rows, digits=2)]
    fig = plots.history(
        tr.get("history") or [],
        title=f"{tr.get('backend')} training and validation losses",
        provenance=p.label,
        smoke=p.is_smoke,
    )
    if fig is not None:
        parts.append(figure_png(fig))
    return parts


def decompositions(res: Results, n: int = 6, seed: int = 0) -> list[Part]:
    sub = load.subfigures(res)
    if sub is None:
        return [not_run("Decomposition examples", [res.path(L.shown(L.SUBFIGURES))])]
    per_fig = sub.group_by("figure_uid").len()
    label_mix = {str(k): int(v) for k, v in sub["label_source"].fill_null("none").value_counts().iter_rows()}
    sha_col = "detector_checkpoint_sha256" if "detector_checkpoint_sha256" in sub.columns else None
    used = sub.select("detector", pl.col(sha_col) if sha_col else pl.lit(None, pl.String)).unique().rows()
    provs = [prov.decompose_detector(res, str(d), sha) for d, sha in sorted(used, key=str)]
    summary_rows = [
        {
            "figures": per_fig.height,
            "subfigures": sub.height,
            "single-panel figures": int(sub["is_single_panel"].sum()),
            "mean subfigures/figure": sub.height / max(1, per_fig.height),
            "max": int(per_fig["len"].max() or 0),
            "detector": ", ".join(sorted(str(d) for d in sub["detector"].unique().to_list())),
        },
    ]
    multi = load.stable_order(per_fig.filter(pl.col("len").is_between(2, 12)), "figure_uid", seed).head(n)
    chosen = []
    for uid in multi["figure_uid"].to_list():
        boxes = sub.filter(pl.col("figure_uid") == uid)
        path = res.resolve(boxes["image_path"][0])
        chosen.append((path, f"{uid} ({boxes.height} panels)", boxes))
    parts: list[Part] = [
        *(_prov(p) for p in provs),
        table(summary_rows, digits=2),
        table(
            [
                {"label source": k, "subfigures": v}
                for k, v in sorted(label_mix.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
            caption="Where panel letters come from",
        ),
    ]
    if chosen:
        parts.append(
            para(
                "Boxes from decompose/subfigures.parquet over the parent images; tag = reading-order index:panel letter. "
                "Colour: red = letter read from the image, blue = caption letter by reading order, green = single panel."
            )
        )
        fig = plots.decompositions(
            chosen,
            provenance=" | ".join(p.label for p in provs),
            smoke=any(p.is_smoke for p in provs),
        )
        parts.append(figure_png(fig, dpi=90))
    return parts


# ============================================================================================
# Enrichment report
# ============================================================================================
def _enriched_or_note(res: Results) -> pl.DataFrame | Html:
    df = load.enriched(res)
    return df if df is not None else not_run("Enrichment", [res.path(L.shown(L.ENRICHED))])


def subcaption_sources(res: Results) -> list[Part]:
    df = _enriched_or_note(res)
    if isinstance(df, Html):
        return [df]
    mix = (
        df.group_by(pl.col("subcaption_source").fill_null("none"), pl.col("subcaption_reason").fill_null("–"))
        .len()
        .sort(["subcaption_source", "len", "subcaption_reason"], descending=[False, True, False])
    )
    n = df.height
    rows = [
        {"source": s, "reason": r, "subfigures": k, "share %": 100.0 * k / max(1, n)}
        for s, r, k in mix.iter_rows()
    ]
    bysrc = {str(k): int(v) for k, v in df["subcaption_source"].fill_null("none").value_counts().iter_rows()}
    same = int((df["subcaption"] == df["caption"]).fill_null(False).sum())
    models = sorted({str(m) for m in df["subcaption_model"].drop_nulls().unique().to_list()})
    fb = fallback_rate(df)
    reasons = ", ".join(f"{r} {k:,}" for r, k in fb["reasons"].items()) or "none"
    return [
        table(rows, digits=1, caption="Subcaption source (rules / vlm / fallback-full) and fallback reasons"),
        figure_png(plots.bar_counts(bysrc, title="Subcaption source", xlabel="subfigures")),
        para(
            f"Full-caption fallback among subfigures of compound figures: {fb['fallback']:,} of "
            f"{fb['compound']:,} ({fb['rate_pct']:.1f} %; reasons: {reasons}). "
            f"Subcaptions equal to the full caption, all subfigures: {same:,} of {n:,} "
            f"({100.0 * same / max(1, n):.1f} %; the paper reports 13.28 %). "
            f"Models: {_text_models(models)}."
        ),
    ]


TEXT_METHODS = {
    "rules": "rule-based caption splitter, no learned weights",
    "extractive": "extractive sentence ranking, no learned weights",
}


def _text_models(models: Sequence[str]) -> str:
    """The subcaption / summary models as recorded per row, each said to be rule-based or a language model."""
    return (
        "; ".join(f"{m} ({TEXT_METHODS.get(m, 'language model, as named in the table')})" for m in models)
        or "none"
    )


def fallback_rate(df: pl.DataFrame) -> dict[str, Any]:
    """Full-caption fallbacks among subfigures of compound figures, with counts per reason.

    A compound figure is one decomposed into two or more subfigures: a figure whose decomposition
    kept one box has nothing to split its caption for.
    """
    compound = df.filter(
        ~pl.col("is_single_panel").fill_null(False) & (pl.len().over("figure_uid", "graphic_index") >= 2)
    )
    fb = compound.filter(pl.col("subcaption_source") == "fallback-full")
    reasons = {
        str(r): int(k)
        for r, k in fb.group_by(pl.col("subcaption_reason").fill_null("none"))
        .len()
        .sort(["len", "subcaption_reason"], descending=[True, False])  # ties by name: group order varies
        .iter_rows()
    }
    rate = 100.0 * fb.height / compound.height if compound.height else 0.0
    return {
        "compound": compound.height,
        "fallback": fb.height,
        "rate_pct": round(rate, 2),
        "reasons": reasons,
    }


def summary_sources(res: Results) -> list[Part]:
    df = _enriched_or_note(res)
    if isinstance(df, Html):
        return [df]
    mix = (
        df.group_by(pl.col("summary_source").fill_null("none"), pl.col("summary_reason").fill_null("–"))
        .len()
        .sort(["summary_source", "len", "summary_reason"], descending=[False, True, False])
    )
    rows = [
        {"source": s, "reason": r, "subfigures": k, "share %": 100.0 * k / max(1, df.height)}
        for s, r, k in mix.iter_rows()
    ]
    n_mentions = df["mention_uids"].list.len().fill_null(0)
    models = (
        sorted({str(m) for m in df["summary_model"].drop_nulls().unique().to_list()})
        if "summary_model" in df.columns
        else []
    )
    return [
        table(rows, digits=1, caption="Summary source (extractive / llm / none) and reasons"),
        para(
            f"Subfigures with at least one in-text mention: {int((n_mentions > 0).sum()):,} of {df.height:,}; "
            f"mean mentions used: {float(n_mentions.mean() or 0):.2f}. Models: {_text_models(models)}."
        ),
    ]


def splitter_quality(res: Results, mode: str = "auto") -> list[Part]:
    got = load.splitter_quality(res.workdir, mode=mode)
    if got is None:
        return [
            not_run("Splitter quality", ["benchmarks/results/enrich.json", "tests/fixtures/subcaptions/"])
        ]
    source, q = got
    metrics = (
        "figures",
        "gold_segments",
        "predicted_segments",
        "exact_match_rate",
        "token_f1_macro",
        "count_match_rate",
        "label_agreement",
    )
    rows = []
    for split in ("dev", "test", "all"):
        entry = q.get(split) or {}
        for variant, rec in (
            ("rules splitter", entry),
            ("labelled figures only", entry.get("labelled_figures")),
            ("no split (baseline)", entry.get("no_split")),
        ):
            if rec:
                rows.append({"split": split, "variant": variant, **{m: rec.get(m) for m in metrics}})
    return [
        para(
            f"Source: {source}. Gold: EMBO SourceData panel legends (human segmentation); segments matched on text by "
            "token F1 (see pmcflow.enrich.evaluate). The paper's VLM subcaptions: 94 % correct on 1,000 reviewed."
        ),
        table(rows, digits=3),
    ]


def enrich_examples(res: Results, n: int = 6, seed: int = 0) -> list[Part]:
    df = _enriched_or_note(res)
    if isinstance(df, Html):
        return [df]
    parts: list[Part] = []
    order = load.stable_order(df, "subfigure_uid", seed)
    for source in sorted(set(df["subcaption_source"].drop_nulls().to_list())):
        sel = (
            order.filter(pl.col("subcaption_source") == source)
            .group_by("figure_uid", maintain_order=True)
            .head(1)
            .head(n // 2 or 1)
        )
        rows = [
            {
                "subfigure": r["subfigure_uid"],
                "panel": r["panel_label"],
                "reason": r["subcaption_reason"],
                "caption": shorten(r["caption"], 220),
                "subcaption": shorten(r["subcaption"], 220),
                "summary": shorten(r["summary"], 220),
            }
            for r in sel.iter_rows(named=True)
        ]
        parts.append(table(rows, caption=f"subcaption source: {source}"))
    return parts


# ============================================================================================
# Training report
# ============================================================================================
def encoder_training(res: Results) -> list[Part]:
    runs = load.encoder_runs(res)
    if not runs:
        return [
            not_run("Encoder training", [res.path(L.encoder_file(L.ENCODER_TRAIN, res.run_name or "<run>"))])
        ]
    rows, steps, provs = [], {}, {}
    for run in runs:
        tr = load.encoder_train(res, run)
        provs[run] = prov.encoder(res, run, tr)
        sched = tr.get("schedule") or {}
        val = tr.get("val_metrics") or {}
        rows.append(
            {
                "run": run,
                "model": tr.get("model") or (tr.get("config") or {}).get("model"),
                "provenance": provs[run].kind,
                "train pairs": tr.get("n_train"),
                "epochs": sched.get("epochs", (tr.get("config") or {}).get("epochs")),
                "steps": tr.get("n_steps_logged"),
                "first loss": tr.get("first_loss"),
                "final loss": tr.get("final_loss"),
                "samples/s (median)": tr.get("samples_per_s_median"),
                "wall s": tr.get("wall_s"),
                "val loss": val.get("clip_val_loss"),
            }
        )
        df = load.encoder_steps(res, run)
        if df is not None and df.height:
            steps[run] = df
    parts: list[Part] = [*(_prov(p) for p in provs.values()), table(rows, digits=3)]
    if steps:
        shown = [provs[r] for r in sorted(steps)]
        parts.append(
            figure_png(
                plots.loss_curves(
                    steps,
                    provenance=" | ".join(f"{r}: {provs[r].label}" for r in sorted(steps)),
                    smoke=any(p.is_smoke for p in shown),
                )
            )
        )
    else:
        parts.append(note("No logged steps (steps.parquet empty or absent)."))
    return parts


def _eval_provenance_run(res: Results, run: str) -> prov.Provenance:
    """The encoder an evaluation run scored: its training run's record (same run name), or the
    baseline's own record."""
    if run.startswith(load.BASELINE):
        return prov.baseline(res, run)
    p = prov.encoder(res, run)
    ev = load.evaluation_json(res, run) or {}
    if p.kind == prov.UNKNOWN and ev.get("model_id"):
        return prov.Provenance(prov.UNKNOWN, str(ev["model_id"]), f"checkpoint {ev.get('checkpoint')}")
    return p


def retrieval(res: Results) -> list[Part]:
    runs = load.evaluated_models(res)
    if not runs:
        return [
            not_run(
                "Retrieval evaluation",
                [res.path(L.evaluation_file(L.evaluation_dir(res.run_name or "<run>"), "metrics"))],
            )
        ]
    parts: list[Part] = []
    for run in runs:
        m = load.evaluation_metrics(res, run)
        split = (load.evaluation_json(res, run) or {}).get("split")  # benchmarks: their own section
        m = m.filter(~((pl.col("task") == "retrieval") & (pl.col("dataset") != split)))
        ret = m.filter(pl.col("task") == "retrieval")
        if ret.height == 0:
            skipped = (load.evaluation_json(res, run) or {}).get("skipped", {}).get("retrieval")
            parts.append(note(f"{run}: no retrieval metrics" + (f" ({skipped})" if skipped else "")))
            continue
        p = _eval_provenance_run(res, run)
        pool = int(ret["n"].max() or 0)
        ks = sorted({int(k[2:]) for k in ret["metric"].to_list() if k.startswith("R@")})
        matches, how = load.retrieval_matches(res, run)
        chance = stats.retrieval_chance(pool, ks, matches) if pool else {}
        if matches is None:
            how = f"assumes one match per query, a lower bound ({how})"
        rows = []
        for metric in ret["metric"].unique(maintain_order=True).to_list():
            row: dict[str, Any] = {"run": run, "metric": metric}
            for r in ret.filter(pl.col("metric") == metric).iter_rows(named=True):
                d = str(r["direction"]).replace("_to_", "→").replace("image", "img").replace("text", "txt")
                row[d] = r["value"]
                row[f"{d} CI"] = _ci(r["ci_low"], r["ci_high"])
                row["n"] = r["n"]
            c = chance.get(metric)
            row["chance"] = float(c) if c is not None else None
            rows.append(row)
        cols = ["run", "metric"]
        for d in ("img→txt", "txt→img"):
            if any(d in r for r in rows):
                cols += [d, f"{d} CI"]
        cols += ["chance", "n"]
        parts.append(_prov(p))
        parts.append(
            table(
                rows,
                cols,
                digits=3,
                caption=(
                    f"Retrieval on split {ret['dataset'][0]!r} ({run}); CIs: 95 % percentile bootstrap over queries; "
                    f"chance: a random ranking of the N = {pool:,} candidates (R@K = K/N with one match per query)"
                ),
            )
        )
        parts.append(
            para(
                f"Chance levels for a pool of N = {pool:,} candidates per query; matching candidates: {how}. "
                "Chance R@K = 1 − C(N−m, K)/C(N, K) for a query with m matches (K/N when m = 1), averaged over queries; "
                "chance mean rank and MRR follow from the same random ranking."
            )
        )
        recall = ret.filter(pl.col("metric").str.starts_with("R@"))
        if recall.height:
            parts.append(
                figure_png(
                    plots.recall_at_k(
                        m,
                        run,
                        chance={k: float(v) for k, v in chance.items() if k.startswith("R@")},
                        chance_label=f"chance (random ranking, N = {pool:,})",
                        provenance=p.label,
                        smoke=p.is_smoke,
                    )
                )
            )
            trivial = sorted({k for k in ks if k >= pool})
            if trivial:
                parts.append(
                    note(
                        f"{run}: the pool has {pool} candidates, so R@{', R@'.join(map(str, trivial))} "
                        "are 1 by construction (K ≥ pool size)."
                    )
                )
    return parts


def zero_shot(res: Results) -> list[Part]:
    runs = load.evaluated_models(res)
    if not runs:
        return [
            not_run(
                "Zero-shot evaluation",
                [res.path(L.evaluation_file(L.evaluation_dir(res.run_name or "<run>"), "metrics"))],
            )
        ]
    parts: list[Part] = []
    for run in runs:
        zs = load.evaluation_metrics(res, run).filter(pl.col("task") == "zero_shot")
        skipped = {
            k: v
            for k, v in ((load.evaluation_json(res, run) or {}).get("skipped") or {}).items()
            if k.startswith("zero_shot")
        }
        if zs.height == 0:
            parts.append(note(f"{run}: no zero-shot task ran" + (f" ({skipped})" if skipped else "")))
            continue
        p = _eval_provenance_run(res, run)
        rows, plotted = [], []
        for ds in zs["dataset"].unique(maintain_order=True).to_list():
            d = zs.filter(pl.col("dataset") == ds)
            row: dict[str, Any] = {"run": run, "dataset": ds}
            point: dict[str, Any] = {"name": ds}
            for r in d.iter_rows(named=True):
                if r["metric"] in ("accuracy", "macro_f1"):
                    row[r["metric"]] = r["value"]
                    row[f"{r['metric']} CI"] = _ci(r["ci_low"], r["ci_high"])
                    row["n"] = r["n"]
                    point[r["metric"]] = r["value"]
                    if _ci(r["ci_low"], r["ci_high"]) is not None:
                        point[f"{r['metric']}_ci"] = (r["ci_low"], r["ci_high"])
            class_n = [int(r["n"]) for r in d.iter_rows(named=True) if r["metric"].startswith("f1[")]
            if class_n and sum(class_n) > 0:
                chance = stats.classification_chance(class_n)
                point["chance"] = chance
                row["classes"] = len(class_n)
                row["chance acc (1/k)"] = chance["accuracy_uniform"]
                row["chance macro-F1"] = chance["macro_f1_uniform"]
                row["majority acc"] = chance["accuracy_majority"]
                row["majority macro-F1"] = chance["macro_f1_majority"]
            row["per-class F1"] = ", ".join(
                f"{r['metric'][3:-1]}: {r['value']:.2f} (n {r['n']})"
                for r in d.iter_rows(named=True)
                if r["metric"].startswith("f1[")
            )
            rows.append(row)
            plotted.append(point)
        parts.append(_prov(p))
        parts.append(
            table(
                rows,
                digits=3,
                caption=(
                    f"Zero-shot classification ({run}); CIs: 95 % percentile bootstrap; chance: a uniform random "
                    "guess over the k classes (accuracy 1/k; macro-F1: its exact expectation given the class counts); "
                    "majority: always the largest class"
                ),
            )
        )
        parts.append(
            para(
                "Chance macro-F1 is the expected macro-F1 of a guesser picking each of the k classes with "
                "probability 1/k: for class c with n_c of n items, TP ~ Bin(n_c, 1/k) and FP ~ Bin(n − n_c, 1/k), "
                "F1_c = 2TP/(TP + FP + n_c), averaged over classes (about the mean of 2·p_c·(1/k)/(p_c + 1/k), "
                "p_c = n_c/n).  The majority-class baseline scores the largest class share in accuracy and "
                "(1/k)·2p_max/(p_max + 1) in macro-F1."
            )
        )
        parts.append(
            figure_png(
                plots.classification(
                    plotted,
                    title=f"zero-shot classification ({run})",
                    provenance=p.label,
                    smoke=p.is_smoke,
                )
            )
        )
        for k, v in skipped.items():
            parts.append(note(f"skipped {k}: {v}"))
    return parts


# The paper's evaluation: benchmarks as data, the text ablation, robustness.
HEADLINE = {"retrieval": "mean_recall", "zero_shot": "macro_f1", "linear_probe": "macro_f1"}


def _benchmark_rows(res: Results, runs: Sequence[str]) -> pl.DataFrame:
    frames = []
    for run in runs:
        ev = load.evaluation_json(res, run) or {}
        names = set((ev.get("benchmarks") or {}).keys())
        m = load.evaluation_metrics(res, run).filter(pl.col("dataset").is_in(sorted(names)))
        frames.append(m.with_columns(pl.lit(run).alias("run")))
    return pl.concat(frames) if frames else pl.DataFrame()


def benchmarks(res: Results) -> list[Part]:
    """Every configured benchmark and task for every encoder run, with CIs, and the files used."""
    runs = load.evaluated_models(res)
    m = _benchmark_rows(res, runs)
    if not runs or m.height == 0:
        return [note("No benchmark was configured (evaluate.benchmarks, evaluate.build_demo_benchmarks).")]
    rows = []
    keep = {"retrieval": ["R@10", "R@50", "R@200", "mean_recall"], "zero_shot": ["accuracy", "macro_f1"],
            "linear_probe": ["accuracy", "macro_f1"]}  # fmt: skip
    for r in m.iter_rows(named=True):
        if r["metric"] not in keep.get(r["task"], []):
            continue
        d = r["direction"]
        rows.append(
            {
                "benchmark": r["dataset"],
                "task": r["task"] + (f" {d.replace('_to_', '→')}" if d and d != "mean" else ""),
                "metric": r["metric"],
                "run": r["run"],
                "value": r["value"],
                "95 % CI": _ci(r["ci_low"], r["ci_high"]),
                "n": r["n"],
            }
        )
    parts: list[Part] = [
        table(
            rows,
            ["benchmark", "task", "metric", "run", "value", "95 % CI", "n"],
            digits=3,
            caption="Benchmarks: retrieval Recall@K per direction and mean_recall (the mean of R@10/50/200 over "
            "both directions, the paper's summary); zero-shot and linear-probe accuracy and macro-F1 on each "
            "benchmark's test split. CIs: 95 % percentile bootstrap over queries / images.",
        )  # fmt: skip
    ]
    used = []
    for run in runs[:1]:
        path = res.path(L.evaluation_file(load.evaluation_dir(run), "benchmarks"))
        doc = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        for b in doc.get("benchmarks", []):
            files = b.get("files") or []
            d = b.get("definition") or {}
            used.append({"benchmark": b["benchmark"], "tasks": ", ".join(d.get("tasks") or []),
                         "files": len(files), "MB": sum(f["bytes"] for f in files) / 1e6,
                         "licence": d.get("licence"), "path": d.get("path")})  # fmt: skip
    if used:
        parts.append(
            table(
                used,
                digits=2,
                caption="Benchmark files read (each with its sha256 in evaluation/<run>/benchmarks.json)",
            )
        )
    return parts


def ablation(res: Results) -> list[Part]:
    """The text ablation (seed 000, Figure 1c): each run's headline score on every benchmark task."""
    runs = load.evaluated_models(res)  # the runs, then the baselines beside them
    m = _benchmark_rows(res, runs)
    if len(load.evaluation_runs(res)) < 2 or m.height == 0:
        return [
            note(
                "One encoder run: set train.variants for the text ablation (one encoder per text composition)."
            )
        ]
    points = []
    for r in m.iter_rows(named=True):
        if HEADLINE.get(r["task"]) == r["metric"]:
            points.append({"task": f"{r['dataset']} {r['task'].replace('_', ' ')} ({r['metric']})", "run": r["run"],
                           "value": r["value"], "ci": (r["ci_low"], r["ci_high"]) if _ci(r["ci_low"], r["ci_high"]) else None})  # fmt: skip
    p = _eval_provenance_run(res, runs[0])
    texts = []
    for run in runs:
        if run.startswith(load.BASELINE):
            texts.append(f"{run}: {prov.baseline(res, run).label}")
            continue
        cfg = (load.encoder_train(res, run) or {}).get("config") or {}
        texts.append(f"{run}: {' + '.join(cfg.get('text_fields') or ['the shards .txt'])}")
    return [
        _prov(p),
        para("Training texts (and the baselines beside them): " + "; ".join(texts) + "."),
        figure_png(plots.ablation(points, runs, provenance=p.label, smoke=p.is_smoke)),
    ]


def robustness(res: Results) -> list[Part]:
    """Perturbation robustness per run: ratio, delta with its paired bootstrap CI, Wilcoxon p."""
    parts: list[Part] = []
    for run in load.evaluated_models(res):
        path = res.path(L.evaluation_file(load.evaluation_dir(run), "robustness"))
        if not path.is_file():
            continue
        df = pl.read_parquet(path)
        if df.height == 0:
            continue
        rows = [
            {
                "run": run,
                "benchmark": r["dataset"],
                "task": r["task"] + (f" {r['direction'].replace('_to_', '→')}" if r["direction"] else ""),
                "perturbation": f"{r['perturbation']}={r['strength']:g}",
                "metric": r["metric"],
                "base": r["base"],
                "perturbed": r["perturbed"],
                "ratio": r["ratio"],
                "delta": r["delta"],
                "delta 95 % CI": _ci(r["ci_low"], r["ci_high"]),
                "Wilcoxon p": r["p_value"],
                "significant": "yes" if r["significant"] else "no",
                "n": r["n"],
            }  # fmt: skip
            for r in df.iter_rows(named=True)
        ]
        parts.append(table(rows, digits=3, caption=(
            f"Robustness ({run}): per-query scores on perturbed test images (retrieval: reciprocal rank; zero-shot: "
            "correct or not) against the unperturbed ones; ratio = perturbed / base (the paper's robustness score); "
            "delta with a 95 % paired bootstrap CI; Wilcoxon signed-rank test, significant at the configured alpha.")))  # fmt: skip
    return parts or [note("No robustness evaluation ran (evaluate.robustness.perturbations is empty).")]


def embeddings(res: Results) -> list[Part]:
    """t-SNE maps per model and MMD permutation tests per pair of models (rule compare_embeddings)."""
    summary_path = res.path(L.EMBEDDINGS_SUMMARY)
    if not summary_path.is_file():
        emb = ((res.config or {}).get("evaluate") or {}).get("embedding") or {}
        why = (
            "disabled in the config (evaluate.embedding.enabled: false)"
            if emb.get("enabled") is False
            else "it needs two or more evaluated models (encoder runs or evaluate.baselines)"
        )
        return [not_run("Embedding analysis", [summary_path], reason=why)]
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    mmd = pl.read_parquet(res.path(L.EMBEDDINGS_MMD))
    st = summary.get("settings") or {}
    parts: list[Part] = [
        para(
            f"Models: {', '.join(summary.get('models') or [])}. At most {st.get('max_images')} test images per "
            f"benchmark (the same seeded subset for every model); t-SNE perplexity {st.get('perplexity')} "
            f"(clipped to (n − 1)/3), each model in its own map; MMD² (unbiased, RBF kernel at the median "
            f"distance) with {st.get('permutations')} permutations: p = (1 + #null ≥ observed)/(1 + permutations), "
            "null range = the smallest and largest permuted MMD²."
        )
    ]
    for bench, info in sorted((summary.get("benchmarks") or {}).items()):
        if info.get("skipped"):
            parts.append(note(f"{bench}: not compared ({info['skipped']})."))
            continue
        parts.append(heading(f"{bench}: {info['n_used']} of {info['n_images']} test images", level=4))
        png = res.path(f"{L.EMBEDDINGS_DIR}/{info['tsne_png']}")
        if png.is_file():
            parts.append(Png(png.read_bytes(), alt=f"t-SNE of the {bench} test image embeddings"))
        rows = [
            {
                "model A": r["model_a"],
                "model B": r["model_b"],
                "n": r["n"],
                "MMD²": r["mmd2"],
                "p": r["p_value"],
                "null range": None
                if r["null_low"] is None
                else f"[{r['null_low']:.4g}, {r['null_high']:.4g}]",
                "bandwidth": r["bandwidth"],
                "note": r["skipped"] or "",
            }
            for r in mmd.filter(pl.col("benchmark") == bench).iter_rows(named=True)
        ]
        parts.append(
            table(rows, digits=4, caption=f"MMD permutation tests between the models' embeddings ({bench})")
        )
    return parts
