"""Schematic panels of biomedical figures: workflow diagrams and network graphs (deterministic).

Two chart kinds of :mod:`pmcflow.synth.charts` live here:

================ ==============================================================================
``diagram``      a study or pipeline schematic: text boxes joined by arrows, as a row, a column
                 with side boxes (CONSORT-like exclusions), a branching tree, a cycle, or a
                 signalling cascade (ligand, receptor, kinases, nucleus; arrows and
                 inhibition bars); box fills, outlines, corner radius and text sizes vary
``network``      a node-link graph (gene, protein or species interactions): 10-45 nodes in 2-4
                 groups, a force-directed or circular layout, node size by degree, names on all
                 or the largest nodes, an optional group legend or edge-weight colourbar
================ ==============================================================================

Real compound figures have many such panels (workflow overviews, study designs, pathway
sketches, interaction networks), mostly text and lines on white: a detector trained without them
misses them or splits them into their boxes.  Each is drawn with axes off, so the panel is its
drawing plus labels, cropped by the caller like every chart.
"""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np

from pmcflow.synth.charts import GENES, GROUP_SETS, Style, _pick, _weighted

STEPS: tuple[str, ...] = (
    "Sample collection", "RNA extraction", "Library preparation", "RNA-seq", "Quality control",
    "Read alignment", "Differential expression", "Pathway enrichment", "Validation cohort",
    "Cell culture", "siRNA transfection", "Drug treatment", "Western blot", "qRT-PCR",
    "Confocal imaging", "Image segmentation", "Feature extraction", "Model training",
    "Cross-validation", "Prediction", "Tissue biopsy", "Single-cell suspension", "scRNA-seq",
    "Clustering", "Cell-type annotation", "Tumor implantation", "Histology", "Flow cytometry",
    "Mass spectrometry", "Peptide identification", "Variant calling", "Genotyping",
    "Whole-genome sequencing", "Metagenomic profiling", "Statistical analysis", "ELISA",
    "Behavioural testing", "MRI acquisition", "Preprocessing", "Registration", "Cohort selection",
    "Data harmonisation", "Immunostaining", "Organoid culture", "CRISPR screen", "Sorting (FACS)",
)  # fmt: skip
SUBJECTS: tuple[str, ...] = (
    "Patients", "Participants", "Mice", "Rats", "Samples", "Donors", "Eligible patients",
    "Screened", "Enrolled", "Zebrafish larvae", "Biopsies", "Cell lines",
)  # fmt: skip
EXCLUSIONS: tuple[str, ...] = (
    "Excluded", "Declined to participate", "Lost to follow-up", "Did not meet criteria",
    "Missing data", "Withdrew consent", "Failed QC", "Died before endpoint",
)  # fmt: skip
CASCADE: tuple[tuple[str, ...], ...] = (
    ("EGF", "EGFR", "RAS", "RAF", "MEK", "ERK", "Proliferation"),
    ("TNF-\u03b1", "TNFR1", "TRADD", "IKK", "I\u03baB\u03b1", "NF-\u03baB", "Inflammation"),
    ("IL-6", "gp130", "JAK1", "STAT3", "SOCS3", "Survival"),
    ("Insulin", "IR", "IRS1", "PI3K", "AKT", "mTORC1", "Growth"),
    ("Wnt", "Frizzled", "DVL", "GSK3\u03b2", "\u03b2-catenin", "TCF/LEF", "Target genes"),
    ("TGF-\u03b2", "T\u03b2RII", "T\u03b2RI", "SMAD2/3", "SMAD4", "EMT"),
    ("LPS", "TLR4", "MyD88", "IRAK4", "TRAF6", "NF-\u03baB", "IL-1\u03b2"),
    ("Hypoxia", "HIF-1\u03b1", "VEGF", "VEGFR2", "Angiogenesis"),
)
INHIBITORS: tuple[str, ...] = ("Inhibitor", "siRNA", "Rapamycin", "U0126", "LY294002", "Drug X", "shRNA")
NET_GROUPS: tuple[tuple[str, ...], ...] = (
    ("Upregulated", "Downregulated"),
    ("Module 1", "Module 2", "Module 3"),
    ("Hub genes", "Targets"),
    ("Firmicutes", "Bacteroidetes", "Proteobacteria", "Actinobacteria"),
    ("Kinase", "Transcription factor", "Receptor"),
    ("miRNA", "mRNA", "lncRNA"),
)
TAXA: tuple[str, ...] = (
    "Bacteroides", "Prevotella", "Faecalibacterium", "Roseburia", "Blautia", "Ruminococcus",
    "Akkermansia", "Bifidobacterium", "Lactobacillus", "Escherichia", "Clostridium", "Dorea",
    "Alistipes", "Eubacterium", "Coprococcus", "Veillonella", "Streptococcus", "Parabacteroides",
)  # fmt: skip


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width=width, break_long_words=False)) or text


class _Boxes:
    """Draws the boxes and arrows of one schematic in data coordinates (axes 0-1, equal aspect)."""

    def __init__(self, ax: Any, rng: np.random.Generator, style: Style) -> None:
        self.ax = ax
        self.fs = style.fs * float(rng.uniform(0.85, 1.1))
        self.char_w = 0.68 if style.bold else 0.6  # mean glyph width in font sizes (DejaVu Sans)
        fill = _weighted(rng, [("white", 0.35), ("tint", 0.45), ("solid", 0.2)])
        colors = style.colors(8, rng)
        self.fills = (
            ["white"] * 8 if fill == "white"
            else [_tint(c, 0.75) for c in colors] if fill == "tint"
            else colors
        )  # fmt: skip
        self.edge = _pick(rng, ["black", "#404040", "none"]) if fill != "white" else "black"
        self.radius = float(_pick(rng, [0.0, 0.01, 0.02, 0.04]))
        self.lw = float(rng.uniform(0.6, 1.4))
        self.arrow = _pick(rng, ["-|>", "->", "simple"])
        self.arrow_color = _pick(rng, ["black", "#404040", "#606060"])

    def box(self, x: float, y: float, w: float, h: float, text: str, k: int = 0, shape: str = "box") -> None:
        from matplotlib.patches import Ellipse, FancyBboxPatch

        fc = self.fills[k % len(self.fills)]
        if shape == "ellipse":
            self.ax.add_patch(Ellipse((x, y), w, h, facecolor=fc, edgecolor=self.edge, lw=self.lw))
        else:
            style = f"round,pad=0,rounding_size={self.radius}" if self.radius else "square,pad=0"
            self.ax.add_patch(
                FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle=style, facecolor=fc,
                               edgecolor=self.edge, lw=self.lw)
            )  # fmt: skip
        lines = text.split("\n")
        inner_w, inner_h = (w * 0.8, h * 0.75) if shape == "ellipse" else (w - 0.08, h - 0.06)
        fit = min(inner_w * 72 / (self.char_w * max(map(len, lines))), inner_h * 72 / (1.25 * len(lines)))
        self.ax.text(x, y, text, ha="center", va="center", fontsize=max(4.5, min(self.fs, fit)),
                     color=_ink_on(fc), linespacing=1.1)  # fmt: skip

    def link(self, a: tuple[float, float], b: tuple[float, float], *, inhibit: bool = False, rad: float = 0.0) -> None:
        style = "-[" if inhibit else self.arrow
        props: dict[str, Any] = {
            "arrowstyle": style if style != "simple" else "simple,head_width=0.5,head_length=0.6,tail_width=0.15",
            "color": self.arrow_color,
            "lw": self.lw,
            "shrinkA": 0,
            "shrinkB": 0,
            "connectionstyle": f"arc3,rad={rad}",
        }
        if style == "-[":
            props["arrowstyle"] = "-["
        self.ax.annotate("", xy=b, xytext=a, arrowprops=props)


def _ink_on(fill: str) -> str:
    """Black text on light fills, white on dark ones."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(fill)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "white"


def _tint(color: str, amount: float) -> str:
    """``color`` mixed with white (``amount`` 1 = white)."""
    from matplotlib.colors import to_hex, to_rgb

    r, g, b = to_rgb(color)
    return to_hex((r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount))


def _axes(fig: Any, w_in: float, h_in: float) -> Any:
    fig.set_size_inches(w_in, h_in)
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.96))
    ax.set_xlim(0, w_in)
    ax.set_ylim(0, h_in)
    ax.set_axis_off()
    return ax


def _steps(rng: np.random.Generator, n: int) -> list[str]:
    idx = rng.choice(len(STEPS), size=n, replace=False)
    return [STEPS[int(i)] for i in idx]


LAYOUTS: tuple[str, ...] = ("row", "column", "tree", "cycle", "cascade")


def diagram(fig: Any, rng: np.random.Generator, style: Style, variant: int = 0) -> None:
    """A workflow, study-design or signalling schematic (see the module table); variant ``k`` draws
    layout ``LAYOUTS[k % 5]``, so every layout is in the pool."""
    draw = {"row": _row, "column": _column, "tree": _tree, "cycle": _cycle, "cascade": _cascade}
    draw[LAYOUTS[variant % len(LAYOUTS)]](fig, rng, style)


def _row(fig: Any, rng: np.random.Generator, style: Style) -> None:
    """Steps left to right; four or more snake over two rows (a strip of boxes is rare in print)."""
    n = int(rng.integers(3, 7))
    cols = n if n == 3 else (n + 1) // 2
    rows = 1 if n == 3 else 2
    bw, bh = float(rng.uniform(0.8, 1.0)), float(rng.uniform(0.55, 0.9) if rows == 2 else rng.uniform(0.8, 1.0))
    gap, vgap = float(rng.uniform(0.25, 0.35)), float(rng.uniform(0.3, 0.45))
    heading = rng.random() < 0.4
    W = cols * bw + (cols - 1) * gap + 0.2
    H = rows * bh + (rows - 1) * vgap + 0.2 + (0.35 if heading else 0.0)
    ax = _axes(fig, W, H)
    b = _Boxes(ax, rng, style)
    back = rng.random() < 0.5  # the second row runs right to left (a snake) or again left to right
    prev: tuple[float, float] | None = None
    for i, text in enumerate(_steps(rng, n)):
        r, c = divmod(i, cols)
        if r and back:
            c = cols - 1 - c
        x, y = 0.1 + bw / 2 + c * (bw + gap), 0.1 + bh / 2 + (rows - 1 - r) * (bh + vgap)
        b.box(x, y, bw, bh, _wrap(text, 12), i)
        if prev is not None:
            px, py = prev
            if py == y:
                sgn = 1 if x > px else -1
                b.link((px + sgn * (bw / 2 + 0.02), y), (x - sgn * (bw / 2 + 0.02), y))
            else:
                b.link((px, py - bh / 2 - 0.02), (x, y + bh / 2 + 0.02), rad=0.0 if px == x else -0.15)
        prev = (x, y)
    if heading:
        ax.text(0.1, H - 0.3, _pick(rng, ["Workflow", "Study design", "Pipeline", "Overview"]),
                fontsize=b.fs * 1.1, fontweight="bold", va="bottom")  # fmt: skip


def _column(fig: Any, rng: np.random.Generator, style: Style) -> None:
    """A CONSORT-like flow: a column of counts with exclusion boxes to the side."""
    n = int(rng.integers(3, 6))
    bw, bh, gap = float(rng.uniform(1.3, 1.8)), float(rng.uniform(0.4, 0.55)), float(rng.uniform(0.25, 0.4))
    side = rng.random() < 0.75
    W = bw + (bw * 0.9 + 0.5 if side else 0.0) + 0.2
    H = n * bh + (n - 1) * gap + 0.2
    ax = _axes(fig, W, H)
    b = _Boxes(ax, rng, style)
    count = int(rng.integers(200, 5000))
    subj = _pick(rng, SUBJECTS)
    x = 0.1 + bw / 2
    for i in range(n):
        y = H - 0.1 - bh / 2 - i * (bh + gap)
        label = f"{subj} (n = {count:,})" if i == 0 else f"{_pick(rng, STEPS)}\n(n = {count:,})"
        b.box(x, y, bw, bh, label, 0)
        if i:
            b.link((x, y + bh / 2 + gap - 0.02), (x, y + bh / 2 + 0.02))
            if side and rng.random() < 0.8:
                gone = int(count * rng.uniform(0.05, 0.3))
                count -= gone
                sx = 0.1 + bw + 0.5 + bw * 0.45
                sy = y + bh / 2 + gap / 2
                b.box(sx, sy, bw * 0.9, bh * 0.8, f"{_pick(rng, EXCLUSIONS)}\n(n = {gone:,})", 1)
                b.link((x, sy), (sx - bw * 0.45 - 0.02, sy))
        count = max(10, int(count * rng.uniform(0.6, 0.95)))


def _tree(fig: Any, rng: np.random.Generator, style: Style) -> None:
    k = int(rng.integers(2, 4))
    depth = int(rng.integers(1, 3))
    bw, bh = float(rng.uniform(0.9, 1.2)), float(rng.uniform(0.4, 0.6))
    gx, gy = float(rng.uniform(0.2, 0.4)), float(rng.uniform(0.35, 0.55))
    W = k * bw + (k - 1) * gx + 0.2
    H = (depth + 1) * bh + depth * gy + 0.2
    ax = _axes(fig, W, H)
    b = _Boxes(ax, rng, style)
    names = _steps(rng, 1 + k * depth)
    top = (W / 2, H - 0.1 - bh / 2)
    b.box(*top, min(W - 0.2, bw * 1.4), bh, _wrap(names[0], 16), 0)
    groups = list(_pick(rng, [g for g in GROUP_SETS if len(g) >= k]))[:k]
    for j in range(k):
        x = 0.1 + bw / 2 + j * (bw + gx)
        prev = (top[0], top[1] - bh / 2)
        for d in range(depth):
            y = top[1] - (d + 1) * (bh + gy)
            text = groups[j] if d == 0 else _wrap(names[1 + j * depth + d], 12)
            b.box(x, y, bw, bh, text, j + 1)
            b.link(prev, (x, y + bh / 2 + 0.02))
            prev = (x, y - bh / 2)


def _cycle(fig: Any, rng: np.random.Generator, style: Style) -> None:
    n = int(rng.integers(4, 7))
    side = float(rng.uniform(2.4, 3.2))
    ax = _axes(fig, side, side)
    b = _Boxes(ax, rng, style)
    r, c = side * 0.33, side / 2
    bw, bh = side * 0.3, side * 0.13
    pts = []
    for i, text in enumerate(_steps(rng, n)):
        a = np.pi / 2 - 2 * np.pi * i / n
        pts.append((c + r * np.cos(a), c + r * np.sin(a)))
        b.box(*pts[-1], bw, bh, _wrap(text, 12), i, shape="ellipse" if rng.random() < 0.3 else "box")
    for i in range(n):
        (x0, y0), (x1, y1) = pts[i], pts[(i + 1) % n]
        dx, dy = x1 - x0, y1 - y0
        L = float(np.hypot(dx, dy)) or 1.0
        s = 0.3 * min(bw, bh * 3) / L
        b.link((x0 + dx * s, y0 + dy * s), (x1 - dx * s, y1 - dy * s), rad=-0.2)
    if rng.random() < 0.5:
        ax.text(c, c, _wrap(_pick(rng, STEPS), 10), ha="center", va="center", fontsize=b.fs * 1.1,
                fontweight="bold")  # fmt: skip


def _cascade(fig: Any, rng: np.random.Generator, style: Style) -> None:
    """A signalling pathway: ligand over a membrane, a chain of ellipses, a nucleus outline."""
    from matplotlib.patches import Ellipse, Rectangle

    chain = list(_pick(rng, CASCADE))
    n = len(chain)
    bw, bh, gap = float(rng.uniform(0.75, 1.0)), float(rng.uniform(0.32, 0.42)), float(rng.uniform(0.2, 0.3))
    W = bw * 2.6 + 0.2
    H = n * bh + (n - 1) * gap + 0.4
    ax = _axes(fig, W, H)
    b = _Boxes(ax, rng, style)
    x = W / 2
    ys = [H - 0.2 - bh / 2 - i * (bh + gap) for i in range(n)]
    mem_y = ys[0] - bh / 2 - gap / 2
    ax.add_patch(Rectangle((0.05, mem_y - 0.04), W - 0.1, 0.08, facecolor=_tint("#E0A040", 0.4),
                           edgecolor="#A06010", lw=0.6))  # fmt: skip
    if n > 3:
        top = ys[-2] + bh / 2 + gap / 2
        ax.add_patch(Ellipse((x, (top + 0.05) / 2), W - 0.2, top - 0.05, fill=False, edgecolor="#606060",
                             lw=0.9, ls="--"))  # fmt: skip
        ax.text(0.15, 0.12, "Nucleus", fontsize=b.fs * 0.85, style="italic", color="#404040")
    inhibit_at = int(rng.integers(1, n - 1)) if rng.random() < 0.6 else -1
    for i, (y, name) in enumerate(zip(ys, chain, strict=True)):
        b.box(x, y, bw, bh, name, i, shape="box" if i in (0, n - 1) else "ellipse")
        if i:
            b.link((x, ys[i - 1] - bh / 2 - 0.02), (x, y + bh / 2 + 0.02))
        if i == inhibit_at:
            xi = x + bw * 0.95
            ax.text(xi + 0.05, y + bh * 0.9, _pick(rng, INHIBITORS), fontsize=b.fs * 0.85, color="#C00000",
                    ha="left", va="bottom")  # fmt: skip
            b.link((xi + 0.1, y + bh * 0.8), (x + bw / 2 + 0.04, y), inhibit=True)


def network(fig: Any, rng: np.random.Generator, style: Style) -> None:
    """A node-link graph (see the module table)."""
    groups = list(_pick(rng, NET_GROUPS))
    k = len(groups)
    n = int(rng.integers(10, 46))
    names_from = TAXA if groups[0] == "Firmicutes" else GENES
    names = [str(x) for x in rng.choice(np.asarray(names_from, dtype=object), size=min(n, len(names_from)), replace=False)]
    n = len(names)
    g = rng.integers(0, k, size=n)
    p_in, p_out = float(rng.uniform(0.15, 0.35)), float(rng.uniform(0.01, 0.06))
    adj = np.zeros((n, n), bool)
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < (p_in if g[i] == g[j] else p_out):
                adj[i, j] = adj[j, i] = True
    _connect(adj, rng)  # one component, as drawn networks are (and a layout without far islands)
    pos = _circular(n, g) if rng.random() < 0.25 else _spring(adj, rng)
    side = float(rng.uniform(2.6, 3.8))
    fig.set_size_inches(side * float(rng.uniform(1.0, 1.35)), side)
    ax = fig.add_axes((0.02, 0.02, 0.96, 0.96))
    ax.set_axis_off()
    deg = adj.sum(axis=1)
    colors = style.colors(k, rng)
    weighted = rng.random() < 0.3
    ii, jj = np.nonzero(np.triu(adj))
    from matplotlib.collections import LineCollection

    segs = [[pos[a], pos[c]] for a, c in zip(ii, jj, strict=True)]
    if weighted:
        w = rng.uniform(-1, 1, size=len(segs))
        lc = LineCollection(segs, cmap="coolwarm", linewidths=0.4 + 1.2 * np.abs(w), zorder=1)
        lc.set_array(w)
        ax.add_collection(lc)
        cb = fig.colorbar(lc, ax=ax, fraction=0.04, pad=0.01, shrink=0.5)
        cb.set_label(_pick(rng, ["Correlation", "Spearman \u03c1", "Edge weight"]), fontsize=style.fs * 0.9)
        cb.ax.tick_params(labelsize=style.fs * 0.8)
    else:
        ax.add_collection(LineCollection(segs, colors=_pick(rng, ["#B0B0B0", "#909090", "#C8C8C8"]),
                                         linewidths=float(rng.uniform(0.4, 1.0)), zorder=1))  # fmt: skip
    size = 30 + 220 * (deg / max(1, deg.max())) ** 1.2 * float(rng.uniform(0.6, 1.3))
    edge = _pick(rng, ["white", "black", "none"])
    for c in range(k):
        m = g == c
        ax.scatter(pos[m, 0], pos[m, 1], s=size[m], c=colors[c], edgecolors=edge, linewidths=0.6, zorder=2,
                   label=groups[c])  # fmt: skip
    label_all = rng.random() < 0.45
    cut = np.quantile(deg, 0.6)
    fs = style.fs * float(rng.uniform(0.6, 0.85))
    for i in range(n):
        if label_all or deg[i] >= cut:
            ax.text(pos[i, 0], pos[i, 1] + 0.035, names[i], fontsize=fs, ha="center", va="bottom", zorder=3,
                    style="italic" if names_from is TAXA else "normal")  # fmt: skip
    ax.set_xlim(pos[:, 0].min() - 0.12, pos[:, 0].max() + 0.12)
    ax.set_ylim(pos[:, 1].min() - 0.1, pos[:, 1].max() + 0.14)
    if rng.random() < 0.6:
        ax.legend(loc=_pick(rng, ["lower left", "upper left", "lower right", "best"]), fontsize=style.fs * 0.8,
                  markerscale=0.5, frameon=rng.random() < 0.4)  # fmt: skip


def _connect(adj: np.ndarray, rng: np.random.Generator) -> None:
    """Join every connected component to the first one by one edge (in place)."""
    n = adj.shape[0]
    comp = -np.ones(n, int)
    for start in range(n):
        if comp[start] >= 0:
            continue
        comp[start], stack = start, [start]
        while stack:
            for j in np.flatnonzero(adj[stack.pop()]):
                if comp[j] < 0:
                    comp[j] = start
                    stack.append(int(j))
    main = np.flatnonzero(comp == comp[0])
    for c in sorted(set(comp.tolist()) - {int(comp[0])}):
        a = int(rng.choice(np.flatnonzero(comp == c)))
        b = int(rng.choice(main))
        adj[a, b] = adj[b, a] = True


def _circular(n: int, g: np.ndarray) -> np.ndarray:
    order = np.argsort(g, kind="stable")
    a = np.empty(n)
    a[order] = 2 * np.pi * np.arange(n) / n
    return np.stack([np.cos(a), np.sin(a)], axis=1)


def _spring(adj: np.ndarray, rng: np.random.Generator, steps: int = 120) -> np.ndarray:
    """A Fruchterman-Reingold layout in the unit square (numpy, deterministic for ``rng``)."""
    n = adj.shape[0]
    pos = rng.uniform(0, 1, size=(n, 2))
    k = 1.0 / np.sqrt(n)
    t = 0.1
    for _ in range(steps):
        d = pos[:, None, :] - pos[None, :, :]
        dist = np.maximum(np.linalg.norm(d, axis=2), 1e-3)
        force = k * k / dist**2 - adj * dist / k
        np.fill_diagonal(force, 0.0)
        move = (d * force[..., None]).sum(axis=1) - 0.5 * (pos - pos.mean(axis=0))  # and a pull to the centre
        length = np.maximum(np.linalg.norm(move, axis=1), 1e-9)
        pos += move / length[:, None] * np.minimum(length, t)[:, None]
        t = max(t * 0.97, 0.005)
    pos -= pos.min(axis=0)
    return pos / max(float(pos.max()), 1e-9)
