"""``pmcflow sources check``: can a sources file feed the render of every split?

Reads a sources file (:func:`pmcflow.synth.sources.load_sources_file`, either format), decodes every
image of the datasets the chosen splits use once, with the decoder and checks the render uses
(:meth:`pmcflow.synth.sources.SourcePool.load`: :func:`~pmcflow.synth.sources.decode_image` then
:func:`~pmcflow.synth.sources.check_image`), and reports per dataset (files, usable, rejected by
reason, licence) and per split and modality (datasets, files, usable).

The check fails (exit status 1) when the file does not parse (an unknown split or key, a missing
``path`` or ``licence``, ...), when a path does not exist, when a split has no dataset for one of
the file's modalities, when a dataset has no usable image, or when a split/modality the render
needs has no usable image.  An old-format file (``{modality: [paths]}``) records no licences: that
is a warning, not a failure, since the render accepts it.

Images are decoded one at a time in chunks of :data:`CHUNK` (nothing but counts is kept), so memory
does not grow with the number of files; ``--workers N`` decodes chunks in N processes, each of
which lists the dataset's files itself (only chunk bounds and counts cross processes).  The
counts do not depend on the number of workers.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from pmcflow.progress import Progress
from pmcflow.synth.sources import (
    DEFAULT_MAX_PIXELS,
    DEFAULT_MIN_SIDE,
    SPLITS,
    DatasetSource,
    SourcePool,
    SourceRef,
    SourcesFileError,
    SourcesSpec,
    duplicate_id_problem,
    first_duplicate_id,
    load_sources_file,
    refs_from_entry,
)

CHUNK = 256  # images per unit of work (and per progress update)
EXAMPLES = 5  # rejected images listed per dataset (the first by source id)


@dataclass
class Tally:
    """Decode results of some images of one dataset; tallies of disjoint chunks add up."""

    files: int = 0
    usable: int = 0
    converted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    examples: list[tuple[str, str, str]] = field(default_factory=list)  # (source id, reason, detail)

    def add(self, other: Tally) -> None:
        """Add ``other`` (a disjoint chunk) to this tally; keeps the first examples by source id."""
        self.files += other.files
        self.usable += other.usable
        self.converted += other.converted
        self.rejected.update(other.rejected)
        self.examples = sorted(self.examples + other.examples)[:EXAMPLES]


def tally_refs(refs: Sequence[SourceRef], *, max_side: int, min_side: int = DEFAULT_MIN_SIDE) -> Tally:
    """Decode and check each of ``refs`` once, as the render would; keeps no image."""
    tally = Tally(files=len(refs))
    if not refs:
        return tally
    pool = SourcePool({refs[0].modality: list(refs)}, max_side=max_side, min_side=min_side, cache_size=0)
    for ref in refs:
        if pool.load(ref) is not None:
            tally.usable += 1
    for sid, (_, reason, detail) in sorted(pool.rejections.items()):
        tally.rejected[reason] += 1
        if len(tally.examples) < EXAMPLES:
            tally.examples.append((sid, reason, " ".join(detail.split())[:200]))
    tally.converted = len(pool.conversions)
    return tally


def dataset_refs(
    ds: DatasetSource, *, max_side: int, max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[list[SourceRef], list[str]]:
    """The sources of ``ds`` under its existing paths, and the problems of its paths.

    Ids are the ones the render uses (:func:`pmcflow.synth.sources.refs_for_dataset`); a missing or
    unreadable path is reported instead of raised so that every dataset gets checked.
    """
    refs: list[SourceRef] = []
    problems: list[str] = []
    dataset = None if ds.legacy else ds.name
    what = f"dataset {ds.name!r}" if not ds.legacy else f"modality {ds.modality!r}"
    for path in ds.paths:
        if not path.exists():
            problems.append(f"{what}: path does not exist: {path}")
            continue
        try:
            refs += refs_from_entry(
                path,
                ds.modality,
                max_pixels=max_pixels,
                draft_side=max_side,
                prefix=ds.id_prefix,
                dataset=dataset,
            )
        except (OSError, ValueError) as e:  # e.g. a Parquet file without an image or path column
            problems.append(f"{what}: cannot list images of {path}: {' '.join(str(e).split())}")
    dup = None if ds.legacy else first_duplicate_id(refs)
    if dup is not None:
        problems.append(duplicate_id_problem(ds, dup))
    return refs, problems


# ----------------------------------------------------------------------------------------------
# worker processes
# ----------------------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}  # per process: datasets by name, sizes, and the refs of the last dataset


def _init_worker(datasets: dict[str, DatasetSource], max_side: int, max_pixels: int) -> None:
    _WORKER.update(datasets=datasets, max_side=max_side, max_pixels=max_pixels, name=None, refs=[])


def _tally_task(name: str, start: int, stop: int) -> tuple[str, Tally]:
    """Decode images ``start:stop`` of dataset ``name`` in a worker (lists its files once)."""
    if _WORKER["name"] != name:
        refs, _ = dataset_refs(
            _WORKER["datasets"][name], max_side=_WORKER["max_side"], max_pixels=_WORKER["max_pixels"]
        )
        _WORKER.update(name=name, refs=refs)
    return name, tally_refs(_WORKER["refs"][start:stop], max_side=_WORKER["max_side"])


def _chunks(n: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, CHUNK):
        yield start, min(n, start + CHUNK)


# ----------------------------------------------------------------------------------------------
# the check
# ----------------------------------------------------------------------------------------------


def check_sources(
    spec: SourcesSpec,
    splits: Sequence[str] | None = None,
    *,
    max_side: int = 512,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    workers: int = 1,
) -> dict[str, Any]:
    """Check ``spec`` for rendering ``splits`` (default: all); returns the report as a JSON-ready dict.

    ``report["ok"]`` is False when ``report["problems"]`` is not empty.  ``max_side`` is the long
    side of the render's canvas (the decoder reduces JPEGs towards it, as the render does).
    """
    splits = list(dict.fromkeys(splits)) if splits else list(SPLITS)
    problems = spec.coverage_problems(splits)
    warnings: list[str] = []
    if not spec.datasets:
        problems.append("the file names no sources")
    if spec.legacy and spec.datasets:
        warnings.append(
            "old format {modality: [paths]}: every split uses every source and no licence is recorded; the datasets format names both"
        )
    needed = sorted(
        {ds.name: ds for s in splits if s in SPLITS for ds in spec.for_split(s)}.values(),
        key=lambda d: d.name,
    )

    tallies: dict[str, Tally] = {ds.name: Tally() for ds in needed}
    sizes: dict[str, int] = {}
    bad_paths: set[str] = set()
    for ds in needed:  # list every dataset first (cheap next to decoding): the bar's total
        refs, path_problems = dataset_refs(ds, max_side=max_side, max_pixels=max_pixels)
        problems += path_problems
        sizes[ds.name] = len(refs)
        if path_problems:
            bad_paths.add(ds.name)
        del refs
    total = sum(sizes.values())
    with Progress(total, desc="sources check", unit="image") as bar:
        if workers <= 1:
            for ds in needed:
                refs, _ = dataset_refs(ds, max_side=max_side, max_pixels=max_pixels)
                for start, stop in _chunks(len(refs)):
                    tallies[ds.name].add(tally_refs(refs[start:stop], max_side=max_side))
                    bar.update(stop - start)
                del refs
        else:
            ctx = multiprocessing.get_context("spawn")
            by_name = {ds.name: ds for ds in needed}
            with ProcessPoolExecutor(
                workers, mp_context=ctx, initializer=_init_worker, initargs=(by_name, max_side, max_pixels)
            ) as ex:
                futures = [
                    ex.submit(_tally_task, ds.name, a, b) for ds in needed for a, b in _chunks(sizes[ds.name])
                ]
                for fut in as_completed(futures):
                    name, t = fut.result()
                    tallies[name].add(t)
                    bar.update(t.files)

    datasets: dict[str, Any] = {}
    for ds in needed:
        t = tallies[ds.name]
        rec = ds.to_record()
        rec.update(
            files=t.files,
            usable=t.usable,
            rejected=dict(sorted(t.rejected.items())),
            converted=t.converted,
            rejected_examples=[{"source_id": s, "reason": r, "detail": d} for s, r, d in t.examples],
        )
        datasets[ds.name] = rec
        if t.usable == 0 and not (
            t.files == 0 and ds.name in bad_paths
        ):  # a missing path is reported already
            kind = (
                "no image files under its paths"
                if t.files == 0
                else f"none of its {t.files} images is usable"
            )
            problems.append(f"dataset {ds.name!r}: {kind}")

    per_split: dict[str, dict[str, Any]] = {}
    for split in splits:
        if split not in SPLITS:
            continue
        rows: dict[str, Any] = {}
        for m in spec.modalities:
            members = [ds for ds in spec.for_split(split) if ds.modality == m]
            files = sum(tallies[ds.name].files for ds in members)
            usable = sum(tallies[ds.name].usable for ds in members)
            rows[m] = {"datasets": [ds.name for ds in members], "files": files, "usable": usable}
            if members and usable == 0:
                problems.append(
                    f"split {split!r}, modality {m!r}: no usable image (datasets: {', '.join(ds.name for ds in members)})"
                )
        per_split[split] = rows

    return {
        "file": spec.origin,
        "format": "modalities" if spec.legacy else "datasets",
        "splits": splits,
        "max_side": max_side,
        "images_checked": total,
        "datasets": datasets,
        "split_modalities": per_split,
        "warnings": warnings,
        "problems": problems,
        "ok": not problems,
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], right: Iterable[int] = ()) -> list[str]:
    """Rows as aligned text columns (indented two spaces); columns in ``right`` are right-aligned."""
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[k]) for r in cells) for k in range(len(header))]
    align = set(right)
    out = []
    for r in cells:
        parts = [c.rjust(widths[k]) if k in align else c.ljust(widths[k]) for k, c in enumerate(r)]
        out.append("  " + "  ".join(parts).rstrip())
    return out


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_report(report: dict[str, Any]) -> str:
    """The report as text tables (what ``pmcflow sources check`` prints without ``--json``)."""
    lines = [
        f"sources file {report['file']} ({report['format']} format); splits {', '.join(report['splits'])}; "
        f"panels up to {report['max_side']} px; {report['images_checked']} images decoded",
    ]
    datasets = report.get("datasets", {})
    if datasets:
        rows = [
            (
                name,
                d["modality"],
                ",".join(d["splits"]),
                d["files"],
                d["usable"],
                ", ".join(f"{r} {n}" for r, n in d["rejected"].items()) or "-",
                _short(d["licence"] or "(not recorded)", 72),
            )
            for name, d in datasets.items()
        ]
        lines += [
            "",
            "datasets",
            *_table(
                ("dataset", "modality", "splits", "files", "usable", "rejected", "licence"),
                rows,
                right=(3, 4),
            ),
        ]
        examples = [e for d in datasets.values() for e in d["rejected_examples"]]
        if examples:
            lines += ["", "rejected images (the first few of each dataset)"]
            lines += [f"  {e['source_id']}: {e['reason']} ({e['detail']})" for e in examples]
        split_rows = [
            (split, m, row["files"], row["usable"], ", ".join(row["datasets"]) or "-")
            for split, by_modality in report.get("split_modalities", {}).items()
            for m, row in by_modality.items()
        ]
        lines += [
            "",
            "splits",
            *_table(("split", "modality", "files", "usable", "datasets"), split_rows, right=(2, 3)),
        ]
    for wtext in report.get("warnings", []):
        lines += ["", f"warning: {wtext}"]
    problems = report.get("problems", [])
    if problems:
        lines += ["", f"FAILED: {len(problems)} problem{'s' if len(problems) != 1 else ''}"]
        lines += [f"  - {p}" for p in problems]
    else:
        lines += ["", "OK: every split checked has usable images of every modality"]
    return "\n".join(lines)


def _parse_error_report(err: SourcesFileError, splits: Sequence[str] | None) -> dict[str, Any]:
    return {
        "file": err.origin,
        "splits": list(splits or SPLITS),
        "problems": err.problems,
        "warnings": [],
        "ok": False,
    }


def cli(argv: Sequence[str] | None = None) -> int:
    """``pmcflow sources check FILE [--split S] [--size N] [--workers N] [--json]``."""
    ap = argparse.ArgumentParser(
        prog="pmcflow sources", description="Synthetic-figure sources files (synth.sources)."
    )
    sub = ap.add_subparsers(dest="action", required=True)
    chk = sub.add_parser(
        "check",
        help="decode every image once; report usable/rejected per dataset and per split/modality",
        description="Check a sources file: datasets, licences, paths, and usable images per split and modality. "
        "Exit status 1 when the render of a checked split would lack images of a modality, a path is missing, or the file is invalid.",
    )
    chk.add_argument("file", help="YAML/JSON sources file ({datasets: {...}} or {modality: [paths]})")
    chk.add_argument(
        "--split", action="append", choices=SPLITS, help="check only this split (repeatable); default: all"
    )
    chk.add_argument(
        "--size",
        default="512",
        help="the render's canvas, 512 or WxH (its long side limits decoding); default 512",
    )
    chk.add_argument("--workers", type=int, default=1, help="decode in this many processes (default 1)")
    chk.add_argument("--json", action="store_true", help="print the report as one JSON object on stdout")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.workers < 1:
        ap.error("--workers must be >= 1")
    from pmcflow.synth.render import parse_size

    try:
        max_side = max(parse_size(args.size))
    except ValueError:
        ap.error(f"--size: expected 512 or WxH, got {args.size!r}")
    try:
        spec = load_sources_file(args.file)
    except SourcesFileError as e:
        report = _parse_error_report(e, args.split)
    else:
        report = check_sources(
            spec, args.split, max_side=max_side, workers=min(args.workers, os.cpu_count() or 1)
        )
    if args.json:
        json.dump(report, sys.stdout, indent=2, sort_keys=True, ensure_ascii=False)
        sys.stdout.write("\n")
    elif "datasets" in report:
        print(format_report(report))
    else:
        print(f"sources file {report['file']} is invalid:", file=sys.stderr)
        for p in report["problems"]:
            print(f"  - {p}", file=sys.stderr)
    return 0 if report["ok"] else 1
