"""Matplotlib figures for the reports (object-oriented API only, no pyplot state between plots)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image

from pmcflow.report.load import StageCounts

KEPT = "#4C72B0"
REJECTED = "#DD8452"
PALETTE = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def _fig(w: float, h: float) -> Figure:
    import matplotlib.pyplot as plt

    from pmcflow.mplfonts import ensure_bundled_fonts

    ensure_bundled_fonts()
    return plt.figure(figsize=(w, h))


def footer(fig: Figure, text: str | None, *, smoke: bool = False, width: int = 150) -> Figure:
    """Write ``text`` (a model's provenance) under the axes, so the figure carries it when shared alone."""
    if text:
        fig.text(
            0.0,
            -0.01,
            textwrap.fill(text, width),
            ha="left",
            va="top",
            fontsize=7,
            color="#b35900" if smoke else "#333333",
            transform=fig.transFigure,
        )
    return fig


def funnel(counts: Sequence[StageCounts | str]) -> Figure:
    """Kept and rejected per stage (horizontal stacked bars, log scale) with each stage's unit.

    A plain string in ``counts`` is a stage that did not run: its row says so and has no bar.
    """
    fig = _fig(8, 0.55 * len(counts) + 1.2)
    ax = fig.add_subplot()
    ran = [c for c in counts if isinstance(c, StageCounts)]
    labels = [
        f"{c.stage}\n({c.unit_in})" if isinstance(c, StageCounts) else f"{c}\n(not run)" for c in counts
    ]
    y = np.arange(len(counts))[::-1]
    yr = np.array([yi for yi, c in zip(y, counts, strict=True) if isinstance(c, StageCounts)])
    kept = np.array([c.kept for c in ran], dtype=float)
    rej = np.array([c.n_rejected for c in ran], dtype=float)
    ax.barh(yr, kept, color=KEPT, label="kept")
    ax.barh(yr, rej, left=kept, color=REJECTED, label="rejected")
    for yi, c in zip(y, counts, strict=True):
        if not isinstance(c, StageCounts):
            ax.text(1.0, yi, "not run", va="center", fontsize=8, color="#777777", style="italic")
            continue
        text = f"{c.kept:,} kept" + (f", {c.n_rejected:,} rejected" if c.n_rejected else "")
        if c.out != c.kept:
            text += f" → {c.out:,} {c.unit_out}"
        ax.text(max(c.n_in, 1) * 1.08, yi, text, va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xscale("log")
    top = max([c.n_in for c in ran] + [c.out for c in ran] + [1])
    ax.set_xlim(0.8, top * 30)
    ax.set_xlabel("items (log scale)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Items in, kept and rejected per stage")
    fig.tight_layout()
    return fig


def bar_counts(counts: Mapping[str, int], *, title: str, xlabel: str = "count", top: int = 15) -> Figure:
    """Horizontal bars of category counts, largest first (at most ``top`` categories + "other")."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(items) > top:
        items = items[: top - 1] + [("other", sum(v for _, v in items[top - 1 :]))]
    fig = _fig(7, 0.35 * len(items) + 1.1)
    ax = fig.add_subplot()
    y = np.arange(len(items))[::-1]
    vals = [v for _, v in items]
    ax.barh(y, vals, color=[PALETTE[i % len(PALETTE)] for i in range(len(items))])
    ax.set_yticks(y, [k for k, _ in items], fontsize=8)
    total = sum(vals) or 1
    for yi, v in zip(y, vals, strict=True):
        ax.text(v, yi, f" {v:,} ({100 * v / total:.1f} %)", va="center", fontsize=8)
    ax.set_xlim(0, max(vals + [1]) * 1.3)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def token_histograms(lengths: Mapping[str, Sequence[int]]) -> Figure:
    """One histogram per text kind (whitespace tokens), median marked; log-spaced bins."""
    kinds = [k for k in ("caption", "subcaption", "summary") if lengths.get(k)]
    fig = _fig(4 * max(1, len(kinds)), 3.2)
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(1, len(kinds), i + 1)
        vals = np.asarray(lengths[kind], dtype=float)
        hi = max(2.0, float(vals.max()))
        bins = np.unique(np.round(np.geomspace(1, hi + 1, 30)))
        ax.hist(np.clip(vals, 1, None), bins=bins, color=PALETTE[i], edgecolor="white", linewidth=0.5)
        med = float(np.median(vals))
        ax.axvline(med, color="black", linestyle="--", linewidth=1)
        ax.set_xscale("log")
        plural = {"summary": "summaries"}.get(kind, kind + "s")
        ax.set_title(f"{plural} (n={len(vals):,}, median {med:.0f})", fontsize=9)
        ax.set_xlabel("whitespace tokens")
        if i == 0:
            ax.set_ylabel("count")
    fig.tight_layout()
    return fig


def context_histograms(
    lengths: Mapping[str, Sequence[int]], context_length: int, tokenizer: str = ""
) -> Figure:
    """One histogram per text (model tokens), the context length marked and the share beyond it in
    each title; up to 4 panels a row."""
    kinds = [k for k, v in lengths.items() if v]
    cols = min(4, max(1, len(kinds)))
    rows = max(1, -(-len(kinds) // cols))
    fig = _fig(3.6 * cols, 2.9 * rows)
    for i, kind in enumerate(kinds):
        ax = fig.add_subplot(rows, cols, i + 1)
        vals = np.asarray(lengths[kind], dtype=float)
        hi = max(float(context_length) * 1.1, float(vals.max()))
        bins = np.unique(np.round(np.geomspace(1, hi + 1, 30)))
        ax.hist(
            np.clip(vals, 1, None),
            bins=bins,
            color=PALETTE[i % len(PALETTE)],
            edgecolor="white",
            linewidth=0.5,
        )
        ax.axvline(context_length, color="#C44E52", linestyle="--", linewidth=1.2)
        ax.set_xscale("log")
        share = float((vals > context_length).mean())
        ax.set_title(f"{kind} (n={len(vals):,}, {share:.0%} > {context_length})", fontsize=9)
        ax.set_xlabel(f"tokens{' (' + tokenizer + ')' if tokenizer else ''}", fontsize=8)
        if i % cols == 0:
            ax.set_ylabel("samples")
    fig.tight_layout()
    return fig


def pr_curves(
    curves: Mapping[tuple[str, str], pl.DataFrame],
    fixed_threshold: float | None,
    *,
    kinds: Mapping[str, str] | None = None,
    provenance: str | None = None,
    smoke: bool = False,
) -> Figure:
    """Precision–recall per evaluation set (one panel each), one line per detector.

    ``fixed_threshold``: the score threshold the evaluation reported F1 at (a dot on each curve;
    None: no dot). ``kinds``: detector -> its provenance kind (shown in the legend);
    ``provenance``: footer text.
    """
    kinds = kinds or {}
    sets = sorted({s for _, s in curves})
    dets = sorted({d for d, _ in curves})
    fig = _fig(4.2 * max(1, len(sets)), 3.6)
    for i, eval_set in enumerate(sets):
        ax = fig.add_subplot(1, len(sets), i + 1)
        for j, det in enumerate(dets):
            df = curves.get((det, eval_set))
            if df is None or df.height == 0:
                continue
            df = df.sort("threshold", descending=True)
            color = PALETTE[j % len(PALETTE)]
            label = f"{det} [{kinds[det]}]" if det in kinds else det
            ax.plot(df["recall"], df["precision"], color=color, label=label, linewidth=1.5)
            at = df.filter(pl.col("threshold") >= fixed_threshold) if fixed_threshold is not None else df.clear()
            if at.height:
                ax.plot(at["recall"][-1], at["precision"][-1], "o", color=color, markersize=5)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("recall (IoU ≥ 0.5)")
        ax.set_ylabel("precision")
        ax.set_title(eval_set, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    dot = f" (dot: score threshold {fixed_threshold:g})" if fixed_threshold is not None else ""
    fig.suptitle(f"PR curves{dot}", fontsize=10)
    fig.tight_layout()
    return footer(fig, provenance, smoke=smoke)


def history(
    rows: Sequence[Mapping[str, float]],
    *,
    title: str,
    match: str = "loss",
    provenance: str | None = None,
    smoke: bool = False,
) -> Figure | None:
    """Numeric series whose name contains ``match`` against epoch (or row index)."""
    if not rows:
        return None
    keys = sorted({k for r in rows for k, v in r.items() if match in k and isinstance(v, int | float)})
    if not keys:
        return None
    x = [float(r.get("epoch", i + 1)) for i, r in enumerate(rows)]
    fig = _fig(7, 3.4)
    ax = fig.add_subplot()
    for j, k in enumerate(keys):
        ax.plot(
            x,
            [r.get(k, np.nan) for r in rows],
            marker="o",
            markersize=3,
            label=k,
            color=PALETTE[j % len(PALETTE)],
        )
    ax.set_xlabel("epoch")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return footer(fig, provenance, smoke=smoke)


def decompositions(
    figs: Sequence[tuple[Path, str, pl.DataFrame]],
    *,
    cols: int = 3,
    provenance: str | None = None,
    smoke: bool = False,
) -> Figure:
    """Parent figures with their subfigure boxes, reading-order index and panel label."""
    n = len(figs)
    rows = (n + cols - 1) // cols
    fig = _fig(4.4 * cols, 4.0 * rows)
    for i, (path, title, boxes) in enumerate(figs):
        ax = fig.add_subplot(rows, cols, i + 1)
        try:
            with Image.open(path) as im:
                w0, h0 = im.size
                scale = min(1.0, 600 / max(w0, h0))
                im = im.convert("RGB").resize((max(1, round(w0 * scale)), max(1, round(h0 * scale))))
                ax.imshow(np.asarray(im))
        except (OSError, ValueError):
            ax.text(0.5, 0.5, "image not readable", ha="center", transform=ax.transAxes)
            scale = 1.0
        for r in boxes.sort("subfigure_index").iter_rows(named=True):
            x, y, w, h = (float(v) * scale for v in r["bbox"])
            color = {
                "detected-label": "#d62728",
                "reading-order": "#1f77b4",
                "inherited": "#9467bd",
                "single": "#2ca02c",
            }.get(r["label_source"] or "", "#ff7f0e")
            ax.add_patch(Rectangle((x, y), w, h, fill=False, edgecolor=color, linewidth=1.6))
            label = f"{r['subfigure_index']}" + (f":{r['panel_label']}" if r["panel_label"] else "")
            ax.text(
                x + 2,
                y + 2,
                label,
                color="white",
                fontsize=7,
                va="top",
                bbox={"facecolor": color, "alpha": 0.85, "pad": 1, "linewidth": 0},
            )
        ax.set_title(title, fontsize=7)
        ax.axis("off")
    fig.tight_layout()
    return footer(fig, provenance, smoke=smoke, width=200)


def loss_curves(
    steps: Mapping[str, pl.DataFrame], *, provenance: str | None = None, smoke: bool = False
) -> Figure:
    """Training loss per logged step (and its running mean) for each run; learning rate beside it."""
    fig = _fig(11, 3.6)
    ax = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2)
    for j, (run, df) in enumerate(sorted(steps.items())):
        color = PALETTE[j % len(PALETTE)]
        ax.plot(df["step"], df["loss"], color=color, alpha=0.45, linewidth=1, label=f"{run} loss")
        ax.plot(df["step"], df["loss_avg"], color=color, linewidth=2, label=f"{run} running mean")
        ax2.plot(df["step"], df["lr"], color=color, label=run)
    ax.set_xlabel("step")
    ax.set_ylabel("InfoNCE loss")
    ax.set_title("training loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax2.set_xlabel("step")
    ax2.set_ylabel("learning rate")
    ax2.set_title("learning-rate schedule")
    ax2.grid(alpha=0.3)
    ax2.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    fig.tight_layout()
    return footer(fig, provenance, smoke=smoke, width=200)


def recall_at_k(
    metrics: pl.DataFrame,
    run: str,
    *,
    chance: Mapping[str, float] | None = None,
    chance_label: str = "chance (random ranking)",
    provenance: str | None = None,
    smoke: bool = False,
) -> Figure:
    """Retrieval Recall@K in both directions with their bootstrap CIs and the chance level per K."""
    ret = metrics.filter((pl.col("task") == "retrieval") & pl.col("metric").str.starts_with("R@"))
    ks = sorted({int(m[2:]) for m in ret["metric"].to_list()})
    fig = _fig(6.5, 3.4)
    ax = fig.add_subplot()
    width = 0.38
    for j, direction in enumerate(sorted(set(ret["direction"].to_list()))):
        d = ret.filter(pl.col("direction") == direction)
        vals, lo, hi = [], [], []
        for k in ks:
            row = d.filter(pl.col("metric") == f"R@{k}").row(0, named=True)
            vals.append(row["value"])
            lo.append(_err(row["value"], row["ci_low"]))
            hi.append(_err(row["ci_high"], row["value"]))
        x = np.arange(len(ks)) + (j - 0.5) * width
        ax.bar(
            x,
            vals,
            width,
            yerr=[lo, hi],
            capsize=3,
            label=direction.replace("_", " ") + " (95 % CI)",
            color=PALETTE[j],
        )
    if chance:
        for i, k in enumerate(ks):
            c = chance.get(f"R@{k}")
            if c is None:
                continue
            ax.hlines(
                c,
                i - 2 * width * 0.6,
                i + 2 * width * 0.6,
                colors="black",
                linestyles="--",
                linewidth=1.2,
                label=chance_label if i == 0 else None,
            )
    ax.set_xticks(np.arange(len(ks)), [f"R@{k}" for k in ks])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("recall")
    ax.set_title(f"retrieval on the held-out split ({run})")
    ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return footer(fig, provenance, smoke=smoke, width=110)


def _err(a: float | None, b: float | None) -> float:
    """A non-negative error-bar length ``a - b`` (0 when either end is missing or NaN)."""
    if a is None or b is None or a != a or b != b:
        return 0.0
    return max(0.0, float(a) - float(b))


def classification(
    rows: Sequence[Mapping[str, object]],
    *,
    title: str,
    provenance: str | None = None,
    smoke: bool = False,
) -> Figure:
    """Accuracy and macro-F1 per dataset with CIs, the uniform-guess chance level and the majority baseline.

    ``rows``: ``{"name", "accuracy", "accuracy_ci" (lo, hi) | None, "macro_f1", "macro_f1_ci",
    "chance": {"accuracy_uniform", "macro_f1_uniform", "accuracy_majority", "macro_f1_majority"}}``.
    """
    metrics = [("accuracy", "accuracy"), ("macro_f1", "macro-F1")]
    fig = _fig(max(5.0, 2.6 * len(rows) + 2), 3.4)
    ax = fig.add_subplot()
    width = 0.36
    for j, (key, label) in enumerate(metrics):
        vals, lo, hi = [], [], []
        for r in rows:
            v = r.get(key)
            vals.append(float(v) if isinstance(v, int | float) else np.nan)
            ci = r.get(f"{key}_ci")
            if isinstance(ci, tuple | list) and len(ci) == 2:
                lo.append(_err(vals[-1], ci[0]))
                hi.append(_err(ci[1], vals[-1]))
            else:
                lo.append(0.0)
                hi.append(0.0)
        x = np.arange(len(rows)) + (j - 0.5) * width
        ax.bar(x, vals, width, yerr=[lo, hi], capsize=3, color=PALETTE[j], label=f"{label} (95 % CI)")
        for i, r in enumerate(rows):
            chance = r.get("chance")
            if not isinstance(chance, Mapping):
                continue
            for which, style, name in (
                ("uniform", "--", "chance: uniform random guess"),
                ("majority", ":", "baseline: majority class"),
            ):
                c = chance.get(f"{key}_{which}")
                if c is None:
                    continue
                ax.hlines(
                    float(c),
                    x[i] - width / 2,
                    x[i] + width / 2,
                    colors="black",
                    linestyles=style,
                    linewidth=1.4,
                    label=name if (i == 0 and j == 0) else None,
                )
    ax.set_xticks(np.arange(len(rows)), [str(r.get("name")) for r in rows], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score")
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return footer(fig, provenance, smoke=smoke, width=110)


def accuracy_bars(
    rows: Sequence[tuple[str, float | None, tuple[float, float]]],
    *,
    chance: float,
    majority: float | None = None,
    title: str,
    provenance: str | None = None,
    smoke: bool = False,
) -> Figure:
    """Accuracies (name, value, (ci low, ci high)) as bars with CIs, the chance line and the majority baseline."""
    fig = _fig(max(5.0, 0.9 * len(rows) + 2), 3.2)
    ax = fig.add_subplot()
    x = np.arange(len(rows))
    vals = [float(v) if v is not None else np.nan for _, v, _ in rows]
    lo = [_err(v, ci[0]) for v, (_, _, ci) in zip(vals, rows, strict=True)]
    hi = [_err(ci[1], v) for v, (_, _, ci) in zip(vals, rows, strict=True)]
    ax.bar(x, vals, 0.6, yerr=[lo, hi], capsize=3, color=PALETTE[0], label="accuracy (95 % CI)")
    ax.axhline(
        chance,
        color="black",
        linestyle="--",
        linewidth=1.2,
        label=f"chance: uniform random guess ({chance:.2f})",
    )
    if majority is not None and abs(majority - chance) > 1e-9:
        ax.axhline(
            majority,
            color="black",
            linestyle=":",
            linewidth=1.2,
            label=f"baseline: majority class ({majority:.2f})",
        )
    ax.set_xticks(x, [name for name, _, _ in rows], fontsize=8, rotation=20)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return footer(fig, provenance, smoke=smoke, width=110)


def ablation(
    points: Sequence[Mapping[str, object]],
    runs: Sequence[str],
    *,
    provenance: str | None = None,
    smoke: bool = False,
) -> Figure:
    """One group of bars per benchmark task, one bar per encoder run (the paper's text ablation,
    Figure 1c): ``points`` are ``{"task": label, "run": run, "value": v, "ci": (lo, hi) | None}``."""
    tasks = list(dict.fromkeys(str(p["task"]) for p in points))
    fig = _fig(max(6.5, 1.1 * len(tasks) + 2.5), 3.8)
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(runs))
    for j, run in enumerate(runs):
        vals, lo, hi = [], [], []
        for t in tasks:
            p = next((q for q in points if q["task"] == t and q["run"] == run), None)
            v = float(p["value"]) if p is not None and p["value"] is not None else np.nan  # type: ignore[arg-type]
            ci = p.get("ci") if p is not None else None
            vals.append(v)
            lo.append(_err(v, ci[0]) if ci else 0.0)  # type: ignore[index]
            hi.append(_err(ci[1], v) if ci else 0.0)  # type: ignore[index]
        x = np.arange(len(tasks)) + (j - (len(runs) - 1) / 2) * width
        ax.bar(x, vals, width, yerr=[lo, hi], capsize=2, label=run, color=PALETTE[j % len(PALETTE)])
    ax.set_xticks(np.arange(len(tasks)))
    ax.set_xticklabels([textwrap.fill(t, 16) for t in tasks], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (95 % CI)")
    ax.set_title("Encoders per text variant on every benchmark task")
    ax.legend(fontsize=7, ncol=min(3, len(runs)), loc="upper right")
    return footer(fig, provenance, smoke=smoke)
