"""``pmcflow outputs``: where a run's outputs are and what each stage kept and rejected."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pmcflow.config import add_config_args, config_from_args

# Stage-level summaries in pipeline order: (stage, counts file relative to results/, main outputs).
STAGES: list[tuple[str, str, str]] = [
    ("list", "listing/counts.json", "listing/listing.parquet"),
    ("acquire", "acquire/counts.json", "acquire/<chunk>/articles.parquet"),
    ("parse", "parse/counts.json", "parse/<chunk>/{articles,figures,mentions}.parquet"),
    ("decompose", "decompose/counts.json", "decompose/<chunk>/subfigures.parquet (+ crops/)"),
    ("enrich", "enrich/counts.json", "enrich/<chunk>/enriched.parquet"),
    ("filter", "filter/counts.json", "filter/<chunk>/dataset.parquet"),
    ("shard", "shards/counts.json", "shards/{train,val,test}/*.tar, index.parquet, manifest.json"),
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
