"""Partial reruns: change one thing, and exactly the affected jobs rerun, nothing upstream.

The demo DAG (acquire + parse stages) runs once in a temp copy of the workflow; then
  * a parameter of one stage (parse.max_xml_mb)       -> every parse_chunk + parse_summary;
  * the code of one stage's module (src/pmcflow/jats.py) -> the same, nothing of acquire;
  * one new article version in the source             -> list_articles, that article's chunk's
    acquire_chunk + parse_chunk, and the two aggregates; the other chunks do not rerun.
The first two read Snakemake's dry-run plan; the last one runs, because the checkpoint
(list_articles) decides the chunk jobs only when it has run.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from pmcflow_testing import workflow as wf

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
CONFIG = ["--configfile", "config/demo.yaml", "config/ci.yaml"]
RES = "results/demo"
TARGETS = [f"{RES}/acquire/counts.json", f"{RES}/parse/counts.json"]
INVENTORY = "demo/corpus/pmc-cloud/inventory-reports/pmc-oa-opendata/metadata"
HELD_BACK = "PMC99990007.1"  # left out of the first listing, "published" later


def _set_inventory(work: Path, drop_prefix: str | None) -> None:
    """Rewrite the demo inventory without the keys under ``drop_prefix`` (or restore it)."""
    src = REPO / INVENTORY
    dst = work / INVENTORY
    manifest_dir = next(p for p in src.iterdir() if p.is_dir() and p.name != "data")
    manifest = json.loads((manifest_dir / "manifest.json").read_text())
    for f in manifest["files"]:
        rel = f["key"].split("/metadata/", 1)[1]
        rows = gzip.decompress((src / rel).read_bytes()).decode().splitlines(keepends=True)
        if drop_prefix:
            rows = [r for r in rows if drop_prefix not in r]  # its prefix and metadata/ key
        data = gzip.compress("".join(rows).encode(), mtime=0)
        (dst / rel).write_bytes(data)
        f["MD5checksum"] = hashlib.md5(data).hexdigest()
        f["size"] = len(data)
    text = json.dumps(manifest, indent=2)
    (dst / manifest_dir.name / "manifest.json").write_text(text)
    (dst / manifest_dir.name / "manifest.checksum").write_text(hashlib.md5(text.encode()).hexdigest())


def _keys(jobs) -> set[str]:
    return {j.key for j in jobs}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    if not (REPO / INVENTORY).is_dir():
        pytest.skip("demo corpus missing")
    work = wf.copy_workflow(REPO, tmp_path_factory.mktemp("reruns") / "wf")
    _set_inventory(work, HELD_BACK)
    proc = wf.snakemake(work, ["--cores", "2", *TARGETS, *CONFIG], timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    assert wf.dry_run(work, [*TARGETS, *CONFIG]) == [], "a finished DAG must plan nothing"
    return work


def _chunks(work: Path) -> list[str]:
    return sorted(json.loads((work / RES / "listing/chunks.json").read_text())["chunks"])


def test_param_change_reruns_only_that_stage(work, tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("parse:\n  max_xml_mb: 63\n")
    jobs = wf.dry_run(work, [*TARGETS, "--configfile", "config/demo.yaml", "config/ci.yaml", str(overlay)])
    expected = {f"parse_chunk[chunk={c}]" for c in _chunks(work)} | {"parse_summary"}
    assert _keys(jobs) == expected
    assert all("params" in j.reason.lower() or "updated" in j.reason.lower() for j in jobs), jobs


def test_code_change_reruns_only_that_stage(work):
    mod = work / "src/pmcflow/jats.py"
    original = mod.read_bytes()
    try:
        mod.write_bytes(original + b"\n# a change in the parse stage's module\n")
        jobs = wf.dry_run(work, [*TARGETS, *CONFIG])
    finally:
        mod.write_bytes(original)
    expected = {f"parse_chunk[chunk={c}]" for c in _chunks(work)} | {"parse_summary"}
    assert _keys(jobs) == expected
    # Reverting the edit reverts the plan.
    assert wf.dry_run(work, [*TARGETS, *CONFIG]) == []


def test_unrelated_code_change_reruns_nothing(work):
    mod = work / "src/pmcflow/repro.py"
    original = mod.read_bytes()
    try:
        mod.write_bytes(original + b"\n# not used by any rule\n")
        assert wf.dry_run(work, [*TARGETS, *CONFIG]) == []
    finally:
        mod.write_bytes(original)


def test_new_article_reruns_only_its_chunk(work, tmp_path):
    before = json.loads((work / RES / "listing/chunks.json").read_text())["chunks"]
    untouched = {c: (work / RES / "parse" / c / "articles.parquet").stat().st_mtime_ns for c in before}
    _set_inventory(work, None)  # the held-back article version appears in the source
    overlay = tmp_path / "snapshot.yaml"
    overlay.write_text('source:\n  snapshot: "demo-2026-11-refresh"\n')
    args = [*TARGETS, "--configfile", "config/demo.yaml", "config/ci.yaml", str(overlay)]
    proc = wf.snakemake(work, ["--cores", "2", *args], timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]

    after = json.loads((work / RES / "listing/chunks.json").read_text())["chunks"]
    changed = sorted(c for c in after if before.get(c) != after[c])
    assert len(changed) == 1, (before, after)
    (chunk,) = changed
    assert after[chunk]["n"] == before.get(chunk, {"n": 0})["n"] + 1

    ran = _keys(wf.jobs_from_log(proc.stdout + "\n" + proc.stderr))
    assert ran == {
        "list_articles",
        f"acquire_chunk[chunk={chunk}]",
        f"parse_chunk[chunk={chunk}]",
        "acquire_summary",
        "parse_summary",
    }
    for c, mtime in untouched.items():
        if c != chunk:
            assert (work / RES / "parse" / c / "articles.parquet").stat().st_mtime_ns == mtime, c
    assert wf.dry_run(work, args) == []
