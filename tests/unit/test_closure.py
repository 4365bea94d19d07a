"""pmcflow.closure: what a rule script's code reaches, read statically from the source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pmcflow import closure

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "pmcflow"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path / "pmcflow"


def _names(root: Path, files: list[Path]) -> set[str]:
    return {str(f.relative_to(root.resolve())) for f in files}


@pytest.fixture
def pkg(tmp_path: Path) -> Path:
    return _tree(
        tmp_path,
        {
            "pmcflow/__init__.py": "",
            "pmcflow/a.py": "from pmcflow import b\nfrom .c import thing\n",
            "pmcflow/b.py": "def f():\n    import pmcflow.sub.deep  # a lazy import runs too\n",
            "pmcflow/c.py": "thing = 1\n",
            "pmcflow/unused.py": "x = 1\n",
            "pmcflow/sub/__init__.py": "",
            "pmcflow/sub/deep.py": (
                "from pathlib import Path\nfrom importlib import resources\n"
                "from .. import c\n"
                "W = Path(__file__).resolve().parents[1] / 'data' / 'weights'\n"
                "F = Path(__file__).parent / 'fonts'\n"
                "P = resources.files('pmcflow') / 'data' / 'prompts' / NAME\n"
                "OTHER = somewhere / 'data'  # not anchored at this package\n"
                "REG = {'x': ('pmcflow.plugin', 'Cls')}\n"
            ),
            "pmcflow/plugin.py": "",
            "pmcflow/data/weights/w.bin": "1",
            "pmcflow/data/prompts/p.txt": "2",
            "pmcflow/data/unrelated/u.bin": "3",
            "pmcflow/sub/fonts/f.ttf": "4",
            "scripts/rule.py": "from pmcflow.a import thing_not_a_module\n",
        },
    )


def test_closure_follows_imports_strings_and_data(pkg: Path) -> None:
    got = _names(pkg, closure.closure(pkg, [pkg.parent / "scripts/rule.py"]))
    assert got == {
        "__init__.py",
        "a.py",
        "b.py",
        "c.py",
        "sub/__init__.py",
        "sub/deep.py",
        "plugin.py",
        "data/weights/w.bin",
        "data/prompts/p.txt",
        "sub/fonts/f.ttf",
    }


def test_digest_changes_with_reached_files_only(pkg: Path) -> None:
    entry = [pkg.parent / "scripts/rule.py"]
    d0 = closure.digest(pkg, entry)
    (pkg / "unused.py").write_text("x = 2\n")
    (pkg / "data/unrelated/u.bin").write_text("changed")
    assert closure.digest(pkg, entry) == d0
    (pkg / "data/prompts/p.txt").write_text("changed")
    d1 = closure.digest(pkg, entry)
    assert d1 != d0
    (pkg / "sub/deep.py").write_text((pkg / "sub/deep.py").read_text() + "# edit\n")
    assert closure.digest(pkg, entry) != d1


def test_notebook_entries_read_code_cells(pkg: Path, tmp_path: Path) -> None:
    nb = tmp_path / "n.ipynb"
    nb.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "source": ["import pmcflow.unused"]},
                    {"cell_type": "code", "source": ["%matplotlib inline\n", "from pmcflow import c\n"]},
                ]
            }
        )
    )
    assert _names(pkg, closure.closure(pkg, [nb])) == {"__init__.py", "c.py"}


def test_missing_entry_is_an_error(pkg: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        closure.closure(pkg, [pkg / "nope.py"])


def test_real_stages_reach_what_the_old_lists_missed() -> None:
    """The modules the hand-kept lists had left out are in the derived closures."""

    def reach(script: str) -> set[str]:
        return _names(SRC, closure.closure(SRC, [REPO / "scripts" / script]))

    assert "encoders/launch.py" in reach("train_encoder.py")
    assert "enrich/rules.py" in reach("decompose_chunk.py")  # caption letters: the one caption grammar
    # the filter stage's licence check and image reading (licences now live in one module)
    assert {"licenses.py", "detect/images.py"} <= reach("filter_chunk.py")
    assert {"licenses.py", "pmc/select.py"} <= reach("list_articles.py")
    assert "licenses.py" in reach("parse_chunk.py")
    assert {"tables.py", "schema.py"} <= reach("parse_chunk.py")
    assert any(n.startswith("data/detector/") for n in reach("decompose_chunk.py"))
    assert not any(n.startswith("data/detector/") for n in reach("parse_chunk.py"))
    assert "repro.py" not in set().union(*(reach(s.name) for s in (REPO / "scripts").glob("*.py")))


def test_scans_are_cached_on_disk_and_never_stale(pkg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a source names is parsed once and kept under its SHA-256; an edited source is parsed
    again, and which files and data folders exist is looked up on every call."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PMCFLOW_CACHE_DIR", str(cache))
    entry = [pkg.parent / "scripts/rule.py"]
    closure._direct.cache_clear()
    first = closure.closure(pkg, entry)
    stored = sorted((cache / "closure").glob("*.json"))
    # one per distinct source: the entry and the seven modules it reaches, whose three empty
    # files (two __init__, plugin.py) share a key
    assert len(stored) == 6

    def no_parse(source: bytes, filename: str):
        raise AssertionError(f"parsed {filename} although its scan is cached")

    real_scan = closure._scan
    monkeypatch.setattr(closure, "_scan", no_parse)
    closure._direct.cache_clear()  # a new Snakemake process: only the disk cache is left
    assert closure.closure(pkg, entry) == first

    # A data folder that disappears leaves the closure although the scan naming it is cached.
    for f in (pkg / "data/weights").iterdir():
        f.unlink()
    (pkg / "data/weights").rmdir()
    closure._direct.cache_clear()
    assert _names(pkg, closure.closure(pkg, entry)) == _names(pkg, first) - {"data/weights/w.bin"}

    # An edited module is parsed again (its key changed) and what it now imports is reached.
    monkeypatch.setattr(closure, "_scan", real_scan)
    (pkg / "c.py").write_text("import pmcflow.unused\nthing = 1\n")
    assert "unused.py" in _names(pkg, closure.closure(pkg, entry))
    assert len(list((cache / "closure").glob("*.json"))) == 8  # + the new c.py, unused.py


def test_a_broken_or_unwritable_scan_cache_is_only_slower(pkg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = [pkg.parent / "scripts/rule.py"]
    monkeypatch.setenv("PMCFLOW_CACHE_DIR", str(tmp_path / "cache"))
    closure._direct.cache_clear()
    expected = closure.closure(pkg, entry)
    for f in (tmp_path / "cache" / "closure").glob("*.json"):
        f.write_text('{"truncated')
    closure._direct.cache_clear()
    assert closure.closure(pkg, entry) == expected
    blocker = tmp_path / "a-file"  # the cache folder cannot be created below a file
    blocker.write_text("")
    monkeypatch.setenv("PMCFLOW_CACHE_DIR", str(blocker))
    closure._direct.cache_clear()
    assert closure.closure(pkg, entry) == expected
