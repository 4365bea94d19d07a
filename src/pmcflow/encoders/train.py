"""Train a CLIP-style image-text encoder on the shards with ``open_clip_train`` (as a subprocess).

``train_encoder`` prepares the model directory (an open_clip ``local-dir:`` config with its tokenizer
files), builds the ``open_clip_train.main`` command line from the ``train:`` config section and the
shard manifest, runs it (``torchrun`` when ``n_gpus > 1``) through :mod:`pmcflow.encoders.launch`
(open_clip with a seeded sample shuffle, so the same seed gives the same weights) with its output
in ``train.log``, then parses open_clip's ``out.log`` into per-step rows (``steps.parquet``) and writes ``train.json``
with the final checkpoint path, the command, throughput and validation metrics.

Two model families are shipped (``src/pmcflow/data/openclip``): tiny CPU configs for tests and the
demo, and the Open-PMC-18M production pair (ViT-B/16 ImageNet + PubMedBERT) used with
``preset: openpmc18m`` (AdamW wd 0.2, betas 0.9/0.98, lr 5e-4, cosine with 10 % warm-up, global
batch 2,048 = 8 GPUs x 64 x accumulation 4, 64 epochs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from pmcflow.config import ConfigError, subsection, unset_defaults
from pmcflow.devices import resolve_device
from pmcflow.encoders.model import (  # noqa: F401  (re-exported: the train stage's model ids)
    LOCAL_DIR,
    PKG_PREFIX,
    TOKENIZER_FILES,
    prepare_model_dir,
    resolve_pkg,
    shipped_models,
)
from pmcflow.runs import PRESETS
from pmcflow.settings import Settings
from pmcflow.tables import write_json, write_table

STAGE = "train_encoder"
# open_clip_train.main behind a reproducible sample shuffle (see pmcflow.encoders.launch)
LAUNCH_MODULE = "pmcflow.encoders.launch"

# The value of each key the user and the preset leave unset: the schema's `x-default`s (train).
DEFAULTS: dict[str, Any] = unset_defaults("train")
SELECT_METRICS = ("R@1", "R@5", "R@10", "R@50", "R@200", "mrr")


class TrainError(RuntimeError):
    """Training could not run or did not produce a checkpoint, or its settings are invalid."""


@dataclass(frozen=True)
class TrainSettings(Settings):
    """One encoder run's ``train`` settings, typed and frozen: the section less its workflow keys
    (``run``, ``variants``; :func:`pmcflow.runs.run_settings` applies a run's variant), resolved as
    the schema's ``x-default`` < the preset < the user's keys (:meth:`from_section`), with ``device``
    resolved (``auto`` -> cuda or cpu)."""

    SECTION: ClassVar[tuple[str, ...]] = ("train",)

    preset: str | None
    model: str | None
    pretrained: str | None
    pretrained_image: bool | None
    epochs: int | None
    batch_size: int | None
    accum_freq: int | None
    n_gpus: int | None
    lr: float | None
    wd: float | None
    beta1: float | None
    beta2: float | None
    eps: float | None
    warmup_fraction: float | None
    lr_scheduler: str | None
    grad_clip_norm: float | None
    precision: str | None
    device: str | None
    workers: int | None
    threads: int | None
    use_val: bool
    val_frequency: int | None
    save_frequency: int | None
    log_every_n_steps: int | None
    dataset_resampled: bool
    local_loss: bool | None
    gather_with_grad: bool | None
    timeout_s: float | None
    extra_args: tuple[str, ...]
    text_fields: tuple[str, ...] | None
    text_separator: str | None
    select_best: bool
    select_metric: str
    select_max_pairs: int | None

    @classmethod
    def from_section(cls, value: Mapping[str, Any] | None) -> TrainSettings:  # type: ignore[override]
        """A run's settings (``snakemake.params.train``, or a library caller's mapping; an object
        passes through): checked against the schema, then resolved. Errors are :class:`TrainError`."""
        if isinstance(value, TrainSettings):
            return value
        return cls._build(_resolve(value), cls.SECTION)


def _resolve(cfg_train: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults < preset < the user's keys."""
    user = dict(cfg_train or {})
    workflow = sorted(set(user) & {"run", "variants"})
    if workflow:
        raise TrainError(f"train.{workflow[0]} is a workflow key, not a trainer setting (pmcflow.runs.run_settings)")
    try:
        checked = subsection(user, "train")  # types, ranges, enums, unknown keys (by path)
    except ConfigError as exc:
        raise TrainError(str(exc)) from None
    user = {k: checked[k] for k in user}
    cfg = dict(DEFAULTS)
    preset = user.get("preset")
    if preset is not None:
        if preset not in PRESETS:
            raise TrainError(f"unknown preset {preset!r}; known: {sorted(PRESETS)}")
        cfg.update(PRESETS[preset])
    cfg.update(user)
    cfg["device"] = resolve_device(str(cfg["device"]))
    if cfg["precision"] != "fp32" and cfg["device"] == "cpu":
        raise TrainError("use precision fp32 on CPU")
    if not 0 <= float(cfg["warmup_fraction"]) < 1:
        raise TrainError("warmup_fraction must be in [0, 1)")
    if cfg["text_fields"] is not None:
        from pmcflow.schema import SAMPLE_TEXT_FIELDS

        fields = [str(f) for f in cfg["text_fields"]]
        bad = sorted(set(fields) - set(SAMPLE_TEXT_FIELDS))
        if not fields or bad:
            raise TrainError(f"text_fields: {bad or 'empty'}; choose from {list(SAMPLE_TEXT_FIELDS)}")
        cfg["text_fields"] = fields
    if cfg["text_separator"] is None:
        cfg["text_separator"] = " "
    if cfg["select_metric"] not in SELECT_METRICS:
        raise TrainError(f"select_metric {cfg['select_metric']!r}; choose from {list(SELECT_METRICS)}")
    return cfg


# ----------------------------------------------------------------------------------------------
# Command line for open_clip_train
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    global_batch: int
    batches_per_epoch: int
    steps_per_epoch: int
    total_steps: int
    warmup_steps: int


def world_size(cfg: TrainSettings) -> int:
    return int(cfg.n_gpus) if cfg.device != "cpu" else 1


def effective_workers(cfg: TrainSettings, n_train_shards: int | None) -> int:
    """Dataloader workers: open_clip_train needs >= 1 shard per worker and rank (unless resampled)."""
    workers = int(cfg.workers)
    if n_train_shards is not None and not cfg.dataset_resampled:
        workers = min(workers, max(n_train_shards // world_size(cfg), 0))
    return workers


def schedule(cfg: TrainSettings, n_train: int, n_train_shards: int | None = None) -> Schedule:
    """Optimizer steps as open_clip_train counts them (its batch rounding over dataloader workers)."""
    world = world_size(cfg)
    global_batch = int(cfg.batch_size) * world
    n_batches = math.ceil(n_train / global_batch)
    workers = max(1, effective_workers(cfg, n_train_shards))
    n_batches = math.ceil(n_batches / workers) * workers
    steps = (n_batches // int(cfg.accum_freq)) * int(cfg.epochs)
    warmup = int(round(float(cfg.warmup_fraction) * steps))
    warmup = min(warmup, max(steps - 1, 0))
    return Schedule(
        global_batch * int(cfg.accum_freq), n_batches, n_batches // int(cfg.accum_freq), steps, warmup
    )


def build_command(
    cfg: TrainSettings,
    *,
    model_id: str,
    train_urls: str,
    n_train: int,
    n_train_shards: int,
    val_urls: str | None,
    n_val: int,
    logs_dir: str,
    name: str,
    seed: int,
) -> list[str]:
    """The full argv (python or torchrun) that trains with open_clip_train."""
    sched = schedule(cfg, n_train, n_train_shards)
    workers = effective_workers(cfg, n_train_shards)
    world = world_size(cfg)
    args = [
        "--train-data", train_urls,
        "--train-num-samples", str(n_train),
        "--dataset-type", "webdataset",
        "--model", model_id,
        "--epochs", str(cfg.epochs),
        "--batch-size", str(cfg.batch_size),
        "--accum-freq", str(cfg.accum_freq),
        "--lr", repr(float(cfg.lr)),
        "--wd", repr(float(cfg.wd)),
        "--beta1", repr(float(cfg.beta1)),
        "--beta2", repr(float(cfg.beta2)),
        "--eps", repr(float(cfg.eps)),
        "--warmup", str(sched.warmup_steps),
        "--lr-scheduler", str(cfg.lr_scheduler),
        "--precision", str(cfg.precision),
        "--device", str(cfg.device),
        "--workers", str(workers),
        "--seed", str(int(seed)),
        "--logs", logs_dir,
        "--name", name,
        "--save-frequency", str(cfg.save_frequency),
        "--log-every-n-steps", str(cfg.log_every_n_steps),
        "--zeroshot-frequency", "0",
        "--report-to", "",
    ]  # fmt: skip
    if cfg.pretrained:
        args += ["--pretrained", str(cfg.pretrained)]
    if cfg.pretrained_image:
        args.append("--pretrained-image")
    if cfg.grad_clip_norm is not None:
        args += ["--grad-clip-norm", str(cfg.grad_clip_norm)]
    if cfg.dataset_resampled:
        args.append("--dataset-resampled")
    if cfg.use_val and val_urls and n_val > 0:
        args += [
            "--val-data",
            val_urls,
            "--val-num-samples",
            str(n_val),
            "--val-frequency",
            str(cfg.val_frequency),
        ]
    multi = world > 1
    if cfg.local_loss if cfg.local_loss is not None else multi:
        args.append("--local-loss")
    if cfg.gather_with_grad if cfg.gather_with_grad is not None else multi:
        args.append("--gather-with-grad")
    if cfg.text_fields:  # read and removed by pmcflow.encoders.launch, never seen by open_clip
        from pmcflow.encoders.launch import text_args

        args += text_args(cfg.text_fields, str(cfg.text_separator))
    args += [str(a) for a in cfg.extra_args]
    if multi:
        launcher = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={world}",
        ]
        return [*launcher, "-m", LAUNCH_MODULE, *args]
    return [sys.executable, "-m", LAUNCH_MODULE, *args]


# ----------------------------------------------------------------------------------------------
# Log parsing
# ----------------------------------------------------------------------------------------------
_TRAIN_RE = re.compile(
    r"Train Epoch: (?P<epoch>\d+) \[\s*(?P<samples>\d+)/(?P<epoch_samples>\d+) \((?P<pct>\d+)%\)\] "
    r"Data \(t\): (?P<data_t>[\d.]+) Batch \(t\): (?P<batch_t>[\d.]+), (?P<sps>[\d.eE+-]+)/s, "
    r"(?P<sps_gpu>[\d.eE+-]+)/s/gpu LR: (?P<lr>[\d.eE+-]+) Logit Scale: (?P<scale>[\d.eE+-]+) (?P<losses>.*)$"
)
_LOSS_RE = re.compile(r"(?P<name>[A-Za-z_]+): (?P<val>[\d.eE+-]+) \((?P<avg>[\d.eE+-]+)\)")

# Wall-clock measurements: the only parts of a training run's records that differ between two runs
# with the same shards, config and seed (the checkpoint and the losses are byte-identical on CPU).
TIMING_COLUMNS = ("data_time_s", "batch_time_s", "samples_per_s")  # steps.parquet
TIMING_KEYS = ("wall_s", "samples_per_s_median", "samples_per_s_end_to_end")  # train.json

STEPS_SCHEMA = pa.schema(
    [
        pa.field("step", pa.int64()),
        pa.field("epoch", pa.int32()),
        pa.field("samples_in_epoch", pa.int64()),
        pa.field("samples_per_epoch", pa.int64()),
        pa.field("data_time_s", pa.float64()),
        pa.field("batch_time_s", pa.float64()),
        pa.field("samples_per_s", pa.float64()),
        pa.field("lr", pa.float64()),
        pa.field("logit_scale", pa.float64()),
        pa.field("loss", pa.float64()),
        pa.field("loss_avg", pa.float64()),
        pa.field("contrastive_loss", pa.float64()),
    ]
)


def parse_train_log(text: str) -> list[dict[str, Any]]:
    """Rows of ``STEPS_SCHEMA`` from open_clip_train's ``out.log`` (one per logged step)."""
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        m = _TRAIN_RE.search(line)
        if not m:
            continue
        losses = {
            lm["name"].lower(): (float(lm["val"]), float(lm["avg"])) for lm in _LOSS_RE.finditer(m["losses"])
        }
        total = losses.get("loss") or losses.get("contrastive_loss") or (math.nan, math.nan)
        rows.append(
            {
                "step": len(rows),
                "epoch": int(m["epoch"]),
                "samples_in_epoch": int(m["samples"]),
                "samples_per_epoch": int(m["epoch_samples"]),
                "data_time_s": float(m["data_t"]),
                "batch_time_s": float(m["batch_t"]),
                "samples_per_s": float(m["sps"]),
                "lr": float(m["lr"]),
                "logit_scale": float(m["scale"]),
                "loss": total[0],
                "loss_avg": total[1],
                "contrastive_loss": losses.get("contrastive_loss", (math.nan, math.nan))[0],
            }
        )
    return rows


def read_val_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        return []
    return [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


# ----------------------------------------------------------------------------------------------
# The stage
# ----------------------------------------------------------------------------------------------
def _split_info(shards_dir: Path, split: str) -> tuple[str | None, int, int]:
    manifest = json.loads((shards_dir / "manifest.json").read_text(encoding="utf-8"))
    info = manifest["splits"].get(split)
    if not info:
        return None, 0, 0
    return info["urls"], int(info["n_samples"]), int(info["n_shards"])


def train_encoder(
    settings: TrainSettings | Mapping[str, Any] | None,
    seed: int,
    shards_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    train_split: str = "train",
    val_split: str = "val",
    dry_run: bool = False,
) -> dict[str, Any]:
    """Train on ``shards_dir`` (a :func:`pmcflow.shard.shard_dataset` output) into ``out_dir``.

    Writes ``out_dir/model`` (local-dir config + tokenizer), ``out_dir/openclip/<name>/`` (open_clip's
    logs and ``checkpoints/epoch_<N>.pt``), ``train.log``, ``steps.parquet`` and ``train.json``;
    returns the ``train.json`` record.  ``dry_run`` only writes the command (for GPU presets).
    """
    cfg = TrainSettings.from_section(settings)  # a library caller may pass the run's settings as a dict
    shards = Path(shards_dir).resolve()
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    train_urls, n_train, n_train_shards = _split_info(shards, train_split)
    val_urls, n_val, _ = _split_info(shards, val_split)
    if not train_urls or n_train == 0:
        raise TrainError(f"{shards}: the {train_split!r} split has no samples; nothing to train on")
    name = "run"
    logs_dir = out / "openclip"
    run_dir = logs_dir / name
    if run_dir.exists():  # open_clip refuses to reuse an experiment name
        shutil.rmtree(run_dir)
    model_id = cfg.model if dry_run else prepare_model_dir(str(cfg.model), out / "model")
    if dry_run and (cfg.model in shipped_models() or str(cfg.model).startswith(LOCAL_DIR)):
        model_id = f"{LOCAL_DIR}{out / 'model'}"
    cmd = build_command(
        cfg,
        model_id=model_id,
        train_urls=train_urls,
        n_train=n_train,
        n_train_shards=n_train_shards,
        val_urls=val_urls,
        n_val=n_val,
        logs_dir=str(logs_dir),
        name=name,
        seed=seed,
    )
    sched = schedule(cfg, n_train, n_train_shards)
    record: dict[str, Any] = {
        "stage": STAGE,
        "seed": int(seed),
        "config": cfg.to_dict(),
        "model": cfg.model,
        "model_id": model_id,
        "command": cmd,
        "n_train": n_train,
        "n_val": n_val,
        "schedule": sched.__dict__,
        "shards_dir": str(shards),
    }
    if dry_run:
        write_json(out / "train.json", {**record, "dry_run": True})
        return record

    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1") if cfg.device == "cpu" else None
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if cfg.threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(cfg.threads)
    t0 = time.perf_counter()
    with open(out / "train.log", "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            proc = subprocess.run(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=cfg.timeout_s, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise TrainError(
                f"open_clip_train timed out after {cfg.timeout_s} s; see {out / 'train.log'}"
            ) from exc
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (out / "train.log").read_text(encoding="utf-8", errors="replace")[-3000:]
        raise TrainError(f"open_clip_train exited {proc.returncode}; log tail:\n{tail}")

    final = run_dir / "checkpoints" / f"epoch_{cfg.epochs}.pt"
    if not final.is_file():
        raise TrainError(f"no final checkpoint at {final}")
    selection = select_epoch(cfg, model_id, run_dir / "checkpoints", shards, val_split, seed)
    checkpoint = Path(selection["checkpoint"]) if selection.get("checkpoint") else final
    oc_log = run_dir / "out.log"
    steps = parse_train_log(oc_log.read_text(encoding="utf-8", errors="replace") if oc_log.is_file() else "")
    write_table(steps, STEPS_SCHEMA, out / "steps.parquet")
    val = read_val_results(run_dir / "checkpoints" / "results.jsonl")
    # The first logged step includes warm-up (model build, first batch); leave it out of throughput.
    timed = [s for s in steps[1:] if s["samples_per_s"] > 0] or steps
    sps = [s["samples_per_s"] for s in timed]
    record.update(
        {
            "checkpoint": str(checkpoint),
            "checkpoint_bytes": checkpoint.stat().st_size,
            "final_checkpoint": str(final),
            "best_epoch": selection.get("best_epoch"),
            "selection": selection,
            "model_dir": str(out / "model") if model_id.startswith(LOCAL_DIR) else None,
            "wall_s": wall,
            "n_steps_logged": len(steps),
            "final_loss": steps[-1]["loss"] if steps else None,
            "first_loss": steps[0]["loss"] if steps else None,
            "samples_per_s_median": sorted(sps)[len(sps) // 2] if sps else None,
            "samples_per_s_end_to_end": n_train * int(cfg.epochs) / wall if wall > 0 else None,
            "val_metrics": val[-1] if val else None,
            "versions": _versions(),
        }
    )
    write_json(out / "train.json", record)
    return record


def epoch_checkpoints(checkpoints_dir: Path) -> list[tuple[int, Path]]:
    """(epoch, path) of open_clip's ``epoch_<N>.pt`` files, by epoch."""
    found = []
    for p in checkpoints_dir.glob("epoch_*.pt"):
        m = re.fullmatch(r"epoch_(\d+)\.pt", p.name)
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


def best_epoch(scores: Sequence[Mapping[str, Any]], metric: str) -> Mapping[str, Any]:
    """The row with the highest ``metric``; ties go to the higher ``mrr``, then the later epoch."""
    return max(scores, key=lambda r: (r[metric], r["mrr"], r["epoch"]))


def select_epoch(
    cfg: TrainSettings,
    model_id: str,
    checkpoints_dir: Path,
    shards_dir: Path,
    val_split: str,
    seed: int,
) -> dict[str, Any]:
    """Score every saved epoch on the val split by retrieval and pick the best (the paper's rule:
    validation R@200 on a held-out subset).  The retrieval is :mod:`pmcflow.encoders.evaluate`'s,
    on the shards' ``.txt`` (the same text for every variant of an ablation), mean of both
    directions.  Returns what was done, ``checkpoint`` and ``best_epoch`` when an epoch was chosen."""
    epochs = epoch_checkpoints(checkpoints_dir)
    out: dict[str, Any] = {"metric": cfg.select_metric, "split": val_split, "by_epoch": []}
    if not cfg.select_best:
        return {**out, "skipped": "train.select_best is off: the final epoch is kept"}
    if len(epochs) < 2:
        return {**out, "skipped": f"{len(epochs)} saved epoch(s): nothing to choose from"}
    from pmcflow.encoders import evaluate as EV

    samples = EV.read_split(
        shards_dir, val_split, max_pairs=cfg.select_max_pairs, seed=seed
    )  # as evaluate's
    if len(samples) < 2:
        return {**out, "skipped": f"{len(samples)} pairs in split {val_split!r} (need >= 2)"}
    if cfg.threads:
        import torch

        torch.set_num_threads(int(cfg.threads))
    texts = [s["text"] for s in samples]
    groups = EV.text_groups(texts)
    ks = sorted({int(m[2:]) for m in SELECT_METRICS if m.startswith("R@")})
    device = "cuda" if str(cfg.device).startswith("cuda") else "cpu"
    for epoch, path in epochs:
        enc = EV.Encoder(model_id, str(path), device)
        img, txt = enc.images((s["image"] for s in samples), 64), enc.texts(texts, 64)
        i2t, t2i = EV.retrieval_ranks(img, txt, groups)
        by_direction = [{m["metric"]: m["value"] for m in EV.rank_metrics(r, ks)} for r in (i2t, t2i)]
        row: dict[str, Any] = {"epoch": epoch, "checkpoint": str(path)}
        for name in [f"R@{k}" for k in ks] + ["mrr"]:
            row[name] = float(np.mean([d[name] for d in by_direction]))
        out["by_epoch"].append(row)
    best = best_epoch(out["by_epoch"], cfg.select_metric)
    return {**out, "n_pairs": len(samples), "best_epoch": best["epoch"], "checkpoint": best["checkpoint"]}


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    for pkg in ("torch", "open_clip_torch", "webdataset", "transformers", "timm"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def cli(argv: Sequence[str] | None = None) -> int:
    from pmcflow.config import load_config

    parser = argparse.ArgumentParser(prog="pmcflow train-encoder", description=__doc__.splitlines()[0])
    parser.add_argument("--shards", required=True, help="Output directory of `pmcflow shard`.")
    parser.add_argument("--out", required=True, help="Training output directory.")
    parser.add_argument("--config", "-c", action="append", default=[], metavar="FILE")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--run", default=None, help="Which encoder run of the config (train.run or train.run.VARIANT; default: the first)."
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="Write the command to train.json; do not train."
    )
    args = parser.parse_args(argv)
    from pmcflow import runs

    config = load_config(args.config, args.overrides)  # the workflow's loader: schema, defaults
    train = config["train"]
    run = args.run or runs.encoder_runs(train)[0]
    section, seed = TrainSettings.from_section(runs.run_settings(train, run)), int(config["seed"])
    rec = train_encoder(
        section, seed if args.seed is None else args.seed, args.shards, args.out, dry_run=args.dry_run
    )
    keys = ("checkpoint", "wall_s", "final_loss", "samples_per_s_median", "schedule")
    print(json.dumps({k: rec.get(k) for k in keys}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(cli())
