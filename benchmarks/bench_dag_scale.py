#!/usr/bin/env python3
"""How long Snakemake takes to build the production DAG for N PMC article versions.

For each N, a temp copy of the workflow gets a listing as the list_articles checkpoint writes it
(results/listing/listing.parquet with pmcflow.schema.LISTING, chunks.json from
pmcflow.chunks.chunk_manifest, empty rejections, counts), PMCIDs spread evenly over PMC1..PMC12.5M
like today's OA set. Nothing is downloaded. Then ``snakemake -n --quiet rules`` with the
production config (config/config.yaml) builds the whole DAG; wall time, peak RSS (wait4) and the
job count are recorded.

    .venv/bin/python benchmarks/bench_dag_scale.py                 # 10k, 100k, 1M, 7M at span 10000
    .venv/bin/python benchmarks/bench_dag_scale.py --n 10000 --span 1000 10000

Results: benchmarks/results/dag_scale.json and dag_scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests" / "support"))  # pmcflow_testing: toy data, workflow copies

from pmcflow_testing import workflow as wf  # noqa: E402

from pmcflow import schema as S  # noqa: E402
from pmcflow.chunks import chunk_digest, chunk_of  # noqa: E402

MAX_PMCID = 12_500_000
OUT = REPO / "benchmarks" / "results"


def write_listing(results: Path, n: int, span: int) -> int:
    """Write the checkpoint's four outputs for ``n`` article versions; return the chunk count."""
    d = results / "listing"
    d.mkdir(parents=True, exist_ok=True)
    step = MAX_PMCID / n
    manifest: dict[str, dict] = {}
    writer = pq.ParquetWriter(d / "listing.parquet", S.LISTING)
    batch: list[dict] = []
    cur_chunk, cur_rows = None, []

    def close_chunk():
        if cur_chunk is not None:
            manifest[cur_chunk] = {"n": len(cur_rows), "digest": chunk_digest(cur_rows)}

    for i in range(n):
        num = 1 + int(i * step)
        chunk = chunk_of(num, span)
        uid = f"PMC{num}.1"
        row = {
            "article_uid": uid,
            "pmcid": f"PMC{num}",
            "pmcid_num": num,
            "version": 1,
            "source": "cloud",
            "key": f"metadata/{uid}.json",
            "chunk": chunk,
            "license_code": "CC BY",
            "is_retracted": False,
            "pmid": None,
            "citation": None,
            "last_updated": "2026-04-14",
        }
        if chunk != cur_chunk:
            close_chunk()
            cur_chunk, cur_rows = chunk, []
        cur_rows.append(row)
        batch.append(row)
        if len(batch) >= 200_000:
            writer.write_table(pa.Table.from_pylist(batch, S.LISTING))
            batch = []
    close_chunk()
    if batch:
        writer.write_table(pa.Table.from_pylist(batch, S.LISTING))
    writer.close()
    (d / "chunks.json").write_text(json.dumps({"chunks": manifest}, sort_keys=True))
    pq.write_table(pa.Table.from_pylist([], S.REJECTIONS), d / "rejections.parquet")
    (d / "counts.json").write_text(json.dumps({"stage": "listing", "in": n, "kept": n, "rejected": 0}))
    return len(manifest)


def time_dry_run(work: Path, configfile: Path, timeout: int) -> dict:
    cmd = [
        "timeout", str(timeout), wf.SNAKEMAKE, "-n", "--quiet", "rules", "--cores", "1",
        "--workflow-profile", "none", "--configfile", str(configfile),
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=work, env=wf.run_env(work), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    secs = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    m = re.search(r"^total\s+(\d+)\s*$", out, re.M)
    return {
        "seconds": round(secs, 2),
        "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),  # of `timeout`'s child tree's largest process
        "jobs": int(m.group(1)) if m else None,
        "rc": rc,
        "tail": "" if rc == 0 else out[-1500:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[10_000, 100_000, 1_000_000, 7_000_000])
    ap.add_argument("--span", type=int, nargs="+", default=[10_000])
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    rows = []
    base = Path(tempfile.mkdtemp(prefix="pmcflow-dagscale-"))
    try:
        work = wf.copy_workflow(REPO, base / "wf")
        for span in args.span:
            for n in args.n:
                results = base / f"results-{span}-{n}"
                t0 = time.perf_counter()
                n_chunks = write_listing(results, n, span)
                gen = time.perf_counter() - t0
                cfg = base / f"cfg-{span}-{n}.yaml"
                prod = (REPO / "config" / "config.yaml").read_text()
                prod = re.sub(r"(?m)^chunking:\n(\s+pmcid_span:.*\n)?", "", prod)
                cfg.write_text(
                    prod + f"\nchunking:\n  pmcid_span: {span}\npaths:\n  results: {results}\n"
                    f"  resources: {base}/resources\n  logs: {base}/logs\n"
                )
                r = time_dry_run(work, cfg, args.timeout)
                row = {
                    "articles": n,
                    "pmcid_span": span,
                    "chunks": n_chunks,
                    "listing_seconds": round(gen, 1),
                    **r,
                }
                print(json.dumps({k: v for k, v in row.items() if k != "tail"}), flush=True)
                if r["rc"] != 0:
                    print(r["tail"], file=sys.stderr)
                rows.append(row)
                shutil.rmtree(results, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "what": "snakemake -n DAG build, production config, synthetic listing (no downloads)",
        "cpus": os.cpu_count(),
        "snakemake": subprocess.run(
            [wf.SNAKEMAKE, "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "rows": rows,
    }
    (args.out / "dag_scale.json").write_text(json.dumps(meta, indent=2) + "\n")
    lines = [
        "| articles | pmcid_span | chunks | jobs | DAG build (s) | peak RSS (MB) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['articles']:,} | {r['pmcid_span']:,} | {r['chunks']:,} | {r['jobs'] or 'n/a'} | "
            f"{r['seconds'] if r['rc'] == 0 else 'failed/timeout'} | {r['peak_rss_mb']} |"
        )
    (args.out / "dag_scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
