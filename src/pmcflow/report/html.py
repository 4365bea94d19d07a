"""Output pieces of a report section: HTML snippets and PNG figures, displayed by the notebooks.

A section function returns a list of parts (:class:`Html` or :class:`Png`); :func:`show` displays
them in the notebook.  Keeping sections as plain data makes them testable without a kernel, and
every image reaches the HTML as an embedded PNG (``image/png`` output or a ``data:`` URI).
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from PIL import Image


@dataclass(frozen=True)
class Html:
    text: str


@dataclass(frozen=True)
class Png:
    data: bytes
    alt: str = ""


Part = Html | Png


def show(parts: Iterable[Part]) -> None:
    """Display parts in the running notebook (HTML as text/html, PNG as image/png)."""
    from IPython.display import HTML, Image, display

    for p in parts:
        if isinstance(p, Png):
            display(Image(data=p.data, format="png"))
        else:
            display(HTML(p.text))


def esc(text: Any) -> str:
    return html.escape("" if text is None else str(text))


def heading(text: str, level: int = 3) -> Html:
    return Html(f"<h{level}>{esc(text)}</h{level}>")


def para(text: str) -> Html:
    return Html(f"<p>{esc(text)}</p>")


def note(text: str) -> Html:
    return Html(f'<p class="pmcflow-note"><em>{esc(text)}</em></p>')


def not_run(section: str, expected: Sequence[str | Path], reason: str | None = None) -> Html:
    """The message a section shows when its stage has no outputs in this results directory.

    ``reason``: why, when known (a config switch); else the files looked for are named.
    """
    why = esc(reason) if reason else "no " + ", ".join(f"<code>{esc(p)}</code>" for p in expected)
    return Html(
        f'<div class="pmcflow-not-run" style="border-left:4px solid #bbb;padding:4px 10px;color:#555">'
        f"<strong>{esc(section)}: not run in this workflow</strong> ({why}).</div>"
    )


def provenance(text: str, *, smoke: bool = False) -> Html:
    """The "which model produced this" line above a model's table or figure (orange for a smoke test)."""
    colour = "#d2691e" if smoke else "#4c8c4a"
    return Html(
        f'<div class="pmcflow-provenance" style="border-left:4px solid {colour};padding:2px 10px;'
        f'margin:6px 0;font-size:13px"><strong>Model</strong> — {esc(text)}</div>'
    )


def fmt(value: Any, digits: int = 3) -> str:
    """Numbers for tables: ints with thousands separators, floats rounded, missing as an en dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    *,
    digits: int = 3,
    caption: str | None = None,
    max_rows: int | None = None,
) -> Html:
    """A plain HTML table (escaped cells, numbers right-aligned)."""
    if not rows:
        return note("(no rows)")
    cols = list(columns or rows[0].keys())
    shown = rows if max_rows is None else rows[:max_rows]
    out = ['<table class="dataframe pmcflow-table" border="1">']
    if caption:  # a paragraph, not <caption>: a caption would wrap to the table's width
        out.insert(0, f'<p class="pmcflow-caption">{esc(caption)}</p>')
    out.append("<thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr></thead><tbody>")
    for r in shown:
        cells = []
        for c in cols:
            v = r.get(c)
            numeric = isinstance(v, int | float) and not isinstance(v, bool)
            align = ' class="num"' if numeric else ""
            cells.append(f"<td{align}>{esc(fmt(v, digits))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    if max_rows is not None and len(rows) > max_rows:
        out.append(f"<p><em>{len(rows) - max_rows} more rows not shown.</em></p>")
    return Html("".join(out))


def figure_png(fig: Figure, *, dpi: int = 100) -> Png:
    """A matplotlib figure as PNG bytes (closed afterwards); no timestamp in the metadata."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return Png(buf.getvalue())


def thumbnail_uri(path: Path, max_side: int = 220) -> str | None:
    """A ``data:image/png`` URI of a downscaled image, or ``None`` when it cannot be read."""
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            im.save(buf, format="PNG", optimize=True)
    except (OSError, ValueError):
        return None
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def shorten(text: str | None, limit: int = 400) -> str:
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def cards(items: Sequence[Mapping[str, Any]], *, width: int = 250) -> Html:
    """A grid of cards: ``image`` (data URI or None), ``title`` and ``fields`` ({label: text})."""
    out = ['<div class="pmcflow-cards" style="display:flex;flex-wrap:wrap;gap:12px">']
    for it in items:
        img = it.get("image")
        pic = (
            f'<img src="{img}" style="max-width:{width - 12}px;max-height:220px;display:block;margin:auto"/>'
            if img
            else '<div style="color:#a00">(image not readable)</div>'
        )
        body = "".join(
            f"<div><strong>{esc(k)}:</strong> {esc(v)}</div>"
            for k, v in (it.get("fields") or {}).items()
            if v
        )
        out.append(
            f'<div style="width:{width}px;border:1px solid #ddd;border-radius:4px;padding:6px;font-size:12px">'
            f"{pic}<div style='margin-top:4px;font-family:monospace;font-size:11px'>{esc(it.get('title', ''))}</div>"
            f"{body}</div>"
        )
    out.append("</div>")
    return Html("".join(out))
