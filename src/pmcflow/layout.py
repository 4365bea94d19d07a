"""Where every output of a run lives under the results folder (``paths.results``), spelled once.

The rules (``rules/*.smk``, through ``rules/common.smk``), ``pmcflow outputs`` and the reports
(:mod:`pmcflow.report.load`) build their paths from here: renaming an output touches this module
and the stage code that writes it, nothing else.  Paths are relative to the results folder, with
``/``; templates keep the rules' wildcards (``{chunk}``, ``{split}``, ``{shard}``, ``{run}``,
``{baseline}``), which :func:`shown` writes as ``<chunk>`` for people::

    listing/                       checkpoint list_articles: listing.parquet, chunks.json,
                                   counts.json, rejections.parquet
    <stage>/<chunk>/               one chunk of acquire, parse, decompose, enrich, filter:
                                   its tables, counts.json, rejections.parquet
    <stage>/counts.json            the stage's summary (<stage>_summary), with rejections.parquet
      acquire/<chunk>/             articles, media_rejections, pending (.parquet); the summary too
      parse/<chunk>/               articles, figures, mentions (.parquet)
      decompose/<chunk>/           subfigures.parquet, crops/
      enrich/<chunk>/              subcaptions.parquet, subcaption_rejections.parquet, enriched.parquet
      filter/<chunk>/              phash.parquet, dataset.parquet
    filter/duplicates.parquet      corpus-wide near-duplicate clusters (find_duplicates)
    synth/<split>/                 rendered figures: shard-<nnnnn>/, annotations.json, records.jsonl, counts.json
    detector/model/                the trained detector: train.json, model.pt, train.txt
    detector/eval/                 eval.json, pr_<detector>_<set>.parquet
    shard_chunks/<chunk>/          one chunk's shards (shard_chunk)
    shards/                        the dataset (shard): <split>/*.tar, <split>/sizes.json,
                                   index.parquet, manifest.json, counts.json, rejections.parquet
    encoders/<run>/                a trained encoder: train.json, steps.parquet, checkpoints
    benchmarks/                    the demo benchmarks (evaluate.build_demo_benchmarks)
    evaluation/<run>/              metrics.parquet, metrics.json, retrieval_ranks.parquet,
                                   robustness.parquet, benchmarks.json, embeddings.npz
    evaluation/baselines/<name>/   the same for a baseline, and its model/
    evaluation/embeddings/         t-SNE / MMD between the evaluated models: mmd.parquet,
                                   tsne.parquet, embeddings.json, tsne/
    reports/<name>.html            the reports

Besides these, ``.stamps/`` holds rerun stamps (:mod:`pmcflow.retry`: bookkeeping, not outputs).
Logs live under ``paths.logs``, downloads under ``paths.resources``: not here.

Standard library only: ``rules/common.smk`` loads this file directly, so the Snakemake process needs
no pmcflow install.
"""

from __future__ import annotations

import re

# Wildcards as the rules name them (rules/common.smk, rules/synth.smk, train.smk, evaluate.smk).
CHUNK = "{chunk}"
SPLIT = "{split}"
SHARD = "{shard}"
RUN = "{run}"
BASELINE = "{baseline}"
CHUNK_GLOB = "c*"  # every chunk folder, for readers that glob (chunk ids are c<6 digits>)

# --------------------------------------------------------------------------------------------
# The pipeline stages: one folder each, per-chunk folders inside for the chunked ones
# --------------------------------------------------------------------------------------------
# Folder of each stage of the counts funnel, in pipeline order (`pmcflow outputs`, the reports).
STAGE_DIRS: dict[str, str] = {
    "list": "listing",
    "acquire": "acquire",
    "parse": "parse",
    "decompose": "decompose",
    "enrich": "enrich",
    "filter": "filter",
    "shard": "shards",
}
CHUNKED = ("acquire", "parse", "decompose", "enrich", "filter")  # per-chunk jobs and a *_summary

COUNTS = "counts.json"  # every stage's `in = kept + rejected` record, per chunk and per stage
REJECTIONS = "rejections.parquet"  # every stage's rejection rows, per chunk and per stage
MEDIA_REJECTIONS = "media_rejections.parquet"  # acquire: media files rejected, article kept
PENDING = "pending.parquet"  # acquire: articles pending a retry (pmcflow.retry)


def stage_file(stage: str, name: str) -> str:
    """``name`` in the folder of ``stage`` (a key of :data:`STAGE_DIRS`)."""
    return f"{STAGE_DIRS[stage]}/{name}"


def chunk_dir(stage: str, chunk: str = CHUNK) -> str:
    return stage_file(stage, chunk)


def chunk_file(stage: str, name: str, chunk: str = CHUNK) -> str:
    """``name`` in one chunk's folder of ``stage`` (default: the ``{chunk}`` wildcard)."""
    return f"{chunk_dir(stage, chunk)}/{name}"


def counts(stage: str) -> str:
    return stage_file(stage, COUNTS)


def rejections(stage: str) -> str:
    return stage_file(stage, REJECTIONS)


def chunk_counts(stage: str, chunk: str = CHUNK) -> str:
    return chunk_file(stage, COUNTS, chunk)


def chunk_rejections(stage: str, chunk: str = CHUNK) -> str:
    return chunk_file(stage, REJECTIONS, chunk)


# list_articles (the checkpoint); counts and rejections: counts("list"), rejections("list")
LISTING = stage_file("list", "listing.parquet")
CHUNKS = stage_file("list", "chunks.json")  # {"chunks": {chunk: {"digest": ...}}}

# acquire_chunk; acquire_summary also merges media_rejections and pending
ACQUIRED = chunk_file("acquire", "articles.parquet")
ACQUIRE_MEDIA_REJECTIONS = chunk_file("acquire", MEDIA_REJECTIONS)
ACQUIRE_PENDING = chunk_file("acquire", PENDING)

# parse_chunk
ARTICLES = chunk_file("parse", "articles.parquet")
FIGURES = chunk_file("parse", "figures.parquet")
MENTIONS = chunk_file("parse", "mentions.parquet")

# decompose_chunk
SUBFIGURES = chunk_file("decompose", "subfigures.parquet")
CROPS = chunk_file("decompose", "crops")  # folder: the subfigure images the tables point to

# enrich_subcaptions, then enrich_chunk
SUBCAPTIONS = chunk_file("enrich", "subcaptions.parquet")
SUBCAPTION_REJECTIONS = chunk_file("enrich", "subcaption_rejections.parquet")
ENRICHED = chunk_file("enrich", "enriched.parquet")

# phash_chunk, find_duplicates, filter_chunk
PHASH = chunk_file("filter", "phash.parquet")
DUPLICATES = stage_file("filter", "duplicates.parquet")
DATASET = chunk_file("filter", "dataset.parquet")

# shard_chunk (one folder per chunk), then shard (the dataset folder)
SHARD_CHUNK = f"shard_chunks/{CHUNK}"
SHARDS = STAGE_DIRS["shard"]
MANIFEST = "manifest.json"  # in a shards folder (this run's, or the one a run trained on)
SHARD_INDEX = f"{SHARDS}/index.parquet"
SHARD_MANIFEST = f"{SHARDS}/{MANIFEST}"

# --------------------------------------------------------------------------------------------
# Model stages
# --------------------------------------------------------------------------------------------
# render_shard (folders), render_merge
SYNTH_SHARD = f"synth/{SPLIT}/shard-{SHARD}"
SYNTH_ANNOTATIONS = f"synth/{SPLIT}/annotations.json"
SYNTH_RECORDS = f"synth/{SPLIT}/records.jsonl"  # one line per figure: its layout and draws
SYNTH_COUNTS = f"synth/{SPLIT}/{COUNTS}"

# train_detector (a folder), evaluate_detector
DETECTOR_MODEL = "detector/model"
DETECTOR_TRAIN = f"{DETECTOR_MODEL}/train.json"  # the training record: backend, checkpoint, params
DETECTOR_WEIGHTS = f"{DETECTOR_MODEL}/model.pt"
DETECTOR_TRAIN_IMAGES = f"{DETECTOR_MODEL}/train.txt"  # the training images, one a line, if listed
DETECTOR_EVAL_DIR = "detector/eval"
DETECTOR_EVAL = f"{DETECTOR_EVAL_DIR}/eval.json"


def detector_pr(detector: str, eval_set: str) -> str:
    """The PR curve of one detector on one evaluation set (beside :data:`DETECTOR_EVAL`)."""
    return f"{DETECTOR_EVAL_DIR}/pr_{detector}_{eval_set}.parquet"


def detector_metrics(detector: str, eval_set: str) -> str:
    """The full metrics of one detector on one evaluation set (beside :data:`DETECTOR_EVAL`)."""
    return f"{DETECTOR_EVAL_DIR}/eval_{detector}_{eval_set}.json"


# train_encoder: one folder per run
ENCODERS = "encoders"
ENCODER_TRAIN = "train.json"  # in the run's folder: the training record
ENCODER_STEPS = "steps.parquet"  # in the run's folder: loss and timing per step


def encoder_dir(run: str = RUN) -> str:
    return f"{ENCODERS}/{run}"


def encoder_file(name: str, run: str = RUN) -> str:
    return f"{encoder_dir(run)}/{name}"


# demo_benchmarks (a folder), evaluate_encoder, evaluate_baseline, compare_embeddings
DEMO_BENCHMARKS = "benchmarks"
EVALUATION = "evaluation"
BASELINES = f"{EVALUATION}/baselines"
# What an evaluation writes in its folder, by the rules' output names.
EVALUATION_FILES: dict[str, str] = {
    "metrics": "metrics.parquet",
    "metrics_json": "metrics.json",
    "ranks": "retrieval_ranks.parquet",
    "robustness": "robustness.parquet",
    "benchmarks": "benchmarks.json",
    "embeddings": "embeddings.npz",
}


def evaluation_dir(run: str = RUN) -> str:
    """The evaluation folder of an encoder run."""
    return f"{EVALUATION}/{run}"


def baseline_dir(name: str = BASELINE) -> str:
    """The evaluation folder of a baseline (``evaluate.baselines``)."""
    return f"{BASELINES}/{name}"


def baseline_model(name: str = BASELINE) -> str:
    """The model a baseline's evaluation scored (a folder)."""
    return f"{baseline_dir(name)}/model"


def evaluation_file(folder: str, key: str) -> str:
    """What an evaluation in ``folder`` writes under the rule output name ``key``."""
    return f"{folder}/{EVALUATION_FILES[key]}"


EMBEDDINGS_DIR = f"{EVALUATION}/embeddings"
EMBEDDINGS_MMD = f"{EMBEDDINGS_DIR}/mmd.parquet"
EMBEDDINGS_TSNE = f"{EMBEDDINGS_DIR}/tsne.parquet"
EMBEDDINGS_SUMMARY = f"{EMBEDDINGS_DIR}/embeddings.json"
EMBEDDINGS_PLOTS = f"{EMBEDDINGS_DIR}/tsne"  # folder: one t-SNE map per benchmark

# the report rules
REPORTS = "reports"


def report_html(name: str) -> str:
    return f"{REPORTS}/{name}.html"


# --------------------------------------------------------------------------------------------
# What each rule writing a folder of named outputs declares
# --------------------------------------------------------------------------------------------
# What the rules of the folder-writing stages declare as ``output:``, by the rule's output names.
# The stage code writes exactly these (pmcflow.tables.stage_outputs): a rule passes its
# ``snakemake.output``, a CLI or library caller a folder, where each output takes its name below.
RULE_OUTPUTS: dict[str, dict[str, str]] = {
    "list_articles": {
        "listing": LISTING,
        "chunks": CHUNKS,
        "rejections": rejections("list"),
        "counts": counts("list"),
    },
    "acquire_chunk": {
        "articles": ACQUIRED,
        "rejections": chunk_rejections("acquire"),
        "pending": ACQUIRE_PENDING,
        "media_rejections": ACQUIRE_MEDIA_REJECTIONS,
        "counts": chunk_counts("acquire"),
    },
    "parse_chunk": {
        "articles": ARTICLES,
        "figures": FIGURES,
        "mentions": MENTIONS,
        "rejections": chunk_rejections("parse"),
        "counts": chunk_counts("parse"),
    },
    "decompose_chunk": {
        "subfigures": SUBFIGURES,
        "rejections": chunk_rejections("decompose"),
        "counts": chunk_counts("decompose"),
        "crops": CROPS,
    },
    "enrich_subcaptions": {"subcaptions": SUBCAPTIONS, "rejections": SUBCAPTION_REJECTIONS},
    "enrich_chunk": {
        "enriched": ENRICHED,
        "rejections": chunk_rejections("enrich"),
        "counts": chunk_counts("enrich"),
    },
    "filter_chunk": {
        "dataset": DATASET,
        "rejections": chunk_rejections("filter"),
        "counts": chunk_counts("filter"),
    },
    "render_merge": {"annotations": SYNTH_ANNOTATIONS, "records": SYNTH_RECORDS, "counts": SYNTH_COUNTS},
    "evaluate_encoder": {k: evaluation_file(evaluation_dir(), k) for k in EVALUATION_FILES},
    "evaluate_baseline": {
        **{k: evaluation_file(baseline_dir(), k) for k in EVALUATION_FILES},
        "model": baseline_model(),
    },
    "compare_embeddings": {
        "mmd": EMBEDDINGS_MMD,
        "tsne": EMBEDDINGS_TSNE,
        "summary": EMBEDDINGS_SUMMARY,
        "plots": EMBEDDINGS_PLOTS,
    },
}


def rule_outputs(rule: str, **wildcards: str) -> dict[str, str]:
    """The outputs of ``rule`` with its wildcards filled: ``rule_outputs("acquire_chunk", chunk="c000001")``."""
    return {name: path.format(**wildcards) for name, path in RULE_OUTPUTS[rule].items()}


def outputs_in(rule: str, folder: str) -> dict[str, str]:
    """The outputs of ``rule`` (a key of :data:`RULE_OUTPUTS`) as they lie in one ``folder``.

    What ``pmcflow parse --out DIR`` and library callers write: every output under its layout file
    name, e.g. ``outputs_in("parse_chunk", "x")["figures"] == "x/figures.parquet"``.
    """
    return {name: f"{folder.rstrip('/')}/{path.rsplit('/', 1)[1]}" for name, path in RULE_OUTPUTS[rule].items()}


# --------------------------------------------------------------------------------------------
# For people and for globbing
# --------------------------------------------------------------------------------------------
_WILDCARD = re.compile(r"\{(\w+)\}")


def shown(template: str) -> str:
    """``template`` with its wildcards as people read them: ``parse/{chunk}/x`` -> ``parse/<chunk>/x``."""
    return _WILDCARD.sub(r"<\1>", template)


def chunk_glob(template: str) -> str:
    """A per-chunk template as a glob over every chunk: ``parse/{chunk}/x`` -> ``parse/c*/x``."""
    return template.replace(CHUNK, CHUNK_GLOB)
