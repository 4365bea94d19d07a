"""The registry of real images: where each comes from, its class, licence and *role*.

One file, ``pmcflow/data/images/registry.yaml``, lists every real single-panel image the project
uses (an installed package's data file, a file shipped in ``pmcflow/data``, a NIfTI slice, a
molecule drawn from its SMILES) and fixes what it may be used for:

* ``render_source`` -- composed into synthetic compound figures (:func:`pmcflow.synth.sources.builtin_pool`
  takes exactly these; the demo corpus and the demo benchmarks are built from them);
* ``classifier_train`` / ``classifier_test`` -- training / held-out images of the modality
  classifier (:mod:`pmcflow.filter.modality`);
* ``benchmark`` -- reserved for held-out evaluation sets of other models.

Each entry has exactly one role, and a *group* (the physical image or volume it derives from,
default: its id).  :func:`validate` refuses an unknown role, class or loader, a duplicate id, an
entry with two roles, and a group that appears both as a render source and as a classifier image or
on both sides of the classifier split -- except regions of one image declared disjoint
(``region``), the only way a class with a single image can be split.  So no held-out number is ever
measured on an image a model was trained on.  :func:`policy_roles` recomputes the classifier split
from the registry's own rule (see the file's header); a test checks the file follows it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from pmcflow.seeding import seed_digest

REGISTRY_PATH = Path(__file__).resolve().parent / "data" / "images" / "registry.yaml"
ROLES: tuple[str, ...] = ("render_source", "classifier_train", "classifier_test", "benchmark")
CLASSIFIER_ROLES: tuple[str, ...] = ("classifier_train", "classifier_test")
CLASSES: tuple[str, ...] = ("histopathology", "microscopy", "radiology", "retina", "plot", "other")
LOADERS: tuple[str, ...] = ("file", "dicom", "nifti_slice", "mpl_mri", "smiles")
# A human name for a missing package (the messages builtin_pool has always recorded).
PACKAGE_LABELS = {"skimage": "scikit-image", "sklearn": "scikit-learn", "data_store": "pydicom-data"}
HOLDOUT_FRACTION = 0.25  # the policy's share of a class's groups held out (at least one, never all)
REGION_CUT = 0.7  # a class with one image: x < 0.7 trains, x >= 0.7 is held out
SPLIT_STAGE = "imageregistry.split"
_KEYS = {
    "id",
    "class",
    "role",
    "loader",
    "package",
    "path",
    "params",
    "region",
    "group",
    "kind",
    "licence",
    "origin",
    "provenance",
}
_REQUIRED = ("id", "class", "role", "loader", "licence", "provenance")


class RegistryError(ValueError):
    """The registry is invalid; ``problems`` lists every problem found."""

    def __init__(self, origin: str, problems: Sequence[str]) -> None:
        self.origin = origin
        self.problems = list(problems)
        super().__init__(f"{origin}: " + "; ".join(self.problems))


class Unavailable(RuntimeError):
    """An entry's package or file is not installed here (``reason`` says which)."""


@dataclass(frozen=True)
class RegistryEntry:
    """One real image (or one derived item: a slice, a region) and its single role."""

    id: str
    cls: str
    role: str
    loader: str
    licence: str
    provenance: str
    package: str | None = None
    path: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    region: tuple[float, float, float, float] | None = None  # x0, y0, x1, y1 as fractions
    group: str = ""
    kind: str | None = None
    origin: str = ""

    def file(self) -> Path:
        """The file this entry reads; raises :class:`Unavailable` when its package or file is missing."""
        from pmcflow.synth.sources import _package_dir

        if self.package is None or self.path is None:
            raise Unavailable(f"{self.id}: no file (loader {self.loader})")
        base = _package_dir(self.package)
        if base is None:
            raise Unavailable(f"{PACKAGE_LABELS.get(self.package, self.package)} not installed")
        p = base / self.path
        if not p.exists():
            raise Unavailable(f"{self.id} ({p} missing)")
        return p


@dataclass(frozen=True)
class ImageRegistry:
    entries: tuple[RegistryEntry, ...]
    origin: str = ""
    sha256: str = ""  # of the entries' content (content_sha256), set by load_registry

    def get(self, entry_id: str) -> RegistryEntry:
        for e in self.entries:
            if e.id == entry_id:
                return e
        raise KeyError(entry_id)

    def by_role(self, *roles: str) -> list[RegistryEntry]:
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown role(s) {unknown} (use {', '.join(ROLES)})")
        return [e for e in self.entries if e.role in roles]

    def ids(self, *roles: str) -> list[str]:
        return [e.id for e in (self.by_role(*roles) if roles else self.entries)]

    def groups(self, *roles: str) -> set[str]:
        return {e.group for e in self.by_role(*roles)}


# ----------------------------------------------------------------------------------------------
# parsing and validation
# ----------------------------------------------------------------------------------------------


def _region(value: Any) -> tuple[float, float, float, float] | None:
    if value is None:
        return None
    vals = tuple(float(v) for v in value)
    if len(vals) != 4:
        raise ValueError("region must be [x0, y0, x1, y1]")
    x0, y0, x1, y1 = vals
    if not (0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0):
        raise ValueError(f"region {list(vals)} is not inside [0, 1] with x0 < x1, y0 < y1")
    return (x0, y0, x1, y1)


def _overlap(a: tuple[float, ...] | None, b: tuple[float, ...] | None) -> bool:
    if a is None or b is None:
        return True  # a whole image overlaps everything taken from it
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def parse_registry(data: Any, origin: str = "<registry>", sha256: str = "") -> ImageRegistry:
    """Build and validate a registry from its YAML data; raises :class:`RegistryError`."""
    problems: list[str] = []
    if not isinstance(data, Mapping) or not isinstance(data.get("images"), list):
        raise RegistryError(origin, ["the file must be a mapping with an 'images' list"])
    entries: list[RegistryEntry] = []
    for k, raw in enumerate(data["images"]):
        where = f"images[{k}]"
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: not a mapping")
            continue
        where = f"images[{k}] ({raw.get('id')!r})"
        unknown = sorted(set(raw) - _KEYS)
        if unknown:
            problems.append(f"{where}: unknown keys {unknown}")
        missing = [key for key in _REQUIRED if not raw.get(key)]
        if missing:
            problems.append(f"{where}: missing {missing}")
            continue
        role = raw["role"]
        if not isinstance(role, str):
            problems.append(
                f"{where}: has two roles {list(role) if isinstance(role, list) else role!r} (one role per image)"
            )
            continue
        if role not in ROLES:
            problems.append(f"{where}: unknown role {role!r} (use {', '.join(ROLES)})")
        if raw["class"] not in CLASSES:
            problems.append(f"{where}: unknown class {raw['class']!r} (use {', '.join(CLASSES)})")
        if raw["loader"] not in LOADERS:
            problems.append(f"{where}: unknown loader {raw['loader']!r} (use {', '.join(LOADERS)})")
        if raw["loader"] == "smiles":
            if not (raw.get("params") or {}).get("smiles"):
                problems.append(f"{where}: a smiles entry needs params.smiles")
        elif not (raw.get("package") and raw.get("path")):
            problems.append(f"{where}: needs package and path")
        try:
            region = _region(raw.get("region"))
        except (TypeError, ValueError) as e:
            problems.append(f"{where}: {e}")
            region = None
        package, path = raw.get("package"), raw.get("path")
        entries.append(
            RegistryEntry(
                id=str(raw["id"]),
                cls=str(raw["class"]),
                role=str(role),
                loader=str(raw["loader"]),
                licence=str(raw["licence"]),
                provenance=" ".join(str(raw["provenance"]).split()),
                package=str(package) if package else None,
                path=str(path) if path else None,
                params=dict(raw.get("params") or {}),
                region=region,
                group=str(raw.get("group") or raw["id"]),
                kind=str(raw["kind"]) if raw.get("kind") else None,
                origin=str(
                    raw.get("origin") or (f"{package} {path}" if package else f"{raw['loader']} {raw['id']}")
                ),
            )
        )
    problems += validate(entries)
    if problems:
        raise RegistryError(origin, problems)
    return ImageRegistry(tuple(entries), origin, sha256)


def validate(entries: Sequence[RegistryEntry]) -> list[str]:
    """Role exclusivity: ids unique; a group never both rendered and classified, never on both
    sides of the classifier split unless its items are disjoint regions; one class per group."""
    problems: list[str] = []
    seen: dict[str, RegistryEntry] = {}
    for e in entries:
        if e.id in seen:
            prev = seen[e.id]
            if prev.role != e.role:
                problems.append(f"{e.id!r} has two roles ({prev.role}, {e.role})")
            else:
                problems.append(f"duplicate id {e.id!r}")
        seen[e.id] = e
    by_group: dict[str, list[RegistryEntry]] = {}
    for e in entries:
        by_group.setdefault(e.group, []).append(e)
    for g, items in by_group.items():
        roles = {e.role for e in items}
        classes = {e.cls for e in items}
        if len(classes) > 1:
            problems.append(f"group {g!r} has several classes {sorted(classes)}")
        if "render_source" in roles and roles & set(CLASSIFIER_ROLES):
            problems.append(f"group {g!r} is both a render source and a classifier image ({sorted(roles)})")
        if "benchmark" in roles and len(roles) > 1:
            problems.append(f"group {g!r} is a benchmark image and also {sorted(roles - {'benchmark'})}")
        train = [e for e in items if e.role == "classifier_train"]
        test = [e for e in items if e.role == "classifier_test"]
        for a in train:
            for b in test:
                if _overlap(a.region, b.region):
                    problems.append(
                        f"group {g!r}: {a.id!r} (classifier_train) and {b.id!r} (classifier_test) "
                        "overlap: train and test images must differ (or be disjoint regions)"
                    )
    return problems


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> ImageRegistry:
    del mtime_ns  # part of the cache key only
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    reg = parse_registry(data, origin=path)
    return ImageRegistry(reg.entries, reg.origin, content_sha256(reg.entries))


def content_sha256(entries: Sequence[RegistryEntry]) -> str:
    """SHA-256 of the entries' content (not of the file: comments and layout do not count)."""
    rows = [
        {
            k: (list(v) if isinstance(v, tuple) else dict(v) if isinstance(v, Mapping) else v)
            for k, v in vars(e).items()
        }
        for e in entries
    ]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def load_registry(path: str | os.PathLike[str] | None = None) -> ImageRegistry:
    """The registry at ``path`` (default: the shipped one), parsed, validated and cached."""
    p = Path(path) if path is not None else REGISTRY_PATH
    return _load_cached(str(p.resolve()), p.stat().st_mtime_ns)


# ----------------------------------------------------------------------------------------------
# the split policy
# ----------------------------------------------------------------------------------------------


def policy_roles(registry: ImageRegistry) -> dict[str, str]:
    """The classifier role each non-render entry gets from the registry's own rule.

    Per class and ``kind`` (so each sub-type -- CT, ultrasound, photographs, chemical structures --
    is represented on both sides where it can be), the groups are ordered by
    ``sha256("0 | imageregistry.split | <group>")`` and the first ``max(1, ceil(0.25 n))`` (never
    all; none of a kind with one group) are held out.  A class with a single group is split by
    region: entries whose region ends at ``x <= 0.7`` train, the others are held out.
    """
    out: dict[str, str] = {}
    members = registry.by_role(*CLASSIFIER_ROLES)
    cls_groups: dict[str, set[str]] = {}
    strata: dict[tuple[str, str], list[str]] = {}
    for e in members:
        cls_groups.setdefault(e.cls, set()).add(e.group)
        groups = strata.setdefault((e.cls, e.kind or ""), [])
        if e.group not in groups:
            groups.append(e.group)
    held: set[str] = set()
    for (cls, _kind), groups in strata.items():
        if len(cls_groups[cls]) == 1 or len(groups) == 1:
            continue
        order = sorted(groups, key=lambda g: seed_digest(0, SPLIT_STAGE, g))
        held.update(order[: min(len(order) - 1, max(1, math.ceil(HOLDOUT_FRACTION * len(order))))])
    for e in members:
        if len(cls_groups[e.cls]) == 1:
            out[e.id] = (
                "classifier_train"
                if e.region is not None and e.region[2] <= REGION_CUT
                else "classifier_test"
            )
        else:
            out[e.id] = "classifier_test" if e.group in held else "classifier_train"
    return out


# ----------------------------------------------------------------------------------------------
# loading images
# ----------------------------------------------------------------------------------------------


def _smiles_loader(smiles: str, width: int, height: int) -> Callable[[], Image.Image]:
    def load() -> Image.Image:
        from rdkit import Chem
        from rdkit.Chem import Draw

        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            raise ValueError(f"RDKit cannot parse SMILES {smiles!r}")
        return Draw.MolToImage(mol, size=(width, height)).convert("RGB")

    return load


def _crop_region(
    load: Callable[[], Image.Image], region: tuple[float, float, float, float]
) -> Callable[[], Image.Image]:
    def crop() -> Image.Image:
        im = load()
        w, h = im.size
        x0, y0, x1, y1 = region
        return im.crop((round(x0 * w), round(y0 * h), round(x1 * w), round(y1 * h)))

    return crop


def loader_for(entry: RegistryEntry) -> Callable[[], Image.Image]:
    """A zero-argument loader of ``entry``'s image; raises :class:`Unavailable` when it is not installed."""
    from pmcflow.synth import sources as S

    p = entry.params
    if entry.loader == "smiles":
        if S._package_dir("rdkit") is None:
            raise Unavailable("rdkit not installed")
        load = _smiles_loader(str(p["smiles"]), int(p.get("width", 480)), int(p.get("height", 360)))
    else:
        path = entry.file()
        if entry.loader == "file":
            load = S._file_loader(path, S.DEFAULT_MAX_PIXELS)
        elif entry.loader == "dicom":
            load = S._dicom_loader(path)
        elif entry.loader == "nifti_slice":
            load = S._nifti_slice_loader(path, int(p["axis"]), float(p["frac"]), int(p.get("volume", 0)))
        elif entry.loader == "mpl_mri":
            load = S._mpl_mri_loader(path)
        else:  # validate() refuses other loaders
            raise ValueError(f"{entry.id}: unknown loader {entry.loader!r}")
    return _crop_region(load, entry.region) if entry.region is not None else load


def source_refs(
    entries: Iterable[RegistryEntry],
) -> tuple[dict[str, list[Any]], list[str]]:
    """``SourceRef`` lists by class for ``entries`` and the reasons of the ones not installed
    (one line per missing package, one per missing file)."""
    from pmcflow.synth.sources import SourceRef

    refs: dict[str, list[Any]] = {}
    unavailable: list[str] = []
    for e in entries:
        try:
            load = loader_for(e)
        except Unavailable as u:
            if str(u) not in unavailable:
                unavailable.append(str(u))
            continue
        refs.setdefault(e.cls, []).append(SourceRef(e.id, e.cls, e.origin, load))
    return refs, unavailable


def pool_for_roles(
    *roles: str,
    registry: ImageRegistry | None = None,
    max_side: int = 1024,
    cache_size: int = 512,
) -> Any:
    """A :class:`~pmcflow.synth.sources.SourcePool` of the registry's entries with ``roles``."""
    from pmcflow.synth.sources import SourcePool

    reg = registry or load_registry()
    refs, unavailable = source_refs(reg.by_role(*roles))
    pool = SourcePool(refs, max_side=max_side, cache_size=cache_size)
    pool.unavailable = unavailable
    return pool


def describe(registry: ImageRegistry | None = None) -> dict[str, dict[str, int]]:
    """Entry counts by role and class (for docs and records)."""
    reg = registry or load_registry()
    out: dict[str, dict[str, int]] = {}
    for e in reg.entries:
        out.setdefault(e.role, {}).setdefault(e.cls, 0)
        out[e.role][e.cls] += 1
    return {r: dict(sorted(c.items())) for r, c in sorted(out.items())}
