"""Tables, counts reconciliation, config validation, stage merging."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pmcflow import schema as S
from pmcflow import tables
from pmcflow.config import ConfigError, load_config, parse_override
from pmcflow.workflow import merge_stage

REPO = Path(__file__).resolve().parents[2]


def test_write_table_fills_missing_columns_and_keeps_schema(tmp_path: Path) -> None:
    rows = [{"stage": "parse", "item_id": "PMC1.1", "reason": "malformed_xml"}]
    tables.write_table(rows, S.REJECTIONS, tmp_path / "r.parquet")
    t = pq.read_table(tmp_path / "r.parquet")
    assert t.schema.names == S.REJECTIONS.names
    assert t.to_pylist()[0]["detail"] is None


def test_write_table_is_byte_deterministic(tmp_path: Path) -> None:
    rows = [{"stage": "s", "item_id": str(i), "reason": "r", "detail": "x" * i} for i in range(50)]
    tables.write_table(rows, S.REJECTIONS, tmp_path / "a.parquet")
    tables.write_table(rows, S.REJECTIONS, tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_atomic_path_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(RuntimeError), tables.atomic_path(target) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("boom")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_rewrite_after_a_killed_writer_removes_its_temporary(tmp_path: Path) -> None:
    """A SIGKILLed writer leaves ``.<name>.tmp-*``; the rerun's write of that output clears it."""
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)  # that process has exited
    host = socket.gethostname()
    crashed = tmp_path / f".out.parquet.tmp-{pid}@{host}.abc123_x"
    crashed.write_bytes(b"half")
    legacy = tmp_path / ".out.parquet.tmp-k2j3h4g5"  # older naming, no owner tag
    legacy.write_bytes(b"half")
    crashed_dir = tmp_path / f".out.parquet.tmp-{pid}@{host}.dir0001"
    crashed_dir.mkdir()
    (crashed_dir / "x").write_text("x")
    live = tmp_path / f".out.parquet.tmp-{os.getpid()}@{host}.live0001"  # a writer that is running
    live.write_bytes(b"busy")
    elsewhere = tmp_path / f".out.parquet.tmp-{pid}@other-node-17.rem00001"  # cannot judge: keep
    elsewhere.write_bytes(b"?")
    other = tmp_path / f".other.parquet.tmp-{pid}@{host}.zz"  # a different output's temporary
    other.write_bytes(b"?")

    tables.write_table([], S.REJECTIONS, tmp_path / "out.parquet")

    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["out.parquet", live.name, elsewhere.name, other.name])


def test_counts_must_reconcile() -> None:
    rec = tables.counts_record("parse", 5, 3, {"malformed_xml": 2})
    assert rec == {"stage": "parse", "in": 5, "kept": 3, "rejected": {"malformed_xml": 2}}
    with pytest.raises(tables.CountsMismatch):
        tables.counts_record("parse", 5, 3, {"malformed_xml": 1})


def test_rejections_collector(tmp_path: Path) -> None:
    rej = tables.Rejections("acquire", chunk="c000001")
    rej.add("PMC1.1", "checksum_mismatch", "md5 abc != def", pmcid="PMC1")
    rej.add("PMC2.1", "checksum_mismatch")
    rej.add("PMC3.1", "xml_missing")
    assert rej.by_reason() == {"checksum_mismatch": 2, "xml_missing": 1}
    t = rej.write(tmp_path / "rej.parquet")
    assert t.num_rows == 3 and set(t.column("chunk").to_pylist()) == {"c000001"}


def _chunk(tmp: Path, name: str, n_in: int, kept: int, reasons: dict[str, int]) -> tuple[Path, Path]:
    c = tmp / name
    tables.write_counts(c / "counts.json", tables.counts_record("parse", n_in, kept, reasons, chunk=name))
    rej = tables.Rejections("parse", chunk=name)
    for reason, n in reasons.items():
        for i in range(n):
            rej.add(f"{name}-{i}", reason)
    rej.write(c / "rejections.parquet")
    return c / "counts.json", c / "rejections.parquet"


def test_merge_stage_sums_and_checks(tmp_path: Path) -> None:
    a = _chunk(tmp_path, "c000001", 4, 3, {"malformed_xml": 1})
    b = _chunk(tmp_path, "c000002", 2, 0, {"malformed_xml": 1, "xml_too_large": 1})
    empty = _chunk(tmp_path, "c000003", 0, 0, {})
    merged = merge_stage(
        "parse", [a[0], b[0], empty[0]], [a[1], b[1], empty[1]], tmp_path / "m.json", tmp_path / "m.parquet"
    )
    assert merged["in"] == 6 and merged["kept"] == 3
    assert merged["rejected"] == {"malformed_xml": 2, "xml_too_large": 1}
    assert merged["n_chunks"] == 3
    assert pq.read_table(tmp_path / "m.parquet").num_rows == 3
    assert json.loads((tmp_path / "m.json").read_text()) == merged


def test_merge_stage_refuses_lost_rejection_rows(tmp_path: Path) -> None:
    a = _chunk(tmp_path, "c000001", 4, 3, {"malformed_xml": 1})
    (tmp_path / "c000001" / "rejections.parquet").unlink()
    tables.Rejections("parse").write(tmp_path / "c000001" / "rejections.parquet")
    with pytest.raises(tables.CountsMismatch):
        merge_stage("parse", [a[0]], [a[1]], tmp_path / "m.json", tmp_path / "m.parquet")


def test_config_defaults_and_overrides() -> None:
    cfg = load_config([REPO / "config/config.yaml"], ["select.max_articles=7", "source.backend=ftp"])
    assert cfg["select"]["max_articles"] == 7
    assert cfg["source"]["backend"] == "ftp"
    assert cfg["http"]["rate_limit_per_s"] == 3.0  # NCBI's limit is the default
    assert cfg["paths"] == {"results": "results", "resources": "resources", "logs": "logs", "models": ""}


def test_config_rejects_unknown_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="source.backend"):
        load_config([REPO / "config/config.yaml"], ["source.backend=gopher"])
    with pytest.raises(ConfigError, match=r"select\.licence: unknown key \(allowed: .*licenses"):
        load_config([], ["select.licence=CC BY"])
    with pytest.raises(ConfigError):
        parse_override("no-equals-sign")


@pytest.mark.parametrize("name", ["config.yaml", "demo.yaml"])
def test_shipped_configs_validate(name: str) -> None:
    load_config([REPO / "config" / name])


def test_cli_user_errors_are_one_line_and_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from pmcflow.cli import main

    monkeypatch.delenv("PMCFLOW_TRACEBACK", raising=False)
    assert main(["shard", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"pmcflow shard: error: no such file or directory: {tmp_path / 'missing.parquet'}"
    bad = tmp_path / "bad.yaml"
    bad.write_text("detector:\n  backend: nope\n")
    assert main(["outputs", "--config", str(bad)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "detector.backend" in err and "Traceback" not in err
    # every input missing is a failure even without --strict
    assert main(["detect", "--backend", "xycut", "--out", str(tmp_path / "p.json"), str(tmp_path / "x.png")]) == 1
    assert "none of the 1 images could be read" in capsys.readouterr().err
    monkeypatch.setenv("PMCFLOW_TRACEBACK", "1")
    with pytest.raises(FileNotFoundError):
        main(["shard", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "o")])


def test_rule_log_says_what_ran(tmp_path: Path) -> None:
    """Every rule script starts with start_rule_log: the log names the rule, its files and params,
    and its wall time, so a failed cluster job leaves something to read."""
    import subprocess
    import sys
    import textwrap

    log = tmp_path / "logs" / "x.log"
    script = tmp_path / "rule.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, Wildcards
            from pmcflow.workflow import start_rule_log

            class SM:
                rule = "parse_chunk"
                input = InputFiles(fromdict={{"acquired": "a.parquet", "listing": "b.parquet"}})
                output = OutputFiles(fromdict={{"articles": "out.parquet"}})
                params = Params(fromdict={{"parse": {{"max_xml_mb": 1}}, "code": "abc"}})
                wildcards = Wildcards(fromdict={{"chunk": "c000001"}})
                log = Log(toclone=[{str(log)!r}])
                config = {{"paths": {{"models": {str(tmp_path / "hub")!r}}}}}

            import os
            start_rule_log(SM())
            # paths.models is the hub cache the job reads
            assert os.environ["HF_HUB_CACHE"] == {str(tmp_path / "hub")!r}, os.environ.get("HF_HUB_CACHE")
            raise SystemExit(0)
            """
        )
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = log.read_text()
    assert "rule parse_chunk [chunk=c000001]" in text
    assert "input acquired: a.parquet" in text and "input listing: b.parquet" in text
    assert "output articles: out.parquet" in text
    assert "params sha256 " in text and "(code, parse)" in text
    assert "rule parse_chunk finished after" in text


def test_cli_quiet_and_verbose(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    from pmcflow.cli import main

    monkeypatch.delenv("PMCFLOW_TRACEBACK", raising=False)
    missing = str(tmp_path / "missing.parquet")
    assert main(["--quiet", "shard", missing, "--out", str(tmp_path / "o")]) == 1
    assert logging.getLogger().level == logging.WARNING
    assert "error: no such file" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):  # --verbose shows the traceback
        main(["-v", "shard", missing, "--out", str(tmp_path / "o")])
    assert logging.getLogger().level == logging.DEBUG
    assert main(["--help"]) == 0 and "-q, --quiet" in capsys.readouterr().out
    logging.getLogger().setLevel(logging.WARNING)


def test_installed_package_carries_the_schema(tmp_path):
    """A non-editable install (what a container image holds) has the config schema inside the
    package: every stage reads its defaults from it. In the checkout it is a link to
    config/schema/config.schema.yaml, the one copy."""
    import subprocess
    import sys
    import zipfile

    repo = Path(__file__).resolve().parents[2]
    link = repo / "src/pmcflow/data/config.schema.yaml"
    assert link.is_symlink() and link.resolve() == (repo / "config/schema/config.schema.yaml").resolve()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(repo)],
        check=True, capture_output=True, cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("pmcflow-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = zf.read("pmcflow/data/config.schema.yaml")
    assert shipped == (repo / "config/schema/config.schema.yaml").read_bytes()


def test_every_refusal_with_a_reason_is_one_rejection_error() -> None:
    """Each stage's refusal of an item carries a machine-readable reason and a detail through the one
    base class (pmcflow.errors), whatever else it is, so one handler writes any of them as a row."""
    import ast

    from pmcflow.errors import RejectionError

    src = Path(__file__).resolve().parents[2] / "src" / "pmcflow"
    found: list[tuple[str, str]] = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            sets = {
                t.attr
                for n in ast.walk(init or ast.Module(body=[], type_ignores=[]))
                if isinstance(n, ast.Assign)
                for t in n.targets
                if isinstance(t, ast.Attribute)
            }
            direct = any(isinstance(b, ast.Name) and b.id == "RejectionError" for b in node.bases)
            if {"reason", "detail"} <= sets or direct:
                module = ".".join(path.relative_to(src.parent).with_suffix("").parts)
                found.append((module, node.name))
    names = {n for _, n in found}
    assert {"FetchError", "JatsError", "ImageReject", "ImageError", "BadPackage"} <= names, found
    import importlib

    for module, name in found:
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, RejectionError), f"{module}.{name} carries a reason but is no RejectionError"
    # the two that were outside the family: an unusable figure file and a refused FTP package
    from pmcflow.detect.images import ImageError
    from pmcflow.pmc.ftp import BadPackage

    e = ImageError("f.png", "missing", "no such file")
    assert (e.reason, e.detail, str(e)) == ("missing", "no such file", "f.png: missing: no such file")
    assert isinstance(e, ValueError)  # callers that caught the ValueError still do
    assert (BadPackage("too big").reason, str(BadPackage("too big"))) == ("bad_package", "too big")
