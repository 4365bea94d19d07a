"""Which model produced a reported number, and whether it is a smoke-test model.

Every table and figure of a detector, encoder or classifier result carries a :class:`Provenance`
label.  The kinds:

* ``smoke-test``: trained in this run at a scale that only checks the plumbing -- fewer than
  :data:`SMOKE_MAX_EXAMPLES` training examples, or one of pmcflow's tiny CPU test configs
  (``tiny-*``), as ``config/demo.yaml`` and ``config/ci.yaml`` do.  Its scores are not a quality
  measure.
* ``trained in this run``: trained by this workflow at a larger scale.
* ``shipped``: weights that come with the package (``pmcflow/data/detector``,
  ``pmcflow/data/modality``), described by the model card beside them.
* ``configured``: a checkpoint the config points at (trained outside this run).
* ``weight-free``: a rule-based baseline (``xycut``, the rules splitter...).
* ``unknown``: the results do not record enough to tell.

Everything is read from what the run wrote (``train.json``, ``eval.json``, ``metrics.json``, the
checkpoint's sha256 in the tables) and from the package's model cards; nothing is guessed from
the run's name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pmcflow
from pmcflow import layout as L
from pmcflow.report.load import Results, evaluation_dir
from pmcflow.tables import file_sha256

SMOKE_MAX_EXAMPLES = 10_000
PACKAGE_DATA = Path(pmcflow.__file__).resolve().parent / "data"
SHIPPED_DETECTOR = PACKAGE_DATA / "detector"
SHIPPED_MODALITY = PACKAGE_DATA / "modality"

SMOKE = "smoke-test"
IN_RUN = "trained in this run"
SHIPPED = "shipped"
CONFIGURED = "configured"
WEIGHT_FREE = "weight-free"
BASELINE = "baseline"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Provenance:
    kind: str  # one of SMOKE, IN_RUN, SHIPPED, CONFIGURED, WEIGHT_FREE, BASELINE, UNKNOWN
    model: str  # what the model is, e.g. "ultralytics yolov8n.yaml"
    detail: str = ""  # how it was trained / where its weights come from
    source: str = ""  # the record this was read from

    @property
    def is_smoke(self) -> bool:
        return self.kind == SMOKE

    @property
    def label(self) -> str:
        """One line for a table caption or figure footer."""
        head = {
            SMOKE: "smoke-test model",
            IN_RUN: "model trained in this run",
            SHIPPED: "shipped model",
            CONFIGURED: "model named in the config",
            WEIGHT_FREE: "weight-free baseline",
            BASELINE: "baseline model, evaluated by the same code",
            UNKNOWN: "model of unknown provenance",
        }[self.kind]
        text = f"{head}: {self.model}"
        if self.detail:
            text += f", {self.detail}"
        if self.kind == SMOKE:
            text += " — not a quality measure"
        return text


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _card_title(folder: Path) -> str | None:
    """The first heading of ``MODEL_CARD.md`` in ``folder``."""
    try:
        for line in (folder / "MODEL_CARD.md").read_text(encoding="utf-8").splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    except OSError:
        pass
    return None


def _card_says(folder: Path, phrase: str) -> bool:
    try:
        return phrase in (folder / "MODEL_CARD.md").read_text(encoding="utf-8")
    except OSError:
        return False


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(PACKAGE_DATA.parents[1]))
    except ValueError:
        return str(path)


def _scale(n_train: int | None, epochs: Any, unit: str) -> str:
    parts = []
    if epochs is not None:
        e = float(epochs)
        parts.append(f"{e:g} epoch" + ("" if e == 1 else "s"))
    if n_train is not None:
        parts.append(f"on {n_train:,} {unit}")
    return " ".join(parts)


def _smoke(n_train: int | None, tiny_config: bool = False) -> bool:
    return tiny_config or (n_train is not None and n_train < SMOKE_MAX_EXAMPLES)


def sha256_file(path: Path) -> str | None:
    """:func:`pmcflow.tables.file_sha256`, or None for a file that cannot be read."""
    try:
        return file_sha256(path)
    except OSError:
        return None


# --------------------------------------------------------------------------------------------
# Detectors
# --------------------------------------------------------------------------------------------
def shipped_detector() -> Provenance | None:
    meta = _read_json(SHIPPED_DETECTOR / "detector.json")
    if meta is None:
        return None
    sha = str(meta.get("sha256") or "")
    title = _card_title(SHIPPED_DETECTOR)
    detail = f"weights shipped with the package ({_rel(SHIPPED_DETECTOR / str(meta.get('checkpoint')))}"
    detail += f", sha256 {sha[:12]}…)" if sha else ")"
    if title:
        detail += f"; model card: “{title}”"
    return Provenance(SHIPPED, str(meta.get("backend")), detail, _rel(SHIPPED_DETECTOR / "detector.json"))


def detector_training_data(res: Results) -> int | None:
    """Training images of this run's detector: ``detector/model/train.txt`` lines, else synth/train's count."""
    listing = res.path(L.DETECTOR_TRAIN_IMAGES)
    if listing.is_file():
        return sum(1 for line in listing.read_text(encoding="utf-8").splitlines() if line.strip())
    counts = _read_json(res.path(L.SYNTH_COUNTS.format(split="train")))
    if counts and isinstance(counts.get("kept"), int):
        return int(counts["kept"])
    return None


def trained_detector(res: Results, train: dict[str, Any] | None = None) -> Provenance:
    """This run's detector, from ``detector/model/train.json``."""
    tr = train if train is not None else _read_json(res.path(L.DETECTOR_TRAIN))
    if tr is None:
        return Provenance(UNKNOWN, "detector trained in this run", f"no {L.DETECTOR_TRAIN}")
    params = tr.get("params") or {}
    arch = params.get("model") or params.get("preset")
    model = str(tr.get("backend")) + (f" ({arch})" if arch else "")
    epochs = params.get("epochs")
    if epochs is None and tr.get("history"):
        epochs = len(tr["history"])
    n = detector_training_data(res)
    detail = "trained in this run: " + (_scale(n, epochs, "rendered figures") or "scale not recorded")
    kind = SMOKE if _smoke(n) else IN_RUN
    if n is None:
        kind = UNKNOWN
    return Provenance(kind, model, detail, L.DETECTOR_TRAIN)


def eval_detector(res: Results, name: str, checkpoint: str | None) -> Provenance:
    """A detector of ``eval.json`` by its name (``<backend>-trained`` / ``-default``) and checkpoint."""
    ck = str(checkpoint or "")
    if ck == "weight-free" or name.startswith("xycut"):
        return Provenance(WEIGHT_FREE, name.split("-")[0], "rule-based panel splitter, no learned weights")
    if ck == "shipped":
        return shipped_detector() or Provenance(UNKNOWN, name, "checkpoint 'shipped' but no detector.json")
    if name.endswith("-trained") or (
        Path(ck).name == Path(L.DETECTOR_WEIGHTS).name and L.DETECTOR_MODEL in ck
    ):
        return trained_detector(res)
    return Provenance(UNKNOWN, name, f"checkpoint {ck}" if ck else "")


def decompose_detector(res: Results, detector: str, sha256: str | None) -> Provenance:
    """The detector that decomposed the figures, from the subfigure table's ``detector`` and sha256."""
    if detector.startswith("xycut"):
        return Provenance(WEIGHT_FREE, "xycut", "rule-based panel splitter, no learned weights")
    shipped = shipped_detector()
    meta = _read_json(SHIPPED_DETECTOR / "detector.json") or {}
    if sha256 and sha256 == meta.get("sha256") and shipped is not None:
        return shipped
    trained = res.path(L.DETECTOR_WEIGHTS)
    if sha256 and trained.is_file() and sha256_file(trained) == sha256:
        return trained_detector(res)
    return Provenance(UNKNOWN, detector, f"checkpoint sha256 {sha256[:12]}…" if sha256 else "")


# --------------------------------------------------------------------------------------------
# Encoders
# --------------------------------------------------------------------------------------------
def encoder(res: Results, run: str, train: dict[str, Any] | None = None) -> Provenance:
    """The encoder of run ``run``, from ``encoders/<run>/train.json``."""
    tr = train if train is not None else _read_json(res.path(L.encoder_file(L.ENCODER_TRAIN, run)))
    if tr is None:
        return Provenance(UNKNOWN, run, f"no {L.encoder_file(L.ENCODER_TRAIN, run)}")
    cfg = tr.get("config") or {}
    name = str(tr.get("model") or cfg.get("model") or tr.get("model_id"))
    epochs = (tr.get("schedule") or {}).get("epochs", cfg.get("epochs"))
    n = tr.get("n_train")
    n = int(n) if isinstance(n, int | float) else None
    tiny = name.startswith("tiny-")
    steps = (tr.get("schedule") or {}).get("total_steps")
    detail = "trained in this run: " + (_scale(n, epochs, "image–text pairs") or "scale not recorded")
    if steps:
        detail += f" ({int(steps):,} steps)"
    if tiny:
        detail += "; pmcflow's tiny CPU test configuration"
    if cfg.get("pretrained"):
        detail += f"; initialised from {cfg['pretrained']}"
    kind = SMOKE if _smoke(n, tiny) else (IN_RUN if n is not None else UNKNOWN)
    return Provenance(kind, name, detail, L.encoder_file(L.ENCODER_TRAIN, run))


def baseline(res: Results, name: str) -> Provenance:
    """A baseline (``evaluate.baselines``) from its ``metrics.json``: the model and its weights."""
    rel = L.evaluation_file(evaluation_dir(name), "metrics_json")
    rec = (_read_json(res.path(rel)) or {}).get("baseline") or {}
    if not rec:
        return Provenance(UNKNOWN, name, f"no baseline record in {rel}")
    return Provenance(BASELINE, str(rec.get("model")), str(rec.get("weights") or ""), rel)


# --------------------------------------------------------------------------------------------
# Modality classifier (filter stage)
# --------------------------------------------------------------------------------------------
def modality_checkpoint(res: Results) -> tuple[str, str]:
    """(checkpoint setting, where that comes from)."""
    mod = ((res.config or {}).get("filter") or {}).get("modality") or {}
    if mod.get("checkpoint"):
        return str(mod["checkpoint"]), "filter.modality.checkpoint in the config"
    if res.config:
        return "shipped", "filter.modality.checkpoint default (not set in the config)"
    return "shipped", "filter.modality.checkpoint default, assumed (the filter outputs do not record it)"


def modality_record(res: Results) -> tuple[Provenance, dict[str, Any] | None]:
    """The modality classifier and its training record (``metrics.json`` beside the checkpoint).

    The filter's outputs do not name the checkpoint, so it comes from the config when the report was
    given one, else from the default (``shipped``), and the label says which.
    """
    mod = ((res.config or {}).get("filter") or {}).get("modality") or {}
    if mod.get("backend") == "openclip":  # zero-shot: no training record
        oc = mod.get("openclip") or {}
        detail = "zero-shot open_clip backend scoring class prompts (filter.modality.backend: openclip)"
        if oc.get("checkpoint"):
            detail += f"; checkpoint {oc['checkpoint']}"
        return Provenance(CONFIGURED, str(oc.get("model") or "open_clip model"), detail), None
    ckpt, how = modality_checkpoint(res)
    if ckpt in ("", "shipped", "default"):
        folder = SHIPPED_MODALITY
        kind = SHIPPED
    else:
        path = Path(ckpt) if Path(ckpt).is_absolute() else res.workdir / ckpt
        folder = path.parent
        kind = CONFIGURED
    rec = _read_json(folder / "metrics.json")
    settings = (rec or {}).get("settings") or {}
    model = str(settings.get("backbone") or "modality classifier")
    parts = []
    if kind == SHIPPED:
        parts.append(f"weights shipped with the package ({_rel(folder / 'modality.pt')})")
        if _card_says(folder, "demo-grade"):
            parts.append("demo-grade per its MODEL_CARD.md")
    else:
        parts.append(f"checkpoint {ckpt}")
    if rec is not None:
        n = rec.get("n_train")
        parts.append(
            "trained " + _scale(int(n) if isinstance(n, int) else None, settings.get("epochs"), "crops")
        )
        if kind != SHIPPED and _smoke(n if isinstance(n, int) else None):
            kind = SMOKE
    parts.append(f"checkpoint: {how}")
    return Provenance(kind, model, "; ".join(parts), _rel(folder / "metrics.json")), rec
