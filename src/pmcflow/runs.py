"""The encoder runs a configuration asks for: one per ``train.variants`` entry (the paper's text
ablation), else one named ``train.run``.  Standard library only: the workflow loads it without
the package installed (rules/common.smk).

A variant is a name and the ``train`` keys it changes, for example::

    train:
      run: clip
      variants:
        caption: {text_fields: [caption]}
        subcaption: {text_fields: [shared_text, subcaption]}
        subcaption+summary: {text_fields: [shared_text, subcaption, summary]}

gives the runs ``clip.caption``, ``clip.subcaption`` and ``clip.subcaption+summary``
(``results/encoders/<run>``, ``results/evaluation/<run>``), all trained on the same shards: the
text is composed at load time, not re-sharded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The Open-PMC-18M recipe (seed 000, appendix): applied under the user's own keys.
PRESETS: dict[str, dict[str, Any]] = {
    "openpmc18m": {
        "model": "vitb16-pubmedbert",
        "pretrained_image": True,  # ViT-B/16 from its ImageNet weights, as the paper
        "epochs": 64,
        "n_gpus": 8,
        "batch_size": 64,  # per GPU and micro-step: 8 GPUs x 64 x accum 4 = 2,048
        "accum_freq": 4,
        "lr": 5.0e-4,
        "wd": 0.2,
        "beta1": 0.9,
        "beta2": 0.98,
        "eps": 1.0e-6,
        "warmup_fraction": 0.1,
        "lr_scheduler": "cosine",
        "precision": "amp",
        "device": "cuda",
        "workers": 8,
        "threads": None,
        "use_val": True,
        "local_loss": True,
        "gather_with_grad": True,
    }
}

WORKFLOW_KEYS = ("run", "variants")  # train keys that name runs rather than configure the trainer


class RunError(ValueError):
    pass


def _variants(train: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    variants = dict(train.get("variants") or {})
    for name, over in variants.items():
        bad = sorted(set(over or {}) & set(WORKFLOW_KEYS))
        if bad:
            raise RunError(f"train.variants.{name}: {bad} cannot be set per variant")
    return {str(k): dict(v or {}) for k, v in variants.items()}


def encoder_runs(train: Mapping[str, Any]) -> list[str]:
    """Run names in the configured order: ``<run>.<variant>`` per variant, else ``<run>``."""
    base = str(train.get("run") or "clip")
    variants = _variants(train)
    return [f"{base}.{name}" for name in variants] if variants else [base]


def variant_of(train: Mapping[str, Any], run: str) -> str | None:
    """The variant a run name stands for (None for the single run without variants)."""
    base = str(train.get("run") or "clip")
    variants = _variants(train)
    if not variants and run == base:
        return None
    for name in variants:
        if run == f"{base}.{name}":
            return name
    raise RunError(f"{run!r} is not an encoder run of this configuration: {encoder_runs(train)}")


def run_settings(train: Mapping[str, Any], run: str) -> dict[str, Any]:
    """The trainer's settings for one run: the train section without the workflow keys, with the
    run's variant keys applied over it."""
    name = variant_of(train, run)
    settings = {k: v for k, v in train.items() if k not in WORKFLOW_KEYS}
    if name is not None:
        settings.update(_variants(train)[name])
    return settings


def trainer_gpus(train: Mapping[str, Any], run: str) -> int:
    """GPUs one run's trainer uses: ``n_gpus`` (default 1) when its device (after the preset) is
    CUDA or ``auto``, else 0.  The resource the workflow requests for ``train_encoder`` (pmcflow.compute)."""
    settings = dict(PRESETS.get(str(train.get("preset")), {}))
    settings.update({k: v for k, v in run_settings(train, run).items() if v is not None})
    device = str(settings.get("device") or "cpu")
    if not (device.startswith("cuda") or device == "auto"):
        return 0
    return int(settings.get("n_gpus") or 1)
