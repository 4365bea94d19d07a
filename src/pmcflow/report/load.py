"""Reading a run's outputs for the reports: one function per stage, ``None`` when a stage did not run.

Everything here is read-only and tolerant of absent stages: a report built on a results directory
that stops after ``enrich`` (no filter, shards, encoders...) must still render, saying which
sections were not run.  Paths stored in the tables (``crop_path``, ``image_path``) are relative to
the workflow directory, given as ``workdir``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml


@dataclass(frozen=True)
class StageSpec:
    """Where a stage's counts live and what it counts."""

    stage: str
    counts: str  # relative to the results directory
    unit_in: str
    unit_out: str
    out_key: str | None = None  # key of ``extra`` holding the number of items passed on, if not ``kept``


# Pipeline order.  ``out`` is what the next stage receives: parse keeps articles but passes on figures,
# decompose keeps figures but passes on subfigures.
STAGES: tuple[StageSpec, ...] = (
    StageSpec("list", "listing/counts.json", "article versions", "article versions"),
    StageSpec("acquire", "acquire/counts.json", "article versions", "article versions"),
    StageSpec("parse", "parse/counts.json", "articles", "figures", "figures"),
    StageSpec("decompose", "decompose/counts.json", "figures", "subfigures", "n_subfigures"),
    StageSpec("enrich", "enrich/counts.json", "subfigures", "subfigures"),
    StageSpec("filter", "filter/counts.json", "subfigures", "subfigures"),
    StageSpec("shard", "shards/counts.json", "subfigures", "samples"),
)

REJECTION_FILES: dict[str, tuple[str, ...]] = {
    "list": ("listing/rejections.parquet",),
    "acquire": ("acquire/rejections.parquet", "acquire/media_rejections.parquet"),
    "parse": ("parse/rejections.parquet",),
    "decompose": ("decompose/rejections.parquet",),
    "enrich": ("enrich/rejections.parquet",),
    "filter": ("filter/rejections.parquet",),
    "shard": ("shards/rejections.parquet",),
}


@dataclass(frozen=True)
class StageCounts:
    stage: str
    unit_in: str
    unit_out: str
    n_in: int
    kept: int
    out: int
    rejected: dict[str, int]
    extra: dict[str, Any]
    path: Path

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())


@dataclass
class Results:
    """A run's results directory plus the workflow directory its stored paths are relative to."""

    results_dir: Path
    workdir: Path = field(default_factory=Path.cwd)
    run_name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(
        cls,
        results_dir: str | None = None,
        *,
        config: str | None = None,
        workdir: str = ".",
        run_name: str | None = None,
    ) -> Results:
        """``results_dir`` wins; else ``paths.results`` of the config file; else ``results``."""
        wd = Path(workdir).resolve()
        cfg: dict[str, Any] = {}
        if config:
            cpath = Path(config) if Path(config).is_absolute() else wd / config
            cfg = yaml.safe_load(cpath.read_text(encoding="utf-8")) or {}
        res = results_dir or (cfg.get("paths") or {}).get("results") or "results"
        rpath = Path(res) if Path(res).is_absolute() else wd / res
        run = run_name or (cfg.get("train") or {}).get("run")
        return cls(results_dir=rpath, workdir=wd, run_name=run, config=cfg)

    def path(self, rel: str) -> Path:
        return self.results_dir / rel

    def resolve(self, stored: str) -> Path:
        """A path as stored in a table (relative to the workflow directory) on this machine."""
        p = Path(stored)
        return p if p.is_absolute() else self.workdir / p


# --------------------------------------------------------------------------------------------
# Counts and rejections
# --------------------------------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def stage_counts(res: Results) -> list[StageCounts]:
    """Stage-level counts in pipeline order, for the stages that ran."""
    out: list[StageCounts] = []
    for spec in STAGES:
        path = res.path(spec.counts)
        if not path.is_file():
            continue
        rec = _read_json(path)
        extra = dict(rec.get("extra") or {})
        kept = int(rec["kept"])
        passed = extra.get(spec.out_key) if spec.out_key else None
        out.append(
            StageCounts(
                stage=spec.stage,
                unit_in=spec.unit_in,
                unit_out=spec.unit_out,
                n_in=int(rec["in"]),
                kept=kept,
                out=int(passed) if isinstance(passed, int | float) else kept,
                rejected={str(k): int(v) for k, v in (rec.get("rejected") or {}).items()},
                extra=extra,
                path=path,
            )
        )
    return out


def missing_stages(res: Results) -> list[StageSpec]:
    return [spec for spec in STAGES if not res.path(spec.counts).is_file()]


def rejections(res: Results) -> pl.DataFrame:
    """Every rejection row of every stage (``REJECTIONS`` columns + ``file``), one frame.

    Media files rejected by acquire (their article is kept) come from ``media_rejections.parquet``
    and are tagged with stage ``acquire (media)``.
    """
    frames: list[pl.DataFrame] = []
    for stage, rels in REJECTION_FILES.items():
        for rel in rels:
            path = res.path(rel)
            if not path.is_file():
                continue
            df = pl.read_parquet(path)
            if df.height == 0:
                continue
            cols = ["stage", "chunk", "item_id", "pmcid", "reason", "detail"]
            df = df.select(
                [
                    pl.col(c).cast(pl.String) if c in df.columns else pl.lit(None, pl.String).alias(c)
                    for c in cols
                ]
            )
            if rel.endswith("media_rejections.parquet"):
                df = df.with_columns(pl.lit(f"{stage} (media)").alias("stage"))
            else:
                df = df.with_columns(pl.col("stage").fill_null(stage))
            frames.append(df.with_columns(pl.lit(rel).alias("file")))
    if not frames:
        return pl.DataFrame(
            schema={c: pl.String for c in ("stage", "chunk", "item_id", "pmcid", "reason", "detail", "file")}
        )
    # A stage's merged rejections may repeat its upstream's rows (acquire carries the listing's).
    return pl.concat(frames, how="vertical").unique(
        ["stage", "item_id", "reason"], keep="first", maintain_order=True
    )


def rejection_summary(res: Results) -> pl.DataFrame:
    """Per stage and reason: count and one example (item, detail), in pipeline order."""
    rej = rejections(res)
    if rej.height == 0:
        return pl.DataFrame(
            schema={
                "stage": pl.String,
                "reason": pl.String,
                "n": pl.UInt32,
                "example": pl.String,
                "detail": pl.String,
            }
        )
    order = {s.stage: i for i, s in enumerate(STAGES)}
    return (
        rej.sort("item_id")
        .group_by("stage", "reason", maintain_order=True)
        .agg(
            pl.len().alias("n"),
            pl.col("item_id").first().alias("example"),
            pl.col("detail").first().alias("detail"),
        )
        .with_columns(
            pl.col("stage").str.replace(r" \(media\)$", "").replace_strict(order, default=99).alias("_o")
        )
        .sort("_o", "stage", pl.col("n"), descending=[False, False, True])
        .drop("_o")
    )


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------
def _chunk_tables(res: Results, stage_dir: str, name: str) -> pl.DataFrame | None:
    files = sorted(res.path(stage_dir).glob(f"c*/{name}"))
    if not files:
        return None
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")


def articles(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, "parse", "articles.parquet")


def figures(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, "parse", "figures.parquet")


def subfigures(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, "decompose", "subfigures.parquet")


def enriched(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, "enrich", "enriched.parquet")


def dataset(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, "filter", "dataset.parquet")


def final_subfigures(res: Results) -> tuple[str, pl.DataFrame] | None:
    """The most processed subfigure table that exists: filter's dataset, else enrich's table."""
    for stage, loader in (("filter", dataset), ("enrich", enriched)):
        df = loader(res)
        if df is not None:
            return stage, df
    return None


def shard_manifest(res: Results) -> dict[str, Any] | None:
    path = res.path("shards/manifest.json")
    return _read_json(path) if path.is_file() else None


def shard_index(res: Results) -> pl.DataFrame | None:
    path = res.path("shards/index.parquet")
    return pl.read_parquet(path) if path.is_file() else None


# --------------------------------------------------------------------------------------------
# Text lengths
# --------------------------------------------------------------------------------------------
def whitespace_tokens(text: str | None) -> int:
    """The report's token count: whitespace-separated words (no model tokenizer)."""
    return len(text.split()) if text else 0


def token_lengths(res: Results) -> dict[str, list[int]]:
    """Whitespace-token lengths of captions (one per figure), subcaptions and summaries (per subfigure).

    Subcaptions and summaries come from the most processed subfigure table; captions from the
    parsed figures.  Empty summaries (no in-text mention) are left out.
    """
    out: dict[str, list[int]] = {}
    figs = figures(res)
    if figs is not None:
        out["caption"] = [whitespace_tokens(t) for t in figs["caption"].to_list() if t]
    final = final_subfigures(res)
    if final is not None:
        df = final[1]
        out["subcaption"] = [whitespace_tokens(t) for t in df["subcaption"].to_list() if t]
        out["summary"] = [whitespace_tokens(t) for t in df["summary"].to_list() if t]
    return out


def stable_order(df: pl.DataFrame, key: str, seed: int = 0) -> pl.DataFrame:
    """Rows in a seeded pseudo-random order that depends only on each row's key."""

    def h(v: str) -> str:
        return hashlib.sha256(f"{seed}/{v}".encode()).hexdigest()

    return (
        df.with_columns(pl.col(key).map_elements(h, return_dtype=pl.String).alias("_h")).sort("_h").drop("_h")
    )


# --------------------------------------------------------------------------------------------
# Detector
# --------------------------------------------------------------------------------------------
def detector_eval(res: Results) -> dict[str, Any] | None:
    path = res.path("detector/eval/eval.json")
    return _read_json(path) if path.is_file() else None


def detector_train(res: Results) -> dict[str, Any] | None:
    path = res.path("detector/model/train.json")
    return _read_json(path) if path.is_file() else None


def detector_metrics(ev: dict[str, Any]) -> pl.DataFrame:
    """One row per (detector, evaluation set)."""
    rows: list[dict[str, Any]] = []
    for det, rec in sorted((ev.get("detectors") or {}).items()):
        for eval_set, m in sorted((rec.get("sets") or {}).items()):
            fixed = m.get("at_fixed") or {}
            rows.append(
                {
                    "detector": det,
                    "eval set": eval_set,
                    "images": m.get("n_images"),
                    "gt boxes": m.get("n_gt"),
                    "pred boxes": m.get("n_pred"),
                    "mAP": m.get("map"),
                    "mAP@.5": m.get("map50"),
                    "mAP@.75": m.get("map75"),
                    "best F1@.5": m.get("f1"),
                    "at score": m.get("threshold"),
                    "P": m.get("precision"),
                    "R": m.get("recall"),
                    f"F1 @ score {fixed.get('threshold', 0.2):g}": fixed.get("f1"),
                }
            )
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def pr_curves(res: Results, ev: dict[str, Any]) -> dict[tuple[str, str], pl.DataFrame]:
    """PR curve points per (detector, set) from ``pr_<detector>_<set>.parquet`` (else eval.json)."""
    out: dict[tuple[str, str], pl.DataFrame] = {}
    for det, rec in sorted((ev.get("detectors") or {}).items()):
        for eval_set, m in sorted((rec.get("sets") or {}).items()):
            path = res.path(f"detector/eval/pr_{det}_{eval_set}.parquet")
            if path.is_file():
                out[(det, eval_set)] = pl.read_parquet(path)
            elif m.get("pr_curve"):
                out[(det, eval_set)] = pl.DataFrame(m["pr_curve"])
    return out


# --------------------------------------------------------------------------------------------
# Encoders and their evaluation
# --------------------------------------------------------------------------------------------
def _runs(res: Results, folder: str, marker: str) -> list[str]:
    """Run folders under ``folder`` holding ``marker`` (only ``run_name`` when it is set)."""
    base = res.path(folder)
    runs = sorted(p.parent.name for p in base.glob(f"*/{marker}")) if base.is_dir() else []
    if res.run_name:
        runs = [r for r in runs if r == res.run_name]
    return runs


def encoder_runs(res: Results) -> list[str]:
    """Runs with a ``train.json`` (only ``run_name`` when it is set)."""
    return _runs(res, "encoders", "train.json")


def evaluation_runs(res: Results) -> list[str]:
    """Runs with a ``metrics.parquet`` (only ``run_name`` when it is set)."""
    return _runs(res, "evaluation", "metrics.parquet")


def encoder_train(res: Results, run: str) -> dict[str, Any]:
    return _read_json(res.path(f"encoders/{run}/train.json"))


def encoder_steps(res: Results, run: str) -> pl.DataFrame | None:
    path = res.path(f"encoders/{run}/steps.parquet")
    return pl.read_parquet(path) if path.is_file() else None


def evaluation_metrics(res: Results, run: str) -> pl.DataFrame:
    return pl.read_parquet(res.path(f"evaluation/{run}/metrics.parquet"))


def evaluation_json(res: Results, run: str) -> dict[str, Any] | None:
    path = res.path(f"evaluation/{run}/metrics.json")
    return _read_json(path) if path.is_file() else None


# --------------------------------------------------------------------------------------------
# Enrichment quality
# --------------------------------------------------------------------------------------------
def splitter_quality(
    workdir: Path,
    *,
    mode: str = "auto",
    benchmark: str = "benchmarks/results/enrich.json",
    fixture: str = "tests/fixtures/subcaptions/sourcedata_panel_legends_dev.jsonl",
) -> tuple[str, dict[str, Any]] | None:
    """Splitter quality scores and where they come from.

    ``mode``: ``benchmark`` (the stored benchmark result), ``recompute`` (run
    :func:`pmcflow.enrich.evaluate.evaluate_splitter` on the dev fixture now) or ``auto`` (the
    benchmark when present, else recompute).  ``None`` when neither source exists.
    """
    bench = workdir / benchmark
    if mode in ("auto", "benchmark") and bench.is_file():
        rec = _read_json(bench)
        if "quality" in rec:
            return f"{benchmark} (stored benchmark result)", rec["quality"]
    fix = workdir / fixture
    if mode in ("auto", "recompute") and fix.is_file():
        from pmcflow.enrich.evaluate import evaluate_splitter, load_rows

        return f"recomputed now on {fixture}", evaluate_splitter(load_rows(fix))
    return None
