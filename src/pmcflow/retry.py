"""Pending retries: articles whose acquisition failed for a transient reason come back by themselves.

``acquire_chunk`` writes such articles to ``<results>/acquire/<chunk>/pending.parquet`` and counts
them under ``pending`` in the chunk's ``counts.json``.  The workflow gives every ``acquire_chunk``
job one more input, :func:`retry_stamp`: a file that no rule writes.  When the chunk's counts say
articles are pending, the stamp is touched while Snakemake builds its plan, so it is newer than the
chunk's outputs (and its content differs from what Snakemake recorded) and the next plain
``snakemake`` run re-acquires the chunk (Snakemake's mtime trigger) and rebuilds whatever depends
on it.  A chunk with nothing pending keeps an old stamp and is not touched.

Standard library only: the Snakefile loads this file directly (like ``closure.py``), so the
Snakemake process needs no pmcflow install; the results layout comes from ``layout.py`` beside it,
loaded the same way.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

STAMP_DIR = ".stamps"  # <results>/.stamps/: workflow bookkeeping, not data


def _sibling(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_LAYOUT = _sibling("_pmcflow_retry_layout", Path(__file__).parent / "layout.py")  # pmcflow.layout
_ACQUIRE_COUNTS: str = _LAYOUT.chunk_counts("acquire")


def chunk_counts_path(results: str | os.PathLike[str], chunk: str) -> Path:
    return Path(results) / _ACQUIRE_COUNTS.format(chunk=chunk)


def pending_of(counts_path: str | os.PathLike[str]) -> int:
    """Articles pending a retry according to one acquire ``counts.json`` (0 when absent or unreadable)."""
    try:
        with open(counts_path, encoding="utf-8") as fh:
            rec = json.load(fh)
    except (OSError, ValueError):
        return 0
    return int(sum(int(v) for v in (rec.get("pending") or {}).values()))


def _stamp(results: str | os.PathLike[str], name: str) -> Path:
    """``<results>/.stamps/<name>.stamp``, created with mtime 0 when missing: a stamp no rule writes
    never makes its rule out of date until it is rewritten."""
    stamp = Path(results) / STAMP_DIR / f"{name}.stamp"
    if not stamp.exists():
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(f"{name}: rewritten when its rule must rerun\n")
        os.utime(stamp, (0, 0))
    return stamp


def retry_stamp(results: str | os.PathLike[str], chunk: str) -> str:
    """The chunk's retry stamp (created with mtime 0 when missing), touched when articles are pending.

    Touched only when it is not already newer than the chunk's counts, so evaluating the plan twice
    (a dry run, then the run) does not matter, and a chunk re-acquired with nothing left pending is
    up to date afterwards.
    """
    stamp = _stamp(results, f"acquire-retry-{chunk}")
    counts = chunk_counts_path(results, chunk)
    n = pending_of(counts)
    if n:
        written = counts.stat().st_mtime
        if stamp.stat().st_mtime <= written:
            # New content as well as a new mtime: Snakemake ignores a newer input whose checksum
            # equals the one it recorded.  An explicit time, strictly after the counts (file
            # systems with coarse clocks could otherwise give both the same mtime).
            stamp.write_text(
                f"retry of acquire chunk {chunk}: {n} article(s) pending as of {counts.stat().st_mtime_ns}\n"
            )
            t = max(time.time(), written + 1e-3)
            os.utime(stamp, (t, t))
    return str(stamp)


def presence_stamp(results: str | os.PathLike[str], name: str, required: list[str]) -> str:
    """A stamp rewritten while any of ``required`` is missing, so the rule that has it as an input
    reruns (and with it the rule that produces the missing files).

    Snakemake accepts a missing intermediate file as long as what was built from it is up to date;
    for files that later tables point to (the decompose crops), that would leave dangling pointers
    after a killed rerun.  Created with mtime 0; untouched while everything required exists.
    """
    stamp = _stamp(results, name)
    missing = [p for p in required if not Path(p).exists()]
    if missing:
        stamp.write_text(f"{name}: missing {', '.join(missing)} (plan at {time.time_ns()})\n")
    return str(stamp)


def pending_by_chunk(results: str | os.PathLike[str]) -> dict[str, int]:
    """``{chunk: n}`` for every acquired chunk with articles pending a retry."""
    out: dict[str, int] = {}
    for counts in sorted(Path(results).glob(_LAYOUT.chunk_glob(_ACQUIRE_COUNTS))):
        n = pending_of(counts)
        if n:
            out[counts.parent.name] = n
    return out


def summary_line(results: str | os.PathLike[str]) -> str:
    """One line for the end of a run: nothing lost in silence."""
    pend = pending_by_chunk(results)
    if not pend:
        return "pmcflow: no article is pending a retry."
    chunks = ", ".join(f"{c} ({n})" for c, n in pend.items())
    return (
        f"pmcflow: {sum(pend.values())} article(s) in {len(pend)} chunk(s) failed for a transient reason "
        f"and are pending a retry: {chunks}. The next `snakemake` run (or `pmcflow retry-failed`) "
        f"re-acquires them; see <results>/{_LAYOUT.shown(_LAYOUT.ACQUIRE_PENDING)}."
    )
