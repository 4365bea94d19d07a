"""Glue used by the thin rule scripts in ``scripts/``: logging to the rule's log, stage merges."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pmcflow import schema as S
from pmcflow import tables


def log_to_file(path: str | os.PathLike[str] | None, level: int = logging.INFO) -> None:
    """Send stderr and the logging module to the rule's log file (Snakemake convention)."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "w", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives for the process
        sys.stderr = fh
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )


def start_rule_log(sm: Any, path: str | os.PathLike[str] | None = None) -> None:
    """Open the rule's log (``sm.log[0]`` unless ``path``) and write what a failed job on a cluster
    needs: the rule and wildcards, every input and output, a digest of the params, and, when the
    script ends, its wall time and exit state. Every rule script starts with this."""
    import atexit
    import hashlib
    import json
    import time

    os.environ["PMCFLOW_PROGRESS"] = "0"  # a rule log gets count lines, never progress bars
    models = ((getattr(sm, "config", None) or {}).get("paths") or {}).get("models")
    if models:  # paths.models: the hub cache this job loads models from (before any HF import)
        os.environ["HF_HUB_CACHE"] = str(Path(str(models)).expanduser().resolve())
    log_to_file(path if path is not None else (sm.log[0] if len(sm.log) else None))
    logger = logging.getLogger("pmcflow.rule")
    wildcards = ", ".join(f"{k}={v}" for k, v in sm.wildcards.items())
    logger.info("rule %s%s", sm.rule, f" [{wildcards}]" if wildcards else "")
    # Where it ran: the interpreter and package (inside an image: /opt/venv/...) and the image.
    import sys

    import pmcflow

    image = os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")
    logger.info(
        "python %s, pmcflow %s%s", sys.executable, Path(pmcflow.__file__).parent,
        f", container {image}" if image else "",
    )
    for kind, files in (("input", sm.input), ("output", sm.output)):
        # Named files one line a name; a rule with only positional files, one line for all.
        for name, value in list(files.items()) or ([("", list(files))] if len(files) else []):
            values = value if isinstance(value, list) else [value]
            shown = values if len(values) <= 4 else [*values[:3], f"... ({len(values)} files)"]
            logger.info("%s %s%s", kind, f"{name}: " if name else "", ", ".join(map(str, shown)))
    params = {k: v for k, v in sm.params.items()}
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    logger.info("params sha256 %s (%s)", hashlib.sha256(blob).hexdigest()[:16], ", ".join(sorted(params)))
    t0 = time.perf_counter()

    def _done() -> None:
        failed = getattr(sys, "last_value", None) is not None
        logger.info("rule %s %s after %.1f s", sm.rule, "FAILED" if failed else "finished", time.perf_counter() - t0)

    atexit.register(_done)


def concat_parquet(paths: Iterable[str | os.PathLike[str]], schema: pa.Schema, out: str | os.PathLike[str]) -> int:
    """Concatenate Parquet files with one schema into ``out`` (streaming, atomic). Returns rows."""
    n = 0
    with tables.atomic_path(out) as tmp:
        with pq.ParquetWriter(tmp, schema, **tables.PARQUET_KW) as writer:
            for p in paths:
                t = tables.read_table(p, schema)
                if t.num_rows:
                    writer.write_table(t)
                    n += t.num_rows
    return n


def merge_stage(
    stage: str,
    counts_paths: Iterable[str | os.PathLike[str]],
    rejection_paths: Iterable[str | os.PathLike[str]],
    out_counts: str | os.PathLike[str],
    out_rejections: str | os.PathLike[str],
    upstream: Mapping[str, str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """Merge per-chunk counts and rejections of one stage into stage-level files.

    ``upstream`` names extra counts files (e.g. the listing) recorded under ``"upstream"``.
    The merged rejections must match the merged counts reason by reason.
    """
    counts_paths = list(counts_paths)
    records = [tables.read_counts(p) for p in counts_paths]
    merged = tables.merge_counts(stage, records)
    if upstream:
        merged["upstream"] = {name: tables.read_counts(p) for name, p in sorted(upstream.items())}
    n_rej = concat_parquet(rejection_paths, S.REJECTIONS, out_rejections)
    chunk_rejected = sum(merged["rejected"].values())
    extra = sum(sum(r.get("rejected", {}).values()) for r in (merged.get("upstream") or {}).values())
    if n_rej != chunk_rejected + extra:
        raise tables.CountsMismatch(
            f"{stage}: {n_rej} rejection rows but counts say {chunk_rejected} (+{extra} upstream)"
        )
    tables.write_counts(out_counts, merged)
    return merged
