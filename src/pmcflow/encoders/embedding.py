"""Representation analysis: t-SNE maps of image embeddings and an MMD two-sample test.

Open-PMC-18M (section 3.6, appendix C.1) embeds one benchmark set X with two vision encoders
(``phi(X)``, ``psi(X)``), draws both with t-SNE and tests whether the two embedding distributions
differ with the Maximum Mean Discrepancy (Gretton et al., 2012) and a permutation test of 100
random reassignments of the pooled samples.

* :func:`tsne_2d` -- scikit-learn t-SNE, PCA initialisation, ``random_state=seed``, perplexity
  30 by default and never above ``(n - 1) / 3`` (scikit-learn needs it below ``n``; a third keeps
  the ``3 * perplexity`` nearest neighbours it uses within the sample).  OpenMP/BLAS threads are
  limited to ``threads`` (default 1) while fitting, because the Barnes-Hut gradient sums over
  threads and a different split can change the last bits; with a fixed thread count the map is
  identical between calls.  :func:`tsne_joint` maps several models' embeddings into one space.
* :func:`mmd_rbf` -- MMD^2 with a Gaussian kernel ``k(a, b) = exp(-|a - b|^2 / (2 sigma^2))``.
  The default is the **unbiased** U-statistic (diagonal kernel terms excluded from the within-sample
  means), which can be slightly negative and is ``<= 0`` for a sample against itself.  With
  ``biased=True`` the V-statistic (diagonals included) is returned; it is ``>= 0`` and exactly 0
  in exact arithmetic for a sample against itself (``|value| < 1e-12`` in float64).  ``sigma``
  defaults to the median heuristic: the median Euclidean distance between distinct points of the
  pooled sample (evenly spaced subsample of at most ``MEDIAN_MAX_POINTS`` points; 1.0 if the
  median is 0).  Distances are taken after centring the pooled sample (translation invariant,
  fewer cancellation errors); the kernel is evaluated block by block in float64, so memory stays
  ``O(block * n)``, but time is ``O(n^2 * dims)`` -- subsample very large sets first.
* :func:`mmd_permutation_test` -- the kernel matrix of the pooled sample is formed once (block by
  block) and multiplied by the membership vectors of the observed split and of
  ``n_permutations`` random reassignments at the same time; ``p = (1 + #{null >= observed}) /
  (1 + n_permutations)``; ``null_low``/``null_high`` are the null range (min and max), as the paper
  reports.
* :func:`plot_tsne` -- one panel per model coloured by label, written as a PNG whose bytes depend
  only on the inputs (Agg canvas, no ``Software`` metadata, no timestamps).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pmcflow.seeding import rng_for
from pmcflow.tables import atomic_path

MEDIAN_MAX_POINTS = 2000
_BLOCK_ELEMS = 1 << 22  # kernel entries per block (32 MiB of float64)


class EmbeddingError(ValueError):
    """Malformed embeddings or arguments."""


def _matrix(x: Any, name: str, dtype: type = np.float64) -> np.ndarray:
    arr = np.asarray(x, dtype=dtype)
    if arr.ndim != 2:
        raise EmbeddingError(f"{name} must be a 2-D (samples, dims) array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise EmbeddingError(f"{name} contains NaN or infinite values")
    return arr


# ----------------------------------------------------------------------------------------------
# t-SNE
# ----------------------------------------------------------------------------------------------
def tsne_2d(
    embeddings: np.ndarray,
    seed: int,
    perplexity: float | None = None,
    *,
    max_iter: int = 1000,
    threads: int = 1,
) -> np.ndarray:
    """2-D t-SNE coordinates ``(n, 2)`` (float64) of ``embeddings`` ``(n, dims)``, ``n >= 3``.

    ``perplexity`` (default 30) is clipped to ``(n - 1) / 3``.  ``seed`` must fit scikit-learn's
    ``random_state`` (``0 <= seed < 2**32``).
    """
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    x = _matrix(embeddings, "embeddings", np.float32)
    n = len(x)
    if n < 3:
        raise EmbeddingError(f"t-SNE needs at least 3 samples, got {n}")
    if not 0 <= int(seed) < 2**32:
        raise EmbeddingError(f"seed must be in [0, 2**32), got {seed}")
    p = 30.0 if perplexity is None else float(perplexity)
    if not p > 0:
        raise EmbeddingError(f"perplexity must be > 0, got {perplexity}")
    p = min(p, (n - 1) / 3)
    if threads < 1:
        raise EmbeddingError(f"threads must be >= 1, got {threads}")
    tsne = TSNE(
        n_components=2,
        perplexity=p,
        init="pca",
        learning_rate="auto",
        max_iter=max_iter,
        random_state=int(seed),
        n_jobs=threads,
    )
    with threadpool_limits(limits=threads):
        out = tsne.fit_transform(x)
    return np.asarray(out, dtype=np.float64)


def tsne_joint(
    embeddings_by_model: Mapping[str, np.ndarray], seed: int, perplexity: float | None = None, **kw: Any
) -> dict[str, np.ndarray]:
    """One t-SNE of all models' embeddings stacked (same dims), split back per model, in order."""
    if not embeddings_by_model:
        raise EmbeddingError("no embeddings given")
    mats = {k: _matrix(v, f"embeddings[{k!r}]", np.float32) for k, v in embeddings_by_model.items()}
    dims = {m.shape[1] for m in mats.values()}
    if len(dims) != 1:
        raise EmbeddingError(f"a joint t-SNE needs equal embedding sizes, got {sorted(dims)}")
    points = tsne_2d(np.concatenate(list(mats.values())), seed, perplexity, **kw)
    out: dict[str, np.ndarray] = {}
    start = 0
    for k, m in mats.items():
        out[k] = points[start : start + len(m)]
        start += len(m)
    return out


# ----------------------------------------------------------------------------------------------
# MMD
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MMDResult:
    """Observed MMD^2, its permutation p-value and the null range (min, max)."""

    mmd: float
    p_value: float
    null_low: float
    null_high: float
    n_permutations: int
    bandwidth: float = math.nan


def _pooled(x: Any, y: Any) -> tuple[np.ndarray, int]:
    a, b = _matrix(x, "x"), _matrix(y, "y")
    if a.shape[1] != b.shape[1]:
        raise EmbeddingError(f"x has {a.shape[1]} dims, y {b.shape[1]}")
    if len(a) < 2 or len(b) < 2:
        raise EmbeddingError(f"MMD needs at least 2 samples per side, got {len(a)} and {len(b)}")
    z = np.concatenate([a, b])
    return z - z.mean(axis=0), len(a)


def median_bandwidth(z: np.ndarray) -> float:
    """Median Euclidean distance between distinct rows of ``z`` (subsampled evenly; 1.0 if 0)."""
    from scipy.spatial.distance import pdist

    pts = np.asarray(z, dtype=np.float64)
    if len(pts) > MEDIAN_MAX_POINTS:
        pts = pts[np.linspace(0, len(pts) - 1, MEDIAN_MAX_POINTS).round().astype(np.int64)]
    med = float(np.median(pdist(pts))) if len(pts) > 1 else 0.0
    return med if med > 0 else 1.0


def _kernel_matmul(z: np.ndarray, sigma: float, v: np.ndarray) -> np.ndarray:
    """``K @ v`` for the Gaussian kernel matrix of the rows of ``z``, block by block (diag exactly 1)."""
    n = len(z)
    gamma = 1.0 / (2.0 * sigma * sigma)
    sq = np.einsum("ij,ij->i", z, z)
    out = np.empty((n, v.shape[1]), dtype=np.float64)
    block = max(1, min(n, _BLOCK_ELEMS // max(n, 1)))
    for s in range(0, n, block):
        e = min(n, s + block)
        d2 = sq[s:e, None] + sq[None, :] - 2.0 * (z[s:e] @ z.T)
        np.maximum(d2, 0.0, out=d2)
        r = np.arange(e - s)
        d2[r, s + r] = 0.0
        np.exp(-gamma * d2, out=d2)
        out[s:e] = d2 @ v
    return out


def _mmd_from_products(a: np.ndarray, ka: np.ndarray, k1: np.ndarray, biased: bool) -> np.ndarray:
    """MMD^2 per column of membership matrix ``a`` (1 = in x) given ``K @ a`` and ``K @ 1``."""
    b = 1.0 - a
    kb = k1[:, None] - ka
    m = a.sum(axis=0)
    n = b.sum(axis=0)
    sxx = (a * ka).sum(axis=0)
    syy = (b * kb).sum(axis=0)
    sxy = (a * kb).sum(axis=0)
    if biased:
        return np.asarray(sxx / m**2 + syy / n**2 - 2.0 * sxy / (m * n))
    # the kernel diagonal is exactly 1: remove it from the within-sample sums
    return np.asarray((sxx - m) / (m * (m - 1)) + (syy - n) / (n * (n - 1)) - 2.0 * sxy / (m * n))


def mmd_rbf(x: np.ndarray, y: np.ndarray, bandwidth: float | None = None, *, biased: bool = False) -> float:
    """MMD^2 between samples ``x`` (m, d) and ``y`` (n, d) with a Gaussian kernel (see module doc)."""
    z, m = _pooled(x, y)
    sigma = median_bandwidth(z) if bandwidth is None else float(bandwidth)
    if not (math.isfinite(sigma) and sigma > 0):
        raise EmbeddingError(f"bandwidth must be > 0, got {bandwidth}")
    a = np.zeros((len(z), 1))
    a[:m, 0] = 1.0
    prod = _kernel_matmul(z, sigma, np.concatenate([a, np.ones((len(z), 1))], axis=1))
    return float(_mmd_from_products(a, prod[:, :1], prod[:, 1], biased)[0])


def mmd_permutation_test(
    x: np.ndarray,
    y: np.ndarray,
    n_permutations: int = 100,
    seed: int = 0,
    *,
    bandwidth: float | None = None,
    biased: bool = False,
) -> MMDResult:
    """Permutation test of ``MMD^2(x, y)``: reassign the pooled rows to sides of the same sizes.

    The bandwidth (median heuristic on the pooled sample unless given) is fixed across
    permutations, since pooling does not depend on the assignment.  Permutations come from
    :func:`pmcflow.seeding.rng_for` ``(seed, "mmd_permutation", "null")``.
    """
    if isinstance(n_permutations, bool) or int(n_permutations) < 1:
        raise EmbeddingError(f"n_permutations must be >= 1, got {n_permutations}")
    n_perm = int(n_permutations)
    z, m = _pooled(x, y)
    sigma = median_bandwidth(z) if bandwidth is None else float(bandwidth)
    if not (math.isfinite(sigma) and sigma > 0):
        raise EmbeddingError(f"bandwidth must be > 0, got {bandwidth}")
    total = len(z)
    rng = rng_for(seed, "mmd_permutation", "null")
    a = np.zeros((total, n_perm + 1))
    a[:m, 0] = 1.0
    for j in range(1, n_perm + 1):
        a[rng.permutation(total)[:m], j] = 1.0
    prod = _kernel_matmul(z, sigma, np.concatenate([a, np.ones((total, 1))], axis=1))
    values = _mmd_from_products(a, prod[:, :-1], prod[:, -1], biased)
    observed, null = float(values[0]), values[1:]
    p = (1.0 + float(np.sum(null >= observed))) / (1.0 + n_perm)
    return MMDResult(
        mmd=observed,
        p_value=p,
        null_low=float(null.min()),
        null_high=float(null.max()),
        n_permutations=n_perm,
        bandwidth=sigma,
    )


# ----------------------------------------------------------------------------------------------
# Plot
# ----------------------------------------------------------------------------------------------
def plot_tsne(
    points_by_model: Mapping[str, np.ndarray],
    labels: Sequence[Any] | np.ndarray | None,
    path: str | Path,
    *,
    title: str | None = None,
    point_size: float = 4.0,
    dpi: int = 120,
) -> Path:
    """Write a PNG with one scatter panel per model (same axis limits), coloured by ``labels``.

    ``labels`` gives one label per point, shared by every model (the same samples embedded by
    each encoder), or ``None`` for a single colour.  Label groups are drawn in sorted order of
    their string form; a legend is shown for up to 20 labels.  The file is written atomically and
    its bytes are reproducible for the same inputs and matplotlib build.
    """
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pmcflow.mplfonts import ensure_bundled_fonts

    if not points_by_model:
        raise EmbeddingError("no points to plot")
    pts = {k: _matrix(v, f"points[{k!r}]") for k, v in points_by_model.items()}
    for k, v in pts.items():
        if v.shape[1] != 2:
            raise EmbeddingError(f"points[{k!r}] must be (n, 2), got {v.shape}")
    lab = None if labels is None else np.asarray([str(v) for v in labels], dtype=object)
    if lab is not None:
        bad = {k: len(v) for k, v in pts.items() if len(v) != len(lab)}
        if bad:
            raise EmbeddingError(f"{len(lab)} labels but point counts {bad}")
    classes = sorted(set(lab.tolist())) if lab is not None else [""]

    ensure_bundled_fonts()
    fig = Figure(figsize=(4.2 * len(pts), 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    if len(classes) <= 10:
        colors = [colormaps["tab10"](i) for i in range(len(classes))]
    elif len(classes) <= 20:
        colors = [colormaps["tab20"](i) for i in range(len(classes))]
    else:
        colors = [colormaps["turbo"](i / (len(classes) - 1)) for i in range(len(classes))]
    allpts = np.concatenate(list(pts.values()))
    lo, hi = (allpts.min(axis=0), allpts.max(axis=0)) if len(allpts) else (np.zeros(2), np.ones(2))
    pad = np.maximum((hi - lo) * 0.05, 1e-9)
    axes = fig.subplots(1, len(pts), squeeze=False)[0]
    for ax, (name, p) in zip(axes, pts.items(), strict=True):
        for cls, color in zip(classes, colors, strict=True):
            sel = slice(None) if lab is None else lab == cls
            ax.scatter(p[sel, 0], p[sel, 1], s=point_size, color=color, label=cls or None, linewidths=0)
        ax.set_xlim(lo[0] - pad[0], hi[0] + pad[0])
        ax.set_ylim(lo[1] - pad[1], hi[1] + pad[1])
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(str(name))
    if lab is not None and len(classes) <= 20:
        axes[-1].legend(loc="best", fontsize="small", markerscale=2.0, frameon=False)
    if title:
        fig.suptitle(title)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp, open(tmp, "wb") as fh:
        fig.savefig(fh, format="png", dpi=dpi, metadata={"Software": None})
    return target
