"""Download throughput of pmcflow's HTTP client vs a plain ``requests.get`` loop.

Same files, same run, same loopback mock server (pmcflow.pmc.mockserver): each mode downloads every
file of a generated bucket into its own directory; modes are interleaved and repeated, and the
median time is reported.

Modes
  plain-get        requests.get(url) per file, body written to disk (no verification)
  plain-session    one requests.Session, streamed to disk (no verification)
  pmcflow          HttpClient.download: .part file, md5 + size verification, atomic rename, no rate limit
  pmcflow-rate     the same with the token-bucket rate limit on (--rate, default 50 req/s)
  pmcflow-cached   a second pass over pmcflow's files: verified files are not fetched again

Usage:  .venv/bin/python benchmarks/bench_download.py [--files 200] [--size-kb 256] [--repeats 3]
Writes benchmarks/results/download.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import requests

from pmcflow.pmc.http import HttpClient, HttpSettings
from pmcflow.pmc.mockserver import MockPMCServer


def make_bucket(root: Path, n: int, size: int, seed: int = 0) -> list[tuple[str, str, int]]:
    """n files of ``size`` bytes (deterministic pseudo-random) -> [(key, md5, size)]."""
    files = []
    rng = random.Random(seed)
    for i in range(n):
        key = f"PMC{1000 + i}.1/fig{i:04d}.jpg"
        data = rng.randbytes(size)
        p = root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        files.append((key, hashlib.md5(data).hexdigest(), size))
    return files


def run_plain_get(url: str, files: list[tuple[str, str, int]], out: Path) -> None:
    for key, _, _ in files:
        r = requests.get(f"{url}/{key}", timeout=30)
        r.raise_for_status()
        dest = out / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(r.content)


def run_plain_session(url: str, files: list[tuple[str, str, int]], out: Path) -> None:
    with requests.Session() as s:
        for key, _, _ in files:
            with s.get(f"{url}/{key}", stream=True, timeout=30) as r:
                r.raise_for_status()
                dest = out / key
                dest.parent.mkdir(parents=True, exist_ok=True)
                with open(dest, "wb") as fh:
                    for chunk in r.iter_content(1 << 16):
                        fh.write(chunk)


def run_client(url: str, files: list[tuple[str, str, int]], out: Path, rate: float | None) -> None:
    settings = replace(HttpSettings.from_section({}), rate_limit_per_s=rate, retries=3, timeout_s=30)
    with HttpClient(settings) as c:
        for key, md5, size in files:
            c.download(f"{url}/{key}", out / key, md5=md5, size=size)


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size-kb", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rate", type=float, default=50.0, help="rate limit for pmcflow-rate (req/s)")
    ap.add_argument("--rate-files", type=int, default=50, help="files in the rate-limited mode")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "download.json"))
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="bench-download-"))
    try:
        files = make_bucket(work / "bucket", args.files, args.size_kb * 1024)
        total = sum(f[2] for f in files)
        rate_files = files[: args.rate_files]
        times: dict[str, list[float]] = {m: [] for m in
                                         ("plain-get", "plain-session", "pmcflow", "pmcflow-cached", "pmcflow-rate")}
        with MockPMCServer(work / "bucket") as srv:
            for rep in range(args.repeats):
                d = work / f"rep{rep}"
                times["plain-get"].append(timed(lambda d=d: run_plain_get(srv.url, files, d / "get")))
                times["plain-session"].append(timed(lambda d=d: run_plain_session(srv.url, files, d / "sess")))
                times["pmcflow"].append(timed(lambda d=d: run_client(srv.url, files, d / "ours", None)))
                times["pmcflow-cached"].append(timed(lambda d=d: run_client(srv.url, files, d / "ours", None)))
                times["pmcflow-rate"].append(
                    timed(lambda d=d: run_client(srv.url, rate_files, d / "rate", args.rate)))
                # Same bytes on disk for every mode.
                for key, md5, _ in files[:5]:
                    for sub in ("get", "sess", "ours"):
                        assert hashlib.md5((d / sub / key).read_bytes()).hexdigest() == md5
                shutil.rmtree(d)
        results = {}
        base = statistics.median(times["plain-session"])
        for mode, ts in times.items():
            n = len(rate_files) if mode == "pmcflow-rate" else len(files)
            nbytes = sum(f[2] for f in (rate_files if mode == "pmcflow-rate" else files))
            med = statistics.median(ts)
            results[mode] = {
                "seconds_median": round(med, 4),
                "seconds_all": [round(t, 4) for t in ts],
                "files": n,
                "mb": round(nbytes / 1e6, 3),
                "mb_per_s": round(nbytes / 1e6 / med, 2),
                "files_per_s": round(n / med, 2),
                "time_vs_plain_session": round(med / base * (len(files) / n), 3),
            }
        report = {
            "benchmark": "download",
            "files": args.files,
            "file_kb": args.size_kb,
            "total_mb": round(total / 1e6, 3),
            "repeats": args.repeats,
            "rate_limit_per_s": args.rate,
            "server": "pmcflow.pmc.mockserver on 127.0.0.1 (same process, threaded)",
            "python": sys.version.split()[0],
            "requests": requests.__version__,
            "machine": f"{platform.machine()} {os.cpu_count()} cpu",
            "results": results,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"download benchmark: {args.files} files x {args.size_kb} KiB over loopback, median of {args.repeats}\n")
    print("| mode | files | MB | s (median) | MB/s | files/s | time vs plain-session (per file) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, r in results.items():
        print(f"| {mode} | {r['files']} | {r['mb']} | {r['seconds_median']} | {r['mb_per_s']} | "
              f"{r['files_per_s']} | {r['time_vs_plain_session']} |")
    print(f"\nwritten: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
