"""``pmcflow outputs``: where a run's outputs are and what each stage kept and rejected."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pmcflow import layout as L
from pmcflow.config import add_config_args, config_from_args


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _one_of(*paths: str) -> str:
    """Files of one folder and suffix as one brace pattern: ``parse/<chunk>/{a,b}.parquet``."""
    folder, suffix = L.shown(paths[0]).rsplit("/", 1)[0], "." + _name(paths[0]).split(".", 1)[1]
    return f"{folder}/{{{','.join(_name(p).split('.', 1)[0] for p in paths)}}}{suffix}"


# Stage-level summaries in pipeline order: (stage, counts file relative to results/, main outputs),
# from the results layout (pmcflow.layout).
STAGES: list[tuple[str, str, str]] = [
    ("list", L.counts("list"), L.LISTING),
    ("acquire", L.counts("acquire"), L.shown(L.ACQUIRED)),
    ("parse", L.counts("parse"), _one_of(L.ARTICLES, L.FIGURES, L.MENTIONS)),
    ("decompose", L.counts("decompose"), f"{L.shown(L.SUBFIGURES)} (+ {_name(L.CROPS)}/)"),
    ("enrich", L.counts("enrich"), L.shown(L.ENRICHED)),
    ("filter", L.counts("filter"), L.shown(L.DATASET)),
    (
        "shard",
        L.counts("shard"),
        f"{L.SHARDS}/{{train,val,test}}/*.tar, {_name(L.SHARD_INDEX)}, {_name(L.SHARD_MANIFEST)}",
    ),
]


def collect(results: Path) -> list[dict[str, Any]]:
    rows = []
    for stage, counts_rel, outputs in STAGES:
        path = results / counts_rel
        if not path.is_file():
            continue
        rec = json.loads(path.read_text())
        rows.append(
            {
                "stage": stage,
                "in": rec["in"],
                "kept": rec["kept"],
                "rejected": sum(rec.get("rejected", {}).values()),
                "reasons": rec.get("rejected", {}),
                "pending": rec.get("pending") or {},
                "chunks": rec.get("n_chunks"),
                "outputs": str(results / outputs),
            }
        )
    return rows


def render(rows: list[dict[str, Any]], results: Path) -> str:
    if not rows:
        return f"no stage outputs under {results} yet"
    lines = [f"pmcflow outputs under {results}/", ""]
    head = f"{'stage':<10} {'in':>8} {'kept':>8} {'rejected':>9}  outputs"
    lines += [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['stage']:<10} {r['in']:>8} {r['kept']:>8} {r['rejected']:>9}  {r['outputs']}")
        for reason, n in sorted(r["reasons"].items()):
            lines.append(f"{'':<10} {'':>8} {'':>8} {n:>9}    - {reason}")
        for reason, n in sorted(r.get("pending", {}).items()):
            lines.append(f"{'':<10} {'':>8} {'':>8} {n:>9}    - pending retry: {reason} (the next run re-acquires)")
    return "\n".join(lines)


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pmcflow outputs", description=__doc__)
    add_config_args(parser)
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    args = parser.parse_args(argv)
    cfg = config_from_args(args)
    results = Path(cfg["paths"]["results"])
    rows = collect(results)
    print(json.dumps(rows, indent=2) if args.json else render(rows, results))
    return 0
