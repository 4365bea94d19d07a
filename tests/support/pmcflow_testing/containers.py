"""Build and locate the project's Apptainer images for tests.

The core image (containers/core.def: the core package plus Snakemake, no torch) is what the suite
builds: a few minutes, cached in ``~/.cache/pmcflow/containers`` under a key of everything that goes
into it (definition, lock, pyproject, the package source), so an unchanged tree reuses it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
CACHE = Path(os.environ.get("PMCFLOW_CONTAINER_CACHE", Path.home() / ".cache" / "pmcflow" / "containers"))


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


def check_containers_module() -> Any:
    """scripts/setup/check_containers.py as a module (definition parser, mirror probe)."""
    name = "check_containers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "scripts/setup/check_containers.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
    return sys.modules[name]


def build(name: str = "core", log: Path | None = None) -> Path:
    """containers/<name>.def built (or reused from the cache) with scripts/setup/build_image.sh.
    Uses the definition's pinned snapshot when it is reachable, else a plain mirror of the same
    suite (build_image.sh's DEBIAN_MIRROR override). Raises on a failed build."""
    out = CACHE / f"{name}-{_inputs_key(name)}.sif"
    if out.is_file():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    cc = check_containers_module()
    pinned = cc.parse_def(REPO / "containers" / f"{name}.def").header["mirrorurl"]
    if not cc._reachable(pinned):
        env["DEBIAN_MIRROR"] = cc.FALLBACK_MIRROR
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
