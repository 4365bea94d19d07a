"""Crash safety: SIGKILL a demo run at a point, recover (unlock + rerun), compare with a clean run.

Final outputs must be byte-identical to an uninterrupted run's, and no partial file may be taken
as complete. Kill points are rows of KILL_POINTS (a regex on Snakemake's output that says the job
is running, how long to wait after it, and the targets of that run): add shard/training points
as those stages land.  The points of one target set share a workflow copy and one clean run.

Compared with pmcflow.repro: training logs and wall-clock fields are the only bytes allowed to
differ; checkpoints must not.
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
from pmcflow_testing import workflow as wf

from pmcflow import repro

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
CONFIG = ["--configfile", "config/demo.yaml", "config/ci.yaml"]
RES = "results/demo"
PARSE_TARGETS = [f"{RES}/acquire/counts.json", f"{RES}/parse/counts.json"]
TRAIN_TARGETS = [f"{RES}/encoders/tiny-clip.caption"]  # the first of the demo's text variants

# name -> (regex in the run's output once the job runs, glob (relative to the workflow copy) that
#          must match a file too, or None; seconds to wait after both; targets)
KILL_POINTS = {
    # the first article files have landed in the download cache, the chunk is not finished
    "mid-download": (r"^(local)?rule acquire_chunk:", "resources/demo/pmc/**/*.xml", 0.0, PARSE_TARGETS),
    "mid-parse": (r"^(local)?rule parse_chunk:", None, 0.5, PARSE_TARGETS),
    # a first chunk's shards committed, the others being written (training still to come)
    "mid-shard": (r"^(local)?rule shard_chunk:", f"{RES}/shard_chunks/*/*/*.tar", 0.0, TRAIN_TARGETS),
    # open_clip is running (its log exists), no checkpoint yet
    "mid-training": (r"^(local)?rule train_encoder:", f"{RES}/encoders/tiny-clip.caption/openclip/run/out.log", 1.0,
                     TRAIN_TARGETS),
}  # fmt: skip
# What may differ between runs: logs and Snakemake's own bookkeeping.
SKIP = ("logs/", ".snakemake/")


def _clean_run(work: Path, targets: list[str]) -> dict[str, object]:
    """Snapshot (pmcflow.repro) of results/ after an uninterrupted run in ``work``; then reset ``work`` to no outputs.

    Same directory for every run: the local-mirror backend records absolute file:// URLs.
    """
    proc = wf.snakemake(work, ["--cores", "2", *targets, *CONFIG], timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    snap = repro.snapshot(work / RES, SKIP)
    _reset(work)
    return snap


def _reset(work: Path) -> None:
    for d in ("results", "resources", "logs", ".snakemake"):
        shutil.rmtree(work / d, ignore_errors=True)


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory):
    """One workflow copy for every kill point, and one clean run per target set (cached)."""
    work = wf.copy_workflow(REPO, tmp_path_factory.mktemp("crash") / "wf")
    clean: dict[tuple[str, ...], dict[str, object]] = {}

    def expected(targets: list[str]) -> dict[str, object]:
        key = tuple(targets)
        if key not in clean:
            clean[key] = _clean_run(work, targets)
        return clean[key]

    return work, expected


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


# mid-shard and mid-training rerun the training half of the DAG (4 and 2 min on a 2-core CI host):
# `make test-all`; mid-download and mid-parse stay in CI
HEAVY_POINTS = frozenset({"mid-shard", "mid-training"})


@pytest.mark.parametrize(
    "point", [pytest.param(p, marks=pytest.mark.heavy) if p in HEAVY_POINTS else p for p in sorted(KILL_POINTS)]
)
def test_sigkill_then_rerun_is_byte_identical(point, workflow_copy):
    pattern, glob, delay, targets = KILL_POINTS[point]
    work, clean = workflow_copy
    expected = clean(targets)
    try:
        out = _run_and_kill(work, targets, pattern, glob, delay)
        assert "steps (100%) done" not in out, "killed too late: the run had finished"

        # Whatever the killed run left must not pass as complete: a run that trusted a partial file
        # would skip its job, and the final digests below would differ (or the plan would be empty).
        wf.snakemake(work, ["--unlock", *CONFIG], timeout=120)
        plan = wf.dry_run(work, ["--rerun-incomplete", *targets, *CONFIG])
        assert plan, "after a kill mid-run, Snakemake must have work left"
        proc = wf.snakemake(work, ["--cores", "2", "--rerun-incomplete", *targets, *CONFIG], timeout=900)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]

        got = repro.snapshot(work / RES, SKIP)
        assert sorted(got) == sorted(expected), set(got) ^ set(expected)
        diff = repro.differences(expected, got)
        assert not diff, f"outputs differ from an uninterrupted run: {diff}"
        # No temp/partial leftovers anywhere in the results.
        leftovers = [p for p in got if re.search(r"(\.tmp|\.part|\.partial|~)$|/\.tmp|\.tmp-", p)]
        assert not leftovers, leftovers
    finally:
        _reset(work)
