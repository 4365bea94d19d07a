"""Run ``open_clip_train.main`` with a reproducible sample order (``python -m pmcflow.encoders.launch ARGS``).

open_clip seeds its model init and its shard shuffle from ``--seed``, but the within-shard sample
shuffle (``webdataset.shuffle``) draws its generator from ``pid + time``: two runs with the same seed
see the batches in a different order and end with different weights.  This entry point replaces that
stage with one whose generator comes from ``--seed``, the distributed rank, the dataloader worker
and how many times this process has started the stage (once per epoch), then hands the unchanged
argument list to open_clip.  Everything else is open_clip's own code.

``torchrun ... -m pmcflow.encoders.launch ARGS`` works the same way (``RANK`` gives the rank).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

_calls = itertools.count()


def seed_from_argv(argv: Sequence[str], default: int = 0) -> int:
    """The value of ``--seed N`` / ``--seed=N`` in an open_clip argument list."""
    for i, a in enumerate(argv):
        if a == "--seed" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--seed="):
            return int(a.split("=", 1)[1])
    return default


def stream_seed(seed: int, rank: int, worker: int, call: int) -> int:
    """A 64-bit seed for one shuffle stream (stable across Python versions and platforms)."""
    key = f"pmcflow-wds-shuffle:{seed}:{rank}:{worker}:{call}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def _worker_id() -> int:
    try:
        from torch.utils.data import get_worker_info
    except ImportError:  # pragma: no cover - torch is a dependency
        return 0
    info = get_worker_info()
    return int(info.id) if info is not None else 0


def seeded_shuffle(seed: int) -> Any:
    """A drop-in for ``webdataset.shuffle`` whose default generator is derived from ``seed``."""
    import webdataset.filters as wf

    original = wf._shuffle

    def _shuffle(
        data: Iterable[Any], bufsize: int = 1000, initial: int = 100, rng: Any = None, handler: Any = None
    ) -> Iterator[Any]:
        if rng is None:
            rank = int(os.environ.get("RANK", "0"))
            rng = random.Random(stream_seed(seed, rank, _worker_id(), next(_calls)))
        return original(data, bufsize, initial, rng=rng, handler=handler)

    return wf.pipelinefilter(_shuffle)


def install(seed: int) -> None:
    """Make ``webdataset.shuffle`` (as open_clip_train.data calls it) reproducible from ``seed``."""
    import webdataset
    import webdataset.filters as wf

    stage = seeded_shuffle(seed)
    webdataset.shuffle = stage
    wf.shuffle = stage


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    install(seed_from_argv(args))
    from open_clip_train.main import main as open_clip_main

    open_clip_main(args)


if __name__ == "__main__":
    main()
