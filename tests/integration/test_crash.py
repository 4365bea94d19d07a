"""Crash safety: SIGKILL a demo run at a point, recover (unlock + rerun), compare with a clean run.

Final outputs must be byte-identical to an uninterrupted run's, and no partial file may be taken
as complete. Kill points are rows of KILL_POINTS (a regex on Snakemake's output that says the job
is running, how long to wait after it, and the targets of that run): add shard/training points
as those stages land.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pmcflow.hpc import workflow as wf

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
CONFIG = ["--configfile", "config/demo.yaml", "config/ci.yaml"]
RES = "results/demo"
PARSE_TARGETS = [f"{RES}/acquire/counts.json", f"{RES}/parse/counts.json"]

# name -> (regex in the run's output once the job runs, glob (relative to the workflow copy) that
#          must match a file too, or None; seconds to wait after both; targets)
KILL_POINTS = {
    # the first article files have landed in the download cache, the chunk is not finished
    "mid-download": (r"^(local)?rule acquire_chunk:", "resources/demo/pmc/**/*.xml", 0.0, PARSE_TARGETS),
    "mid-parse": (r"^(local)?rule parse_chunk:", None, 0.5, PARSE_TARGETS),
}
# What may differ between runs: logs and Snakemake's own bookkeeping.
SKIP = ("logs/", ".snakemake/")


def _clean_run(work: Path, targets: list[str]) -> dict[str, str]:
    """Digest of results/ after an uninterrupted run in ``work``; then reset ``work`` to no outputs.

    Same directory for both runs: the local-mirror backend records absolute file:// URLs.
    """
    proc = wf.snakemake(work, ["--cores", "2", *targets, *CONFIG], timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    digest = wf.tree_digest(work / RES, SKIP)
    for d in ("results", "resources", "logs", ".snakemake"):
        shutil.rmtree(work / d, ignore_errors=True)
    return digest


def _run_and_kill(work: Path, targets: list[str], pattern: str, glob: str | None, delay: float) -> str:
    """Start the run in its own process group; SIGKILL the whole group ``delay`` s after ``pattern``."""
    cmd = [wf.SNAKEMAKE, "--cores", "2", *targets, *CONFIG]
    log = work / "killed-run.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=wf.run_env(work, {"PYTHONUNBUFFERED": "1"}),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    rx = re.compile(pattern, re.M)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            if rx.search(log.read_text(errors="replace")) and (glob is None or next(work.glob(glob), None)):
                time.sleep(delay)
                break
            if proc.poll() is not None:
                pytest.fail(f"run finished before the kill point {pattern!r}:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        else:
            pytest.fail(f"kill point {pattern!r} never reached")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    return log.read_text(errors="replace")


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_sigkill_then_rerun_is_byte_identical(point, tmp_path):
    pattern, glob, delay, targets = KILL_POINTS[point]
    work = wf.copy_workflow(REPO, tmp_path / "wf")
    expected = _clean_run(work, targets)
    out = _run_and_kill(work, targets, pattern, glob, delay)
    assert "steps (100%) done" not in out, "killed too late: the run had finished"

    # Whatever the killed run left must not pass as complete: a run that trusted a partial file
    # would skip its job, and the final digests below would differ (or the plan would be empty).
    wf.snakemake(work, ["--unlock", *CONFIG], timeout=120)
    plan = wf.dry_run(work, ["--rerun-incomplete", *targets, *CONFIG])
    assert plan, "after a kill mid-run, Snakemake must have work left"
    proc = wf.snakemake(work, ["--cores", "2", "--rerun-incomplete", *targets, *CONFIG], timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]

    got = wf.tree_digest(work / RES, SKIP)
    assert sorted(got) == sorted(expected), set(got) ^ set(expected)
    diff = [p for p in expected if got[p] != expected[p]]
    assert not diff, f"outputs differ from an uninterrupted run: {diff}"
    # No temp/partial leftovers anywhere in the results.
    leftovers = [p for p in got if re.search(r"(\.tmp|\.part|\.partial|~)$|/\.tmp", p)]
    assert not leftovers, leftovers
