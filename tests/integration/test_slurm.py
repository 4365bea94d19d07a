"""profiles/slurm on a real single-node Slurm cluster (scripts/slurm/up.sh): accounting, retries,
failure reports, time limits, and the demo DAG.

Runs as root on Debian 12 (CI); brings up munged, MariaDB, slurmdbd, slurmctld and slurmd with
their files in a temp dir and stops exactly those afterwards. The profile used is
profiles/slurm/config.yaml with only what a site changes replaced (partition, account, no
Apptainer where there is none, no GPUs) plus fast status checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from pmcflow_testing import slurm

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

FAST = {
    "slurm-init-seconds-before-status-checks": 1,
    "latency-wait": 5,
    "jobs": 8,
    "max-jobs-per-second": 20,
    "max-status-checks-per-second": 5,
}

# Three behaviours in one run (one Slurm allocation each):
#  flaky   fails on its first attempt and succeeds when the profile's `retries` resubmits it;
#  broken  always fails: reported with its log, every attempt FAILED in sacct;
#  slow    writes part of its output, then is killed by Slurm at its 1-minute time limit.
FAILURE_WORKFLOW = textwrap.dedent(
    """
    rule all:
        input: "out/flaky.txt", "out/broken.txt", "out/slow.txt"

    rule flaky:
        output: "out/flaky.txt"
        log: "logs/flaky.log"
        threads: 1
        resources: runtime=5, mem_mb=200, try_no=lambda wildcards, attempt: attempt
        shell:
            "if [ {resources.try_no} -lt 2 ]; then "
            "echo 'flaky: failing on purpose, attempt {resources.try_no}' > {log}; exit 3; fi; "
            "echo 'ok on attempt {resources.try_no}' > {output}"

    rule broken:
        output: "out/broken.txt"
        log: "logs/broken.log"
        threads: 1
        resources: runtime=5, mem_mb=200
        shell: "echo 'half a result' > {output}; echo 'broken: bad input' > {log}; exit 7"

    rule slow:
        output: "out/slow.txt"
        log: "logs/slow.log"
        threads: 1
        retries: 0
        resources: runtime=1, mem_mb=200
        shell: "echo 'partial' > {output}; sleep 600; echo 'complete' >> {output}"
    """
)


@pytest.fixture(scope="module")
def cluster():
    reason = slurm.slurm_available()
    if reason:
        pytest.skip(reason)
    state = Path(tempfile.mkdtemp(prefix="pmcslurm-"))  # short: the munge socket path is limited
    # Declare enough CPUs/memory that production-sized requests (mem_mb=16000, threads=8) are
    # accepted on a small CI machine; nothing is enforced on this test node.
    c = slurm.up(state, PMCFLOW_SLURM_NODE_CPUS="16", PMCFLOW_SLURM_NODE_MEM_MB="600000")
    try:
        yield c
    finally:
        slurm.down(c, purge=True)
        # down.sh stops only the daemons whose pid files it finds: none may be left.
        assert not (state / "pids").exists() or not list((state / "pids").glob("*.pid"))


def _profile(tmp: Path, cluster: slurm.SlurmCluster, apptainer: bool = False, **overrides) -> Path:
    return slurm.derive_profile(
        tmp / "profile", cluster.partition, cluster.account, apptainer=apptainer, overrides={**FAST, **overrides}
    )


def _snakemake(cluster, workdir: Path, args: list[str], timeout: int) -> subprocess.CompletedProcess[str]:
    # profiles/default sits where Snakemake looks for a *workflow* profile and would be layered over
    # --profile (its default-resources replace the Slurm ones): switch that off explicitly.
    cmd = ["timeout", "-k", "10", str(timeout), SNAKEMAKE, "--workflow-profile", "none", *args]
    env = cluster.environ()
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout + 30)


def _by_rule(rows: list[dict[str, str]]) -> dict[str, list[str]]:
    """sacct rows -> {rule: [State, ...]} using the plugin's `rule_<name>[_wildcards_...]` comment."""
    out: dict[str, list[str]] = {}
    for r in rows:
        comment = r.get("Comment", "")
        if not comment.startswith("rule_"):
            continue
        rule = comment[len("rule_") :].split("_wildcards_")[0]
        out.setdefault(rule, []).append(r["State"].split()[0])
    return out


def test_profile_is_complete():
    """The profile a site starts from has what the HPC issue asks for (read by the plugin, not here)."""
    prof = slurm.load_profile()
    assert prof["executor"] == "slurm"
    dr = prof["default-resources"]
    for key in ("slurm_partition", "slurm_account", "runtime", "mem_mb"):
        assert key in dr, key
    assert dr["cpus_per_task"] == "threads"
    assert prof["slurm-requeue"] is True and int(prof["retries"]) >= 1
    assert "slurm-init-seconds-before-status-checks" in prof
    assert "--nv" in prof["apptainer-args"]
    rule_names = set(slurm_rule_names())
    assert set(prof["set-resources"]) <= rule_names, set(prof["set-resources"]) - rule_names
    for gpu_rule in ("train_detector", "train_encoder"):
        res = prof["set-resources"][gpu_rule]
        assert res["gpu"] >= 1 and res["gpu_model"] and res["cpus_per_gpu"] >= 1
        # The plugin prefers --cpus-per-task whenever it is truthy: must be 0 for --cpus-per-gpu.
        assert res["cpus_per_task"] == 0


def slurm_rule_names() -> list[str]:
    """Rule names of the real workflow (so set-resources never names a rule that does not exist)."""
    out = subprocess.run(
        [SNAKEMAKE, "--list-rules", "--configfile", "config/demo.yaml"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_failures_retries_and_time_limit(cluster, tmp_path):
    wd = tmp_path / "wf"
    wd.mkdir()
    (wd / "Snakefile").write_text(FAILURE_WORKFLOW)
    prof = _profile(tmp_path, cluster)
    before = {r["JobID"] for r in cluster.sacct()}
    proc = _snakemake(cluster, wd, ["--profile", str(prof), "--slurm-keep-successful-logs"], timeout=420)
    log = proc.stdout + proc.stderr
    assert proc.returncode not in (124, 137), f"snakemake hung:\n{log[-6000:]}"
    assert proc.returncode != 0, "a workflow with a broken rule must fail"

    # flaky: retried by the profile's `retries`, then complete.
    assert (wd / "out/flaky.txt").read_text().strip() == "ok on attempt 2"
    # broken: reported by name, with its log; its partial output removed.
    assert "Error in rule broken" in log, log[-6000:]
    assert "logs/broken.log" in log
    assert not (wd / "out/broken.txt").exists()
    # slow: killed by Slurm at the time limit; the partial file must not survive as "complete".
    assert "Error in rule slow" in log, log[-6000:]
    assert not (wd / "out/slow.txt").exists(), "partial output of a timed-out job left behind"

    jobs = _by_rule([r for r in cluster.sacct() if r["JobID"] not in before])
    assert jobs.get("flaky") == ["FAILED", "COMPLETED"], jobs
    retries = int(slurm.load_profile()["retries"])
    assert jobs.get("broken") == ["FAILED"] * (retries + 1), jobs
    assert jobs.get("slow") == ["TIMEOUT"], jobs

    # A rerun does not redo the completed job, and still fails on the broken one.
    before = {r["JobID"] for r in cluster.sacct()}
    proc2 = _snakemake(
        cluster,
        wd,
        ["--profile", str(prof), "--retries", "0", "out/flaky.txt", "out/broken.txt"],
        timeout=300,
    )
    assert proc2.returncode != 0
    jobs2 = _by_rule([r for r in cluster.sacct() if r["JobID"] not in before])
    assert "flaky" not in jobs2 and jobs2.get("broken") == ["FAILED"], jobs2


def test_demo_dag_on_slurm(cluster, tmp_path):
    from pmcflow_testing import workflow as wf

    # The demo DAG must plan: a workflow that does not is a failure here, not a reason to skip.
    work = wf.copy_workflow(REPO, tmp_path / "wf")
    planned = wf.dry_run(work, ["--configfile", "config/demo.yaml", "config/ci.yaml"])
    assert planned, "the demo DAG planned no job"
    prof = _profile(tmp_path, cluster)
    before = {r["JobID"] for r in cluster.sacct()}
    proc = _snakemake(
        cluster, work, ["--profile", str(prof), "--configfile", "config/demo.yaml", "config/ci.yaml"], timeout=1200
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-8000:]

    # Outputs: every final target of the DAG exists and is non-empty.
    targets = wf.final_targets(work, ["--configfile", "config/demo.yaml", "config/ci.yaml"])
    assert targets
    for t in targets:
        p = work / t
        assert p.exists() and p.stat().st_size > 0, t

    # Accounting: every rule that is not a localrule ran as a Slurm job and COMPLETED.
    jobs = _by_rule([r for r in cluster.sacct() if r["JobID"] not in before])
    assert jobs, "no Slurm jobs accounted"
    assert "list_articles" in jobs and "acquire_chunk" in jobs
    for rule, states in jobs.items():
        assert set(states) == {"COMPLETED"}, (rule, states)
    # Array submission (slurm-array-jobs: acquire_chunk) when there are >1 chunks.
    acquire_ids = [
        r["JobID"] for r in cluster.sacct() if r.get("Comment", "").startswith("rule_acquire_chunk")
    ]
    if len(acquire_ids) > 1:
        assert any("_" in j for j in acquire_ids), acquire_ids

    # Nothing left to do: a second run submits no job.
    before = {r["JobID"] for r in cluster.sacct()}
    proc = _snakemake(
        cluster, work, ["--profile", str(prof), "--configfile", "config/demo.yaml", "config/ci.yaml"], timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert not [r for r in cluster.sacct() if r["JobID"] not in before]
    shutil.rmtree(work / ".snakemake", ignore_errors=True)
    os.sync()


def test_core_rules_run_in_their_image_on_slurm(cluster, tmp_path):
    """Through the Slurm profile as it is shipped (software-deployment-method: apptainer): the demo's
    acquisition and parsing jobs run as Slurm jobs inside the core image (containers/core.def, built
    here), pinned by its digest."""
    from pmcflow_testing import containers as ct
    from pmcflow_testing import workflow as wf

    from pmcflow import containerpin

    if not ct.apptainer():
        pytest.skip("apptainer not installed (make test installs it on Debian as root)")
    image = ct.build("core", tmp_path / "build.log")  # a failed build fails the test
    work = wf.copy_workflow(REPO, tmp_path / "wf")
    pin = tmp_path / "images.yaml"
    pin.write_text(f"containers:\n  base: {image}@sha256:{containerpin.sha256_file(image)}\n")
    prof = _profile(tmp_path, cluster, apptainer=True)
    target = "results/demo/parse/counts.json"
    before = {r["JobID"] for r in cluster.sacct()}
    proc = _snakemake(
        cluster, work,
        [target, "--profile", str(prof), "--configfile", "config/demo.yaml", "config/ci.yaml", str(pin)],
        timeout=900,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-8000:]
    assert json.loads((work / target).read_text())["kept"] > 0
    jobs = _by_rule([r for r in cluster.sacct() if r["JobID"] not in before])
    assert {"acquire_chunk", "parse_chunk"} <= set(jobs), jobs
    for rule, states in jobs.items():
        assert set(states) == {"COMPLETED"}, (rule, states)
    for rule_log in sorted((work / "logs/demo/parse").glob("c*.log")):
        text = rule_log.read_text()
        assert f"container {image}" in text and "/opt/venv/" in text, text[:800]
