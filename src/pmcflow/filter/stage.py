"""Filter stage: licence, retraction, crop size/readability, caption quality, modality, near-duplicates.

Three steps, so near-duplicates are found across the whole corpus, not only inside a chunk:

1. :func:`phash_chunk` (per chunk) runs checks 1-6 of :mod:`pmcflow.filter.checks` on every
   ENRICHED row -- decoding each crop once, classifying its modality, computing its pHash -- and
   writes ``phash.parquet`` (:data:`pmcflow.schema.PHASHES`): one row per subfigure with its hash, modality,
   score, the classifier that gave them (``modality_backend``) and the first failing reason (null
   when the row passed).
2. :func:`find_duplicates` (global) reads every chunk's ``phash.parquet`` and clusters the rows
   that passed (:func:`pmcflow.filter.phash.cluster_duplicates`), writing ``duplicates.parquet``
   (:data:`pmcflow.schema.DUPLICATES`): every member of a near-duplicate cluster except its representative (the
   smallest ``subfigure_uid``).  Only rows that passed checks 1-6 take part, so a representative
   is never a row that another check drops.
3. :func:`filter_chunk` (per chunk) writes the kept rows (DATASET), ``rejections.parquet`` and
   ``counts.json``; with ``phash_path`` it reuses step 1's verdicts instead of recomputing them,
   and rows listed in ``duplicates_path`` are rejected as ``near_duplicate``.  Without a
   duplicates file (and ``filter.dedup.enabled``) duplicates are searched inside the chunk only.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pmcflow import schema as S
from pmcflow import tables as T
from pmcflow.detect.images import ImageError, load_image
from pmcflow.filter import checks as C
from pmcflow.filter.phash import cluster_duplicates, hex_to_uint64, phash_hex
from pmcflow.progress import progress

log = logging.getLogger(__name__)

STAGE = "filter"

@dataclass
class RowVerdict:
    subfigure_uid: str
    pmcid: str | None
    reason: str | None = None
    detail: str = ""
    phash: str | None = None
    modality: str | None = None
    modality_score: float | None = None
    modality_backend: str | None = None  # which classifier said so (timm:<model> | openclip:<model>)


# ----------------------------------------------------------------------------------------------
# checks 1-6 over a chunk
# ----------------------------------------------------------------------------------------------


def _resolve(path: str, base_dir: str | os.PathLike[str] | None) -> str:
    if base_dir is None or os.path.isabs(path):
        return path
    return os.path.join(base_dir, path)


def evaluate_rows(
    settings: C.FilterSettings,
    rows: Sequence[Mapping[str, Any]],
    *,
    base_dir: str | os.PathLike[str] | None = None,
) -> list[RowVerdict]:
    """Checks 1-6 for every row (in input order).  Crops are decoded once and freed per batch."""
    verdicts: list[RowVerdict] = []
    batch: list[tuple[RowVerdict, Any]] = []

    def flush() -> None:
        if not batch:
            return
        if settings.modality.enabled:  # the model is loaded (once, cached) only when needed
            import torch

            from pmcflow.filter.modality import load_backend

            torch.set_num_threads(max(1, settings.modality.threads))
            backend = load_backend(settings.modality)
            preds = backend.predict([im for _, im in batch], batch_size=len(batch))
            for (v, _), (label, score) in zip(batch, preds, strict=True):
                v.modality, v.modality_score, v.modality_backend = label, float(score), backend.name
                bad = C.check_modality(label, float(score), settings)
                if bad:
                    v.reason, v.detail = bad
        batch.clear()

    # phash_chunk and filter_chunk log the counts and the time: no summary line of its own
    for row in progress(rows, desc="filter: checks", unit="row", summary=False):
        v = RowVerdict(str(row["subfigure_uid"]), row.get("pmcid"))
        verdicts.append(v)
        bad = (
            C.check_license(row.get("license_code"), settings)
            or C.check_retraction(row.get("is_retracted"), settings)
            or C.check_size(row.get("crop_width"), row.get("crop_height"), settings)
        )
        if bad:
            v.reason, v.detail = bad
            continue
        crop = row.get("crop_path")
        if not crop:
            v.reason, v.detail = "crop_unreadable", "no crop_path"
            continue
        try:
            image = load_image(_resolve(str(crop), base_dir))
        except ImageError as e:
            v.reason, v.detail = "crop_unreadable", f"{e.reason}: {e.detail}"
            continue
        bad = C.check_size(image.width, image.height, settings) or C.check_caption(C.caption_text(row), settings)
        if bad:
            v.reason, v.detail = bad
            continue
        v.phash = phash_hex(image)
        batch.append((v, image))
        if len(batch) >= settings.modality.batch_size:
            flush()
    flush()
    return verdicts


def _verdict_rows(chunk: str, verdicts: Iterable[RowVerdict]) -> list[dict[str, Any]]:
    return [
        {
            "subfigure_uid": v.subfigure_uid,
            "chunk": chunk,
            "pmcid": v.pmcid,
            "phash": v.phash,
            "modality": v.modality,
            "modality_score": v.modality_score,
            "modality_backend": v.modality_backend,
            "reason": v.reason,
            "detail": v.detail or None,
        }
        for v in verdicts
    ]


def phash_chunk(
    settings: C.FilterSettings,
    chunk: str,
    enriched_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    base_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Step 1: checks 1-6 + pHash + modality for one chunk -> ``out_path`` (:data:`pmcflow.schema.PHASHES`)."""
    t0 = time.perf_counter()
    rows = T.read_rows(enriched_path)
    verdicts = evaluate_rows(settings, rows, base_dir=base_dir)
    out_rows = sorted(_verdict_rows(chunk, verdicts), key=lambda r: r["subfigure_uid"])
    T.write_table(out_rows, S.PHASHES, out_path)
    n_cand = sum(v.reason is None for v in verdicts)
    log.info("phash %s: %d rows, %d candidates (%.1fs)", chunk, len(rows), n_cand, time.perf_counter() - t0)
    return {"chunk": chunk, "rows": len(rows), "candidates": n_cand, "seconds": round(time.perf_counter() - t0, 3)}


# ----------------------------------------------------------------------------------------------
# step 2: corpus-wide near-duplicates
# ----------------------------------------------------------------------------------------------


def duplicates_from_hashes(
    uids: Sequence[str], hashes_hex: Sequence[str], chunks: Sequence[str | None], max_hamming: int
) -> list[dict[str, Any]]:
    """DUPLICATES rows for the given candidates (see :func:`cluster_duplicates`)."""
    chunk_of = dict(zip(uids, chunks, strict=True))
    dups = cluster_duplicates(list(uids), hex_to_uint64(hashes_hex), max_hamming)
    return [
        {
            "subfigure_uid": d.subfigure_uid,
            "duplicate_of": d.duplicate_of,
            "distance": d.distance,
            "chunk": chunk_of.get(d.subfigure_uid),
            "duplicate_of_chunk": chunk_of.get(d.duplicate_of),
        }
        for d in dups
    ]


def find_duplicates(
    settings: C.FilterSettings, phash_paths: Iterable[str | os.PathLike[str]], out_path: str | os.PathLike[str]
) -> dict[str, Any]:
    """Step 2: near-duplicate clusters over every chunk's ``phash.parquet`` -> ``out_path``."""
    t0 = time.perf_counter()
    paths = list(phash_paths)
    cols = ["subfigure_uid", "chunk", "phash", "reason"]
    reading = progress(paths, desc="find-duplicates: read", unit="chunk", summary=False)  # stats below
    parts = [pq.read_table(p, columns=cols) for p in reading]
    table = pa.concat_tables(parts) if parts else S.PHASHES.empty_table().select(cols)
    cand = table.filter(pc.and_(pc.is_null(table["reason"]), pc.is_valid(table["phash"])))
    uids = cand["subfigure_uid"].to_pylist()
    rows: list[dict[str, Any]] = []
    if settings.dedup.enabled:
        rows = duplicates_from_hashes(uids, cand["phash"].to_pylist(), cand["chunk"].to_pylist(), settings.dedup.max_hamming)
    T.write_table(rows, S.DUPLICATES, out_path)
    n_rep = len({r["duplicate_of"] for r in rows})
    stats = {
        "hashes": len(uids),
        "duplicates": len(rows),
        "clusters": n_rep,
        "max_hamming": settings.dedup.max_hamming,
        "enabled": settings.dedup.enabled,
        "chunks": len(paths),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    log.info("find_duplicates: %s", stats)
    return stats


# ----------------------------------------------------------------------------------------------
# step 3: the chunk's dataset rows
# ----------------------------------------------------------------------------------------------


def _load_verdicts(phash_path: str | os.PathLike[str], uids: set[str]) -> dict[str, RowVerdict] | None:
    rows = T.read_rows(phash_path)
    got = {r["subfigure_uid"] for r in rows}
    if got != uids:
        log.warning("%s does not cover this chunk's rows (%d vs %d); recomputing", phash_path, len(got), len(uids))
        return None
    return {
        r["subfigure_uid"]: RowVerdict(
            r["subfigure_uid"],
            r.get("pmcid"),
            reason=r.get("reason"),
            detail=r.get("detail") or "",
            phash=r.get("phash"),
            modality=r.get("modality"),
            modality_score=r.get("modality_score"),
            modality_backend=r.get("modality_backend"),
        )
        for r in rows
    }


def filter_chunk(
    settings: C.FilterSettings,
    chunk: str,
    enriched_path: str | os.PathLike[str],
    outputs: T.Outputs,
    *,
    duplicates_path: str | os.PathLike[str] | None = None,
    phash_path: str | os.PathLike[str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Write the ``filter_chunk`` rule's outputs ``dataset`` (DATASET), ``rejections`` and ``counts``
    (the rule's named outputs, or a folder: :func:`pmcflow.tables.stage_outputs`).

    Returns the counts record (``in`` = ENRICHED rows, ``kept``, ``rejected`` by reason).
    """
    t0 = time.perf_counter()
    out = T.stage_outputs("filter_chunk", outputs)
    rows = T.read_rows(enriched_path)
    uids = [str(r["subfigure_uid"]) for r in rows]
    if len(set(uids)) != len(uids):
        raise ValueError(f"{enriched_path}: duplicate subfigure_uid values")

    by_uid = _load_verdicts(phash_path, set(uids)) if phash_path else None
    if by_uid is None:
        by_uid = {v.subfigure_uid: v for v in evaluate_rows(settings, rows, base_dir=base_dir)}

    dedup_scope = "off"
    dup_of: dict[str, tuple[str, int]] = {}
    if settings.dedup.enabled:
        if duplicates_path is not None:
            dedup_scope = "corpus"
            dt = pq.read_table(duplicates_path, columns=["subfigure_uid", "duplicate_of", "distance"])
            mine = set(uids)
            for u, d, dist in zip(*(dt[c].to_pylist() for c in dt.column_names), strict=True):
                if u in mine:
                    dup_of[u] = (d, int(dist))
        else:
            dedup_scope = "chunk"
            cand = [v for v in by_uid.values() if v.reason is None and v.phash]
            for r in duplicates_from_hashes(
                [v.subfigure_uid for v in cand], [str(v.phash) for v in cand], [chunk] * len(cand), settings.dedup.max_hamming
            ):
                dup_of[r["subfigure_uid"]] = (r["duplicate_of"], r["distance"])

    rejections = T.Rejections(STAGE, chunk)
    kept: list[dict[str, Any]] = []
    kept_modality: Counter[str] = Counter()
    for row in sorted(rows, key=lambda r: r["subfigure_uid"]):
        uid = str(row["subfigure_uid"])
        v = by_uid[uid]
        reason, detail = v.reason, v.detail
        if reason is None and uid in dup_of:
            rep, dist = dup_of[uid]
            reason, detail = "near_duplicate", f"duplicate of {rep} (Hamming distance {dist})"
        if reason is not None:
            if v.modality is not None and "modality=" not in detail:
                detail = f"{detail}; modality={v.modality} score={v.modality_score:.3f}"
            if v.modality_backend and "backend=" not in detail:
                detail = f"{detail} backend={v.modality_backend}"
            rejections.add(uid, reason, detail, pmcid=row.get("pmcid"))
            continue
        out_row = dict(row)
        out_row.update(
            {
                "modality": v.modality,
                "modality_score": v.modality_score,
                "modality_backend": v.modality_backend,
                "phash": v.phash,
            }
        )
        kept.append(out_row)
        kept_modality[f"kept_modality.{v.modality or 'unclassified'}"] += 1

    extra: dict[str, Any] = dict(sorted(kept_modality.items()))
    extra[f"dedup_scope.{dedup_scope}"] = 1
    record = T.counts_record(STAGE, len(rows), len(kept), rejections.by_reason(), chunk=chunk, extra=extra)
    T.write_stage(out, record, tables={"dataset": (kept, S.DATASET)}, rejections={"rejections": rejections})
    log.info(
        "filter %s: in=%d kept=%d rejected=%s (%.1fs)",
        chunk, len(rows), len(kept), dict(rejections.by_reason()), time.perf_counter() - t0,
    )
    return record


def summarize(counts_paths: Iterable[str | os.PathLike[str]]) -> pa.Table:
    """One row per reason (in check order), then ``kept``: count and share of the stage's input."""
    merged = T.merge_counts(STAGE, [T.read_counts(p) for p in counts_paths])
    n_in = int(merged["in"])
    rejected = merged["rejected"]
    order = [r for r in C.REASONS if r in rejected] + sorted(set(rejected) - set(C.REASONS))
    names = [*order, "kept"]
    counts = [int(rejected[r]) for r in order] + [int(merged["kept"])]
    share = [float(c / n_in) if n_in else 0.0 for c in counts]
    return pa.table(
        {"reason": names, "count": pa.array(counts, pa.int64()), "share_of_in": pa.array(share, pa.float64())}
    )


# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------


def _common(ap: argparse.ArgumentParser) -> None:
    from pmcflow.config import add_config_args

    add_config_args(ap)
    ap.add_argument("--log", default=None, help="Log file (default: stderr).")


def _config(args: argparse.Namespace) -> C.FilterSettings:
    from pmcflow.config import config_from_args
    from pmcflow.workflow import log_to_file

    # Keep the level ``pmcflow -q/-v`` set (log_to_file reconfigures logging); INFO otherwise.
    root = logging.getLogger()
    log_to_file(args.log, level=root.level if root.handlers and root.level != logging.NOTSET else logging.INFO)
    return C.FilterSettings.from_config(config_from_args(args))


def cli(argv: Sequence[str] | None = None) -> int:
    """``pmcflow filter-chunk``."""
    ap = argparse.ArgumentParser(prog="pmcflow filter-chunk", description="Filter one chunk's enriched rows.")
    _common(ap)
    ap.add_argument("--chunk", required=True)
    ap.add_argument("--enriched", required=True, help="ENRICHED Parquet of the chunk.")
    ap.add_argument("--out", required=True, help="Output directory (dataset.parquet, rejections.parquet, counts.json).")
    ap.add_argument("--duplicates", default=None, help="duplicates.parquet from find-duplicates (corpus scope).")
    ap.add_argument("--phash", default=None, help="phash.parquet of this chunk (reuses its verdicts).")
    args = ap.parse_args(argv)
    rec = filter_chunk(
        _config(args), args.chunk, args.enriched, args.out, duplicates_path=args.duplicates, phash_path=args.phash
    )
    print(f"filter {args.chunk}: in={rec['in']} kept={rec['kept']} rejected={rec['rejected']}")
    return 0


def cli_phash(argv: Sequence[str] | None = None) -> int:
    """``pmcflow phash-chunk``."""
    ap = argparse.ArgumentParser(prog="pmcflow phash-chunk", description="Checks, modality and pHash of one chunk.")
    _common(ap)
    ap.add_argument("--chunk", required=True)
    ap.add_argument("--enriched", required=True)
    ap.add_argument("--out", required=True, help="phash.parquet to write.")
    args = ap.parse_args(argv)
    print(phash_chunk(_config(args), args.chunk, args.enriched, args.out))
    return 0


def cli_duplicates(argv: Sequence[str] | None = None) -> int:
    """``pmcflow find-duplicates``."""
    ap = argparse.ArgumentParser(prog="pmcflow find-duplicates", description="Corpus-wide near-duplicate clusters.")
    _common(ap)
    ap.add_argument("phash", nargs="+", help="phash.parquet files of every chunk.")
    ap.add_argument("--out", required=True, help="duplicates.parquet to write.")
    args = ap.parse_args(argv)
    print(find_duplicates(_config(args), args.phash, args.out))
    return 0

