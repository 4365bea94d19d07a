"""Retrieval robustness: low-level perturbations of test images and paired statistics.

Open-PMC-18M (section 3.3-3.4) perturbs the **test images** of each retrieval benchmark with
brightness changes, spatial shifts, rotations, horizontal flips and zoom, re-runs retrieval, and
reports robustness as the ratio ``perturbed / original`` performance, with a Wilcoxon signed-rank
test (significant at ``p < 0.01``) for paired comparisons.

**Perturbations** (PIL image in, new PIL image out, no randomness; the input is not modified).
Images in modes ``L``, ``RGB`` and ``RGBA`` keep their mode; any other mode is converted to ``RGB``
first.  The output always has the input's size.

=============  =================================================================================
``brightness`` ``factor`` > 0: ``PIL.ImageEnhance.Brightness`` (blend with black; 1 = identity,
               0.5 halves every channel, > 1 brightens and saturates at 255).
``shift``      ``fraction`` in (-1, 1): content moves right *and* down by ``round(fraction * width)``
               and ``round(fraction * height)`` pixels (negative: left and up); the uncovered
               border is black.  Integer pixel moves, no resampling.
``rotation``   ``degrees`` (finite): counter-clockwise about the centre, same canvas, bilinear
               resampling, black corners (PIL ``Image.rotate``; multiples of 90 on a square image
               are exact transposes).
``flip``       strength must be ``1``: left-right mirror.
``zoom``       ``factor`` > 0: ``>= 1`` crops the central ``1/factor`` of each side and resizes it
               back (bilinear); ``< 1`` shrinks the image by ``factor`` and centres it on black.
               1 = identity.
=============  =================================================================================

**Statistics** on per-query scores (e.g. hit@K as 0/1 or reciprocal rank), paired by query:

* :func:`paired_bootstrap_delta` -- mean of ``perturbed - base`` with a percentile bootstrap CI
  over queries (one resampled index set for both arms, so the pairing is kept);
* :func:`wilcoxon_signed_rank` -- ``scipy.stats.wilcoxon`` on the paired differences, two-sided.
  ``zero_method="wilcox"`` (default) drops zero differences -- queries on which both arms agree
  carry no information about the direction -- as in Wilcoxon (1945); ``"pratt"`` and
  ``"zsplit"`` are passed through.  scipy's ``method="auto"``: exact null distribution for up to
  50 non-zero differences without ties, exhaustive permutations for up to 13 with ties, otherwise
  the normal approximation with tie correction (no continuity correction).  When every difference
  is zero the answer is ``(0.0, 1.0)`` directly (scipy would return NaN with a warning);
* :func:`robustness_rows` -- long-format rows per perturbation for the metrics table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from PIL import Image, ImageEnhance

from pmcflow.encoders.evaluate import bootstrap_means
from pmcflow.seeding import derive_seed

KEEP_MODES = ("L", "RGB", "RGBA")
DEFAULT_ALPHA = 0.01


class RobustnessError(ValueError):
    """An unknown perturbation, an invalid strength or malformed scores."""


class Perturbation(NamedTuple):
    """One perturbation at one strength; ``label`` is ``"name=strength"``."""

    name: str
    strength: float

    @property
    def label(self) -> str:
        return f"{self.name}={self.strength:g}"


def _prepare(image: Image.Image) -> Image.Image:
    return image if image.mode in KEEP_MODES else image.convert("RGB")


def _black(image: Image.Image) -> Any:
    return 0 if len(image.getbands()) == 1 else (0,) * len(image.getbands())


def brightness(image: Image.Image, factor: float) -> Image.Image:
    """Scale brightness by ``factor`` (a blend with black; the alpha channel is kept)."""
    return ImageEnhance.Brightness(_prepare(image)).enhance(float(factor))


def shift(image: Image.Image, fraction: float) -> Image.Image:
    """Move the content by ``fraction`` of the width (right) and of the height (down); black fill."""
    im = _prepare(image)
    dx, dy = round(fraction * im.width), round(fraction * im.height)
    out = Image.new(im.mode, im.size, _black(im))
    out.paste(im, (dx, dy))
    return out


def rotation(image: Image.Image, degrees: float) -> Image.Image:
    """Rotate counter-clockwise by ``degrees`` about the centre on the same canvas; black corners."""
    im = _prepare(image)
    return im.rotate(float(degrees), resample=Image.Resampling.BILINEAR, expand=False, fillcolor=_black(im))


def flip(image: Image.Image, strength: float = 1.0) -> Image.Image:
    """Mirror left-right (``strength`` must be 1: a flip has no degree)."""
    _check_flip(strength)
    return _prepare(image).transpose(Image.Transpose.FLIP_LEFT_RIGHT)


def zoom(image: Image.Image, factor: float) -> Image.Image:
    """Zoom about the centre by ``factor`` keeping the size: crop+resize in, shrink+pad (black) out."""
    im = _prepare(image)
    w, h = im.size
    f = float(factor)
    if f >= 1.0:
        cw, ch = w / f, h / f
        box = ((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)
        return im.resize((w, h), Image.Resampling.BILINEAR, box=box)
    sw, sh = max(1, round(w * f)), max(1, round(h * f))
    small = im.resize((sw, sh), Image.Resampling.BILINEAR)
    out = Image.new(im.mode, im.size, _black(im))
    out.paste(small, ((w - sw) // 2, (h - sh) // 2))
    return out


def _check_brightness(v: float) -> None:
    if not v > 0:
        raise RobustnessError(f"brightness factor must be > 0, got {v}")


def _check_shift(v: float) -> None:
    if not -1 < v < 1:
        raise RobustnessError(f"shift fraction must be in (-1, 1), got {v}")


def _check_rotation(v: float) -> None:
    pass  # any finite angle (finiteness is checked for every perturbation)


def _check_flip(v: float) -> None:
    if v != 1:
        raise RobustnessError(f"flip takes no strength; give 1, got {v}")


def _check_zoom(v: float) -> None:
    if not v > 0:
        raise RobustnessError(f"zoom factor must be > 0, got {v}")


@dataclass(frozen=True)
class PerturbationSpec:
    """A registered perturbation: how to apply it and which strengths it accepts."""

    name: str
    apply: Callable[[Image.Image, float], Image.Image]
    check: Callable[[float], None]
    strength_meaning: str


PERTURBATIONS: dict[str, PerturbationSpec] = {
    s.name: s
    for s in (
        PerturbationSpec("brightness", brightness, _check_brightness, "factor > 0 (1 = unchanged)"),
        PerturbationSpec("shift", shift, _check_shift, "fraction of width/height in (-1, 1)"),
        PerturbationSpec("rotation", rotation, _check_rotation, "degrees, counter-clockwise"),
        PerturbationSpec("flip", flip, _check_flip, "1 (horizontal mirror)"),
        PerturbationSpec("zoom", zoom, _check_zoom, "factor > 0 (1 = unchanged, > 1 zooms in)"),
    )
}


def _strength(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise RobustnessError(f"{name}: strength must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise RobustnessError(f"{name}: strength must be finite, got {value!r}")
    PERTURBATIONS[name].check(v)
    return v


def _spec(name: str) -> PerturbationSpec:
    try:
        return PERTURBATIONS[name]
    except KeyError:
        raise RobustnessError(f"unknown perturbation {name!r}; known: {sorted(PERTURBATIONS)}") from None


def perturb(image: Image.Image, name: str, strength: float) -> Image.Image:
    """Apply the registered perturbation ``name`` at ``strength`` (validated) to ``image``."""
    spec = _spec(name)
    return spec.apply(image, _strength(name, strength))


def parse_perturbations(config: Mapping[str, Sequence[float] | float]) -> list[Perturbation]:
    """Validate ``{name: strength | [strengths]}`` into a list of :class:`Perturbation`.

    Order follows the mapping, then the strengths as listed.  Unknown names, non-numeric, NaN,
    out-of-range, empty or repeated strengths are errors naming the offending entry.
    """
    if not isinstance(config, Mapping):
        raise RobustnessError(
            f"perturbations must be a mapping of name -> strengths, got {type(config).__name__}"
        )
    out: list[Perturbation] = []
    for name, raw in config.items():
        spec = _spec(str(name))
        values = list(raw) if isinstance(raw, list | tuple | np.ndarray) else [raw]
        if not values:
            raise RobustnessError(f"{name}: no strengths given ({spec.strength_meaning})")
        seen: set[float] = set()
        for value in values:
            v = _strength(spec.name, value)
            if v in seen:
                raise RobustnessError(f"{name}: strength {value!r} listed twice")
            seen.add(v)
            out.append(Perturbation(spec.name, v))
    return out


# ----------------------------------------------------------------------------------------------
# Paired statistics
# ----------------------------------------------------------------------------------------------
def _paired(base: Any, perturbed: Any) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(base, dtype=np.float64)
    b = np.asarray(perturbed, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise RobustnessError(f"paired scores must be 1-D arrays of one length, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise RobustnessError("paired scores contain NaN or infinite values")
    return a, b


def paired_bootstrap_delta(
    base: np.ndarray, perturbed: np.ndarray, n_boot: int = 1000, ci: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean(perturbed - base), ci_low, ci_high)``: percentile bootstrap over paired queries.

    ``n_boot <= 0`` gives NaN bounds; no queries give NaN everywhere.
    """
    a, b = _paired(base, perturbed)
    if len(a) == 0:
        return math.nan, math.nan, math.nan
    delta = b - a
    (lo, hi) = bootstrap_means(delta[:, None], n_boot, ci, np.random.default_rng(seed))[0]
    return float(delta.mean()), lo, hi


def wilcoxon_signed_rank(a: np.ndarray, b: np.ndarray, zero_method: str = "wilcox") -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test of ``a - b``: ``(statistic, p_value)``.

    ``statistic`` is scipy's two-sided statistic, ``min(T+, T-)`` (rank sums of the positive and
    negative differences).  All-zero differences (or no pairs) give ``(0.0, 1.0)`` without calling
    scipy.  See the module docstring for the zero and tie handling.
    """
    from scipy import stats

    x, y = _paired(a, b)
    if zero_method not in ("wilcox", "pratt", "zsplit"):
        raise RobustnessError(f"zero_method must be wilcox, pratt or zsplit, got {zero_method!r}")
    d = x - y
    if not np.any(d != 0):
        return 0.0, 1.0
    res = stats.wilcoxon(d, zero_method=zero_method, alternative="two-sided", method="auto")
    return float(res.statistic), float(res.pvalue)


def robustness_rows(
    task: str,
    dataset: str,
    metric_name: str,
    base_scores: np.ndarray,
    perturbed_scores_by_name: Mapping[Perturbation | tuple[str, float], np.ndarray],
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
    alpha: float = DEFAULT_ALPHA,
) -> list[dict[str, Any]]:
    """One row per perturbation comparing its per-query scores with the unperturbed ones.

    Keys of ``perturbed_scores_by_name`` are :class:`Perturbation` (or ``(name, strength)``)
    pairs; every score array is paired query-by-query with ``base_scores``.  Row fields: task,
    dataset, perturbation, strength, metric, base and perturbed (means), ratio (``perturbed /
    base``, the paper's robustness score; NaN when base is 0), delta (``perturbed - base``) with its
    paired bootstrap CI (ci_low, ci_high), wilcoxon_stat, p_value, significant (``p < alpha``) and
    n.  Each row's bootstrap draws from its own stream derived from ``(seed, task, dataset,
    metric, perturbation, strength)``, so a row does not change when others are added.
    """
    if not 0 < alpha < 1:
        raise RobustnessError(f"alpha must be in (0, 1), got {alpha}")
    base = _paired(base_scores, base_scores)[0]
    rows: list[dict[str, Any]] = []
    for key, scores in perturbed_scores_by_name.items():
        name, strength = str(key[0]), float(key[1])
        _spec(name)
        a, b = _paired(base, scores)
        item = f"{task}\x1f{dataset}\x1f{metric_name}\x1f{name}\x1f{strength!r}"
        delta, lo, hi = paired_bootstrap_delta(a, b, n_boot, ci, derive_seed(seed, "robustness", item))
        stat, p = wilcoxon_signed_rank(b, a)
        base_mean = float(a.mean()) if len(a) else math.nan
        pert_mean = float(b.mean()) if len(b) else math.nan
        rows.append(
            {
                "task": task,
                "dataset": dataset,
                "perturbation": name,
                "strength": strength,
                "metric": metric_name,
                "base": base_mean,
                "perturbed": pert_mean,
                "ratio": pert_mean / base_mean if base_mean else math.nan,
                "delta": delta,
                "ci_low": lo,
                "ci_high": hi,
                "wilcoxon_stat": stat,
                "p_value": p,
                "significant": bool(p < alpha),
                "n": len(a),
            }
        )
    return rows
