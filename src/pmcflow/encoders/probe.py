"""Linear probing of frozen image features, and a content-addressed cache for those features.

**Protocol** (Open-PMC-18M, appendix F.3): a single linear layer is trained on frozen image
features for 40 epochs with a cosine-annealed learning rate starting at 0.1, cross-entropy loss.
The paper does not name the optimiser; :class:`ProbeSettings` defaults to SGD with momentum 0.9
(``optimizer="sgd"``), which is what an initial rate of 0.1 suits -- AdamW at 0.1 diverges on
standardised features -- and ``optimizer="adamw"`` is available for comparison.  Choices made here
and not in the paper, all configurable:

* features are standardised with the **train split's** per-dimension mean and standard deviation
  (dimensions that are constant on the train split are only centred); the same transform is
  applied to the test split, so nothing about the test split leaks into training;
* the learning rate is annealed per epoch, ``lr_e = lr * (1 + cos(pi * e / epochs)) / 2`` for
  epoch ``e = 0 .. epochs-1`` (``torch.optim.lr_scheduler.CosineAnnealingLR`` with
  ``T_max=epochs``, ``eta_min=0``, stepped once per epoch), see :func:`cosine_lr`;
* mini-batches of ``batch_size`` in a fresh seeded order every epoch; the last batch may be short;
* the weight matrix starts from ``U(-1/sqrt(d), 1/sqrt(d))`` (torch's ``nn.Linear`` default bound)
  drawn from a private generator, the bias from zero.

**Determinism**: everything random comes from a ``torch.Generator`` seeded from ``seed`` through
:func:`pmcflow.seeding.derive_seed`; the global torch/numpy random state is neither read nor
changed.  Training runs on the CPU in float32, so the same inputs, settings and seed give
bit-identical predictions and scores in the same environment (same torch build and intra-op thread
count -- a different thread count may reorder floating-point reductions).

**Feature cache**: :class:`FeatureCache` stores arrays (image features of a benchmark split under
one checkpoint and preprocessing, possibly perturbed) as ``<sha256>.npy`` named by the canonical
JSON of their key, so zero-shot evaluation, linear probes and every robustness perturbation share
one forward pass per (checkpoint, data, split, preprocessing, perturbation).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pmcflow.encoders.settings import OPTIMIZERS, ProbeError, ProbeSettings  # noqa: F401
from pmcflow.seeding import derive_seed
from pmcflow.tables import atomic_path

# The probe's settings and errors live in pmcflow.encoders.settings (no numpy there): re-exported.


@dataclass(frozen=True)
class ProbeResult:
    """Test predictions and scores of one probe, plus how training went."""

    y_pred: np.ndarray  # (n_test,) int64 class index
    test_scores: np.ndarray  # (n_test, n_classes) float64 softmax probabilities
    train_accuracy: float  # accuracy of the final layer on the (standardised) train split
    loss_curve: list[float]  # mean training cross-entropy of each epoch


def cosine_lr(epoch: int, epochs: int, lr: float) -> float:
    """Learning rate of ``epoch`` (0-based) under cosine annealing from ``lr`` to 0 over ``epochs``."""
    return lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))


def _as_features(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float32)
    if arr.ndim != 2:
        raise ProbeError(f"{name} must be a 2-D (samples, dims) array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ProbeError(f"{name} contains NaN or infinite values")
    return arr


def standardize(train_x: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """``train_x`` and ``others`` standardised with ``train_x``'s per-column mean and std (float32).

    Statistics are taken in float64; a column constant on the train split is only centred.
    """
    tr = np.asarray(train_x, dtype=np.float64)
    mean = tr.mean(axis=0)
    std = tr.std(axis=0)
    std = np.where(std > 1e-12, std, 1.0)
    return [((np.asarray(a, dtype=np.float64) - mean) / std).astype(np.float32) for a in (tr, *others)]


def linear_probe(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    settings: ProbeSettings | None = None,
    seed: int = 0,
    *,
    n_classes: int | None = None,
) -> ProbeResult:
    """Train a linear classifier on frozen ``train_x`` features and predict ``test_x``.

    ``train_y`` holds class indices ``0 .. n_classes-1`` (``n_classes`` defaults to
    ``max(train_y) + 1``; pass it when a class may be missing from the train split so the score
    columns line up with the class names).  See the module docstring for the protocol.
    """
    import torch
    import torch.nn.functional as F

    s = settings or ProbeSettings.from_section(None)
    xtr, xte = _as_features(train_x, "train_x"), _as_features(test_x, "test_x")
    ytr = np.asarray(train_y)
    if ytr.ndim != 1 or len(ytr) != len(xtr):
        raise ProbeError(f"train_y must be 1-D with one label per train row ({len(xtr)}), got {ytr.shape}")
    if len(xtr) == 0:
        raise ProbeError("train split is empty")
    if xte.shape[1] != xtr.shape[1]:
        raise ProbeError(f"test_x has {xte.shape[1]} dims, train_x {xtr.shape[1]}")
    if not np.issubdtype(ytr.dtype, np.integer):
        raise ProbeError(f"train_y must hold integer class indices, got dtype {ytr.dtype}")
    if ytr.min() < 0:
        raise ProbeError("train_y has negative class indices")
    k = int(ytr.max()) + 1 if n_classes is None else int(n_classes)
    if ytr.max() >= k:
        raise ProbeError(f"train_y has class index {int(ytr.max())} >= n_classes={k}")
    if k < 2:
        raise ProbeError(f"a probe needs at least 2 classes, got {k}")

    if s.standardize:
        xtr, xte = standardize(xtr, xte)
    n, d = xtr.shape
    gen = torch.Generator().manual_seed(derive_seed(seed, "linear_probe", "init") % 2**63)
    bound = 1.0 / math.sqrt(d)
    weight = (torch.rand((k, d), generator=gen, dtype=torch.float32) * 2 - 1) * bound
    weight.requires_grad_(True)
    bias = torch.zeros(k, dtype=torch.float32, requires_grad=True)
    params = [weight, bias]
    opt: torch.optim.Optimizer
    if s.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay)
    else:
        opt = torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay)

    xt = torch.from_numpy(xtr)
    yt = torch.from_numpy(ytr.astype(np.int64))
    losses: list[float] = []
    for epoch in range(s.epochs):
        for group in opt.param_groups:
            group["lr"] = cosine_lr(epoch, s.epochs, s.lr)
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, s.batch_size):
            idx = order[start : start + s.batch_size]
            loss = F.cross_entropy(xt[idx] @ weight.T + bias, yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / n)
        if not math.isfinite(losses[-1]):
            raise ProbeError(f"training diverged at epoch {epoch} (loss {losses[-1]}); lower lr")

    with torch.no_grad():
        train_logits = (xt @ weight.T + bias).numpy().astype(np.float64)
        test_logits = (torch.from_numpy(xte) @ weight.T + bias).numpy().astype(np.float64)
    train_acc = float((train_logits.argmax(axis=1) == ytr).mean())
    z = test_logits - test_logits.max(axis=1, keepdims=True) if len(test_logits) else test_logits
    probs = np.exp(z)
    probs /= np.maximum(probs.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
    y_pred = test_logits.argmax(axis=1).astype(np.int64) if len(test_logits) else np.zeros(0, np.int64)
    return ProbeResult(y_pred=y_pred, test_scores=probs, train_accuracy=train_acc, loss_curve=losses)


# ----------------------------------------------------------------------------------------------
# Feature cache
# ----------------------------------------------------------------------------------------------
def canonical_key(key_parts: Mapping[str, Any]) -> str:
    """Canonical JSON of a cache key: sorted keys, no whitespace, no NaN/Infinity, UTF-8 text."""
    if not key_parts:
        raise ProbeError("a feature-cache key needs at least one part")
    try:
        return json.dumps(
            key_parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise ProbeError(
            f"feature-cache key is not plain JSON (str/int/float/bool/None/list/dict): {exc}"
        ) from exc


def key_digest(key_parts: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of :func:`canonical_key`."""
    return hashlib.sha256(canonical_key(key_parts).encode("utf-8")).hexdigest()


class FeatureCache:
    """Arrays on disk under ``root``, addressed by the SHA-256 of their key's canonical JSON.

    A key should name everything the features depend on, for example::

        {"checkpoint_sha256": ..., "benchmark": "quilt", "files_sha256": {...}, "split": "test",
         "preprocess": "ViT-B-16/224/bicubic", "perturbation": ["rotation", 15.0], "kind": "image"}

    Each entry is ``<digest>.npy`` plus ``<digest>.json`` holding the canonical key (for people
    inspecting the folder).  Both are written to a temporary sibling and renamed into place
    (:func:`pmcflow.tables.atomic_path`), the array last, so a reader never sees a partial array
    and concurrent writers of one key each publish a complete file.  ``hits`` and ``misses``
    count :meth:`get_or_compute` calls answered from disk and computed, respectively.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0

    def path_for(self, key_parts: Mapping[str, Any]) -> Path:
        """Where the array of ``key_parts`` lives (whether or not it exists yet)."""
        return self.root / f"{key_digest(key_parts)}.npy"

    def __contains__(self, key_parts: Mapping[str, Any]) -> bool:
        return self.path_for(key_parts).is_file()

    def get_or_compute(self, key_parts: Mapping[str, Any], compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The cached array of ``key_parts``, or ``compute()``'s result after storing it.

        An entry that cannot be read back as an array (a file truncated outside this class) is
        recomputed and replaced.  Object arrays are refused: the cache loads with
        ``allow_pickle=False``.
        """
        path = self.path_for(key_parts)
        if path.is_file():
            try:
                arr = np.load(path, allow_pickle=False)
            except (ValueError, EOFError, OSError):
                arr = None
            if arr is not None:
                self.hits += 1
                return arr
        arr = np.asarray(compute())
        if arr.dtype.hasobject:
            raise ProbeError(f"compute() returned an object array for {canonical_key(key_parts)}")
        self.root.mkdir(parents=True, exist_ok=True)
        with atomic_path(path.with_suffix(".json")) as tmp:
            tmp.write_text(canonical_key(key_parts) + "\n", encoding="utf-8")
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)
        self.misses += 1
        return arr
