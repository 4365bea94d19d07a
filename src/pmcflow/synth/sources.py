"""Single-panel source images for synthetic compound figures, grouped by modality.

Two kinds of pool:

* :func:`builtin_pool` takes the real biomedical images that the image registry
  (:mod:`pmcflow.imageregistry`, role ``render_source``) lists *inside installed packages*
  (scikit-image data files, pydicom/nibabel test volumes, matplotlib's MRI sample), the four
  public-domain NCI micrographs copied into ``pmcflow/data/panels`` and plots rendered with
  matplotlib from real data (scikit-learn's breast-cancer and diabetes tables, matplotlib's EEG and
  membrane recordings).  Nothing is downloaded.
* :func:`pool_from_config` reads ``{modality: [directory or .parquet file, ...]}`` for production
  (e.g. ROCO, PathMNIST, HAM10000 unpacked on the cluster).
* A *sources file* (:func:`load_sources_file`, :func:`parse_sources`) is either that mapping (every
  split draws from the same images) or ``{datasets: {name: {modality, path, licence, splits, url}}}``,
  which names each dataset, its licence and the splits (``train``, ``val``, ``holdout``) whose
  figures may draw from it; :func:`pool_for_split` builds the pool of one split.

Every image goes through :func:`normalize_image`: CMYK, palette, 16-bit/float, grey and alpha
images are converted to 8-bit RGB; corrupt, truncated, animated, too-small, blank and oversized
("decompression bomb") images are rejected with a reason.  A rejected source never crashes a
render: :meth:`SourcePool.pick` moves deterministically to the next usable image and the reason
is recorded in :attr:`SourcePool.rejections`.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import re
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from pmcflow.errors import RejectionError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp")
DEFAULT_MAX_PIXELS = 64_000_000  # reject larger sources instead of decoding them
DEFAULT_MIN_SIDE = 32
PANELS_DIR = Path(__file__).resolve().parent.parent / "data" / "panels"

Loader = Callable[[], Image.Image]


class BadImage(RejectionError):
    """A source image that cannot be used; ``reason`` is a short machine-readable code."""


class NoUsableSource(RuntimeError):
    """Every source of a modality was rejected."""


# ----------------------------------------------------------------------------------------------
# decoding and normalisation
# ----------------------------------------------------------------------------------------------


def _window_to_uint8(arr: np.ndarray, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """Map a numeric array to 0..255 using a window (default: 0.5/99.5 percentiles)."""
    a = np.asarray(arr, dtype=np.float64)
    finite = a[np.isfinite(a)]
    if finite.size == 0:
        raise BadImage("blank", "no finite pixel values")
    if lo is None or hi is None:
        lo, hi = (float(v) for v in np.percentile(finite, [0.5, 99.5]))
    if hi <= lo:
        lo, hi = float(finite.min()), float(finite.max())
    if hi <= lo:
        raise BadImage("blank", "constant image")
    out = np.clip((np.nan_to_num(a, nan=lo) - lo) * (255.0 / (hi - lo)), 0, 255)
    return np.round(out).astype(np.uint8)


def to_rgb(im: Image.Image) -> tuple[Image.Image, str]:
    """Convert any Pillow mode to 8-bit RGB.  Returns the image and a note of what was done."""
    mode = im.mode
    if mode == "RGB":
        return im, ""
    if mode in {"I;16", "I;16B", "I;16L", "I;16N", "I", "F"}:
        arr = np.asarray(im)
        return Image.fromarray(_window_to_uint8(arr), "L").convert("RGB"), f"{mode}->8bit"
    if mode == "P":
        if "transparency" in im.info:
            return _flatten_alpha(im.convert("RGBA")), "palette+alpha->RGB"
        return im.convert("RGB"), "palette->RGB"
    if mode in {"RGBA", "LA", "PA", "RGBa", "La"}:
        return _flatten_alpha(im.convert("RGBA")), f"{mode}->RGB"
    if mode == "CMYK":
        return im.convert("RGB"), "CMYK->RGB"
    if mode in {"1", "L"}:
        return im.convert("RGB"), f"{mode}->RGB"
    return im.convert("RGB"), f"{mode}->RGB"


def _flatten_alpha(rgba: Image.Image) -> Image.Image:
    base = Image.new("RGB", rgba.size, (255, 255, 255))
    base.paste(rgba, mask=rgba.getchannel("A"))
    return base


def _fit_long_side(im: Image.Image, max_side: int) -> Image.Image:
    w, h = im.size
    if max(w, h) <= max_side:
        return im
    s = max_side / max(w, h)
    size = (max(1, round(w * s)), max(1, round(h * s)))
    return im.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)


def check_image(
    im: Image.Image,
    *,
    min_side: int = DEFAULT_MIN_SIDE,
    max_side: int = 1024,
) -> tuple[Image.Image, str]:
    """Convert a decoded image to RGB, check it, and shrink it to ``max_side``."""
    w, h = im.size
    if min(w, h) < min_side:
        raise BadImage("too_small", f"{w}x{h} < {min_side}")
    rgb, note = to_rgb(im)
    rgb = _fit_long_side(rgb, max_side)
    lo, hi = rgb.convert("L").getextrema()
    if hi - lo < 4:
        raise BadImage("blank", f"grey range {lo}..{hi}")
    return rgb, note


def decode_image(
    data: bytes | str | os.PathLike[str],
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    draft_side: int | None = None,
) -> Image.Image:
    """Open and fully decode an image file; raise :class:`BadImage` for anything unusable.

    ``draft_side``: JPEGs are decoded at the smallest DCT scale (1/2, 1/4, 1/8) that keeps both
    sides >= this, which makes large production sources several times cheaper to load.
    """
    fh: Any = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            im = Image.open(fh)
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
            raise BadImage("decompression_bomb", str(e)) from None
        except UnidentifiedImageError as e:
            raise BadImage("corrupt", str(e)) from None
        except FileNotFoundError as e:
            raise BadImage("missing", str(e)) from None
        except (OSError, SyntaxError, ValueError) as e:
            raise BadImage("corrupt", str(e)) from None
        w, h = im.size
        if w <= 0 or h <= 0:
            raise BadImage("corrupt", f"size {w}x{h}")
        if w * h > max_pixels:
            raise BadImage("decompression_bomb", f"{w}x{h} > {max_pixels} pixels")
        if getattr(im, "is_animated", False) and im.format in {"GIF", "PNG", "WEBP"}:
            raise BadImage("animated", f"{im.format} with {getattr(im, 'n_frames', '?')} frames")
        if draft_side and im.format == "JPEG":
            im.draft(None, (draft_side, draft_side))
        try:
            im.load()  # multi-page TIFF: the first page
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
            raise BadImage("decompression_bomb", str(e)) from None
        except (OSError, SyntaxError, ValueError, EOFError) as e:
            msg = str(e)
            reason = "truncated" if "truncat" in msg.lower() or isinstance(e, EOFError) else "corrupt"
            raise BadImage(reason, msg) from None
    if im.format in {"JPEG", "MPO", "TIFF"}:
        im = ImageOps.exif_transpose(im) or im
    return im


# Pillow must not silently pad truncated files with grey.
ImageFile.LOAD_TRUNCATED_IMAGES = False


# ----------------------------------------------------------------------------------------------
# the pool
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceRef:
    """One candidate source image: a stable id, its modality, provenance and how to load it."""

    source_id: str
    modality: str
    origin: str
    loader: Loader = field(compare=False, repr=False)
    dataset: str | None = None  # the dataset of a ``datasets`` sources file (None: builtin or old format)


@dataclass
class SourcePool:
    """Source images by modality with lazy decoding, an LRU cache and recorded rejections.

    ``refs[modality]`` is sorted by ``source_id`` so picks depend only on the set of sources,
    never on discovery order.  Images are cached after conversion to RGB and shrinking to
    ``max_side`` (a figure never needs more pixels than that for one panel).
    """

    refs: dict[str, list[SourceRef]]
    max_side: int = 1024
    min_side: int = DEFAULT_MIN_SIDE
    cache_size: int = 512
    rejections: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # id -> (modality, reason, detail)
    conversions: dict[str, str] = field(default_factory=dict)  # id -> note
    unavailable: list[str] = field(default_factory=list)  # builtin sources that could not be found
    datasets: dict[str, DatasetSource] = field(default_factory=dict)  # by name; empty unless built by pool_for_split
    split: str | None = None  # the split a ``datasets`` pool was built for
    _cache: OrderedDict[str, Image.Image] = field(default_factory=OrderedDict, repr=False)

    def __post_init__(self) -> None:
        self.refs = {m: sorted(v, key=lambda r: r.source_id) for m, v in sorted(self.refs.items()) if v}

    @property
    def modalities(self) -> list[str]:
        return list(self.refs)

    def __len__(self) -> int:
        return sum(len(v) for v in self.refs.values())

    def load(self, ref: SourceRef) -> Image.Image | None:
        """The prepared RGB image of ``ref``, or None when it is rejected (reason recorded)."""
        sid = ref.source_id
        cached = self._cache.get(sid)
        if cached is not None:
            self._cache.move_to_end(sid)
            return cached
        if sid in self.rejections:
            return None
        try:
            raw = ref.loader()
            im, note = check_image(raw, min_side=self.min_side, max_side=self.max_side)
        except BadImage as e:
            self.rejections[sid] = (ref.modality, e.reason, e.detail[:500])
            return None
        except (OSError, ValueError, RuntimeError, KeyError, IndexError, TypeError) as e:
            self.rejections[sid] = (ref.modality, "unreadable", f"{type(e).__name__}: {e}"[:500])
            return None
        if note:
            self.conversions[sid] = note
        self._cache[sid] = im
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return im

    def level(self, ref: SourceRef, level: int) -> Image.Image:
        """``ref``'s image reduced by ``2**level`` (box filter; cached beside the full image)."""
        if level == 0:
            im = self.load(ref)
            if im is None:
                raise NoUsableSource(f"{ref.source_id} was rejected")
            return im
        key = f"{ref.source_id}\x1f{level}"
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        base = self.load(ref)
        if base is None:
            raise NoUsableSource(f"{ref.source_id} was rejected")
        im = base.reduce(2**level)
        self._cache[key] = im
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return im

    def pick(self, modality: str, rng: np.random.Generator) -> tuple[SourceRef, Image.Image]:
        """Draw one usable source of ``modality``; rejected ones are skipped deterministically."""
        refs = self.refs[modality]
        start = int(rng.integers(len(refs)))
        for k in range(len(refs)):
            ref = refs[(start + k) % len(refs)]
            im = self.load(ref)
            if im is not None:
                return ref, im
        raise NoUsableSource(f"no usable source image for modality {modality!r}")

    def validate_all(self) -> dict[str, int]:
        """Decode every source once (fills :attr:`rejections`); returns usable counts by modality."""
        usable: dict[str, int] = {}
        for m, refs in self.refs.items():
            usable[m] = sum(self.load(r) is not None for r in refs)
        return usable

    def usable_modalities(self) -> list[str]:
        """Modalities with at least one usable image (decodes until one is found)."""
        out = []
        for m, refs in self.refs.items():
            if any(self.load(r) is not None for r in refs):
                out.append(m)
        return out

    def dataset_of(self, source_id: str) -> DatasetSource | None:
        """The dataset a source id belongs to (ids of a ``datasets`` pool are ``<dataset>:<path>``)."""
        if not self.datasets:
            return None
        return self.datasets.get(source_id.partition(":")[0])

    def rejection_rows(self) -> list[dict[str, str]]:
        return [
            {"source_id": sid, "modality": m, "reason": reason, "detail": detail}
            for sid, (m, reason, detail) in sorted(self.rejections.items())
        ]


# ----------------------------------------------------------------------------------------------
# production sources: directories and Parquet lists
# ----------------------------------------------------------------------------------------------


def _file_loader(path: Path, max_pixels: int, draft_side: int | None = None) -> Loader:
    return lambda: decode_image(path, max_pixels=max_pixels, draft_side=draft_side)


def refs_from_directory(
    directory: str | os.PathLike[str],
    modality: str,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    draft_side: int | None = None,
    prefix: str | None = None,
    dataset: str | None = None,
) -> list[SourceRef]:
    """Every image file under ``directory`` (recursive, by extension).

    Ids are ``<prefix>:<directory name>/<relative path>``; ``prefix`` defaults to the modality.
    """
    root = Path(directory)
    head = prefix or modality
    refs = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS:
            rel = p.relative_to(root).as_posix()
            refs.append(SourceRef(f"{head}:{root.name}/{rel}", modality, str(p), _file_loader(p, max_pixels, draft_side), dataset))
    return refs


class _ParquetImages:
    """Row-group-at-a-time access to an image-bytes column (keeps one row group in memory)."""

    def __init__(self, path: Path, column: str) -> None:
        import pyarrow.parquet as pq

        self.file = pq.ParquetFile(path)
        self.column = column
        self._rg: int | None = None
        self._values: list[Any] = []
        self.offsets = [0]
        for i in range(self.file.num_row_groups):
            self.offsets.append(self.offsets[-1] + self.file.metadata.row_group(i).num_rows)

    def get(self, row: int) -> bytes:
        rg = int(np.searchsorted(self.offsets, row, side="right") - 1)
        if rg != self._rg:
            self._values = self.file.read_row_group(rg, columns=[self.column]).column(0).to_pylist()
            self._rg = rg
        value = self._values[row - self.offsets[rg]]
        if isinstance(value, dict):  # HF datasets style {"bytes": ..., "path": ...}
            value = value.get("bytes")
        if not value:
            raise BadImage("corrupt", "empty image bytes")
        return bytes(value)


def refs_from_parquet(
    path: str | os.PathLike[str],
    modality: str,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    draft_side: int | None = None,
    prefix: str | None = None,
    dataset: str | None = None,
) -> list[SourceRef]:
    """Images listed in a Parquet file: an ``image`` (bytes) column, or a ``path`` column.

    An ``id`` column (if any) names each row; otherwise ``<file>#<row>``.  Relative paths are
    resolved against the Parquet file's directory.  Ids are ``<prefix>:<file>#<id or row>``;
    ``prefix`` defaults to the modality.
    """
    import pyarrow.parquet as pq

    p = Path(path)
    head = prefix or modality
    names = pq.ParquetFile(p).schema_arrow.names
    ids = pq.read_table(p, columns=["id"]).column(0).to_pylist() if "id" in names else None
    refs: list[SourceRef] = []
    if "image" in names:
        store = _ParquetImages(p, "image")
        n = store.offsets[-1]
        for row in range(n):
            sid = f"{head}:{p.name}#{ids[row] if ids else row}"
            refs.append(
                SourceRef(
                    sid,
                    modality,
                    f"{p}#{row}",
                    lambda r=row: decode_image(store.get(r), max_pixels=max_pixels, draft_side=draft_side),
                    dataset,
                )
            )
    elif "path" in names:
        paths = pq.read_table(p, columns=["path"]).column(0).to_pylist()
        for row, rel in enumerate(paths):
            fp = Path(rel) if os.path.isabs(rel) else p.parent / rel
            sid = f"{head}:{p.name}#{ids[row] if ids else row}"
            refs.append(SourceRef(sid, modality, str(fp), _file_loader(fp, max_pixels, draft_side), dataset))
    else:
        raise ValueError(f"{p}: needs an 'image' (bytes) or 'path' column, has {names}")
    return refs


def refs_from_entry(
    entry: str | os.PathLike[str],
    modality: str,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    draft_side: int | None = None,
    prefix: str | None = None,
    dataset: str | None = None,
) -> list[SourceRef]:
    """The sources of one entry of a sources file: a directory, a ``.parquet`` list or one image."""
    p = Path(entry)
    kw: dict[str, Any] = {"max_pixels": max_pixels, "draft_side": draft_side, "prefix": prefix, "dataset": dataset}
    if p.is_dir():
        return refs_from_directory(p, modality, **kw)
    if p.suffix == ".parquet":
        return refs_from_parquet(p, modality, **kw)
    if p.is_file():
        return [SourceRef(f"{prefix or modality}:{p.name}", modality, str(p), _file_loader(p, max_pixels, draft_side), dataset)]
    what = f"dataset {dataset!r}" if dataset else repr(modality)
    raise FileNotFoundError(f"source for {what} not found: {p}")


def pool_from_config(
    spec: Mapping[str, Sequence[str | os.PathLike[str]]],
    *,
    max_side: int = 1024,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    cache_size: int = 512,
) -> SourcePool:
    """A pool from ``{modality: [directory or .parquet, ...]}``."""
    refs: dict[str, list[SourceRef]] = {}
    for modality, entries in spec.items():
        for entry in entries:
            refs.setdefault(modality, []).extend(refs_from_entry(entry, modality, max_pixels=max_pixels, draft_side=max_side))
    return SourcePool(refs, max_side=max_side, cache_size=cache_size)


# ----------------------------------------------------------------------------------------------
# sources files: {modality: [paths]} or {datasets: {name: {modality, path, licence, splits, url}}}
# ----------------------------------------------------------------------------------------------

SPLITS: tuple[str, ...] = ("train", "val", "holdout")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_DATASET_KEYS = ("modality", "path", "licence", "splits", "url", "description")
_TOP_KEYS = ("datasets", "description")
_KEY_HINTS = {"license": "licence", "paths": "path", "dir": "path", "directory": "path", "split": "splits", "modalities": "modality"}


class SourcesFileError(ValueError):
    """A sources file that cannot be used; :attr:`problems` lists every problem found."""

    def __init__(self, origin: str, problems: Sequence[str]) -> None:
        self.origin = origin
        self.problems = list(problems)
        super().__init__(f"{origin}: " + "; ".join(self.problems))


@dataclass(frozen=True)
class DatasetSource:
    """One dataset of a sources file: its images, modality, licence and the splits that draw from it.

    In the old ``{modality: [paths]}`` format each modality is one dataset named after it, used by
    every split and without a licence (``legacy``); its source ids keep the old form
    ``<modality>:<path>``.  Ids of a ``datasets`` file are ``<dataset>:<path>``.
    """

    name: str
    modality: str
    paths: tuple[Path, ...]
    splits: tuple[str, ...]
    licence: str | None = None
    url: str | None = None
    description: str | None = None
    legacy: bool = False

    @property
    def id_prefix(self) -> str:
        """What the ids of this dataset's sources start with (before the ``:``)."""
        return self.modality if self.legacy else self.name

    def to_record(self) -> dict[str, Any]:
        """JSON-friendly description (for ``sources.json``, the COCO file and ``sources check``)."""
        rec: dict[str, Any] = {
            "name": self.name,
            "modality": self.modality,
            "paths": [str(p) for p in self.paths],
            "splits": list(self.splits),
            "licence": self.licence,
            "url": self.url,
        }
        if self.description:
            rec["description"] = self.description
        return rec


@dataclass(frozen=True)
class SourcesSpec:
    """A parsed sources file (see :func:`parse_sources`)."""

    datasets: tuple[DatasetSource, ...]
    origin: str = "<sources>"
    legacy: bool = False

    @property
    def modalities(self) -> list[str]:
        """Every modality named in the file, sorted."""
        return sorted({d.modality for d in self.datasets})

    def for_split(self, split: str) -> list[DatasetSource]:
        """The datasets whose images figures of ``split`` may use (sorted by name)."""
        return sorted((d for d in self.datasets if split in d.splits), key=lambda d: d.name)

    def coverage_problems(self, splits: Iterable[str]) -> list[str]:
        """Why ``splits`` cannot be rendered from this file: an unknown split, a split without
        datasets, or a modality of the file without a dataset for one of them."""
        problems: list[str] = []
        for split in splits:
            if split not in SPLITS:
                problems.append(f"unknown split {split!r} (use {', '.join(SPLITS)})")
                continue
            have = {d.modality for d in self.for_split(split)}
            if not have:
                problems.append(f"split {split!r}: no dataset lists it in 'splits'")
                continue
            for m in self.modalities:
                if m not in have:
                    others = ", ".join(f"{d.name} [{', '.join(d.splits)}]" for d in self.datasets if d.modality == m)
                    problems.append(f"split {split!r}: modality {m!r} has no dataset (it has only {others})")
        return problems

    def check_split(self, split: str) -> None:
        """Raise :class:`SourcesFileError` unless ``split`` has a dataset for every modality."""
        problems = self.coverage_problems([split])
        if problems:
            raise SourcesFileError(self.origin, problems)

    def to_record(self) -> dict[str, Any]:
        return {
            "file": self.origin,
            "format": "modalities" if self.legacy else "datasets",
            "datasets": {d.name: d.to_record() for d in sorted(self.datasets, key=lambda d: d.name)},
        }


def _str_list(value: Any) -> list[str] | None:
    """A string (or path) or a list of them as a list of strings; None for anything else."""
    if isinstance(value, str | os.PathLike):
        return [os.fspath(value)]
    if isinstance(value, list | tuple) and all(isinstance(v, str | os.PathLike) for v in value):
        return [os.fspath(v) for v in value]
    return None


def _resolve(path: str, base: Path | None) -> Path:
    p = Path(os.path.expanduser(path))
    return p if base is None or p.is_absolute() else base / p


def _unknown_key(where: str, key: object, allowed: Sequence[str]) -> str:
    hint = _KEY_HINTS.get(str(key))
    tail = f"did you mean {hint!r}?" if hint else f"allowed: {', '.join(allowed)}"
    return f"{where}: unknown key {key!r} ({tail})"


def _parse_dataset(name: object, entry: Any, base: Path | None, problems: list[str]) -> DatasetSource | None:
    """One entry of ``datasets``; appends what is wrong with it to ``problems``."""
    where = f"dataset {name!r}"
    n_before = len(problems)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        problems.append(f"{where}: a name is letters, digits, '.', '_', '+' or '-' (starting with a letter or digit)")
    if not isinstance(entry, Mapping):
        problems.append(f"{where}: expected a mapping with modality, path, licence and splits, got {type(entry).__name__}")
        return None
    problems += [_unknown_key(where, k, _DATASET_KEYS) for k in entry if k not in _DATASET_KEYS]

    modality = entry.get("modality")
    if modality is None:
        problems.append(f"{where}: missing 'modality' (e.g. radiology)")
    elif not isinstance(modality, str) or not _NAME_RE.match(modality):
        problems.append(f"{where}: 'modality' must be a word (letters, digits, '.', '_', '+', '-'), got {modality!r}")

    raw_paths = entry.get("path")
    paths = _str_list(raw_paths)
    if raw_paths is None:
        problems.append(f"{where}: missing 'path' (a directory, a .parquet file or an image, or a list of them)")
    elif not paths or not all(p.strip() for p in paths):
        problems.append(f"{where}: 'path' must be a non-empty path or a list of them, got {raw_paths!r}")

    licence = entry.get("licence")
    if licence is None or (isinstance(licence, str) and not licence.strip()):
        problems.append(f"{where}: missing 'licence' (the licence of its images, e.g. \"CC BY 4.0\")")
    elif not isinstance(licence, str):
        problems.append(f"{where}: 'licence' must be a string, got {licence!r}")

    raw_splits = entry.get("splits")
    splits = _str_list(raw_splits)
    if raw_splits is None:
        problems.append(f"{where}: missing 'splits' (a list of {', '.join(SPLITS)})")
    elif not splits:
        problems.append(f"{where}: 'splits' must list some of {', '.join(SPLITS)}, got {raw_splits!r}")
    else:
        problems += [f"{where}: unknown split {s!r} in 'splits' (use {', '.join(SPLITS)})" for s in splits if s not in SPLITS]

    for key in ("url", "description"):
        if entry.get(key) is not None and not isinstance(entry[key], str):
            problems.append(f"{where}: {key!r} must be a string, got {entry[key]!r}")

    if len(problems) > n_before:
        return None
    assert isinstance(name, str) and isinstance(modality, str) and isinstance(licence, str)
    assert paths is not None and splits is not None
    return DatasetSource(
        name=name,
        modality=modality,
        paths=tuple(_resolve(p, base) for p in paths),
        splits=tuple(s for s in SPLITS if s in splits),
        licence=licence.strip(),
        url=entry.get("url"),
        description=entry.get("description"),
    )


def parse_sources(data: Any, *, base: str | os.PathLike[str] | None = None, origin: str = "<sources>") -> SourcesSpec:
    """Parse a sources mapping in either format; relative paths are resolved against ``base``.

    * ``{modality: [directory | file.parquet | image, ...]}`` (or one path per modality): every
      split uses these images; no licences are recorded.
    * ``{datasets: {name: {modality, path, licence, splits, url?, description?}}}``: ``path`` is one
      entry or a list; ``splits`` lists the splits (``train``, ``val``, ``holdout``) whose figures
      may use the dataset.

    Every problem is collected and raised together as :class:`SourcesFileError`, each naming the
    dataset and key.  Whether each split has a dataset for every modality is checked for the split
    being rendered (:meth:`SourcesSpec.check_split`), not here.
    """
    root = Path(base) if base is not None else None
    if not isinstance(data, Mapping):
        raise SourcesFileError(origin, [f"expected a mapping ({{datasets: {{name: {{...}}}}}} or {{modality: [paths]}}), got {type(data).__name__}"])
    problems: list[str] = []
    if isinstance(data.get("datasets"), Mapping):
        problems += [_unknown_key("top level", k, _TOP_KEYS) for k in data if k not in _TOP_KEYS]
        if not data["datasets"]:
            problems.append("'datasets' is empty")
        found = [_parse_dataset(name, entry, root, problems) for name, entry in data["datasets"].items()]
        if problems:
            raise SourcesFileError(origin, problems)
        datasets = tuple(d for d in found if d is not None)
        return SourcesSpec(datasets, origin=origin, legacy=False)
    legacy: list[DatasetSource] = []
    for modality, value in data.items():
        paths = _str_list(value)
        if not isinstance(modality, str) or not modality:
            problems.append(f"modality {modality!r}: a modality name must be a non-empty string")
        elif paths is None:
            problems.append(f"modality {modality!r}: expected a path or a list of paths, got {value!r}")
        elif paths:  # an empty list adds nothing, as before
            legacy.append(DatasetSource(modality, modality, tuple(_resolve(p, root) for p in paths), SPLITS, legacy=True))
    if problems:
        raise SourcesFileError(origin, problems)
    return SourcesSpec(tuple(legacy), origin=origin, legacy=True)


def load_sources_file(path: str | os.PathLike[str]) -> SourcesSpec:
    """Read and parse a YAML or JSON sources file; relative paths are relative to its directory."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SourcesFileError(str(p), [f"not valid JSON: {e}"]) from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise SourcesFileError(str(p), [f"not valid YAML: {' '.join(str(e).split())}"]) from None
    if data is None:
        raise SourcesFileError(str(p), ["the file is empty"])
    return parse_sources(data, base=p.parent, origin=str(p))


def refs_for_dataset(ds: DatasetSource, *, max_pixels: int = DEFAULT_MAX_PIXELS, draft_side: int | None = None) -> list[SourceRef]:
    """Every source of one dataset (a missing path raises :class:`FileNotFoundError` naming it)."""
    refs: list[SourceRef] = []
    dataset = None if ds.legacy else ds.name
    for entry in ds.paths:
        refs += refs_from_entry(entry, ds.modality, max_pixels=max_pixels, draft_side=draft_side, prefix=ds.id_prefix, dataset=dataset)
    dup = None if ds.legacy else first_duplicate_id(refs)
    if dup is not None:
        raise SourcesFileError(ds.name, [duplicate_id_problem(ds, dup)])
    return refs


def first_duplicate_id(refs: Iterable[SourceRef]) -> str | None:
    """The first source id that occurs twice in ``refs``, if any."""
    seen: set[str] = set()
    for r in refs:
        if r.source_id in seen:
            return r.source_id
        seen.add(r.source_id)
    return None


def duplicate_id_problem(ds: DatasetSource, source_id: str) -> str:
    return f"dataset {ds.name!r}: two paths give the same source id {source_id!r} (paths with the same last folder name?)"


def pool_for_split(
    spec: SourcesSpec,
    split: str | None,
    *,
    max_side: int = 1024,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    cache_size: int = 512,
) -> SourcePool:
    """The pool that figures of ``split`` draw from.

    An old-format file gives every split the same pool (the one :func:`pool_from_config` builds,
    so outputs do not change); a ``datasets`` file needs ``split`` and checks that it has a dataset
    for every modality of the file.
    """
    if split is not None and split not in SPLITS:
        raise SourcesFileError(spec.origin, [f"unknown split {split!r} (use {', '.join(SPLITS)})"])
    if spec.legacy:
        chosen = list(spec.datasets)
    else:
        if split is None:
            raise SourcesFileError(spec.origin, [f"the file names datasets per split: give the split ({', '.join(SPLITS)})"])
        spec.check_split(split)
        chosen = spec.for_split(split)
    refs: dict[str, list[SourceRef]] = {}
    for ds in chosen:
        refs.setdefault(ds.modality, []).extend(refs_for_dataset(ds, max_pixels=max_pixels, draft_side=max_side))
    pool = SourcePool(refs, max_side=max_side, cache_size=cache_size)
    if not spec.legacy:
        pool.datasets = {ds.name: ds for ds in chosen}
        pool.split = split
    return pool

# ----------------------------------------------------------------------------------------------
# builtin sources (installed packages + the NCI micrographs)
# ----------------------------------------------------------------------------------------------


def _package_dir(name: str) -> Path | None:
    """The directory of an installed package, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _dicom_loader(path: Path) -> Loader:
    def load() -> Image.Image:
        import pydicom

        ds = pydicom.dcmread(path)
        arr = ds.pixel_array
        if arr.ndim == 3 and arr.shape[-1] not in (3, 4):
            arr = arr[arr.shape[0] // 2]
        if arr.ndim == 3:
            return Image.fromarray(np.ascontiguousarray(arr[..., :3]).astype(np.uint8), "RGB")
        slope = float(ds.get("RescaleSlope", 1) or 1)
        inter = float(ds.get("RescaleIntercept", 0) or 0)
        hu = arr.astype(np.float64) * slope + inter
        lo = hi = None
        wc, ww = ds.get("WindowCenter"), ds.get("WindowWidth")
        if wc is not None and ww is not None:
            c = float(wc[0] if isinstance(wc, pydicom.multival.MultiValue) else wc)
            w = float(ww[0] if isinstance(ww, pydicom.multival.MultiValue) else ww)
            lo, hi = c - w / 2, c + w / 2
        out = _window_to_uint8(hu, lo, hi)
        if str(ds.get("PhotometricInterpretation", "")) == "MONOCHROME1":
            out = 255 - out
        return Image.fromarray(out, "L")

    return load


def _nifti_slice_loader(path: Path, axis: int, frac: float, volume: int = 0) -> Loader:
    def load() -> Image.Image:
        import nibabel as nib

        img = nib.load(str(path))
        data = np.asarray(img.dataobj)
        if data.ndim == 4:
            data = data[..., volume]
        idx = min(data.shape[axis] - 1, max(0, round(frac * (data.shape[axis] - 1))))
        sl = np.take(data, idx, axis=axis)
        sl = np.rot90(sl)  # radiological display: superior up
        if min(sl.shape) < 48:  # tiny research volumes: upsample so crops stay usable
            im = Image.fromarray(_window_to_uint8(sl), "L")
            s = 96 / min(sl.shape)
            return im.resize((round(im.width * s), round(im.height * s)), Image.Resampling.BICUBIC)
        return Image.fromarray(_window_to_uint8(sl), "L")

    return load


def _mpl_mri_loader(path: Path) -> Loader:
    def load() -> Image.Image:
        with gzip.open(path, "rb") as fh:
            raw = fh.read()
        arr = np.frombuffer(raw, dtype=">u2").reshape(256, 256)
        return Image.fromarray(_window_to_uint8(arr), "L")

    return load


def _plot_loader(kind: str, data_dirs: Mapping[str, Path]) -> Loader:
    return lambda: render_plot(kind, data_dirs)


def _chart_loader(kind: str, k: int, data_dirs: Mapping[str, Path]) -> Loader:
    def load() -> Image.Image:
        from pmcflow.synth.charts import render_chart

        return render_chart(kind, k, data_dirs)

    return load


PLOT_KINDS = (
    "bc_hist_radius",
    "bc_scatter_texture",
    "bc_box_features",
    "bc_bar_means",
    "diab_scatter_bmi",
    "diab_hist_target",
    "diab_box_sex",
    "eeg_traces",
    "membrane_trace",
    "membrane_psd",
)


def builtin_pool(
    *, max_side: int = 1024, cache_size: int = 512, include_plots: bool = True, include_charts: bool = True
) -> SourcePool:
    """Real single-panel images: the registry's ``render_source`` entries + plots of real data.

    The image entries come from :mod:`pmcflow.imageregistry` (``pmcflow/data/images/registry.yaml``,
    role ``render_source``): scikit-image data files, pydicom/nibabel test volumes, matplotlib's MRI
    sample and the NCI micrographs in ``pmcflow/data/panels``.  An entry whose package or file is
    not installed is listed in :attr:`SourcePool.unavailable`.
    """
    from pmcflow.imageregistry import load_registry, source_refs

    refs: dict[str, list[SourceRef]]
    refs, unavailable = source_refs(load_registry().by_role("render_source"))

    def add(modality: str, sid: str, origin: str, loader: Loader, path: Path | None = None) -> None:
        if path is not None and not path.exists():
            unavailable.append(f"{sid} ({path} missing)")
            return
        refs.setdefault(modality, []).append(SourceRef(sid, modality, origin, loader))

    mpl = _package_dir("matplotlib")
    data_dirs: dict[str, Path] = {}
    if mpl is not None:
        data_dirs["mpl"] = mpl / "mpl-data" / "sample_data"
    skl = _package_dir("sklearn")
    if skl is not None:
        data_dirs["sklearn"] = skl / "datasets" / "data"

    if include_plots and mpl is not None:
        for kind in PLOT_KINDS:
            needs = "sklearn" if kind.startswith(("bc_", "diab_")) else "mpl"
            if needs not in data_dirs:
                unavailable.append(f"plot:{kind} (needs {needs})")
                continue
            add("plot", f"plot:{kind}", f"matplotlib rendering of {kind}", _plot_loader(kind, data_dirs))
        # biomedical chart, blot and gel panels (pmcflow.synth.charts), rendered on first use;
        # include_charts=False gives the pool the committed demo corpus was built from
        from pmcflow.synth import charts

        for kind in charts.CHART_KINDS if include_charts else ():
            for k in range(charts.variants(kind)):
                origin = f"pmcflow.synth.charts {kind} variant {k} ({charts.ORIGINS[kind]})"
                add("plot", f"chart:{kind}:{k}", origin, _chart_loader(kind, k, data_dirs))

    pool = SourcePool(refs, max_side=max_side, cache_size=cache_size)
    pool.unavailable = unavailable
    return pool


# ----------------------------------------------------------------------------------------------
# plot panels rendered from real data (deterministic: Agg, fixed font, fixed sizes, no text dates)
# ----------------------------------------------------------------------------------------------


def _read_breast_cancer(d: Path) -> tuple[np.ndarray, np.ndarray]:
    rows = (d / "breast_cancer.csv").read_text().splitlines()[1:]
    arr = np.array([[float(x) for x in r.split(",")] for r in rows if r.strip()])
    return arr[:, :-1], arr[:, -1].astype(int)  # target 0 = malignant, 1 = benign


def _read_diabetes(d: Path) -> tuple[np.ndarray, np.ndarray]:
    x = np.loadtxt(d / "diabetes_data_raw.csv.gz", delimiter=" ")
    y = np.loadtxt(d / "diabetes_target.csv.gz")
    return x, y


PLOT_RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "pmcflow",
}


def render_plot(kind: str, data_dirs: Mapping[str, Path]) -> Image.Image:
    """Render one plot panel from real data as an RGB image (about 384x320 px)."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pmcflow.mplfonts import ensure_bundled_fonts

    ensure_bundled_fonts()
    with matplotlib.rc_context(PLOT_RC):
        fig = Figure(figsize=(3.2, 2.66), dpi=120)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(111)
        c0, c1 = "#c0392b", "#2471a3"
        if kind.startswith("bc_"):
            x, y = _read_breast_cancer(data_dirs["sklearn"])
            mal, ben = x[y == 0], x[y == 1]
            if kind == "bc_hist_radius":
                bins = np.linspace(x[:, 0].min(), x[:, 0].max(), 25)
                ax.hist(mal[:, 0], bins=bins, alpha=0.6, color=c0, label="malignant")
                ax.hist(ben[:, 0], bins=bins, alpha=0.6, color=c1, label="benign")
                ax.set_xlabel("mean radius")
                ax.set_ylabel("count")
                ax.legend(frameon=False)
            elif kind == "bc_scatter_texture":
                ax.scatter(mal[:, 1], mal[:, 3], s=6, color=c0, label="malignant")
                ax.scatter(ben[:, 1], ben[:, 3], s=6, color=c1, label="benign")
                ax.set_xlabel("mean texture")
                ax.set_ylabel("mean area")
                ax.legend(frameon=False)
            elif kind == "bc_box_features":
                ax.boxplot([mal[:, 4], ben[:, 4], mal[:, 8], ben[:, 8]])
                ax.set_xticks([1, 2, 3, 4], ["M smooth", "B smooth", "M symm", "B symm"])
                ax.set_ylabel("value")
            else:  # bc_bar_means
                idx = [5, 6, 7, 9]
                names = ["compact.", "concav.", "c. points", "fractal"]
                pos = np.arange(len(idx))
                ax.bar(pos - 0.2, mal[:, idx].mean(0), 0.4, yerr=mal[:, idx].std(0), color=c0, label="M")
                ax.bar(pos + 0.2, ben[:, idx].mean(0), 0.4, yerr=ben[:, idx].std(0), color=c1, label="B")
                ax.set_xticks(pos, names)
                ax.legend(frameon=False)
        elif kind.startswith("diab_"):
            x, y = _read_diabetes(data_dirs["sklearn"])
            if kind == "diab_scatter_bmi":
                ax.scatter(x[:, 2], y, s=6, color=c1)
                coef = np.polyfit(x[:, 2], y, 1)
                xs = np.linspace(x[:, 2].min(), x[:, 2].max(), 10)
                ax.plot(xs, np.polyval(coef, xs), color=c0)
                ax.set_xlabel("BMI (kg/m$^2$)")
                ax.set_ylabel("progression at 1 y")
            elif kind == "diab_hist_target":
                ax.hist(y, bins=30, color="#7d3c98")
                ax.set_xlabel("disease progression")
                ax.set_ylabel("patients")
            else:  # diab_box_sex
                ax.boxplot([y[x[:, 1] == 1], y[x[:, 1] == 2]])
                ax.set_xticks([1, 2], ["group 1", "group 2"])
                ax.set_ylabel("progression")
        else:
            mpl_dir = data_dirs["mpl"]
            if kind == "eeg_traces":
                eeg = np.fromfile(mpl_dir / "eeg.dat", dtype=np.float64).reshape((-1, 4))
                t = np.arange(eeg.shape[0]) / 128.0
                step = 6.0 * float(eeg[:600].std())
                for k in range(4):
                    ax.plot(t[:600], eeg[:600, k] - k * step, lw=0.6, color="k")
                ax.set_yticks([-k * step for k in range(4)], ["ch1", "ch2", "ch3", "ch4"])
                ax.set_xlabel("time (s)")
            else:
                mem = np.fromfile(mpl_dir / "membrane.dat", dtype=np.float32)
                if kind == "membrane_trace":
                    ax.plot(np.arange(mem.size)[:2000] / 10.0, mem[:2000], lw=0.6, color=c1)
                    ax.set_xlabel("time (ms)")
                    ax.set_ylabel("membrane potential")
                else:  # membrane_psd
                    ax.psd(mem, NFFT=256, Fs=10000.0, color=c0)
        fig.tight_layout(pad=0.4)
        fig.canvas.draw()
        rgba = np.asarray(fig.canvas.buffer_rgba())
        return Image.fromarray(np.ascontiguousarray(rgba[..., :3]), "RGB")


def describe_pool(pool: SourcePool) -> dict[str, Any]:
    """Counts and ids by modality (for records and docs)."""
    return {
        "modalities": {m: [r.source_id for r in refs] for m, refs in pool.refs.items()},
        "unavailable": list(pool.unavailable),
    }


def iter_refs(pool: SourcePool) -> Iterable[SourceRef]:
    for refs in pool.refs.values():
        yield from refs
