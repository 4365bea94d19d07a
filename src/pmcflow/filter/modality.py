"""Image modality classifier for subfigure crops: training, checkpoints, batched prediction.

The classifier is a timm backbone built from config (``mobilenetv3_small_050`` by default,
``pretrained=False``: nothing is downloaded) with one output per modality class.  It is trained
from scratch on labelled single-panel images.  By default (``filter.modality.train.sources``
empty) these are the image registry's (:mod:`pmcflow.imageregistry`) ``classifier_train``
entries, held out its ``classifier_test`` entries -- never the ``render_source`` images the
synthetic figures are made of -- with the classes histopathology, microscopy, radiology, retina,
``other`` (photographs, diagrams, chemical structures, text, textures: what a medical filter must
drop) and ``plot`` (the plot panels :func:`pmcflow.synth.sources.builtin_pool` renders from real
data, split by plot kind).  In production ``filter.modality.train.sources`` (``{modality:
[directory | .parquet, ...]}``, read with :func:`pmcflow.synth.sources.pool_from_config`; ROCO,
SICAP, HAM10000, ...) gives the classes and images, split by source image.

Training examples are random crops of the source images with the degradations panels suffer in
compound figures (rescaling, JPEG recompression, white margins, a printed panel letter, grey
conversion, contrast changes).  The held-out set is split **by source image**: crops of one source
never appear on both sides.  A class with a single source image cannot be split that way; its
image is split spatially instead (the left 70 % for training, the right 30 % held out: registry
regions, or ``spatial`` for a ``sources`` pool), and the metrics say so (``split`` per class).

:func:`load_backend` returns what the filter stage classifies with: this trained classifier
(``filter.modality.backend: timm``) or the zero-shot open_clip one (``openclip``,
:mod:`pmcflow.filter.zeroshot`); both give ``(label, score)`` per crop and a ``name`` recorded as
``modality_backend``.

Everything is deterministic: every random choice derives from ``(seed, "filter.modality", item)``
(:func:`pmcflow.seeding.rng_for`), the data order from a seeded ``torch.Generator``, and
training runs on the CPU with a fixed number of threads.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from pmcflow import tables as T
from pmcflow.seeding import rng_for
from pmcflow.settings import Settings, thaw
from pmcflow.synth.sources import SourcePool, SourceRef, builtin_pool, pool_from_config

if TYPE_CHECKING:
    from pmcflow.filter.checks import FilterSettings, ModalitySettings
    from pmcflow.filter.zeroshot import ZeroShotClassifier

log = logging.getLogger(__name__)

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "data" / "modality"
SHIPPED_CHECKPOINT = SHIPPED_DIR / "modality.pt"
CHECKPOINT_FORMAT = "pmcflow-modality/1"
STAGE = "filter.modality"
MEAN = (0.5, 0.5, 0.5)
STD = (0.25, 0.25, 0.25)
PLOT_LIKE = frozenset({"plot", "chart", "diagram", "plots"})


@dataclass(frozen=True)
class TrainSettings(Settings):
    """``filter.modality.train``: `pmcflow train-modality`'s settings (defaults, ranges and meanings
    in the config schema, the one place they live)."""

    SECTION: ClassVar[tuple[str, ...]] = ("filter", "modality", "train")

    backbone: str
    backbone_kwargs: Mapping[str, Any]
    input_size: int
    train_crops_per_class: int
    eval_crops_per_class: int
    holdout_fraction: float
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    label_smoothing: float
    threads: int
    seed: int | None  # None -> the global config seed (:meth:`for_run`)
    sources: Mapping[str, Any]  # {modality: [directory | .parquet, ...]}; empty -> the image registry
    include_plots: bool
    registry: str | None  # an image registry file; None -> pmcflow/data/images/registry.yaml

    @classmethod
    def for_run(cls, cfg: Mapping[str, Any]) -> TrainSettings:
        """The section of a whole config, its ``seed`` resolved (null: the config's global seed)."""
        s = cls.from_config(cfg)
        return s if s.seed is not None else s.replace(seed=int(cfg.get("seed", 0)))


# ----------------------------------------------------------------------------------------------
# model and checkpoint
# ----------------------------------------------------------------------------------------------


def build_model(
    backbone: str, num_classes: int, backbone_kwargs: Mapping[str, Any] | None = None
) -> torch.nn.Module:
    """A timm backbone with ``num_classes`` outputs, never with downloaded weights."""
    import timm

    return timm.create_model(
        backbone, pretrained=False, num_classes=num_classes, **dict(backbone_kwargs or {})
    )


@dataclass
class ModalityModel:
    """A loaded classifier: the network, its classes and its preprocessing."""

    model: torch.nn.Module
    classes: list[str]
    input_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    sha256: str
    name: str

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        return _to_tensor(image, self.input_size, self.mean, self.std)


def _to_tensor(image: Image.Image, size: int, mean: Sequence[float], std: Sequence[float]) -> torch.Tensor:
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    if rgb.size != (size, size):
        rgb = rgb.resize((size, size), Image.Resampling.BILINEAR, reducing_gap=2.0)
    arr = np.asarray(rgb, dtype=np.float32) / 255.0
    arr = (arr - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def resolve_checkpoint(checkpoint: str | os.PathLike[str] | None) -> Path:
    """``None``/``"shipped"`` -> the checkpoint in ``pmcflow/data/modality``; else the path."""
    if checkpoint is None or str(checkpoint) in {"", "shipped", "default"}:
        return SHIPPED_CHECKPOINT
    return Path(checkpoint)


@functools.lru_cache(maxsize=4)
def _load_cached(path: str, mtime_ns: int) -> ModalityModel:
    del mtime_ns  # part of the cache key only: a rewritten checkpoint is reloaded
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if blob.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint (format={blob.get('format')!r})")
    classes = list(blob["classes"])
    model = build_model(blob["backbone"], len(classes), blob.get("backbone_kwargs"))
    state = {k: (v.float() if v.is_floating_point() else v) for k, v in blob["state_dict"].items()}
    model.load_state_dict(state)
    model.eval()
    return ModalityModel(
        model=model,
        classes=classes,
        input_size=int(blob["input_size"]),
        mean=tuple(blob.get("mean", MEAN)),  # type: ignore[arg-type]
        std=tuple(blob.get("std", STD)),  # type: ignore[arg-type]
        sha256=T.file_sha256(path),
        name=f"{blob['backbone']}@{Path(path).name}",
    )


def load_modality_model(checkpoint: str | os.PathLike[str] | ModalityModel | None = None) -> ModalityModel:
    """Load (and cache) a checkpoint written by :func:`train_modality`."""
    if isinstance(checkpoint, ModalityModel):
        return checkpoint
    path = resolve_checkpoint(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(
            f"modality checkpoint {path} not found (train one with 'pmcflow train-modality')"
        )
    return _load_cached(str(path.resolve()), path.stat().st_mtime_ns)


@torch.inference_mode()
def predict_modality(
    inputs: Sequence[str | os.PathLike[str] | Image.Image],
    checkpoint: str | os.PathLike[str] | ModalityModel | None = None,
    *,
    batch_size: int = 64,
) -> list[tuple[str, float]]:
    """``(label, softmax score)`` for each image or image path, in input order, batched.

    Paths are read with :func:`pmcflow.detect.images.load_image` (which raises
    :class:`~pmcflow.detect.images.ImageError` for an unusable file).
    """
    from pmcflow.detect.images import load_image

    mm = load_modality_model(checkpoint)
    out: list[tuple[str, float]] = []
    for start in range(0, len(inputs), max(1, batch_size)):
        batch = inputs[start : start + batch_size]
        tensors = []
        for item in batch:
            im = item if isinstance(item, Image.Image) else load_image(item)
            tensors.append(mm.preprocess(im))
        probs = torch.softmax(mm.model(torch.stack(tensors)).float(), dim=1)
        score, idx = probs.max(dim=1)
        out.extend((mm.classes[int(i)], round(float(s), 6)) for i, s in zip(idx, score, strict=True))
    return out


@dataclass
class TimmBackend:
    """The trained classifier as a filter backend."""

    model: ModalityModel

    @property
    def name(self) -> str:
        """``timm:<backbone>@<file name>#<first 12 hex digits of its sha256>``."""
        return f"timm:{self.model.name}#{self.model.sha256[:12]}"

    @property
    def classes(self) -> list[str]:
        return list(self.model.classes)

    def predict(
        self, inputs: Sequence[str | os.PathLike[str] | Image.Image], batch_size: int = 64
    ) -> list[tuple[str, float]]:
        return predict_modality(inputs, self.model, batch_size=batch_size)


def load_backend(settings: ModalitySettings) -> TimmBackend | ZeroShotClassifier:
    """The classifier ``filter.modality`` configures: ``timm`` (``checkpoint``) or ``openclip``."""
    if settings.backend == "openclip":
        from pmcflow.filter.zeroshot import load_zeroshot

        return load_zeroshot(settings.openclip)
    if settings.backend != "timm":
        raise ValueError(f"filter.modality.backend must be 'timm' or 'openclip', not {settings.backend!r}")
    return TimmBackend(load_modality_model(settings.checkpoint))


# ----------------------------------------------------------------------------------------------
# training data: crops of source images, split by source
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceSplit:
    """Which sources (or which part of a lone source) train and which are held out."""

    modality: str
    train: tuple[SourceRef, ...]
    heldout: tuple[SourceRef, ...]
    spatial: bool  # one source only: x in [0, 0.7) trains, [0.7, 1] is held out
    mode: str = ""  # for the metrics; "" -> "spatial" / "by-source"

    @property
    def mode_name(self) -> str:
        return self.mode or ("spatial" if self.spatial else "by-source")


SPATIAL_CUT = 0.7


def split_sources(pool: SourcePool, holdout_fraction: float, seed: int) -> list[SourceSplit]:
    """Per class, hold out ``ceil(fraction * n)`` usable sources (at least one, never all)."""
    splits = []
    for m in pool.modalities:
        refs = [r for r in pool.refs[m] if pool.load(r) is not None]
        if not refs:
            continue
        if len(refs) == 1:
            splits.append(SourceSplit(m, tuple(refs), tuple(refs), spatial=True))
            continue
        rng = rng_for(seed, STAGE + ".split", m)
        order = [refs[int(k)] for k in rng.permutation(len(refs))]
        n_hold = min(len(refs) - 1, max(1, int(np.ceil(holdout_fraction * len(refs)))))
        held = tuple(sorted(order[:n_hold], key=lambda r: r.source_id))
        train = tuple(sorted(order[n_hold:], key=lambda r: r.source_id))
        splits.append(SourceSplit(m, train, held, spatial=False))
    return splits


def _letter_font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=14)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def augment_crop(
    image: Image.Image,
    rng: np.random.Generator,
    size: int,
    *,
    x_range: tuple[float, float] = (0.0, 1.0),
    rotate: bool = True,
) -> Image.Image:
    """One random training view of ``image`` restricted to the columns ``x_range``."""
    w, h = image.size
    x0, x1 = round(x_range[0] * w), round(x_range[1] * w)
    rw = max(8, x1 - x0)
    area = rw * h * float(rng.uniform(0.2, 1.0))
    aspect = float(np.exp(rng.uniform(np.log(0.6), np.log(1.66))))
    cw = int(min(rw, max(8, round(np.sqrt(area * aspect)))))
    ch = int(min(h, max(8, round(np.sqrt(area / aspect)))))
    cx = x0 + int(rng.integers(0, rw - cw + 1))
    cy = int(rng.integers(0, h - ch + 1))
    im = image.crop((cx, cy, cx + cw, cy + ch))
    if rng.random() < 0.3:  # seen small in the figure: lose detail
        f = float(rng.uniform(0.25, 0.7))
        small = (max(8, round(im.width * f)), max(8, round(im.height * f)))
        im = im.resize(small, Image.Resampling.BILINEAR)
    im = im.resize((size, size), Image.Resampling.BILINEAR, reducing_gap=2.0)
    if rng.random() < 0.5:
        im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if rotate and rng.random() < 0.5:
        im = im.transpose(
            [Image.Transpose.ROTATE_90, Image.Transpose.ROTATE_180, Image.Transpose.ROTATE_270][
                int(rng.integers(3))
            ]
        )
    arr = np.asarray(im, dtype=np.float32)
    gain = float(rng.uniform(0.75, 1.25))
    bias = float(rng.uniform(-25, 25))
    arr = np.clip((arr - 128.0) * gain + 128.0 + bias, 0, 255)
    im = Image.fromarray(arr.astype(np.uint8), "RGB")
    if rng.random() < 0.15:
        im = im.convert("L").convert("RGB")
    if rng.random() < 0.3:  # a white margin on some sides (loose panel boxes)
        pad = [int(rng.integers(0, size // 6)) if rng.random() < 0.5 else 0 for _ in range(4)]
        canvas = Image.new("RGB", (size + pad[0] + pad[2], size + pad[1] + pad[3]), (255, 255, 255))
        canvas.paste(im, (pad[0], pad[1]))
        im = canvas.resize((size, size), Image.Resampling.BILINEAR)
    if rng.random() < 0.3:  # a printed panel letter
        draw = ImageDraw.Draw(im)
        letter = "ABCDEFGHabcdefgh"[int(rng.integers(16))]
        x, y = int(rng.integers(1, size // 4)), int(rng.integers(1, size // 4))
        colour = (255, 255, 255) if rng.random() < 0.5 else (0, 0, 0)
        draw.text((x, y), letter, fill=colour, font=_letter_font())
    if rng.random() < 0.5:
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=int(rng.integers(35, 95)))
        buf.seek(0)
        im = Image.open(buf).convert("RGB")
    return im


def make_crops(
    pool: SourcePool,
    splits: Sequence[SourceSplit],
    *,
    heldout: bool,
    per_class: int,
    size: int,
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``per_class`` crops per class (round-robin over its sources) as uint8 NCHW + labels."""
    images: list[np.ndarray] = []
    labels: list[int] = []
    side = "heldout" if heldout else "train"
    for ci, sp in enumerate(splits):
        refs = sp.heldout if heldout else sp.train
        if not refs:  # a class without held-out images: no crops on that side
            continue
        x_range = ((SPATIAL_CUT, 1.0) if heldout else (0.0, SPATIAL_CUT)) if sp.spatial else (0.0, 1.0)
        for k in range(per_class):
            ref = refs[k % len(refs)]
            src = pool.load(ref)
            assert src is not None  # split_sources kept usable sources only
            rng = rng_for(seed, f"{STAGE}.{side}", f"{ref.source_id}\x1f{k}")
            im = augment_crop(src, rng, size, x_range=x_range, rotate=sp.modality not in PLOT_LIKE)
            images.append(np.asarray(im, dtype=np.uint8).transpose(2, 0, 1))
            labels.append(ci)
    x = torch.from_numpy(np.stack(images)) if images else torch.zeros((0, 3, size, size), dtype=torch.uint8)
    return x, torch.tensor(labels, dtype=torch.long)


def _normalise(x: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (x.float() / 255.0 - mean) / std


@torch.inference_mode()
def _evaluate(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    classes: Sequence[str],
    sources: Sequence[str] | None = None,
) -> dict[str, Any]:
    model.eval()
    preds = []
    for s in range(0, len(x), 128):
        preds.append(model(_normalise(x[s : s + 128])).argmax(1))
    pred = torch.cat(preds) if preds else torch.zeros(0, dtype=torch.long)
    out = confusion_metrics(y.tolist(), pred.tolist(), classes)
    if sources is not None:  # accuracy over the crops of each held-out image
        hits: dict[str, list[int]] = {}
        for sid, t, p in zip(sources, y.tolist(), pred.tolist(), strict=True):
            hits.setdefault(sid, []).append(int(t == p))
        out["per_source"] = {sid: round(float(np.mean(h)), 4) for sid, h in sorted(hits.items())}
    return out


def confusion_metrics(y: Sequence[int], pred: Sequence[int], classes: Sequence[str]) -> dict[str, Any]:
    """Accuracy, per-class recall (their mean: ``macro_accuracy``, over the classes present), the
    confusion matrix (rows: truth) and the chance line ``1 / len(classes)``."""
    conf = np.zeros((len(classes), len(classes)), dtype=np.int64)
    for t, p in zip(y, pred, strict=True):
        conf[t, p] += 1
    per_class = {
        c: (float(conf[i, i] / conf[i].sum()) if conf[i].sum() else None) for i, c in enumerate(classes)
    }
    valid = [v for v in per_class.values() if v is not None]
    return {
        "accuracy": float(np.trace(conf) / max(1, conf.sum())),
        "macro_accuracy": float(np.mean(valid)) if valid else None,
        "per_class": per_class,
        "confusion": {"classes": list(classes), "matrix": conf.tolist()},
        "n": int(conf.sum()),
        "chance": 1.0 / len(classes) if classes else None,
    }


def evaluate_on_panels(
    backend: TimmBackend | ZeroShotClassifier,
    set_dir: str | os.PathLike[str],
    labels_file: str = "modality.json",
    *,
    settings: FilterSettings | None = None,
) -> dict[str, Any]:
    """Score ``backend`` on real panels: the boxes of a COCO set (``set_dir/annotations.json``,
    image paths relative to ``set_dir``) whose modality was labelled by hand (``set_dir/labels_file``:
    ``{"labels": {annotation id: {"modality": class}}}``; ``demo/real-figures``).

    Each box is cropped from its figure and classified as the filter classifies a subfigure crop.
    Besides :func:`confusion_metrics`, the record holds the majority baseline (always answering the
    most frequent true class), the counts per true class and the predictions per annotation.  A
    labelled class the backend does not have counts as wrong; an unlabelled box is an error.
    With ``settings`` (``filter``), ``decision`` compares the filter's verdict on the prediction
    (:func:`pmcflow.filter.checks.check_modality`) with its verdict on the true class: the share of
    panels that should go that are dropped, and of those that should stay that are kept.
    """
    from pmcflow.detect.images import load_image

    root = Path(set_dir)
    coco = json.loads((root / "annotations.json").read_text(encoding="utf-8"))
    labels = json.loads((root / labels_file).read_text(encoding="utf-8"))["labels"]
    files = {im["id"]: im["file_name"] for im in coco["images"]}
    anns = sorted(coco["annotations"], key=lambda a: a["id"])
    missing = [a["id"] for a in anns if str(a["id"]) not in labels]
    if missing:
        raise ValueError(f"{root / labels_file}: no modality label for annotations {missing}")
    classes = list(backend.classes)
    truth = [str(labels[str(a["id"])]["modality"]) for a in anns]
    unknown = sorted(set(truth) - set(classes))
    names = classes + unknown  # a class the backend cannot answer: its rows are all wrong
    crops: list[Image.Image] = []
    figures: dict[int, Image.Image] = {}
    for a in anns:
        if a["image_id"] not in figures:
            figures[a["image_id"]] = load_image(root / files[a["image_id"]])
        x, y, w, h = (int(round(v)) for v in a["bbox"])
        crops.append(figures[a["image_id"]].crop((x, y, x + w, y + h)))
    preds = backend.predict(crops)
    out = confusion_metrics([names.index(t) for t in truth], [names.index(p) for p, _ in preds], names)
    counts = {c: truth.count(c) for c in names if c in truth}
    out.update(
        n_images=len(files),
        counts=counts,
        majority_baseline=max(counts.values()) / len(truth) if truth else None,
        backend=backend.name,
        predictions={str(a["id"]): {"truth": t, "pred": p, "score": sc}
                     for a, t, (p, sc) in zip(anns, truth, preds, strict=True)},
    )  # fmt: skip
    if settings is not None:
        from pmcflow.filter.checks import check_modality

        should_go = [check_modality(t, 1.0, settings) is not None for t in truth]
        goes = [check_modality(p, sc, settings) is not None for p, sc in preds]
        n_go = sum(should_go)
        out["decision"] = {
            "accuracy": sum(a == b for a, b in zip(should_go, goes, strict=True)) / len(truth) if truth else None,
            "dropped_of_should_drop": sum(g for g, sg in zip(goes, should_go, strict=True) if sg) / n_go
            if n_go else None,
            "kept_of_should_keep": sum(not g for g, sg in zip(goes, should_go, strict=True) if not sg)
            / (len(truth) - n_go) if len(truth) > n_go else None,
            "n_should_drop": n_go,
            "n_should_keep": len(truth) - n_go,
        }
    return out


def crop_sources(splits: Sequence[SourceSplit], *, heldout: bool, per_class: int) -> list[str]:
    """The source id of each crop :func:`make_crops` makes, in its order."""
    out: list[str] = []
    for sp in splits:
        refs = sp.heldout if heldout else sp.train
        if refs:
            out += [refs[k % len(refs)].source_id for k in range(per_class)]
    return out


def registry_splits(settings: TrainSettings, seed: int) -> tuple[SourcePool, list[SourceSplit]]:
    """The default training data: the registry's ``classifier_train`` / ``classifier_test``
    entries by class, plus (``include_plots``) the builtin pool's plot panels split by kind."""
    from pmcflow.imageregistry import CLASSIFIER_ROLES, load_registry, source_refs

    reg = load_registry(settings.registry)
    entries = reg.by_role(*CLASSIFIER_ROLES)
    refs, unavailable = source_refs(entries)
    plot_refs: list[SourceRef] = []
    if settings.include_plots:  # the plots builtin_pool renders from real data (plot:<kind>) only
        plot_refs = [r for r in builtin_pool(max_side=512).refs.get("plot", []) if r.source_id.startswith("plot:")]
        if plot_refs:
            refs.setdefault("plot", []).extend(plot_refs)
    pool = SourcePool(refs, max_side=512)
    pool.unavailable = unavailable
    role = {e.id: e.role for e in entries}
    groups: dict[str, dict[str, set[str]]] = {}
    for e in entries:
        groups.setdefault(e.cls, {}).setdefault(e.role, set()).add(e.group)
    splits: list[SourceSplit] = []
    for m in pool.modalities:
        usable = [r for r in pool.refs[m] if pool.load(r) is not None]
        if m == "plot" and plot_refs:
            plots = SourcePool({"plot": [r for r in usable if r.source_id not in role]}, max_side=512)
            for sp in split_sources(plots, settings.holdout_fraction, seed):
                splits.append(SourceSplit(sp.modality, sp.train, sp.heldout, sp.spatial, mode="plot kinds, by source"))
            continue
        train = tuple(r for r in usable if role.get(r.source_id) == "classifier_train")
        held = tuple(r for r in usable if role.get(r.source_id) == "classifier_test")
        if not train:
            continue
        shared = groups[m].get("classifier_train", set()) & groups[m].get("classifier_test", set())
        mode = "registry, disjoint regions of one image" if shared else "registry, by image"
        splits.append(SourceSplit(m, train, held, spatial=False, mode=mode))
    return pool, splits


def _pool_and_splits(settings: TrainSettings, seed: int) -> tuple[SourcePool, list[SourceSplit]]:
    if settings.sources:
        pool = pool_from_config(thaw(settings.sources), max_side=512)
        return pool, split_sources(pool, settings.holdout_fraction, seed)
    return registry_splits(settings, seed)


def train_modality(cfg: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Train the classifier; write ``modality.pt`` and ``metrics.json`` to ``out_dir``.

    Returns the metrics (held-out accuracy by class, the split, timings, the settings).
    """
    settings = TrainSettings.for_run(cfg)
    seed = int(settings.seed or 0)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, settings.threads))
    torch.manual_seed(seed)
    t0 = time.perf_counter()

    pool, splits = _pool_and_splits(settings, seed)
    if len(splits) < 2:
        raise ValueError(
            f"need at least two modality classes with usable sources, have {[s.modality for s in splits]}"
        )
    classes = [s.modality for s in splits]
    x_tr, y_tr = make_crops(
        pool,
        splits,
        heldout=False,
        per_class=settings.train_crops_per_class,
        size=settings.input_size,
        seed=seed,
    )
    x_ev, y_ev = make_crops(
        pool,
        splits,
        heldout=True,
        per_class=settings.eval_crops_per_class,
        size=settings.input_size,
        seed=seed,
    )
    t_data = time.perf_counter() - t0
    log.info("modality: %d train / %d held-out crops of %s (%.1fs)", len(x_tr), len(x_ev), classes, t_data)

    model = build_model(settings.backbone, len(classes), settings.backbone_kwargs)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    steps_per_epoch = max(1, int(np.ceil(len(x_tr) / settings.batch_size)))
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=settings.lr, total_steps=max(1, settings.epochs * steps_per_epoch), pct_start=0.15
    )
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=settings.label_smoothing)
    gen = torch.Generator().manual_seed(seed)
    history = []
    t1 = time.perf_counter()
    for epoch in range(settings.epochs):
        model.train()
        perm = torch.randperm(len(x_tr), generator=gen)
        total, n = 0.0, 0
        for s in range(0, len(perm), settings.batch_size):
            idx = perm[s : s + settings.batch_size]
            if len(idx) < 2:  # batch norm needs two samples
                continue
            xb = _normalise(x_tr[idx])
            loss = loss_fn(model(xb), y_tr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach()) * len(idx)
            n += len(idx)
        history.append({"epoch": epoch + 1, "train_loss": round(total / max(1, n), 5)})
        log.info("modality: epoch %d loss %.4f", epoch + 1, total / max(1, n))
    t_train = time.perf_counter() - t1

    model.eval()
    ev_sources = crop_sources(splits, heldout=True, per_class=settings.eval_crops_per_class)
    heldout = _evaluate(model, x_ev, y_ev, classes, ev_sources)
    heldout["images_per_class"] = {s.modality: len(s.heldout) for s in splits}
    train_eval = _evaluate(model, x_tr[: min(len(x_tr), 2000)], y_tr[: min(len(x_tr), 2000)], classes)

    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ckpt = out / "modality.pt"
    blob = {
        "format": CHECKPOINT_FORMAT,
        "backbone": settings.backbone,
        "backbone_kwargs": thaw(settings.backbone_kwargs),
        "classes": classes,
        "input_size": settings.input_size,
        "mean": list(MEAN),
        "std": list(STD),
        "state_dict": state,
        "seed": seed,
    }
    T.save_torch(blob, ckpt)
    metrics = {
        "checkpoint": ckpt.name,
        "checkpoint_sha256": T.file_sha256(ckpt),
        "checkpoint_bytes": ckpt.stat().st_size,
        "classes": classes,
        "heldout": heldout,
        "train_subset": {"accuracy": train_eval["accuracy"], "n": train_eval["n"]},
        "split": {
            s.modality: {
                "mode": s.mode_name,
                "train": [r.source_id for r in s.train],
                "heldout": [r.source_id for r in s.heldout],
            }
            for s in splits
        },
        "training_data": _training_data_record(settings),
        "rejected_sources": pool.rejection_rows(),
        "unavailable_sources": list(pool.unavailable),
        "history": history,
        "n_train": len(x_tr),
        "n_heldout": len(x_ev),
        "n_params": int(sum(p.numel() for p in model.parameters())),
        "seconds": {"data": round(t_data, 2), "train": round(t_train, 2)},
        "settings": settings.to_dict(),
        "torch": torch.__version__,
    }
    T.write_json(out / "metrics.json", metrics)
    return metrics


def _training_data_record(settings: TrainSettings) -> dict[str, Any]:
    if settings.sources:
        return {"kind": "sources", "sources": thaw(settings.sources)}
    from pmcflow.imageregistry import REGISTRY_PATH, load_registry

    reg = load_registry(settings.registry)
    path = Path(reg.origin)
    try:
        shown = path.relative_to(REGISTRY_PATH.parents[3]).as_posix()  # pmcflow/data/images/registry.yaml
    except ValueError:
        shown = str(path)
    return {"kind": "registry", "registry": shown, "registry_sha256": reg.sha256, "plots": settings.include_plots}


def cli_eval(argv: Sequence[str] | None = None) -> int:
    """``pmcflow eval-modality``: the configured classifier on hand-labelled real panels."""
    from pmcflow.config import add_config_args, config_from_args
    from pmcflow.filter.checks import FilterSettings

    ap = argparse.ArgumentParser(
        prog="pmcflow eval-modality",
        description="Score the modality classifier (filter.modality) on the boxes of a COCO set whose "
        "modality was labelled by hand (e.g. demo/real-figures).",
    )
    add_config_args(ap)
    ap.add_argument(
        "--figures", required=True, metavar="DIR", help="Folder with annotations.json (COCO) and the labels."
    )
    ap.add_argument("--labels", default="modality.json", help="Labels file in that folder.")
    ap.add_argument("--predictions", action="store_true", help="Also print the prediction per box.")
    args = ap.parse_args(argv)
    settings = FilterSettings.from_config(config_from_args(args))
    res = evaluate_on_panels(load_backend(settings.modality), args.figures, args.labels, settings=settings)
    if not args.predictions:
        res.pop("predictions")
    print(json.dumps(res, indent=2, sort_keys=True))
    return 0


def cli(argv: Sequence[str] | None = None) -> int:
    """``pmcflow train-modality``."""
    from pmcflow.config import add_config_args, config_from_args
    from pmcflow.workflow import log_to_file

    ap = argparse.ArgumentParser(
        prog="pmcflow train-modality", description="Train the subfigure modality classifier."
    )
    add_config_args(ap)
    ap.add_argument("--out", required=True, help="Output directory (modality.pt, metrics.json).")
    ap.add_argument("--log", default=None, help="Log file (default: stderr).")
    args = ap.parse_args(argv)
    log_to_file(args.log)
    metrics = train_modality(config_from_args(args), args.out)
    print(
        json.dumps(
            {
                "classes": metrics["classes"],
                "heldout": metrics["heldout"]["per_class"],
                "heldout_images": metrics["heldout"]["images_per_class"],
                "accuracy": metrics["heldout"]["accuracy"],
                "chance": metrics["heldout"]["chance"],
                "seconds": metrics["seconds"],
            },
            indent=2,
        )
    )
    return 0
