"""The one place ``auto`` devices are resolved: the stage runs on CUDA when the job got a GPU
(the scheduler's ``gpu`` resource, pmcflow.compute) and on CPU otherwise, so one configuration
runs on a GPU cluster and, as the production rehearsal does, on a machine without one."""

from __future__ import annotations


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; any other value unchanged."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
