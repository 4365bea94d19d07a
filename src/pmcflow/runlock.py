"""One writer per results folder and per download cache: a lock file naming its owner.

``<dir>/.pmcflow.lock`` holds JSON with the owner's host, pid, start time and command.  It is
created with ``O_CREAT | O_EXCL`` (atomic on local and NFSv3+ filesystems).  A second run that finds
it exits at once with a message naming the owner.  A lock whose owner is on this host and no longer
running is stale: it is replaced, with a warning.  A lock owned by another host cannot be checked
from here: ``pmcflow unlock`` removes it once the user knows that run is gone.

Snakemake's own lock (``.snakemake/locks``) covers one working directory; this one covers the
folders themselves, so two working directories configured with the same ``paths.results`` or the
same cache cannot write into each other.

Standard library only: the Snakefile loads this file directly (see ``rules/common.smk``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_NAME = ".pmcflow.lock"


class LockHeld(RuntimeError):
    """Another live run holds the lock."""


def lock_path(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / LOCK_NAME


def read_owner(path: str | os.PathLike[str]) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def is_stale(owner: dict | None) -> bool:
    """True when the owner is on this host and its process is gone (or the file is unreadable)."""
    if owner is None:
        return True
    return owner.get("host") == socket.gethostname() and not pid_alive(int(owner.get("pid", -1)))


def describe(owner: dict | None) -> str:
    if not owner:
        return "an unreadable lock file"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(owner.get("started", 0))))
    return f"pid {owner.get('pid')} on {owner.get('host')} since {started} ({owner.get('command', '?')})"


def _held_message(directory: Path, what: str, owner: dict | None) -> str:
    return (
        f"the {what} {directory} is in use by another pmcflow run: {describe(owner)}. "
        f"Wait for it to finish; if it is gone (e.g. killed on another host), remove the lock "
        f"with `pmcflow unlock {directory}`."
    )


def held_by_other(directory: str | os.PathLike[str], what: str = "folder") -> str | None:
    """The refusal message when a live process other than this one holds ``directory``'s lock.

    The workflow calls this while it is parsed, before it builds its plan, so a second run stops
    before it reads anything the first run is writing.
    """
    owner = read_owner(lock_path(directory))
    if owner is None or is_stale(owner):
        return None
    if owner.get("host") == socket.gethostname() and int(owner.get("pid", -1)) == os.getpid():
        return None
    return _held_message(Path(directory), what, owner)


class RunLock:
    """``with RunLock(dir, what="results folder"):`` or ``acquire()`` / ``release()``."""

    def __init__(self, directory: str | os.PathLike[str], what: str = "folder") -> None:
        self.directory = Path(directory)
        self.path = lock_path(directory)
        self.what = what
        self.held = False
        self.replaced_stale: dict | None = None

    def _owner_record(self) -> dict:
        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": round(time.time(), 3),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300],
        }

    def acquire(self) -> RunLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = read_owner(self.path)
                if owner and owner.get("host") == socket.gethostname() and int(owner.get("pid", -1)) == os.getpid():
                    self.held = True  # re-entrant within one process
                    return self
                if is_stale(owner):
                    self.replaced_stale = owner
                    with contextlib.suppress(FileNotFoundError):
                        self.path.unlink()
                    continue
                raise LockHeld(_held_message(self.directory, self.what, owner)) from None
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self._owner_record(), fh, sort_keys=True)
                fh.write("\n")
            self.held = True
            return self
        raise LockHeld(f"could not take the lock {self.path} (it keeps reappearing)")

    def release(self) -> None:
        if not self.held:
            return
        owner = read_owner(self.path)
        if owner and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self.held = False

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def locked(*dirs: tuple[str | os.PathLike[str], str]) -> Iterator[list[RunLock]]:
    """Hold several locks (``(directory, what)`` pairs) for the duration of a block."""
    held: list[RunLock] = []
    try:
        for d, what in dirs:
            held.append(RunLock(d, what).acquire())
        yield held
    finally:
        for lk in reversed(held):
            lk.release()


def force_unlock(directory: str | os.PathLike[str]) -> dict | None:
    """Remove a lock (``pmcflow unlock``); returns the owner it named, or None if there was none."""
    p = lock_path(directory)
    owner = read_owner(p)
    if not p.exists():
        return None
    p.unlink()
    return owner or {}
