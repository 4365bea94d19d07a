"""The acquire stage: list article versions, then download and verify them chunk by chunk.

``list_articles`` enumerates the source (PMC Cloud inventory / ListObjectsV2 / PMCIDs, or a legacy
file list), applies what the selection can decide at listing time, and assigns chunks.
``acquire_chunk`` fetches one chunk's articles into the cache, verified, and applies the rest of the
selection once each article's metadata is read.  Both write Parquet tables, rejection rows and a
``counts.json`` that reconciles (``in == kept + rejected``).

Media-level failures (a missing figure, a file that is not an image, an unsafe tar member) do not
reject their article: the article is kept with the media it could get, and each failure is written to
``media_rejections.parquet`` (REJECTIONS schema, stage ``acquire.media``) and counted under
``extra`` in ``counts.json``; ``rejections.parquet`` holds article-level rows only, so it reconciles
with the article counts.

Transient failures (5xx, 429, resets, timeouts, deadlines: a :class:`FetchError` with
``transient``) are not final.  Such an article (whichever of its files failed) is written to
``pending.parquet`` instead of ``rejections.parquet`` and counted under ``pending`` in
``counts.json`` (``in == kept + rejected + pending``).  The next ``snakemake`` run re-acquires the
chunk (``pending_retry_stamp`` makes the rule out of date), and so does ``pmcflow retry-failed``;
files already fetched are verified in the cache and not downloaded again.

``counts.json`` holds what was acquired, so it is the same bytes however the files got there.  How
they got there (requests, bytes, retries, resumed or cached files) differs between a clean run and a
resumed one; ``acquire_chunk`` writes it separately, to ``transfer_path`` (the rule puts it beside its
log).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from pmcflow import layout as results_layout
from pmcflow import schema as S
from pmcflow.chunks import CHUNK_RE, chunk_manifest, chunk_of
from pmcflow.config import add_config_args, config_from_args
from pmcflow.errors import RejectionError
from pmcflow.pmc import cloud, ftp
from pmcflow.pmc.http import FetchError, HttpClient, verify_file
from pmcflow.pmc.media import XML_EXTENSIONS, MediaFilter, image_problem
from pmcflow.pmc.select import Selection
from pmcflow.pmc.settings import PmcSettings
from pmcflow.pmc.transport import FileTransport, HttpTransport, Transport
from pmcflow.progress import Progress, progress
from pmcflow.tables import (
    Outputs,
    Rejections,
    counts_record,
    stage_outputs,
    write_json,
    write_stage,
    write_table,
)

log = logging.getLogger("pmcflow.acquire")

LIST_STAGE = "list"
ACQUIRE_STAGE = "acquire"
MEDIA_STAGE = "acquire.media"
METADATA_MAX_BYTES = 16 * 1024 * 1024
PACKAGE_MANIFEST = ".pmcflow-package.json"


# ------------------------------------------------------------------------------- backend
@dataclass
class Backend:
    source: str  # cloud | ftp | local  (LISTING.source and the cache sub-directory)
    layout: str  # cloud | ftp
    transport: Transport
    base: str  # base URL / root, for the legacy deprecated/ fallback

    def close(self) -> None:
        self.transport.close()


def make_backend(cfg: PmcSettings, transport: Transport | None = None) -> Backend:
    src = cfg.source
    backend = src.backend
    settings = cfg.http
    if backend == "cloud":
        base = src.cloud.base_url
        return Backend("cloud", "cloud", transport or HttpTransport(base, HttpClient(settings)), base)
    if backend == "ftp":
        base = src.ftp.base_url
        return Backend("ftp", "ftp", transport or HttpTransport(base, HttpClient(settings)), base)
    if backend == "local":
        root = src.local.root
        if not root:
            raise ValueError("source.local.root is empty")
        layout = src.local.layout
        return Backend("local", layout, transport or FileTransport(root, settings.max_file_mb), root)
    raise ValueError(f"unknown source.backend {backend!r}")


def _fetch_legacy(backend: Backend, key: str, fn: Any) -> tuple[str, Any]:
    """``(key used, fn(key))``; on 404 under a base without ``deprecated/``, retry under ``deprecated/``."""
    first = ftp.legacy_key(backend.base, key)
    try:
        return first, fn(first)
    except FetchError as e:
        if e.reason != "not_found" or ftp.base_is_deprecated(backend.base) or first.startswith("deprecated/"):
            raise
        moved = f"{ftp.DEPRECATED}/{first}"
        return moved, fn(moved)


# --------------------------------------------------------------------------------- listing
def _listing_row(ref: cloud.ArticleRef, source: str, span: int, **known: Any) -> dict[str, Any]:
    return {
        "article_uid": ref.uid,
        "pmcid": ref.pmcid,
        "pmcid_num": ref.pmcid_num,
        "version": ref.version,
        "source": source,
        "key": ref.key,
        "chunk": chunk_of(ref.pmcid_num, span),
        "license_code": known.get("license_code"),
        "is_retracted": known.get("is_retracted"),
        "pmid": known.get("pmid"),
        "citation": known.get("citation"),
        "last_updated": known.get("last_updated"),
    }


def _item_sort_key(item_id: str) -> tuple[int, int, str]:
    m = re.match(r"^PMC(\d+)(?:\.(\d+))?", item_id)
    if m:
        return (int(m.group(1)), int(m.group(2) or 0), item_id)
    return (sys.maxsize, 0, item_id)


def _sorted_rejections(rej: Rejections) -> Rejections:
    rej.rows.sort(key=lambda r: (*_item_sort_key(r["item_id"]), r["reason"]))
    return rej


def _enumerate_cloud(
    cfg: PmcSettings, backend: Backend, out_dir: Path, rej: Rejections
) -> tuple[list[cloud.ArticleRef], dict[str, Any]]:
    c = cfg.source.cloud
    mode = c.listing
    info: dict[str, Any] = {"listing_mode": mode}
    if mode == "inventory":
        key, refs = cloud.enumerate_inventory(backend.transport, c.inventory_manifest or "", out_dir)
        info["inventory_manifest"] = key
        return list(progress(refs, desc="list: inventory", unit="article", summary=False)), info
    if mode == "list-objects":
        refs = cloud.enumerate_list_objects(backend.transport)
        return list(progress(refs, desc="list: list-objects", unit="article", summary=False)), info
    specs = list(c.pmcids)
    if c.pmcids_file:
        specs += cloud.read_pmcids_file(c.pmcids_file)
    lookup = cloud.enumerate_pmcids(backend.transport, specs)
    for item, reason, detail in lookup.problems:
        rej.add(item, reason, detail, pmcid=item.split(".")[0] if item.upper().startswith("PMC") else None)
    return lookup.refs, info


def list_articles(
    cfg: PmcSettings, outputs: Outputs, *, transport: Transport | None = None
) -> dict:
    """Enumerate article versions, select, assign chunks: the ``list_articles`` rule's outputs
    (``listing``, ``chunks``, ``rejections``, ``counts``; :func:`pmcflow.tables.stage_outputs`)."""
    t0 = time.perf_counter()
    out = stage_outputs("list_articles", outputs)
    sel = Selection.from_config(cfg.select)
    span = cfg.chunking.pmcid_span
    backend = make_backend(cfg, transport)
    rej = Rejections(LIST_STAGE)
    candidates: list[dict[str, Any]] = []
    info: dict[str, Any] = {"backend": cfg.source.backend, "layout": backend.layout}
    n_in = 0
    try:
        if backend.layout == "cloud":
            refs, more = _enumerate_cloud(cfg, backend, out["listing"].parent, rej)
            info.update(more)
            n_in = len(refs) + len(rej)
            keep_all = cfg.source.cloud.versions == "all"
            newest: dict[int, int] = {}
            for r in refs:
                newest[r.pmcid_num] = max(newest.get(r.pmcid_num, 0), r.version)
            seen: set[tuple[int, int]] = set()
            for r in sorted(refs):
                if (r.pmcid_num, r.version) in seen:
                    rej.add(r.uid, "duplicate_listing", f"{r.key} listed twice", pmcid=r.pmcid)
                    continue
                seen.add((r.pmcid_num, r.version))
                if not keep_all and r.version != newest[r.pmcid_num]:
                    rej.add(
                        r.uid, "older_version", f"newer version {newest[r.pmcid_num]} listed", pmcid=r.pmcid
                    )
                    continue
                candidates.append(_listing_row(r, backend.source, span))
        else:
            name = cfg.source.ftp.file_list
            list_key, data = _fetch_legacy(backend, name, backend.transport.get)
            fl = ftp.parse_file_list(name, data)
            info["file_list"] = list_key
            if fl.generated:
                info["file_list_generated"] = fl.generated
            n_in = len(fl.rows) + len(fl.problems)
            for item, reason, detail in fl.problems:
                rej.add(item, reason, detail)
            # One package per PMCID: the most recently updated row wins.
            best: dict[int, ftp.FileListRow] = {}
            for row in fl.rows:
                cur = best.get(row.pmcid_num)
                if cur is None or (row.last_updated or "", row.line) > (cur.last_updated or "", cur.line):
                    best[row.pmcid_num] = row
            for row in fl.rows:
                uid = f"{row.pmcid}.1"
                if best[row.pmcid_num] is not row:
                    rej.add(uid, "duplicate_listing", f"line {row.line}: {row.pmcid} listed again", row.pmcid)
                    continue
                verdict = sel.check(
                    license_code=row.license_code,
                    is_retracted=row.is_retracted,
                    citation=row.citation,
                    retraction_known=row.is_retracted is not None,
                )
                if verdict:
                    rej.add(uid, verdict[0], verdict[1], pmcid=row.pmcid)
                    continue
                ref = cloud.ArticleRef(row.pmcid_num, 1, row.package)
                candidates.append(
                    _listing_row(
                        ref,
                        backend.source,
                        span,
                        license_code=row.license_code,
                        is_retracted=row.is_retracted,
                        pmid=row.pmid,
                        citation=row.citation,
                        last_updated=row.last_updated,
                    )
                )
    finally:
        backend.close()
    candidates.sort(key=lambda r: (r["pmcid_num"], r["version"]))
    if sel.max_articles and len(candidates) > sel.max_articles:
        for r in candidates[sel.max_articles :]:
            rej.add(
                r["article_uid"], "over_max_articles", f"select.max_articles={sel.max_articles}", r["pmcid"]
            )
        candidates = candidates[: sel.max_articles]
    chunks = chunk_manifest(candidates)
    info["n_chunks"] = len(chunks)
    counts = counts_record(LIST_STAGE, n_in, len(candidates), rej.by_reason(), extra=info)
    write_table(candidates, S.LISTING, out["listing"])
    write_json(out["chunks"], {"chunks": chunks})
    write_stage(out, counts, rejections={"rejections": _sorted_rejections(rej)})
    log.info(
        "listed %d article versions: %d kept in %d chunks, %d rejected (%.1f s)",
        n_in,
        len(candidates),
        len(chunks),
        len(rej),
        time.perf_counter() - t0,
    )
    return counts


# ------------------------------------------------------------------------------ acquisition
PENDING_STAGE = "acquire.pending"


class Rejected(RejectionError):
    """An article version refused during acquisition."""


class Pending(RejectionError):
    """An article version that failed for a transient reason: retried by the next run."""


def _fetch_failed(e: FetchError, not_found: str) -> RejectionError:
    """The article-level outcome of a failed fetch: Pending when transient, else Rejected."""
    if e.transient:
        return Pending(e.reason, e.detail)
    return Rejected(_fetch_reason(e, not_found), e.detail)


@dataclass
class ChunkContext:
    cfg: PmcSettings
    backend: Backend
    chunk: str
    cache: Path  # cache_dir / source, as given (relative paths stay relative)
    select: Selection
    media: MediaFilter
    verify_images: bool
    media_rej: Rejections
    media_counts: Counter[str] = field(default_factory=Counter)


def _fetch_reason(e: FetchError, not_found: str) -> str:
    return not_found if e.reason == "not_found" else e.reason


def _media_item(name: str, path: Path, md5: str, size: int) -> dict[str, Any]:
    return {"name": name, "path": os.fspath(path), "md5": md5, "size": size}


def _check_image(ctx: ChunkContext, uid: str, pmcid: str, name: str, path: Path) -> bool:
    if not (ctx.verify_images and MediaFilter.is_image(name)):
        return True
    problem = image_problem(path)
    if problem is None:
        return True
    path.unlink(missing_ok=True)
    ctx.media_rej.add(f"{uid}/{name}", "media_not_image", problem, pmcid=pmcid)
    ctx.media_counts["media_rejected"] += 1
    return False


def _acquire_cloud(ctx: ChunkContext, row: Mapping[str, Any]) -> dict[str, Any]:
    uid, pmcid, t = row["article_uid"], row["pmcid"], ctx.backend.transport
    try:
        raw = t.get(row["key"], METADATA_MAX_BYTES)
    except FetchError as e:
        raise _fetch_failed(e, "metadata_missing") from e
    try:
        md = cloud.parse_metadata(raw)
    except cloud.MetadataError as e:
        raise Rejected(e.reason, e.detail) from e
    if md.pmcid != pmcid or md.version != int(row["version"]):
        raise Rejected("metadata_mismatch", f"metadata names {md.pmcid}.{md.version}")
    verdict = ctx.select.check(
        license_code=md.license_code, is_retracted=md.is_retracted, citation=md.citation
    )
    if verdict:
        raise Rejected(*verdict)
    art_dir = ctx.cache / uid
    xml_name = md.xml.name
    try:
        xml = t.download(md.xml.key, art_dir / xml_name, md5=md.xml.md5)
    except FetchError as e:
        raise _fetch_failed(e, "xml_missing") from e
    media: list[dict[str, Any]] = []
    names = {xml_name}
    for f in md.media:
        item = f"{uid}/{f.name}"
        if not ctx.media.wanted(f.name):
            ctx.media_counts["media_skipped"] += 1
            continue
        if f.name in names:
            ctx.media_rej.add(item, "media_duplicate", f"second file named {f.name}: {f.key}", pmcid)
            ctx.media_counts["media_rejected"] += 1
            continue
        names.add(f.name)
        try:
            res = t.download(f.key, art_dir / f.name, md5=f.md5)
        except FetchError as e:
            if e.transient:  # the whole article waits: a rerun must give the unfaulted result
                raise Pending(e.reason, f"{f.name}: {e.detail}") from e
            reason = "media_missing" if e.reason == "not_found" else f"media_{e.reason}"
            ctx.media_rej.add(item, reason, e.detail, pmcid)
            ctx.media_counts["media_rejected"] += 1
            continue
        if not _check_image(ctx, uid, pmcid, f.name, res.path):
            continue
        ctx.media_counts["media_kept"] += 1
        media.append(_media_item(f.name, art_dir / f.name, res.md5, res.size))
    return {
        "article_uid": uid,
        "pmcid": pmcid,
        "version": int(row["version"]),
        "chunk": ctx.chunk,
        "source": ctx.backend.source,
        "source_url": t.location(md.xml.key),
        "pmid": md.pmid,
        "doi": md.doi,
        "citation": md.citation,
        "license_code": md.license_code,
        "is_retracted": md.is_retracted,
        "xml_path": os.fspath(art_dir / xml_name),
        "xml_md5": xml.md5,
        "media": media,
        "metadata_json": raw.decode("utf-8"),
    }


def _package_manifest_ok(art_dir: Path, key: str) -> dict[str, Any] | None:
    """The extraction manifest of an earlier run, if it is for ``key`` and its files still verify."""
    mpath = art_dir / PACKAGE_MANIFEST
    try:
        man = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if man.get("package") != key:
        return None
    for f in man.get("files", []):
        ok, _, _ = (
            (False, "", "")
            if not (art_dir / f["name"]).is_file()
            else verify_file(art_dir / f["name"], f["md5"], f["size"])
        )
        if not ok:
            return None
    return man


def _ftp_limits(cfg: PmcSettings) -> ftp.TarLimits:
    f = cfg.source.ftp
    mb = 1024 * 1024
    return ftp.TarLimits(
        max_member_bytes=int(f.max_member_mb * mb),
        max_total_bytes=int(f.max_package_mb * mb),
        max_members=f.max_members,
    )


def _unpack(ctx: ChunkContext, row: Mapping[str, Any], art_dir: Path) -> dict[str, Any]:
    """Download and safely extract one package; returns (and writes) its manifest."""
    t, pmcid = ctx.backend.transport, row["pmcid"]
    pkg = ctx.cache / ".packages" / f"{pmcid}.tar.gz"
    try:
        used_key, _ = _fetch_legacy(ctx.backend, row["key"], lambda k: t.download(k, pkg))
    except FetchError as e:
        raise _fetch_failed(e, "package_missing") from e

    def wanted(name: str) -> bool:
        return name.lower().endswith(XML_EXTENSIONS) or ctx.media.wanted(name)

    try:
        rep = ftp.extract_package(pkg, art_dir, limits=_ftp_limits(ctx.cfg), wanted=wanted)
    except ftp.BadPackage as e:
        raise Rejected(e.reason, e.detail) from e
    finally:
        pkg.unlink(missing_ok=True)
    uid = row["article_uid"]
    skipped = [list(s) for s in rep.skipped]
    xmls = sorted(f.name for f in rep.files if f.name.lower().endswith(".nxml")) or sorted(
        f.name for f in rep.files if f.name.lower().endswith(".xml")
    )
    files = []
    for f in rep.files:
        if f.name not in xmls[:1] and ctx.verify_images and MediaFilter.is_image(f.name):
            problem = image_problem(art_dir / f.name)
            if problem is not None:
                (art_dir / f.name).unlink(missing_ok=True)
                skipped.append([f.name, "media_not_image", problem])
                continue
        files.append({"name": f.name, "md5": f.md5, "size": f.size})
    man = {
        "package": row["key"],
        "package_url": t.location(used_key),
        "article_uid": uid,
        "xml": xmls[0] if xmls else None,
        "files": files,
        "skipped": skipped,
        "not_selected": rep.not_selected,
        "n_members": rep.n_members,
    }
    write_json(art_dir / PACKAGE_MANIFEST, man)
    return man


def _acquire_ftp(ctx: ChunkContext, row: Mapping[str, Any]) -> dict[str, Any]:
    uid, pmcid = row["article_uid"], row["pmcid"]
    art_dir = ctx.cache / pmcid
    man = _package_manifest_ok(art_dir, row["key"])
    if man is None:
        man = _unpack(ctx, row, art_dir)
    else:
        ctx.media_counts["packages_cached"] += 1
    for member, reason, detail in man["skipped"]:
        ctx.media_rej.add(f"{uid}/{member}", reason, detail, pmcid)
        ctx.media_counts["media_rejected"] += 1
    ctx.media_counts["media_skipped"] += int(man.get("not_selected", 0))
    if not man.get("xml"):
        raise Rejected("xml_missing", "package has no .nxml/.xml file")
    xml = next(f for f in man["files"] if f["name"] == man["xml"])
    media = []
    for f in man["files"]:
        if f["name"] == man["xml"] or f["name"].lower().endswith(XML_EXTENSIONS):
            continue
        ctx.media_counts["media_kept"] += 1
        media.append(_media_item(f["name"], art_dir / f["name"], f["md5"], f["size"]))
    record = {
        "File": row["key"],
        "Article Citation": row.get("citation"),
        "Accession ID": pmcid,
        "Last Updated": row.get("last_updated"),
        "PMID": row.get("pmid"),
        "License": row.get("license_code"),
        "Retracted": row.get("is_retracted"),
    }
    return {
        "article_uid": uid,
        "pmcid": pmcid,
        "version": int(row["version"]),
        "chunk": ctx.chunk,
        "source": ctx.backend.source,
        "source_url": man.get("package_url"),
        "pmid": row.get("pmid"),
        "doi": None,
        "citation": row.get("citation"),
        "license_code": row.get("license_code"),
        "is_retracted": row.get("is_retracted"),
        "xml_path": os.fspath(art_dir / man["xml"]),
        "xml_md5": xml["md5"],
        "media": media,
        "metadata_json": json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
    }


def read_chunk_rows(listing_path: str, chunk: str) -> list[dict[str, Any]]:
    table = pq.read_table(listing_path)
    table = table.filter(pc.equal(table["chunk"], chunk))
    rows = table.to_pylist()
    rows.sort(key=lambda r: (r["pmcid_num"], r["version"]))
    return rows


# media_counts keys that describe this run's transfers, not the chunk's content
TRANSFER_COUNTERS = ("packages_cached",)


def acquire_chunk(
    cfg: PmcSettings,
    chunk: str,
    listing_path: str,
    outputs: Outputs,
    cache_dir: str,
    *,
    transport: Transport | None = None,
    transfer_path: str | os.PathLike[str] | None = None,
) -> dict:
    """Download and verify one chunk's articles into the ``acquire_chunk`` rule's outputs (``articles``,
    ``rejections``, ``pending``, ``media_rejections``, ``counts``; :func:`pmcflow.tables.stage_outputs`).

    Transfer statistics of this run (``http.*``, ``packages_cached``) go to ``transfer_path`` when
    given, never into ``counts.json``.
    """
    if not CHUNK_RE.match(chunk):
        raise ValueError(f"bad chunk id {chunk!r}")
    out = stage_outputs("acquire_chunk", outputs)
    rows = read_chunk_rows(listing_path, chunk)
    backend = make_backend(cfg, transport)
    ctx = ChunkContext(
        cfg=cfg,
        backend=backend,
        chunk=chunk,
        cache=Path(cache_dir) / backend.source,
        select=Selection.from_config(cfg.select),
        media=MediaFilter(list(cfg.source.media_types)),
        verify_images=cfg.source.verify_images,
        media_rej=Rejections(MEDIA_STAGE, chunk),
    )
    rej = Rejections(ACQUIRE_STAGE, chunk)
    pending = Rejections(PENDING_STAGE, chunk)
    kept: list[dict[str, Any]] = []
    acquire = _acquire_cloud if backend.layout == "cloud" else _acquire_ftp
    bar = Progress(len(rows), desc=f"acquire {chunk}", unit="article", summary=False)
    try:
        with bar:
            for i, row in enumerate(rows):
                try:
                    kept.append(acquire(ctx, row))
                except Pending as e:
                    pending.add(row["article_uid"], e.reason, e.detail, pmcid=row["pmcid"])
                except Rejected as e:
                    rej.add(row["article_uid"], e.reason, e.detail, pmcid=row["pmcid"])
                except FetchError as e:  # anything not mapped to a more specific reason
                    target = pending if e.transient else rej
                    target.add(row["article_uid"], e.reason, e.detail, pmcid=row["pmcid"])
                bar.update()
                if (i + 1) % 100 == 0 and not bar.shown:  # in a log; on a terminal the bar says it
                    log.info("%s: %d/%d articles", chunk, i + 1, len(rows))
    finally:
        backend.close()
    extra: dict[str, Any] = {
        k: int(v) for k, v in sorted(ctx.media_counts.items()) if k not in TRANSFER_COUNTERS
    }
    for reason, n in sorted(ctx.media_rej.by_reason().items()):
        extra[f"media_rejected.{reason}"] = n
    counts = counts_record(
        ACQUIRE_STAGE, len(rows), len(kept), rej.by_reason(), chunk=chunk, extra=extra, pending=pending.by_reason()
    )
    write_stage(
        out,
        counts,
        tables={"articles": (kept, S.ACQUIRED)},
        rejections={
            "rejections": _sorted_rejections(rej),
            "media_rejections": _sorted_rejections(ctx.media_rej),
            "pending": _sorted_rejections(pending),
        },
    )
    transfer: dict[str, Any] = {f"http.{k}": v for k, v in sorted(backend.transport.stats.as_dict().items())}
    transfer.update({k: int(ctx.media_counts.get(k, 0)) for k in TRANSFER_COUNTERS})
    log.info("%s transfer: %s", chunk, json.dumps(transfer, sort_keys=True))
    if transfer_path is not None:
        write_json(transfer_path, {"chunk": chunk, "source": backend.source, **transfer})
    log.info(
        "%s: %d in, %d kept, %d rejected, %d pending retry, %d media failures (%s)",
        chunk,
        len(rows),
        len(kept),
        len(rej),
        len(pending),
        len(ctx.media_rej),
        bar.timing(),
    )
    if pending:
        log.warning(
            "%s: %d article(s) failed for a transient reason (%s); the next run re-acquires them",
            chunk,
            len(pending),
            ", ".join(f"{k} {v}" for k, v in sorted(pending.by_reason().items())),
        )
    return counts


def remove_partial_files(cache_dir: str | os.PathLike[str]) -> int:
    """Delete leftover ``*.part`` files under a cache (they are otherwise resumed, not removed)."""
    n = 0
    for p in Path(cache_dir).rglob("*.part"):
        p.unlink(missing_ok=True)
        n += 1
    for p in Path(cache_dir).rglob(".*.tmp-*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n


# ------------------------------------------------------------------------------------- CLI
def _setup_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def cli_list(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="pmcflow list-articles", description=__doc__.split("\n")[0])
    add_config_args(p)
    p.add_argument("--out", required=True, help="Output directory (listing.parquet, chunks.json, ...).")
    args = p.parse_args(list(argv))
    _setup_logging()
    counts = list_articles(PmcSettings.from_config(config_from_args(args)), args.out)
    print(json.dumps(counts, sort_keys=True))
    return 0


def retry_failed(cfg: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, int]:
    """Re-acquire every chunk of the run that has articles pending a retry; ``{chunk: still pending}``.

    The same call as the rule's (same listing, outputs, cache and transfer log), holding the results
    and cache locks.  Files fetched before are verified in the cache, not downloaded again; the next
    ``snakemake`` run sees the newer chunk outputs and rebuilds what depends on them.
    """
    from pmcflow.retry import pending_by_chunk
    from pmcflow.runlock import locked

    results = Path(cfg["paths"]["results"])
    before = pending_by_chunk(results)
    if dry_run or not before:
        return before
    cache = Path(cfg["paths"]["resources"]) / "pmc"
    after: dict[str, int] = {}
    with locked((results, "results folder"), (cache, "download cache")):
        for chunk in before:
            log.info("%s: re-acquiring (%d article(s) pending)", chunk, before[chunk])
            counts = acquire_chunk(
                PmcSettings.from_config(cfg),
                chunk,
                os.fspath(results / results_layout.LISTING),
                {k: results / v for k, v in results_layout.rule_outputs("acquire_chunk", chunk=chunk).items()},
                os.fspath(cache),
                transfer_path=Path(cfg["paths"]["logs"]) / "acquire" / f"{chunk}.transfer.json",
            )
            after[chunk] = int(sum(counts.get("pending", {}).values()))
    return after


def cli_retry_failed(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="pmcflow retry-failed",
        description="Re-acquire the articles that failed for a transient reason (HTTP 5xx/429, resets, "
        "timeouts) and are pending a retry. Prints {chunk: articles still pending} as JSON; exit 0 when "
        "none is left, 3 when some still fail.",
    )
    add_config_args(p)
    p.add_argument("--dry-run", action="store_true", help="Only list the chunks with pending articles.")
    args = p.parse_args(list(argv))
    _setup_logging()
    result = retry_failed(config_from_args(args), dry_run=args.dry_run)
    print(json.dumps(result, sort_keys=True))
    if args.dry_run:
        return 0
    return 3 if any(result.values()) else 0


def cli_unlock(argv: Sequence[str]) -> int:
    from pmcflow.runlock import describe, force_unlock

    p = argparse.ArgumentParser(
        prog="pmcflow unlock",
        description="Remove the .pmcflow.lock of a results folder or download cache whose run is gone "
        "(killed on another host). Check first that no run is still using it.",
    )
    p.add_argument("directory", nargs="+", help="Folder(s) holding a .pmcflow.lock.")
    args = p.parse_args(list(argv))
    for d in args.directory:
        owner = force_unlock(d)
        print(f"{d}: " + ("no lock" if owner is None else f"removed the lock of {describe(owner)}"))
    return 0


def cli_acquire(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="pmcflow acquire-chunk", description="Download and verify one chunk.")
    add_config_args(p)
    p.add_argument("--chunk", required=True, help="Chunk id, e.g. c000123.")
    p.add_argument("--listing", required=True, help="listing.parquet written by list-articles.")
    p.add_argument("--out", required=True, help="Output directory for this chunk's tables.")
    p.add_argument("--cache", required=True, help="Download cache directory (e.g. resources/pmc).")
    p.add_argument("--transfer-stats", metavar="JSON", help="Write this run's transfer statistics here.")
    args = p.parse_args(list(argv))
    _setup_logging()
    from pmcflow.runlock import locked

    with locked((args.cache, "download cache")):
        counts = acquire_chunk(
            PmcSettings.from_config(config_from_args(args)),
            args.chunk,
            args.listing,
            args.out,
            args.cache,
            transfer_path=args.transfer_stats,
        )
    print(json.dumps(counts, sort_keys=True))
    return 0
