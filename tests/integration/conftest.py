"""Fixtures shared by the integration modules."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pmcflow_testing import workflow as wf


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One finished demo run (CI overlay) in a throw-away copy of the workflow, shared by every
    module that reads a finished run (the DAG checks, the reports, the rerun triggers): the whole
    DAG takes minutes on two cores, so it runs once per session. Its outputs, logs and Snakemake's
    metadata all live in the copy under relative paths, so ``wf.clone_run`` can hand a module its
    own finished copy to edit. Readers must not change it; test_demo_workflow's byte-identity check
    reruns it in place and leaves the same bytes."""
    work = wf.copy_workflow(wf.REPO, tmp_path_factory.mktemp("demo") / "wf")
    # The enrichment report shows the splitter's stored benchmark scores, read from the workflow
    # directory as in the working tree (no rule reads it; tests/ and benchmarks/ are not copied).
    bench = Path("benchmarks/results/enrich.json")
    (work / bench).parent.mkdir(parents=True)
    shutil.copy2(wf.REPO / bench, work / bench)
    proc = wf.run_demo(work)
    if proc.returncode != 0:
        pytest.fail(f"snakemake failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return work
