"""Screenshots of rendered reports with a headless Chromium (the README's pictures).

``pmcflow report-screenshots --reports results/demo/reports --out docs/img`` writes
``report-<name>.png`` for each report page; ``make demo`` runs it, so the pictures in the README
are the demo's reports as they are now. Needs a Chromium (``chromium``, ``chromium-browser`` or
``google-chrome`` on PATH); the pages are self-contained, so nothing is fetched.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: str | Path, png: str | Path, *, width: int = 1280, height: int = 1600,
               browser: str | None = None) -> Path:
    """Render ``html`` in a headless browser window of ``width`` x ``height`` into ``png``."""
    browser = browser or find_browser()
    if browser is None:
        raise FileNotFoundError(f"no headless browser found (looked for {', '.join(BROWSERS)})")
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pmcflow-chromium-") as profile:
        cmd = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={png}",
            f"--window-size={width},{height}", Path(html).resolve().as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if proc.returncode != 0 or not png.is_file():
        raise RuntimeError(f"{browser} could not render {html}: {proc.stderr.strip()[-500:]}")
    return png


def cli(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="pmcflow report-screenshots",
        description="Screenshot rendered report pages (report-<name>.png) with a headless Chromium.",
    )
    ap.add_argument("--reports", required=True, type=Path, help="folder with <name>.html report pages")
    ap.add_argument("--out", required=True, type=Path, help="folder for report-<name>.png")
    ap.add_argument("--names", nargs="+", default=["dataset", "detector"], help="reports to capture")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1600)
    args = ap.parse_args(argv)
    missing = [n for n in args.names if not (args.reports / f"{n}.html").is_file()]
    if missing:
        raise FileNotFoundError(f"{args.reports}: no report page for {', '.join(missing)}")
    for name in args.names:
        out = screenshot(args.reports / f"{name}.html", args.out / f"report-{name}.png",
                         width=args.width, height=args.height)
        print(out)
    return 0
