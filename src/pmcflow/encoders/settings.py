"""The ``evaluate`` config section, typed and frozen (:class:`pmcflow.settings.Settings`): how the
encoders (trained runs and baselines) are scored. Defaults, enums and ranges live in the schema."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pmcflow.settings import Settings

OPTIMIZERS = ("sgd", "adamw")


class ProbeError(ValueError):
    """Invalid probe settings or inputs."""


@dataclass(frozen=True)
class ProbeSettings(Settings):
    """``evaluate.linear_probe``: hyper-parameters of one linear probe. Defaults (the paper's 40
    epochs, cosine from 0.1) live in the schema: :meth:`from_section` fills them."""

    SECTION: ClassVar[tuple[str, ...]] = ("evaluate", "linear_probe")

    epochs: int
    lr: float
    batch_size: int
    weight_decay: float
    optimizer: str  # "sgd" (momentum below) | "adamw"
    momentum: float  # SGD only
    standardize: bool  # train-split mean/std

    def __post_init__(self) -> None:
        if isinstance(self.epochs, bool) or not isinstance(self.epochs, int) or self.epochs < 1:
            raise ProbeError(f"epochs must be a positive integer, got {self.epochs!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ProbeError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ProbeError(f"lr must be a positive number, got {self.lr!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ProbeError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if not (math.isfinite(self.momentum) and 0 <= self.momentum < 1):
            raise ProbeError(f"momentum must be in [0, 1), got {self.momentum!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ProbeError(f"optimizer must be one of {list(OPTIMIZERS)}, got {self.optimizer!r}")


@dataclass(frozen=True)
class ZeroShotSettings(Settings):
    """``evaluate.zero_shot``."""

    label_column: str | None
    templates: tuple[str, ...]
    class_names: Mapping[str, str]
    min_classes: int
    datasets: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class RobustnessSettings(Settings):
    """``evaluate.robustness``."""

    perturbations: Mapping[str, Any]
    alpha: float


@dataclass(frozen=True)
class EmbeddingSettings(Settings):
    """``evaluate.embedding``: the analysis between the evaluated models (rule compare_embeddings)."""

    SECTION: ClassVar[tuple[str, ...]] = ("evaluate", "embedding")

    enabled: bool
    max_images: int
    permutations: int
    perplexity: float


@dataclass(frozen=True)
class EvaluateSettings(Settings):
    """``evaluate``. ``recall_at`` is kept sorted."""

    SECTION: ClassVar[tuple[str, ...]] = ("evaluate",)

    split: str
    device: str  # cpu | cuda[:N] | auto, as configured (the stage resolves auto)
    threads: int | None
    batch_size: int
    recall_at: tuple[int, ...]
    group_identical_texts: bool
    max_pairs: int | None
    bootstrap: int
    ci: float
    zero_shot: ZeroShotSettings
    benchmarks: tuple[Mapping[str, Any], ...]
    build_demo_benchmarks: bool  # the workflow builds the demo benchmarks (rules), not the stage
    linear_probe: ProbeSettings
    robustness: RobustnessSettings
    feature_cache: str | None
    baselines: Mapping[str, Mapping[str, Any]]
    embedding: EmbeddingSettings

    def __post_init__(self) -> None:
        object.__setattr__(self, "recall_at", tuple(sorted(self.recall_at)))
