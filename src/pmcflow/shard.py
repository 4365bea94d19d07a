"""Shard the filtered dataset into WebDataset tars (+ a Parquet index) for open_clip training.

Input: one or more DATASET Parquet files (:data:`pmcflow.schema.DATASET`), the subfigure rows kept by
the filter stage.  Output (``out_dir``)::

    train/train-000000.tar ...   WebDataset shards: <key>.jpg|png|webp, <key>.json, <key>.txt,
                                 <key>.<field>.txt per text field (:data:`pmcflow.schema.SAMPLE_MEMBERS`)
    train/sizes.json             {"train-000000.tar": n, ...}  (open_clip's --train-num-samples source)
    val/...  test/...            the same per split (a split with no samples has no tar, sizes.json {})
    index.parquet                one row per sample (:data:`pmcflow.schema.SHARD_INDEX`)
    manifest.json                per shard: sha256, size, count; per split: urls for open_clip
    rejections.parquet           rows not sharded, with reasons
    counts.json                  in == kept + rejected

That is :func:`shard_dataset`, in one pass.  The workflow writes the same samples per chunk, as
parallel jobs (:func:`shard_chunk`: ``train/train-<chunk>-000000.tar`` ... and the chunk's index),
and a cheap global step links them into one such folder (:func:`assemble_shards`); the manifest's
``urls`` then hold one brace pattern per chunk, joined with ``::``.

Guarantees
----------
* **Original bytes.**  The image member is the crop file exactly as written by the decompose stage;
  its extension comes from the format its header declares, not from the file name.  Formats
  open_clip cannot read (TIFF, GIF, ...) are re-encoded to PNG (``other_formats: reencode-png``,
  recorded in the sample's json) or rejected (``other_formats: reject``).
* **Verified images, decoded once.**  ``verify_images: header`` (the default): a crop's bytes must
  match the sha256 decompose recorded (``crop_sha256``) when it encoded the crop from a decoded
  image, and its header must identify it (PNG IHDR / JPEG frame header, :func:`sniff_image`; other
  formats through ``PIL.Image.open``): no pixel is decoded again.  A crop without a recorded hash is
  fully decoded whatever the setting, so nothing unverified gets in.  ``verify_images: decode``
  decodes every crop.  ``counts.json`` records ``n_images_decoded``.
* **Split by article.**  ``split = f(sha256(seed, split_key))`` with ``split_key`` = ``pmcid``
  by default, so all versions and all subfigures of one article land in the same split.
* **Deterministic.**  Within a split, samples are ordered by ``sha256(seed, subfigure_uid)``;
  tar members are written in a fixed order with fixed mtime/uid/gid/uname/mode in GNU format (no
  pax headers, no timestamps; the bytes ``tarfile`` would write, see :func:`tar_header`), so a rerun
  with the same inputs gives byte-identical tars, whichever ``verify_images``.
* **Atomic.**  Each tar is written to a hidden temporary name in the same directory (hashed as it
  is written), fsynced and renamed (on a background thread while the next shard is written; the
  stage waits for it before its output folder is complete); an interrupted shard is never visible
  under its final name.
  ``manifest.json`` is written last.
* **One sample format.**  Every sample has the same members (:data:`pmcflow.schema.SAMPLE_MEMBERS`,
  plus its one image): ``.txt`` is the composed text (``text_fields``), and each text column of
  :data:`pmcflow.schema.SAMPLE_TEXT_FIELDS` is also a member of its own (``<key>.subcaption.txt``
  ...; empty when null), so another composition is made at load time, without re-sharding.
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
import shutil
import struct
import sys
import tarfile
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, ImageFile, UnidentifiedImageError

from pmcflow import schema as S
from pmcflow.config import ConfigError
from pmcflow.datacard import CARD_INDEX_COLUMNS, dataset_card, sample_json_schema
from pmcflow.errors import RejectionError
from pmcflow.seeding import seed_digest, unit_uniform
from pmcflow.settings import FrozenMap, Settings
from pmcflow.tables import (
    Rejections,
    atomic_dir,
    atomic_open,
    counts_record,
    temp_sibling,
    to_table,
    write_counts,
    write_json,
    write_table,
)
from pmcflow.textclean import clean_text

STAGE = "shard"

# Pillow format name -> WebDataset extension (the sample format, pmcflow.schema).
NATIVE_FORMATS = S.SAMPLE_IMAGE_FORMATS
TAR_BLOCK = 512
TAR_RECORD = 10240

# Never decode half an image: a truncated crop must be rejected, not padded with grey.
ImageFile.LOAD_TRUNCATED_IMAGES = False


class ShardConfigError(ConfigError):
    """The ``shard`` config section is invalid."""


# ----------------------------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardSettings(Settings):
    """``shard``, typed and frozen. Types, enums, ranges and defaults come from
    config/schema/config.schema.yaml; what the schema cannot say is checked here: the split
    fractions sum to 1."""

    SECTION: ClassVar[tuple[str, ...]] = ("shard",)

    text_fields: tuple[str, ...]
    text_separator: str
    text_max_chars: int | None
    splits: Mapping[str, float]
    split_key: str
    max_samples_per_shard: int | None
    max_bytes_per_shard: int | None
    verify_images: str
    other_formats: str
    max_image_pixels: int | None
    mtime: int

    def __post_init__(self) -> None:
        splits = {str(k): float(v) for k, v in self.splits.items()}
        if not math.isclose(sum(splits.values()), 1.0, abs_tol=1e-6):
            raise ShardConfigError(f"shard.splits: fractions must sum to 1: {splits}")
        object.__setattr__(self, "splits", FrozenMap(splits))

    @classmethod
    def from_section(cls, value: Mapping[str, Any] | None) -> ShardSettings:  # type: ignore[override]
        try:
            return super().from_section(value)
        except ShardConfigError:
            raise
        except ConfigError as exc:
            raise ShardConfigError(str(exc)) from None


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


_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def sample_key(uid: str) -> str:
    """A WebDataset ``__key__`` for a subfigure uid: readable, unique, and without dots or slashes.

    WebDataset splits a member name at the first dot of its base name, so ``PMC1.1/fig1/s0`` cannot
    be used as is; a short hash of the exact uid keeps sanitised keys unique.
    """
    readable = _KEY_UNSAFE.sub("_", uid).strip("_")[:72]
    return f"{readable}-{hashlib.sha256(uid.encode()).hexdigest()[:10]}"


def compose_text(
    row: Mapping[str, Any], fields: Sequence[str], separator: str, max_chars: int | None = None
) -> str:
    """Join the non-empty text fields in order; a field equal to the previous one is not repeated.

    Each field is normalised (pmcflow.textclean: NFC, no control characters) and its whitespace
    collapsed, whatever an upstream stage let through.
    """
    return join_texts([field_text(row.get(name)) for name in fields], separator, max_chars)


def field_text(value: Any) -> str:
    """One text field as :func:`compose_text` uses it (and its ``<key>.<field>.txt`` member holds
    it): cleaned, whitespace collapsed; "" for None."""
    if value is None:
        return ""
    text = value if type(value) is str else str(value)
    # The common case: printable ASCII (clean_text returns it unchanged; its only whitespace is " ")
    # with no run of spaces and no space at either end: collapsing would return it unchanged too.
    if text.isascii() and text.isprintable() and "  " not in text and text[:1] != " " != text[-1:]:
        return text
    return " ".join((clean_text(text) or "").split())


def join_texts(texts: Sequence[str], separator: str, max_chars: int | None = None) -> str:
    """:func:`compose_text`'s join of already cleaned fields (:func:`field_text`)."""
    parts: list[str] = []
    for text in texts:
        if text and (not parts or parts[-1] != text):
            parts.append(text)
    out = separator.join(parts)
    if max_chars is not None and len(out) > max_chars:
        out = out[: int(max_chars)].rstrip()
    return out


def tar_member_size(n_bytes: int) -> int:
    """Bytes one member occupies in a tar (header + data padded to blocks)."""
    return TAR_BLOCK * (1 + (n_bytes + TAR_BLOCK - 1) // TAR_BLOCK)


def _members_size(datas: Sequence[bytes]) -> int:
    """The summed :func:`tar_member_size` of members holding ``datas``."""
    blocks = len(datas)
    for data in datas:
        blocks += (len(data) + TAR_BLOCK - 1) // TAR_BLOCK
    return TAR_BLOCK * blocks


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
    decoded: bool = False  # every pixel was decoded (else: identified from the header only)


class ImageReject(RejectionError, ValueError):
    """A crop that cannot go into a shard (unreadable, too large, unsupported format)."""


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Valid (colour type, bit depth) pairs of a PNG IHDR (PNG spec, table 11.1).
_PNG_DEPTHS = {0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}
# JPEG start-of-frame markers that carry the frame size, as Pillow's JpegImagePlugin reads them
# (baseline, extended, progressive, lossless; Huffman and arithmetic).
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
# Marker segments Pillow skips or parses without changing format or size (DHT, DAC, DQT, DNL, DRI,
# EXP, APP0-15, COM): a length field follows each.
_JPEG_SKIP = frozenset({0xC4, 0xCC, 0xDB, 0xDC, 0xDD, 0xDF, 0xFE, *range(0xE0, 0xF0)})


def sniff_image(data: bytes) -> tuple[str, int, int] | None:
    """``(format, width, height)`` of PNG or JPEG bytes from their header alone, else None.

    When it answers, the answer is what ``PIL.Image.open`` reports (``img.format``, ``img.size``;
    tests/unit/test_shard.py compares them): a PNG's signature and IHDR chunk (length, CRC, colour
    type and depth checked); a JPEG's marker segments up to the start of scan, the last frame header
    (8-bit precision, 1, 3 or 4 components) giving the size.  Anything else - WEBP, TIFF, a JPEG
    with an MPF segment (Pillow may call it MPO), a marker Pillow treats differently, a header cut
    short - is None, and the caller asks Pillow.  Costs microseconds where ``Image.open`` costs
    tens to hundreds of them.
    """
    if data[:8] == PNG_SIGNATURE:
        # IHDR: length 13, type, width, height, depth, colour type, compression, filter, interlace, CRC
        if len(data) < 33 or data[8:16] != b"\x00\x00\x00\x0dIHDR":
            return None
        width, height, depth, colour, compression, filt, interlace = struct.unpack_from(">IIBBBBB", data, 16)
        if (
            zlib.crc32(data[12:29]) != int.from_bytes(data[29:33], "big")
            or not (0 < width < 2**31 and 0 < height < 2**31)
            or depth not in _PNG_DEPTHS.get(colour, ())
            or compression
            or filt
            or interlace > 1
        ):
            return None
        return "PNG", width, height
    if data[:3] == b"\xff\xd8\xff":
        return _sniff_jpeg(data)
    return None


def _sniff_jpeg(data: bytes) -> tuple[str, int, int] | None:
    n = len(data)
    pos = 2
    size: tuple[int, int] | None = None
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            return None  # Pillow skips junk between segments; leave such files to it
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        length = (data[pos + 2] << 8) | data[pos + 3]
        if marker == 0xDA:  # start of scan: the header is complete
            return ("JPEG", *size) if size is not None else None
        if length < 2 or pos + 2 + length > n:
            return None
        if marker in _JPEG_SOF:
            if length < 8:
                return None
            precision, height, width, components = struct.unpack_from(">BHHB", data, pos + 4)
            if precision != 8 or components not in (1, 3, 4) or not (width and height):
                return None
            size = (width, height)
        elif marker == 0xE2 and data[pos + 4 : pos + 8] == b"MPF\x00":
            return None  # a multi-picture file: Pillow decides between JPEG and MPO
        elif marker not in _JPEG_SKIP:
            return None
        pos += 2 + length
    return None


def prepare_image(
    data: bytes, *, verify: str = "decode", other_formats: str = "reencode-png", max_pixels: int | None = None
) -> ImagePayload:
    """Identify (and with ``verify="decode"``, the default here, fully decode) image bytes; return
    what goes into the tar.

    ``verify="header"`` identifies a PNG or JPEG from its header alone (:func:`sniff_image`), other
    formats with ``PIL.Image.open`` (which reads the header only); it checks neither the pixel data
    nor the file's end, so use it only on bytes something else vouches for: the stage does so only
    when the crop's sha256 matches the one decompose recorded after encoding the decoded crop.

    Raises :class:`ImageReject` for empty, unreadable, truncated (when decoding), oversized or
    unsupported images.
    """
    if not data:
        raise ImageReject("corrupt_image", "empty file")
    if verify == "header":
        sniffed = sniff_image(data)
        if sniffed is not None:
            fmt, width, height = sniffed
            if max_pixels is not None and width * height > max_pixels:
                raise ImageReject("image_too_large", f"{width}x{height} > {max_pixels} pixels")
            bomb = Image.MAX_IMAGE_PIXELS
            if not bomb or width * height <= 2 * bomb:  # else Pillow's own verdict, below
                return ImagePayload(data, NATIVE_FORMATS[fmt], fmt, False, width, height)
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt = (img.format or "").upper()
            width, height = img.size
            if max_pixels is not None and width * height > max_pixels:
                raise ImageReject("image_too_large", f"{width}x{height} > {max_pixels} pixels")
            decoded = verify == "decode" or fmt not in NATIVE_FORMATS
            if decoded:
                img.load()
            if fmt in NATIVE_FORMATS:
                return ImagePayload(data, NATIVE_FORMATS[fmt], fmt, False, width, height, decoded)
            if other_formats == "reject":
                raise ImageReject("unsupported_format", f"format {fmt or 'unknown'}")
            frame = img.convert("RGBA" if "A" in img.getbands() or "transparency" in img.info else "RGB")
            buf = io.BytesIO()
            frame.save(buf, format="PNG", optimize=False)
            return ImagePayload(buf.getvalue(), "png", fmt, True, width, height, True)
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


# The constant parts of a member header: mode 0644, uid 0, gid 0 | type "0" (regular file), no link
# name, GNU magic, empty uname/gname, no device numbers, no prefix, padding to 512 bytes.
_TAR_MODE_IDS = b"0000644\x00" + b"0000000\x00" * 2
_TAR_TAIL = b"0" + bytes(100) + tarfile.GNU_MAGIC + bytes(32 + 32 + 8 + 8 + 155 + 12)
_TAR_CONST_SUM = sum(_TAR_MODE_IDS) + sum(_TAR_TAIL) + 8 * 0x20  # the checksum field counts as spaces
_TAR_PADS = tuple(bytes(i) for i in range(TAR_BLOCK))
_OCTAL_11 = 8**11


def tar_header(name: str, size: int, mtime: int = 0) -> bytes:
    """The GNU tar header of a regular file (mode 0644, uid/gid 0, uname/gname ""): byte for byte
    what ``tarfile`` writes for that ``TarInfo`` in ``GNU_FORMAT``, built in a few microseconds
    instead of the ~30 that ``TarInfo.tobuf`` takes.  Names over 100 bytes and sizes or mtimes
    beyond 11 octal digits (never the case for sample keys) go through ``tarfile`` itself."""
    raw = name.encode(tarfile.ENCODING, "surrogateescape")
    if len(raw) > 100 or b"\x00" in raw or not (0 <= size < _OCTAL_11 and 0 <= mtime < _OCTAL_11):
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode, info.uid, info.gid = size, mtime, 0o644, 0, 0
        info.uname = info.gname = ""
        return info.tobuf(tarfile.GNU_FORMAT, tarfile.ENCODING, "surrogateescape")
    head = raw + _TAR_PADS[100 - len(raw)]
    sizes = b"%011o\x00%011o\x00" % (size, mtime)
    # The byte sum of these 124 bytes (at most 31,620, below Adler-32's modulus) is the low half
    # of their Adler-32 minus one: a C loop instead of a Python one.
    checksum = (zlib.adler32(head + sizes) & 0xFFFF) - 1 + _TAR_CONST_SUM
    return b"".join((head, _TAR_MODE_IDS, sizes, b"%06o\x00 " % checksum, _TAR_TAIL))


def _write_all(fd: int, bufs: list[Any], n_bytes: int) -> None:
    """Write ``bufs`` (``n_bytes`` in all) in order, in as few system calls as possible."""
    if not hasattr(os, "writev"):  # pragma: no cover - not on the platforms pmcflow runs on
        for buf in bufs:
            view = memoryview(buf)
            while view:
                view = view[os.write(fd, view) :]
        return
    while bufs:
        chunk = bufs[:_IOV_MAX]
        n = os.writev(fd, chunk)
        n_bytes -= n
        if n_bytes == 0:
            return
        if n == 0:
            raise OSError(f"writev wrote nothing of the {n_bytes} bytes left")
        i = 0  # a partial write, or more buffers than one call takes: drop what was written
        while i < len(bufs) and n >= len(bufs[i]):
            n -= len(bufs[i])
            i += 1
        bufs = bufs[i:]
        if n:
            bufs[0] = memoryview(bufs[0])[n:]


try:
    _IOV_MAX = max(16, min(1024, os.sysconf("SC_IOV_MAX")))
except (AttributeError, OSError, ValueError):  # pragma: no cover
    _IOV_MAX = 16


class AtomicTarWriter:
    """Write one tar deterministically to a hidden temp file; publish it with :meth:`commit`.

    The bytes are those ``tarfile.open(mode="w", format=GNU_FORMAT)`` writes for the same members
    (:func:`tar_header`; the tests compare them), hashed as they are written (no second read for the
    manifest's sha256) and handed to the kernel in a few ``writev`` calls, the images without a copy
    (a sample's headers, small members and padding are joined into one buffer).  :meth:`commit` is
    :meth:`finish` (the last bytes; sha256 and size known) then :meth:`publish` (fsync, rename), which
    the stage runs on a background thread (:class:`_Publisher`).

    Not ``webdataset.TarWriter`` (0.2.86), measured as the peer ``WdsTarWriter`` in
    benchmarks/bench_shard.py (same samples, process and run; 2,400 crops of 20-300 KB): it can be
    made deterministic (``mtime=0``, ``user=group=""``, ``mode=0o644``, ``format="GNU_FORMAT"``; it
    orders a sample's members by extension, json before png), atomic (handed the temporary file,
    fsynced and renamed as here) and exactly sized (its tars have the sizes :func:`tar_file_size`
    predicts), but through ``tarfile`` (~30 us per member header, every member copied through 16 KiB
    stream chunks) it cost 184 vs 65 CPU us per image for the writer alone and 122 % more CPU for the
    whole stage (1.16 vs 0.52 s; benchmarks/results/shard.md).  Its ``ShardWriter`` does not fit
    at all: it writes under the final name (no rename), rolls over only after a tar has passed the
    byte limit (counting data bytes, not headers and padding), and decides the rollover inside
    ``write`` where the json cannot name its shard.  webdataset is also only in the ``encoders``
    extra; this stage needs only the core install.
    """

    # Pending bytes handed to the kernel at once: few system calls, while the crops just read and
    # hashed are still in the CPU cache (8 MiB cost ~10 % more CPU for the stage than 256 KiB-1 MiB).
    FLUSH_BYTES = 512 << 10
    # Members up to this size (the json and the texts) are joined with the headers and padding
    # around them; larger ones (images) are handed to the kernel as they are.
    JOIN_BYTES = 16 << 10

    def __init__(self, path: Path, mtime: int = 0) -> None:
        self.path = path
        self.mtime = int(mtime)
        self.tmp = temp_sibling(path)
        self._fd: int | None = os.open(self.tmp, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
        self._sha = hashlib.sha256()
        # tar_header's pieces that do not change from member to member: the mtime field, and per
        # member name (a sample's ".json", ".txt", ...) its encoding and byte sum
        self._mtime_field = b"%011o\x00" % self.mtime if 0 <= self.mtime < _OCTAL_11 else b""
        self._mtime_sum = sum(self._mtime_field)
        self._names: dict[str, tuple[bytes, int]] = {}
        self._pending: list[Any] = []
        self._pending_bytes = 0
        self.written = 0  # bytes written to the file so far
        self.count = 0  # samples
        self.members_bytes = 0  # bytes of all members so far (headers, data, padding)

    def add(self, name: str, data: bytes) -> None:
        """Append one member (a regular file ``name`` with ``data``)."""
        self._add_members("", ((name, data),))

    def add_sample(self, key: str, members: Sequence[tuple[str, bytes]]) -> None:
        """Append one sample: its members ``key.ext`` in the order given, contiguous."""
        self._add_members(f"{key}.", members)
        self.count += 1

    def _add_members(self, prefix: str, members: Sequence[tuple[str, bytes]]) -> None:
        """Append members ``prefix + name`` in order.  A member's header, a small member's data and the padding are
        joined with their neighbours into one buffer (one hash update and one ``writev`` entry for
        a sample's seven text members instead of ~20); a large member's data (an image) is passed
        on as it is, without a copy.  The bytes are the same either way.

        Headers are :func:`tar_header`'s bytes, put together here from pieces: the prefix (a
        sample's key) is encoded and summed once per sample, each member name once per writer, and
        the pieces go straight into the joined buffer.  Names over 100 bytes, names with a NUL and
        sizes or mtimes beyond 11 octal digits go through :func:`tar_header` (and ``tarfile``)."""
        mtime, join_max, names = self.mtime, self.JOIN_BYTES, self._names
        praw = prefix.encode(tarfile.ENCODING, "surrogateescape")
        plen = len(praw)
        # every field but the name and the size: mode, ids, mtime, type, magic, ... (the checksum
        # field counted as spaces); None: this prefix or mtime needs tar_header for each member
        base = (
            _TAR_CONST_SUM + self._mtime_sum + sum(praw)
            if plen <= 100 and b"\x00" not in praw and self._mtime_field
            else None
        )
        mtime_field = self._mtime_field
        bufs: list[Any] = []
        small: list[bytes] = []  # header pieces, data and padding not yet joined
        n = 0
        for name, data in members:
            size = len(data)
            entry = names.get(name)
            if entry is None:
                raw = name.encode(tarfile.ENCODING, "surrogateescape")
                entry = names[name] = (raw, -1 if b"\x00" in raw else sum(raw))
            nraw, nsum = entry
            length = plen + len(nraw)
            if base is not None and nsum >= 0 and length <= 100 and size < _OCTAL_11:
                size_field = b"%011o\x00" % size
                checksum = base + nsum + sum(size_field)
                small += (
                    praw,
                    nraw,
                    _TAR_PADS[100 - length],
                    _TAR_MODE_IDS,
                    size_field,
                    mtime_field,
                    b"%06o\x00 " % checksum,
                    _TAR_TAIL,
                )
                n += TAR_BLOCK
            else:
                header = tar_header(prefix + name, size, mtime)
                small.append(header)
                n += len(header)
            pad = _TAR_PADS[-size % TAR_BLOCK]
            n += size + len(pad)
            if size > join_max:
                bufs += (b"".join(small), data)
                small = [pad]
            else:
                small += (data, pad)
        bufs.append(b"".join(small))
        update = self._sha.update
        for buf in bufs:
            update(buf)
        self._pending += bufs
        self.members_bytes += n
        self._pending_bytes += n
        if self._pending_bytes >= self.FLUSH_BYTES or len(self._pending) >= _IOV_MAX:
            self._flush()

    def _flush(self) -> None:
        assert self._fd is not None
        _write_all(self._fd, self._pending, self._pending_bytes)
        self.written += self._pending_bytes
        self._pending, self._pending_bytes = [], 0

    def finish(self) -> tuple[str, int]:
        """Write the end of the archive (two zero blocks, padding to a 10 KiB record); returns
        (sha256, size).  The tar is neither durable nor under its final name yet: :meth:`publish`."""
        assert self._fd is not None
        end = bytes(tar_file_size(self.members_bytes) - self.members_bytes)
        self._sha.update(end)
        self._pending.append(end)
        self._pending_bytes += len(end)
        self._flush()
        return self._sha.hexdigest(), self.written

    def publish(self) -> None:
        """After :meth:`finish`: fsync, check the size on disk, rename to the final name, fsync the
        folder.  Touches nothing the writing thread uses, so it may run on another thread."""
        assert self._fd is not None
        os.fsync(self._fd)
        size = os.fstat(self._fd).st_size
        os.close(self._fd)
        self._fd = None
        if size != self.written or size != tar_file_size(self.members_bytes):
            raise OSError(f"{self.tmp}: {size} bytes on disk, {self.written} written")
        os.replace(self.tmp, self.path)
        _fsync_dir(self.path.parent)

    def commit(self) -> tuple[str, int]:
        """:meth:`finish` and :meth:`publish`: returns (sha256, size)."""
        digest, size = self.finish()
        self.publish()
        return digest, size

    def abort(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        with contextlib.suppress(FileNotFoundError):
            self.tmp.unlink()


def shard_name(prefix: str, index: int) -> str:
    """``<prefix>-NNNNNN.tar``: the prefix is the split (``train-000000.tar``), or the split and the
    chunk when shards are written per chunk (``train-c000001-000000.tar``)."""
    return f"{prefix}-{index:06d}.tar"


def brace_urls(directory: str | os.PathLike[str], prefix: str, n_shards: int) -> str | None:
    """open_clip ``--train-data`` pattern for ``n_shards`` shards of one prefix (brace expansion)."""
    if n_shards == 0:
        return None
    if n_shards == 1:
        return str(Path(directory) / shard_name(prefix, 0))
    return str(Path(directory) / f"{prefix}-{{{0:06d}..{n_shards - 1:06d}}}.tar")


def split_urls(directory: str | os.PathLike[str], runs: Sequence[tuple[str, int]]) -> str | None:
    """open_clip / webdataset URLs of a split written as runs of ``(prefix, n_shards)``: one brace
    pattern per run, joined with ``::`` (both read that as a list of sources)."""
    parts = [u for prefix, n in runs if (u := brace_urls(directory, prefix, n)) is not None]
    return "::".join(parts) or None


# ----------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------
class DanglingPointer(RuntimeError):
    """Dataset rows point to crops that no longer exist or no longer match their recorded hash."""


@dataclass
class _SplitState:
    name: str
    directory: Path
    prefix: str = ""  # shard names: <prefix>-NNNNNN.tar (default: the split's name)
    shards: list[dict[str, Any]] = field(default_factory=list)
    writer: AtomicTarWriter | None = None
    n_samples: int = 0

    def __post_init__(self) -> None:
        self.prefix = self.prefix or self.name


@dataclass
class _Written:
    """What writing samples produced: shards per split, index rows, rejections and statistics.
    One chunk's (:func:`shard_chunk`) or the whole dataset's (:func:`shard_dataset`); parts add up."""

    n_in: int = 0
    shards: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # split -> shard records
    runs: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # split -> (prefix, n shards)
    index_rows: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, Any]] = field(default_factory=list)
    formats: Counter[str] = field(default_factory=Counter)
    n_reencoded: int = 0
    image_bytes: int = 0
    n_decoded: int = 0

    STATS = ("n_in", "n_reencoded", "image_bytes", "n_decoded")

    def add(self, other: _Written) -> None:
        for k in self.STATS:
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for split, recs in other.shards.items():
            self.shards.setdefault(split, []).extend(recs)
        for split, runs in other.runs.items():
            self.runs.setdefault(split, []).extend(runs)
        self.index_rows += other.index_rows
        self.rejections += other.rejections
        self.formats.update(other.formats)

    def record(self) -> dict[str, Any]:
        """JSON form (``part.json`` of a chunk's folder), without the index and the rejections."""
        out: dict[str, Any] = {k: getattr(self, k) for k in self.STATS}
        out.update({"shards": self.shards, "runs": self.runs, "formats": dict(sorted(self.formats.items()))})
        return out

    @classmethod
    def from_record(
        cls, rec: Mapping[str, Any], index_rows: list[dict[str, Any]], rejections: list[dict[str, Any]]
    ) -> _Written:
        return cls(
            **{k: int(rec[k]) for k in cls.STATS},
            shards={k: list(v) for k, v in rec["shards"].items()},
            runs={k: [(str(p), int(n)) for p, n in v] for k, v in rec["runs"].items()},
            index_rows=index_rows,
            rejections=rejections,
            formats=Counter(rec["formats"]),
        )


def _read_parquet(path: str | os.PathLike[str]) -> pa.Table:
    """One Parquet file as ``pq.read_table`` reads it, through ``pq.ParquetFile``: the same table
    without ``pyarrow.dataset`` (importing and setting it up cost a fresh job process ~13 ms for a
    chunk's file, ~5 ms once imported), and on this thread: a job has one core, and Arrow's thread
    pool (started for the read) doubled the CPU time a chunk's read took in a job beside another
    (22-28 vs 10-15 ms).  Anything but a local file (a folder, a URI, a missing path: its error)
    still goes through ``pq.read_table``."""
    if not os.path.isfile(path):
        return pq.read_table(path)
    with pq.ParquetFile(path) as pf:
        return pf.read(use_threads=False)


def read_dataset(paths: Sequence[str | os.PathLike[str]]) -> pa.Table:
    """Concatenate DATASET Parquet files (columns unified; extra columns kept)."""
    tables = [_read_parquet(p) for p in paths]
    tables = [t for t in tables if t.num_rows or t.num_columns]
    if not tables:
        return S.DATASET.empty_table()
    return pa.concat_tables(tables, promote_options="default")


def _rows(table: pa.Table, indices: Sequence[int], batch: int = 512) -> Iterator[dict[str, Any]]:
    """The rows ``indices`` of ``table`` as dicts (``Table.to_pylist``'s), ``batch`` at a time:
    converted column by column and zipped, which is cheaper than ``to_pylist``'s row by row."""
    names = table.column_names
    for start in range(0, len(indices), batch):
        part = table.take(pa.array(indices[start : start + batch], pa.int64()))
        for values in zip(*(column.to_pylist() for column in part.columns), strict=True):
            yield dict(zip(names, values, strict=True))


def shard_dataset(
    settings: ShardSettings | Mapping[str, Any] | None,
    seed: int,
    dataset_paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    base_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Write WebDataset shards, the index, sizes.json per split, manifest and counts to ``out_dir``
    in one pass (the library call; the workflow writes shards per chunk, :func:`shard_chunk`, and
    then :func:`assemble_shards`).

    ``crop_path`` values that are relative are resolved against ``base_dir`` (default: the current
    directory, i.e. the workflow directory under Snakemake).  Returns the manifest dict.
    """
    cfg = ShardSettings.from_section(settings)  # a library caller may pass the section as a dict
    t0 = time.perf_counter()
    final = Path(out_dir)
    # Everything is written into a temporary sibling folder that replaces ``out_dir`` only once
    # complete: a killed or failed run never leaves a shards folder that looks finished.
    with atomic_dir(final) as out:
        table = read_dataset(dataset_paths)
        written = _write_samples(cfg, seed, table, out, base_dir, chunk=None)
        manifest = _finish(cfg, seed, written, out, final, dataset_paths, table.schema)
    manifest["elapsed_s"] = time.perf_counter() - t0
    return manifest


PART_FILE = "part.json"  # a chunk's shards and statistics (shard_chunk -> assemble_shards)


def shard_chunk(
    settings: ShardSettings | Mapping[str, Any] | None,
    seed: int,
    dataset_paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    chunk: str,
    base_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Shard one chunk's dataset rows into ``out_dir``: ``<split>/<split>-<chunk>-NNNNNN.tar``, its
    ``index.parquet``, ``rejections.parquet``, ``counts.json`` and ``part.json`` (shards and
    statistics).  The split of a row depends only on the seed and its ``split_key`` (the article),
    so a chunk's shards do not depend on the other chunks, and a changed chunk rewrites only its
    own.  :func:`assemble_shards` puts the chunks together.  Returns the ``part.json`` record."""
    cfg = ShardSettings.from_section(settings)  # a library caller may pass the section as a dict
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", chunk):
        raise ShardConfigError(
            f"chunk name {chunk!r}: letters, digits and _.+- only (it names the shard files)"
        )
    with atomic_dir(Path(out_dir)) as out, _Publisher() as publisher:
        table = read_dataset(dataset_paths)
        written = _write_samples(cfg, seed, table, out, base_dir, chunk=chunk, publisher=publisher)
        write_table(written.index_rows, S.SHARD_INDEX, out / "index.parquet")
        Rejections(STAGE, chunk, written.rejections).write(out / "rejections.parquet")
        n_kept = len(written.index_rows)
        counts = counts_record(STAGE, written.n_in, n_kept, Counter(r["reason"] for r in written.rejections))
        write_counts(out / "counts.json", counts)
        publisher.wait()  # the last tars published while the index was written; part.json last
        rec = {"chunk": chunk, **written.record()}
        write_json(out / PART_FILE, rec)
    return rec


def assemble_shards(
    settings: ShardSettings | Mapping[str, Any] | None,
    seed: int,
    part_dirs: Sequence[str | os.PathLike[str]],
    dataset_paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
) -> dict[str, Any]:
    """The cheap global step after :func:`shard_chunk`: the chunks' tars linked (hard links, a copy
    across file systems) into ``out_dir/<split>/``, ``sizes.json`` per split, one ``index.parquet``,
    ``rejections.parquet``, ``counts.json``, ``manifest.json`` (``urls`` joins one brace pattern per
    chunk with ``::``) and the dataset card.  ``dataset_paths`` (the chunks' inputs) give the
    sample json's column types and the manifest's inputs; their rows are not read again."""
    cfg = ShardSettings.from_section(settings)  # a library caller may pass the section as a dict
    t0 = time.perf_counter()
    final = Path(out_dir)
    total = _Written()
    indexes: list[pa.Table] = []  # the chunks' index tables, concatenated as they are
    with atomic_dir(final) as out:
        for part in map(Path, part_dirs):
            rec = json.loads((part / PART_FILE).read_text(encoding="utf-8"))
            index = _read_parquet(part / "index.parquet")
            if not index.schema.equals(S.SHARD_INDEX):  # another layout: missing columns null
                index = to_table(index.to_pylist(), S.SHARD_INDEX)
            indexes.append(index)
            rejections = _read_parquet(part / "rejections.parquet").to_pylist()
            written = _Written.from_record(rec, [], rejections)
            for split, recs in written.shards.items():
                (out / split).mkdir(parents=True, exist_ok=True)
                for sh in recs:
                    _link_or_copy(part / split / sh["name"], out / split / sh["name"])
            total.add(written)
        index = pa.concat_tables(indexes).combine_chunks() if indexes else None
        schemas = [pq.read_schema(p) for p in dataset_paths]
        schema = pa.unify_schemas(schemas, promote_options="default") if schemas else S.DATASET
        manifest = _finish(cfg, seed, total, out, final, dataset_paths, schema, index)
    manifest["elapsed_s"] = time.perf_counter() - t0
    return manifest


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links not allowed: the same bytes, copied
        shutil.copyfile(src, dst)


def _write_samples(
    cfg: ShardSettings,
    seed: int,
    table: pa.Table,
    out: Path,
    base_dir: str | os.PathLike[str] | None,
    *,
    chunk: str | None,
    publisher: _Publisher | None = None,
) -> _Written:
    """Write the samples of ``table`` into ``out/<split>/`` (split, order, rollover, rejections).

    Finished tars are published (fsynced, renamed) by ``publisher``, which the caller waits for
    before its output folder is complete; without one, they all are before this returns."""
    base_str = os.fspath(base_dir) if base_dir is not None else os.getcwd()
    n_in = table.num_rows
    rejections = Rejections(STAGE, chunk)

    uids = table.column("subfigure_uid").to_pylist() if n_in else []
    groups = table.column(cfg.split_key).to_pylist() if n_in else []
    split_names = sorted(cfg.splits)
    plan: dict[str, list[tuple[str, int]]] = {name: [] for name in split_names}
    seen: set[str] = set()
    split_of: dict[str, str] = {}  # one draw per article group, whatever its number of rows
    for i, (uid, group) in enumerate(zip(uids, groups, strict=True)):
        if uid in seen:
            rejections.add(str(uid), "duplicate_subfigure_uid", "uid already seen in an earlier row")
            continue
        seen.add(uid)
        group = str(group)
        split = split_of.get(group)
        if split is None:
            split = split_of[group] = assign_split(seed, group, cfg.splits)
        plan[split].append((order_key(seed, str(uid)), i))

    states = {
        name: _SplitState(name, out / name, prefix=f"{name}-{chunk}" if chunk else name)
        for name in split_names
    }
    index_rows: list[dict[str, Any]] = []
    format_counts: Counter[str] = Counter()
    n_reencoded = 0
    image_bytes_total = 0
    n_decoded = 0
    max_samples, max_bytes = cfg.max_samples_per_shard, cfg.max_bytes_per_shard
    verify_images, other_formats = cfg.verify_images, cfg.other_formats
    max_pixels, text_fields = cfg.max_image_pixels, list(cfg.text_fields)
    separator, max_chars = cfg.text_separator, cfg.text_max_chars

    for state in states.values():
        state.directory.mkdir(parents=True, exist_ok=True)
    dangling: list[str] = []
    own_publisher = publisher is None
    if publisher is None:
        publisher = _Publisher()

    try:
        for name in split_names:
            state = states[name]
            order = [i for _, i in sorted(plan[name])]
            for row in _rows(table, order):
                uid = str(row["subfigure_uid"])
                pmcid = row.get("pmcid")
                # Each text field cleaned once: its own member, and (joined) the composed .txt.
                fields = [field_text(row.get(f)) for f in S.SAMPLE_TEXT_FIELDS]
                cleaned = dict(zip(S.SAMPLE_TEXT_FIELDS, fields, strict=True))
                text = join_texts(
                    [cleaned[f] if f in cleaned else field_text(row.get(f)) for f in text_fields],
                    separator,
                    max_chars,
                )
                if not text:
                    rejections.add(uid, "empty_text", f"all of {list(cfg.text_fields)} empty", pmcid)
                    continue
                crop = row.get("crop_path")
                if not crop:
                    rejections.add(uid, "missing_crop", "crop_path is null", pmcid)
                    continue
                try:
                    raw = _read_file(os.path.join(base_str, crop))  # an absolute crop_path wins
                except OSError as exc:  # a pointer to nothing: the run fails below, loudly
                    dangling.append(f"{uid}: {crop}: {exc.strerror or exc}")
                    continue
                want = row.get("crop_sha256")
                if want:
                    digest = hashlib.sha256(raw).hexdigest()
                    if digest != want:
                        dangling.append(f"{uid}: {crop}: sha256 differs from the one decompose recorded")
                        continue
                    verify = verify_images
                else:  # nothing vouches for these bytes: decode them, whatever verify_images says
                    digest, verify = None, "decode"
                try:
                    payload = prepare_image(
                        raw, verify=verify, other_formats=other_formats, max_pixels=max_pixels
                    )
                except ImageReject as exc:
                    rejections.add(uid, exc.reason, f"{crop}: {exc.detail}", pmcid)
                    continue

                key = sample_key(uid)
                text_bytes = text.encode("utf-8")
                field_bytes = [t.encode("utf-8") for t in fields]
                # The bytes hashed above are the image member unless they were re-encoded.
                image_sha = (
                    digest if digest and not payload.reencoded else hashlib.sha256(payload.data).hexdigest()
                )
                meta = dict(row)  # _dump_meta sorts the keys
                meta.update(
                    {
                        "key": key,
                        "split": name,
                        "text": text,
                        "text_fields": text_fields,
                        "image_ext": payload.ext,
                        "image_sha256": image_sha,
                        "image_source_format": payload.source_format,
                        "image_reencoded": payload.reencoded,
                        "image_width": payload.width,
                        "image_height": payload.height,
                    }
                )
                # The json names its shard, so size it with the current shard's name first (dumped
                # again only when the sample opens a new shard).
                w = state.writer
                meta["shard"] = shard_name(state.prefix, len(state.shards))
                meta_bytes = _dump_meta(meta)
                sample_size = _members_size((payload.data, meta_bytes, text_bytes, *field_bytes))
                if w is not None and (
                    (max_samples is not None and w.count >= max_samples)
                    or (max_bytes is not None and tar_file_size(w.members_bytes + sample_size) > max_bytes)
                ):
                    _close_shard(state, publisher)
                    w = None
                    meta["shard"] = shard_name(state.prefix, len(state.shards))
                    meta_bytes = _dump_meta(meta)
                if w is None:
                    w = state.writer = AtomicTarWriter(state.directory / meta["shard"], cfg.mtime)
                # Members of one sample are contiguous and in a fixed order.
                w.add_sample(
                    key,
                    (
                        (payload.ext, payload.data),
                        *zip(S.SAMPLE_MEMBERS, (meta_bytes, text_bytes, *field_bytes), strict=True),
                    ),
                )
                state.n_samples += 1
                n_decoded += int(payload.decoded)
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
                _close_shard(state, publisher)
        if own_publisher:
            publisher.wait()
    except BaseException:
        if own_publisher:
            with contextlib.suppress(Exception):
                publisher.wait()
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
    return _Written(
        n_in=n_in,
        shards={n: states[n].shards for n in split_names},
        runs={n: [(states[n].prefix, len(states[n].shards))] for n in split_names},
        index_rows=index_rows,
        rejections=rejections.rows,
        formats=format_counts,
        n_reencoded=n_reencoded,
        image_bytes=image_bytes_total,
        n_decoded=n_decoded,
    )


def _finish(
    cfg: ShardSettings,
    seed: int,
    written: _Written,
    out: Path,
    final: Path,
    dataset_paths: Sequence[str | os.PathLike[str]],
    schema: pa.Schema,
    index: pa.Table | None = None,
) -> dict[str, Any]:
    """sizes.json, index, rejections, counts, manifest and card of the shards in ``out`` (their
    paths as they will be under ``final``).  ``index``: the index as a table (the chunks' index
    files, concatenated, in :func:`assemble_shards`: no round trip through Python rows); by
    default made from ``written.index_rows``."""
    split_names = sorted(cfg.splits)
    for n in split_names:
        (out / n).mkdir(parents=True, exist_ok=True)
        write_json(out / n / "sizes.json", {sh["name"]: sh["count"] for sh in written.shards.get(n, [])})
    index = write_table(written.index_rows if index is None else index, S.SHARD_INDEX, out / "index.parquet")
    Rejections(STAGE, None, written.rejections).write(out / "rejections.parquet")
    splits, pmcids = index.column("split").to_pylist(), index.column("pmcid").to_pylist()
    n_kept = index.num_rows
    n_split = Counter(splits)
    extra: dict[str, Any] = {f"n_{n}": n_split.get(n, 0) for n in split_names}
    extra.update(
        {
            "n_shards": sum(len(v) for v in written.shards.values()),
            "tar_bytes": sum(sh["size"] for v in written.shards.values() for sh in v),
            "image_bytes": written.image_bytes,
            "n_reencoded": written.n_reencoded,
            "n_images_decoded": written.n_decoded,
        }
    )
    counts = counts_record(
        STAGE, written.n_in, n_kept, Counter(r["reason"] for r in written.rejections), extra=extra
    )
    write_counts(out / "counts.json", counts)

    manifest: dict[str, Any] = {
        "stage": STAGE,
        "seed": int(seed),
        "config": cfg.to_dict(),
        "inputs": [str(p) for p in dataset_paths],
        "n_in": written.n_in,
        "n_samples": n_kept,
        "image_formats": dict(sorted(written.formats.items())),
        "splits": {
            n: {
                "n_samples": n_split.get(n, 0),
                "n_shards": len(written.shards.get(n, [])),
                "urls": split_urls(final / n, written.runs.get(n, [])),
                "sizes_json": str(final / n / "sizes.json"),
                "shards": written.shards.get(n, []),
            }
            for n in split_names
        },
        "n_articles": {
            n: len({p for s, p in zip(splits, pmcids, strict=True) if s == n}) for n in split_names
        },
    }
    write_json(out / "manifest.json", manifest)
    title = f"pmcflow {final.parent.name if final.name == 'shards' else final.name}"  # results/<run>/shards
    card_rows = index.select(list(CARD_INDEX_COLUMNS)).to_pylist()
    card = dataset_card(manifest, card_rows, sample_json_schema(schema), name=title)
    with atomic_open(out / "README.md", "w", encoding="utf-8") as fh:
        fh.write(card)
    return manifest


# The sample json's encoder, made once (``json.dumps`` with these arguments makes one per call).
_META_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _dump_meta(meta: Mapping[str, Any]) -> bytes:
    try:
        return _META_JSON.encode(meta).encode()
    except ValueError:  # a NaN/inf somewhere: only then pay for the recursive clean-up
        kw: dict[str, Any] = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":")}
        return json.dumps(_json_safe(dict(meta)), **kw).encode()


def _read_file(path: str) -> bytes:
    """A file's bytes, as ``open(path, "rb").read()`` returns them, in four system calls instead of
    seven (open, fstat, one read of the size fstat gave plus one byte, close); a file whose size
    changed meanwhile is read on to its end."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) != size:  # grew, shrank, or more than one read returns: read until EOF
            parts = [data]
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
            data = b"".join(parts)
        return data
    finally:
        os.close(fd)


class _Publisher:
    """Publishes finished tars (:meth:`AtomicTarWriter.publish`: fsync, rename, folder fsync) on one
    background thread while the next shard (or the index) is written, so that waiting for the disk
    overlaps the stage's CPU work (fsync releases the GIL).  :meth:`wait`, or leaving the ``with``
    block, waits for them all: inside the temporary output folder, before it is renamed."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._jobs: list[tuple[AtomicTarWriter, Future[None]]] = []

    def submit(self, writer: AtomicTarWriter) -> None:
        if any(job.done() and job.exception() is not None for _, job in self._jobs):
            self.wait()  # an earlier tar failed: stop now rather than at the end
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pmcflow-shard-publish")
        self._jobs.append((writer, self._pool.submit(writer.publish)))

    def wait(self) -> None:
        """Wait for every publish; a tar that failed is removed, and the first error raised."""
        errors: list[BaseException] = []
        for writer, job in self._jobs:
            exc = job.exception()
            if exc is not None:
                writer.abort()
                errors.append(exc)
        self._jobs = []
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if errors:
            raise errors[0]

    def __enter__(self) -> _Publisher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: Any) -> None:
        if exc_type is None:
            self.wait()
        else:  # the error in flight is the one to report
            with contextlib.suppress(Exception):
                self.wait()


def _close_shard(state: _SplitState, publisher: _Publisher | None = None) -> None:
    writer = state.writer
    assert writer is not None
    if publisher is not None and hasattr(writer, "publish"):
        sha, size = writer.finish()  # made durable and renamed on the publisher's thread
        publisher.submit(writer)
    else:  # a writer without finish/publish (benchmarks/bench_shard.py's peers): commit in place
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
    feats.update({m: datasets.Value("string") for m in S.SAMPLE_MEMBERS if m not in ("json", "txt")})
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
    section, seed = ShardSettings.from_config(config), int(config["seed"])
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
