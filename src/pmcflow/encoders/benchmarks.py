"""Evaluation benchmarks as data: definitions, config resolution, loaders, file checksums, demos.

* :func:`paper_benchmarks` reads ``pmcflow/data/benchmarks/paper.yaml``: the 3 retrieval and 19
  classification benchmarks of the Open-PMC-18M paper (6 retrieval tasks = 3 datasets x 2
  directions; 19 zero-shot and 19 linear-probe tasks), each with its class names, prompt templates,
  split, size, metric, source, licence/access level and citation.  None of them ships with
  pmcflow: a user converts their copy into one of the standard layouts and points ``path`` at it.
* :func:`resolve_benchmarks` turns config entries into :class:`Benchmark` objects.  An entry
  either names a paper benchmark (``{name: quilt, path: /data/quilt/quilt_1m_val.csv}``, any other
  key overrides the definition) or defines a benchmark completely.  Unknown keys, bad values and
  missing files raise :class:`BenchmarkError` naming the entry, the key and the path.
* Loaders: :func:`load_retrieval` (image-text tables in Parquet/CSV, WebDataset tars) and
  :func:`load_classification` (class folders, optionally under ``train/`` and ``test/``, or a
  Parquet/CSV table with a label and an optional split column).  Without a split a deterministic
  stratified split is derived (:func:`stable_split`), so linear probing always has train and test.
* :func:`benchmark_files` lists every file a benchmark reads with its size and sha256, so an
  evaluation can state exactly which files it used.
* :func:`build_demo_benchmarks` builds two small real benchmarks offline from the images that ship
  inside installed packages (:func:`pmcflow.synth.sources.builtin_pool`), byte-identical for a
  given seed; :func:`fetch_benchmarks` downloads only definitions with an open URL and a published
  checksum, and verifies it.

Layouts (``layout``):

``parquet`` / ``csv``
    One row per sample.  Retrieval: an image column (default ``image``, else ``path``) and a text
    column (default ``text``, else ``caption``).  Classification: an image column and
    ``label_column`` (default ``label``), optionally a split column (``split_column``; a column
    named ``split`` is used when present).  Image values are paths, relative ones resolved against
    the table's folder (joined with ``image_root`` when set, ``image_suffix`` appended), or image
    bytes (a binary column, or Hugging Face style ``{"bytes": ...}`` structs).
``webdataset``
    Tar shards (a ``.tar`` file, a folder of them, or a glob); samples grouped by key; the text is
    the member with extension ``text_column`` (default ``txt``), the image the first member with an
    image extension (or extension ``image_column`` when set).  Images are returned as bytes
    (:attr:`RetrievalData.image_bytes`), in shard and member order, and ``image_paths`` holds
    ``<tar>#<member>`` references: nothing is extracted, the result depends only on the tar bytes.
``dir``
    ``<root>/<class>/<image>`` (recursive below the class folder), or
    ``<root>/{train,val,test}/<class>/<image>`` when every top-level folder is a split name.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import functools
import glob as globmod
import io
import json
import os
import re
import sys
import tarfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from PIL import Image

from pmcflow.seeding import rng_for, seed_digest
from pmcflow.tables import file_digests, file_sha256

MODALITIES = ("radiology", "microscopy", "vlp", "mixed", "other")
TASKS = ("retrieval", "zero_shot", "linear_probe")
LAYOUTS = ("parquet", "csv", "webdataset", "dir")
ACCESS_LEVELS = ("open", "request", "credentialed")
DIRECTIONS = ("image_to_text", "text_to_image")
RETRIEVAL_LAYOUTS = ("parquet", "csv", "webdataset")
CLASSIFICATION_LAYOUTS = ("parquet", "csv", "dir")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff", ".gif")
# top-level folder names of a split ``dir`` layout -> the split name they stand for
SPLIT_DIRS = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}
HASH_BLOCK = 1 << 20
PAPER_YAML = "paper.yaml"


class BenchmarkError(ValueError):
    """A benchmark definition, config entry or copy that cannot be used (a user error)."""


# ----------------------------------------------------------------------------------------------
# the definition
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    """One openly downloadable file of a benchmark and its published checksum."""

    url: str
    filename: str
    md5: str | None = None
    sha256: str | None = None
    size: int | None = None
    format: str | None = None  # e.g. medmnist-npz, zip: what to do with it after download
    checksum_source: str | None = None  # where the checksum was published


@dataclass(frozen=True)
class Benchmark:
    """One evaluation benchmark: what it is (from the paper or the user) and where the copy is.

    ``class_names`` pairs each label value as it appears in the data (folder name, label column
    value; ``"0"``, ``"1"``... for integer labels) with the class name put into the prompt
    templates.  ``path`` is the user's copy (None: not configured).
    """

    name: str
    tasks: tuple[str, ...]
    layout: str
    modality: str = "other"
    title: str | None = None
    paper_name: str | None = None
    image_type: str | None = None
    class_names: tuple[tuple[str, str], ...] | None = None
    templates: tuple[str, ...] = ()
    retrieval_directions: tuple[str, ...] = DIRECTIONS
    split: str = "test"
    train_split: str = "train"
    test_fraction: float = 0.2
    split_seed: int = 0
    n: int | None = None
    n_test: int | None = None
    metric: str | None = None
    source: str | None = None
    access: str | None = None
    licence: str | None = None
    citation: str | None = None
    notes: str | None = None
    download: tuple[Download, ...] = ()
    path: str | None = None
    image_column: str | None = None
    text_column: str | None = None
    label_column: str = "label"
    split_column: str | None = None
    id_column: str | None = None
    image_root: str | None = None
    image_suffix: str = ""
    row_filter: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude_labels: tuple[str, ...] = ()

    @property
    def class_map(self) -> dict[str, str]:
        """Label value -> class name (empty when the names come from the data)."""
        return dict(self.class_names or ())

    @property
    def root(self) -> Path:
        """The folder relative image paths are resolved against."""
        if self.path is None:
            raise BenchmarkError(f"benchmark {self.name!r} has no path (not configured)")
        p = Path(self.path)
        return p if p.is_dir() else p.parent

    def to_entry(self, *, minimal: bool = True) -> dict[str, Any]:
        """This benchmark as a config entry (plain YAML/JSON types); ``minimal`` drops defaults."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if minimal and f.name not in ("name", "tasks", "layout") and value == f.default:
                continue
            out[f.name] = _plain(f.name, value)
        return out


def _plain(name: str, value: Any) -> Any:
    if name == "class_names" and value is not None:
        keys = [k for k, _ in value]
        if keys == [str(i) for i in range(len(keys))]:
            return [v for _, v in value]
        return {k: v for k, v in value}
    if name == "row_filter":
        return {k: list(v) for k, v in value}
    if name == "download":
        return [{k: v for k, v in vars(d).items() if v is not None} for d in value]
    if isinstance(value, tuple):
        return list(value)
    return value


_FIELDS = {f.name: f for f in fields(Benchmark)}
_DOWNLOAD_KEYS = {f.name for f in fields(Download)}
_STR_FIELDS = {
    "name", "layout", "modality", "title", "paper_name", "image_type", "split", "train_split", "metric", "source",
    "access", "licence", "citation", "notes", "path", "image_column", "text_column", "label_column",
    "split_column", "id_column", "image_root", "image_suffix",
}  # fmt: skip
_REQUIRED_STR = {"name", "layout", "modality", "split", "train_split", "label_column", "image_suffix"}


def _err(where: str, msg: str) -> BenchmarkError:
    return BenchmarkError(f"{where}: {msg}")


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise _err(where, f"expected a list of strings, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if not isinstance(v, str | int) or isinstance(v, bool):
            raise _err(f"{where}[{i}]", f"expected a string, got {type(v).__name__}")
        out.append(str(v))
    return tuple(out)


def _class_names(value: Any, where: str) -> tuple[tuple[str, str], ...] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        pairs = []
        for k, v in value.items():
            if not isinstance(v, str):
                raise _err(f"{where}.{k}", f"class name must be a string, got {type(v).__name__}")
            pairs.append((_label_str(k), v))
        out = tuple(pairs)
    else:
        names = _str_list(value, where)
        out = tuple((str(i), n) for i, n in enumerate(names))
    if not out:
        raise _err(where, "empty (use null to take the class names from the data)")
    return out


def _downloads(value: Any, where: str) -> tuple[Download, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise _err(where, "expected a mapping or a list of mappings")
    out = []
    for i, d in enumerate(items):
        w = f"{where}[{i}]" if not isinstance(value, Mapping) else where
        if not isinstance(d, Mapping):
            raise _err(w, "expected a mapping with url, filename and md5/sha256")
        for k in d:
            if k not in _DOWNLOAD_KEYS:
                raise _err(f"{w}.{k}", f"unknown key (allowed: {', '.join(sorted(_DOWNLOAD_KEYS))})")
        if not d.get("url") or not d.get("filename"):
            raise _err(w, "needs url and filename")
        filename = str(d["filename"])
        if "/" in filename or "\\" in filename or filename in (".", ".."):
            raise _err(f"{w}.filename", f"must be a plain file name, not {filename!r}")
        size = d.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise _err(f"{w}.size", "must be a non-negative integer")
        for algo, length in (("md5", 32), ("sha256", 64)):
            h = d.get(algo)
            if h is not None and not re.fullmatch(rf"[0-9a-f]{{{length}}}", str(h)):
                raise _err(f"{w}.{algo}", f"must be {length} lower-case hex digits")
        out.append(
            Download(
                url=str(d["url"]),
                filename=filename,
                md5=None if d.get("md5") is None else str(d["md5"]),
                sha256=None if d.get("sha256") is None else str(d["sha256"]),
                size=size,
                format=None if d.get("format") is None else str(d["format"]),
                checksum_source=None if d.get("checksum_source") is None else str(d["checksum_source"]),
            )
        )
    return tuple(out)


def _row_filter(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise _err(where, "expected a mapping {column: [allowed values]}")
    return tuple((str(k), _str_list(v, f"{where}.{k}")) for k, v in value.items())


def _benchmark(entry: Mapping[str, Any], where: str) -> Benchmark:
    """A :class:`Benchmark` from a complete mapping; every key and value checked."""
    kw: dict[str, Any] = {}
    for key, value in entry.items():
        if key not in _FIELDS:
            raise _err(f"{where}.{key}", f"unknown key (allowed: {', '.join(sorted(_FIELDS))})")
        w = f"{where}.{key}"
        if key in _STR_FIELDS:
            if value is None and key not in _REQUIRED_STR:
                kw[key] = None
                continue
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                raise _err(w, f"expected a string, got {type(value).__name__}")
            kw[key] = str(value)
        elif key in ("tasks", "retrieval_directions", "exclude_labels"):
            kw[key] = _str_list(value, w)
        elif key == "templates":
            kw[key] = () if value is None else _str_list(value, w)
        elif key == "class_names":
            kw[key] = _class_names(value, w)
        elif key == "download":
            kw[key] = _downloads(value, w)
        elif key == "row_filter":
            kw[key] = _row_filter(value, w)
        elif key in ("n", "n_test", "split_seed"):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise _err(w, f"expected an integer, got {value!r}")
            if key == "split_seed" and value is None:
                raise _err(w, "expected an integer")
            kw[key] = value
        elif key == "test_fraction":
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < float(value) < 1:
                raise _err(w, f"must be a number in (0, 1), got {value!r}")
            kw[key] = float(value)
    for req in ("name", "tasks", "layout"):
        if req not in kw:
            raise _err(where, f"missing required key {req!r}")
    b = Benchmark(**kw)
    _check(b, where)
    return b


def _check(b: Benchmark, where: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", b.name):
        raise _err(f"{where}.name", f"{b.name!r}: use letters, digits and _ . + - only")
    if not b.tasks:
        raise _err(f"{where}.tasks", "no task")
    for t in b.tasks:
        if t not in TASKS:
            raise _err(f"{where}.tasks", f"unknown task {t!r} (allowed: {', '.join(TASKS)})")
    if b.layout not in LAYOUTS:
        raise _err(f"{where}.layout", f"{b.layout!r} is not one of {', '.join(LAYOUTS)}")
    if b.modality not in MODALITIES:
        raise _err(f"{where}.modality", f"{b.modality!r} is not one of {', '.join(MODALITIES)}")
    if b.access is not None and b.access not in ACCESS_LEVELS:
        raise _err(f"{where}.access", f"{b.access!r} is not one of {', '.join(ACCESS_LEVELS)}")
    for d in b.retrieval_directions:
        if d not in DIRECTIONS:
            raise _err(f"{where}.retrieval_directions", f"unknown direction {d!r}")
    if "retrieval" in b.tasks and b.layout not in RETRIEVAL_LAYOUTS:
        raise _err(
            f"{where}.layout", f"retrieval needs one of {', '.join(RETRIEVAL_LAYOUTS)}, not {b.layout!r}"
        )
    classification = {"zero_shot", "linear_probe"} & set(b.tasks)
    if classification and b.layout not in CLASSIFICATION_LAYOUTS:
        raise _err(
            f"{where}.layout",
            f"{'/'.join(sorted(classification))} needs one of {', '.join(CLASSIFICATION_LAYOUTS)}, not {b.layout!r}",
        )
    if "zero_shot" in b.tasks:
        if not b.templates:
            raise _err(f"{where}.templates", "zero_shot needs at least one prompt template")
        for i, t in enumerate(b.templates):
            if "{}" not in t:
                raise _err(f"{where}.templates[{i}]", f"{t!r} has no '{{}}' for the class name")
    if b.class_names is not None:
        keys = [k for k, _ in b.class_names]
        dup = [k for k, c in Counter(keys).items() if c > 1]
        if dup:
            raise _err(f"{where}.class_names", f"label {dup[0]!r} appears twice")


# ----------------------------------------------------------------------------------------------
# the paper's definitions and config resolution
# ----------------------------------------------------------------------------------------------


def _paper_text() -> str:
    return (resources.files("pmcflow") / "data" / "benchmarks" / "paper.yaml").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def _paper() -> tuple[Benchmark, ...]:
    doc = yaml.safe_load(_paper_text())
    where = f"{PAPER_YAML}"
    allowed = {"schema_version", "templates", "protocol", "benchmarks"}
    for k in doc:
        if k not in allowed:
            raise _err(f"{where}.{k}", "unknown top-level key")
    out = []
    for i, entry in enumerate(doc["benchmarks"]):
        out.append(_benchmark(entry, f"{where}: benchmarks[{i}]"))
    names = [b.name for b in out]
    if len(set(names)) != len(names):
        raise _err(where, "duplicate benchmark names")
    return tuple(out)


def paper_benchmarks() -> dict[str, Benchmark]:
    """The paper's benchmarks by name, in the order of ``paper.yaml`` (none configured: path None)."""
    return {b.name: b for b in _paper()}


def paper_protocol() -> dict[str, str]:
    """The ``protocol`` section of ``paper.yaml`` (one paragraph per task family)."""
    return dict(yaml.safe_load(_paper_text())["protocol"])


def benchmark_tasks(benchmarks: Sequence[Benchmark]) -> list[dict[str, Any]]:
    """The tasks the benchmarks define: one per retrieval direction, one per classification task.

    Counting convention of the paper: a retrieval benchmark is 2 tasks (image->text, text->image);
    a classification benchmark is one zero-shot and one linear-probe task.
    """
    out: list[dict[str, Any]] = []
    for b in benchmarks:
        for task in b.tasks:
            if task == "retrieval":
                for d in b.retrieval_directions:
                    out.append({"id": f"{b.name}/retrieval/{d}", "benchmark": b.name, "task": task, "direction": d,
                                "paper_name": b.paper_name, "modality": b.modality})  # fmt: skip
            else:
                out.append({"id": f"{b.name}/{task}", "benchmark": b.name, "task": task, "direction": None,
                            "paper_name": b.paper_name, "modality": b.modality})  # fmt: skip
    return out


def resolve_benchmarks(
    entries: Sequence[Mapping[str, Any]] | None,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    check_paths: bool = True,
) -> list[Benchmark]:
    """Config entries -> benchmarks, checked.

    An entry whose ``name`` is a paper benchmark starts from that definition and overrides any key
    it gives; any other entry must define ``name``, ``tasks``, ``layout`` (and what its layout and
    tasks need).  ``path`` is required; relative paths are resolved against ``base_dir`` (default:
    the current directory) and, with ``check_paths``, must exist.
    """
    if entries is None:
        return []
    if isinstance(entries, Mapping | str) or not isinstance(entries, Sequence):
        raise BenchmarkError("benchmarks: expected a list of entries")
    paper = paper_benchmarks()
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    out: list[Benchmark] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"benchmarks[{i}]"
        if not isinstance(entry, Mapping):
            raise _err(where, f"expected a mapping, got {type(entry).__name__}")
        for key in entry:
            if key not in _FIELDS:
                raise _err(f"{where}.{key}", f"unknown key (allowed: {', '.join(sorted(_FIELDS))})")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _err(f"{where}.name", "missing (a paper benchmark's name or your own)")
        where = f"benchmarks[{i}] ({name})"
        if name in paper:
            merged = paper[name].to_entry(minimal=False)
            merged.update(entry)
        else:
            missing = [k for k in ("tasks", "layout") if k not in entry]
            if missing:
                raise _err(
                    where,
                    f"not a paper benchmark ({', '.join(paper)}), so it must define {' and '.join(missing)}",
                )
            merged = dict(entry)
        b = _benchmark(merged, where)
        if name in seen:
            raise _err(where, f"benchmark {name!r} is listed twice")
        seen.add(name)
        if b.path is None:
            raise _err(
                f"{where}.path", f"benchmark {name!r} has no path: set it to your copy in layout {b.layout!r}"
            )
        p = Path(os.path.expanduser(b.path))
        if not p.is_absolute():
            p = base / p
        if check_paths and not _path_exists(p, b.layout):
            raise _err(f"{where}.path", f"benchmark {name!r}: {p} does not exist")
        if check_paths and b.layout == "dir" and not p.is_dir():
            raise _err(f"{where}.path", f"benchmark {name!r}: layout 'dir' needs a folder, {p} is not one")
        out.append(replace(b, path=str(p)))
    return out


def _path_exists(p: Path, layout: str) -> bool:
    if layout == "webdataset" and any(c in str(p) for c in "*?["):
        return bool(globmod.glob(str(p)))
    return p.exists()


def read_benchmarks_yaml(path: str | os.PathLike[str], *, check_paths: bool = True) -> list[Benchmark]:
    """Benchmarks from a YAML file ``{benchmarks: [entries]}`` (or a bare list); paths relative to it."""
    p = Path(path)
    doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    entries = doc.get("benchmarks") if isinstance(doc, Mapping) else doc
    if isinstance(doc, Mapping):
        extra = set(doc) - {"benchmarks"}
        if extra:
            raise BenchmarkError(f"{p}: unknown top-level key {sorted(extra)[0]!r} (expected 'benchmarks')")
    return resolve_benchmarks(entries, base_dir=p.parent, check_paths=check_paths)


# ----------------------------------------------------------------------------------------------
# loaders
# ----------------------------------------------------------------------------------------------


def _label_str(value: Any) -> str:
    """Label values compare as strings: 3, 3.0, np.int64(3) and "3" are all ``"3"``."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, bool | np.bool_):
        return str(value)
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    return str(value)


def open_image(ref: str | bytes) -> Image.Image:
    """Decode an image given as bytes, a file path or a ``<tar>#<member>`` reference; RGB."""
    if isinstance(ref, bytes | bytearray):
        data = bytes(ref)
    elif "#" in ref and not Path(ref).exists():
        tar_path, member = ref.split("#", 1)
        with tarfile.open(tar_path) as tf:
            fh = tf.extractfile(member)
            if fh is None:
                raise BenchmarkError(f"{ref}: not a file member")
            data = fh.read()
    else:
        with open(ref, "rb") as fh:
            data = fh.read()
    with Image.open(io.BytesIO(data)) as im:
        return im.convert("RGB")


@dataclass
class RetrievalData:
    """Image-text pairs of a retrieval benchmark, in a deterministic order.

    ``image_bytes[i]`` holds the encoded image where the copy stores bytes (a binary Parquet
    column, WebDataset tars); ``image_paths[i]`` is then a reference (``<tar>#<member>`` or
    ``<table>#<row>``), otherwise a file path.
    """

    ids: list[str]
    image_paths: list[str]
    texts: list[str]
    image_bytes: list[bytes | None] | None = None
    skipped: int = 0  # rows without an image or a text

    def __len__(self) -> int:
        return len(self.ids)

    def image(self, i: int) -> Image.Image:
        data = self.image_bytes[i] if self.image_bytes is not None else None
        return open_image(data if data is not None else self.image_paths[i])

    def images(self) -> Iterator[Image.Image]:
        for i in range(len(self)):
            yield self.image(i)


@dataclass
class ClassificationData:
    """Labelled images of a classification benchmark.

    ``labels`` are label values as in the data (``classes`` lists them in class order);
    ``class_names`` maps each to the name that fills the prompt templates; ``splits`` gives each
    sample's split (``split_source``: folders, column or derived by :func:`stable_split`).
    """

    ids: list[str]
    image_paths: list[str]
    labels: list[str]
    splits: list[str]
    classes: list[str]
    class_names: dict[str, str]
    split_source: str
    image_bytes: list[bytes | None] | None = None
    excluded: int = 0  # samples of ``exclude_labels``

    def __len__(self) -> int:
        return len(self.ids)

    def indices(self, split: str) -> list[int]:
        return [i for i, s in enumerate(self.splits) if s == split]

    def label_indices(self) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.classes)}
        return np.array([index[lab] for lab in self.labels], dtype=np.int64)

    def image(self, i: int) -> Image.Image:
        data = self.image_bytes[i] if self.image_bytes is not None else None
        return open_image(data if data is not None else self.image_paths[i])


def _require_path(b: Benchmark) -> Path:
    if b.path is None:
        raise BenchmarkError(f"benchmark {b.name!r} has no path (not configured)")
    return Path(b.path)


def _read_table(b: Benchmark) -> tuple[Any, Path]:
    import pyarrow.compute as pc

    p = _require_path(b)
    if p.is_dir():
        raise BenchmarkError(f"benchmark {b.name!r}: layout {b.layout!r} needs a table file, {p} is a folder")
    if not p.exists():
        raise BenchmarkError(f"benchmark {b.name!r}: {p} does not exist")
    if b.layout == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(p)
    else:
        import pyarrow.csv as pacsv

        table = pacsv.read_csv(p)
    for col, allowed in b.row_filter:
        if col not in table.column_names:
            raise BenchmarkError(
                f"benchmark {b.name!r}: row_filter column {col!r} not in {p.name} ({_cols(table)})"
            )
        values = table.column(col).cast("string")
        table = table.filter(pc.is_in(values, value_set=_pa_strings(allowed)))
    return table, p


def _pa_strings(values: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.array(list(values), pa.string())


def _cols(table: Any) -> str:
    return "columns: " + ", ".join(table.column_names)


def _pick_column(
    b: Benchmark, table: Any, given: str | None, defaults: Sequence[str], what: str, p: Path
) -> str:
    if given is not None:
        if given not in table.column_names:
            raise BenchmarkError(
                f"benchmark {b.name!r}: {what} column {given!r} not in {p.name} ({_cols(table)})"
            )
        return given
    for c in defaults:
        if c in table.column_names:
            return c
    raise BenchmarkError(
        f"benchmark {b.name!r}: no {what} column in {p.name} (looked for {', '.join(defaults)}; {_cols(table)}); "
        f"set {what}_column"
    )


def _image_refs(
    b: Benchmark, values: list[Any], table_path: Path
) -> tuple[list[str], list[bytes | None] | None]:
    """(paths or references, bytes or None) of an image column."""
    root = table_path.parent / b.image_root if b.image_root else table_path.parent
    paths: list[str] = []
    blobs: list[bytes | None] = []
    any_bytes = False
    for row, v in enumerate(values):
        if isinstance(v, Mapping):  # Hugging Face datasets: {"bytes": ..., "path": ...}
            v = v.get("bytes") if v.get("bytes") is not None else v.get("path")
        if isinstance(v, bytes | bytearray):
            any_bytes = True
            paths.append(f"{table_path}#{row}")
            blobs.append(bytes(v))
        elif v is None or v == "":
            paths.append("")
            blobs.append(None)
        else:
            s = str(v) + b.image_suffix
            fp = Path(os.path.expanduser(s))
            paths.append(str(fp if fp.is_absolute() else root / fp))
            blobs.append(None)
    return paths, (blobs if any_bytes else None)


def _table_ids(b: Benchmark, table: Any, values: list[Any], p: Path) -> list[str]:
    if b.id_column is not None:
        if b.id_column not in table.column_names:
            raise BenchmarkError(
                f"benchmark {b.name!r}: id column {b.id_column!r} not in {p.name} ({_cols(table)})"
            )
        return [_label_str(v) for v in table.column(b.id_column).to_pylist()]
    if "id" in table.column_names:
        return [_label_str(v) for v in table.column("id").to_pylist()]
    ids = []
    for row, v in enumerate(values):
        if isinstance(v, str) and v:
            ids.append(v)
        elif isinstance(v, Mapping) and isinstance(v.get("path"), str) and v.get("path"):
            ids.append(str(v["path"]))
        else:
            ids.append(f"row{row}")
    return ids


def load_retrieval(b: Benchmark) -> RetrievalData:
    """Image-text pairs of ``b`` (layouts parquet, csv, webdataset); see the module docstring."""
    if b.layout == "webdataset":
        return _load_webdataset(b)
    if b.layout not in ("parquet", "csv"):
        raise BenchmarkError(
            f"benchmark {b.name!r}: retrieval needs layout parquet, csv or webdataset, not {b.layout!r}"
        )
    table, p = _read_table(b)
    icol = _pick_column(b, table, b.image_column, ("image", "path"), "image", p)
    tcol = _pick_column(b, table, b.text_column, ("text", "caption"), "text", p)
    raw_images = table.column(icol).to_pylist()
    texts_raw = table.column(tcol).to_pylist()
    ids_all = _table_ids(b, table, raw_images, p)
    paths_all, blobs_all = _image_refs(b, raw_images, p)
    keep = [
        i
        for i in range(len(raw_images))
        if texts_raw[i] is not None
        and str(texts_raw[i]).strip()
        and (paths_all[i] or (blobs_all and blobs_all[i]))
    ]
    ids = [ids_all[i] for i in keep]
    _no_duplicates(b, ids)
    return RetrievalData(
        ids=ids,
        image_paths=[paths_all[i] for i in keep],
        texts=[str(texts_raw[i]) for i in keep],
        image_bytes=[blobs_all[i] for i in keep] if blobs_all is not None else None,
        skipped=len(raw_images) - len(keep),
    )


def _no_duplicates(b: Benchmark, ids: Sequence[str]) -> None:
    dup = [k for k, c in Counter(ids).items() if c > 1]
    if dup:
        raise BenchmarkError(
            f"benchmark {b.name!r}: sample id {dup[0]!r} occurs {Counter(ids)[dup[0]]} times; set id_column"
        )


def _tar_files(b: Benchmark) -> list[Path]:
    p = _require_path(b)
    s = str(p)
    if any(c in s for c in "*?["):
        files = sorted(Path(f) for f in globmod.glob(s))
    elif p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and fnmatch.fnmatch(f.name, "*.tar*"))
    else:
        files = [p]
    files = [f for f in files if f.is_file()]
    if not files:
        raise BenchmarkError(f"benchmark {b.name!r}: no tar shard at {p}")
    return files


def _split_key(member: str) -> tuple[str, str]:
    """WebDataset convention: key = path up to the first dot of the base name; the rest = extension."""
    d, _, base = member.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{d}/{stem}" if d else stem), (ext.lower() if dot else "")


def _load_webdataset(b: Benchmark) -> RetrievalData:
    text_ext = (b.text_column or "txt").lower()
    img_exts = (b.image_column.lower(),) if b.image_column else tuple(e.lstrip(".") for e in IMAGE_EXTENSIONS)
    ids: list[str] = []
    paths: list[str] = []
    texts: list[str] = []
    blobs: list[bytes | None] = []
    skipped = 0
    for tar_path in _tar_files(b):
        samples: dict[str, dict[str, tuple[str, bytes]]] = {}
        order: list[str] = []
        with tarfile.open(tar_path) as tf:
            for m in tf:
                if not m.isfile():
                    continue
                key, ext = _split_key(m.name)
                fh = tf.extractfile(m)
                if fh is None:
                    continue
                if key not in samples:
                    samples[key] = {}
                    order.append(key)
                samples[key][ext] = (m.name, fh.read())
        for key in order:
            members = samples[key]
            img = next((members[e] for e in img_exts if e in members), None)
            txt = members.get(text_ext)
            if img is None or txt is None or not txt[1].strip():
                skipped += 1
                continue
            ids.append(key)
            paths.append(f"{tar_path}#{img[0]}")
            blobs.append(img[1])
            texts.append(txt[1].decode("utf-8").strip())
    _no_duplicates(b, ids)
    return RetrievalData(ids=ids, image_paths=paths, texts=texts, image_bytes=blobs, skipped=skipped)


def _natural_key(s: str) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


def _images_below(folder: Path) -> list[Path]:
    return sorted(
        (f for f in folder.rglob("*") if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS),
        key=lambda f: f.relative_to(folder).as_posix(),
    )


def _load_dir(b: Benchmark) -> tuple[list[str], list[str], list[str], list[str | None]]:
    root = _require_path(b)
    if not root.is_dir():
        raise BenchmarkError(f"benchmark {b.name!r}: layout 'dir' needs a folder, {root} is not one")
    top = sorted(
        (d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")), key=lambda d: d.name
    )
    if not top:
        raise BenchmarkError(f"benchmark {b.name!r}: {root} has no class folders")
    split_layout = all(d.name.lower() in SPLIT_DIRS for d in top)
    groups: list[tuple[str | None, Path]] = []
    if split_layout:
        for sd in top:
            for cd in sorted(
                (d for d in sd.iterdir() if d.is_dir() and not d.name.startswith(".")), key=lambda d: d.name
            ):
                groups.append((SPLIT_DIRS[sd.name.lower()], cd))
    else:
        groups = [(None, d) for d in top]
    ids: list[str] = []
    paths: list[str] = []
    labels: list[str] = []
    splits: list[str | None] = []
    for split, cd in groups:
        for f in _images_below(cd):
            ids.append(f.relative_to(root).as_posix())
            paths.append(str(f))
            labels.append(cd.name)
            splits.append(split)
    return ids, paths, labels, splits


def load_classification(b: Benchmark) -> ClassificationData:
    """Labelled images of ``b`` (layouts dir, parquet, csv) with a train/test split for each sample.

    Labels are checked against ``class_names`` (a label may also be given by its class name);
    samples of ``exclude_labels`` are dropped.  Without split folders or a split column the split
    is :func:`stable_split` of the sample ids with ``test_fraction`` and ``split_seed``.
    """
    blobs: list[bytes | None] | None = None
    if b.layout == "dir":
        ids, paths, labels, splits = _load_dir(b)
        split_source = "folders" if splits and splits[0] is not None else "derived"
    elif b.layout in ("parquet", "csv"):
        table, p = _read_table(b)
        icol = _pick_column(b, table, b.image_column, ("image", "path"), "image", p)
        lcol = _pick_column(b, table, b.label_column, (), "label", p)
        scol = (
            b.split_column
            if b.split_column is not None
            else ("split" if "split" in table.column_names else None)
        )
        if scol is not None and scol not in table.column_names:
            raise BenchmarkError(
                f"benchmark {b.name!r}: split column {scol!r} not in {p.name} ({_cols(table)})"
            )
        raw = table.column(icol).to_pylist()
        ids = _table_ids(b, table, raw, p)
        paths, blobs = _image_refs(b, raw, p)
        labels = [_label_str(v) if v is not None else "" for v in table.column(lcol).to_pylist()]
        splits = [_label_str(v) for v in table.column(scol).to_pylist()] if scol else [None] * len(ids)
        split_source = "column" if scol else "derived"
        bad = next(
            (i for i in range(len(ids)) if not labels[i] or not (paths[i] or (blobs and blobs[i]))), None
        )
        if bad is not None:
            raise BenchmarkError(f"benchmark {b.name!r}: row {bad} of {p.name} has no image or no label")
    else:
        raise BenchmarkError(
            f"benchmark {b.name!r}: classification needs layout dir, parquet or csv, not {b.layout!r}"
        )
    if not ids:
        raise BenchmarkError(f"benchmark {b.name!r}: no images found at {b.path}")
    _no_duplicates(b, ids)

    # labels -> canonical label values of class_names (a value may also be written as its name)
    excluded = set(b.exclude_labels)
    cmap = b.class_map
    lookup: dict[str, str] = {}
    if cmap:
        for k, v in cmap.items():
            lookup.setdefault(v, k)
        for k in cmap:
            lookup[k] = k
    keep: list[int] = []
    canon: list[str] = []
    unknown: Counter[str] = Counter()
    for i, lab in enumerate(labels):
        if lab in excluded:
            continue
        if cmap:
            c = lookup.get(lab)
            if c is None:
                unknown[lab] += 1
                continue
            if c in excluded:
                continue
            canon.append(c)
        else:
            canon.append(lab)
        keep.append(i)
    if unknown:
        shown = ", ".join(f"{k!r} ({n})" for k, n in sorted(unknown.items())[:5])
        raise BenchmarkError(
            f"benchmark {b.name!r}: label(s) {shown} not among its classes {sorted(cmap)}; "
            "fix class_names or add them to exclude_labels"
        )
    ids = [ids[i] for i in keep]
    paths = [paths[i] for i in keep]
    splits = [splits[i] for i in keep]
    if blobs is not None:
        blobs = [blobs[i] for i in keep]
    if not ids:
        raise BenchmarkError(f"benchmark {b.name!r}: no images left after exclude_labels")
    classes = [k for k in cmap if k not in excluded] if cmap else sorted(set(canon), key=_natural_key)
    names = {c: cmap.get(c, c) for c in classes}
    if split_source == "derived":
        final_splits = stable_split(ids, canon, b.test_fraction, b.split_seed)
    else:
        final_splits = [str(s) for s in splits]
    return ClassificationData(
        ids=ids,
        image_paths=paths,
        labels=canon,
        splits=final_splits,
        classes=classes,
        class_names=names,
        split_source=split_source,
        image_bytes=blobs,
        excluded=len(labels) - len(keep),
    )


def stable_split(
    ids: Sequence[str], labels: Sequence[str], test_fraction: float, seed: int | str
) -> list[str]:
    """``"train"``/``"test"`` for each sample: stratified by label, deterministic, order-free.

    Within each label the samples are ordered by ``seed_digest(seed, "benchmark-split", id)`` and
    the first ``round(n * test_fraction)`` go to test (at least one and at most n - 1 when the
    label has two or more samples; a single sample stays in train).  A sample's split depends only
    on the seed, its id and the ids of its own label, not on the order or on other labels.
    """
    if len(ids) != len(labels):
        raise BenchmarkError(f"stable_split: {len(ids)} ids but {len(labels)} labels")
    if not 0 < test_fraction < 1:
        raise BenchmarkError(f"stable_split: test_fraction must be in (0, 1), got {test_fraction}")
    by_label: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        by_label.setdefault(lab, []).append(i)
    out = ["train"] * len(ids)
    for members in by_label.values():
        n = len(members)
        if n < 2:
            continue
        n_test = min(n - 1, max(1, round(n * test_fraction)))
        ranked = sorted(members, key=lambda i: (seed_digest(seed, "benchmark-split", ids[i]), ids[i], i))
        for i in ranked[:n_test]:
            out[i] = "test"
    return out


# ----------------------------------------------------------------------------------------------
# the files a benchmark reads
# ----------------------------------------------------------------------------------------------


def _hash_file(path: str) -> tuple[int, str]:
    return os.path.getsize(path), file_sha256(path)


def benchmark_files(b: Benchmark, *, workers: int | None = None) -> list[dict[str, Any]]:
    """Every file ``b`` reads (table or tars, and each image file), sorted, with bytes and sha256.

    Each row: ``path`` (absolute), ``relpath`` (relative to the benchmark's folder, "/"-separated),
    ``bytes``, ``sha256``.  Images stored inside the table or the tars are covered by the
    table's/tar's hash.  Files are hashed in 1 MiB blocks on a few threads.
    """
    p = _require_path(b)
    files: set[str] = set()
    if b.layout == "webdataset":
        files.update(str(f) for f in _tar_files(b))
    else:
        if b.layout in ("parquet", "csv"):
            files.add(str(p))
        if "retrieval" in b.tasks:
            rd = load_retrieval(b)
            files.update(
                x
                for x, blob in zip(rd.image_paths, rd.image_bytes or [None] * len(rd), strict=True)
                if blob is None
            )
        if {"zero_shot", "linear_probe"} & set(b.tasks):
            cd = load_classification(b)
            files.update(
                x
                for x, blob in zip(cd.image_paths, cd.image_bytes or [None] * len(cd), strict=True)
                if blob is None
            )
    ordered = sorted(files)
    missing = [f for f in ordered if not os.path.isfile(f)]
    if missing:
        raise BenchmarkError(f"benchmark {b.name!r}: {len(missing)} file(s) missing, e.g. {missing[0]}")
    root = b.root
    n_workers = workers or min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=n_workers) as ex:
        hashed = list(ex.map(_hash_file, ordered))
    out = []
    for f, (size, digest) in zip(ordered, hashed, strict=True):
        try:
            rel = Path(f).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            rel = f
        out.append({"path": f, "relpath": rel, "bytes": size, "sha256": digest})
    return out


def describe(b: Benchmark) -> dict[str, Any]:
    """A JSON-friendly summary of a definition (for listings and evaluation records)."""
    return b.to_entry(minimal=False)


# ----------------------------------------------------------------------------------------------
# MedMNIST+ npz -> the parquet layout
# ----------------------------------------------------------------------------------------------


def convert_medmnist_npz(
    npz_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    splits: Sequence[str] = ("train", "val", "test"),
) -> Path:
    """Write a MedMNIST(+) ``.npz`` as PNG files plus ``<name>.parquet`` (image, label, split).

    The ``<split>_images`` / ``<split>_labels`` arrays of the official files become
    ``images/<split>/<index>.png`` (fixed PNG settings: the same npz gives the same bytes) and one
    row each; ``label`` is the integer class.  Returns the Parquet path, which a config entry of
    the matching paper benchmark uses as ``path``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(npz_path)
    out = Path(out_dir)
    stem = src.name[: -len(".npz")] if src.name.endswith(".npz") else src.stem
    rows_img: list[str] = []
    rows_lab: list[int] = []
    rows_split: list[str] = []
    with np.load(src, allow_pickle=False) as data:
        for split in splits:
            if f"{split}_images" not in data.files:
                continue
            images = data[f"{split}_images"]
            labels = np.asarray(data[f"{split}_labels"]).reshape(len(images), -1)
            if labels.shape[1] != 1:
                raise BenchmarkError(
                    f"{src}: {split}_labels has {labels.shape[1]} columns (multi-label sets are not supported)"
                )
            d = out / "images" / split
            d.mkdir(parents=True, exist_ok=True)
            for i in range(len(images)):
                arr = np.ascontiguousarray(images[i])
                im = Image.fromarray(arr, "L" if arr.ndim == 2 else "RGB")
                rel = f"images/{split}/{i:06d}.png"
                im.save(out / rel, format="PNG", optimize=False, compress_level=6)
                rows_img.append(rel)
                rows_lab.append(int(labels[i, 0]))
                rows_split.append(split)
    if not rows_img:
        raise BenchmarkError(f"{src}: no <split>_images arrays for splits {list(splits)}")
    table = pa.table(
        {
            "image": pa.array(rows_img, pa.string()),
            "label": pa.array(rows_lab, pa.int64()),
            "split": pa.array(rows_split, pa.string()),
        }
    )
    target = out / f"{stem}.parquet"
    pq.write_table(table, target)
    return target


# ----------------------------------------------------------------------------------------------
# downloads (open definitions with a published checksum only)
# ----------------------------------------------------------------------------------------------


def _verify(path: Path, d: Download) -> tuple[bool, dict[str, Any]]:
    size = path.stat().st_size
    info = {"bytes": size, **file_digests(path, ("md5", "sha256"))}
    ok = (d.md5 is None or d.md5 == info["md5"]) and (d.sha256 is None or d.sha256 == info["sha256"])
    ok = ok and (d.size is None or d.size == size)
    return ok, info


def fetch_benchmarks(
    benchmarks: Sequence[str | Benchmark],
    dest: str | os.PathLike[str],
    *,
    timeout: float = 60.0,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Download the ``download`` files of the named benchmarks into ``dest/<name>/`` and verify them.

    Only definitions with ``access: open``, a ``download`` block and a published md5/sha256 are
    fetched; anything else raises :class:`BenchmarkError` naming where to obtain it.  A file
    already present with the right checksum is not fetched again; a download whose checksum does
    not match is deleted and raises.
    """
    paper = paper_benchmarks()
    chosen: list[Benchmark] = []
    for item in benchmarks:
        if isinstance(item, Benchmark):
            chosen.append(item)
        elif item in paper:
            chosen.append(paper[item])
        else:
            raise BenchmarkError(f"unknown benchmark {item!r} (paper benchmarks: {', '.join(paper)})")
    for b in chosen:  # refuse before downloading anything
        if b.access != "open" or not b.download:
            raise BenchmarkError(
                f"benchmark {b.name!r} has no open download (access: {b.access or 'unknown'}); obtain it from {b.source}"
            )
        for d in b.download:
            if d.md5 is None and d.sha256 is None:
                raise BenchmarkError(
                    f"benchmark {b.name!r}: {d.filename} has no published checksum; not downloading it"
                )
    say = log or (lambda _m: None)
    out: list[dict[str, Any]] = []
    for b in chosen:
        folder = Path(dest) / b.name
        folder.mkdir(parents=True, exist_ok=True)
        for d in b.download:
            target = folder / d.filename
            if target.exists():
                ok, info = _verify(target, d)
                if ok:
                    say(f"{b.name}: {d.filename} present and verified")
                    out.append({"name": b.name, "path": str(target), "status": "present", **info})
                    continue
            tmp = folder / f".{d.filename}.part-{os.getpid()}"
            say(f"{b.name}: downloading {d.url}")
            try:
                with urllib.request.urlopen(d.url, timeout=timeout) as resp, open(tmp, "wb") as fh:  # noqa: S310
                    while chunk := resp.read(HASH_BLOCK):
                        fh.write(chunk)
                ok, info = _verify(tmp, d)
                if not ok:
                    want = {
                        k: v
                        for k, v in (("md5", d.md5), ("sha256", d.sha256), ("bytes", d.size))
                        if v is not None
                    }
                    got = {k: info[k] for k in want}
                    raise BenchmarkError(
                        f"benchmark {b.name!r}: {d.filename} checksum mismatch: expected {want}, got {got}"
                    )
                os.replace(tmp, target)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
            out.append({"name": b.name, "path": str(target), "status": "downloaded", **info})
    return out


# ----------------------------------------------------------------------------------------------
# demo benchmarks from real images shipped inside installed packages
# ----------------------------------------------------------------------------------------------

# pool modality -> (class folder, class name for the prompts, phrase opening a retrieval text)
DEMO_CLASSES: dict[str, tuple[str, str, str]] = {
    "radiology": ("radiology", "radiology", "Radiology image"),
    "microscopy": ("microscopy", "light microscopy", "Microscopy image"),
    "histopathology": ("histopathology", "histopathology", "Histopathology image"),
    "retina": ("fundus", "retinal fundus photography", "Retinal fundus image"),
    "plot": ("chart", "chart or plot", "Chart"),
}
DEMO_TEMPLATES = ("a {} image.", "a biomedical figure panel showing {}.", "an example of {}.")
DEMO_PER_CLASS = {"train": 8, "test": 4}
DEMO_SIDE = 128  # output images are DEMO_SIDE x DEMO_SIDE px (<= 224)
_PNG_KW: dict[str, Any] = {"format": "PNG", "optimize": False, "compress_level": 6}

_WDBC = "Breast Cancer Wisconsin (Diagnostic) dataset (569 fine-needle aspirates of breast masses)"
_WDBC_LIC = "data CC BY 4.0 (UCI ML Repository), copy shipped with scikit-learn (BSD-3-Clause)"
_DIAB = "diabetes dataset of Efron et al. (2004) (442 patients)"
_DIAB_LIC = "data shipped with scikit-learn (BSD-3-Clause)"
_MPL_LIC = "matplotlib sample data (Matplotlib License)"

# Source file of a pool image -> (description, licence).  Descriptions are taken from the source's
# own documentation (scikit-image docstrings, pydicom's test_files/README.txt, NIfTI headers,
# matplotlib's sample data, pmcflow/data/panels/captions.json) or state what a pmcflow plot shows.
DEMO_SOURCES: dict[str, tuple[str, str]] = {
    "skimage:cell.png": (
        "Cell floating in saline: a quantitative phase image retrieved from a digital hologram "
        "(pixel spacing 0.107 um; Mueller et al., Optics Express 2018).",
        "CC0 (scikit-image data/cell.png)",
    ),
    "skimage:ihc.png": (
        "Immunohistochemical (IHC) staining with hematoxylin counterstaining: colonic glands where "
        "the IHC expression of FHL2 protein is revealed with DAB.",
        "no known copyright restrictions (scikit-image data/ihc.png, CMMI)",
    ),
    "skimage:retina.jpg": (
        "Fundus photograph of a normal left human eye (Haggstrom, Medical gallery 2014).",
        "CC0 1.0 (Wikimedia Commons, via scikit-image data/retina.jpg)",
    ),
    "skimage:microaneurysms.png": (
        "Detail of the green channel of a retinal fundus image with microaneurysms, cropped from "
        "image 07_dr of the High-Resolution Fundus (HRF) Image Database.",
        "CC0 (HRF, Andreas Maier, via scikit-image data/microaneurysms.png)",
    ),
    "skimage:phantom.png": (
        "Shepp-Logan phantom: the numerical head-section model used to test CT reconstruction "
        "(Shepp and Logan, IEEE Trans. Nucl. Sci. 1974).",
        "scikit-image data/phantom.png (BSD-3-Clause package)",
    ),
    "pydicom:CT_small.dcm": (
        "CT image downsized to 128x128 from the NEMA WG04 DICOM sample CT1_UNC.",
        "NEMA WG04 sample data in pydicom's test files (pydicom: MIT)",
    ),
    "pydicom:MR_small.dcm": (
        "MR image downsized to 64x64 from the NEMA WG04 DICOM sample MR1_UNC.",
        "NEMA WG04 sample data in pydicom's test files (pydicom: MIT)",
    ),
    "nibabel:anatomical.nii": (
        "a 3D anatomical brain MRI volume spatially normalised with SPM (33x41x25 voxels of 2 mm).",
        "nibabel test data (nibabel: MIT)",
    ),
    "nibabel:example4d.nii.gz": (
        "the first volume of a 4D MRI time series (128x96x24 voxels of 2x2x2.2 mm, 2 volumes, "
        "repetition time 2 s).",
        "nibabel test data (nibabel: MIT)",
    ),
    "matplotlib:s1045.ima.gz": (
        "MRI slice of a human head, 256x256 pixels, 16 bit (matplotlib sample data s1045.ima, "
        "shown in matplotlib's MRI-with-EEG example).",
        _MPL_LIC,
    ),
    "plot:bc_hist_radius": (
        f"Histogram of the mean nucleus radius of malignant and benign tumours, {_WDBC}.",
        _WDBC_LIC,
    ),
    "plot:bc_scatter_texture": (
        f"Scatter plot of mean area against mean texture of malignant and benign tumours, {_WDBC}.",
        _WDBC_LIC,
    ),
    "plot:bc_box_features": (
        f"Box plots of mean smoothness and mean symmetry of malignant (M) and benign (B) tumours, {_WDBC}.",
        _WDBC_LIC,
    ),
    "plot:bc_bar_means": (
        f"Bar chart (mean +- s.d.) of compactness, concavity, concave points and fractal dimension "
        f"of malignant and benign tumours, {_WDBC}.",
        _WDBC_LIC,
    ),
    "plot:diab_scatter_bmi": (
        f"Scatter plot with a least-squares line of disease progression after one year against body mass index, {_DIAB}.",
        _DIAB_LIC,
    ),
    "plot:diab_hist_target": (
        f"Histogram of disease progression one year after baseline, {_DIAB}.",
        _DIAB_LIC,
    ),
    "plot:diab_box_sex": (
        f"Box plots of disease progression one year after baseline by sex group, {_DIAB}.",
        _DIAB_LIC,
    ),
    "plot:eeg_traces": (
        "Four EEG channel traces over 600 samples (4.7 s at 128 Hz), matplotlib sample data eeg.dat.",
        _MPL_LIC,
    ),
    "plot:membrane_trace": (
        "Membrane potential recording over 200 ms, matplotlib sample data membrane.dat.",
        _MPL_LIC,
    ),
    "plot:membrane_psd": (
        "Power spectral density of a membrane potential recording, matplotlib sample data membrane.dat.",
        _MPL_LIC,
    ),
}
_NIFTI_RX = re.compile(r"^(nibabel:[^\[]+)\[axis(\d),([0-9.]+)\]$")


def _source_text(source_id: str, nci: Mapping[str, Any]) -> tuple[str, str, str]:
    """(description, licence, origin file) of a pool source."""
    m = _NIFTI_RX.match(source_id)
    if m:
        desc, lic = DEMO_SOURCES[m.group(1)]
        pct = round(float(m.group(3)) * 100)
        return f"Slice along voxel axis {m.group(2)} at {pct}% of {desc}", lic, m.group(1)
    if source_id.startswith("pmcflow:"):
        info = nci[source_id.split(":", 1)[1]]
        # the caption's own sentences, without those pointing at another NCI image
        sentences = re.split(r"(?<=\.)\s+", str(info["description"]).strip())
        desc = " ".join(x for x in sentences if "compar" not in x and "http" not in x)
        return (
            f"{info['title']}: {desc} ({info['source']}, image {info['nci_image_id']})",
            str(info["license"]),
            source_id,
        )
    if source_id in DEMO_SOURCES:
        desc, lic = DEMO_SOURCES[source_id]
        return desc, lic, source_id
    raise BenchmarkError(f"no description recorded for demo source {source_id!r}")


def _demo_crop(im: Image.Image, rng: np.random.Generator) -> Image.Image:
    """A random square crop (45-90 % of the short side) resized to DEMO_SIDE px."""
    w, h = im.size
    side = max(8, int(round(min(w, h) * float(rng.uniform(0.45, 0.9)))))
    x = int(rng.integers(0, w - side + 1))
    y = int(rng.integers(0, h - side + 1))
    crop = im.crop((x, y, x + side, y + side))
    return crop.resize((DEMO_SIDE, DEMO_SIDE), Image.Resampling.BILINEAR).convert("RGB")


def _png_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, **_PNG_KW)
    return buf.getvalue()


def build_demo_benchmarks(out_dir: str | os.PathLike[str], seed: int = 0) -> list[dict[str, Any]]:
    """Build ``demo-modality`` (dir layout, train/ and test/) and ``demo-retrieval`` (Parquet) in ``out_dir``.

    Every image is a deterministic random crop (:func:`pmcflow.seeding.rng_for`) of a real image
    from :func:`pmcflow.synth.sources.builtin_pool`, written as a 128 px PNG with fixed encoder
    settings; the same seed (and package versions) gives byte-identical files.  Writes
    ``benchmarks.yaml`` (config entries, paths relative to ``out_dir``) and ``PROVENANCE.md``
    (each file's source and licence).  Retrieval texts are descriptions of the *source* image
    (what its documentation says it shows), opened by its modality, not of the crop.  Returns one
    summary dict per benchmark.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pmcflow.synth.sources import PANELS_DIR, builtin_pool

    out = Path(out_dir)
    nci = json.loads((PANELS_DIR / "captions.json").read_text(encoding="utf-8"))
    pool = builtin_pool(max_side=512)
    # the synthetic chart panels (chart:<kind>:<k>, pmcflow.synth.charts) have no source description
    usable = {m: [r for r in refs if not r.source_id.startswith("chart:") and pool.load(r) is not None] for m, refs in pool.refs.items()}
    classes = [m for m in DEMO_CLASSES if usable.get(m)]
    if len(classes) < 2:
        raise BenchmarkError(
            f"demo benchmarks need images of two modalities; the builtin pool has {sorted(usable)}"
        )

    provenance: list[tuple[str, str, str, str]] = []  # file, source id, origin, licence
    licences: dict[str, set[str]] = {"demo-modality": set(), "demo-retrieval": set()}

    def write(rel: str, data: bytes) -> None:
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    # (a) demo-modality: class folders under train/ and test/
    mod_root = "demo-modality"
    counts: dict[str, dict[str, int]] = {}
    for m in classes:
        folder, _, _ = DEMO_CLASSES[m]
        refs = usable[m]
        k = 0
        for split, n in DEMO_PER_CLASS.items():
            for _ in range(n):
                ref = refs[k % len(refs)]
                rng = rng_for(seed, "demo-modality", f"{m}/{k}")
                im = pool.load(ref)
                assert im is not None
                rel = f"{mod_root}/{split}/{folder}/{folder}-{k:02d}.png"
                write(rel, _png_bytes(_demo_crop(im, rng)))
                _, lic, origin = _source_text(ref.source_id, nci)
                provenance.append((rel, ref.source_id, ref.origin, lic))
                licences["demo-modality"].add(lic)
                per_split = counts.setdefault(split, {})
                per_split[folder] = per_split.get(folder, 0) + 1
                k += 1

    # (b) demo-retrieval: one crop per usable source image, text = the source's description
    ret_root = "demo-retrieval"
    ids: list[str] = []
    images: list[str] = []
    texts: list[str] = []
    sources: list[str] = []
    modalities: list[str] = []
    lic_col: list[str] = []
    for m in sorted(usable):
        if m not in DEMO_CLASSES:
            continue
        for ref in usable[m]:
            idx = len(ids)
            im = pool.load(ref)
            assert im is not None
            rng = rng_for(seed, "demo-retrieval", ref.source_id)
            rel_img = f"images/{idx:03d}.png"
            write(f"{ret_root}/{rel_img}", _png_bytes(_demo_crop(im, rng)))
            desc, lic, _ = _source_text(ref.source_id, nci)
            ids.append(f"{idx:03d}")
            images.append(rel_img)
            texts.append(f"{DEMO_CLASSES[m][2]}. {desc}")
            sources.append(ref.source_id)
            modalities.append(DEMO_CLASSES[m][0])
            lic_col.append(lic)
            provenance.append((f"{ret_root}/{rel_img}", ref.source_id, ref.origin, lic))
            licences["demo-retrieval"].add(lic)
    table = pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "image": pa.array(images, pa.string()),
            "text": pa.array(texts, pa.string()),
            "source_id": pa.array(sources, pa.string()),
            "modality": pa.array(modalities, pa.string()),
            "licence": pa.array(lic_col, pa.string()),
        }
    )
    (out / ret_root).mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out / ret_root / "pairs.parquet", compression="zstd")

    class_names = {DEMO_CLASSES[m][0]: DEMO_CLASSES[m][1] for m in classes}
    entries = [
        Benchmark(
            name="demo-modality",
            title="Demo: image modality of crops of real images shipped inside installed packages",
            tasks=("zero_shot", "linear_probe"),
            layout="dir",
            modality="mixed",
            class_names=tuple(class_names.items()),
            templates=DEMO_TEMPLATES,
            n=sum(sum(c.values()) for c in counts.values()),
            n_test=sum(counts.get("test", {}).values()),
            metric="f1",
            source="pmcflow build-demo-benchmarks (pmcflow.synth.sources.builtin_pool)",
            access="open",
            licence="per file, see PROVENANCE.md: " + "; ".join(sorted(licences["demo-modality"])),
            notes=(
                f"{DEMO_PER_CLASS['train']} train and {DEMO_PER_CLASS['test']} test crops per class, seed {seed}; "
                "train and test crops can come from the same source image."
            ),
            path=mod_root,
        ),
        Benchmark(
            name="demo-retrieval",
            title="Demo: crops of real images paired with descriptions of their source images",
            tasks=("retrieval",),
            layout="parquet",
            modality="mixed",
            image_column="image",
            text_column="text",
            id_column="id",
            n=len(ids),
            n_test=len(ids),
            metric="recall@k, image_to_text and text_to_image",
            source="pmcflow build-demo-benchmarks (pmcflow.synth.sources.builtin_pool)",
            access="open",
            licence="per file, see PROVENANCE.md: " + "; ".join(sorted(licences["demo-retrieval"])),
            notes=(
                "Texts describe the source image (from its documentation), opened by its modality; "
                f"images are random crops of it (seed {seed})."
            ),
            path=f"{ret_root}/pairs.parquet",
        ),
    ]
    doc = {"benchmarks": [b.to_entry() for b in entries]}
    (out / "benchmarks.yaml").write_text(
        "# Demo benchmarks built by `pmcflow build-demo-benchmarks`; paths are relative to this file.\n"
        + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100),
        encoding="utf-8",
    )
    lines = [
        "# Provenance of the demo benchmarks",
        "",
        f"Built by `pmcflow build-demo-benchmarks --seed {seed}` from real images that ship inside installed",
        "packages (`pmcflow.synth.sources.builtin_pool`).  Each image is a random square crop of its source,",
        f"resized to {DEMO_SIDE} px.  The texts of `demo-retrieval` describe the source image (from its own",
        "documentation), not the crop.  Each file keeps the licence of its source.",
        "",
        "| file | source | origin | licence |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{f}` | `{s}` | {o} | {lic} |" for f, s, o, lic in provenance]
    (out / "PROVENANCE.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [
        {
            "name": "demo-modality",
            "path": str(out / mod_root),
            "layout": "dir",
            "tasks": ["zero_shot", "linear_probe"],
            "classes": list(class_names),
            "n": entries[0].n,
            "per_split": counts,
        },
        {
            "name": "demo-retrieval",
            "path": str(out / ret_root / "pairs.parquet"),
            "layout": "parquet",
            "tasks": ["retrieval"],
            "n": len(ids),
            "modalities": dict(sorted(Counter(modalities).items())),
        },
    ]


# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------


def list_benchmarks(*, as_json: bool = False, file: Any = None) -> None:
    """Print the paper's benchmarks as a table (or JSON)."""
    fh = file or sys.stdout
    bs = list(paper_benchmarks().values())
    if as_json:
        fh.write(json.dumps([describe(b) for b in bs], ensure_ascii=False, indent=1) + "\n")
        return
    rows = [("name", "paper name", "modality", "tasks", "layout", "split", "n", "access", "licence")]
    for b in bs:
        lic = " ".join((b.licence or "").split())
        rows.append(
            (b.name, b.paper_name or "", b.modality, ",".join(b.tasks), b.layout, b.split, "" if b.n is None else str(b.n),
             b.access or "", lic if len(lic) <= 40 else lic[:37] + "...")
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, r in enumerate(rows):
        fh.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
        if j == 0:
            fh.write("  ".join("-" * w for w in widths) + "\n")
    tasks = benchmark_tasks(bs)
    c = Counter(t["task"] for t in tasks)
    fh.write(
        f"\n{c['retrieval']} retrieval tasks ({sum('retrieval' in b.tasks for b in bs)} datasets x 2 directions), "
        f"{c['zero_shot']} zero-shot and {c['linear_probe']} linear-probe tasks.\n"
    )


def cli_list(argv: Sequence[str] | None = None) -> int:
    """``pmcflow benchmarks [--json]``."""
    ap = argparse.ArgumentParser(
        prog="pmcflow benchmarks", description="List the paper's evaluation benchmarks."
    )
    ap.add_argument("--json", action="store_true", help="print the definitions as JSON")
    args = ap.parse_args(argv)
    list_benchmarks(as_json=args.json)
    return 0


def cli_build(argv: Sequence[str] | None = None) -> int:
    """``pmcflow build-demo-benchmarks --out DIR [--seed N]``: one JSON line on stdout."""
    ap = argparse.ArgumentParser(
        prog="pmcflow build-demo-benchmarks",
        description="Build small real demo benchmarks from images shipped inside installed packages.",
    )
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    built = build_demo_benchmarks(args.out, seed=args.seed)
    summary = {
        "out": str(Path(args.out)),
        "seed": args.seed,
        "config": str(Path(args.out) / "benchmarks.yaml"),
        "benchmarks": [
            {k: v for k, v in b.items() if k in ("name", "layout", "tasks", "n", "classes")} for b in built
        ],
        "seconds": round(time.perf_counter() - t0, 2),
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0


def cli_fetch(argv: Sequence[str] | None = None) -> int:
    """``pmcflow fetch-benchmarks NAME... --dest DIR``: open downloads with published checksums only."""
    ap = argparse.ArgumentParser(
        prog="pmcflow fetch-benchmarks",
        description="Download openly available benchmark files and verify them.",
    )
    ap.add_argument("names", nargs="+", help="paper benchmark names (see `pmcflow benchmarks`)")
    ap.add_argument("--dest", required=True)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)
    rows = fetch_benchmarks(
        args.names, args.dest, timeout=args.timeout, log=lambda m: print(m, file=sys.stderr)
    )
    for r in rows:
        print(json.dumps(r))
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    """``build-demo-benchmarks --out DIR [--seed N]`` (also the default when no subcommand is given),
    ``benchmarks [--json]`` or ``fetch-benchmarks NAME... --dest DIR``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0].startswith("-") and args[0] not in ("-h", "--help"):
        return cli_build(args)
    commands: dict[str, Callable[[Sequence[str]], int]] = {
        "list": cli_list,
        "benchmarks": cli_list,
        "build-demo": cli_build,
        "build-demo-benchmarks": cli_build,
        "fetch": cli_fetch,
        "fetch-benchmarks": cli_fetch,
    }
    if not args or args[0] not in commands:
        print(
            "usage: benchmarks {build-demo-benchmarks --out DIR [--seed N] | benchmarks [--json] | fetch-benchmarks NAME... --dest DIR}",
            file=sys.stderr,
        )
        return 2
    return commands[args[0]](args[1:])


if __name__ == "__main__":
    raise SystemExit(cli())
