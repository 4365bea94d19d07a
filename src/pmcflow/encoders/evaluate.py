"""Evaluate a trained encoder: image<->text retrieval Recall@K and zero-shot classification.

* **Retrieval** on the held-out split's shards (``test`` by default): every image queries all texts
  (image->text) and every text queries all images (text->image).  A query's rank is the number of
  non-matching candidates scoring strictly higher than its best matching one (0 = top).  With
  ``group_identical_texts`` (default) samples whose training text is identical -- e.g. several
  subfigures that fell back to the same full caption -- count as matches of each other, so the
  metric does not penalise picking an identical caption.  Reported: Recall@K (default 1/10/50/200),
  MRR, mean and median rank, the pool size, and bootstrap percentile CIs over queries.
* **Zero-shot classification**: class prompts from templates (``"a {} image."``...) are embedded
  and averaged per class; each image takes the nearest class.  Labels come from a column of the
  held-out split (``modality`` by default) and/or external datasets given as a directory of
  ``<class>/<image>`` or a Parquet table of (path, label) -- MedMNIST+ and similar plug in this way.
  Reported: accuracy, macro-F1 (over the label set), per-class F1, bootstrap CIs.

* **Benchmarks** (``benchmarks``: the paper's definitions pointed at your copies, or your own):
  retrieval, zero-shot, linear probe and robustness to perturbations, with the files read and
  their sha256 recorded (:mod:`pmcflow.encoders.suite`).

* **Baselines** (``baselines``): any open_clip model name, ``hf-hub:<org>/<name>`` (BiomedCLIP and
  other hub checkpoints), ``local-dir:<dir>`` or a shipped config, with open_clip pretrained
  weights (a tag or a checkpoint file) or none -- a seeded random initialisation, the chance floor
  -- evaluated by the same code as the trained runs (:func:`baseline_encoder`).

Outputs: ``metrics.parquet`` (long format), ``metrics.json``, ``retrieval_ranks.parquet``,
``robustness.parquet``, ``benchmarks.json`` (each benchmark's definition and files with sha256) and
``embeddings.npz`` (the test image features of each benchmark, for embedding analysis).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pmcflow.devices import resolve_device
from pmcflow.encoders.model import Encoder
from pmcflow.encoders.settings import EvaluateSettings, ZeroShotSettings
from pmcflow.seeding import seeded_subset
from pmcflow.settings import thaw
from pmcflow.tables import Outputs, stage_outputs, write_json, write_table

STAGE = "evaluate_encoder"
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".gif"}

METRICS_SCHEMA = pa.schema(
    [
        pa.field("task", pa.string()),  # retrieval | zero_shot
        pa.field("dataset", pa.string()),  # e.g. "test" or an external dataset name
        pa.field("direction", pa.string()),  # image_to_text | text_to_image | null
        pa.field("metric", pa.string()),  # R@10, mrr, accuracy, macro_f1, f1[class] ...
        pa.field("value", pa.float64()),
        pa.field("ci_low", pa.float64()),
        pa.field("ci_high", pa.float64()),
        pa.field("n", pa.int64()),
    ]
)
ROBUSTNESS_SCHEMA = pa.schema(
    [
        pa.field("task", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("direction", pa.string()),
        pa.field("perturbation", pa.string()),
        pa.field("strength", pa.float64()),
        pa.field("metric", pa.string()),
        pa.field("base", pa.float64()),
        pa.field("perturbed", pa.float64()),
        pa.field("ratio", pa.float64()),
        pa.field("delta", pa.float64()),
        pa.field("ci_low", pa.float64()),
        pa.field("ci_high", pa.float64()),
        pa.field("wilcoxon_stat", pa.float64()),
        pa.field("p_value", pa.float64()),
        pa.field("significant", pa.bool_()),
        pa.field("n", pa.int64()),
    ]
)
RANKS_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("subfigure_uid", pa.string()),
        pa.field("image_to_text_rank", pa.int64()),
        pa.field("text_to_image_rank", pa.int64()),
    ]
)


class EvaluateError(ValueError):
    """A user error: a bad evaluate setting, an unknown baseline, a model that cannot be loaded."""


# ----------------------------------------------------------------------------------------------
# Metrics on embeddings (pure numpy)
# ----------------------------------------------------------------------------------------------
def _normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def best_positive_ranks(
    queries: np.ndarray,
    candidates: np.ndarray,
    query_groups: np.ndarray,
    candidate_groups: np.ndarray,
    block: int = 1024,
) -> np.ndarray:
    """0-based rank of each query's best-scoring matching candidate among the non-matching ones.

    Matching = same group id.  Scores are dot products (pass normalised embeddings for cosine).
    """
    q = np.asarray(queries, dtype=np.float32)
    c = np.asarray(candidates, dtype=np.float32)
    qg = np.asarray(query_groups)
    cg = np.asarray(candidate_groups)
    out = np.empty(len(q), dtype=np.int64)
    for s in range(0, len(q), block):
        sims = q[s : s + block] @ c.T
        pos = qg[s : s + block, None] == cg[None, :]
        if not pos.any(axis=1).all():
            raise EvaluateError("a query has no matching candidate")
        best = np.where(pos, sims, -np.inf).max(axis=1)
        out[s : s + block] = ((sims > best[:, None]) & ~pos).sum(axis=1)
    return out


def retrieval_ranks(
    image_emb: np.ndarray, text_emb: np.ndarray, groups: Sequence[int] | np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(image->text ranks, text->image ranks) for paired rows; ``groups`` marks equivalent pairs."""
    img, txt = _normalize(image_emb), _normalize(text_emb)
    g = np.arange(len(img)) if groups is None else np.asarray(groups)
    return best_positive_ranks(img, txt, g, g), best_positive_ranks(txt, img, g, g)


def _ci(values: np.ndarray, ci: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1 - ci) / 2, 1 - (1 - ci) / 2])
    return float(lo), float(hi)


def bootstrap_means(
    per_query: np.ndarray, n_boot: int, ci: float, rng: np.random.Generator
) -> list[tuple[float, float]]:
    """Percentile CIs of the column means of ``per_query`` (n, m) under query resampling."""
    n = per_query.shape[0]
    if n_boot <= 0 or n == 0:
        return [(math.nan, math.nan)] * per_query.shape[1]
    means = np.empty((n_boot, per_query.shape[1]))
    chunk = max(1, 2_000_000 // max(n, 1))
    for s in range(0, n_boot, chunk):
        idx = rng.integers(0, n, size=(min(chunk, n_boot - s), n))
        means[s : s + len(idx)] = per_query[idx].mean(axis=1)
    return [_ci(means[:, j], ci) for j in range(per_query.shape[1])]


def rank_metrics(
    ranks: np.ndarray, ks: Sequence[int], n_boot: int = 0, ci: float = 0.95, seed: int = 0
) -> list[dict[str, Any]]:
    """Recall@K, MRR, mean and median rank (1-based) with bootstrap CIs for the means."""
    r = np.asarray(ranks)
    n = len(r)
    cols = [(r < k).astype(np.float64) for k in ks] + [1.0 / (r + 1.0), r + 1.0]
    names = [f"R@{k}" for k in ks] + ["mrr", "mean_rank"]
    per_query = np.stack(cols, axis=1) if n else np.zeros((0, len(names)))
    cis = bootstrap_means(per_query, n_boot, ci, np.random.default_rng(seed))
    out = [
        {
            "metric": name,
            "value": float(per_query[:, j].mean()) if n else math.nan,
            "ci_low": lo,
            "ci_high": hi,
            "n": n,
        }
        for j, (name, (lo, hi)) in enumerate(zip(names, cis, strict=True))
    ]
    out.append({"metric": "median_rank", "value": float(np.median(r) + 1) if n else math.nan, "n": n})
    return out


def f1_scores(y_true: np.ndarray, y_pred: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-class F1 (0 where a class is neither predicted nor present)."""
    tp = np.bincount(y_true[y_true == y_pred], minlength=n_classes).astype(np.float64)
    pred = np.bincount(y_pred, minlength=n_classes).astype(np.float64)
    true = np.bincount(y_true, minlength=n_classes).astype(np.float64)
    denom = pred + true
    return np.divide(2 * tp, denom, out=np.zeros(n_classes), where=denom > 0)


def classification_metrics(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    class_names: Sequence[str],
    n_boot: int = 0,
    ci: float = 0.95,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Accuracy and macro-F1 (mean over ``class_names``) with bootstrap CIs, plus per-class F1."""
    yt, yp = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    k, n = len(class_names), len(yt)
    acc = float((yt == yp).mean()) if n else math.nan
    per_class = f1_scores(yt, yp, k)
    acc_ci = f1_ci = (math.nan, math.nan)
    if n_boot > 0 and n:
        rng = np.random.default_rng(seed)
        accs, f1s = np.empty(n_boot), np.empty(n_boot)
        for b in range(n_boot):
            idx = rng.integers(0, n, n)
            accs[b] = (yt[idx] == yp[idx]).mean()
            f1s[b] = f1_scores(yt[idx], yp[idx], k).mean()
        acc_ci, f1_ci = _ci(accs, ci), _ci(f1s, ci)
    rows = [
        {"metric": "accuracy", "value": acc, "ci_low": acc_ci[0], "ci_high": acc_ci[1], "n": n},
        {
            "metric": "macro_f1",
            "value": float(per_class.mean()),
            "ci_low": f1_ci[0],
            "ci_high": f1_ci[1],
            "n": n,
        },
    ]
    rows += [
        {"metric": f"f1[{name}]", "value": float(per_class[i]), "n": int((yt == i).sum())}
        for i, name in enumerate(class_names)
    ]
    return rows


# ----------------------------------------------------------------------------------------------
# Model and data
# ----------------------------------------------------------------------------------------------
def read_split(
    shards_dir: str | os.PathLike[str],
    split: str,
    *,
    max_pairs: int | None = None,
    seed: int | str = 0,
) -> list[dict[str, Any]]:
    """Samples of one split in shard order: ``{"key", "image" (PIL RGB), "text", "meta"}``.

    With ``max_pairs``, only the seeded subset of that many pairs (:func:`seeded_subset` over the
    split's keys, stage ``eval``) is decoded: a first pass reads the keys without decoding, the
    second decodes the chosen samples only, so memory is bounded by ``max_pairs`` however large the
    split is. The subset is the one a full read followed by ``seeded_subset`` gives.
    """
    import webdataset as wds

    manifest = json.loads((Path(shards_dir) / "manifest.json").read_text(encoding="utf-8"))
    info = manifest["splits"].get(split)
    if not info or not info["urls"]:
        return []
    keep: set[str] | None = None
    if max_pairs is not None:
        keys = [s["__key__"] for s in wds.WebDataset(info["urls"], shardshuffle=False)]
        if len(keys) > int(max_pairs):
            keep = {keys[i] for i in seeded_subset(seed, "eval", keys, int(max_pairs))}
    ds = wds.WebDataset(info["urls"], shardshuffle=False)
    if keep is not None:
        ds = ds.select(lambda s: s["__key__"] in keep)
    out: list[dict[str, Any]] = []
    for s in ds.decode("pilrgb"):
        image = next(s[e] for e in ("jpg", "png", "webp", "jpeg") if e in s)
        out.append({"key": s["__key__"], "image": image, "text": s["txt"], "meta": s.get("json") or {}})
    return out


def load_labelled_images(spec: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(image paths, labels) of an external dataset: ``kind: dir`` or ``kind: parquet``."""
    kind, root = spec.get("kind", "dir"), Path(spec["path"])
    if kind == "dir":
        paths, labels = [], []
        for cls_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for f in sorted(cls_dir.rglob("*")):
                if f.suffix.lower() in IMAGE_SUFFIXES:
                    paths.append(str(f))
                    labels.append(cls_dir.name)
        return paths, labels
    if kind == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(root)
        pcol, lcol = spec.get("path_column", "path"), spec.get("label_column", "label")
        base = root.parent
        paths = [p if Path(p).is_absolute() else str(base / p) for p in table.column(pcol).to_pylist()]
        return paths, [str(v) for v in table.column(lcol).to_pylist()]
    raise EvaluateError(f"zero-shot dataset kind must be 'dir' or 'parquet', not {kind!r}")


def text_groups(texts: Sequence[str]) -> np.ndarray:
    """A group id per text: the index of its first occurrence, so identical texts match each other."""
    first: dict[str, int] = {}
    return np.array([first.setdefault(t, i) for i, t in enumerate(texts)], dtype=np.int64)


def class_embeddings(
    encoder: Encoder, names: Sequence[str], templates: Sequence[str], batch_size: int
) -> np.ndarray:
    """Normalised (k, d) class embeddings: each class's prompts from ``templates``, averaged."""
    prompts = [t.format(n) for n in names for t in templates]
    emb = encoder.texts(prompts, batch_size).reshape(len(names), len(templates), -1).mean(axis=1)
    return _normalize(emb)


def zero_shot(
    encoder: Encoder,
    images: Iterable[Any] | np.ndarray,
    labels: Sequence[str],
    zs: ZeroShotSettings,
    class_names: Mapping[str, str],
    batch_size: int,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(classes, y_true, y_pred); ``images`` are PIL images or precomputed normalised embeddings."""
    classes = sorted(set(labels))
    cls_emb = class_embeddings(encoder, [class_names.get(c, c) for c in classes], list(zs.templates), batch_size)
    img_emb = images if isinstance(images, np.ndarray) else encoder.images(images, batch_size)
    y_pred = (img_emb @ cls_emb.T).argmax(axis=1)
    index = {c: i for i, c in enumerate(classes)}
    y_true = np.array([index[lab] for lab in labels], dtype=np.int64)
    return classes, y_true, y_pred


# ----------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------
def mean_over_directions(by_direction: Sequence[Mapping[str, float]], ks: Sequence[int]) -> dict[str, float]:
    """``R@K`` averaged over the retrieval directions given (``{metric: value}`` each)."""
    return {f"R@{k}": float(np.mean([d[f"R@{k}"] for d in by_direction])) for k in ks} if by_direction else {}


def baseline_encoder(
    name: str, spec: Mapping[str, Any], model_dir: str | os.PathLike[str], seed: int, device: str = "cpu"
) -> tuple[Encoder, dict[str, Any]]:
    """The baseline ``spec`` (``{model, pretrained, note}`` of ``evaluate.baselines``) as an
    :class:`Encoder`, and its record for ``metrics.json``.

    ``model``: an open_clip model name (``ViT-B-16``), ``hf-hub:<org>/<name>`` (weights and config
    from the hub, or from the local Hugging Face cache when offline), ``local-dir:<dir>`` or a
    config shipped with pmcflow (copied into ``model_dir`` with its tokenizer, as training does;
    otherwise ``model_dir`` holds a note of what was loaded).  ``pretrained``: an open_clip tag (``openai``), a checkpoint file, or null: random
    initialisation from ``seed`` -- no learned weights, the chance floor to read the others by.
    """
    from pmcflow.encoders import model as MD

    model = str(spec["model"])
    pretrained = spec.get("pretrained")
    model_dir = Path(model_dir)
    model_id = MD.prepare_model_dir(model, model_dir)
    if not model_id.startswith(MD.LOCAL_DIR):  # loaded by name: the folder says so
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "README.txt").write_text(
            f"{model}: loaded by open_clip by name (pretrained={pretrained!r}); nothing copied here.\n",
            encoding="utf-8",
        )
    hub = model.startswith("hf-hub:")
    if model_id.startswith(MD.LOCAL_DIR) and pretrained is not None and not Path(pretrained).is_file():
        raise EvaluateError(
            f"baseline {name!r}: {model} is a local config, so pretrained must be a checkpoint file, "
            f"not {pretrained!r}"
        )
    if pretrained is None and not hub:
        weights = f"random initialisation (seed {seed}): no learned weights, the chance floor"
    elif hub:
        weights = f"the hub checkpoint of {model}"
    else:
        weights = f"open_clip pretrained={pretrained}"
    try:
        encoder = Encoder(model_id, None, device, pretrained=pretrained, init_seed=seed)
    except Exception as exc:  # noqa: BLE001 - hub offline, unknown name, bad file: say which baseline
        raise EvaluateError(
            f"baseline {name!r}: cannot load {model} (pretrained={pretrained!r}): {type(exc).__name__}: {exc}"
        ) from exc
    record = {
        "name": name,
        "model": model,
        "pretrained": pretrained,
        "weights": weights,
        "random_init": pretrained is None and not hub,
        "note": spec.get("note"),
    }
    return encoder, record


def evaluate_encoder(
    settings: EvaluateSettings | Mapping[str, Any] | None,
    seed: int,
    train_dir: str | os.PathLike[str] | None,
    shards_dir: str | os.PathLike[str],
    outputs: Outputs,
    *,
    checkpoint: str | None = None,
    model_id: str | None = None,
    baseline: str | None = None,
    benchmarks_yaml: Sequence[str | os.PathLike[str]] = (),
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Evaluate the run in ``train_dir`` (its ``train.json``) -- or, with ``baseline``, the model
    ``evaluate.baselines[baseline]`` names -- on ``shards_dir``; write the outputs of the rule
    ``evaluate_encoder`` (or ``evaluate_baseline``, which adds ``model``): the rule's named outputs,
    or a folder (:func:`pmcflow.tables.stage_outputs`)."""
    cfg = EvaluateSettings.from_section(settings)  # a library caller may pass the section as a dict
    device = resolve_device(cfg.device)
    say = log or (lambda msg: print(msg, file=sys.stderr))
    out = stage_outputs("evaluate_encoder" if baseline is None else "evaluate_baseline", outputs)
    if cfg.threads:
        import torch

        torch.set_num_threads(cfg.threads)
    base_rec: dict[str, Any] | None = None
    if baseline is not None:
        if baseline not in cfg.baselines:
            raise EvaluateError(
                f"no baseline {baseline!r} in evaluate.baselines (have: {sorted(cfg.baselines)})"
            )
        encoder, base_rec = baseline_encoder(baseline, cfg.baselines[baseline], out["model"], seed, device)
        model_id, checkpoint = base_rec["model"], None
        say(f"{STAGE}: baseline {baseline}: {base_rec['model']} ({base_rec['weights']})")
    else:
        if train_dir is None:
            raise EvaluateError("give a training run's folder (train_dir) or a baseline name")
        train = json.loads((Path(train_dir) / "train.json").read_text(encoding="utf-8"))
        model_id = model_id or train["model_id"]
        checkpoint = checkpoint or train["checkpoint"]
        encoder = Encoder(model_id, checkpoint, device)
    bs = cfg.batch_size
    n_boot, ci = cfg.bootstrap, cfg.ci
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {
        "stage": STAGE,
        "seed": int(seed),
        "config": {**cfg.to_dict(), "device": device},
        "model_id": model_id,
        "checkpoint": checkpoint,
        "baseline": base_rec,
        "split": cfg.split,
        "retrieval": {},
        "zero_shot": {},
        "skipped": {},
    }

    samples = read_split(shards_dir, cfg.split, max_pairs=cfg.max_pairs, seed=seed)
    say(f"{STAGE}: {len(samples)} {cfg.split} pairs")
    img_emb = txt_emb = None
    if len(samples) >= 2:
        texts = [s["text"] for s in samples]
        img_emb = encoder.images((s["image"] for s in samples), bs)
        txt_emb = encoder.texts(texts, bs)
        if cfg.group_identical_texts:
            groups = text_groups(texts)
        else:
            groups = np.arange(len(samples))
        i2t, t2i = retrieval_ranks(img_emb, txt_emb, groups)
        for direction, ranks, salt in (("image_to_text", i2t, 1), ("text_to_image", t2i, 2)):
            metrics = rank_metrics(ranks, list(cfg.recall_at), n_boot, ci, seed=seed * 1000 + salt)
            result["retrieval"][direction] = {m["metric"]: m for m in metrics}
            rows += [
                {"task": "retrieval", "dataset": cfg.split, "direction": direction, **m} for m in metrics
            ]
        result["retrieval"]["n_pairs"] = len(samples)
        result["retrieval"]["n_text_groups"] = int(len(np.unique(groups)))
        result["retrieval"]["mean_over_directions"] = mean_over_directions(
            [
                {k: m["value"] for k, m in result["retrieval"][d].items()}
                for d in ("image_to_text", "text_to_image")
            ],
            list(cfg.recall_at),
        )
        write_table(
            [
                {
                    "key": s["key"],
                    "subfigure_uid": s["meta"].get("subfigure_uid"),
                    "image_to_text_rank": int(a),
                    "text_to_image_rank": int(b),
                }
                for s, a, b in zip(samples, i2t, t2i, strict=True)
            ],
            RANKS_SCHEMA,
            out["ranks"],
        )
    else:
        result["skipped"]["retrieval"] = f"{len(samples)} pairs in split {cfg.split!r} (need >= 2)"
        write_table([], RANKS_SCHEMA, out["ranks"])

    zs = cfg.zero_shot
    class_names = dict(zs.class_names)
    # (a) labelled panels of the held-out split itself.
    col = zs.label_column
    if col and img_emb is not None:
        labelled = [(i, s["meta"].get(col)) for i, s in enumerate(samples) if s["meta"].get(col)]
        n_cls = len({lab for _, lab in labelled})
        if n_cls >= zs.min_classes:
            idx = [i for i, _ in labelled]
            classes, yt, yp = zero_shot(
                encoder, img_emb[idx], [lab for _, lab in labelled], zs, class_names, bs
            )
            name = f"{cfg.split}:{col}"
            metrics = classification_metrics(yt, yp, classes, n_boot, ci, seed=seed * 1000 + 3)
            result["zero_shot"][name] = {"classes": classes, **{m["metric"]: m for m in metrics}}
            rows += [{"task": "zero_shot", "dataset": name, "direction": None, **m} for m in metrics]
        else:
            result["skipped"][f"zero_shot:{col}"] = f"{n_cls} labelled classes (need >= {zs.min_classes})"
    # (b) external labelled datasets.
    from PIL import Image

    for j, spec in enumerate(zs.datasets):
        name = str(spec.get("name") or Path(spec["path"]).name)
        paths, labels = load_labelled_images(spec)
        if len(set(labels)) < zs.min_classes:
            result["skipped"][f"zero_shot:{name}"] = f"{len(set(labels))} classes"
            continue

        def _open(p: str) -> Any:
            with Image.open(p) as im:
                return im.convert("RGB")

        names = {**class_names, **dict(spec.get("class_names") or {})}
        classes, yt, yp = zero_shot(encoder, (_open(p) for p in paths), labels, zs, names, bs)
        metrics = classification_metrics(yt, yp, classes, n_boot, ci, seed=seed * 1000 + 10 + j)
        result["zero_shot"][name] = {"classes": classes, **{m["metric"]: m for m in metrics}}
        rows += [{"task": "zero_shot", "dataset": name, "direction": None, **m} for m in metrics]

    # (c) the configured benchmarks.
    from pmcflow.encoders import benchmarks as B
    from pmcflow.encoders.probe import FeatureCache
    from pmcflow.encoders.suite import run_suite
    from pmcflow.tables import file_sha256

    benches = B.resolve_benchmarks(thaw(cfg.benchmarks))
    for extra in benchmarks_yaml:  # e.g. the demo benchmarks the workflow built
        benches += B.read_benchmarks_yaml(extra)
    cache = FeatureCache(cfg.feature_cache) if cfg.feature_cache else None
    model_key: dict[str, Any] = {
        "model_id": model_id,
        "checkpoint_sha256": file_sha256(checkpoint) if checkpoint else None,
    }
    if base_rec is not None:  # weights from a file, named by tag or hub id, or drawn from the seed
        pre = base_rec["pretrained"]
        if pre is not None and Path(pre).is_file():
            model_key["checkpoint_sha256"] = base_rec["pretrained_sha256"] = file_sha256(pre)
        model_key |= {"pretrained": pre, "init_seed": seed if base_rec["random_init"] else None}
    suite = run_suite(encoder, benches, cfg, seed, model_key=model_key, cache=cache, say=say)
    rows += suite.rows
    result["benchmarks"] = suite.summary
    result["checkpoint_sha256"] = model_key["checkpoint_sha256"]
    if cache is not None:  # logged, not recorded: a cached and an uncached run write the same bytes
        say(f"{STAGE}: feature cache {cfg.feature_cache}: {cache.hits} hits, {cache.misses} computed")
    result["_feature_cache"] = cache
    write_table(_finite(suite.robustness), ROBUSTNESS_SCHEMA, out["robustness"])
    write_json(out["benchmarks"], {"benchmarks": suite.used})
    _write_embeddings(out["embeddings"], suite.embeddings, suite.labels)

    write_table(rows, METRICS_SCHEMA, out["metrics"])
    write_json(out["metrics_json"], _finite({k: v for k, v in result.items() if not k.startswith("_")}))
    return result


def _write_embeddings(
    path: Path, embeddings: Mapping[str, np.ndarray], labels: Mapping[str, Sequence[str]]
) -> None:
    """An ``.npz`` (``np.load`` reads it): ``<benchmark>`` -> (n, d) float32 test image features and
    ``<benchmark>:labels`` where labelled.  Written with fixed zip timestamps (``np.savez`` stamps
    the current time), so the same features give the same bytes."""
    import zipfile

    from pmcflow.tables import atomic_path

    arrays: dict[str, np.ndarray] = {
        k: np.asarray(v, dtype=np.float32) for k, v in sorted(embeddings.items())
    }
    arrays.update({f"{k}:labels": np.asarray(list(v), dtype=str) for k, v in sorted(labels.items())})
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, arrays[name], allow_pickle=False)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def cli(argv: Sequence[str] | None = None) -> int:
    from pmcflow.config import load_config

    parser = argparse.ArgumentParser(prog="pmcflow evaluate-encoder", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--train-dir", help="Output directory of `pmcflow train-encoder`.")
    which.add_argument(
        "--baseline",
        metavar="NAME",
        help="Evaluate the baseline evaluate.baselines.NAME of the config instead of a training run.",
    )
    parser.add_argument("--shards", required=True, help="Output directory of `pmcflow shard`.")
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", default=None, help="Another checkpoint of the same model.")
    parser.add_argument("--config", "-c", action="append", default=[], metavar="FILE")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    config = load_config(args.config, args.overrides)  # the workflow's loader: schema, defaults
    section, seed = EvaluateSettings.from_config(config), int(config["seed"])
    res = evaluate_encoder(
        section,
        seed if args.seed is None else args.seed,
        args.train_dir,
        args.shards,
        args.out,
        checkpoint=args.checkpoint,
        baseline=args.baseline,
    )
    brief = {
        "retrieval": res["retrieval"].get("mean_over_directions"),
        "zero_shot": {k: v["macro_f1"]["value"] for k, v in res["zero_shot"].items()},
        "skipped": res["skipped"],
    }
    print(json.dumps(brief, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
