"""The ``enrich`` config section, typed and frozen (:class:`pmcflow.settings.Settings`): the two
steps' backends (``subcaption``: rules | transformers | vllm; ``summary``: extractive |
transformers | vllm) and their engines. Defaults, enums and ranges live in the schema only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pmcflow.settings import Settings


@dataclass(frozen=True)
class VllmSettings(Settings):
    """``enrich.summary.vllm``: one vLLM engine (text prompts)."""

    tensor_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    enable_prefix_caching: bool
    max_num_seqs: int
    dtype: str
    seed: int
    chunk_size: int
    vision: bool


@dataclass(frozen=True)
class VllmImageSettings(VllmSettings):
    """``enrich.subcaption.vllm``: the engine of the subcaption prompt, which sends the figure."""

    limit_mm_per_prompt: int
    min_pixels: int
    max_pixels: int


@dataclass(frozen=True)
class LlmStepSettings(Settings):
    """What both steps' sections share: the backend and, for the LLM backends, the model and how
    it runs (``transformers`` on CPU or one GPU; ``vllm``, its engine settings in the subclass)."""

    backend: str
    model: str
    revision: str | None
    gguf_file: str | None
    device: str
    dtype: str
    max_new_tokens: int
    batch_size: int


@dataclass(frozen=True)
class SubcaptionSettings(LlmStepSettings):
    """``enrich.subcaption``."""

    SECTION: ClassVar[tuple[str, ...]] = ("enrich", "subcaption")

    fallback: str
    label_hint: str
    vllm: VllmImageSettings


@dataclass(frozen=True)
class SummarySettings(LlmStepSettings):
    """``enrich.summary``."""

    SECTION: ClassVar[tuple[str, ...]] = ("enrich", "summary")

    max_words: int
    llm_max_words: int
    min_support: float
    vllm: VllmSettings


@dataclass(frozen=True)
class EnrichSettings(Settings):
    """``enrich``: both steps and the length caps of what they write."""

    SECTION: ClassVar[tuple[str, ...]] = ("enrich",)

    max_subcaption_chars: int
    max_summary_chars: int
    subcaption: SubcaptionSettings
    summary: SummarySettings
