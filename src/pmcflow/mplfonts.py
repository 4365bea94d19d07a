"""matplotlib's own fonts for every figure pmcflow draws, whatever font cache the home holds.

matplotlib keeps its font list in ``<cachedir>/fontlist-v<version>.json``, keyed by its version
only and shared by every install of that version that uses the cache directory
(``~/.cache/matplotlib`` unless ``MPLCONFIGDIR`` says otherwise). A list written by an install
without matplotlib's bundled fonts (seen on a build machine: the system's DejaVu files only, no
STIX or Computer Modern) is read as it is: mathtext -- the "10^2" ticks of a log axis, "$\\alpha$"
-- then falls back to DejaVu Sans with a "findfont: Font family ['STIXGeneral'] not found" warning
per glyph set, which the papermill reports print into their HTML, and rendered charts change their
pixels. :func:`ensure_bundled_fonts` checks the loaded list against the files matplotlib ships
under ``mpl-data/fonts`` and, when one is missing, rebuilds the list in this process as matplotlib
builds a fresh one (its bundled fonts first, then the system's), so the figures equal those drawn
with a sound cache. The shared file is left as it is: the install that wrote it reads paths its
own way.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

_log = logging.getLogger(__name__)
_checked = False


def missing_bundled_fonts() -> list[str]:
    """Font files shipped in matplotlib's ``mpl-data/fonts/ttf`` that its loaded font list lacks."""
    import matplotlib
    from matplotlib import font_manager

    listed = {os.path.realpath(f.fname) for f in font_manager.fontManager.ttflist}
    shipped = sorted((Path(matplotlib.get_data_path()) / "fonts" / "ttf").glob("*.ttf"))
    return [p.name for p in shipped if os.path.realpath(p) not in listed]


def ensure_bundled_fonts() -> int:
    """Rebuild this process's font list when it lacks matplotlib's bundled fonts (see the module
    docstring); the number of bundled font files that were missing (0: nothing done). Checked once
    per process."""
    global _checked
    if _checked:
        return 0
    _checked = True
    missing = missing_bundled_fonts()
    if missing:
        import matplotlib
        from matplotlib import font_manager

        _log.info(  # info, not a warning: the figures come out as with a sound cache
            "matplotlib's font cache in %s lacks %d of its bundled fonts (%s, …): written by another "
            "matplotlib install of the same version; font list rebuilt for this process",
            matplotlib.get_cachedir(),
            len(missing),
            missing[0],
        )
        font_manager.fontManager.__init__()  # in place: findfont and friends are bound to it
    return len(missing)
