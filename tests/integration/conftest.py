"""Fixtures shared by the integration modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from pmcflow_testing import workflow as wf


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo run (CI overlay) into a temporary directory, shared by every module that reads a
    finished run (the DAG checks, the reports): the whole DAG takes minutes on two cores, so it runs
    once per session. Readers must not change it; test_demo_workflow's byte-identity check reruns
    it in place and leaves the same bytes."""
    out = tmp_path_factory.mktemp("demo")
    proc = wf.run_demo(*wf.demo_paths(out))
    if proc.returncode != 0:
        pytest.fail(f"snakemake failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return out
