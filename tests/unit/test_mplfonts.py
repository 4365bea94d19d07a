"""matplotlib's bundled fonts are used whatever font cache the home holds (pmcflow.mplfonts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, logging, sys, warnings
import matplotlib
matplotlib.use("Agg")
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from pmcflow.report import plots
from pmcflow.mplfonts import missing_bundled_fonts
before = len(missing_bundled_fonts())
fig = plots._fig(2, 2)
ax = fig.add_subplot()
ax.set_xscale("log")
ax.plot([1, 10, 100], [1, 2, 3])
ax.set_title(r"$\alpha_1$")
from pmcflow.report.html import figure_png
png = figure_png(fig)
print(json.dumps({"before": before, "after": len(missing_bundled_fonts())}))
"""


def _run(cachedir: Path) -> tuple[dict, str]:
    env = {**os.environ, "MPLCONFIGDIR": str(cachedir)}
    res = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


def test_a_font_cache_without_the_bundled_fonts_is_rebuilt_for_the_process(tmp_path: Path) -> None:
    # a sound cache first (matplotlib builds it in the empty directory)
    got, err = _run(tmp_path)
    assert got["before"] == 0 and got["after"] == 0 and "findfont" not in err
    cache = next(tmp_path.glob("fontlist-v*.json"))
    sound = cache.read_bytes()
    # the cache another install of the same version wrote: its bundled fonts are not listed
    data = json.loads(sound)
    data["ttflist"] = [f for f in data["ttflist"] if not f["fname"].startswith("fonts/")]
    data["afmlist"] = []
    cache.write_text(json.dumps(data))
    got, err = _run(tmp_path)
    assert got["before"] > 0 and got["after"] == 0, got
    assert "lacks" in err and "findfont" not in err, err
    # the shared file is left as the other install wrote it
    assert json.loads(cache.read_text())["afmlist"] == []
