"""Run the workflow in a throw-away copy and read back what Snakemake planned or ran.

Used by the rerun / crash / Slurm tests: they must never touch the working tree's results, and
they edit config and code in their copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

# Top-level entries never copied: environments, VCS, outputs of earlier runs, caches.
_SKIP_TOP = {
    ".venv",
    ".git",
    "results",
    "resources",
    "logs",
    ".snakemake",
    "build",
    ".pytest_cache",
    ".ruff_cache",
    "tests",
    "benchmarks",
}
_SKIP_ANY = shutil.ignore_patterns("__pycache__", "*.pyc", "*.sif", ".ipynb_checkpoints")


def copy_workflow(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """Copy the workflow (Snakefile, rules, scripts, config, envs, src, demo corpus...) to ``dst``."""
    src, dst = Path(src), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(src.iterdir()):
        if entry.name in _SKIP_TOP:
            continue
        target = dst / entry.name
        if entry.is_dir():
            shutil.copytree(entry, target, ignore=_SKIP_ANY, symlinks=True)
        else:
            shutil.copy2(entry, target)
    return dst


def run_env(workdir: str | os.PathLike[str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a run in a copy: its own ``src`` first on PYTHONPATH, venv bin on PATH."""
    env = dict(os.environ)
    src = str(Path(workdir) / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONHASHSEED", "0")
    env.update(extra or {})
    return env


def snakemake(
    workdir: str | os.PathLike[str],
    args: Sequence[str],
    *,
    timeout: float = 900,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``timeout <t> snakemake <args>`` in ``workdir`` (never hangs a test run)."""
    cmd = ["timeout", "-k", "10", str(int(timeout)), SNAKEMAKE, *args]
    return subprocess.run(
        cmd, cwd=workdir, env=env or run_env(workdir), capture_output=True, text=True, timeout=timeout + 30
    )


@dataclass(frozen=True)
class Job:
    rule: str
    wildcards: tuple[tuple[str, str], ...] = ()
    reason: str = ""
    outputs: tuple[str, ...] = field(default=(), compare=False)

    @property
    def key(self) -> str:
        wc = ",".join(f"{k}={v}" for k, v in self.wildcards)
        return f"{self.rule}[{wc}]" if wc else self.rule


_JOB_HEAD = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):\s*$")
_FIELD = re.compile(r"^\s+(\w+): (.*)$")


def jobs_from_log(text: str) -> list[Job]:
    """Jobs Snakemake printed (a dry run's plan, or a real run's executed jobs), in order.

    Parses the ``rule NAME:`` / ``checkpoint NAME:`` blocks with their indented ``wildcards:``,
    ``output:`` and ``reason:`` lines. The default target (``all``) is left out.
    """
    jobs: list[Job] = []
    cur: dict[str, str] | None = None
    name = ""

    def flush() -> None:
        if cur is not None and name != "all":
            wc = tuple(
                tuple(kv.split("=", 1)) for kv in (cur.get("wildcards") or "").split(", ") if "=" in kv
            )
            outs = tuple(o.strip() for o in (cur.get("output") or "").split(",") if o.strip())
            jobs.append(Job(name, wc, cur.get("reason", ""), outs))  # type: ignore[arg-type]

    for line in text.splitlines():
        m = _JOB_HEAD.match(line)
        if m:
            flush()
            name, cur = m.group(1), {}
            continue
        if cur is None:
            continue
        f = _FIELD.match(line)
        if f:
            cur[f.group(1)] = f.group(2).strip()
        elif not line.strip():
            flush()
            cur = None
    flush()
    return jobs


def dry_run(workdir: str | os.PathLike[str], args: Iterable[str] = (), **kw) -> list[Job]:
    proc = snakemake(workdir, ["-n", "--cores", "1", *args], **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"dry run failed:\n{proc.stderr[-4000:]}")
    return jobs_from_log(proc.stdout + "\n" + proc.stderr)


def rule_counts(jobs: Iterable[Job]) -> Counter[str]:
    return Counter(j.rule for j in jobs)


def summary(workdir: str | os.PathLike[str], args: Iterable[str] = (), **kw) -> list[dict[str, str]]:
    """``snakemake --summary`` rows: output_file, date, rule, log-file(s), status, plan."""
    proc = snakemake(workdir, ["--summary", "--cores", "1", *args], **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"--summary failed:\n{proc.stderr[-4000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if "\t" in ln]
    if not lines:
        return []
    header = lines[0].split("\t")
    return [dict(zip(header, ln.split("\t"), strict=False)) for ln in lines[1:]]


def final_targets(workdir: str | os.PathLike[str], args: Iterable[str] = ()) -> list[str]:
    """Every output file the (finished) DAG has, from ``--summary``."""
    return [r["output_file"] for r in summary(workdir, args)]


def run_demo(workdir: str | os.PathLike[str], *args: str, timeout: int = 1200) -> subprocess.CompletedProcess[str]:
    """Snakemake on the demo config with the CI overlay (small), in ``workdir`` (a copy, or the
    working tree itself for read-only calls such as ``--lint``)."""
    return snakemake(
        workdir, ["--cores", "2", "--configfile", "config/demo.yaml", "config/ci.yaml", *args], timeout=timeout
    )


def clone_run(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> Path:
    """A finished run's workflow copy (``src``: outputs, logs and ``.snakemake`` metadata at
    relative paths) copied to ``dst`` with every file's mtime, so that Snakemake plans there exactly
    what it plans in ``src``. Seconds instead of the minutes of running the DAG again."""
    shutil.copytree(src, dst, symlinks=True)  # copy2: contents, modes and mtimes (ns)
    return Path(dst)
