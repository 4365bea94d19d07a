"""A single-node Slurm cluster on localhost (scripts/slurm/up.sh, down.sh) and profiles for it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
UP = REPO / "scripts" / "slurm" / "up.sh"
DOWN = REPO / "scripts" / "slurm" / "down.sh"

# Keys of profiles/slurm that only make sense where Apptainer exists.
APPTAINER_KEYS = ("software-deployment-method", "apptainer-prefix", "apptainer-args")


@dataclass
class SlurmCluster:
    """A running cluster started by up.sh; ``env`` holds SLURM_CONF and the partition/account."""

    state_dir: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def partition(self) -> str:
        return self.env["PMCFLOW_SLURM_PARTITION"]

    @property
    def gpu_partition(self) -> str | None:
        """The partition with the GRES GPUs (PMCFLOW_SLURM_GPUS > 0), else None."""
        return self.env.get("PMCFLOW_SLURM_GPU_PARTITION") or None

    @property
    def gpus(self) -> int:
        return int(self.env.get("PMCFLOW_SLURM_GPUS") or 0)

    @property
    def account(self) -> str:
        return self.env["PMCFLOW_SLURM_ACCOUNT"]

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default os.environ) plus this cluster's client settings."""
        env = dict(os.environ if base is None else base)
        env.update(self.env)
        if self.env.get("PMCFLOW_SLURM_BIN"):  # wrappers that carry SLURM_CONF into job steps
            env["PATH"] = self.env["PMCFLOW_SLURM_BIN"] + os.pathsep + env.get("PATH", "")
        return env

    def run(self, *cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (sacct, squeue, sbatch...) against this cluster."""
        return subprocess.run(
            list(cmd), env=self.environ(), capture_output=True, text=True, timeout=timeout, check=check
        )

    def sacct(
        self, fields: tuple[str, ...] = ("JobID", "JobName", "Comment", "State", "ExitCode")
    ) -> list[dict[str, str]]:
        """Every job allocation (``-X``) this cluster has accounted, one dict per job."""
        out = self.run(
            "sacct", "-a", "-X", "-n", "-P", "-S", "2000-01-01", "-o", ",".join(fields), timeout=60
        ).stdout
        rows = []
        for line in out.splitlines():
            if line.strip():
                rows.append(dict(zip(fields, line.split("|"), strict=False)))
        return rows


def slurm_available() -> str | None:
    """None when up.sh can bring a cluster up here, else the reason it cannot."""
    if os.name != "posix" or not Path("/proc").is_dir():
        return "needs Linux"
    if os.geteuid() != 0:
        return "needs root (daemons run as root in the test cluster)"
    have = all(
        shutil.which(b) for b in ("slurmctld", "slurmd", "slurmdbd", "sbatch", "sacct", "munged", "mariadbd")
    )
    if not have and not shutil.which("apt-get"):
        return "Slurm/munge/MariaDB not installed and no apt-get to install them"
    if not shutil.which("python3"):
        return "up.sh needs python3 on PATH (free ports)"
    return None


def up(state_dir: str | os.PathLike[str], timeout: float = 900, **env: str) -> SlurmCluster:
    """Start a cluster with up.sh (installs the Debian packages when missing)."""
    state = Path(state_dir)
    proc = subprocess.run(
        [str(UP), str(state)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        # Leave nothing half-started behind.
        subprocess.run([str(DOWN), str(state)], capture_output=True, text=True, timeout=120)
        raise RuntimeError(f"scripts/slurm/up.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    cluster_env = {}
    for line in proc.stdout.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            cluster_env[k.strip()] = v.strip()
    if "SLURM_CONF" not in cluster_env:
        raise RuntimeError(f"up.sh printed no SLURM_CONF:\n{proc.stdout}")
    return SlurmCluster(state_dir=state.resolve(), env=cluster_env)


def down(cluster: SlurmCluster | str | os.PathLike[str], purge: bool = False) -> None:
    state = cluster.state_dir if isinstance(cluster, SlurmCluster) else Path(cluster)
    cmd = [str(DOWN), str(state)] + (["--purge"] if purge else [])
    subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


@contextmanager
def running_cluster(state_dir: str | os.PathLike[str], **env: str) -> Iterator[SlurmCluster]:
    cluster = up(state_dir, **env)
    try:
        yield cluster
    finally:
        down(cluster)


def load_profile(profile_dir: str | os.PathLike[str] = REPO / "profiles" / "slurm") -> dict[str, Any]:
    with open(Path(profile_dir) / "config.yaml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def derive_profile(
    dst_dir: str | os.PathLike[str],
    partition: str,
    account: str,
    *,
    src_dir: str | os.PathLike[str] = REPO / "profiles" / "slurm",
    apptainer: bool = False,
    gpu_partition: str | None = None,
    gpus: int = 0,
    overrides: Mapping[str, Any] | None = None,
) -> Path:
    """Write a copy of profiles/slurm with what a site changes replaced, as a site would do.

    Changes only: the account; the partition file (``partitions.yaml``: this cluster's CPU
    partition, and its GPU partition with ``gpus`` GPUs when it has one, so the plugin picks each
    job's partition from its resources as on a site); the Apptainer keys unless ``apptainer`` (the
    full images are not built in the suite; test_containers runs rules in the core image with
    ``apptainer=True``); and ``overrides`` (top-level keys, e.g. faster status checks for tests).
    Everything else (executor, retries, requeue, arrays, per-rule resources) is kept. On a cluster
    without GPUs a job that asks for one finds no partition and fails to submit: that is a test
    failure, never hidden here.
    """
    prof = load_profile(src_dir)
    if not apptainer:
        for k in APPTAINER_KEYS:
            prof.pop(k, None)
    defaults = prof.setdefault("default-resources", {})
    defaults["slurm_account"] = account
    partitions: dict[str, dict[str, Any]] = {partition: {"max_gpu": 0}}
    if gpu_partition:
        partitions[gpu_partition] = {"max_gpu": int(gpus)}
    prof.update(dict(overrides or {}))
    dst = Path(dst_dir)
    dst.mkdir(parents=True, exist_ok=True)
    with open(dst / "partitions.yaml", "w", encoding="utf-8") as fh:
        yaml.safe_dump({"partitions": partitions}, fh, sort_keys=False)
    prof["slurm-partition-config"] = "partitions.yaml"
    with open(dst / "config.yaml", "w", encoding="utf-8") as fh:
        yaml.safe_dump(prof, fh, sort_keys=False)
    return dst
