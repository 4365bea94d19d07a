"""Chance levels and intervals for the reports' classification and retrieval metrics.

What a model that has learnt nothing would score, so a number can be read against it:

* **Accuracy**: a uniform random guesser over ``k`` classes is right with probability ``1/k``
  whatever the class distribution; the majority-class baseline scores the largest class share.
* **Macro-F1** of a uniform random guesser depends on the class distribution: class ``c`` with
  ``n_c`` of ``n`` items gets ``TP ~ Bin(n_c, 1/k)`` and ``FP ~ Bin(n - n_c, 1/k)`` (independent),
  ``F1_c = 2 TP / (TP + FP + n_c)``.  :func:`uniform_macro_f1` gives its exact expectation (the mean
  over classes of ``E[F1_c]``); as ``n`` grows it tends to the mean of ``2 p_c (1/k) / (p_c + 1/k)``
  with ``p_c = n_c / n`` (:func:`uniform_macro_f1_limit`), ``1/k`` for balanced classes.  The
  majority-class guesser's macro-F1 is ``(1/k) * 2 p_max / (p_max + 1)``.
* **Retrieval** (pmcflow.encoders.evaluate): a query's rank is the number of non-matching
  candidates scored above its best matching one, among ``N`` candidates of which ``m`` match.
  Under a random scoring the top ``K`` hold no match with probability ``C(N-m, K) / C(N, K)``, so
  chance Recall@K is ``1 - C(N-m, K) / C(N, K)`` -- ``K/N`` with one match per query.  The chance
  MRR and mean rank follow from the same distribution (``H_N / N`` and ``(N+1)/2`` for ``m = 1``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from statistics import NormalDist

import numpy as np


# --------------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------------
def accuracy_chance(n_classes: int) -> float:
    """Expected accuracy of a uniform random guesser over ``n_classes`` classes: ``1/k``."""
    if n_classes < 1:
        raise ValueError("need at least one class")
    return 1.0 / n_classes


def majority_baseline(class_counts: Sequence[int]) -> dict[str, float]:
    """Accuracy and macro-F1 of always predicting the largest class (ties: any one of them)."""
    counts = [int(c) for c in class_counts]
    n, k = sum(counts), len(counts)
    if n <= 0 or k < 1:
        raise ValueError("need a non-empty class distribution")
    p = max(counts) / n
    return {"accuracy": p, "macro_f1": (2 * p / (p + 1)) / k}


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _binomial_pmf(n: int, p: float, lf: np.ndarray, width: float = 12.0) -> tuple[np.ndarray, np.ndarray]:
    """(support, pmf) of Bin(n, p), cut where the mass is below ~1e-30 (``width`` sds)."""
    if n == 0:
        return np.zeros(1, dtype=np.int64), np.ones(1)
    if p >= 1.0:
        return np.array([n]), np.ones(1)
    mu, sd = n * p, math.sqrt(n * p * (1 - p))
    lo, hi = max(0, int(mu - width * sd) - 2), min(n, int(mu + width * sd) + 2)
    k = np.arange(lo, hi + 1)
    logp = lf[n] - lf[k] - lf[n - k] + k * math.log(p) + (n - k) * math.log1p(-p)
    return k, np.exp(logp)


def uniform_macro_f1(class_counts: Sequence[int]) -> float:
    """Exact expected macro-F1 of a guesser that picks one of the ``k`` classes uniformly at random.

    ``class_counts``: true items per class, over the label set the metric averages over (a class
    with no items scores F1 = 0, as in pmcflow.encoders.evaluate.f1_scores).
    """
    counts = [int(c) for c in class_counts]
    k, n = len(counts), sum(counts)
    if k < 1 or n <= 0:
        raise ValueError("need a non-empty class distribution")
    q = 1.0 / k
    lf = _log_factorials(n)
    total = 0.0
    for n_c in counts:
        if n_c == 0:
            continue  # TP is always 0
        tp, p_tp = _binomial_pmf(n_c, q, lf)
        fp, p_fp = _binomial_pmf(n - n_c, q, lf)
        f1 = 2.0 * tp[:, None] / (tp[:, None] + fp[None, :] + n_c)
        total += float(p_tp @ f1 @ p_fp)
    return total / k


def uniform_macro_f1_limit(class_counts: Sequence[int]) -> float:
    """The large-sample value of :func:`uniform_macro_f1`: mean of ``2 p_c q / (p_c + q)``, ``q = 1/k``."""
    counts = [int(c) for c in class_counts]
    k, n = len(counts), sum(counts)
    if k < 1 or n <= 0:
        raise ValueError("need a non-empty class distribution")
    q = 1.0 / k
    return sum(2 * (c / n) * q / (c / n + q) for c in counts) / k


def classification_chance(class_counts: Sequence[int]) -> dict[str, float]:
    """Every reference level the reports print next to accuracy and macro-F1."""
    maj = majority_baseline(class_counts)
    return {
        "accuracy_uniform": accuracy_chance(len(class_counts)),
        "macro_f1_uniform": uniform_macro_f1(class_counts),
        "accuracy_majority": maj["accuracy"],
        "macro_f1_majority": maj["macro_f1"],
    }


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (for accuracies recorded without an interval)."""
    if n <= 0:
        return (math.nan, math.nan)
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes <= 0 else max(0.0, centre - half)
    hi = 1.0 if successes >= n else min(1.0, centre + half)
    return (lo, hi)


# --------------------------------------------------------------------------------------------
# Retrieval
# --------------------------------------------------------------------------------------------
def _rank_survival(pool: int, matches: int) -> np.ndarray:
    """``S[j] = P(rank >= j)`` for ``j = 0 .. pool - matches + 1`` under a random ordering."""
    neg = pool - matches
    s = np.ones(neg + 2)
    s[neg + 1] = 0.0
    for j in range(1, neg + 1):
        s[j] = s[j - 1] * (neg - j + 1) / (pool - j + 1)
    return s


def retrieval_chance(
    pool: int, ks: Iterable[int], matches: Mapping[int, int] | Sequence[int] | None = None
) -> dict[str, float]:
    """Chance Recall@K, MRR and mean rank (1-based) of a random ranker.

    ``pool``: candidates per query (N).  ``matches``: how many candidates match each query -- a
    sequence with one entry per query, or ``{m: number of queries}``; default one match per query,
    which gives ``R@K = K/N``.  Keys of the result: ``R@<K>``, ``mrr``, ``mean_rank``.
    """
    if pool < 1:
        raise ValueError("empty candidate pool")
    if matches is None:
        dist: Mapping[int, int] = {1: 1}
    elif isinstance(matches, Mapping):
        dist = matches
    else:
        dist = Counter(int(m) for m in matches)
    total = sum(dist.values())
    if total <= 0 or any(m < 1 or m > pool for m in dist):
        raise ValueError("every query needs between 1 and pool matching candidates")
    ks = sorted({int(k) for k in ks})
    out = {f"R@{k}": 0.0 for k in ks} | {"mrr": 0.0, "mean_rank": 0.0}
    for m, count in dist.items():
        w = count / total
        s = _rank_survival(pool, m)
        pmf = s[:-1] - s[1:]  # P(rank = j), j = 0 .. N - m
        for k in ks:
            out[f"R@{k}"] += w * (1.0 - (s[k] if k < len(s) else 0.0))
        out["mrr"] += w * float(pmf @ (1.0 / np.arange(1, len(pmf) + 1)))
        out["mean_rank"] += w * (1.0 + float(s[1:].sum()))
    return out
