"""Reading a run's outputs for the reports: one function per stage, ``None`` when a stage did not run.

Everything here is read-only and tolerant of absent stages: a report built on a results directory
that stops after ``enrich`` (no filter, shards, encoders...) must still render, saying which
sections were not run.  Paths stored in the tables (``crop_path``, ``image_path``) are relative to
the workflow directory, given as ``workdir``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import yaml

from pmcflow import layout as L

if TYPE_CHECKING:
    from pmcflow.encoders.train import TrainSettings


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
    StageSpec("list", L.counts("list"), "article versions", "article versions"),
    StageSpec("acquire", L.counts("acquire"), "article versions", "article versions"),
    StageSpec("parse", L.counts("parse"), "articles", "figures", "figures"),
    StageSpec("decompose", L.counts("decompose"), "figures", "subfigures", "n_subfigures"),
    StageSpec("enrich", L.counts("enrich"), "subfigures", "subfigures"),
    StageSpec("filter", L.counts("filter"), "subfigures", "subfigures"),
    StageSpec("shard", L.counts("shard"), "subfigures", "samples"),
)

# Every stage's merged rejections; acquire's media files (their article kept) besides.
REJECTION_FILES: dict[str, tuple[str, ...]] = {s.stage: (L.rejections(s.stage),) for s in STAGES}
REJECTION_FILES["acquire"] += (L.stage_file("acquire", L.MEDIA_REJECTIONS),)


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
        config: str | Mapping[str, Any] | None = None,
        workdir: str = ".",
        run_name: str | None = None,
    ) -> Results:
        """``results_dir`` wins; else ``paths.results`` of the config; else ``results``.

        ``config``: a config file, or a config mapping: the report rules pass the sections a report
        reads, so what it says never depends on which other jobs happened to finish first."""
        wd = Path(workdir).resolve()
        cfg: dict[str, Any] = {}
        if isinstance(config, Mapping):
            cfg = dict(config)
        elif config:
            cpath = Path(config) if Path(config).is_absolute() else wd / config
            cfg = yaml.safe_load(cpath.read_text(encoding="utf-8")) or {}
        res = results_dir or (cfg.get("paths") or {}).get("results") or "results"
        rpath = Path(res) if Path(res).is_absolute() else wd / res
        run = run_name
        if run is None and cfg.get("train"):
            from pmcflow.runs import encoder_runs as configured_runs

            run = ",".join(configured_runs(cfg["train"]))
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


# --------------------------------------------------------------------------------------------
# Which stages ran: the pipeline stages above plus the model stages
# --------------------------------------------------------------------------------------------
# Model stages (not in the counts funnel) and the file that marks each as run.
MODEL_STAGES: dict[str, str] = {
    "synth": L.SYNTH_COUNTS.format(split="train"),
    "detector training": L.DETECTOR_TRAIN,
    "detector evaluation": L.DETECTOR_EVAL,
    "encoder training": L.shown(L.encoder_file(L.ENCODER_TRAIN)),
    "encoder evaluation": L.shown(L.evaluation_file(L.evaluation_dir(), "metrics")),
}
ALL_STAGES: tuple[str, ...] = tuple(s.stage for s in STAGES) + tuple(MODEL_STAGES)


@dataclass(frozen=True)
class StageStatus:
    """Whether a stage ran and, only if it did, what it produced."""

    stage: str
    ran: bool
    summary: str = ""  # its numbers; empty when it did not run
    reason: str = ""  # why it did not run, or what is wrong with its numbers
    warning: bool = False  # ran, but its numbers disagree with the stage before it


def disabled_reason(res: Results, stage: str) -> str | None:
    """Why ``stage`` counts as not run although files of it may exist; ``None`` otherwise.

    From the config when the report was given one (``detector.train: false``), else from the
    results themselves: a detector evaluation that scored no ``<backend>-trained`` detector means
    this run trained none, so a ``detector/model/train.json`` beside it is from an earlier run.
    """
    cfg = res.config or {}
    if stage == "detector training":
        if (cfg.get("detector") or {}).get("train") is False:
            return "disabled in the config (detector.train: false)"
        ev = detector_eval(res)
        if ev is not None and not any(d.endswith("-trained") for d in ev.get("detectors") or {}):
            return "this run's detector evaluation scored no trained detector (detector.train off)"
    return None


def _stage_file(res: Results, stage: str) -> str:
    rel = next((s.counts for s in STAGES if s.stage == stage), None) or MODEL_STAGES[stage]
    return rel.replace("<run>", res.run_name or "<run>")


def stage_status(res: Results, stages: Sequence[str] | None = None) -> list[StageStatus]:
    """One status per stage (default: the pipeline stages), in the order given.

    A stage ran when its marker file exists (``counts.json`` for the pipeline stages, see
    :data:`MODEL_STAGES` for the others) and the config, when known, does not turn it off; outputs
    left by an earlier run of a stage the config now disables are not counted as run.  A pipeline
    stage whose input count differs from what the stage before it passed on gets a warning: its
    counts and its upstream's come from different runs.
    """
    names = list(stages) if stages is not None else [s.stage for s in STAGES]
    unknown = sorted(set(names) - set(ALL_STAGES))
    if unknown:
        raise ValueError(f"unknown stages {unknown}; known: {list(ALL_STAGES)}")
    counts = {c.stage: c for c in stage_counts(res)}
    order = [s.stage for s in STAGES]
    out: list[StageStatus] = []
    for name in names:
        rel = _stage_file(res, name)
        off = disabled_reason(res, name)
        if off is not None:
            left = " (outputs from an earlier run ignored)" if res.path(rel).exists() else ""
            out.append(StageStatus(name, False, reason=off + left))
            continue
        if name in counts:
            c = counts[name]
            summary = f"{c.n_in:,} {c.unit_in} in, {c.kept:,} kept"
            if c.n_rejected:
                summary += f", {c.n_rejected:,} rejected"
            if c.out != c.kept or c.unit_out != c.unit_in:
                summary += f" → {c.out:,} {c.unit_out} passed on"
            i = order.index(name)
            up = counts.get(order[i - 1]) if i > 0 else None
            if up is not None and up.out != c.n_in:
                out.append(
                    StageStatus(
                        name,
                        True,
                        summary,
                        f"takes {c.n_in:,} {c.unit_in} but {up.stage} passed on {up.out:,}: "
                        "the two come from different runs (stale outputs?)",
                        warning=True,
                    )
                )
            else:
                out.append(StageStatus(name, True, summary))
            continue
        if name in order:
            out.append(StageStatus(name, False, reason=f"no {rel}"))
            continue
        summary = _model_stage_summary(res, name)
        if summary is None:
            out.append(StageStatus(name, False, reason=f"no {rel}"))
            continue
        stale = _stale_evaluation(res) if name == "encoder evaluation" else ""
        out.append(StageStatus(name, True, summary, stale, warning=bool(stale)))
    return out


def _stale_evaluation(res: Results) -> str:
    """A warning when an evaluation scored another checkpoint than its run's training produced."""
    msgs = []
    for run in evaluation_runs(res):
        ev = evaluation_json(res, run) or {}
        path = res.path(L.encoder_file(L.ENCODER_TRAIN, run))
        if not path.is_file() or not ev.get("checkpoint"):
            continue
        trained = _read_json(path).get("checkpoint")
        if trained and trained != ev["checkpoint"]:
            msgs.append(
                f"{run}: evaluated {ev['checkpoint']}, but training wrote {trained} (evaluation from an earlier run?)"
            )
    return "; ".join(msgs)


def _model_stage_summary(res: Results, stage: str) -> str | None:
    """What a model stage produced, or ``None`` when it did not run."""
    if stage == "synth":
        parts = []
        for split in ("train", "val", "holdout"):
            path = res.path(L.SYNTH_COUNTS.format(split=split))
            if path.is_file():
                parts.append(f"{split} {int(_read_json(path).get('kept', 0)):,}")
        return ("rendered figures: " + ", ".join(parts)) if parts else None
    if stage == "detector training":
        tr = detector_train(res)
        if tr is None:
            return None
        params = tr.get("params") or {}
        epochs = params.get("epochs", len(tr.get("history") or []) or None)
        return f"{tr.get('backend')}" + (f", {epochs} epochs" if epochs is not None else "")
    if stage == "detector evaluation":
        ev = detector_eval(res)
        if ev is None:
            return None
        dets = ev.get("detectors") or {}
        sets = sorted({s for rec in dets.values() for s in (rec.get("sets") or {})})
        return f"{len(dets)} detector(s) × {len(sets)} set(s): {', '.join(sets)}"
    if stage == "encoder training":
        runs = encoder_runs(res)
        if not runs:
            return None
        items = []
        for run in runs:
            tr = encoder_train(res, run)
            items.append(f"{run}: {tr.get('model')}, {tr.get('n_train')} pairs")
        return "; ".join(items)
    if stage == "encoder evaluation":
        runs = evaluation_runs(res)
        if not runs:
            return None
        items = []
        for run in runs:
            ev = evaluation_json(res, run) or {}
            n = (ev.get("retrieval") or {}).get("n_pairs")
            items.append(f"{run}: split {ev.get('split')}" + (f", {n} pairs" if n else ""))
        return "; ".join(items)
    raise ValueError(stage)


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
            if rel.endswith(L.MEDIA_REJECTIONS):
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
def _chunk_tables(res: Results, template: str) -> pl.DataFrame | None:
    """Every chunk's table of a per-chunk ``template`` (pmcflow.layout), as one frame."""
    files = sorted(res.results_dir.glob(L.chunk_glob(template)))
    if not files:
        return None
    return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")


def articles(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, L.ARTICLES)


def figures(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, L.FIGURES)


def subfigures(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, L.SUBFIGURES)


def enriched(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, L.ENRICHED)


def dataset(res: Results) -> pl.DataFrame | None:
    return _chunk_tables(res, L.DATASET)


def final_subfigures(res: Results) -> tuple[str, pl.DataFrame] | None:
    """The most processed subfigure table that exists: filter's dataset, else enrich's table."""
    for stage, loader in (("filter", dataset), ("enrich", enriched)):
        df = loader(res)
        if df is not None:
            return stage, df
    return None


def shard_manifest(res: Results) -> dict[str, Any] | None:
    path = res.path(L.SHARD_MANIFEST)
    return _read_json(path) if path.is_file() else None


def shard_index(res: Results) -> pl.DataFrame | None:
    path = res.path(L.SHARD_INDEX)
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


# --------------------------------------------------------------------------------------------
# Model-tokenizer lengths: what the configured text tower reads, and what it cuts off
# --------------------------------------------------------------------------------------------
CLIP_BPE = "open_clip SimpleTokenizer (CLIP BPE)"


@dataclass
class TextTokenizer:
    """The configured encoder's tokenizer as the report uses it."""

    model: str  # the train config's model (shipped name, open_clip name, hf-hub:..., local-dir:...)
    source: str  # where the model name came from
    name: str  # what actually counts the tokens
    context_length: int  # the text tower's context length (tokens, special tokens included)
    count: Callable[[str], int]  # tokens of one text, special tokens included, before truncation
    fallback: str | None = None  # why CLIP BPE stands in for the model's own tokenizer


def train_config(res: Results) -> TrainSettings | None:
    """The config's ``train`` section as the train stage resolves it (preset and defaults applied),
    or None without one (or when it does not resolve)."""
    from pmcflow import runs
    from pmcflow.encoders import train as TR

    train_cfg = res.config.get("train") if isinstance(res.config.get("train"), dict) else None
    if train_cfg is None:
        return None
    try:  # the first run's settings: without the workflow keys (run, variants), its variant applied
        settings = runs.run_settings(train_cfg, runs.encoder_runs(train_cfg)[0])
        return TR.TrainSettings.from_section({k: v for k, v in settings.items() if v is not None})
    except (TR.TrainError, runs.RunError):
        return None


def configured_model(res: Results) -> tuple[str, str]:
    """(train model, where it came from): the config's ``train`` section (its preset applied), else
    the model of the first encoder run that trained, else the train stage's default."""
    from pmcflow.encoders import train as TR

    cfg = train_config(res)
    if cfg is not None:
        return str(cfg.model), "config train.model"
    for run in encoder_runs(res):
        model = encoder_train(res, run).get("model")
        if model:
            return str(model), L.encoder_file(L.ENCODER_TRAIN, run)
    return str(TR.DEFAULTS["model"]), "train stage default"


def _simple_tokenizer(context_length: int) -> Any:
    from open_clip.tokenizer import SimpleTokenizer

    return SimpleTokenizer(context_length=context_length)


def _hf_count(tok: Any) -> Callable[[str], int]:
    def count(text: str) -> int:
        return len(tok(text, add_special_tokens=True, truncation=False, verbose=False)["input_ids"])

    return count


def _bpe_count(tok: Any) -> Callable[[str], int]:
    return lambda text: len(tok.encode(text)) + 2  # + start and end of text, as open_clip adds them


def text_tokenizer(res: Results) -> TextTokenizer:
    """The tokenizer of the configured encoder (offline): a shipped or ``local-dir:`` config's text
    tower (CLIP BPE, or its Hugging Face tokenizer from a package or the local HF cache), or
    ``open_clip.get_tokenizer`` for other names.  A tokenizer that cannot be had offline is replaced
    by CLIP BPE at the model's context length, and ``fallback`` says so."""
    from pmcflow.encoders import model as MD

    model, source = configured_model(res)
    text_cfg: dict[str, Any] | None = None
    cfg_path: Path | None = None
    if model in MD.shipped_models():
        from importlib import resources

        cfg_path = Path(
            str(resources.files("pmcflow") / "data" / "openclip" / model / "open_clip_config.json")
        )
    elif model.startswith(MD.LOCAL_DIR):
        cfg_path = Path(model[len(MD.LOCAL_DIR) :]) / "open_clip_config.json"
    if cfg_path is not None and cfg_path.is_file():
        text_cfg = dict(_read_json(cfg_path)["model_cfg"].get("text_cfg") or {})
    if text_cfg is not None:
        ctx = int(text_cfg.get("context_length") or 77)
        hf_name = text_cfg.get("hf_tokenizer_name")
        if not hf_name:
            return TextTokenizer(model, source, CLIP_BPE, ctx, _bpe_count(_simple_tokenizer(ctx)))
        try:
            if str(hf_name).startswith(MD.PKG_PREFIX):
                hf_name = MD.resolve_pkg(str(hf_name))
            from transformers import AutoTokenizer

            hf = AutoTokenizer.from_pretrained(str(hf_name), local_files_only=True)
            return TextTokenizer(model, source, f"Hugging Face {Path(str(hf_name)).name}", ctx, _hf_count(hf))
        except Exception as exc:  # noqa: BLE001 - not cached / not installed: say so, use CLIP BPE
            why = f"{hf_name} is not available offline ({type(exc).__name__})"
    else:
        try:
            import open_clip

            tok = open_clip.get_tokenizer(model)
            ctx = int(getattr(tok, "context_length", None) or 77)
            from open_clip.tokenizer import SimpleTokenizer

            if isinstance(tok, SimpleTokenizer) and tok.reduction_fn is None:
                return TextTokenizer(model, source, CLIP_BPE, ctx, _bpe_count(tok))
            inner = getattr(tok, "tokenizer", None)
            if inner is not None and callable(inner):
                return TextTokenizer(model, source, f"{type(tok).__name__} of {model}", ctx, _hf_count(inner))
            why = f"{type(tok).__name__} of {model} cannot count untruncated tokens"
        except Exception as exc:  # noqa: BLE001 - hf-hub tokenizer not cached, unknown name
            why = f"the tokenizer of {model} is not available offline ({type(exc).__name__}: {exc})"
            ctx = 77
    return TextTokenizer(
        model, source, CLIP_BPE, ctx, _bpe_count(_simple_tokenizer(ctx)),
        fallback=f"{why}; CLIP BPE counts stand in for it, against the model's context length {ctx}",
    )  # fmt: skip


def sample_texts(res: Results, max_samples: int | None = 5000, seed: int = 0) -> dict[str, Any] | None:
    """The texts of the shards' samples: ``{"fields": {field: [text, ...]}, "txt": [...],
    "train": [...] | None, "n_samples": N, "n_used": n, "source": ...}``, or None without a subfigure table.

    Per field: what the sample's ``<key>.<field>.txt`` member holds (:func:`pmcflow.shard.field_text`;
    "" when null).  ``txt``: the ``.txt`` open_clip reads (the shard index's
    ``text``; before sharding, composed from the ``shard`` config).  ``train``: the load-time
    composition when ``train.text_fields`` is set.  At most ``max_samples`` samples, a seeded
    subset stable per subfigure (None: all).
    """
    from pmcflow import schema as S
    from pmcflow import shard as SH

    final = final_subfigures(res)
    if final is None:
        return None
    stage, df = final
    index = shard_index(res)
    source = f"{stage} subfigure table"
    if index is not None and "subfigure_uid" in df.columns:
        df = df.join(
            index.select("subfigure_uid", pl.col("text").alias("_txt")), on="subfigure_uid", how="inner"
        )
        source += f" joined to {L.SHARD_INDEX} (the sharded samples)"
    n_samples = df.height
    if max_samples is not None and df.height > max_samples and "subfigure_uid" in df.columns:
        df = stable_order(df, "subfigure_uid", seed).head(max_samples)
    rows = df.to_dicts()
    try:
        shard_cfg = SH.ShardSettings.from_section(
            res.config.get("shard") if isinstance(res.config.get("shard"), dict) else None
        )
    except SH.ShardConfigError:
        shard_cfg = SH.ShardSettings.from_section(None)
    fields = {f: [SH.field_text(r.get(f)) for r in rows] for f in S.SAMPLE_TEXT_FIELDS}
    if "_txt" in df.columns:
        txt = [str(r["_txt"] or "") for r in rows]
    else:
        args = (shard_cfg.text_fields, shard_cfg.text_separator, shard_cfg.text_max_chars)
        txt = [SH.compose_text(r, *args) for r in rows]
    tcfg = train_config(res)
    train_fields = tcfg.text_fields if tcfg is not None else None
    train = None
    if train_fields:  # what pmcflow.encoders.launch composes from the members at load time
        sep = str(tcfg.text_separator)
        train = [SH.join_texts([fields[f][i] for f in train_fields], sep) for i in range(len(rows))]
    return {
        "fields": fields,
        "txt": txt,
        "txt_fields": list(shard_cfg.text_fields),
        "train": train,
        "train_fields": list(train_fields) if train_fields else None,
        "n_samples": n_samples,
        "n_used": len(rows),
        "source": source,
    }


def truncation(lengths: Sequence[int], context_length: int) -> dict[str, Any]:
    """Percentiles of token lengths and how many exceed ``context_length`` (the tokenizer cuts them)."""
    vals = sorted(int(v) for v in lengths)
    n = len(vals)
    if not n:
        return {"n": 0, "truncated": 0, "share_truncated": None}

    def q(p: float) -> int:
        return vals[min(n - 1, int(p * n))]

    n_trunc = sum(1 for v in vals if v > context_length)
    return {
        "n": n,
        "median": q(0.5),
        "p90": q(0.9),
        "p99": q(0.99),
        "max": vals[-1],
        "truncated": n_trunc,
        "share_truncated": n_trunc / n,
    }


def tokenizer_lengths(
    res: Results, max_samples: int | None = 5000, tokenizer: TextTokenizer | None = None
) -> dict[str, Any] | None:
    """Model-token lengths per text (non-empty texts only) with the configured tokenizer:
    ``{"tokenizer": TextTokenizer, "texts": sample_texts(...), "lengths": {label: [n, ...]},
    "empty": {label: n_empty}}``; None without a subfigure table."""
    texts = sample_texts(res, max_samples)
    if texts is None:
        return None
    tok = tokenizer or text_tokenizer(res)
    labelled: dict[str, list[str]] = {"txt": texts["txt"]}
    if texts["train"] is not None:
        labelled["train text"] = texts["train"]
    labelled.update(texts["fields"])
    lengths: dict[str, list[int]] = {}
    empty: dict[str, int] = {}
    for label, items in labelled.items():
        lengths[label] = [tok.count(t) for t in items if t]
        empty[label] = sum(1 for t in items if not t)
    return {"tokenizer": tok, "texts": texts, "lengths": lengths, "empty": empty}


def stable_order(df: pl.DataFrame, key: str, seed: int = 0) -> pl.DataFrame:
    """Rows in a seeded pseudo-random order that depends only on each row's key (the project's one
    seeded hash, :func:`pmcflow.seeding.seed_digest`)."""
    from pmcflow.seeding import seed_digest

    def h(v: str) -> str:
        return seed_digest(seed, "report.order", v).hex()

    return (
        df.with_columns(pl.col(key).map_elements(h, return_dtype=pl.String).alias("_h")).sort("_h").drop("_h")
    )


# --------------------------------------------------------------------------------------------
# Detector
# --------------------------------------------------------------------------------------------
def detector_eval(res: Results) -> dict[str, Any] | None:
    path = res.path(L.DETECTOR_EVAL)
    return _read_json(path) if path.is_file() else None


def detector_train(res: Results) -> dict[str, Any] | None:
    path = res.path(L.DETECTOR_TRAIN)
    return _read_json(path) if path.is_file() else None


def fixed_threshold(ev: dict[str, Any]) -> float | None:
    """The score threshold eval.json reports F1 at (``detector.eval.score_threshold``), else None."""
    for rec in (ev.get("detectors") or {}).values():
        for m in (rec.get("sets") or {}).values():
            threshold = (m.get("at_fixed") or {}).get("threshold")
            if threshold is not None:
                return float(threshold)
    return None


def _fixed_column(threshold: float | None) -> str:
    return f"F1 @ score {threshold:g}" if threshold is not None else "F1 @ fixed score"


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
                    _fixed_column(fixed.get("threshold")): fixed.get("f1"),
                }
            )
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def pr_curves(res: Results, ev: dict[str, Any]) -> dict[tuple[str, str], pl.DataFrame]:
    """PR curve points per (detector, set) from ``pr_<detector>_<set>.parquet`` (else eval.json)."""
    out: dict[tuple[str, str], pl.DataFrame] = {}
    for det, rec in sorted((ev.get("detectors") or {}).items()):
        for eval_set, m in sorted((rec.get("sets") or {}).items()):
            path = res.path(L.detector_pr(det, eval_set))
            if path.is_file():
                out[(det, eval_set)] = pl.read_parquet(path)
            elif m.get("pr_curve"):
                out[(det, eval_set)] = pl.DataFrame(m["pr_curve"])
    return out


# --------------------------------------------------------------------------------------------
# Encoders and their evaluation
# --------------------------------------------------------------------------------------------
def _runs(res: Results, folder: str, marker: str) -> list[str]:
    """Run folders under ``folder`` holding ``marker``: those ``run_name`` lists (comma-separated,
    in that order) when it is set, else every one found."""
    base = res.path(folder)
    runs = sorted(p.parent.name for p in base.glob(f"*/{marker}")) if base.is_dir() else []
    if res.run_name:
        found = set(runs)
        runs = [r for r in res.run_name.split(",") if r in found]
    return runs


def encoder_runs(res: Results) -> list[str]:
    """Runs with a ``train.json`` (only ``run_name`` when it is set)."""
    return _runs(res, L.ENCODERS, L.ENCODER_TRAIN)


def evaluation_runs(res: Results) -> list[str]:
    """Runs with a ``metrics.parquet`` (only ``run_name`` when it is set)."""
    return _runs(res, L.EVALUATION, L.EVALUATION_FILES["metrics"])


BASELINE = "baseline:"  # how a baseline's name is shown beside the runs' names


def baselines(res: Results) -> list[str]:
    """Evaluated baselines (``evaluation/baselines/<name>/metrics.parquet``): the config's
    ``evaluate.baselines`` in its order when the config is known, else every one found."""
    base = res.path(L.BASELINES)
    marker = L.EVALUATION_FILES["metrics"]
    found = sorted(p.parent.name for p in base.glob(f"*/{marker}")) if base.is_dir() else []
    configured = ((res.config or {}).get("evaluate") or {}).get("baselines")
    if isinstance(configured, Mapping):
        return [b for b in configured if b in found]
    return found


def evaluated_models(res: Results) -> list[str]:
    """Every evaluated model: the runs, then the baselines as ``baseline:<name>``."""
    return [*evaluation_runs(res), *(BASELINE + b for b in baselines(res))]


def evaluation_dir(name: str) -> str:
    """The results folder of an evaluated model (a run, or ``baseline:<name>``)."""
    if name.startswith(BASELINE):
        return L.baseline_dir(name[len(BASELINE) :])
    return L.evaluation_dir(name)


def encoder_train(res: Results, run: str) -> dict[str, Any]:
    return _read_json(res.path(L.encoder_file(L.ENCODER_TRAIN, run)))


def encoder_steps(res: Results, run: str) -> pl.DataFrame | None:
    path = res.path(L.encoder_file(L.ENCODER_STEPS, run))
    return pl.read_parquet(path) if path.is_file() else None


def evaluation_metrics(res: Results, run: str) -> pl.DataFrame:
    return pl.read_parquet(res.path(L.evaluation_file(evaluation_dir(run), "metrics")))


def evaluation_json(res: Results, run: str) -> dict[str, Any] | None:
    path = res.path(L.evaluation_file(evaluation_dir(run), "metrics_json"))
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


def retrieval_ranks(res: Results, run: str) -> pl.DataFrame | None:
    path = res.path(L.evaluation_file(evaluation_dir(run), "ranks"))
    return pl.read_parquet(path) if path.is_file() else None


def _split_texts(shards_dir: Path, split: str, keys: set[str]) -> dict[str, str]:
    """``{key: text}`` of the ``.txt`` members of a split's WebDataset shards (images not read)."""
    import tarfile

    manifest = _read_json(shards_dir / L.MANIFEST)
    out: dict[str, str] = {}
    for shard in ((manifest.get("splits") or {}).get(split) or {}).get("shards") or []:
        with tarfile.open(shards_dir / split / str(shard["name"])) as tar:
            for member in tar:
                if not member.isfile() or not member.name.endswith(".txt"):
                    continue
                key = member.name[: -len(".txt")]
                if key in keys:
                    fh = tar.extractfile(member)
                    if fh is not None:
                        out[key] = fh.read().decode("utf-8")
    return out


def retrieval_matches(res: Results, run: str) -> tuple[list[int] | None, str]:
    """How many candidates match each retrieval query (for the chance level), and how that is known.

    The evaluation counts samples with identical texts as matches of each other
    (``group_identical_texts``).  With one text group per pair every query has one match; else the
    texts are read back from the evaluated split's shards (``.txt`` members only) and grouped as the
    evaluation grouped them.  ``None`` when neither works (the shards are gone).
    """
    ev = evaluation_json(res, run) or {}
    ret = ev.get("retrieval") or {}
    n_pairs, n_groups = ret.get("n_pairs"), ret.get("n_text_groups")
    grouped = bool((ev.get("config") or {}).get("group_identical_texts", True))
    if not n_pairs:
        return None, "no retrieval pairs recorded"
    if not grouped or (n_groups is not None and int(n_groups) == int(n_pairs)):
        why = "texts not grouped" if not grouped else "every text distinct"
        return [1] * int(n_pairs), f"one matching candidate per query ({why})"
    ranks = retrieval_ranks(res, run)
    if ranks is None or ranks.height != int(n_pairs):
        return None, "retrieval_ranks.parquet missing or of another size"
    keys = ranks["key"].to_list()
    candidates = [res.path(L.SHARDS)]
    trained = res.path(L.encoder_file(L.ENCODER_TRAIN, run))
    if trained.is_file() and _read_json(trained).get("shards_dir"):
        candidates.append(res.resolve(str(_read_json(trained)["shards_dir"])))
    for shards in candidates:
        if not (shards / L.MANIFEST).is_file():
            continue
        try:
            texts = _split_texts(shards, str(ev.get("split") or "test"), set(keys))
        except (OSError, ValueError, KeyError):
            continue
        if len(texts) != len(keys):
            continue
        per_text: dict[str, int] = {}
        for k in keys:
            per_text[texts[k]] = per_text.get(texts[k], 0) + 1
        if n_groups is not None and len(per_text) != int(n_groups):
            continue  # not the texts the evaluation saw
        return [per_text[texts[k]] for k in keys], (
            f"{len(per_text):,} distinct texts among {len(keys):,} pairs, read from the shards: "
            "a query matches every sample with its text"
        )
    return None, "the evaluated shards are not readable here"
