"""Cross-field configuration checks: what a JSON schema cannot say, checked before any job starts.

The schema (``config/schema/config.schema.yaml``) gives every key a type, a range or an enum; this
module adds the rules that tie keys together or look at the world: split fractions that sum to 1,
dates that exist and are in order, settings that contradict each other, input paths that resolve.
Each problem is one line starting with the key's full path.

Run on the validated config (defaults filled) by ``rules/common.smk`` (loaded from the workflow's
tree, standard library only) and by :func:`pmcflow.config.validate` for the CLI, so a bad value
fails at load time in both, never hours later inside a stage.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_DATE_RE = re.compile(r"^\s*(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?\s*$")


def _get(cfg: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = cfg
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def date_bound(text: Any) -> tuple[_dt.date, _dt.date] | None:
    """``YYYY[-MM[-DD]]`` -> ``(first day, last day)`` of the interval it names; empty -> None.

    A ValueError names the value when it is not a date that exists.  The one parser of date bounds:
    ``pmcflow.pmc.select`` selects with it, the workflow checks the config with it.
    """
    if text is None or not str(text).strip():
        return None
    m = _DATE_RE.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not YYYY, YYYY-MM or YYYY-MM-DD")
    y, mo, d = int(m.group(1)), m.group(2), m.group(3)
    if mo is None:
        return _dt.date(y, 1, 1), _dt.date(y, 12, 31)
    month = int(mo)
    if not 1 <= month <= 12:
        raise ValueError(f"{text!r}: month {month} does not exist")
    if d is None:
        return _dt.date(y, month, 1), _dt.date(y, month, calendar.monthrange(y, month)[1])
    try:
        day = _dt.date(y, month, int(d))
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None
    return day, day


def _local_path(value: str) -> Path:
    return Path(value[len("file://") :] if value.startswith("file://") else value)


def normalise(cfg: dict[str, Any]) -> dict[str, Any]:
    """Values YAML reads as something else than meant, turned back into what the schema expects.

    ``date_from: 2020`` (an int) and ``date_from: 2020-01-31`` (a ``datetime.date``) become strings.
    """
    select = cfg.get("select")
    if isinstance(select, dict):
        for key in ("date_from", "date_to"):
            v = select.get(key)
            if isinstance(v, int | _dt.date) and not isinstance(v, bool):
                select[key] = v.isoformat() if isinstance(v, _dt.date) else str(v)
    return cfg


def problems(cfg: Mapping[str, Any], base: str | os.PathLike[str] = ".") -> list[str]:
    """Every cross-field problem of ``cfg`` as ``"<key path>: <message>"`` (empty when fine).

    Relative paths resolve against ``base`` (the working directory of the run).
    """
    out: list[str] = []
    root = Path(base)

    # shard.splits: fractions of the groups -> they must cover all of them exactly once.
    splits = _get(cfg, "shard.splits")
    if isinstance(splits, Mapping) and splits:
        try:
            total = math.fsum(float(v) for v in splits.values())
        except (TypeError, ValueError):
            total = float("nan")
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            out.append(f"shard.splits: the fractions sum to {total:g}, not 1 ({dict(splits)})")

    # select.date_from / date_to: real dates, in order.
    bounds: dict[str, tuple[_dt.date, _dt.date] | None] = {}
    for key in ("date_from", "date_to"):
        try:
            bounds[key] = date_bound(_get(cfg, f"select.{key}"))
        except ValueError as e:
            out.append(f"select.{key}: {e}")
    lo = (bounds.get("date_from") or (None, None))[0]
    hi = (bounds.get("date_to") or (None, None))[1]
    if lo and hi and lo > hi:
        out.append(f"select.date_to: {hi} is before select.date_from {lo}")

    # Settings that contradict each other.
    if _get(cfg, "train.device") == "cpu" and _get(cfg, "train.precision") not in (None, "fp32"):
        out.append(
            f"train.precision: {_get(cfg, 'train.precision')!r} needs a GPU; use fp32 with train.device cpu"
        )
    http = _get(cfg, "http") or {}
    if http and float(http.get("backoff_max_s", math.inf)) < float(http.get("backoff_s", 0)):
        out.append("http.backoff_max_s: smaller than http.backoff_s")
    for key in ("synth.elements.jpeg_quality", "synth.elements.caption_lines"):
        rng = _get(cfg, key)  # [low, high] ranges the schema types but cannot order
        if (
            isinstance(rng, list)
            and len(rng) == 2
            and all(isinstance(v, int | float) for v in rng)
            and rng[0] > rng[1]
        ):
            out.append(f"{key}: low {rng[0]} is above high {rng[1]} (give [low, high])")
    aspects, panel_aspect = _get(cfg, "synth.canvas.aspect_range"), _get(cfg, "synth.canvas.panel_aspect")
    if isinstance(aspects, list) and len(aspects) == 2 and isinstance(panel_aspect, int | float):
        if not aspects[0] <= panel_aspect <= aspects[1]:
            out.append(
                f"synth.canvas.aspect_range: {aspects} must be [low, high] around panel_aspect {panel_aspect}"
            )
    if _get(cfg, "decompose.checkpoint") == "trained" and not _get(cfg, "detector.train"):
        out.append("decompose.checkpoint: 'trained' needs detector.train: true (or name a checkpoint)")

    # Input paths that must resolve before anything runs.
    if _get(cfg, "source.backend") == "local":
        mirror = _get(cfg, "source.local.root") or ""
        if not mirror:
            out.append("source.local.root: empty, but source.backend is local")
        elif not (root / _local_path(mirror)).exists():
            out.append(f"source.local.root: {mirror} does not exist")
    if _get(cfg, "source.backend") in ("cloud", "local") and _get(cfg, "source.cloud.listing") == "pmcids":
        pfile = _get(cfg, "source.cloud.pmcids_file") or ""
        if pfile and not (root / pfile).is_file():
            out.append(f"source.cloud.pmcids_file: {pfile} does not exist")
        if not pfile and not _get(cfg, "source.cloud.pmcids"):
            out.append("source.cloud.pmcids: listing is pmcids but neither pmcids nor pmcids_file is set")
    for i, ds in enumerate(_get(cfg, "evaluate.zero_shot.datasets") or []):
        p = ds.get("path") if isinstance(ds, Mapping) else None
        if p and not (root / p).exists():
            out.append(f"evaluate.zero_shot.datasets.{i}.path: {p} does not exist")
    return out
