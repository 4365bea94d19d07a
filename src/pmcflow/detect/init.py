"""Where a detector's starting weights come from: ``init`` (and ``init_file``) of every backend.

``init`` is one of

* empty or ``none``: random initialisation (the architecture comes from the backend's preset or
  model yaml);
* a local path: a checkpoint file (ultralytics ``.pt``, mmdet ``.pth``) or a transformers model
  directory (``config.json`` + weights; a directory this workflow trained, with its ``model/``
  subdirectory, works too);
* a Hugging Face hub repo id (``IDEA-Research/dab-detr-resnet-50-dc5``, as seed 000 fine-tunes).
  The transformers backend loads the whole repo; ultralytics and mmdet load one file of it, named
  by ``init_file`` (``yolov8s.pt``).  Hub files are read through ``huggingface_hub`` from the
  cache the Hugging Face libraries use (offline when ``HF_HUB_OFFLINE`` is set, as on compute
  nodes): fetch them once with ``pmcflow fetch-models``, which reads the same keys
  (:func:`pmcflow.modelcache.requested`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pmcflow.modelcache import FETCH_COMMAND, hub_cache_dir, is_hub_id

NONE_VALUES = frozenset({"", "none", "null", "random"})
_TRUE = frozenset({"1", "on", "yes", "true"})


class InitError(ValueError):
    """An ``init`` that cannot be loaded: the message names the setting and the fix."""


@dataclass(frozen=True)
class InitSpec:
    """A parsed ``init`` setting: ``kind`` is ``none``, ``local`` or ``hub``."""

    source: str
    kind: str
    path: Path | None = None
    repo_id: str | None = None
    filename: str | None = None
    revision: str | None = None

    def to_record(self) -> dict[str, Any]:
        """What a checkpoint's metadata records about its starting weights."""
        rec: dict[str, Any] = {"init": self.source or None, "init_kind": self.kind}
        if self.filename:
            rec["init_file"] = self.filename
        if self.revision:
            rec["init_revision"] = self.revision
        return rec


def parse_init(init: Any, init_file: Any = "", revision: Any = "", *, backend: str = "") -> InitSpec:
    """Parse ``init`` / ``init_file`` / ``init_revision``; raises :class:`InitError` on a bad combination."""
    source = "" if init is None else str(init).strip()
    filename = "" if init_file is None else str(init_file).strip()
    rev = "" if revision is None else str(revision).strip()
    where = f"detector.params.{backend}" if backend else "detector params"
    if source.lower() in NONE_VALUES:
        if filename:
            raise InitError(f"{where}.init_file={filename!r} needs an init (a hub repo id)")
        return InitSpec(source="", kind="none")
    path = Path(os.path.expanduser(source))
    if path.exists():
        if filename:
            raise InitError(f"{where}.init_file is only for a hub repo; init {source!r} is a local path")
        return InitSpec(source=source, kind="local", path=path)
    if is_hub_id(source):
        if backend in ("ultralytics", "mmdet") and not filename:
            raise InitError(
                f"{where}.init={source!r} is a hub repo: set {where}.init_file to the checkpoint file "
                "inside it (e.g. yolov8s.pt)"
            )
        return InitSpec(
            source=source, kind="hub", repo_id=source, filename=filename or None, revision=rev or None
        )
    raise InitError(f"{where}.init={source!r}: no such file or directory, and not a hub repo id")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def _hub_error(spec: InitSpec, exc: Exception) -> InitError:
    what = f"{spec.repo_id}/{spec.filename}" if spec.filename else str(spec.repo_id)
    return InitError(
        f"detector init {what} is not in the Hugging Face cache ({hub_cache_dir()})"
        + (" and HF_HUB_OFFLINE is set" if _offline() else "")
        + f": fetch it once on a machine with internet with `{FETCH_COMMAND} --config <your config>` "
        f"({type(exc).__name__}: {exc})"
    )


def init_directory(spec: InitSpec) -> Path:
    """A transformers model directory (holding ``config.json``) for ``spec`` (local or hub)."""
    if spec.kind == "local":
        assert spec.path is not None
        for cand in (spec.path, spec.path / "model"):
            if (cand / "config.json").is_file():
                return cand
        raise InitError(f"detector init {spec.source}: no config.json in it (nor in its model/ subdirectory)")
    if spec.kind != "hub":
        raise InitError("detector init is none: there is no directory to load")
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(
            repo_id=str(spec.repo_id),
            revision=spec.revision,
            cache_dir=str(hub_cache_dir()),
            local_files_only=_offline(),
        )
    except Exception as exc:  # huggingface_hub raises several types (LocalEntryNotFound, HTTP errors)
        raise _hub_error(spec, exc) from exc
    return Path(folder)


def init_file(spec: InitSpec) -> Path:
    """A checkpoint file for ``spec`` (a local file, or ``init_file`` of a hub repo)."""
    if spec.kind == "local":
        assert spec.path is not None
        if not spec.path.is_file():
            raise InitError(
                f"detector init {spec.source} is a directory; this backend needs a checkpoint file"
            )
        return spec.path
    if spec.kind != "hub":
        raise InitError("detector init is none: there is no file to load")
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(
            repo_id=str(spec.repo_id),
            filename=str(spec.filename),
            revision=spec.revision,
            cache_dir=str(hub_cache_dir()),
            local_files_only=_offline(),
        )
    except Exception as exc:
        raise _hub_error(spec, exc) from exc
    return Path(path)
