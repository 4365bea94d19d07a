"""Matplotlib figures for the reports (object-oriented API only, no pyplot state between plots)."""

from __future__ import annotations

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

    return plt.figure(figsize=(w, h))


def funnel(counts: Sequence[StageCounts]) -> Figure:
    """Kept and rejected per stage (horizontal stacked bars, log scale) with each stage's unit."""
    fig = _fig(8, 0.55 * len(counts) + 1.2)
    ax = fig.add_subplot()
    labels = [f"{c.stage}\n({c.unit_in})" for c in counts]
    y = np.arange(len(counts))[::-1]
    kept = np.array([c.kept for c in counts], dtype=float)
    rej = np.array([c.n_rejected for c in counts], dtype=float)
    ax.barh(y, kept, color=KEPT, label="kept")
    ax.barh(y, rej, left=kept, color=REJECTED, label="rejected")
    for yi, c in zip(y, counts, strict=True):
        text = f"{c.kept:,} kept" + (f", {c.n_rejected:,} rejected" if c.n_rejected else "")
        if c.out != c.kept:
            text += f" → {c.out:,} {c.unit_out}"
        ax.text(max(c.n_in, 1) * 1.08, yi, text, va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xscale("log")
    top = max([c.n_in for c in counts] + [c.out for c in counts] + [1])
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


def pr_curves(curves: Mapping[tuple[str, str], pl.DataFrame], fixed_threshold: float = 0.2) -> Figure:
    """Precision–recall per evaluation set (one panel each), one line per detector."""
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
            ax.plot(df["recall"], df["precision"], color=color, label=det, linewidth=1.5)
            at = df.filter(pl.col("threshold") >= fixed_threshold)
            if at.height:
                ax.plot(at["recall"][-1], at["precision"][-1], "o", color=color, markersize=5)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("recall (IoU ≥ 0.5)")
        ax.set_ylabel("precision")
        ax.set_title(eval_set, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(f"PR curves (dot: score threshold {fixed_threshold:g})", fontsize=10)
    fig.tight_layout()
    return fig


def history(rows: Sequence[Mapping[str, float]], *, title: str, match: str = "loss") -> Figure | None:
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
    return fig


def decompositions(figs: Sequence[tuple[Path, str, pl.DataFrame]], *, cols: int = 3) -> Figure:
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
            }.get(
                r["label_source"] or "", "#ff7f0e"
            )
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
    return fig


def loss_curves(steps: Mapping[str, pl.DataFrame]) -> Figure:
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
    return fig


def recall_at_k(metrics: pl.DataFrame, run: str) -> Figure:
    """Retrieval Recall@K in both directions with their bootstrap CIs."""
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
            lo.append(row["value"] - row["ci_low"] if row["ci_low"] == row["ci_low"] else 0.0)
            hi.append(row["ci_high"] - row["value"] if row["ci_high"] == row["ci_high"] else 0.0)
        x = np.arange(len(ks)) + (j - 0.5) * width
        ax.bar(x, vals, width, yerr=[lo, hi], capsize=3, label=direction.replace("_", " "), color=PALETTE[j])
    ax.set_xticks(np.arange(len(ks)), [f"R@{k}" for k in ks])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("recall")
    ax.set_title(f"retrieval on the held-out split ({run})")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
