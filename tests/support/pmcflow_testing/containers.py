"""Build and locate the project's Apptainer images for tests.

The core image (containers/core.def: the core package plus Snakemake, no torch) is what the suite
builds: a few minutes, cached in ``~/.cache/pmcflow/containers`` under a key of everything that goes
into it (definition, lock, pyproject, the package source), so an unchanged tree reuses it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("PMCFLOW_CONTAINER_CACHE", Path.home() / ".cache" / "pmcflow" / "containers"))
FALLBACK_MIRROR = "http://deb.debian.org/debian/"


def apptainer() -> str | None:
    return shutil.which("apptainer") or shutil.which("singularity")


def _inputs_key(name: str) -> str:
    h = hashlib.sha256()
    files = [REPO / "containers" / f"{name}.def", REPO / "requirements/lock.txt", REPO / "pyproject.toml",
             REPO / "README.md"]
    files += sorted(p for p in (REPO / "src").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in files:
        h.update(p.relative_to(REPO).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=20):
            return True
    except Exception:  # noqa: BLE001 - any failure means "not reachable from here"
        return False


def pinned_mirror(name: str) -> str:
    for line in (REPO / "containers" / f"{name}.def").read_text().splitlines():
        if line.strip().startswith("DEBIAN_MIRROR="):
            return line.split("=", 1)[1].strip()
    raise ValueError(f"containers/{name}.def has no DEBIAN_MIRROR argument")


def build(name: str = "core", log: Path | None = None) -> Path:
    """containers/<name>.def built (or reused from the cache) with scripts/setup/build_image.sh.
    Uses the definition's pinned snapshot when it is reachable, else a plain mirror of the same
    suite (build_image.sh's DEBIAN_MIRROR override). Raises on a failed build."""
    out = CACHE / f"{name}-{_inputs_key(name)}.sif"
    if out.is_file():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if not _reachable(pinned_mirror(name).rstrip("/") + "/dists/bookworm/Release"):
        env["DEBIAN_MIRROR"] = FALLBACK_MIRROR
    tmp = out.with_suffix(".sif.part")
    with open(log or os.devnull, "w") as fh:
        proc = subprocess.run(
            ["scripts/setup/build_image.sh", name, str(tmp)], cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT
        )
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        tail = Path(log).read_text()[-4000:] if log else ""
        raise RuntimeError(f"building containers/{name}.def failed (exit {proc.returncode}):\n{tail}")
    tmp.rename(out)
    for old in CACHE.glob(f"{name}-*.sif"):  # keep only the current build
        if old != out:
            old.unlink(missing_ok=True)
    return out
