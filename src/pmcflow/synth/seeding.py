"""Deterministic random streams: every choice derives from ``(seed, stage, item)``.

Nothing in :mod:`pmcflow.synth` touches global random state (``random``, ``np.random.seed``);
each figure gets its own :class:`numpy.random.Generator` from a hash of its identity, so figure
``i`` is the same whether it is rendered alone, in a batch, or in any shard of a job array.
"""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(seed: int | str, stage: str, item: int | str) -> int:
    """A 128-bit integer seed from ``(seed, stage, item)`` (SHA-256, stable across platforms)."""
    key = f"{seed}\x1f{stage}\x1f{item}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:16], "little")


def rng_for(seed: int | str, stage: str, item: int | str) -> np.random.Generator:
    """A fresh PCG64 generator for one item of one stage."""
    return np.random.Generator(np.random.PCG64(derive_seed(seed, stage, item)))
