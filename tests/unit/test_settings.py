"""pmcflow.settings: a config section as a typed, frozen object, with the schema as the one place of
its defaults; every stage's settings class names exactly its section's keys."""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from pmcflow.config import ConfigError, load_schema
from pmcflow.settings import FrozenMap, Settings, thaw

# The modules that define the stages' settings classes (imported so that every subclass is known).
STAGE_SETTINGS = {
    "pmcflow.jats": "ParseSettings",
    "pmcflow.decompose.settings": "DecomposeSettings",
    "pmcflow.shard": "ShardSettings",
    "pmcflow.enrich.settings": "EnrichSettings",
    "pmcflow.pmc.settings": "SourceSettings",
    "pmcflow.pmc.http": "HttpSettings",
    "pmcflow.pmc.settings:select": "SelectSettings",
    "pmcflow.pmc.settings:chunking": "ChunkingSettings",
    "pmcflow.detect.settings": "DetectorSettings",
    "pmcflow.synth.settings": "SynthSettings",
    "pmcflow.encoders.train": "TrainSettings",
    "pmcflow.encoders.settings": "EvaluateSettings",
    "pmcflow.report.render": "ReportSettings",
}
# Keys of a section that name workflow jobs rather than configure the stage (pmcflow.runs).
NOT_STAGE_KEYS = {"TrainSettings": {"run", "variants"}}


def _classes() -> list[type[Settings]]:
    return [getattr(importlib.import_module(mod.split(":")[0]), name) for mod, name in STAGE_SETTINGS.items()]


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_each_stage_class_reads_exactly_its_schema_section(cls: type[Settings]) -> None:
    node: Mapping[str, Any] = load_schema()
    for key in cls.SECTION:
        node = node["properties"][key]

    def check(c: type[Settings], n: Mapping[str, Any], path: str) -> None:
        names = {f.name for f in dataclasses.fields(c)}
        keys = set(n["properties"]) - NOT_STAGE_KEYS.get(c.__name__, set())
        assert names == keys, f"{path}: class {sorted(names)} != schema {sorted(keys)}"
        hints = typing.get_type_hints(c)
        for name in names:
            hint = hints[name]
            if isinstance(hint, type) and issubclass(hint, Settings):
                check(hint, n["properties"][name], f"{path}.{name}")

    check(cls, node, ".".join(cls.SECTION))
    built = cls.from_section({})  # every field filled from the schema's defaults
    assert dataclasses.is_dataclass(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.SECTION_FIELD = 1  # type: ignore[attr-defined]


def test_defaults_come_from_the_schema_and_values_are_typed() -> None:
    from pmcflow.decompose.settings import DecomposeSettings

    schema = load_schema()["properties"]["decompose"]["properties"]
    s = DecomposeSettings.from_section({"nms_iou": 1, "detector_params": {"min_gutter_px": 5, "xs": [1, 2]}})
    assert s.nms_iou == 1 and s.to_dict()["nms_iou"] == 1  # a float field keeps an integer as written
    assert DecomposeSettings.from_section({"batch_size": 4.0}).batch_size.__class__ is int
    assert s.batch_size == schema["batch_size"]["default"] and s.crop_format == schema["crop_format"]["default"]
    assert isinstance(s.detector_params, FrozenMap) and s.detector_params["xs"] == (1, 2)
    assert thaw(s.detector_params) == {"min_gutter_px": 5, "xs": [1, 2]}
    assert s.to_dict()["detector_params"] == {"min_gutter_px": 5, "xs": [1, 2]}
    with pytest.raises(TypeError):
        s.detector_params["x"] = 1  # type: ignore[index]
    assert DecomposeSettings.from_config({"decompose": {"nms_iou": 0.5}}).nms_iou == 0.5
    assert DecomposeSettings.from_section(s) is s  # already built: passed through


def test_bad_values_and_unknown_keys_name_their_path() -> None:
    from pmcflow.decompose.settings import DecomposeSettings

    with pytest.raises(ConfigError, match=r"decompose\.nms_iuo: unknown key"):
        DecomposeSettings.from_section({"nms_iuo": 0.5})
    with pytest.raises(ConfigError, match=r"decompose\.crop_format"):
        DecomposeSettings.from_section({"crop_format": "gif"})
    with pytest.raises(ConfigError, match=r"decompose\.batch_size"):
        DecomposeSettings.from_section({"batch_size": "eight"})
    s = DecomposeSettings.from_section({})
    default = load_schema()["properties"]["decompose"]["properties"]["batch_size"]["default"]
    assert s.replace(batch_size=default + 1).batch_size == default + 1 and s.batch_size == default
    with pytest.raises(ConfigError, match=r"decompose\.batch_size"):
        s.replace(batch_size=0)  # replace checks against the schema too


def test_a_class_that_misses_or_invents_a_key_fails_at_build() -> None:
    @dataclasses.dataclass(frozen=True)
    class Partial(Settings):
        SECTION: ClassVar[tuple[str, ...]] = ("parse",)
        max_xml_mb: float
        verify_checksums: bool

    with pytest.raises(ConfigError, match=r"parse: max_mention_chars in the schema but not read by Partial"):
        Partial.from_section({})

    @dataclasses.dataclass(frozen=True)
    class Invented(Settings):
        SECTION: ClassVar[tuple[str, ...]] = ("parse",)
        max_xml_mb: float
        max_mention_chars: int
        verify_checksums: bool
        colour: str

    with pytest.raises(ConfigError, match=r"Invented reads colour, which the config lacks"):
        Invented.from_section({})


def test_frozen_map_is_a_picklable_read_only_mapping() -> None:
    m = FrozenMap({"a": [1, {"b": 2}], "c": "x"})
    assert m == {"a": (1, FrozenMap({"b": 2})), "c": "x"} and len(m) == 2 and "a" in m
    again = pickle.loads(pickle.dumps(m))
    assert again == m and hash(again) == hash(m)
    with pytest.raises(AttributeError):
        m._data = {}  # type: ignore[misc]
    from pmcflow.decompose.settings import DecomposeSettings

    s = DecomposeSettings.from_section({"detector_params": {"k": [1]}})
    assert pickle.loads(pickle.dumps(s)) == s  # stages hand settings to worker processes
