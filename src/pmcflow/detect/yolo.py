"""``ultralytics``: YOLO from a model yaml or pretrained weights, trained offline.

The model is ``yolov8n.yaml`` by default (:data:`DEFAULT_ARCH`) (``yolo11n.yaml``, ``yolov8s.yaml``... pick the scale by
name).  ``init`` (:mod:`pmcflow.detect.init`) names pretrained weights to fine-tune: a local ``.pt``
or ``init_file`` of a hub repo.  With an ``init`` the architecture is the checkpoint's own, unless
``model`` is set explicitly, in which case the weights whose shapes match are transferred into it.  ``train`` writes a ``data.yaml`` pointing at the datasets' ``images/`` folders (YOLO finds
``labels/`` next to them), trains with ``ultralytics`` and copies the best weights to
``<out>/model.pt``.  Extra ultralytics train arguments pass through as ``ultralytics.<arg>=value``.

The library is kept offline: ``YOLO_OFFLINE=1``, ``YOLO_AUTOINSTALL=0`` and a private
``YOLO_CONFIG_DIR`` (``$PMCFLOW_CACHE_DIR/ultralytics``, default ``~/.cache/pmcflow/ultralytics``)
are set before it is imported unless the caller set them.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pmcflow.detect.base import (
    DEFAULT_NMS_IOU,
    DEFAULT_SCORE_THRESHOLD,
    Box,
    EvaluateMixin,
    ImageInput,
    Params,
    Timer,
    TrainResult,
    as_rgb,
    backend_params,
    read_dataset,
    resolve_device,
)
from pmcflow.tables import atomic_path, save_torch

# The architecture when neither `model` nor `init` names one (the schema's `model` says so).
DEFAULT_ARCH = "yolov8n.yaml"


def ensure_offline_env() -> None:
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_AUTOINSTALL", "0")
    cache = Path(os.environ.get("PMCFLOW_CACHE_DIR", Path.home() / ".cache" / "pmcflow"))
    cfg_dir = Path(os.environ.setdefault("YOLO_CONFIG_DIR", str(cache / "ultralytics")))
    cfg_dir.mkdir(parents=True, exist_ok=True)


def _device(device: str) -> str:
    dev = resolve_device(str(device))
    return "0" if dev == "cuda" else dev.removeprefix("cuda:")


def _link_dir(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.is_symlink() and Path(os.readlink(link)) == target:
            return
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)
        else:
            link.unlink()
    link.symlink_to(target, target_is_directory=True)


def _mirror_shard(root: Path, shard: str, mirror: Path) -> None:
    """``mirror/<shard>/{images,labels}`` -> the dataset's own folders (symlinks)."""
    for sub in ("images", "labels"):
        target = (root / shard / sub).resolve()
        if target.is_dir():
            _link_dir(mirror / shard / sub, target)


def write_data_yaml(path: Path, train_dir: Path, val_dir: Path | None) -> Path:
    """Write YOLO's ``data.yaml`` next to a mirror of the datasets under ``path.parent/data/``.

    YOLO reads images listed in ``<split>.txt`` through ``data/<split>/.../images`` (symlinks to the
    dataset's folders) and writes its ``labels.cache`` beside the mirrored ``labels``, so training
    never writes into the dataset, which is another rule's output.
    """
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    data_root = path.parent / "data"

    def source(root: Path, split: str) -> str:
        mirror = data_root / split
        # A merged render keeps images inside its shards (file_name "shard-00000/images/x.png"):
        # give YOLO the image list; it finds each label by swapping /images/ for /labels/.
        ann = root / "annotations.json"
        if ann.is_file() and not (root / "images").is_dir():
            names = [im["file_name"] for im in json.loads(ann.read_text(encoding="utf-8"))["images"]]
            for shard in sorted({str(Path(n).parent.parent) for n in names}):
                _mirror_shard(root, shard, mirror)
            listing = path.parent / f"{split}.txt"
            listing.write_text("".join(f"{(mirror / n).absolute()}\n" for n in names), encoding="utf-8")
            return str(listing)
        # A plain dataset (images/, labels/): list the images too. YOLO resolves a folder given in
        # data.yaml (following the symlink back into the dataset), not the lines of a list.
        _mirror_shard(root, ".", mirror)
        names = sorted(q.name for q in (root / "images").iterdir() if q.is_file())
        listing = path.parent / f"{split}.txt"
        listing.write_text(
            "".join(f"{(mirror / 'images' / n).absolute()}\n" for n in names), encoding="utf-8"
        )
        return str(listing)

    data = {
        "train": source(Path(train_dir), "train"),
        "val": source(Path(val_dir or train_dir), "val"),
        "names": {0: "subfigure"},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=True), encoding="utf-8")
    return path


def write_reproducible_checkpoint(src: Path, dst: Path) -> None:
    """Rewrite an Ultralytics checkpoint without its wall-clock fields (``date``, ``train_results.time``).

    The weights of a seeded CPU run are the same every time; these fields are not, and would make
    the checkpoints differ between two identical runs.  ``src`` may be ``dst`` (in place).
    """
    import torch

    ck = torch.load(src, map_location="cpu", weights_only=False)
    ck["date"] = None
    if isinstance(ck.get("train_results"), dict):
        ck["train_results"].pop("time", None)
    save_torch(ck, dst)


def _read_history(results_csv: Path) -> list[dict[str, Any]]:
    if not results_csv.is_file():
        return []
    with open(results_csv, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        rec: dict[str, Any] = {}
        for k, v in r.items():
            k = k.strip()
            try:
                rec[k] = float(v)
            except (TypeError, ValueError):
                rec[k] = v
        out.append(rec)
    return out


def build_model(p: dict[str, Any]) -> tuple[Any, Any]:
    """The YOLO model training starts from and the parsed ``init``.

    No ``init``: ``model`` (a yaml at random, or a ``.pt``; empty = :data:`DEFAULT_ARCH`). An
    ``init`` and no ``model``: the checkpoint itself (its architecture; ultralytics swaps its head
    for one class when training starts and transfers the rest). Both: ``model``'s architecture with
    the weights whose shapes match loaded from ``init``.
    """
    from ultralytics import YOLO

    from pmcflow.detect.init import init_file, parse_init

    spec = parse_init(p["init"], p["init_file"], p["init_revision"], backend="ultralytics")
    if spec.kind == "none":
        return YOLO(str(p["model"] or DEFAULT_ARCH), task="detect"), spec
    weights = init_file(spec)
    if not p["model"]:
        return YOLO(str(weights), task="detect"), spec
    return YOLO(str(p["model"]), task="detect").load(str(weights)), spec


class UltralyticsDetector(EvaluateMixin):
    name = "ultralytics"

    def __init__(self, checkpoint: str | os.PathLike[str] | None = None, **params: Any) -> None:
        self.params = backend_params("ultralytics", params)
        self._explicit = set(params)
        self.checkpoint = None if checkpoint is None else Path(checkpoint)
        if self.checkpoint is not None and self.checkpoint.is_dir():
            self.checkpoint = self.checkpoint / "model.pt"
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            if self.checkpoint is None:
                from pmcflow.detect.default import shipped_checkpoint_for

                self.checkpoint = shipped_checkpoint_for(self.name)
            if self.checkpoint is None:
                raise ValueError("the ultralytics backend needs --checkpoint (a trained model.pt) to predict")
            if not self.checkpoint.is_file():
                raise FileNotFoundError(f"ultralytics checkpoint not found: {self.checkpoint}")
            ensure_offline_env()
            from ultralytics import YOLO

            self._model = YOLO(str(self.checkpoint))
            if "imgsz" not in self._explicit:
                train_args = (getattr(self._model, "ckpt", None) or {}).get("train_args", {})
                self.params["imgsz"] = int(train_args.get("imgsz", self.params["imgsz"]))
        return self._model

    def train(self, train_dir: Path, val_dir: Path | None, out_dir: Path, params: Params) -> TrainResult:
        p = backend_params("ultralytics", self.params, params)
        ensure_offline_env()

        out_dir = Path(out_dir).resolve()
        data_yaml = write_data_yaml(
            out_dir / "data.yaml", Path(train_dir), Path(val_dir) if val_dir else None
        )
        n_train = len(read_dataset(train_dir))
        model, spec = build_model(p)
        device = _device(p["device"])
        extra = {k.split(".", 1)[1]: v for k, v in p.items() if k.startswith("ultralytics.")}
        args = {
            "data": str(data_yaml),
            "epochs": int(p["epochs"]),
            "imgsz": int(p["imgsz"]),
            "batch": int(p["batch_size"]),
            "device": device,
            "workers": int(p["workers"]),
            "amp": bool(p["amp"]) and device != "cpu",
            "seed": int(p["seed"]),
            "deterministic": True,
            "lr0": float(p["lr0"]),
            "optimizer": str(p["optimizer"]),
            "patience": int(p["patience"]),
            "mosaic": float(p["mosaic"]),
            "fliplr": float(p["fliplr"]),
            "plots": bool(p["plots"]),
            "cache": p["cache"],
            "val": val_dir is not None,
            "project": str(out_dir),
            "name": "run",
            "exist_ok": True,
            "verbose": False,
            "single_cls": True,
            **extra,
        }
        with Timer() as t:
            model.train(**args)
        run_dir = out_dir / "run"
        weights = run_dir / "weights"
        best = weights / "best.pt" if (weights / "best.pt").is_file() else weights / "last.pt"
        if not best.is_file():
            raise RuntimeError(f"ultralytics training produced no weights in {weights}")
        for w in sorted(weights.glob("*.pt")):  # best.pt / last.pt (last resumes: kept, optimizer too)
            write_reproducible_checkpoint(w, w)
        ckpt = out_dir / "model.pt"
        with atomic_path(ckpt) as tmp:
            shutil.copyfile(best, tmp)
        for cache in sorted((out_dir / "data").rglob("*.cache")):  # YOLO's label cache, rebuilt in ms
            cache.unlink()
        history = _read_history(run_dir / "results.csv")
        # Epochs actually run: `patience` or `ultralytics.time` can end training early.
        epochs_run = len(history) or int(p["epochs"])
        ips = n_train * epochs_run / t.seconds if t.seconds > 0 else 0.0
        self.checkpoint, self._model, self.params = ckpt, None, p
        # the architecture trained: model, else yolov8n.yaml, else the init checkpoint's own
        arch = p["model"] or (DEFAULT_ARCH if spec.kind == "none" else Path(str(spec.filename or spec.path)).name)
        return TrainResult(ckpt, history, ips, t.seconds, {**p, "model": arch, **spec.to_record()})

    def predict(
        self,
        images: Sequence[ImageInput],
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        nms_iou: float = DEFAULT_NMS_IOU,
        batch_size: int = 8,
    ) -> list[list[Box]]:
        model = self._load()
        p = self.params
        out: list[list[Box]] = []
        for start in range(0, len(images), max(1, batch_size)):
            batch = [as_rgb(im) for im in images[start : start + max(1, batch_size)]]
            half = {"half": True} if bool(p["amp"]) and _device(p["device"]) != "cpu" else {}
            results = model.predict(
                source=batch,
                imgsz=int(p["imgsz"]),
                conf=float(score_threshold),
                iou=float(nms_iou),
                device=_device(p["device"]),
                batch=len(batch),
                max_det=int(p["max_det"]),
                **half,
                # Square letterbox, as in training, for every batch: ultralytics' default (rect) pads
                # a batch of equal-shaped images (one image alone, too) only to the stride, so a
                # figure's boxes depended on its batch neighbours (development real figures, merged
                # F1@0.5: 0.742 in mixed batches, 0.664 one image at a time).
                rect=False,
                agnostic_nms=True,
                verbose=False,
            )
            for res in results:
                xyxy = res.boxes.xyxy.cpu().numpy().tolist()
                conf = res.boxes.conf.cpu().numpy().tolist()
                boxes = [
                    Box(x0, y0, x1 - x0, y1 - y0, float(s))
                    for (x0, y0, x1, y1), s in zip(xyxy, conf, strict=True)
                ]
                out.append(sorted(boxes, key=lambda b: -b.score))
        return out
