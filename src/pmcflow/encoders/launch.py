"""Run ``open_clip_train.main`` with a reproducible sample order (``python -m pmcflow.encoders.launch ARGS``).

open_clip seeds its model init and its shard shuffle from ``--seed``, but the within-shard sample
shuffle (``webdataset.shuffle``) draws its generator from ``pid + time``: two runs with the same seed
see the batches in a different order and end with different weights.  This entry point replaces that
stage with one whose generator comes from ``--seed``, the distributed rank, the dataloader worker
and how many times this process has started the stage (once per epoch), then hands the unchanged
argument list to open_clip.  Everything else is open_clip's own code.

``torchrun ... -m pmcflow.encoders.launch ARGS`` works the same way (``RANK`` gives the rank).

Load-time text composition (``train.text_fields``): ``--pmcflow-text-fields=<json list>`` and
``--pmcflow-text-separator=<json string>`` are removed from the argument list before open_clip sees
it; with them, the pipeline open_clip builds (``get_wds_dataset``: select, decode, ``rename(...,
text="txt")``, tokenize) sets each sample's ``txt`` from its ``<field>.txt`` members with
:func:`pmcflow.shard.compose_text` just before the rename, and skips samples whose composition is
empty (as the shard stage rejects them).  Train and val samples alike.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
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


TEXT_FIELDS_FLAG = "--pmcflow-text-fields"
TEXT_SEPARATOR_FLAG = "--pmcflow-text-separator"


def text_args(fields: Sequence[str], separator: str = " ") -> list[str]:
    """The launch-only arguments that make the training text a load-time composition of ``fields``."""
    return [
        f"{TEXT_FIELDS_FLAG}={json.dumps(list(fields))}",
        f"{TEXT_SEPARATOR_FLAG}={json.dumps(separator)}",
    ]


def pop_text_args(argv: Sequence[str]) -> tuple[list[str], list[str] | None, str]:
    """(argv without the launch-only text arguments, the text fields or None, the separator)."""
    rest: list[str] = []
    fields: list[str] | None = None
    separator = " "
    for a in argv:
        if a.startswith(TEXT_FIELDS_FLAG + "="):
            fields = [str(f) for f in json.loads(a.split("=", 1)[1])] or None
        elif a.startswith(TEXT_SEPARATOR_FLAG + "="):
            separator = str(json.loads(a.split("=", 1)[1]))
        else:
            rest.append(a)
    return rest, fields, separator


Stage = Callable[[Iterable[dict[str, Any]]], Iterator[dict[str, Any]]]


def compose_stage(fields: Sequence[str], separator: str = " ") -> Stage:
    """A webdataset pipeline stage: ``sample["txt"]`` = the composition of its ``<field>.txt`` members
    (decoded text or raw bytes); samples whose composition is empty are skipped."""
    from pmcflow.schema import text_member
    from pmcflow.shard import compose_text

    names = [(f, text_member(f)) for f in fields]
    names_only = [f for f, _ in names]

    def stage(data: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for sample in data:
            row = {}
            for f, member in names:
                value = sample.get(member)
                row[f] = value.decode("utf-8") if isinstance(value, bytes | bytearray) else value
            text = compose_text(row, names_only, separator)
            if text:
                sample["txt"] = text
                yield sample

    return stage


def install_text(fields: Sequence[str], separator: str = " ") -> None:
    """Make every ``webdataset.rename(..., text="txt")`` (open_clip_train.data's) compose the text first."""
    import webdataset
    import webdataset.filters as wf

    original = getattr(wf.rename, "_pmcflow_original", wf.rename)
    compose = compose_stage(fields, separator)

    def rename(*args: Any, **kw: Any) -> Any:
        renamer = original(*args, **kw)
        if "txt" not in kw.values():
            return renamer
        return lambda data: renamer(compose(data))

    rename._pmcflow_original = original  # type: ignore[attr-defined]
    webdataset.rename = rename
    wf.rename = rename


def main(argv: Sequence[str] | None = None) -> None:
    args, fields, separator = pop_text_args(list(sys.argv[1:] if argv is None else argv))
    install(seed_from_argv(args))
    if fields:
        install_text(fields, separator)
    from open_clip_train.main import main as open_clip_main

    open_clip_main(args)


if __name__ == "__main__":
    main()
