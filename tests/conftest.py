"""Shared test configuration: offline model hubs, headless plotting, markers for GPU/Slurm."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# Test scaffolding (workflow copies, the local Slurm cluster, toy datasets) is not part of the
# installed package: tests/support/pmcflow_testing.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

# Nothing may be downloaded from a model hub; make every library fail fast instead of hanging.
for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "YOLO_OFFLINE": "1",
    "YOLO_AUTOINSTALL": "0",
    "MPLBACKEND": "Agg",
    "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_k, _v)

# Ultralytics writes its settings file at import: into one folder for the session, removed at exit
# (not ~/.config, and not a folder per test module left behind in /tmp).
if "YOLO_CONFIG_DIR" not in os.environ:
    os.environ["YOLO_CONFIG_DIR"] = tempfile.mkdtemp(prefix="pmcflow-yolo-cfg-")
    atexit.register(shutil.rmtree, os.environ["YOLO_CONFIG_DIR"], ignore_errors=True)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


def _has_cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _has_cuda():
        skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (none present)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)
