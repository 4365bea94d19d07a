"""Deterministic random streams: every choice derives from ``(seed, stage, item)``.

One place for the project's seeded hashing. Nothing touches global random state (``random``,
``np.random.seed``): each item gets its own value or :class:`numpy.random.Generator` from a hash of
its identity, so item ``i`` comes out the same whether it is processed alone, in a batch, or in
any shard of a job array.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np


def seed_digest(seed: int | str, stage: str, item: int | str) -> bytes:
    """SHA-256 of ``(seed, stage, item)``: stable across runs, processes and platforms."""
    return hashlib.sha256(f"{seed}\x1f{stage}\x1f{item}".encode()).digest()


def derive_seed(seed: int | str, stage: str, item: int | str) -> int:
    """A 128-bit integer seed from ``(seed, stage, item)``."""
    return int.from_bytes(seed_digest(seed, stage, item)[:16], "little")


def unit_uniform(seed: int | str, stage: str, item: int | str) -> float:
    """A uniform draw in [0, 1) from ``(seed, stage, item)`` (64 bits)."""
    return int.from_bytes(seed_digest(seed, stage, item)[:8], "big") / 2.0**64


def rng_for(seed: int | str, stage: str, item: int | str) -> np.random.Generator:
    """A fresh PCG64 generator for one item of one stage."""
    return np.random.Generator(np.random.PCG64(derive_seed(seed, stage, item)))


def seeded_subset(seed: int | str, stage: str, items: Sequence[int | str], n: int) -> list[int]:
    """Positions of a seeded subset of ``min(n, len(items))`` of ``items``, in increasing order: the
    ``n`` with the smallest ``seed_digest(seed, stage, item)``, so an item's membership depends only
    on its own identity (adding unrelated items moves few of them)."""
    order = sorted(range(len(items)), key=lambda i: seed_digest(seed, stage, items[i]))
    return sorted(order[:n])
