"""The parsed config schema is cached as JSON keyed by the schema's bytes; the card's YAML emitter."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from pmcflow import config as C


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PMCFLOW_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _parsed() -> dict:
    return yaml.load(C._schema_path().read_bytes(), Loader=yaml.SafeLoader)


def test_the_cached_schema_is_the_parsed_yaml(cache: Path) -> None:
    first = C.load_schema()
    key = hashlib.sha256(C._schema_path().read_bytes()).hexdigest()
    assert (cache / "schema" / f"{key}.json").is_file()
    assert first == _parsed() and C.load_schema() == first


def test_a_damaged_cache_file_is_parsed_again_and_repaired(cache: Path) -> None:
    C.load_schema()
    (cached,) = (cache / "schema").iterdir()
    cached.write_text('{"truncated": ')
    assert C.load_schema() == _parsed()
    assert C.load_schema() == _parsed() and cached.read_text().startswith('{"')


def test_a_cache_entry_of_another_schema_is_never_read(cache: Path) -> None:
    (cache / "schema").mkdir(parents=True)
    (cache / "schema" / ("0" * 64 + ".json")).write_text('{"stale": true}')
    assert C.load_schema() == _parsed()


def test_an_unwritable_cache_still_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("PMCFLOW_CACHE_DIR", str(blocker))
    assert C.load_schema() == _parsed()


def test_the_card_emitter_gives_the_python_emitters_bytes() -> None:
    from pmcflow import datacard

    header = {
        "pretty_name": "pmcflow dataset",
        "license": "other",
        "tags": ["biomedical", "image-text"],
        "configs": [{"config_name": "default", "data_files": [{"split": "train", "path": "train/*.tar"}]}],
        "dataset_info": {"features": [{"name": "txt", "dtype": "string"}, {"name": "n", "dtype": "int64"}]},
        "note": "é – a long line " * 8,
        "empty": None,
        "ratio": 0.25,
    }
    fast = yaml.dump(header, Dumper=datacard._DUMPER, sort_keys=False, allow_unicode=True)
    assert fast == yaml.safe_dump(header, sort_keys=False, allow_unicode=True)
