"""profiles/slurm on a real single-node Slurm cluster (scripts/slurm/up.sh) with GPUs declared as
generic resources (GRES): accounting, retries, failure reports, time limits, and the production
rehearsal (the demo DAG with every GPU rule asking for its GPU, config/rehearsal.yaml).

Runs as root on Debian 12 (CI); brings up munged, MariaDB, slurmdbd, slurmctld and slurmd with
their files in a temp dir and stops exactly those afterwards. The profile used is
profiles/slurm/config.yaml with only what a site changes replaced (partition, account, no
Apptainer where there is none, this cluster's partitions) plus fast status checks.
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
import yaml
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
    c = slurm.up(state, PMCFLOW_SLURM_NODE_CPUS="16", PMCFLOW_SLURM_NODE_MEM_MB="600000", PMCFLOW_SLURM_GPUS="2")
    try:
        yield c
    finally:
        slurm.down(c, purge=True)
        # down.sh stops only the daemons whose pid files it finds: none may be left.
        assert not (state / "pids").exists() or not list((state / "pids").glob("*.pid"))


def _profile(tmp: Path, cluster: slurm.SlurmCluster, apptainer: bool = False, **overrides) -> Path:
    return slurm.derive_profile(
        tmp / "profile",
        cluster.partition,
        cluster.account,
        apptainer=apptainer,
        gpu_partition=cluster.gpu_partition,
        gpus=cluster.gpus,
        overrides={**FAST, **overrides},
    )


def _snakemake(cluster, workdir: Path, args: list[str], timeout: int) -> subprocess.CompletedProcess[str]:
    # The one command of README and docs/hpc.md: Snakemake layers profiles/default (the workflow
    # profile) over --profile, which holds only what is right for both.
    cmd = ["timeout", "-k", "10", str(timeout), SNAKEMAKE, *args]
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
    for key in ("slurm_account", "runtime", "mem_mb"):
        assert key in dr, key
    assert dr["cpus_per_task"] == "threads"
    # The partition of each job comes from the site's partition limits, not from per-rule names.
    assert "slurm_partition" not in dr
    parts = yaml.safe_load((REPO / "profiles/slurm" / prof["slurm-partition-config"]).read_text())["partitions"]
    assert any(p.get("max_gpu", 0) > 0 for p in parts.values())
    assert any(p.get("max_gpu", 0) == 0 for p in parts.values())
    assert prof["slurm-requeue"] is True and int(prof["retries"]) >= 1
    assert "slurm-init-seconds-before-status-checks" in prof
    assert "--nv" in prof["apptainer-args"]
    rule_names = set(slurm_rule_names())
    assert set(prof["set-resources"]) <= rule_names, set(prof["set-resources"]) - rule_names
    # GPU counts live in the config sections (pmcflow.compute), never in the profile.
    for rule, res in prof["set-resources"].items():
        assert not {"gpu", "gres", "gpu_model", "slurm_partition"} & set(res), rule
    # One NCBI rate limit for the whole run: the same global token as the local profile.
    local = yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())
    assert prof["resources"]["pmc_http"] == local["resources"]["pmc_http"] == 1
    # The local profile is layered over this one by Snakemake: nothing in it may override a
    # cluster setting.
    assert not {"cores", "default-resources", "keep-going", "latency-wait", "jobs"} & set(local)


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


REHEARSAL = ["--configfile", "config/demo.yaml", "config/ci.yaml", "config/rehearsal.yaml"]


@pytest.mark.heavy  # 13 min on a 2-core CI host; test_core_rules_run_in_their_image_on_slurm stays in CI
def test_production_rehearsal_on_slurm_with_gpu_gres(cluster, tmp_path):
    """The production rules on the demo corpus through the profile: every rule that runs a model
    on a GPU in production is submitted with its GPU request (GRES allocated by Slurm, on the GPU
    partition), every CPU rule without one, aggregates run locally; the models fall back to the
    CPU because the GRES GPUs here have no devices."""
    from pmcflow_testing import workflow as wf

    from pmcflow import compute
    from pmcflow.config import load_config

    assert cluster.gpu_partition and cluster.gpus >= 1
    # The demo DAG must plan: a workflow that does not is a failure here, not a reason to skip.
    work = wf.copy_workflow(REPO, tmp_path / "wf")
    planned = wf.dry_run(work, REHEARSAL)
    assert planned, "the rehearsal DAG planned no job"
    prof = _profile(tmp_path, cluster)
    before = {r["JobID"] for r in cluster.sacct()}
    proc = _snakemake(cluster, work, ["--profile", str(prof), *REHEARSAL], timeout=1200)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-8000:]

    # Outputs: every final target of the DAG exists and is non-empty.
    targets = wf.final_targets(work, REHEARSAL)
    assert targets
    for t in targets:
        p = work / t
        assert p.exists() and p.stat().st_size > 0, t

    # Accounting: every rule that is not a localrule ran as a Slurm job and COMPLETED, on the
    # partition its GPU request calls for, with the GPUs its config section sets.
    fields = ("JobID", "JobName", "Comment", "State", "ExitCode", "Partition", "AllocTRES")
    rows = [r for r in cluster.sacct(fields) if r["JobID"] not in before]
    jobs = _by_rule(rows)
    assert jobs, "no Slurm jobs accounted"
    assert "list_articles" in jobs and "acquire_chunk" in jobs
    for rule, states in jobs.items():
        assert set(states) == {"COMPLETED"}, (rule, states)
    cfg = load_config([REPO / "config/demo.yaml", REPO / "config/ci.yaml", REPO / "config/rehearsal.yaml"])
    want = compute.rule_gpus(cfg)
    gpu_rules = {"decompose_chunk", "train_detector", "evaluate_detector", "train_encoder", "evaluate_encoder",
                 "evaluate_baseline"}  # fmt: skip
    assert {r for r, n in want.items() if n} == gpu_rules
    for r in rows:
        rule = r["Comment"][len("rule_") :].split("_wildcards_")[0]
        got = _gpus(r["AllocTRES"])
        if rule in gpu_rules:
            assert got == want[rule] and r["Partition"] == cluster.gpu_partition, (rule, r)
        else:
            assert got == 0 and r["Partition"] == cluster.partition, (rule, r)
    assert gpu_rules <= set(jobs), sorted(gpu_rules - set(jobs))
    # Aggregates ran in the Snakemake process, not as jobs.
    assert not {"acquire_summary", "enrich_summary", "filter_summary", "shard"} & set(jobs), sorted(jobs)
    # The models ran where a GPU was not visible: on the CPU, as the rehearsal says.
    train_json = json.loads(next((work / "results/demo/encoders").glob("*/train.json")).read_text())
    assert "cpu" in json.dumps(train_json.get("command", "")), train_json.get("command")

    # Nothing left to do: a second run submits no job.
    before = {r["JobID"] for r in cluster.sacct()}
    proc = _snakemake(cluster, work, ["--profile", str(prof), *REHEARSAL], timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert not [r for r in cluster.sacct() if r["JobID"] not in before]
    shutil.rmtree(work / ".snakemake", ignore_errors=True)
    os.sync()


def _gpus(tres: str) -> int:
    """GPUs in an sacct AllocTRES string (``cpu=2,gres/gpu=1,mem=4000M,node=1``)."""
    for part in tres.split(","):
        key, _, value = part.partition("=")
        if key == "gres/gpu":
            return int(value)
    return 0


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
