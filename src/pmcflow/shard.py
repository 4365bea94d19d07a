"""Shard the filtered dataset into WebDataset tars (+ a Parquet index) for open_clip training.

Input: one or more DATASET Parquet files (:data:`pmcflow.schema.DATASET`), the subfigure rows kept by
the filter stage.  Output (``out_dir``)::

    train/train-000000.tar ...   WebDataset shards: <key>.jpg|png|webp, <key>.json, <key>.txt
    train/sizes.json             {"train-000000.tar": n, ...}  (open_clip's --train-num-samples source)
    val/...  test/...            the same per split (a split with no samples has no tar, sizes.json {})
    index.parquet                one row per sample (:data:`pmcflow.schema.SHARD_INDEX`)
    manifest.json                per shard: sha256, size, count; per split: urls for open_clip
    rejections.parquet           rows not sharded, with reasons
    counts.json                  in == kept + rejected

Guarantees
----------
* **Original bytes.**  The image member is the crop file exactly as written by the decompose stage;
  its extension comes from the decoded format, not from the file name.  Formats open_clip cannot
  read (TIFF, GIF, ...) are re-encoded to PNG (``other_formats: reencode-png``, recorded in the
  sample's json) or rejected (``other_formats: reject``).
* **Split by article.**  ``split = f(sha256(seed, split_key))`` with ``split_key`` = ``pmcid``
  by default, so all versions and all subfigures of one article land in the same split.
* **Deterministic.**  Within a split, samples are ordered by ``sha256(seed, subfigure_uid)``;
  tar members are written in a fixed order with fixed mtime/uid/gid/uname/mode in GNU format (no
  pax headers, no timestamps), so a rerun with the same inputs gives byte-identical tars.
* **Atomic.**  Each tar is written to a hidden temporary name in the same directory, fsynced and
  renamed; an interrupted shard is never visible under its final name.  ``manifest.json`` is written
  last.
* **Nothing dropped silently.**  Missing or corrupt crops, empty texts, duplicate uids and
  unsupported formats become rejection rows.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import re
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, ImageFile, UnidentifiedImageError

from pmcflow import schema as S
from pmcflow.config import ConfigError
from pmcflow.config import section as config_section
from pmcflow.datacard import dataset_card, sample_json_schema
from pmcflow.errors import RejectionError
from pmcflow.seeding import seed_digest, unit_uniform
from pmcflow.tables import (
    Rejections,
    atomic_dir,
    atomic_open,
    counts_record,
    file_sha256,
    temp_sibling,
    write_counts,
    write_json,
    write_table,
)
from pmcflow.textclean import clean_text

STAGE = "shard"

# Pillow format name -> WebDataset extension open_clip reads ("jpg;png;jpeg;webp").
NATIVE_FORMATS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}
TAR_BLOCK = 512
TAR_RECORD = 10240

# Never decode half an image: a truncated crop must be rejected, not padded with grey.
ImageFile.LOAD_TRUNCATED_IMAGES = False


class ShardConfigError(ValueError):
    """The ``shard`` config section is invalid."""


# ----------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------
def resolve_config(cfg_shard: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``shard`` section with the schema's defaults, checked; returns a new dict.

    Types, enums and ranges come from config/schema/config.schema.yaml (:func:`pmcflow.config.section`);
    what the schema cannot say is checked here: the split fractions sum to 1.
    """
    try:
        cfg = config_section({"shard": dict(cfg_shard or {})}, "shard")
    except ConfigError as exc:
        raise ShardConfigError(str(exc)) from None
    cfg["text_fields"] = list(cfg["text_fields"])
    splits = {str(k): float(v) for k, v in dict(cfg["splits"]).items()}
    if not math.isclose(sum(splits.values()), 1.0, abs_tol=1e-6):
        raise ShardConfigError(f"shard.splits: fractions must sum to 1: {splits}")
    cfg["splits"] = splits
    return cfg


# ----------------------------------------------------------------------------------------------
# Pure helpers: split assignment, order, keys, text, tar sizes
# ----------------------------------------------------------------------------------------------
def assign_split(seed: int, group: str, splits: Mapping[str, float]) -> str:
    """The split of one article group: a uniform draw from (seed, group) against cumulative fractions.

    Split names are visited in sorted order so the result does not depend on dict order.
    """
    u = unit_uniform(seed, f"{STAGE}-split", group)
    names = sorted(n for n, f in splits.items() if f > 0)
    acc = 0.0
    for name in names:
        acc += splits[name]
        if u < acc:
            return name
    return names[-1]


def order_key(seed: int, uid: str) -> str:
    """Position of a sample inside its split (a seeded shuffle that is stable per item)."""
    return seed_digest(seed, f"{STAGE}-order", uid).hex()


def sample_key(uid: str) -> str:
    """A WebDataset ``__key__`` for a subfigure uid: readable, unique, and without dots or slashes.

    WebDataset splits a member name at the first dot of its base name, so ``PMC1.1/fig1/s0`` cannot
    be used as is; a short hash of the exact uid keeps sanitised keys unique.
    """
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", uid).strip("_")[:72]
    return f"{readable}-{hashlib.sha256(uid.encode()).hexdigest()[:10]}"


def compose_text(
    row: Mapping[str, Any], fields: Sequence[str], separator: str, max_chars: int | None = None
) -> str:
    """Join the non-empty text fields in order; a field equal to the previous one is not repeated.

    Each field is normalised (pmcflow.textclean: NFC, no control characters) and its whitespace
    collapsed, whatever an upstream stage let through.
    """
    parts: list[str] = []
    for name in fields:
        value = row.get(name)
        if value is None:
            continue
        text = " ".join((clean_text(str(value)) or "").split())
        if text and (not parts or parts[-1] != text):
            parts.append(text)
    out = separator.join(parts)
    if max_chars is not None and len(out) > max_chars:
        out = out[: int(max_chars)].rstrip()
    return out


def tar_member_size(n_bytes: int) -> int:
    """Bytes one member occupies in a tar (header + data padded to blocks)."""
    return TAR_BLOCK + TAR_BLOCK * math.ceil(n_bytes / TAR_BLOCK)


def tar_file_size(member_sizes_total: int) -> int:
    """Final tar size given the summed :func:`tar_member_size` of its members."""
    raw = member_sizes_total + 2 * TAR_BLOCK
    return TAR_RECORD * math.ceil(raw / TAR_RECORD)


def _json_safe(value: Any) -> Any:
    """Replace non-finite floats (NaN, inf: not valid JSON) with None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


# ----------------------------------------------------------------------------------------------
# Images
# ----------------------------------------------------------------------------------------------
@dataclass
class ImagePayload:
    data: bytes
    ext: str
    source_format: str
    reencoded: bool
    width: int
    height: int


class ImageReject(RejectionError, ValueError):
    """A crop that cannot go into a shard (unreadable, too large, unsupported format)."""


def prepare_image(
    data: bytes, *, verify: str = "decode", other_formats: str = "reencode-png", max_pixels: int | None = None
) -> ImagePayload:
    """Identify (and by default fully decode) image bytes; return what goes into the tar.

    Raises :class:`ImageReject` for empty, unreadable, truncated, oversized or unsupported images.
    """
    if not data:
        raise ImageReject("corrupt_image", "empty file")
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt = (img.format or "").upper()
            width, height = img.size
            if max_pixels is not None and width * height > max_pixels:
                raise ImageReject("image_too_large", f"{width}x{height} > {max_pixels} pixels")
            if verify == "decode" or fmt not in NATIVE_FORMATS:
                img.load()
            if fmt in NATIVE_FORMATS:
                return ImagePayload(data, NATIVE_FORMATS[fmt], fmt, False, width, height)
            if other_formats == "reject":
                raise ImageReject("unsupported_format", f"format {fmt or 'unknown'}")
            frame = img.convert("RGBA" if "A" in img.getbands() or "transparency" in img.info else "RGB")
            buf = io.BytesIO()
            frame.save(buf, format="PNG", optimize=False)
            return ImagePayload(buf.getvalue(), "png", fmt, True, width, height)
    except ImageReject:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageReject("corrupt_image", f"{type(exc).__name__}: {exc}") from exc


# ----------------------------------------------------------------------------------------------
# Deterministic, atomic tar writing
# ----------------------------------------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class AtomicTarWriter:
    """Write one tar deterministically to a hidden temp file; publish it with :meth:`commit`."""

    def __init__(self, path: Path, mtime: int = 0) -> None:
        self.path = path
        self.mtime = int(mtime)
        self.tmp = temp_sibling(path)
        self._fh = open(self.tmp, "wb")  # noqa: SIM115 - closed in commit/abort
        self._tar = tarfile.open(fileobj=self._fh, mode="w", format=tarfile.GNU_FORMAT)
        self._hash = None
        self.count = 0
        self.members_bytes = 0

    def add(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = self.mtime
        info.mode = 0o644
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.type = tarfile.REGTYPE
        self._tar.addfile(info, io.BytesIO(data))
        self.members_bytes += tar_member_size(len(data))

    def commit(self) -> tuple[str, int]:
        """Finish, fsync, rename to the final name; returns (sha256, size)."""
        self._tar.close()
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        digest = file_sha256(self.tmp)
        size = self.tmp.stat().st_size
        os.replace(self.tmp, self.path)
        _fsync_dir(self.path.parent)
        return digest, size

    def abort(self) -> None:
        with contextlib.suppress(Exception):
            self._tar.close()
        with contextlib.suppress(Exception):
            self._fh.close()
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()


def shard_name(split: str, index: int) -> str:
    return f"{split}-{index:06d}.tar"


def brace_urls(directory: str | os.PathLike[str], split: str, n_shards: int) -> str | None:
    """open_clip ``--train-data`` pattern for a split's shards (brace expansion)."""
    if n_shards == 0:
        return None
    if n_shards == 1:
        return str(Path(directory) / shard_name(split, 0))
    return str(Path(directory) / f"{split}-{{{0:06d}..{n_shards - 1:06d}}}.tar")


# ----------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------
class DanglingPointer(RuntimeError):
    """Dataset rows point to crops that no longer exist or no longer match their recorded hash."""


@dataclass
class _SplitState:
    name: str
    directory: Path
    shards: list[dict[str, Any]] = field(default_factory=list)
    writer: AtomicTarWriter | None = None
    n_samples: int = 0


def read_dataset(paths: Sequence[str | os.PathLike[str]]) -> pa.Table:
    """Concatenate DATASET Parquet files (columns unified; extra columns kept)."""
    tables = [pq.read_table(p) for p in paths]
    tables = [t for t in tables if t.num_rows or t.num_columns]
    if not tables:
        return S.DATASET.empty_table()
    return pa.concat_tables(tables, promote_options="default")


def _rows(table: pa.Table, indices: Sequence[int], batch: int = 512) -> Iterator[dict[str, Any]]:
    for start in range(0, len(indices), batch):
        yield from table.take(pa.array(indices[start : start + batch], pa.int64())).to_pylist()


def _resolve(path: str, base_dir: Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else base_dir / p


def shard_dataset(
    cfg_shard: Mapping[str, Any] | None,
    seed: int,
    dataset_paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    base_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Write WebDataset shards, the index, sizes.json per split, manifest and counts to ``out_dir``.

    ``crop_path`` values that are relative are resolved against ``base_dir`` (default: the current
    directory, i.e. the workflow directory under Snakemake).  Returns the manifest dict.
    """
    t0 = time.perf_counter()
    cfg = resolve_config(cfg_shard)
    final = Path(out_dir)
    # Everything is written into a temporary sibling folder that replaces ``out_dir`` only once
    # complete: a killed or failed run never leaves a shards folder that looks finished.
    with atomic_dir(final) as out:
        return _shard_into(cfg, seed, dataset_paths, out, final, base_dir, t0)


def _shard_into(
    cfg: dict[str, Any],
    seed: int,
    dataset_paths: Sequence[str | os.PathLike[str]],
    out: Path,
    final: Path,
    base_dir: str | os.PathLike[str] | None,
    t0: float,
) -> dict[str, Any]:
    """:func:`shard_dataset`'s body: write into ``out``, record paths as they will be under ``final``."""
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    table = read_dataset(dataset_paths)
    n_in = table.num_rows
    rejections = Rejections(STAGE)

    uids = table.column("subfigure_uid").to_pylist() if n_in else []
    groups = table.column(cfg["split_key"]).to_pylist() if n_in else []
    split_names = sorted(cfg["splits"])
    plan: dict[str, list[tuple[str, int]]] = {name: [] for name in split_names}
    seen: set[str] = set()
    for i, (uid, group) in enumerate(zip(uids, groups, strict=True)):
        if uid in seen:
            rejections.add(str(uid), "duplicate_subfigure_uid", "uid already seen in an earlier row")
            continue
        seen.add(uid)
        split = assign_split(seed, str(group), cfg["splits"])
        plan[split].append((order_key(seed, str(uid)), i))

    states = {name: _SplitState(name, out / name) for name in split_names}
    index_rows: list[dict[str, Any]] = []
    format_counts: Counter[str] = Counter()
    n_reencoded = 0
    image_bytes_total = 0
    max_samples = cfg["max_samples_per_shard"]
    max_bytes = cfg["max_bytes_per_shard"]

    for state in states.values():
        state.directory.mkdir(parents=True, exist_ok=True)
    dangling: list[str] = []

    try:
        for name in split_names:
            state = states[name]
            order = [i for _, i in sorted(plan[name])]
            for row in _rows(table, order):
                uid = str(row["subfigure_uid"])
                pmcid = row.get("pmcid")
                text = compose_text(row, cfg["text_fields"], cfg["text_separator"], cfg["text_max_chars"])
                if not text:
                    rejections.add(uid, "empty_text", f"all of {cfg['text_fields']} empty", pmcid)
                    continue
                crop = row.get("crop_path")
                if not crop:
                    rejections.add(uid, "missing_crop", "crop_path is null", pmcid)
                    continue
                try:
                    raw = _resolve(str(crop), base).read_bytes()
                except OSError as exc:  # a pointer to nothing: the run fails below, loudly
                    dangling.append(f"{uid}: {crop}: {exc.strerror or exc}")
                    continue
                want = row.get("crop_sha256")
                if want and hashlib.sha256(raw).hexdigest() != want:
                    dangling.append(f"{uid}: {crop}: sha256 differs from the one decompose recorded")
                    continue
                try:
                    payload = prepare_image(
                        raw,
                        verify=cfg["verify_images"],
                        other_formats=cfg["other_formats"],
                        max_pixels=cfg["max_image_pixels"],
                    )
                except ImageReject as exc:
                    rejections.add(uid, exc.reason, f"{crop}: {exc.detail}", pmcid)
                    continue

                key = sample_key(uid)
                text_bytes = text.encode("utf-8")
                image_sha = hashlib.sha256(payload.data).hexdigest()
                meta = {k: row[k] for k in sorted(row)}
                meta.update(
                    {
                        "key": key,
                        "split": name,
                        "text": text,
                        "text_fields": list(cfg["text_fields"]),
                        "image_ext": payload.ext,
                        "image_sha256": image_sha,
                        "image_source_format": payload.source_format,
                        "image_reencoded": payload.reencoded,
                        "image_width": payload.width,
                        "image_height": payload.height,
                    }
                )
                # The json names its shard, so size it with the current shard's name first.
                w = state.writer
                meta["shard"] = shard_name(name, len(state.shards))
                meta_bytes = _dump_meta(meta)
                sample_size = sum(tar_member_size(len(b)) for b in (payload.data, meta_bytes, text_bytes))
                if w is not None and (
                    (max_samples is not None and w.count >= int(max_samples))
                    or (
                        max_bytes is not None
                        and tar_file_size(w.members_bytes + sample_size) > int(max_bytes)
                    )
                ):
                    _close_shard(state)
                    w = None
                    meta["shard"] = shard_name(name, len(state.shards))
                    meta_bytes = _dump_meta(meta)
                if w is None:
                    w = state.writer = AtomicTarWriter(state.directory / meta["shard"], cfg["mtime"])
                # Members of one sample are contiguous and in a fixed order.
                w.add(f"{key}.{payload.ext}", payload.data)
                w.add(f"{key}.json", meta_bytes)
                w.add(f"{key}.txt", text_bytes)
                w.count += 1
                state.n_samples += 1
                format_counts[payload.ext] += 1
                n_reencoded += int(payload.reencoded)
                image_bytes_total += len(payload.data)
                index_rows.append(
                    {
                        "key": key,
                        "split": name,
                        "shard": w.path.name,
                        "subfigure_uid": uid,
                        "article_uid": row.get("article_uid"),
                        "pmcid": pmcid,
                        "image_ext": payload.ext,
                        "image_sha256": image_sha,
                        "text": text,
                        "license_code": row.get("license_code"),
                        "modality": row.get("modality"),
                    }
                )
            if state.writer is not None:
                _close_shard(state)
    except BaseException:
        for state in states.values():
            if state.writer is not None:
                state.writer.abort()
                state.writer = None
        raise

    if dangling:
        raise DanglingPointer(
            f"{len(dangling)} of {n_in} dataset rows point to crops that are missing or changed since "
            f"decompose wrote them (first: {'; '.join(dangling[:3])}). The decompose outputs are stale: "
            "rerun the workflow (Snakemake reruns decompose_chunk when its crops folder is missing)."
        )
    for state in states.values():
        write_json(state.directory / "sizes.json", {s["name"]: s["count"] for s in state.shards})

    write_table(index_rows, S.SHARD_INDEX, out / "index.parquet")
    rejections.write(out / "rejections.parquet")
    n_kept = len(index_rows)
    extra: dict[str, Any] = {f"n_{n}": states[n].n_samples for n in split_names}
    extra.update(
        {
            "n_shards": sum(len(s.shards) for s in states.values()),
            "tar_bytes": sum(sh["size"] for s in states.values() for sh in s.shards),
            "image_bytes": image_bytes_total,
            "n_reencoded": n_reencoded,
        }
    )
    counts = counts_record(STAGE, n_in, n_kept, rejections.by_reason(), extra=extra)
    write_counts(out / "counts.json", counts)

    manifest: dict[str, Any] = {
        "stage": STAGE,
        "seed": int(seed),
        "config": cfg,
        "inputs": [str(p) for p in dataset_paths],
        "n_in": n_in,
        "n_samples": n_kept,
        "image_formats": dict(sorted(format_counts.items())),
        "splits": {
            n: {
                "n_samples": states[n].n_samples,
                "n_shards": len(states[n].shards),
                "urls": brace_urls(final / n, n, len(states[n].shards)),
                "sizes_json": str(final / n / "sizes.json"),
                "shards": states[n].shards,
            }
            for n in split_names
        },
        "n_articles": {n: len({r["pmcid"] for r in index_rows if r["split"] == n}) for n in split_names},
    }
    write_json(out / "manifest.json", manifest)
    title = f"pmcflow {final.parent.name if final.name == 'shards' else final.name}"  # results/<run>/shards
    card = dataset_card(manifest, index_rows, sample_json_schema(table.schema), name=title)
    with atomic_open(out / "README.md", "w", encoding="utf-8") as fh:
        fh.write(card)
    manifest["elapsed_s"] = time.perf_counter() - t0
    return manifest


def _dump_meta(meta: Mapping[str, Any]) -> bytes:
    kw: dict[str, Any] = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")}
    try:
        return json.dumps(meta, allow_nan=False, **kw).encode()
    except ValueError:  # a NaN/inf somewhere: only then pay for the recursive clean-up
        return json.dumps(_json_safe(dict(meta)), **kw).encode()


def _close_shard(state: _SplitState) -> None:
    writer = state.writer
    assert writer is not None
    sha, size = writer.commit()
    state.shards.append({"name": writer.path.name, "sha256": sha, "size": size, "count": writer.count})
    state.writer = None


# ----------------------------------------------------------------------------------------------
# Hugging Face ``datasets``
# ----------------------------------------------------------------------------------------------
def hf_webdataset_features(tar_paths: Sequence[str | os.PathLike[str]], max_samples: int = 256) -> Any:
    """``datasets.Features`` for ``load_dataset("webdataset", ..., features=...)`` on these shards.

    Hugging Face's webdataset builder infers the columns from the first samples and refuses shards
    whose samples differ in extensions, which ours do (original PNG and JPEG crops side by side).
    With explicit features it accepts them and leaves the absent image column ``None``.
    """
    import datasets

    metas: list[dict[str, Any]] = []
    exts: set[str] = set()
    for path in tar_paths:
        with tarfile.open(path) as tf:
            for member in tf:
                ext = member.name.rsplit(".", 1)[-1]
                if ext == "json" and len(metas) < max_samples:
                    fh = tf.extractfile(member)
                    assert fh is not None
                    metas.append(json.loads(fh.read()))
                elif ext in NATIVE_FORMATS.values():
                    exts.add(ext)
    json_type = pa.Table.from_pylist(metas).schema if metas else pa.schema([])
    as_struct = datasets.Features.from_arrow_schema(pa.schema([pa.field("json", pa.struct(list(json_type)))]))
    feats: dict[str, Any] = {"__key__": datasets.Value("string"), "__url__": datasets.Value("string")}
    feats.update({ext: datasets.Image() for ext in sorted(exts)})
    feats["txt"] = datasets.Value("string")
    feats["json"] = as_struct["json"]
    return datasets.Features(feats)


# ----------------------------------------------------------------------------------------------
# Command line: ``pmcflow shard``
# ----------------------------------------------------------------------------------------------
def cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pmcflow shard", description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", help="DATASET Parquet file(s) from the filter stage.")
    parser.add_argument("--out", required=True, help="Output directory.")
    parser.add_argument("--config", "-c", action="append", default=[], metavar="FILE")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=None, help="Overrides the config's seed.")
    parser.add_argument(
        "--base-dir", default=None, help="Directory relative crop paths are resolved against."
    )
    args = parser.parse_args(argv)
    from pmcflow.config import load_config

    config = load_config(args.config, args.overrides)
    section, seed = config["shard"], int(config["seed"])
    manifest = shard_dataset(
        section, seed if args.seed is None else args.seed, args.datasets, args.out, base_dir=args.base_dir
    )
    summary = {n: {k: v for k, v in s.items() if k != "shards"} for n, s in manifest["splits"].items()}
    print(
        json.dumps(
            {"n_in": manifest["n_in"], "n_samples": manifest["n_samples"], "splits": summary}, indent=2
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli())
