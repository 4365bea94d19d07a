"""The configured benchmarks, run for one encoder: retrieval, zero-shot, linear probe, robustness.

``evaluate.benchmarks`` lists benchmarks as data (:mod:`pmcflow.encoders.benchmarks`: the paper's
definitions pointed at the user's copies, or custom entries).  For each one and each of its tasks:

* **retrieval**: image->text and text->image Recall@K (``evaluate.recall_at``; the paper reports
  R@10/50/200 and their mean), MRR and ranks with bootstrap CIs (:func:`evaluate.rank_metrics`);
* **zero_shot**: class prompts from the benchmark's templates, accuracy and macro-F1 with CIs on
  its test split;
* **linear_probe**: a linear layer on frozen image features of its train split, scored on its test
  split (:mod:`pmcflow.encoders.probe`; the paper: 40 epochs, lr 0.1, cosine);
* **robustness** (``evaluate.robustness.perturbations``): the test images perturbed (brightness,
  shift, rotation, flip, zoom), per-query scores compared with the unperturbed ones: ratio (the
  paper's robustness score), delta with a paired bootstrap CI, Wilcoxon signed-rank p-value
  (:mod:`pmcflow.encoders.robustness`).

Image features are cached (:class:`pmcflow.encoders.probe.FeatureCache`, keyed by the checkpoint's
and the benchmark files' sha256 and the perturbation), so probes, perturbations and reruns reuse
them.  Every file a benchmark read is recorded with its sha256 (``benchmarks.json``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pmcflow.encoders import benchmarks as B
from pmcflow.encoders import evaluate as EV
from pmcflow.encoders.probe import FeatureCache, ProbeSettings, linear_probe
from pmcflow.encoders.robustness import Perturbation, parse_perturbations, perturb, robustness_rows
from pmcflow.encoders.settings import EvaluateSettings
from pmcflow.settings import thaw

TASKS = ("retrieval", "zero_shot", "linear_probe")


@dataclass
class SuiteResult:
    rows: list[dict[str, Any]] = field(default_factory=list)  # evaluate.METRICS_SCHEMA rows
    robustness: list[dict[str, Any]] = field(default_factory=list)
    used: list[dict[str, Any]] = field(default_factory=list)  # benchmark, definition, files
    summary: dict[str, Any] = field(default_factory=dict)  # per benchmark and task, for metrics.json
    embeddings: dict[str, np.ndarray] = field(default_factory=dict)  # benchmark -> test image features
    labels: dict[str, list[str]] = field(default_factory=dict)


def _digest(files: Sequence[Mapping[str, Any]]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f['relpath']}\x1f{f['sha256']}\n".encode())
    return h.hexdigest()


class _Features:
    """Image features of one encoder, through the cache when there is one."""

    def __init__(
        self, encoder: EV.Encoder, model_key: Mapping[str, Any], cache: FeatureCache | None, bs: int
    ):
        self.encoder, self.model_key, self.cache, self.bs = encoder, dict(model_key), cache, bs

    def images(self, key: Mapping[str, Any], images: Callable[[], Iterable[Any]]) -> np.ndarray:
        def compute() -> np.ndarray:
            return self.encoder.images(images(), self.bs)

        if self.cache is None:
            return compute()
        return self.cache.get_or_compute({**self.model_key, **key}, compute)


def _perturbed(images: Callable[[], Iterable[Any]], p: Perturbation | None) -> Callable[[], Iterable[Any]]:
    if p is None:
        return images
    return lambda: (perturb(im, p.name, p.strength) for im in images())


def run_suite(
    encoder: EV.Encoder,
    benchmarks: Sequence[B.Benchmark],
    cfg: EvaluateSettings,
    seed: int,
    *,
    model_key: Mapping[str, Any],
    cache: FeatureCache | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> SuiteResult:
    """Every task of every benchmark for ``encoder``; ``cfg`` is the resolved ``evaluate`` section."""
    bs, n_boot, ci = cfg.batch_size, cfg.bootstrap, cfg.ci
    ks = list(cfg.recall_at)
    rob = cfg.robustness
    perts = parse_perturbations(thaw(rob.perturbations)) if rob.perturbations else []
    probe = cfg.linear_probe
    feats = _Features(encoder, model_key, cache, bs)
    out = SuiteResult()
    for j, b in enumerate(benchmarks):
        files = B.benchmark_files(b)
        data_key = {"benchmark": b.name, "files": _digest(files)}
        out.used.append({"benchmark": b.name, "definition": B.describe(b), "files": files})
        summary: dict[str, Any] = {}
        say(f"benchmark {b.name}: {', '.join(b.tasks)} ({len(files)} files)")
        if "retrieval" in b.tasks:
            summary["retrieval"] = _retrieval(
                b, feats, data_key, ks, n_boot, ci, seed + 100 * j, perts, out, rob.alpha
            )
        if {"zero_shot", "linear_probe"} & set(b.tasks):
            summary.update(_classification(b, feats, data_key, cfg, probe, seed + 100 * j, perts, out))
        out.summary[b.name] = summary
    return out


def _retrieval(
    b: B.Benchmark,
    feats: _Features,
    data_key: Mapping[str, Any],
    ks: Sequence[int],
    n_boot: int,
    ci: float,
    seed: int,
    perts: Sequence[Perturbation],
    out: SuiteResult,
    alpha: float,
) -> dict[str, Any]:
    data = B.load_retrieval(b)
    if len(data) < 2:
        return {"skipped": f"{len(data)} pairs (need >= 2)"}
    groups = EV.text_groups(data.texts)
    txt = feats.encoder.texts(list(data.texts), feats.bs)
    per_pert: dict[Perturbation | None, tuple[np.ndarray, np.ndarray]] = {}
    for p in [None, *perts]:
        img = feats.images(
            {**data_key, "part": "retrieval", "perturbation": p and p.label}, _perturbed(data.images, p)
        )
        per_pert[p] = EV.retrieval_ranks(img, txt, groups)
        if p is None:
            out.embeddings[b.name] = img
    summary: dict[str, Any] = {"n_pairs": len(data)}
    directions = [d for d in ("image_to_text", "text_to_image") if d in b.retrieval_directions]
    for d_i, direction in enumerate(directions):
        ranks = per_pert[None][0 if direction == "image_to_text" else 1]
        metrics = EV.rank_metrics(ranks, ks, n_boot, ci, seed=seed + 1 + d_i)
        summary[direction] = {m["metric"]: m["value"] for m in metrics}
        out.rows += [{"task": "retrieval", "dataset": b.name, "direction": direction, **m} for m in metrics]
        if perts:
            base = 1.0 / (ranks + 1.0)
            by = {
                (p.name, p.strength): 1.0 / (per_pert[p][0 if direction == "image_to_text" else 1] + 1.0)
                for p in perts
            }
            out.robustness += [
                {**r, "direction": direction}
                for r in robustness_rows(
                    "retrieval", b.name, "mrr", base, by, n_boot, ci, seed + 7 + d_i, alpha
                )
            ]
    mean = EV.mean_over_directions([summary[d] for d in directions], ks)
    summary["mean_over_directions"] = mean
    big = [k for k in ks if k in (10, 50, 200)]
    if big and directions:  # the paper's summary: the mean of R@10/50/200 over both directions
        value = float(np.mean([mean[f"R@{k}"] for k in big]))
        summary["mean_recall"] = value
        out.rows.append(
            {
                "task": "retrieval",
                "dataset": b.name,
                "direction": "mean",
                "metric": "mean_recall",
                "value": value,
                "n": len(data),
            }  # fmt: skip
        )
    return summary


def _classification(
    b: B.Benchmark,
    feats: _Features,
    data_key: Mapping[str, Any],
    cfg: EvaluateSettings,
    probe: ProbeSettings,
    seed: int,
    perts: Sequence[Perturbation],
    out: SuiteResult,
) -> dict[str, Any]:
    data = B.load_classification(b)
    n_boot, ci, bs = cfg.bootstrap, cfg.ci, cfg.batch_size
    test = data.indices(b.split)
    train = data.indices(b.train_split)
    y = data.label_indices()
    names = [data.class_names.get(c, c) for c in data.classes]
    summary: dict[str, Any] = {}
    if len(test) < 2 or len(set(y[test].tolist())) < 2:
        return {"zero_shot": {"skipped": f"{len(test)} test images in split {b.split!r}"}}

    def images(idx: Sequence[int]) -> Callable[[], Iterable[Any]]:
        return lambda: (data.image(i) for i in idx)

    test_feats = {
        p: feats.images(
            {**data_key, "part": f"classification:{b.split}", "perturbation": p and p.label},
            _perturbed(images(test), p),
        )  # fmt: skip
        for p in [None, *perts]
    }
    out.embeddings[b.name] = test_feats[None]
    out.labels[b.name] = [data.labels[i] for i in test]
    templates = list(b.templates) or list(cfg.zero_shot.templates)
    if "zero_shot" in b.tasks:
        cls = EV.class_embeddings(feats.encoder, names, templates, bs)
        preds = {p: (f @ cls.T).argmax(axis=1) for p, f in test_feats.items()}
        metrics = EV.classification_metrics(y[test], preds[None], data.classes, n_boot, ci, seed=seed + 3)
        out.rows += [{"task": "zero_shot", "dataset": b.name, "direction": None, **m} for m in metrics]
        summary["zero_shot"] = {m["metric"]: m["value"] for m in metrics[:2]} | {"n": len(test)}
        if perts:
            base = (preds[None] == y[test]).astype(np.float64)
            by = {(p.name, p.strength): (preds[p] == y[test]).astype(np.float64) for p in perts}
            out.robustness += [
                {**r, "direction": None}
                for r in robustness_rows(
                    "zero_shot",
                    b.name,
                    "accuracy",
                    base,
                    by,
                    n_boot,
                    ci,
                    seed + 9,
                    cfg.robustness.alpha,
                )
            ]
    if "linear_probe" in b.tasks:
        if len(train) < 2 or len(set(y[train].tolist())) < 2:
            summary["linear_probe"] = {"skipped": f"{len(train)} images in split {b.train_split!r}"}
        else:
            train_x = feats.images({**data_key, "part": f"classification:{b.train_split}", "perturbation": None},
                                   images(train))  # fmt: skip
            res = linear_probe(train_x, y[train], test_feats[None], probe, seed, n_classes=len(data.classes))
            metrics = EV.classification_metrics(y[test], res.y_pred, data.classes, n_boot, ci, seed=seed + 5)
            out.rows += [{"task": "linear_probe", "dataset": b.name, "direction": None, **m} for m in metrics]
            summary["linear_probe"] = {m["metric"]: m["value"] for m in metrics[:2]} | {
                "n_train": len(train),
                "n": len(test),
                "train_accuracy": res.train_accuracy,
            }
    return summary
