"""The ``synth`` config section, typed and frozen (:class:`pmcflow.settings.Settings`): how many
figures each split gets, their size, sources and elements. Defaults and ranges live in the schema;
``elements`` and ``canvas`` are checked there and typed by :class:`~pmcflow.synth.elements.ElementParams`
and :class:`~pmcflow.synth.canvas.CanvasParams` (:attr:`SynthSettings.element_params`,
:attr:`SynthSettings.canvas_params`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pmcflow.settings import Settings

if TYPE_CHECKING:
    from pmcflow.synth.canvas import CanvasParams
    from pmcflow.synth.elements import ElementParams


@dataclass(frozen=True)
class SynthSettings(Settings):
    """``synth``."""

    SECTION: ClassVar[tuple[str, ...]] = ("synth",)

    n_train: int
    n_val: int
    n_holdout: int
    size: str
    num_shards: int
    sources: str  # a sources file ('' = the built-in pool)
    compress_level: int
    elements: Mapping[str, Any]
    modality_weights: Mapping[str, float]
    canvas: Mapping[str, Any]

    @property
    def element_params(self) -> ElementParams:
        from pmcflow.settings import thaw
        from pmcflow.synth.elements import ElementParams

        return ElementParams.from_config(thaw(self.elements))

    @property
    def canvas_params(self) -> CanvasParams:
        from pmcflow.settings import thaw
        from pmcflow.synth.canvas import CanvasParams

        return CanvasParams.from_config(thaw(self.canvas))
