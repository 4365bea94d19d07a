"""Writing tables and stage counts: atomic, deterministic, reconciled.

Every stage ends with :func:`write_stage` (or the pieces it is made of): its Parquet tables,
its rejection rows and a ``counts.json`` holding ``in``, ``kept`` and ``rejected`` by reason.
``in == kept + sum(rejected.values())`` is checked before anything is written, so a stage that
loses an item fails loudly instead of publishing counts that do not add up.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pmcflow import layout
from pmcflow import schema as S
from pmcflow.runlock import pid_alive

PARQUET_KW: dict[str, Any] = {"compression": "zstd", "use_dictionary": True, "write_statistics": True}


class CountsMismatch(RuntimeError):
    """Raised when a stage's counts do not reconcile (in != kept + rejected)."""


_HOST = socket.gethostname()
# ``.<name>.tmp-<pid>@<host>.<random>``: who made a temporary sibling, so a later writer can tell a
# crashed writer's leftover (pid gone on this host) from a live one.
_TMP_RX = re.compile(r"\.tmp-(?P<pid>\d+)@(?P<host>.*)\.[A-Za-z0-9_]+$")


def remove_stale_temps(parent: str | os.PathLike[str], name: str) -> list[Path]:
    """Remove ``.<name>.tmp-*`` siblings left in ``parent`` by writers that died (SIGKILL, OOM, node loss).

    A temporary made by a process still alive on this host is left alone; one made on another host
    is left alone too unless it predates this naming (no ``pid@host`` tag).  Returns what was removed.
    """
    removed: list[Path] = []
    d = Path(parent)
    if not d.is_dir():
        return removed
    for p in d.glob(f".{glob.escape(name)}.tmp-*"):
        m = _TMP_RX.search(p.name)
        if m is not None and (m["host"] != _HOST or pid_alive(int(m["pid"]))):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def temp_sibling(target: str | os.PathLike[str], *, directory: bool = False) -> Path:
    """Create an empty temporary file (or directory) next to ``target``, first clearing stale ones."""
    t = Path(target)
    t.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(t.parent, t.name)
    prefix = f".{t.name}.tmp-{os.getpid()}@{_HOST}."
    if directory:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=t.parent))
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=t.parent)
    os.close(fd)
    return Path(tmp)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it over ``path`` only on success.

    A reader never sees a half-written file.  A crash leaves at most a ``.<name>.tmp-*`` file that
    is not the output's name, and the next write of the same output removes it.
    """
    target = Path(path)
    tmp_path = temp_sibling(target)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder next to ``path`` that replaces ``path`` only when the block succeeds.

    A killed or failed writer never leaves a folder that looks complete under the final name.
    """
    target = Path(path)
    tmp = temp_sibling(target, directory=True)
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kw: Any) -> Iterator[IO[Any]]:
    with atomic_path(path) as tmp, open(tmp, mode, **kw) as fh:
        yield fh
        fh.flush()
        os.fsync(fh.fileno())


def file_digests(path: str | os.PathLike[str], algorithms: Sequence[str]) -> dict[str, str]:
    """Hex digests of a file's bytes for each of ``algorithms`` (hashlib names), in one 1 MiB-block read."""
    hs = [hashlib.new(a) for a in algorithms]
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            for h in hs:
                h.update(block)
    return {a: h.hexdigest() for a, h in zip(algorithms, hs, strict=True)}


def _file_digest(path: str | os.PathLike[str], algorithm: str) -> str:
    return file_digests(path, (algorithm,))[algorithm]


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    return _file_digest(path, "sha256")


def file_md5(path: str | os.PathLike[str]) -> str:
    """Hex md5 of a file's bytes (what PMC publishes for its files), read in 1 MiB blocks."""
    return _file_digest(path, "md5")


def save_torch(obj: Any, path: str | os.PathLike[str]) -> None:
    """``torch.save`` atomically and reproducibly.

    ``torch.save`` to a path names the zip archive's root folder after the file, so saving to a
    temporary name would put that (random) name into the bytes; saving to a buffer names it
    ``archive`` whatever the destination.
    """
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    with atomic_open(path, "wb") as fh:
        fh.write(buf.getbuffer())


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write JSON deterministically (sorted keys, fixed separators, trailing newline)."""
    with atomic_open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, ensure_ascii=False)
        fh.write("\n")


def to_table(rows: Sequence[Mapping[str, Any]] | pa.Table, schema: pa.Schema) -> pa.Table:
    """Build a table with exactly ``schema``'s columns (missing keys become null)."""
    if isinstance(rows, pa.Table):
        return rows.select(schema.names).cast(schema)
    cols = {name: [r.get(name) for r in rows] for name in schema.names}
    return pa.table(cols, schema=schema)


def write_table(
    rows: Sequence[Mapping[str, Any]] | pa.Table, schema: pa.Schema, path: str | os.PathLike[str]
) -> pa.Table:
    """Write rows as Parquet with ``schema``, atomically.  Returns the table written."""
    table = to_table(rows, schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **PARQUET_KW)
    return table


def read_table(path: str | os.PathLike[str], schema: pa.Schema | None = None) -> pa.Table:
    table = pq.read_table(path)
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    return table


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


@dataclass
class Rejections:
    """Collects rejection rows for one stage (and chunk)."""

    stage: str
    chunk: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, item_id: str, reason: str, detail: str = "", pmcid: str | None = None) -> None:
        self.rows.append(
            {
                "stage": self.stage,
                "chunk": self.chunk,
                "item_id": item_id,
                "pmcid": pmcid,
                "reason": reason,
                "detail": (detail or "")[:2000],
            }
        )

    def extend(self, other: Iterable[Mapping[str, Any]]) -> None:
        self.rows.extend(dict(r) for r in other)

    def by_reason(self) -> Counter[str]:
        return Counter(r["reason"] for r in self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def write(self, path: str | os.PathLike[str]) -> pa.Table:
        return write_table(self.rows, S.REJECTIONS, path)


def counts_record(
    stage: str,
    n_in: int,
    n_kept: int,
    rejected: Mapping[str, int],
    *,
    chunk: str | None = None,
    extra: Mapping[str, Any] | None = None,
    pending: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Build (and check) a counts record: ``in == kept + sum(rejected) + sum(pending)``.

    ``pending`` (acquisition only) counts items that failed for a transient reason and are fetched
    again by the next run; a stage that has no such state passes None and its record has no key.
    """
    n_rej = int(sum(rejected.values()))
    n_pend = int(sum((pending or {}).values()))
    if n_in != n_kept + n_rej + n_pend:
        raise CountsMismatch(
            f"{stage}{'/' + chunk if chunk else ''}: in={n_in} but kept={n_kept} + rejected={n_rej}"
            f" + pending={n_pend} ({dict(rejected)})"
        )
    rec: dict[str, Any] = {
        "stage": stage,
        "in": int(n_in),
        "kept": int(n_kept),
        "rejected": {k: int(v) for k, v in sorted(rejected.items())},
    }
    if pending is not None:
        rec["pending"] = {k: int(v) for k, v in sorted(pending.items())}
    if chunk is not None:
        rec["chunk"] = chunk
    if extra:
        rec["extra"] = dict(extra)
    return rec


def write_counts(path: str | os.PathLike[str], record: Mapping[str, Any]) -> None:
    write_json(path, dict(record))


# What a stage is told to write: the rule's named outputs (``snakemake.output`` or a mapping), or a
# folder where every output takes its layout name (see stage_outputs).
Outputs = Mapping[str, Any] | str | os.PathLike[str]


def stage_outputs(rule: str, outputs: Outputs) -> dict[str, Path]:
    """The paths the stage of ``rule`` writes, by the rule's output names (:data:`pmcflow.layout.RULE_OUTPUTS`).

    ``outputs`` is the rule's ``snakemake.output`` (or any mapping of those names to paths): the
    stage writes exactly there and spells no file name of its own.  A folder (``str`` or
    ``PathLike``) stands for every output under its layout name inside it (CLIs, library callers).
    A name missing from the mapping, or one the stage does not write, is an error naming it.
    The outputs' folders are made.
    """
    names = layout.RULE_OUTPUTS[rule]
    if isinstance(outputs, str | os.PathLike):
        given: dict[str, Any] = layout.outputs_in(rule, os.fspath(outputs))
    else:
        given = dict(outputs.items())
    missing = [k for k in names if k not in given]
    unknown = sorted(set(given) - set(names))
    if missing or unknown:
        raise ValueError(
            f"{rule}: outputs must be named {sorted(names)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; not written by the stage {unknown}" if unknown else "")
        )
    paths = {k: Path(os.fspath(given[k])) for k in names}
    for parent in {p.parent for p in paths.values()}:
        parent.mkdir(parents=True, exist_ok=True)
    return paths


def write_stage(
    outputs: Mapping[str, str | os.PathLike[str]],
    record: Mapping[str, Any],
    *,
    tables: Mapping[str, tuple[Sequence[Mapping[str, Any]] | pa.Table, pa.Schema]] | None = None,
    rejections: Mapping[str, Rejections] | None = None,
) -> dict[str, Any]:
    """A stage's epilogue: each table and rejection list to its named output, then ``counts``.

    ``record`` is a checked :func:`counts_record`; the counts file is written last, so a stage
    whose counts exist wrote everything before them.  Returns ``record``.
    """
    for name, (rows, schema) in (tables or {}).items():
        write_table(rows, schema, outputs[name])
    for name, rej in (rejections or {}).items():
        rej.write(outputs[name])
    write_counts(outputs["counts"], record)
    return dict(record)


def read_counts(path: str | os.PathLike[str]) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def merge_counts(stage: str, records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Sum per-chunk counts into one record for the stage (with the per-chunk detail kept)."""
    n_in = n_kept = 0
    rejected: Counter[str] = Counter()
    pending: Counter[str] | None = None
    extra: Counter[str] = Counter()
    chunks: dict[str, dict[str, Any]] = {}
    for rec in records:
        n_in += int(rec["in"])
        n_kept += int(rec["kept"])
        rejected.update({k: int(v) for k, v in rec.get("rejected", {}).items()})
        if "pending" in rec:
            pending = pending if pending is not None else Counter()
            pending.update({k: int(v) for k, v in rec["pending"].items()})
        for k, v in (rec.get("extra") or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                extra[k] += v
        if "chunk" in rec:
            chunks[str(rec["chunk"])] = {"in": rec["in"], "kept": rec["kept"]}
            if rec.get("pending"):
                chunks[str(rec["chunk"])]["pending"] = int(sum(rec["pending"].values()))
    out = counts_record(
        stage, n_in, n_kept, rejected, extra=dict(sorted(extra.items())) or None, pending=pending
    )
    out["chunks"] = dict(sorted(chunks.items()))
    out["n_chunks"] = len(chunks)
    return out
