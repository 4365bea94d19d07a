"""What "the same config and seed give the same bytes" means for a results tree, checkably.

Every output of a run is byte-identical to another run's with the same config and seed, in the same
directory (some records hold absolute paths), except:

* run logs with timestamps (:data:`RUN_LOGS`): the training logs and Ultralytics' ``results.csv``,
  and the two reports that plot training throughput;
* wall-clock fields inside otherwise reproducible records (:data:`TIMED`): compared with those
  fields left out.

:func:`snapshot` reduces a results tree to what must match, :func:`differences` compares two.
The crash-recovery and demo tests use them; so can anyone auditing a rerun.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pmcflow.detect.base import HISTORY_TIMING_KEYS
from pmcflow.detect.base import TIMING_KEYS as DETECTOR_TIMING_KEYS
from pmcflow.encoders.train import TIMING_COLUMNS, TIMING_KEYS
from pmcflow.retry import STAMP_DIR  # rerun stamps: workflow bookkeeping, not outputs
from pmcflow.runlock import LOCK_NAME  # the run lock, likewise
from pmcflow.tables import file_sha256

# The empty marker Snakemake writes into a directory output once its job finished: a run killed
# between the job's end and the marker leaves a complete folder without it.
SNAKEMAKE_TIMESTAMP = ".snakemake_timestamp"

RUN_LOGS = re.compile(
    r"^(encoders/[^/]+/train\.log"
    r"|encoders/[^/]+/openclip/[^/]+/out\.log"
    r"|detector/[^/]+/run/results\.csv"
    r"|reports/(detector|training)\.html)$"
)


def _encoder_steps(path: Path) -> Any:
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    return t.drop([c for c in TIMING_COLUMNS if c in t.column_names]).to_pylist()


def _encoder_record(path: Path) -> Any:
    return {k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k not in TIMING_KEYS}


def _detector_record(path: Path) -> Any:
    rec = {
        k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if k not in DETECTOR_TIMING_KEYS
    }
    rec["history"] = [
        {k: v for k, v in row.items() if k not in HISTORY_TIMING_KEYS} for row in rec.get("history") or []
    ]
    return rec


TIMED: dict[re.Pattern[str], Callable[[Path], Any]] = {
    re.compile(r"^encoders/[^/]+/steps\.parquet$"): _encoder_steps,
    re.compile(r"^encoders/[^/]+/train\.json$"): _encoder_record,
    re.compile(r"^detector/[^/]+/train\.json$"): _detector_record,
}




def snapshot(root: str | os.PathLike[str], skip: Iterable[str] = ()) -> dict[str, Any]:
    """{relative path: what must match} for every regular file under ``root``.

    Run logs map to ``None`` (present in both runs, content free); timed records to their content
    less the wall-clock fields; everything else to its sha256.  Paths starting with a ``skip``
    prefix, the run lock, the rerun stamps (``.stamps/``) and Snakemake's directory markers are left out.  Symlinked folders are not followed.
    """
    base = Path(root)
    prefixes = tuple(skip)
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(base).as_posix()
            if rel.startswith(prefixes) or p.is_symlink() or not p.is_file():
                continue
            if name in (LOCK_NAME, SNAKEMAKE_TIMESTAMP) or STAMP_DIR in p.relative_to(base).parts[:-1]:
                continue  # workflow bookkeeping (run lock, rerun stamps, Snakemake's marker), not outputs
            if RUN_LOGS.match(rel):
                out[rel] = None
                continue
            loader = next((f for rx, f in TIMED.items() if rx.match(rel)), None)
            out[rel] = loader(p) if loader is not None else file_sha256(p)
    return out


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Paths that are in one snapshot only, or whose content differs."""
    return sorted(p for p in set(a) | set(b) if p not in a or p not in b or a[p] != b[p])
