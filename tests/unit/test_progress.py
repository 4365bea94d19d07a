"""Progress bars (pmcflow.progress): on a terminal only, never on stdout, never in logs, and the
loop's items, order and outputs exactly as without a bar."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pmcflow import progress as P
from pmcflow import schema as S

REPO = Path(__file__).resolve().parents[2]
JATS = REPO / "tests" / "fixtures" / "jats"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Logging as ``pmcflow`` (no -q) sets it: root at INFO, no console handler to write into the
    captured streams; yields the messages of the ``pmcflow.progress`` logger."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    root.handlers, messages = [], []
    root.setLevel(logging.INFO)

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    keep = Keep()
    P.log.addHandler(keep)
    monkeypatch.delenv(P.ENV, raising=False)
    monkeypatch.setattr(P, "DELAY_S", 0.0)  # draw at once (a real terminal waits a second)
    try:
        yield messages
    finally:
        P.log.removeHandler(keep)
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_not_a_terminal_draws_nothing(logs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert not sys.stderr.isatty()
    assert not P.bars_enabled()
    assert list(P.progress(range(5), desc="quietloop")) == [0, 1, 2, 3, 4]
    with P.Progress(3, desc="quietbatch") as bar:
        bar.update(3)
    assert not bar.shown
    assert capsys.readouterr() == ("", "")
    assert len(logs) == 2  # the summary lines still go to the log


def test_terminal_draws_on_stderr_only(
    logs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    assert P.bars_enabled()
    assert list(P.progress([10, 20, 30, 40, 50], desc="ttyloop", unit="figure")) == [10, 20, 30, 40, 50]
    drawn = tty.getvalue()
    assert "ttyloop" in drawn and "0/5" in drawn and "\r" in drawn
    assert re.search(r"\r +\r$", drawn)  # leave=False: the bar's line is blanked at the end
    assert capsys.readouterr().out == ""


def test_forced_on_writes_the_bar_to_stderr_not_stdout(
    logs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(P.ENV, "1")
    monkeypatch.setattr(P, "DELAY_S", 60.0)  # forced bars do not wait
    assert list(P.progress(["a", "b"], desc="forcedloop", unit="file")) == ["a", "b"]
    out, err = capsys.readouterr()
    assert out == ""
    assert "forcedloop" in err and "0/2" in err and "\r" in err


@pytest.mark.parametrize("setting", ["0", "off"])
def test_env_off_beats_a_terminal(logs: list[str], monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv(P.ENV, setting)
    assert list(P.progress(range(3), desc="offloop")) == [0, 1, 2]
    assert tty.getvalue() == ""


def test_without_tqdm_the_loop_runs_the_same(
    logs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(P.ENV, "1")
    monkeypatch.setattr(P, "_tqdm_class", lambda: None)  # the core environment may lack tqdm
    assert not P.bars_enabled()
    assert list(P.progress(iter("abc"), desc="notqdm")) == ["a", "b", "c"]
    assert capsys.readouterr() == ("", "")
    assert logs[-1].startswith("notqdm: 3 items in ")


@pytest.mark.parametrize("logger", ["", "pmcflow"])
def test_quiet_logging_draws_no_bar_even_forced_on_a_terminal(
    logs: list[str], monkeypatch: pytest.MonkeyPatch, logger: str
) -> None:
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv(P.ENV, "1")
    target = logging.getLogger(logger or None)
    before = target.level
    target.setLevel(logging.WARNING)  # what ``pmcflow -q`` sets on the root logger
    try:
        assert not P.bars_enabled()
        assert list(P.progress(range(4), desc="quietforced")) == [0, 1, 2, 3]
    finally:
        target.setLevel(before)
    assert tty.getvalue() == ""
    assert logs == []  # and the summary line is below the level too


@pytest.mark.parametrize("setting", ["0", "1"])
def test_items_order_and_laziness_unchanged(logs: list[str], monkeypatch: pytest.MonkeyPatch, setting: str) -> None:
    monkeypatch.setenv(P.ENV, setting)
    items = [{"k": 3}, None, "x", 0, (1, 2), {"k": 3}]
    assert list(P.progress(items, desc="list")) == items
    assert list(P.progress(tuple(items), desc="tuple")) == items
    assert list(P.progress({"b": 1, "a": 2}.values(), desc="values")) == [1, 2]

    pulled: list[int] = []

    def gen() -> Iterator[int]:
        for i in range(1000):
            pulled.append(i)
            yield i * i

    it = P.progress(gen(), desc="gen")
    assert pulled == []  # nothing is read before the loop asks
    assert next(it) == 0 and pulled == [0]  # one at a time, no read-ahead
    assert next(it) == 1 and pulled == [0, 1]
    assert list(it) == [i * i for i in range(2, 1000)]


def test_total_defaults_to_len_and_generators_count_without_one(
    logs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(P.ENV, "1")
    list(P.progress(list(range(7)), desc="alpha"))
    list(P.progress((i for i in range(7)), desc="beta"))
    list(P.progress((i for i in range(7)), total=7, desc="gamma"))
    err = capsys.readouterr().err
    alpha, rest = err.split("beta", 1)
    beta, gamma = rest.split("gamma", 1)
    assert "alpha:   0%" in alpha and "0/7" in alpha  # len() of a list
    assert "%" not in beta and "/7" not in beta and "7it" not in beta  # a generator: a count only
    assert "0/7" in gamma


def test_summary_line(logs: list[str]) -> None:
    assert list(P.progress(range(3), desc="parse c000001", unit="article")) == [0, 1, 2]
    assert len(logs) == 1
    assert re.fullmatch(r"parse c000001: 3 articles in \d+\.\d s( \(\d+\.\d (article/s|s/article)\))?", logs[0])
    list(P.progress([1], desc="one", unit="figure"))
    assert logs[-1].startswith("one: 1 figure in ")
    list(P.progress([], desc="none", unit="row"))
    assert logs[-1] == "none: 0 rows in 0.0 s"
    n = len(logs)
    list(P.progress(range(3), desc="quiet", summary=False))
    for i in P.progress(range(3), desc="broken off"):
        if i == 1:
            break
    with pytest.raises(RuntimeError):
        for i in P.progress(range(3), desc="failed"):
            if i == 1:
                raise RuntimeError("boom")
    assert len(logs) == n  # no line without summary, after a break, or after an exception


def test_progress_context_counts_batches_and_times_them(logs: list[str]) -> None:
    with P.Progress(10, desc="decompose c1", unit="graphic") as bar:
        bar.update(4)
        bar.update(6)
    assert bar.n == 10 and bar.elapsed >= 0 and not bar.shown
    assert re.fullmatch(r"\d+\.\d s(, \d+\.\d (graphic/s|s/graphic))?", bar.timing())
    assert logs[-1].startswith("decompose c1: 10 graphics in ")
    assert P._rate(10, 2.0, "row") == "5.0 row/s" and P._rate(2, 10.0, "figure") == "5.0 s/figure"


def test_log_lines_print_above_the_bar_and_handlers_come_back(
    logs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    files = logging.StreamHandler(io.StringIO())  # a log file: left alone
    root = logging.getLogger()
    root.handlers = [console, files]
    for i in P.progress(range(3), desc="logloop"):
        if i == 1:
            logging.getLogger("pmcflow.test").info("halfway")
        if i == 2:
            P.echo("an echoed line")
    assert root.handlers == [console, files]
    drawn = tty.getvalue()
    # each line starts a clean line (the bar is cleared first) and ends with a newline
    assert re.search(r"\r {10,}\rINFO halfway\n", drawn)
    assert re.search(r"\r {10,}\ran echoed line\n", drawn)
    assert files.stream.getvalue().count("halfway") == 1 and "\r" not in files.stream.getvalue()


def test_echo_without_a_bar_is_a_plain_stderr_line(capsys: pytest.CaptureFixture[str]) -> None:
    P.echo("plain")
    assert capsys.readouterr() == ("", "plain\n")


# ------------------------------------------------------------------------------------------------
# real stages, through the CLI
# ------------------------------------------------------------------------------------------------
def _run(args: list[str], setting: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != P.ENV}
    if setting is not None:
        env[P.ENV] = setting
    done = subprocess.run([sys.executable, "-m", "pmcflow.cli", *args], cwd=cwd, env=env, capture_output=True, timeout=120)
    # decoded by hand: text=True would turn the bar's carriage returns into newlines
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def _acquired(path: Path) -> None:
    def row(uid: str, xml: Path) -> dict:
        pmcid, version = uid.rsplit(".", 1)
        return {
            "article_uid": uid, "pmcid": pmcid, "version": int(version), "chunk": "c7", "source": "local",
            "source_url": None, "pmid": None, "doi": None, "citation": None, "license_code": None,
            "is_retracted": None, "xml_path": str(xml), "xml_md5": None, "media": [], "metadata_json": None,
        }

    rows = [
        row("PMC2599765.1", JATS / "ehp-116-1694.nxml"),
        row("PMC3460867.1", JATS / "pone.0046493.nxml"),
        row("PMC4000002.1", path.parent / "missing.xml"),
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=S.ACQUIRED), path)


def test_parse_chunk_cli_same_stdout_and_outputs_with_bars(tmp_path: Path) -> None:
    _acquired(tmp_path / "acquired.parquet")
    runs = {}
    for setting in ("0", "1"):
        out = tmp_path / f"out{setting}"
        runs[setting] = _run(
            ["parse-chunk", "--chunk", "c7", "--acquired", "acquired.parquet", "--out", out.name], setting, tmp_path
        )
        assert runs[setting].returncode == 0, runs[setting].stderr
    assert runs["1"].stdout == runs["0"].stdout and '"kept": 2' in runs["0"].stdout
    for name in ("articles", "figures", "mentions", "rejections"):
        a = (tmp_path / "out0" / f"{name}.parquet").read_bytes()
        assert (tmp_path / "out1" / f"{name}.parquet").read_bytes() == a, name
    assert (tmp_path / "out1" / "counts.json").read_bytes() == (tmp_path / "out0" / "counts.json").read_bytes()
    assert "parse c7:" in runs["1"].stderr and "0/3" in runs["1"].stderr and "\r" in runs["1"].stderr
    assert "\r" not in runs["0"].stderr
    for r in runs.values():  # the summary line, with or without the bar
        assert re.search(r"INFO pmcflow\.progress: parse c7: 3 articles in \d+\.\d s", r.stderr)
    # -q: neither the bar (even forced) nor the INFO line
    quiet = _run(["-q", "parse-chunk", "--chunk", "c7", "--acquired", "acquired.parquet", "--out", "outq"], "1", tmp_path)
    assert quiet.returncode == 0 and quiet.stdout == runs["0"].stdout
    assert quiet.stderr == ""


def test_jats_cli_same_stdout_with_bars(tmp_path: Path) -> None:
    files = sorted(str(p) for p in (REPO / "demo" / "corpus" / "pmc-cloud").glob("PMC*/PMC*.xml"))[:3]
    assert len(files) == 3
    plain, barred = _run(["jats", *files], "0", tmp_path), _run(["jats", *files], "1", tmp_path)
    assert plain.returncode == barred.returncode == 0
    assert barred.stdout == plain.stdout and plain.stdout.count("\n") > 3
    assert "jats:" in barred.stderr and "0/3" in barred.stderr and "\r" not in barred.stdout
    assert plain.stderr == ""


def test_rule_log_has_the_summary_and_no_bar(tmp_path: Path) -> None:
    """A rule script logs to its file (stderr too): no carriage returns there, one summary line."""
    _acquired(tmp_path / "acquired.parquet")
    code = (
        "from pmcflow.workflow import log_to_file\n"
        "log_to_file('rule.log')\n"
        "from pmcflow.jats import ParseSettings, parse_chunk\n"
        "parse_chunk(ParseSettings.from_section({}), 'c7', 'acquired.parquet', 'out')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != P.ENV}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rule.log").read_bytes().decode()  # not read_text: keep any carriage return
    assert "\r" not in text and "%|" not in text
    assert len(re.findall(r"INFO pmcflow\.progress: parse c7: 3 articles in \d+\.\d s", text)) == 1


def test_quiet_filter_command_stays_quiet(tmp_path: Path) -> None:
    """``pmcflow -q`` is not undone by the filter commands' own logging setup."""
    pq.write_table(S.PHASHES.empty_table(), tmp_path / "phash.parquet")
    loud = _run(["find-duplicates", "phash.parquet", "--out", "dups.parquet"], None, tmp_path)
    assert loud.returncode == 0 and "INFO" in loud.stderr and "find_duplicates" in loud.stderr
    quiet = _run(["-q", "find-duplicates", "phash.parquet", "--out", "dups.parquet"], None, tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""

    def timeless(text: str) -> str:
        return re.sub(r"'seconds': [0-9.e-]+", "'seconds': _", text)

    assert timeless(quiet.stdout) == timeless(loud.stdout) and "'hashes': 0" in quiet.stdout
