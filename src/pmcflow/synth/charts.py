"""Chart, blot and gel panels as they appear in biomedical papers (deterministic matplotlib renders).

``render_chart(kind, k)`` draws variant ``k`` of a panel kind; every choice (size, aspect, theme,
palette, font size, markers, group count, label texts, legend/title/grid, the data subset) comes
from :func:`pmcflow.seeding.rng_for` ``(CHART_SEED, "chart", f"{kind}/{k}")``, so the same
``(kind, k)`` always gives the same pixels (Agg canvas, :class:`~matplotlib.figure.Figure` without
pyplot, DejaVu Sans, fixed rc parameters).  Values come from real data shipped with installed
packages where it exists (scikit-learn's breast-cancer, diabetes, wine and iris tables, matplotlib's
``eeg.dat``); blots, gels, survival and flow-cytometry values are simulated.

Kinds (:data:`CHART_KINDS`):

================ ==============================================================================
``bar``          grouped bars, SEM/SD error bars, individual points, significance brackets
``line``         time courses (growth, glucose tolerance), dose-response on a log axis, EEG
                 averages with a SEM band
``scatter``      two real variables, least-squares line with 95 % band, r / R2 / rho and p
``box``          box plots (with points) of real groups or subsets, significance brackets
``violin``       violin plots with an inner box
``heatmap``      expression heatmaps (row z-scores of real features) or annotated correlation
                 matrices, with a colourbar
``survival``     Kaplan-Meier curves, censor ticks, log-rank p, optional number-at-risk table
``flow``         flow-cytometry density plots (log axes, quadrant gates with percentages), 1-3
                 samples side by side
``blot``         western blot: band rows, protein names left, kDa markers right, lane labels
                 (names, +/- matrix, time course, dose wedge) on top
``gel``          agarose gel with a DNA ladder (bp sizes), sample lanes, lane labels
``blot_quant``   multi-part: a western blot above its quantification bar chart (one bar per
                 condition, under its lanes)
``image_graph``  multi-part: one or two rows of micrograph crops (conditions as column headers,
                 scale bar) above, or beside, a graph of the same groups
``image_grid``   multi-part: a grid of 1-4 rows by 2-5 columns of micrograph fields under one
                 letter (conditions as column headers, channels or methods as row labels, text
                 inside the images, zoom boxes with insets, arrows, a scale bar), the panel real
                 detectors most often split into one box per image
``diagram``      a workflow, study-design (CONSORT-like) or signalling schematic: text boxes and
                 arrows (:mod:`pmcflow.synth.diagrams`)
``network``      a node-link graph of genes, proteins or taxa (:mod:`pmcflow.synth.diagrams`)
================ ==============================================================================

Every image is cropped to its drawn content plus a small white margin, so axis titles, tick
labels and legends are always inside it (and nothing is cut: the tests check that nothing touches
the canvas edge before the crop).  The multi-part kinds are one source image, so a compound figure
that uses one gets one box for the whole stack, as the letter of a real figure names it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from pmcflow.seeding import rng_for
from pmcflow.synth.sources import PANELS_DIR, _package_dir  # the NCI micrographs; installed packages

CHART_SEED = "pmcflow-charts"
CHART_KINDS: tuple[str, ...] = (
    "bar",
    "line",
    "scatter",
    "box",
    "violin",
    "heatmap",
    "survival",
    "flow",
    "blot",
    "gel",
    "blot_quant",
    "image_graph",
    "image_grid",
    "diagram",
    "network",
)
MULTIPART_KINDS: frozenset[str] = frozenset({"blot_quant", "image_graph", "image_grid"})
VARIANTS = 8  # variants per kind registered in the builtin pool (chart:<kind>:<k>, k < variants(kind))
# kinds registered with more variants: image grids are a common panel of real compound figures
# (one letter over many micrographs), so they get a larger share of the plot-like panels
# schematics (workflows, study designs, pathways) are common in real figures and vary more in
# shape than one chart kind, so they get twice the share of one kind
KIND_VARIANTS: dict[str, int] = {"image_grid": 48, "diagram": 16}
BG_THRESHOLD = 250  # a pixel with a channel below this is content (the canvas is pure white)

ORIGINS: dict[str, str] = {
    "bar": "real values: scikit-learn breast-cancer/diabetes/wine tables",
    "line": "growth/dose curves simulated; EEG averages from matplotlib eeg.dat; glucose baselines from scikit-learn diabetes",
    "scatter": "real values: scikit-learn diabetes/breast-cancer/wine/iris tables",
    "box": "real values: scikit-learn breast-cancer/diabetes/wine tables",
    "violin": "real values: scikit-learn breast-cancer/diabetes/wine tables",
    "heatmap": "real values: scikit-learn breast-cancer/diabetes/wine tables (z-scores, correlations)",
    "survival": "simulated survival times",
    "flow": "simulated events",
    "blot": "simulated bands",
    "gel": "simulated bands",
    "blot_quant": "simulated bands and their quantification",
    "image_graph": "micrograph crops (scikit-image cell.png, ihc.png; NCI micrographs) and real values",
    "image_grid": "micrograph crops (scikit-image cell.png, ihc.png; NCI micrographs)",
    "diagram": "simulated schematic (step, cohort and pathway names)",
    "network": "simulated graph (gene and taxon names)",
}


def variants(kind: str) -> int:
    """How many variants of ``kind`` the builtin pool registers."""
    return KIND_VARIANTS.get(kind, VARIANTS)

FONT = "DejaVu Sans"
MINUS = "\u2212"

# ----------------------------------------------------------------------------------------------
# vocabularies
# ----------------------------------------------------------------------------------------------

PALETTES: dict[str, list[str]] = {
    "npg": ["#E64B35", "#4DBBD5", "#00A087", "#3C5488", "#F39B7F", "#8491B4", "#91D1C2", "#DC0000"],
    "lancet": ["#00468B", "#ED0000", "#42B540", "#0099B4", "#925E9F", "#FDAF91", "#AD002A", "#ADB6B6"],
    "jco": ["#0073C2", "#EFC000", "#868686", "#CD534C", "#7AA6DC", "#003C67", "#8F7700", "#3B3B3B"],
    "okabe": ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#000000"],
    "tab10": ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"],
    "prism_grey": ["#FFFFFF", "#A6A6A6", "#404040", "#000000", "#D9D9D9", "#737373", "#FFFFFF", "#262626"],
    "redblue": ["#4575B4", "#D73027", "#91BFDB", "#FC8D59", "#313695", "#A50026", "#E0F3F8", "#FEE090"],
    "ggplot": ["#F8766D", "#00BA38", "#619CFF", "#C77CFF", "#00BFC4", "#B79F00", "#F564E3", "#7CAE00"],
    "pastel": ["#8DD3C7", "#FB8072", "#80B1D3", "#FDB462", "#B3DE69", "#BEBADA", "#FCCDE5", "#BC80BD"],
}

GROUP_SETS: tuple[tuple[str, ...], ...] = (
    ("Control", "Treated"),
    ("Vehicle", "Drug"),
    ("WT", "KO"),
    ("WT", "Het", "KO"),
    ("Sham", "MCAO"),
    ("siNC", "siRNA#1", "siRNA#2"),
    ("shCtrl", "shRNA-1", "shRNA-2"),
    ("Ctrl", "LPS", "LPS+Dex"),
    ("Normal", "Tumor"),
    ("Young", "Aged"),
    ("NC", "mimic", "inhibitor"),
    ("DMSO", "1 \u03bcM", "5 \u03bcM", "10 \u03bcM"),
    ("Con", "HFD", "HFD+Met"),
    ("Mock", "Virus"),
    ("Saline", "Cisplatin"),
    ("Vector", "OE"),
    ("Day 0", "Day 3", "Day 7", "Day 14"),
    ("Sham", "Vehicle", "Low dose", "High dose"),
    ("Control", "H\u2082O\u2082", "H\u2082O\u2082+NAC"),
    ("Ctrl", "TGF-\u03b21", "TGF-\u03b21+SB"),
    ("Normoxia", "Hypoxia"),
    ("Chow", "HFD"),
    ("HC", "Mild", "Moderate", "Severe"),
    ("PBS", "IgG", "Anti-PD-1"),
    ("0", "0.1", "1", "10", "100"),
    ("Untreated", "IFN-\u03b3", "IL-4"),
    ("Ctrl", "A", "B", "A+B"),
    ("Parental", "Resistant"),
)
SERIES_SETS: tuple[tuple[str, ...], ...] = (
    ("Male", "Female"),
    ("Normoxia", "Hypoxia"),
    (MINUS + "DOX", "+DOX"),
    ("WT", "KO"),
    ("24 h", "48 h", "72 h"),
    ("Vehicle", "Drug"),
    ("siNC", "siTarget"),
    ("Young", "Aged"),
    ("Basal", "Stimulated"),
    ("Day 1", "Day 3", "Day 7"),
)

# (axis label, value mode): "rel" = fold of the first group, "pct" = % of the first group, a
# number = values scaled to that mean
Y_MEASURES: tuple[tuple[str, Any], ...] = (
    ("Relative mRNA expression", "rel"),
    ("Relative protein level", "rel"),
    ("Fold change", "rel"),
    ("Relative luciferase activity", "rel"),
    ("Caspase-3 activity (fold)", "rel"),
    ("Cell viability (%)", "pct"),
    ("% of control", "pct"),
    ("Tumor volume (mm\u00b3)", 650.0),
    ("Tumor weight (g)", 0.8),
    ("Body weight (g)", 24.0),
    ("Serum IL-6 (pg/mL)", 140.0),
    ("TNF-\u03b1 (pg/mL)", 85.0),
    ("Colony number", 120.0),
    ("Migrated cells per field", 95.0),
    ("Ki67\u207a cells (%)", 35.0),
    ("Apoptosis rate (%)", 18.0),
    ("Infarct volume (%)", 30.0),
    ("Blood glucose (mmol/L)", 8.5),
    ("ALT (U/L)", 60.0),
    ("MFI (a.u.)", 2400.0),
    ("OD 450 nm", 1.2),
    ("Wound closure (%)", 55.0),
    ("Total distance (m)", 28.0),
    ("Latency (s)", 35.0),
    ("Plasma insulin (ng/mL)", 1.6),
    ("Collagen area (%)", 12.0),
    ("Capillary density (/mm\u00b2)", 600.0),
    ("ROS level (a.u.)", 1500.0),
)
TITLES: tuple[str, ...] = (
    "MYC", "IL6", "TNF", "COL1A1", "Liver", "Kidney", "Serum", "HepG2", "HeLa", "A549", "MCF-7",
    "Day 7", "24 h", "In vivo", "Lung", "Spleen", "CD8\u207a T cells", "Macrophages", "Primary neurons",
)  # fmt: skip
GENES: tuple[str, ...] = (
    "TP53", "MYC", "EGFR", "KRAS", "PTEN", "CDKN1A", "BAX", "BCL2", "CCND1", "MKI67", "VEGFA",
    "HIF1A", "IL6", "TNF", "IL1B", "CXCL8", "CCL2", "STAT3", "NFKB1", "SOX2", "POU5F1", "NANOG",
    "CDH1", "CDH2", "VIM", "SNAI1", "TWIST1", "ZEB1", "MMP2", "MMP9", "TGFB1", "SMAD3", "COL1A1",
    "ACTA2", "FN1", "PPARG", "SREBF1", "FASN", "SCD1", "G6PC", "PCK1", "INS", "GCG", "LEP",
    "ADIPOQ", "UCP1", "PGC1A", "SIRT1", "FOXO1", "ATG5", "BECN1", "SQSTM1", "NLRP3", "CASP1",
    "GSDMD", "HMOX1", "NQO1", "NFE2L2", "GPX4", "SLC7A11", "ACSL4", "CD274", "PDCD1", "CD8A",
    "GZMB", "IFNG", "FOXP3", "IL10", "ARG1", "NOS2", "CD68", "ITGAM", "PTPRC", "EPCAM",
)  # fmt: skip
BLOT_PAIRS: tuple[tuple[str, str, float], ...] = (  # phospho, total, kDa
    ("p-AKT (Ser473)", "AKT", 60),
    ("p-ERK1/2", "ERK1/2", 42),
    ("p-STAT3 (Tyr705)", "STAT3", 88),
    ("p-mTOR", "mTOR", 289),
    ("p-p65", "NF-\u03baB p65", 65),
    ("p-JNK", "JNK", 54),
    ("p-p38", "p38 MAPK", 40),
    ("p-AMPK\u03b1", "AMPK\u03b1", 62),
    ("p-Smad2/3", "Smad2/3", 55),
    ("p-I\u03baB\u03b1", "I\u03baB\u03b1", 39),
)
BLOT_SINGLE: tuple[tuple[str, float], ...] = (
    ("Bax", 21), ("Bcl-2", 26), ("Cleaved caspase-3", 17), ("Caspase-3", 35), ("PARP", 116),
    ("Cleaved PARP", 89), ("LC3B", 15), ("p62", 62), ("Beclin-1", 60), ("Cyclin D1", 36),
    ("CDK4", 34), ("p21", 21), ("p53", 53), ("c-Myc", 62), ("E-cadherin", 120), ("N-cadherin", 130),
    ("Vimentin", 57), ("Snail", 29), ("HIF-1\u03b1", 120), ("VEGF", 42), ("NLRP3", 118),
    ("IL-1\u03b2", 31), ("iNOS", 130), ("COX-2", 72), ("Nrf2", 110), ("HO-1", 32), ("GPX4", 22),
    ("SIRT1", 110), ("PCNA", 36), ("MMP-9", 92), ("Collagen I", 139), ("\u03b1-SMA", 42),
    ("FLAG", 50), ("HA", 45),
)  # fmt: skip
LOADING: tuple[tuple[str, float], ...] = (
    ("\u03b2-actin", 42), ("GAPDH", 37), ("\u03b1-tubulin", 55), ("\u03b2-tubulin", 55),
    ("Vinculin", 124), ("Histone H3", 15), ("Lamin B1", 68), ("HSP90", 90),
)  # fmt: skip
KDA_LADDER = (250, 180, 130, 100, 70, 55, 40, 35, 25, 15, 10)
BP_LADDERS: tuple[tuple[int, ...], ...] = (
    (10000, 8000, 6000, 5000, 4000, 3000, 2000, 1500, 1000, 750, 500, 250),
    (3000, 2000, 1500, 1000, 900, 800, 700, 600, 500, 400, 300, 200, 100),
    (2000, 1500, 1000, 750, 500, 250, 100),
    (1000, 800, 600, 500, 400, 300, 200, 100, 50),
)

# real variables: (source, column, axis label)
DIAB_COLS = (
    ("Age (years)", 0), ("BMI (kg/m\u00b2)", 2), ("Mean arterial pressure (mmHg)", 3),
    ("Total cholesterol (mg/dL)", 4), ("LDL-C (mg/dL)", 5), ("HDL-C (mg/dL)", 6), ("TC/HDL ratio", 7),
    ("log triglycerides", 8), ("Fasting glucose (mg/dL)", 9),
)  # fmt: skip
BC_COLS = (
    ("Nuclear radius (\u03bcm)", 0), ("Nuclear texture (SD)", 1), ("Nuclear perimeter (\u03bcm)", 2),
    ("Nuclear area (\u03bcm\u00b2)", 3), ("Smoothness", 4), ("Compactness", 5), ("Concavity", 6),
    ("Concave points", 7), ("Symmetry", 8), ("Fractal dimension", 9), ("Worst area (\u03bcm\u00b2)", 23),
)  # fmt: skip
WINE_COLS = (
    ("Alcohol (%)", 0), ("Malic acid (g/L)", 1), ("Ash (g/L)", 2), ("Magnesium (mg/L)", 4),
    ("Total phenols (mg/L)", 5), ("Flavonoids (mg/L)", 6), ("Proline (mg/L)", 12),
)  # fmt: skip
IRIS_COLS = (
    ("Sepal length (cm)", 0),
    ("Sepal width (cm)", 1),
    ("Petal length (cm)", 2),
    ("Petal width (cm)", 3),
)


# ----------------------------------------------------------------------------------------------
# data (real tables shipped with installed packages; synthetic fallbacks keep renders possible)
# ----------------------------------------------------------------------------------------------


def default_data_dirs() -> dict[str, Path]:
    """Where matplotlib's sample data and scikit-learn's dataset CSVs live (those installed)."""
    out: dict[str, Path] = {}
    mpl = _package_dir("matplotlib")
    if mpl is not None:
        out["mpl"] = mpl / "mpl-data" / "sample_data"
    skl = _package_dir("sklearn")
    if skl is not None:
        out["sklearn"] = skl / "datasets" / "data"
    return out


@lru_cache(maxsize=8)
def _tables(
    sklearn_dir: str | None,
) -> dict[str, tuple[np.ndarray, np.ndarray | None, tuple[tuple[str, int], ...]]]:
    """name -> (features, target or None, (label, column) pairs).  Synthetic when not installed."""
    from pmcflow.synth.sources import _read_breast_cancer, _read_diabetes

    out: dict[str, tuple[np.ndarray, np.ndarray | None, tuple[tuple[str, int], ...]]] = {}
    d = Path(sklearn_dir) if sklearn_dir else None
    try:
        if d is None:
            raise FileNotFoundError
        x, y = _read_breast_cancer(d)
        out["bc"] = (x, y, BC_COLS)
        dx, dy = _read_diabetes(d)
        out["diab"] = (dx, dy, DIAB_COLS)
        for name, cols in (("wine", WINE_COLS), ("iris", IRIS_COLS)):
            rows = (d / f"{name}_data.csv" if name == "wine" else d / "iris.csv").read_text().splitlines()[1:]
            arr = np.array([[float(v) for v in r.split(",")] for r in rows if r.strip()])
            out[name] = (arr[:, :-1], arr[:, -1].astype(int), cols)
    except (OSError, ValueError, IndexError):
        g = np.random.default_rng(0)
        n = 400
        base = g.normal(size=(n, 1))
        x = np.abs(10 + 3 * base + g.normal(size=(n, 12)) * 2) + 1
        out = {"syn": (x, (base[:, 0] > 0).astype(int), tuple((f"Variable {i + 1}", i) for i in range(12)))}
    return out


def _column(rng: np.random.Generator, data_dirs: Mapping[str, Path]) -> tuple[np.ndarray, str, str]:
    """A random real variable (values, axis label, table name)."""
    tabs = _tables(str(data_dirs["sklearn"]) if "sklearn" in data_dirs else None)
    name = _pick(rng, sorted(k for k in tabs if k != "iris"))
    x, _, cols = tabs[name]
    label, c = cols[int(rng.integers(len(cols)))]
    return x[:, c].astype(float), label, name


def _group_samples(
    rng: np.random.Generator, vals: np.ndarray, n_groups: int, n_per: Sequence[int]
) -> list[np.ndarray]:
    """Samples of real values drawn from shifted quantile windows (real shapes, group effects)."""
    s = np.sort(vals[np.isfinite(vals)])
    c0 = float(rng.uniform(0.3, 0.55))
    out = []
    for g in range(n_groups):
        c = c0 if g == 0 else float(np.clip(c0 + rng.normal(0.0, 0.22), 0.12, 0.88))
        half = float(rng.uniform(0.12, 0.3))
        lo, hi = int(max(0, (c - half) * len(s))), int(min(len(s), (c + half) * len(s)))
        hi = max(hi, lo + 2)
        out.append(s[rng.integers(lo, hi, size=n_per[g])])
    return out


def _scale_groups(groups: list[np.ndarray], mode: Any) -> list[np.ndarray]:
    ref = float(np.mean(groups[0])) or 1.0
    if mode == "rel":
        return [g / ref for g in groups]
    if mode == "pct":
        return [100.0 * g / ref for g in groups]
    allm = float(np.mean(np.concatenate(groups))) or 1.0
    return [g / allm * float(mode) for g in groups]


# ----------------------------------------------------------------------------------------------
# statistics
# ----------------------------------------------------------------------------------------------


def _welch_p(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.special import stdtr

    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return 1.0
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    if va + vb <= 0:
        return 1.0 if a.mean() == b.mean() else 1e-6
    t = (a.mean() - b.mean()) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1) + 1e-300)
    return float(2 * stdtr(df, -abs(t)))


def _pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    from scipy.special import stdtr

    r = float(np.corrcoef(x, y)[0, 1])
    n = len(x)
    t = r * math.sqrt(max(n - 2, 1) / max(1e-12, 1 - r * r))
    return r, float(2 * stdtr(n - 2, -abs(t)))


def _stars(p: float) -> str:
    if p < 1e-4:
        return "****"
    if p < 1e-3:
        return "***"
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return "ns"


def _p_text(p: float, style: str, cap: str = "p") -> str:
    if style == "stars":
        return _stars(p)
    if p < 1e-4:
        return f"{cap} < 0.0001"
    if p < 1e-3:
        return f"{cap} < 0.001"
    return f"{cap} = {p:.3f}" if p < 0.1 else f"{cap} = {p:.2f}"


def _km(times: np.ndarray, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kaplan-Meier step function: (times starting at 0, survival after each time)."""
    order = np.argsort(times, kind="stable")
    t, e = times[order], events[order]
    uniq = np.unique(t[e == 1])
    s, xs, ys = 1.0, [0.0], [1.0]
    for u in uniq:
        at_risk = int(np.sum(t >= u))
        d = int(np.sum((t == u) & (e == 1)))
        if at_risk:
            s *= 1 - d / at_risk
        xs.append(float(u))
        ys.append(s)
    return np.asarray(xs), np.asarray(ys)


def _logrank_p(groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> float:
    """Log-rank test of two or more groups (chi-square with k-1 df)."""
    from scipy.special import chdtrc

    t_all = np.concatenate([g[0] for g in groups])
    e_all = np.concatenate([g[1] for g in groups])
    k = len(groups)
    o_minus_e = np.zeros(k)
    v = np.zeros((k, k))
    for u in np.unique(t_all[e_all == 1]):
        n = np.array([np.sum(g[0] >= u) for g in groups], float)
        d = np.array([np.sum((g[0] == u) & (g[1] == 1)) for g in groups], float)
        nt, dt = n.sum(), d.sum()
        if nt < 2:
            continue
        o_minus_e += d - dt * n / nt
        f = dt * (nt - dt) / (nt * nt * (nt - 1))
        v += f * (np.diag(n * nt) - np.outer(n, n))
    try:
        stat = float(o_minus_e[:-1] @ np.linalg.solve(v[:-1, :-1], o_minus_e[:-1]))
    except np.linalg.LinAlgError:
        return 1.0
    return float(chdtrc(k - 1, max(stat, 0.0)))


# ----------------------------------------------------------------------------------------------
# style and canvas
# ----------------------------------------------------------------------------------------------


def _pick(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def _weighted(rng: np.random.Generator, items: Sequence[tuple[Any, float]]) -> Any:
    w = np.asarray([p for _, p in items], float)
    return items[int(rng.choice(len(items), p=w / w.sum()))][0]


class Style:
    """The look of one panel: theme, palette, font size, line widths, resolution."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.theme = _weighted(
            rng, [("prism", 0.4), ("classic", 0.15), ("ggplot", 0.15), ("minimal", 0.15), ("bw", 0.15)]
        )
        self.fs = float(rng.choice([7, 7.5, 8, 8, 9, 9, 10, 11]))
        self.bold = self.theme == "prism" and rng.random() < 0.4
        self.dpi = int(rng.integers(110, 171))
        self.lw = float(rng.uniform(1.0, 1.6)) if self.theme == "prism" else float(rng.uniform(0.6, 1.0))
        pal = _pick(rng, sorted(PALETTES))
        if self.theme == "ggplot" and rng.random() < 0.6:
            pal = "ggplot"
        self.palette_name = pal
        self.palette = list(PALETTES[pal])
        self.capsize = float(rng.uniform(1.5, 5.0))
        self.marker = _pick(rng, ["o", "o", "s", "^", "D", "v"])
        self.legend_frame = bool(rng.random() < 0.25)
        self.err = "SEM" if rng.random() < 0.65 else "SD"
        self.sig_style = "stars" if rng.random() < 0.8 else "p"

    def rc(self) -> dict[str, Any]:
        from cycler import cycler

        box = self.theme in ("classic", "bw")
        ggplot = self.theme == "ggplot"
        fs = self.fs
        return {
            "font.family": FONT,
            "font.sans-serif": [FONT],
            "svg.hashsalt": "pmcflow",
            "font.size": fs,
            "font.weight": "bold" if self.bold else "normal",
            "axes.labelsize": fs,
            "axes.labelweight": "bold" if self.bold else "normal",
            "axes.titlesize": fs * 1.05,
            "axes.titleweight": "bold" if self.bold or self.theme == "minimal" else "normal",
            "xtick.labelsize": fs * 0.92,
            "ytick.labelsize": fs * 0.92,
            "legend.fontsize": fs * 0.88,
            "legend.frameon": self.legend_frame,
            "legend.handlelength": 1.4,
            "axes.linewidth": self.lw,
            "axes.edgecolor": "#333333" if self.theme == "minimal" else "black",
            "axes.spines.top": box,
            "axes.spines.right": box,
            "axes.spines.left": not ggplot,
            "axes.spines.bottom": not ggplot,
            "axes.facecolor": "#EBEBEB" if ggplot else "white",
            "axes.grid": self.theme in ("ggplot", "minimal", "bw"),
            "grid.color": "white" if ggplot else "#DEDEDE",
            "grid.linewidth": 0.9 if ggplot else 0.6,
            "axes.axisbelow": True,
            "axes.prop_cycle": cycler(color=self.palette),
            "xtick.direction": "in" if self.theme == "classic" else "out",
            "ytick.direction": "in" if self.theme == "classic" else "out",
            "xtick.major.width": self.lw,
            "ytick.major.width": self.lw,
            "xtick.major.size": 3.5 if not ggplot else 2.5,
            "ytick.major.size": 3.5 if not ggplot else 2.5,
            "xtick.color": "#333333" if ggplot else "black",
            "ytick.color": "#333333" if ggplot else "black",
            "xtick.labelcolor": "#4D4D4D" if ggplot else "black",
            "ytick.labelcolor": "#4D4D4D" if ggplot else "black",
            "lines.linewidth": 1.4 if self.theme == "prism" else 1.1,
            "errorbar.capsize": self.capsize,
            "figure.facecolor": "white",
            "mathtext.default": "regular",
            "axes.unicode_minus": True,
            "image.interpolation": "antialiased",
        }

    def colors(self, n: int, rng: np.random.Generator | None = None) -> list[str]:
        pal = self.palette
        if self.palette_name == "prism_grey":
            return [pal[i % len(pal)] for i in range(n)]
        start = 0 if rng is None else int(rng.integers(0, 3))
        return [pal[(start + i) % len(pal)] for i in range(n)]


def _figure(style: Style, w_in: float, h_in: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w_in, h_in), dpi=style.dpi, facecolor="white")
    FigureCanvasAgg(fig)
    return fig


def _canvas_array(fig: Any) -> np.ndarray:
    fig.canvas.draw()
    return np.array(np.asarray(fig.canvas.buffer_rgba())[..., :3])


def _autocrop(arr: np.ndarray, margin: int) -> np.ndarray:
    """The content of a white canvas plus ``margin`` white pixels on each side."""
    ink = (arr < BG_THRESHOLD).any(axis=2)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if rows.size == 0:
        return arr
    t, b, l_, r = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    core = arr[t:b, l_:r]
    out = np.full((core.shape[0] + 2 * margin, core.shape[1] + 2 * margin, 3), 255, np.uint8)
    out[margin : margin + core.shape[0], margin : margin + core.shape[1]] = core
    return out


def _grow_to_content(fig: Any, pad: float = 0.06) -> None:
    """Enlarge the canvas (keeping every axes' size in inches) until all artists fit inside it."""
    for _ in range(3):
        bb = fig.get_tightbbox(fig.canvas.get_renderer())
        W, H = (float(v) for v in fig.get_size_inches())
        left, bottom = max(0.0, pad - bb.x0), max(0.0, pad - bb.y0)
        right, top = max(0.0, bb.x1 - W + pad), max(0.0, bb.y1 - H + pad)
        if left == bottom == right == top == 0.0:
            return
        boxes = [(ax, ax.get_position()) for ax in fig.axes]
        W2, H2 = W + left + right, H + bottom + top
        fig.set_size_inches(W2, H2)
        for ax, p in boxes:
            ax.set_position(
                ((p.x0 * W + left) / W2, (p.y0 * H + bottom) / H2, p.width * W / W2, p.height * H / H2)
            )


def _yfmt(ax: Any) -> None:
    """Plain tick labels on the y axis (no offset text or scientific notation)."""
    from matplotlib.ticker import ScalarFormatter

    f = ScalarFormatter(useOffset=False)
    f.set_scientific(False)
    ax.yaxis.set_major_formatter(f)


def _long(labels: Sequence[str]) -> bool:
    return max(len(s) for s in labels) * len(labels) > 26


def _set_xticklabels(ax: Any, pos: Sequence[float], labels: Sequence[str], rng: np.random.Generator) -> None:
    """Category tick labels, rotated when they would not fit side by side."""
    import matplotlib

    fig = ax.get_figure()
    per_pt = ax.get_position().width * float(fig.get_size_inches()[0]) * 72 / max(1, len(labels))
    size = matplotlib.rcParams["xtick.labelsize"]
    need_pt = max(len(s) for s in labels) * (float(size) if not isinstance(size, str) else 8.0) * 0.62
    if need_pt > per_pt * 0.9:
        rot = _pick(rng, [30, 45, 45, 90])
        ax.set_xticks(
            list(pos),
            list(labels),
            rotation=rot,
            ha="right" if rot < 90 else "center",
            rotation_mode="anchor" if rot < 90 else "default",
        )
    else:
        ax.set_xticks(list(pos), list(labels))


def _brackets(
    ax: Any,
    pairs: Sequence[tuple[float, float]],
    xs: Sequence[float],
    tops: Sequence[float],
    texts: Sequence[str],
    fs: float,
    lw: float,
) -> None:
    """Significance brackets between x positions, stacked above ``tops`` (the data maxima at ``xs``)."""
    lo, hi = ax.get_ylim()
    span = hi - lo
    base = max(tops)
    h = 0.025 * span
    levels: list[tuple[float, float, float]] = []
    for (x1, x2), txt in zip(pairs, texts, strict=True):
        a, b = min(x1, x2), max(x1, x2)
        local = max((t for x, t in zip(xs, tops, strict=True) if a - 1e-9 <= x <= b + 1e-9), default=base)
        y = local + 0.06 * span
        for a2, b2, y2 in levels:
            if not (b < a2 or a > b2):
                y = max(y, y2 + 0.1 * span)
        levels.append((a, b, y))
        ax.plot([a, a, b, b], [y, y + h, y + h, y], color="black", lw=max(0.6, lw * 0.8), clip_on=False)
        ax.text((a + b) / 2, y + h + (0.005 if txt != "ns" and "=" not in txt and "<" not in txt else 0.012) * span, txt,
                ha="center", va="bottom", fontsize=fs * (1.1 if "*" in txt else 0.85))  # fmt: skip
    top = max(y for _, _, y in levels) + 0.16 * span
    if top > hi:
        ax.set_ylim(lo, top)


def _legend(
    ax: Any,
    rng: np.random.Generator,
    style: Style,
    where: Sequence[str] = ("best", "upper right", "upper left", "outside"),
    **kw: Any,
) -> None:
    loc = _pick(rng, list(where))
    if loc == "outside":
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.2, **kw)
    elif loc == "above":
        n = len(ax.get_legend_handles_labels()[0])
        ax.legend(
            loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=n, borderaxespad=0.3, columnspacing=1.0, **kw
        )
    else:
        ax.legend(loc=loc, **kw)


# ----------------------------------------------------------------------------------------------
# kinds
# ----------------------------------------------------------------------------------------------


def _draw_bar_groups(
    ax: Any,
    rng: np.random.Generator,
    style: Style,
    groups: list[list[np.ndarray]],
    names: Sequence[str],
    series: Sequence[str] | None,
    *,
    points: bool,
    sig: bool,
    xpos: Sequence[float] | None = None,
    width: float | None = None,
) -> None:
    """Bars of ``groups[series][group]`` (means with error bars), points and significance."""
    n_s, n_g = len(groups), len(groups[0])
    pos0 = np.arange(n_g, dtype=float) if xpos is None else np.asarray(xpos, float)
    bw = width if width is not None else float(rng.uniform(0.55, 0.8)) / n_s
    colors = style.colors(max(n_s, n_g) if n_s == 1 else n_s, rng)
    per_group_color = n_s == 1 and rng.random() < 0.55
    edge = style.palette_name == "prism_grey" or rng.random() < 0.6
    one_sided = rng.random() < 0.4
    hatch = rng.random() < 0.08
    tops, xs = [], []
    for s in range(n_s):
        offs = (s - (n_s - 1) / 2) * bw
        for g in range(n_g):
            v = groups[s][g]
            m = float(np.mean(v))
            e = float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
            if style.err == "SEM" and len(v) > 1:
                e /= math.sqrt(len(v))
            c = colors[g % len(colors)] if per_group_color else colors[s % len(colors)]
            x = pos0[g] + offs
            ax.bar(x, m, bw * 0.92, color=c, edgecolor="black" if edge else c, linewidth=style.lw * 0.8 if edge else 0,
                   hatch="///" if hatch and s % 2 == 1 else None, label=series[s] if series and g == 0 else None, zorder=2)  # fmt: skip
            ax.errorbar(x, m, yerr=[[0 if one_sided else e], [e]], fmt="none", ecolor="black", elinewidth=style.lw * 0.8,
                        capsize=style.capsize, capthick=style.lw * 0.8, zorder=3)  # fmt: skip
            top = m + e
            if points:
                jit = rng.uniform(-bw * 0.28, bw * 0.28, size=len(v))
                face = (
                    "white"
                    if rng.random() < 0.2
                    else ("black" if c.upper() in ("#FFFFFF", "#D9D9D9") or rng.random() < 0.5 else c)
                )
                ax.scatter(x + jit, v, s=float(rng.uniform(6, 16)), marker=style.marker, facecolor=face, edgecolor="black",
                           linewidth=0.5, zorder=4)  # fmt: skip
                top = max(top, float(np.max(v)))
            tops.append(top)
            xs.append(x)
    ax.set_ylim(bottom=0)
    ax.margins(y=0.08)
    if sig:
        fs = style.fs
        pairs, texts = [], []
        if n_s == 1:
            mode = "control" if rng.random() < 0.4 else "brackets"
            for g in range(1, n_g):
                p = _welch_p(groups[0][0], groups[0][g])
                if mode == "control":
                    ax.text(
                        pos0[g],
                        tops[g] + 0.02 * (ax.get_ylim()[1]),
                        _stars(p),
                        ha="center",
                        va="bottom",
                        fontsize=fs * 1.05,
                    )
                elif g == 1 or rng.random() < 0.7:
                    ga = 0 if rng.random() < 0.6 or g == 1 else g - 1
                    pairs.append((pos0[ga], pos0[g]))
                    texts.append(_p_text(_welch_p(groups[0][ga], groups[0][g]), style.sig_style))
            if mode == "control":
                ax.set_ylim(top=max(tops) * 1.15)
        else:
            for g in range(n_g):
                if rng.random() < 0.75:
                    a = pos0[g] - (n_s - 1) / 2 * bw
                    b = a + bw
                    pairs.append((a, b))
                    texts.append(_stars(_welch_p(groups[0][g], groups[1][g])))
        if pairs:
            _brackets(ax, pairs, xs, tops, texts, fs, style.lw)


def _bar(fig: Any, rng: np.random.Generator, style: Style, dd: Mapping[str, Path]) -> None:
    vals, _, _ = _column(rng, dd)
    names = list(_pick(rng, GROUP_SETS))
    n_g = min(len(names), int(rng.integers(2, 7)))
    names = names[:n_g] if len(names) >= 2 else names
    n_s = 1 if rng.random() < 0.6 else min(2 + int(rng.random() < 0.25), 3)
    series = list(_pick(rng, [s for s in SERIES_SETS if len(s) >= n_s]))[:n_s] if n_s > 1 else None
    n_per = int(rng.integers(3, 11))
    ylabel, mode = _pick(rng, Y_MEASURES)
    raw = [_group_samples(rng, vals, n_g, [n_per] * n_g) for _ in range(n_s)]
    ref = float(np.mean(raw[0][0])) or 1.0
    groups = [_scale_groups([raw[0][0] * 0 + ref] + r, mode)[1:] for r in raw]
    ax = fig.add_subplot(111)
    _draw_bar_groups(
        ax, rng, style, groups, names, series, points=rng.random() < 0.65, sig=rng.random() < 0.8
    )
    _set_xticklabels(ax, range(n_g), names, rng)
    ax.set_ylabel(ylabel)
    _yfmt(ax)
    if mode == "rel" and rng.random() < 0.25:
        ax.axhline(1.0, color="grey", lw=0.8, ls="--", zorder=1)
    if series:
        _legend(ax, rng, style, ("outside", "above", "above"))
    if rng.random() < 0.3:
        ax.set_title(_pick(rng, TITLES))
    if style.theme in ("ggplot", "minimal", "bw"):
        ax.grid(axis="x", visible=False)


def _line(fig: Any, rng: np.random.Generator, style: Style, dd: Mapping[str, Path]) -> None:
    sub = _weighted(rng, [("growth", 0.35), ("dose", 0.25), ("trace", 0.2), ("gtt", 0.2)])
    ax = fig.add_subplot(111)
    names = list(_pick(rng, [s for s in GROUP_SETS if 2 <= len(s) <= 4 and not s[0][0].isdigit()]))
    n_g = len(names)
    colors = style.colors(n_g, rng)
    if style.palette_name == "prism_grey":
        colors = ["black", "#555555", "#999999", "#222222"][:n_g]
    markers = ["o", "s", "^", "D", "v"]
    band = rng.random() < 0.35
    last_means: list[float] = []
    if sub == "growth":
        step = int(rng.choice([2, 3, 4, 7]))
        days = np.arange(0, int(rng.integers(4, 8)) * step + 1, step, dtype=float)
        weight = rng.random() < 0.3
        for g in range(n_g):
            if weight:
                base = rng.normal(22, 1.0, size=(8, 1))
                vals = base * (1 + (0.004 - 0.006 * g) * days[None, :]) + rng.normal(0, 0.5, (8, len(days)))
            else:
                r = float(rng.uniform(0.12, 0.22)) * (1 - 0.25 * g)
                v0 = rng.lognormal(math.log(80), 0.2, size=(8, 1))
                vals = (
                    v0
                    * np.exp(r * days[None, :] * float(rng.uniform(0.6, 1.0)))
                    * rng.lognormal(0, 0.12, (8, len(days)))
                )
            m, e = vals.mean(0), vals.std(0, ddof=1) / (math.sqrt(8) if style.err == "SEM" else 1)
            _series(ax, days, m, e, colors[g], markers[g % 5], names[g], band, style)
            last_means.append(float(m[-1]))
        ax.set_xlabel(_pick(rng, ["Days after inoculation", "Days", "Time (days)", "Days post treatment"]))
        ax.set_ylabel(
            "Body weight (g)"
            if weight
            else _pick(rng, ["Tumor volume (mm\u00b3)", "Tumour volume (mm\u00b3)", "Relative tumor volume"])
        )
        if not weight and rng.random() < 0.7:
            ax.text(
                days[-1] + 0.3 * step,
                float(np.mean(last_means)),
                "***" if rng.random() < 0.6 else "**",
                va="center",
                fontsize=style.fs * 1.1,
            )
    elif sub == "dose":
        conc = np.logspace(-3, 2, int(rng.integers(6, 10)))
        drug = _pick(
            rng, ["Cisplatin", "Doxorubicin", "Gemcitabine", "Compound 7", "Erlotinib", "Paclitaxel"]
        )
        lines_names = names if rng.random() < 0.6 else ["Parental", "Resistant"]
        for g, name in enumerate(lines_names):
            ic50 = 10 ** float(rng.uniform(-2, 1.2)) * (1 + 2 * g)
            hill = float(rng.uniform(0.8, 1.8))
            bottom = float(rng.uniform(0, 15))

            def f(
                c: np.ndarray, bottom: float = bottom, ic50: float = ic50, hill: float = hill
            ) -> np.ndarray:
                return bottom + (100 - bottom) / (1 + (c / ic50) ** hill)

            reps = f(conc)[None, :] + rng.normal(0, 4, size=(3, len(conc)))
            m, e = reps.mean(0), reps.std(0, ddof=1)
            c = colors[g % len(colors)]
            ax.errorbar(
                conc,
                m,
                yerr=e,
                fmt=markers[g % 5],
                color=c,
                mfc=c if g % 2 == 0 else "white",
                ms=4.5,
                capsize=style.capsize * 0.7,
                lw=0,
            )
            xs = np.logspace(-3.2, 2.2, 120)
            lab = f"{name} (IC\u2085\u2080 = {ic50:.2g} \u03bcM)" if rng.random() < 0.5 else name
            ax.plot(xs, f(xs), color=c, label=lab)
        ax.set_xscale("log")
        ax.set_xlabel(_pick(rng, [f"{drug} (\u03bcM)", "Concentration (\u03bcM)", f"[{drug}] (\u03bcM)"]))
        ax.set_ylabel(
            _pick(rng, ["Cell viability (%)", "Viability (% of control)", "Relative viability (%)"])
        )
        ax.set_ylim(-5, 125)
        names = lines_names
    elif sub == "trace":
        eeg = _eeg(dd)
        fs_hz = 128.0
        L = int(rng.integers(64, 110))
        pre = 12
        t = (np.arange(L) - pre) / fs_hz * 1000
        chans = rng.choice(eeg.shape[1], size=min(n_g, eeg.shape[1]), replace=False)
        for g, ch in enumerate(chans):
            starts = rng.integers(0, eeg.shape[0] - L, size=40)
            ep = np.stack([eeg[s : s + L, ch] for s in starts])
            ep = ep - ep[:, :pre].mean(1, keepdims=True)
            m, e = ep.mean(0), ep.std(0, ddof=1) / math.sqrt(len(ep))
            c = colors[g % len(colors)]
            ax.plot(t, m, color=c, label=names[g])
            ax.fill_between(t, m - e, m + e, color=c, alpha=0.25, lw=0)
        ax.axvline(0, color="grey", ls="--", lw=0.8)
        ax.set_xlabel("Time (ms)")
        ax.set_ylabel(_pick(rng, ["Amplitude (\u03bcV)", "\u0394F/F (%)", "Response (\u03bcV)"]))
        band = True
    else:  # glucose tolerance test, baselines from the real diabetes glucose column
        tabs = _tables(str(dd["sklearn"]) if "sklearn" in dd else None)
        gl = tabs["diab"][0][:, 9] if "diab" in tabs else np.full(50, 90.0)
        tmin = np.array([0, 15, 30, 60, 90, 120], float)
        shape = np.array([0, 1.0, 0.9, 0.6, 0.35, 0.15])
        for g in range(n_g):
            base = gl[rng.integers(0, len(gl), size=8)][:, None] * 1.1
            peak = float(rng.uniform(120, 220)) * (1 + 0.35 * g)
            vals = (
                base
                + peak * shape[None, :] * rng.lognormal(0, 0.15, (8, 1))
                + rng.normal(0, 8, (8, len(tmin)))
            )
            m, e = vals.mean(0), vals.std(0, ddof=1) / (math.sqrt(8) if style.err == "SEM" else 1)
            _series(ax, tmin, m, e, colors[g], markers[g % 5], names[g], band, style)
        ax.set_xticks(tmin)
        ax.set_xlabel("Time (min)")
        ax.set_ylabel("Blood glucose (mg/dL)")
        if rng.random() < 0.5:
            ax.set_title(_pick(rng, ["GTT", "IPGTT", "OGTT", "ITT"]))
    _yfmt(ax) if sub != "dose" else None
    if sub != "dose" and ax.get_ylim()[0] > 0 and sub != "trace":
        ax.set_ylim(bottom=0)
    if rng.random() < 0.85:
        _legend(ax, rng, style)


def _series(
    ax: Any, x: np.ndarray, m: np.ndarray, e: np.ndarray, c: str, mk: str, name: str, band: bool, style: Style
) -> None:
    if band:
        ax.plot(x, m, color=c, marker=mk, ms=4, label=name)
        ax.fill_between(x, m - e, m + e, color=c, alpha=0.22, lw=0)
    else:
        ax.errorbar(x, m, yerr=e, color=c, marker=mk, ms=4.5, mfc=c, capsize=style.capsize * 0.7, label=name)


@lru_cache(maxsize=2)
def _eeg_cached(path: str) -> np.ndarray:
    return np.fromfile(path, dtype=np.float64).reshape((-1, 4))


def _eeg(dd: Mapping[str, Path]) -> np.ndarray:
    p = Path(dd["mpl"]) / "eeg.dat" if "mpl" in dd else None
    if p is not None and p.exists():
        return _eeg_cached(str(p))
    g = np.random.default_rng(1)
    return np.cumsum(g.normal(size=(4000, 4)), axis=0) * 0.1


def _scatter(fig: Any, rng: np.random.Generator, style: Style, dd: Mapping[str, Path]) -> None:
    tabs = _tables(str(dd["sklearn"]) if "sklearn" in dd else None)
    name = _pick(rng, sorted(tabs))
    x_all, tgt, cols = tabs[name]
    i, j = rng.choice(len(cols), size=2, replace=False)
    if name == "diab" and rng.random() < 0.5:  # disease progression is the table's target
        xl, xc = cols[int(i)]
        xv, yv, yl = x_all[:, xc], np.asarray(tgt, float), "Disease progression (1 y)"
    else:
        (xl, xc), (yl, yc) = cols[int(i)], cols[int(j)]
        xv, yv = x_all[:, xc], x_all[:, yc]
    n = int(min(len(xv), rng.integers(25, 260)))
    idx = rng.choice(len(xv), size=n, replace=False)
    xv, yv = xv[idx], yv[idx]
    ax = fig.add_subplot(111)
    c = style.colors(3, rng)
    grouped = tgt is not None and name in ("bc", "iris", "wine") and rng.random() < 0.35
    s = float(rng.uniform(6, 22))
    edge = "black" if rng.random() < 0.4 else "none"
    if grouped:
        gnames = {
            "bc": ["Malignant", "Benign"],
            "iris": ["Type I", "Type II", "Type III"],
            "wine": ["Cohort 1", "Cohort 2", "Cohort 3"],
        }[name]
        gi = np.asarray(tgt)[idx]
        for k in np.unique(gi):
            sel = gi == k
            ax.scatter(
                xv[sel],
                yv[sel],
                s=s,
                color=c[int(k) % 3],
                edgecolor=edge,
                linewidth=0.4,
                marker=style.marker,
                label=gnames[int(k)],
                alpha=0.85,
            )
        _legend(ax, rng, style, ("outside", "lower right", "above"), markerscale=1.2)
    else:
        ax.scatter(
            xv,
            yv,
            s=s,
            color=c[0],
            edgecolor=edge,
            linewidth=0.4,
            marker=style.marker,
            alpha=float(rng.uniform(0.6, 1.0)),
        )
    if rng.random() < 0.8:
        coef = np.polyfit(xv, yv, 1)
        xs = np.linspace(xv.min(), xv.max(), 50)
        ax.plot(xs, np.polyval(coef, xs), color="black" if rng.random() < 0.5 else c[1], lw=1.4)
        if rng.random() < 0.5:
            res = yv - np.polyval(coef, xv)
            se = math.sqrt(float(np.sum(res**2)) / max(1, n - 2))
            sx = math.sqrt(float(np.sum((xv - xv.mean()) ** 2))) or 1.0
            half = 1.97 * se * np.sqrt(1 / n + (xs - xv.mean()) ** 2 / sx**2)
            ax.fill_between(
                xs, np.polyval(coef, xs) - half, np.polyval(coef, xs) + half, color="grey", alpha=0.25, lw=0
            )
        r, p = _pearson(xv, yv)
        kind = _pick(rng, ["r", "R2", "rho"])
        if kind == "r":
            txt = f"r = {r:.2f}\n{_p_text(p, 'p', 'P' if rng.random() < 0.5 else 'p')}"
        elif kind == "R2":
            txt = f"R\u00b2 = {r * r:.2f}, {_p_text(p, 'p')}"
        else:
            rr, pp = _pearson(
                np.argsort(np.argsort(xv)).astype(float), np.argsort(np.argsort(yv)).astype(float)
            )
            txt = f"Spearman \u03c1 = {rr:.2f}\n{_p_text(pp, 'p')}"
        corner = (0.04, 0.96, "left", "top") if r >= 0 else (0.96, 0.96, "right", "top")
        ax.text(
            corner[0],
            corner[1],
            txt.replace("-", MINUS),
            transform=ax.transAxes,
            ha=corner[2],
            va=corner[3],
            fontsize=style.fs * 0.9,
        )
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.margins(0.05, 0.12)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(
        MaxNLocator(nbins=4 if fig.get_size_inches()[0] < 3.0 or style.fs >= 10 else 6)
    )


def _dist_groups(rng: np.random.Generator, dd: Mapping[str, Path]) -> tuple[list[np.ndarray], list[str], str]:
    """Groups of real values: a real grouping (BMI class, diagnosis) or quantile-window subsets."""
    tabs = _tables(str(dd["sklearn"]) if "sklearn" in dd else None)
    if "diab" in tabs and rng.random() < 0.3:
        x, y, cols = tabs["diab"]
        if rng.random() < 0.5:
            bmi = x[:, 2]
            cls = np.digitize(bmi, [25, 30])
            groups = [np.asarray(y, float)[cls == k] for k in range(3)]
            names = (
                ["Normal weight", "Overweight", "Obese"]
                if rng.random() < 0.5
                else ["BMI<25", "25\u201330", ">30"]
            )
            label = "Disease progression (1 y)"
        else:
            lab, c = cols[int(rng.integers(1, len(cols)))]
            age = x[:, 0]
            cls = np.digitize(age, [40, 60])
            groups = [x[cls == k, c] for k in range(3)]
            names = ["<40 y", "40\u201359 y", "\u226560 y"]
            label = lab
        sub = [
            g[rng.choice(len(g), size=min(len(g), int(rng.integers(15, 60))), replace=False)] for g in groups
        ]
        return sub, names, label
    if "bc" in tabs and rng.random() < 0.3:
        x, y, cols = tabs["bc"]
        lab, c = _pick(rng, cols)
        groups = [x[np.asarray(y) == 1, c], x[np.asarray(y) == 0, c]]
        sub = [
            g[rng.choice(len(g), size=min(len(g), int(rng.integers(20, 80))), replace=False)] for g in groups
        ]
        return sub, ["Benign", "Malignant"] if rng.random() < 0.6 else ["Normal", "Tumor"], lab
    vals, _, _ = _column(rng, dd)
    names = list(_pick(rng, [s for s in GROUP_SETS if len(s) <= 5]))
    n = int(rng.integers(12, 40))
    groups = _group_samples(rng, vals, len(names), [n] * len(names))
    ylabel, mode = _pick(rng, Y_MEASURES)
    return _scale_groups(groups, mode), names, ylabel


def _box(
    fig: Any, rng: np.random.Generator, style: Style, dd: Mapping[str, Path], violin: bool = False
) -> None:
    groups, names, ylabel = _dist_groups(rng, dd)
    ax = fig.add_subplot(111)
    n = len(groups)
    pos = np.arange(1, n + 1, dtype=float)
    colors = style.colors(n, rng)
    w = float(rng.uniform(0.45, 0.75))
    if violin:
        parts = ax.violinplot(groups, positions=pos, widths=w * 1.1, showextrema=False)
        for k, body in enumerate(parts["bodies"]):
            body.set_facecolor(colors[k % len(colors)])
            body.set_edgecolor("black")
            body.set_linewidth(0.6)
            body.set_alpha(float(rng.uniform(0.55, 0.9)))
        if rng.random() < 0.6:
            ax.boxplot(groups, positions=pos, widths=0.12, showfliers=False, patch_artist=True,
                       boxprops={"facecolor": "white", "linewidth": 0.7}, medianprops={"color": "black", "linewidth": 1.0},
                       whiskerprops={"linewidth": 0.7}, capprops={"linewidth": 0})  # fmt: skip
        else:
            for k, g in enumerate(groups):
                q1, med, q3 = np.percentile(g, [25, 50, 75])
                ax.plot([pos[k] - w * 0.25, pos[k] + w * 0.25], [med, med], color="black", lw=1.4)
                for q in (q1, q3):
                    ax.plot([pos[k] - w * 0.15, pos[k] + w * 0.15], [q, q], color="black", lw=0.8, ls="--")
    else:
        filled = rng.random() < 0.7
        bp = ax.boxplot(groups, positions=pos, widths=w, patch_artist=True, showfliers=rng.random() < 0.5, notch=rng.random() < 0.1,
                        whis=(0, 100) if rng.random() < 0.4 else 1.5, medianprops={"color": "black", "linewidth": 1.2},
                        flierprops={"marker": "o", "markersize": 2.5})  # fmt: skip
        for k, patch in enumerate(bp["boxes"]):
            patch.set_facecolor(colors[k % len(colors)] if filled else "white")
            patch.set_edgecolor("black" if filled else colors[k % len(colors)])
    if rng.random() < (0.5 if not violin else 0.3):
        for k, g in enumerate(groups):
            jit = rng.uniform(-w * 0.22, w * 0.22, size=len(g))
            ax.scatter(pos[k] + jit, g, s=float(rng.uniform(3, 10)), color="black" if rng.random() < 0.5 else colors[k % len(colors)],
                       alpha=0.7, linewidth=0, zorder=3)  # fmt: skip
    _set_xticklabels(ax, pos, names, rng)
    ax.set_ylabel(ylabel)
    _yfmt(ax)
    if rng.random() < 0.8:
        tops = [float(np.max(g)) for g in groups]
        pairs = [(pos[0], pos[k]) for k in range(1, n)][: int(rng.integers(1, n))]
        if n > 2 and rng.random() < 0.4:
            pairs = [(pos[k], pos[k + 1]) for k in range(n - 1)]
        texts = [_p_text(_welch_p(groups[int(a) - 1], groups[int(b) - 1]), style.sig_style) for a, b in pairs]
        _brackets(ax, pairs, list(pos), tops, texts, style.fs, style.lw)
    if rng.random() < 0.25:
        ax.set_title(_pick(rng, TITLES))
    if style.theme in ("ggplot", "minimal", "bw"):
        ax.grid(axis="x", visible=False)


def _heatmap(fig: Any, rng: np.random.Generator, style: Style, dd: Mapping[str, Path]) -> None:
    from matplotlib.colors import LinearSegmentedColormap

    tabs = _tables(str(dd["sklearn"]) if "sklearn" in dd else None)
    cmap = _pick(rng, ["RdBu_r", "bwr", "coolwarm", "RdYlBu_r", "viridis", "seismic", "gnr", "PiYG_r"])
    if cmap == "gnr":
        cmap = LinearSegmentedColormap.from_list("gnr", ["#00C000", "#000000", "#E00000"])
    if rng.random() < 0.35:  # correlation matrix of real variables
        name = _pick(rng, [k for k in ("diab", "wine", "bc") if k in tabs] or sorted(tabs))
        x, _, cols = tabs[name]
        k = min(len(cols), int(rng.integers(4, 10)))
        sel = sorted(rng.choice(len(cols), size=k, replace=False))
        labs = [cols[i][0].split(" (")[0] for i in sel]
        c = np.corrcoef(x[:, [cols[i][1] for i in sel]].T)
        ax = fig.add_subplot(111)
        cm = cmap if cmap in ("RdBu_r", "bwr", "coolwarm", "RdYlBu_r", "seismic", "PiYG_r") else "RdBu_r"
        im = ax.imshow(c, cmap=cm, vmin=-1, vmax=1)
        cell_pt = min(float(v) for v in fig.get_size_inches()) * 72 * 0.5 / k
        if cell_pt >= 14 and rng.random() < 0.65:
            for a in range(k):
                for b in range(k):
                    ax.text(b, a, f"{c[a, b]:.2f}".replace("-", MINUS).replace("0.", "."), ha="center", va="center",
                            fontsize=min(style.fs * 0.75, cell_pt / 3.0), fontweight="normal", color="white" if abs(c[a, b]) > 0.6 else "black")  # fmt: skip
        ax.set_xticks(range(k), labs, rotation=_pick(rng, [45, 90]), ha="right", rotation_mode="anchor")
        ax.set_yticks(range(k), labs)
        ax.tick_params(length=0)
        for sp in ax.spines.values():
            sp.set_visible(False)
        ax.grid(False)
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cb.set_label(_pick(rng, ["Pearson r", "Correlation", "r"]))
        return
    name = _pick(rng, [k for k in ("bc", "wine", "diab") if k in tabs] or sorted(tabs))
    x, y, cols = tabs[name]
    n_genes = int(rng.integers(8, 31))
    groups = list(_pick(rng, [s for s in GROUP_SETS if 2 <= len(s) <= 3 and not s[0][0].isdigit()]))
    reps = int(rng.integers(2, 6))
    # samples: each group draws rows from a different stratum of the table
    order = np.argsort(x[:, int(rng.integers(x.shape[1]))])
    strata = np.array_split(order, len(groups))
    rows = np.concatenate([rng.choice(s, size=reps, replace=False) for s in strata])
    fcols = rng.choice(x.shape[1], size=n_genes, replace=x.shape[1] < n_genes)
    m = x[np.ix_(rows, fcols)].T.astype(float)
    m = m + rng.normal(0, 1e-6, m.shape) * m.std()
    z = (m - m.mean(1, keepdims=True)) / (m.std(1, keepdims=True) + 1e-12)
    z = z[np.argsort(z[:, :reps].mean(1) - z[:, -reps:].mean(1))]
    genes = list(rng.choice(GENES, size=n_genes, replace=False))
    ax = fig.add_subplot(111)
    im = ax.imshow(z, cmap=cmap, aspect="auto", vmin=-2.5, vmax=2.5, interpolation="nearest")
    ylab_fs = style.fs * (0.85 if n_genes <= 16 else 0.62)
    ax.set_yticks(
        range(n_genes), genes, fontsize=ylab_fs, fontstyle="italic" if rng.random() < 0.5 else "normal"
    )
    if rng.random() < 0.4:
        ax.yaxis.tick_right()
    samples = [f"{g}-{r + 1}" for g in groups for r in range(reps)]
    if rng.random() < 0.5:
        ax.set_xticks(range(len(samples)), samples, rotation=90, fontsize=style.fs * 0.8)
    else:
        ax.set_xticks([(k + 0.5) * reps - 0.5 for k in range(len(groups))], groups)
        for k in range(1, len(groups)):
            ax.axvline(k * reps - 0.5, color="white", lw=1.5)
    ax.tick_params(length=0)
    ax.grid(False)
    for sp in ax.spines.values():
        sp.set_visible(rng.random() < 0.3)
    cb = fig.colorbar(
        im,
        ax=ax,
        fraction=0.06,
        pad=0.03 if ax.yaxis.get_ticks_position() != "right" else 0.22,
        shrink=float(rng.uniform(0.4, 0.9)),
    )
    cb.set_label(_pick(rng, ["Row z-score", "z-score", "log\u2082 FC", "Relative expression", ""]))
    cb.ax.tick_params(labelsize=style.fs * 0.8)
    if rng.random() < 0.3:
        ax.set_title(
            _pick(
                rng,
                [
                    "Inflammation",
                    "Lipid metabolism",
                    "EMT genes",
                    "Top DEGs",
                    "Hallmark hypoxia",
                    "Cell cycle",
                ],
            )
        )


def _survival(fig: Any, rng: np.random.Generator, style: Style) -> None:
    sets = [("Low expression", "High expression"), ("Wild type", "Mutant"), ("Stage I\u2013II", "Stage III\u2013IV"), ("Placebo", "Treatment"),
            ("Low risk", "High risk"), ("Vehicle", "Drug"), ("Low", "Medium", "High"), ("WT", "Het", "KO"), ("Negative", "Positive")]  # fmt: skip
    names = list(_pick(rng, sets))
    k = len(names)
    mice = rng.random() < 0.35
    tmax = float(rng.choice([60, 120, 100])) if not mice else float(rng.choice([30, 40, 60, 90]))
    groups = []
    for g in range(k):
        n = int(rng.integers(10, 25)) if mice else int(rng.integers(30, 160))
        scale = tmax * float(rng.uniform(0.3, 1.4)) / (1 + 0.8 * g * float(rng.uniform(0.3, 1.2)))
        t = scale * rng.weibull(float(rng.uniform(0.9, 2.2)), size=n)
        cens = rng.uniform(tmax * 0.3, tmax * 1.3, size=n) if rng.random() < 0.8 else np.full(n, tmax)
        e = (t <= cens).astype(int)
        t = np.minimum(t, cens)
        t = np.minimum(t, tmax)
        e[t >= tmax] = 0
        groups.append((np.round(t, 1) if mice else t, e))
    risk_table = not mice and rng.random() < 0.45
    if risk_table:
        gs = fig.add_gridspec(2, 1, height_ratios=[4, 1.0 + 0.25 * k], hspace=0.45)
        ax = fig.add_subplot(gs[0])
        axr = fig.add_subplot(gs[1], sharex=ax)
    else:
        ax = fig.add_subplot(111)
    colors = style.colors(k, rng)
    if style.palette_name == "prism_grey":
        colors = ["black", "#888888", "#444444"]
    pct = mice or rng.random() < 0.4
    mark = _pick(rng, ["|", "+", "|"])
    for g in range(k):
        xs, ys = _km(*groups[g])
        ys_plot = ys * (100 if pct else 1)
        xs = np.append(xs, tmax if not mice else max(xs[-1], float(groups[g][0].max())))
        ys_plot = np.append(ys_plot, ys_plot[-1])
        ax.step(
            xs,
            ys_plot,
            where="post",
            color=colors[g],
            lw=1.5,
            label=f"{names[g]} (n={len(groups[g][0])})" if rng.random() < 0.4 else names[g],
        )
        t, e = groups[g]
        ct = t[e == 0]
        if len(ct):
            idx = np.searchsorted(xs[:-1], ct, side="right") - 1
            ax.plot(
                ct,
                ys_plot[np.clip(idx, 0, len(ys_plot) - 1)],
                ls="none",
                marker=mark,
                color=colors[g],
                ms=5,
                mew=1.0,
            )
    ax.set_ylim(-0.03 * (100 if pct else 1), 1.05 * (100 if pct else 1))
    ax.set_xlim(0, tmax * 1.02)
    ax.set_ylabel(
        _pick(rng, ["Percent survival", "Survival (%)"])
        if pct
        else _pick(
            rng,
            [
                "Survival probability",
                "Overall survival",
                "Disease-free survival",
                "Progression-free survival",
            ],
        )
    )
    xlabel = (
        _pick(rng, ["Days", "Days after infection", "Days post transplantation"])
        if mice
        else _pick(rng, ["Time (months)", "Months", "Time (years)" if tmax <= 15 else "Follow-up (months)"])
    )
    p = _logrank_p(groups)
    ptxt = _p_text(p, "p", _pick(rng, ["Log-rank p", "Log-rank P", "P", "p"]))
    px, ha = (0.04, "left") if rng.random() < 0.5 else (0.96, "right")
    ax.text(
        px,
        0.06 if ha == "left" else 0.96,
        ptxt,
        transform=ax.transAxes,
        ha=ha,
        va="bottom" if ha == "left" else "top",
        fontsize=style.fs * 0.9,
    )
    if k == 2 and not mice and rng.random() < 0.4:
        hr = float(np.exp(rng.normal(0.7, 0.3)))
        ax.text(px, 0.15 if ha == "left" else 0.86, f"HR = {hr:.2f} (95% CI {hr * 0.62:.2f}\u2013{hr * 1.6:.2f})", transform=ax.transAxes, ha=ha,
                va="bottom" if ha == "left" else "top", fontsize=style.fs * 0.85)  # fmt: skip
    ax.legend(
        loc="lower left" if ha == "right" else "upper right",
        fontsize=style.fs * 0.85,
        frameon=style.legend_frame,
    )
    if risk_table:
        ticks = [float(v) for v in ax.get_xticks() if 0 <= v <= tmax]
        ax.set_xticks(ticks)
        axr.set_xlim(0, tmax * 1.02)
        axr.set_ylim(-0.5, k - 0.5)
        for g in range(k):
            t = groups[g][0]
            for tk in ticks:
                axr.text(
                    tk,
                    k - 1 - g,
                    str(int(np.sum(t >= tk))),
                    ha="center",
                    va="center",
                    fontsize=style.fs * 0.8,
                    color=colors[g],
                )
        axr.set_yticks(range(k), list(reversed(names)), fontsize=style.fs * 0.8)
        for lab, c in zip(axr.get_yticklabels(), list(reversed(colors[:k])), strict=True):
            lab.set_color(c)
        axr.tick_params(length=0, labelbottom=True)
        axr.tick_params(axis="y", pad=style.fs * 2.2)
        for sp in axr.spines.values():
            sp.set_visible(False)
        axr.grid(False)
        axr.set_facecolor("white")
        axr.set_title("Number at risk", fontsize=style.fs * 0.85, loc="left", fontweight="normal")
        axr.set_xlabel(xlabel)
        ax.tick_params(labelbottom=False)
    else:
        ax.set_xlabel(xlabel)


FLOW_PANELS = (
    ("Annexin V-FITC", "PI", "apoptosis"),
    ("CD4-FITC", "CD8-PE", "tcell"),
    ("CD11b-APC", "F4/80-PE", "generic"),
    ("CD44-APC", "CD62L-PE", "generic"),
    ("CFSE", "CD8-APC", "generic"),
    ("FSC-A", "SSC-A", "fsc"),
    ("IFN-\u03b3-APC", "CD8-PerCP", "generic"),
    ("Ki67-AF488", "DAPI", "generic"),
)


def _flow(fig: Any, rng: np.random.Generator, style: Style) -> None:
    from matplotlib.colors import LogNorm

    xl, yl, sub = _pick(rng, FLOW_PANELS)
    n_plots = int(_weighted(rng, [(1, 0.55), (2, 0.25), (3, 0.2)]))
    samples = list(_pick(rng, [s for s in GROUP_SETS if len(s) >= n_plots and not s[0][0].isdigit()]))[
        :n_plots
    ]
    cmap = _pick(rng, ["jet", "jet", "turbo", "viridis", "dots"])
    gx, gy = float(rng.uniform(2.6, 3.2)), float(rng.uniform(2.6, 3.2))
    pct_fs = style.fs * float(rng.uniform(0.8, 1.0))
    fmt = _pick(rng, ["{:.1f}", "{:.2f}", "{:.1f}%"])
    side = float(fig.get_size_inches()[1])
    fig.set_size_inches(side * (1 + 0.85 * (n_plots - 1)), side)
    if n_plots > 1:
        pct_fs = min(pct_fs, style.fs * 0.85)
    fig.subplots_adjust(wspace=0.12)
    axes = [fig.add_subplot(1, n_plots, i + 1) for i in range(n_plots)]
    for pi, ax in enumerate(axes):
        n = int(rng.integers(3000, 9000))
        if sub == "fsc":
            pops = [
                (float(rng.uniform(80, 120)), float(rng.uniform(30, 60)), 18, 14, 0.6),
                (60, 150, 25, 40, 0.25),
                (20, 15, 10, 8, 0.15),
            ]
            w = np.array([p[4] for p in pops])
            lab = rng.choice(len(pops), size=n, p=w / w.sum())
            mx = np.array([p[0] for p in pops])[lab]
            my = np.array([p[1] for p in pops])[lab]
            sx = np.array([p[2] for p in pops])[lab]
            sy = np.array([p[3] for p in pops])[lab]
            xv = np.clip(mx + rng.normal(size=n) * sx, 1, 262) * 1000
            yv = np.clip(my + rng.normal(size=n) * sy, 1, 262) * 1000
            logx = False
        else:
            shift = pi * float(rng.uniform(0.1, 0.5))
            if sub == "apoptosis":
                w = np.array([0.8 - 0.2 * shift, 0.08 + 0.1 * shift, 0.08 + 0.1 * shift, 0.04])
                cen = [(1.6, 1.5), (3.3, 1.7), (3.5, 3.4), (1.7, 3.2)]
            elif sub == "tcell":
                w = np.array([0.15, 0.45 - 0.1 * shift, 0.3 + 0.1 * shift, 0.1])
                cen = [(1.5, 1.5), (3.4, 1.6), (1.6, 3.4), (3.3, 3.3)]
            else:
                w = np.abs(rng.dirichlet([3, 2, 1.5, 1])) + np.array([0, shift * 0.3, 0, 0])
                cen = [(1.5, 1.6), (3.3, 1.6), (1.7, 3.3), (3.4, 3.4)]
            lab = rng.choice(4, size=n, p=w / w.sum())
            cx = np.array([c[0] for c in cen])[lab] + rng.normal(0, 0.1, 4)[lab]
            cy = np.array([c[1] for c in cen])[lab] + rng.normal(0, 0.1, 4)[lab]
            xv = 10 ** np.clip(cx + rng.normal(size=n) * rng.uniform(0.25, 0.4), 0.3, 5.2)
            yv = 10 ** np.clip(cy + rng.normal(size=n) * rng.uniform(0.25, 0.4), 0.3, 5.2)
            logx = True
        if logx:
            bx = np.logspace(0.3, 5.2, 90)
            by = bx
        else:
            bx = np.linspace(0, 262144, 90)
            by = bx
        h, _, _ = np.histogram2d(xv, yv, bins=[bx, by])
        ix = np.clip(np.searchsorted(bx, xv) - 1, 0, len(bx) - 2)
        iy = np.clip(np.searchsorted(by, yv) - 1, 0, len(by) - 2)
        dens = h[ix, iy]
        order = np.argsort(dens, kind="stable")
        if cmap == "dots":
            ax.scatter(xv, yv, s=0.6, color="black", linewidths=0, rasterized=True)
        else:
            ax.scatter(
                xv[order],
                yv[order],
                c=dens[order],
                s=1.2,
                cmap=cmap,
                norm=LogNorm(vmin=1, vmax=max(2.0, float(dens.max()))),
                linewidths=0,
                rasterized=True,
            )
        if logx:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(10**0.3, 10**5.2)
            ax.set_ylim(10**0.3, 10**5.2)
            ax.axvline(10**gx, color="black", lw=0.8)
            ax.axhline(10**gy, color="black", lw=0.8)
            q = [
                np.mean((xv < 10**gx) & (yv >= 10**gy)),
                np.mean((xv >= 10**gx) & (yv >= 10**gy)),
                np.mean((xv < 10**gx) & (yv < 10**gy)),
                np.mean((xv >= 10**gx) & (yv < 10**gy)),
            ]
            spots = [
                (0.03, 0.97, "left", "top"),
                (0.97, 0.97, "right", "top"),
                (0.03, 0.03, "left", "bottom"),
                (0.97, 0.03, "right", "bottom"),
            ]
            for (px, py, ha, va), v in zip(spots, q, strict=True):
                ax.text(px, py, fmt.format(100 * v), transform=ax.transAxes, ha=ha, va=va, fontsize=pct_fs,
                        fontweight="bold" if rng.random() < 0.5 else "normal")  # fmt: skip
        else:
            from matplotlib.patches import Ellipse

            ax.set_xlim(0, 262144)
            ax.set_ylim(0, 262144)
            cxv, cyv = float(np.median(xv[lab == 0])), float(np.median(yv[lab == 0]))
            ax.add_patch(Ellipse((cxv, cyv), 95000, 80000, fill=False, color="black", lw=0.9))
            ax.text(
                cxv,
                cyv + 45000,
                f"Lymphocytes\n{100 * np.mean(lab == 0):.1f}%",
                ha="center",
                va="bottom",
                fontsize=pct_fs,
            )
            ax.ticklabel_format(style="sci", scilimits=(0, 0))
            ax.set_xticks(
                [0, 50000, 100000, 150000, 200000, 250000], ["0", "50K", "100K", "150K", "200K", "250K"]
            )
            ax.set_yticks(
                [0, 50000, 100000, 150000, 200000, 250000], ["0", "50K", "100K", "150K", "200K", "250K"]
            )
        ax.grid(False)
        ax.set_facecolor("white")
        for sp in ax.spines.values():
            sp.set_visible(True)
            sp.set_color("black")
        ax.tick_params(direction="out", which="both")
        ax.set_box_aspect(1)
        if n_plots > 1 or rng.random() < 0.6:
            ax.set_title(samples[pi], fontsize=style.fs)
        ax.set_xlabel(xl)
        if pi == 0:
            ax.set_ylabel(yl)
        else:
            ax.tick_params(labelleft=False)


# ---------------------------------------------------------------------------------- blots, gels


def _blot_strip(
    rng: np.random.Generator,
    levels: Sequence[float],
    lane_px: int,
    h_px: int,
    doublet: bool,
    bg: float,
    contrast: float,
) -> np.ndarray:
    """One blot row: grey values (0 = black) of bands of darkness ``levels`` (0..1) per lane."""
    n = len(levels)
    w = n * lane_px
    xx = np.arange(w)[None, :].astype(float)
    yy = np.arange(h_px)[:, None].astype(float)
    dark = np.zeros((h_px, w))
    smile = float(rng.uniform(-0.08, 0.12)) * h_px
    tilt = float(rng.uniform(-0.06, 0.06)) * h_px
    thick = float(rng.uniform(0.09, 0.2)) * h_px
    for j, lv in enumerate(levels):
        cx = (j + 0.5) * lane_px + rng.normal(0, 0.03 * lane_px)
        hw = lane_px * float(rng.uniform(0.32, 0.42))
        soft = lane_px * 0.06
        horiz = 0.5 * (np.tanh((xx - (cx - hw)) / soft) - np.tanh((xx - (cx + hw)) / soft))
        u = (xx - cx) / hw
        cy = (
            h_px * 0.5
            + tilt * (j - n / 2) / n
            + smile * np.clip(u, -1.2, 1.2) ** 2
            + rng.normal(0, 0.02 * h_px)
        )
        th = thick * float(rng.uniform(0.85, 1.2)) * (0.7 + 0.5 * lv)
        prof = np.exp(-0.5 * ((yy - cy) / th) ** 2)
        if doublet:
            prof = 0.9 * prof + 0.7 * np.exp(-0.5 * ((yy - cy - 2.4 * th) / (th * 0.8)) ** 2)
        dark += lv * horiz * prof * float(rng.uniform(0.85, 1.1))
    dark = 1 - np.exp(-contrast * dark)  # film saturation
    noise = rng.normal(0, 0.035, (h_px // 2 + 1, w // 2 + 1))
    noise = np.kron(noise, np.ones((2, 2)))[:h_px, :w]
    grad = np.linspace(0, float(rng.uniform(-0.05, 0.05)), w)[None, :]
    v = bg * (1 - dark) * (1 + grad) + noise * 0.25 * (1 - dark)
    return np.clip(v, 0, 1)


def _lane_design(rng: np.random.Generator, max_lanes: int = 9) -> dict[str, Any]:
    """Conditions, replicates and how the lanes are labelled."""
    mode = _weighted(rng, [("names", 0.4), ("pm", 0.25), ("time", 0.15), ("dose", 0.1), ("groups", 0.1)])
    if mode == "pm":
        factors = list(
            rng.choice(
                [
                    "TGF-\u03b21",
                    "LPS",
                    "siRNA",
                    "Drug",
                    "IL-6",
                    "H\u2082O\u2082",
                    "Insulin",
                    "shRNA",
                    "DOX",
                    "MG132",
                ],
                size=int(rng.integers(1, 3)),
                replace=False,
            )
        )
        if len(factors) == 1:
            conds = [[MINUS], ["+"]]
        else:
            conds = [[MINUS, MINUS], ["+", MINUS], [MINUS, "+"], ["+", "+"]]
        names = ["".join(c) for c in conds]
        return {
            "mode": mode,
            "factors": factors,
            "conds": conds,
            "names": names,
            "reps": int(rng.integers(1, 3)),
        }
    if mode == "time":
        unit = _pick(rng, ["min", "h"])
        pts = ["0", "5", "15", "30", "60", "120"] if unit == "min" else ["0", "1", "3", "6", "12", "24", "48"]
        k = int(rng.integers(4, len(pts) + 1))
        return {
            "mode": mode,
            "names": pts[:k],
            "unit": unit,
            "reps": 1,
            "factor": _pick(rng, ["EGF", "LPS", "Insulin", "TNF-\u03b1", "Time"]),
        }
    if mode == "dose":
        k = int(rng.integers(4, 7))
        return {
            "mode": mode,
            "names": [str(i) for i in range(k)],
            "reps": 1,
            "factor": _pick(rng, ["Drug", "Cisplatin", "Metformin", "Compound 7", "Rapamycin"]),
        }
    names = list(_pick(rng, [s for s in GROUP_SETS if len(s) <= 5]))
    reps = int(rng.integers(1, 4)) if mode == "groups" or rng.random() < 0.3 else 1
    while len(names) * reps > max_lanes and reps > 1:
        reps -= 1
    return {"mode": mode if reps > 1 or mode == "names" else "names", "names": names, "reps": reps}


def _draw_lane_labels(
    fig: Any,
    ax: Any,
    design: dict[str, Any],
    n_lanes: int,
    rng: np.random.Generator,
    fs: float,
    left_x: float,
) -> None:
    """Lane labels above the top blot axes (data x = lane index)."""
    from matplotlib.patches import Polygon
    from matplotlib.transforms import blended_transform_factory

    tr = blended_transform_factory(ax.transData, ax.transAxes)
    reps = design.get("reps", 1)
    mode = design["mode"]
    dy = 0.0
    if mode == "pm":
        factors = design["factors"]
        for fi, fac in enumerate(reversed(factors)):
            row = len(factors) - 1 - fi
            y = 1.0 + 0.35 + fi * 0.55
            for lane in range(n_lanes):
                cond = design["conds"][lane // reps]
                ax.text(lane, y, cond[row], transform=tr, ha="center", va="bottom", fontsize=fs)
            ax.text(left_x, y, fac, transform=ax.transAxes, ha="right", va="bottom", fontsize=fs)
        return
    if mode in ("time", "dose"):
        if mode == "time":
            for lane, t in enumerate(design["names"]):
                ax.text(lane, 1.35, t, transform=tr, ha="center", va="bottom", fontsize=fs)
            ax.text(
                left_x,
                1.35,
                f"{design['factor']} ({design['unit']})",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=fs,
            )
        else:
            tri = Polygon(
                [(-0.4, 1.35), (n_lanes - 0.6, 1.35), (n_lanes - 0.6, 1.85)],
                closed=True,
                transform=tr,
                color="black",
                clip_on=False,
            )
            ax.add_patch(tri)
            ax.text(
                left_x, 1.35, design["factor"], transform=ax.transAxes, ha="right", va="bottom", fontsize=fs
            )
        return
    names = design["names"]
    if reps > 1:
        for g, nm in enumerate(names):
            a, b = g * reps - 0.35, (g + 1) * reps - 0.65
            ax.plot([a, b], [1.3, 1.3], transform=tr, color="black", lw=0.9, clip_on=False)
            ax.text((a + b) / 2, 1.4, nm, transform=tr, ha="center", va="bottom", fontsize=fs)
        return
    lane_pt = (ax.get_position().width * fig.get_size_inches()[0] * 72) / max(1, n_lanes)
    rot = 0 if max(len(s) for s in names) * fs * 0.62 < lane_pt * 0.95 else _pick(rng, [45, 90])
    for lane, nm in enumerate(names[:n_lanes]):
        ax.text(
            lane,
            1.3 + dy,
            nm,
            transform=tr,
            ha="left" if rot == 45 else "center",
            va="bottom",
            fontsize=fs,
            rotation=rot,
            rotation_mode="anchor",
        )


def _blot_rows(
    rng: np.random.Generator, design: dict[str, Any], n_rows: int
) -> list[tuple[str, float, list[float], bool]]:
    """(protein name, kDa, darkness per condition, doublet) of each blot row, loading control last."""
    n_c = len(design["names"])
    rows: list[tuple[str, float, list[float], bool]] = []
    trend = rng.uniform(0.2, 1.0, size=n_c)
    if design["mode"] in ("time", "dose"):
        trend = np.sort(trend)[:: 1 if rng.random() < 0.5 else -1]
    if rng.random() < 0.5:
        pho, tot, kda = _pick(rng, BLOT_PAIRS)
        rows.append((pho, kda, list(trend), "ERK" in pho))
        rows.append((tot, kda, list(rng.uniform(0.65, 0.85, size=n_c)), "ERK" in tot))
    while len(rows) < n_rows - 1:
        nm, kda = _pick(rng, BLOT_SINGLE)
        if any(r[0] == nm for r in rows):
            continue
        lv = (
            trend[rng.permutation(n_c)]
            if rng.random() < 0.4
            else np.clip(trend + rng.normal(0, 0.15, n_c), 0.05, 1)
        )
        rows.append((nm, kda, list(lv), nm == "LC3B"))
    lc, kda = _pick(rng, LOADING)
    rows.append((lc, kda, list(rng.uniform(0.75, 0.9, size=n_c)), False))
    return rows[:n_rows] if len(rows) > n_rows else rows


def _draw_blot(fig: Any, rng: np.random.Generator, style: Style, rect: tuple[float, float, float, float], design: dict[str, Any],
               rows: list[tuple[str, float, list[float], bool]]) -> list[Any]:  # fmt: skip
    """Blot rows inside ``rect`` (figure fractions l, b, w, h); returns the row axes (top first)."""
    reps = design.get("reps", 1)
    n_lanes = len(design["names"]) * reps
    l_, b, w, h = rect
    gap = float(rng.uniform(0.03, 0.12)) * h / len(rows)
    row_h = (h - gap * (len(rows) - 1)) / len(rows)
    lane_px = 24
    frame = rng.random() < 0.65
    bg = float(rng.uniform(0.82, 0.97))
    contrast = float(rng.uniform(1.6, 3.2))
    kda_side = "right" if rng.random() < 0.8 else "left"
    kda_fmt = _pick(rng, ["{} kDa", "{} kDa", "\u2014{}", "{}"])
    fs = style.fs
    axes = []
    for r, (name, kda, levels, doublet) in enumerate(rows):
        y = b + h - (r + 1) * row_h - r * gap
        ax = fig.add_axes((l_, y, w, row_h))
        lane_levels = [levels[k // reps] * float(rng.uniform(0.85, 1.1)) for k in range(n_lanes)]
        strip = _blot_strip(rng, lane_levels, lane_px, int(rng.integers(18, 30)), doublet, bg, contrast)
        ax.imshow(
            strip,
            cmap="gray",
            vmin=0,
            vmax=1,
            aspect="auto",
            extent=(-0.5, n_lanes - 0.5, 0, 1),
            interpolation="bilinear",
        )
        ax.set_xlim(-0.5, n_lanes - 0.5)
        ax.set_xticks([])
        ax.set_yticks([])
        for sp in ax.spines.values():
            sp.set_visible(frame)
            sp.set_linewidth(0.7)
            sp.set_color("black")
        ax.grid(False)
        name_side = "left" if kda_side == "right" else "right"
        ax.text(
            -0.03 if name_side == "left" else 1.03,
            0.5,
            name,
            transform=ax.transAxes,
            ha="right" if name_side == "left" else "left",
            va="center",
            fontsize=fs,
        )
        if rng.random() < 0.85 or r == 0:
            lab = kda_fmt.format(int(kda))
            ax.text(
                1.03 if kda_side == "right" else -0.03,
                0.5,
                lab,
                transform=ax.transAxes,
                ha="left" if kda_side == "right" else "right",
                va="center",
                fontsize=fs * 0.9,
            )
        axes.append(ax)
    return axes


def _blot(fig: Any, rng: np.random.Generator, style: Style) -> None:
    design = _lane_design(rng)
    n_rows = int(rng.integers(2, 7))
    rows = _blot_rows(rng, design, n_rows)
    n_lanes = len(design["names"]) * design.get("reps", 1)
    W, H = fig.get_size_inches()
    lane_in = float(rng.uniform(0.22, 0.38))
    row_in = float(rng.uniform(0.2, 0.32))
    w_in, h_in = lane_in * n_lanes, row_in * n_rows * 1.08
    fig.set_size_inches(w_in + 3.4, h_in + 1.8)
    W, H = fig.get_size_inches()
    rect = (1.9 / W, 0.3 / H, w_in / W, h_in / H)
    axes = _draw_blot(fig, rng, style, rect, design, rows)
    _draw_lane_labels(fig, axes[0], design, n_lanes, rng, style.fs, -0.03)


def _gel(fig: Any, rng: np.random.Generator, style: Style) -> None:
    ladder = list(_pick(rng, BP_LADDERS))
    n_s = int(rng.integers(3, 12))
    n_lanes = n_s + 1
    ladder_pos = 0 if rng.random() < 0.8 else n_lanes - 1
    H, lane_px = 260, 26
    W = n_lanes * lane_px
    lo, hi = math.log10(min(ladder)) - 0.15, math.log10(max(ladder)) + 0.1

    def ypos(bp: float) -> float:
        return 18 + (hi - math.log10(bp)) / (hi - lo) * (H - 30)

    img = np.zeros((H, W))
    yy = np.arange(H)[:, None].astype(float)
    xx = np.arange(W)[None, :].astype(float)
    geno = rng.random() < 0.5
    wt_bp, mut_bp = sorted(rng.choice(ladder[2:-1], size=2, replace=False))
    wt_bp = int(wt_bp * float(rng.uniform(0.8, 1.2)))
    mut_bp = int(mut_bp * float(rng.uniform(0.8, 1.2)))
    sample_names: list[str] = []
    for lane in range(n_lanes):
        cx = (lane + 0.5) * lane_px
        hw = lane_px * 0.36
        horiz = 0.5 * (np.tanh((xx - (cx - hw)) / 1.2) - np.tanh((xx - (cx + hw)) / 1.2))
        img += 0.25 * horiz * np.exp(-0.5 * ((yy - 10) / 2.0) ** 2)  # well
        if lane == ladder_pos:
            bands = [(bp, 0.55 + (0.35 if bp in (1000, 500, 3000) else 0.0)) for bp in ladder]
        else:
            if geno:
                gt = _pick(rng, ["WT", "Het", "KO"])
                sample_names.append(gt)
                bands = (
                    [(wt_bp, 0.8)]
                    if gt == "WT"
                    else [(mut_bp, 0.8)]
                    if gt == "KO"
                    else [(wt_bp, 0.6), (mut_bp, 0.6)]
                )
            else:
                sample_names.append(str(len(sample_names) + 1))
                bands = [
                    (
                        int(_pick(rng, ladder[2:-1]) * float(rng.uniform(0.7, 1.3))),
                        float(rng.uniform(0.3, 1.0)),
                    )
                ]
                if rng.random() < 0.2:
                    bands = []
            if rng.random() < 0.3:
                bands.append((45, 0.25))  # primer dimers
        for bp, inten in bands:
            y0 = ypos(bp)
            img += inten * horiz * np.exp(-0.5 * ((yy - y0) / float(rng.uniform(1.6, 2.6))) ** 2)
    img += np.abs(rng.normal(0, 0.03, img.shape)) + 0.06
    img = np.clip(img, 0, 1)
    inverted = rng.random() < 0.3
    disp = 1 - img if inverted else img
    w_in = n_lanes * float(rng.uniform(0.22, 0.32))
    h_in = float(rng.uniform(1.8, 2.8))
    fig.set_size_inches(w_in + 2.6, h_in + 1.6)
    FW, FH = fig.get_size_inches()
    ax = fig.add_axes((1.3 / FW, 0.25 / FH, w_in / FW, h_in / FH))
    ax.imshow(
        disp,
        cmap="gray",
        vmin=0,
        vmax=1,
        aspect="auto",
        extent=(-0.5, n_lanes - 0.5, H, 0),
        interpolation="bilinear",
    )
    ax.set_xlim(-0.5, n_lanes - 0.5)
    ax.grid(False)
    for sp in ax.spines.values():
        sp.set_visible(True)
        sp.set_linewidth(0.6)
    shown = [
        bp for bp in ladder if bp in (10000, 5000, 3000, 2000, 1500, 1000, 750, 500, 300, 250, 200, 100, 50)
    ]
    shown = shown[:: max(1, len(shown) // 6)]
    if rng.random() < 0.6:
        ax.set_yticks(
            [ypos(bp) for bp in shown],
            [f"{bp} bp" if rng.random() < 0.0 else str(bp) for bp in shown],
            fontsize=style.fs * 0.85,
        )
        ax.set_ylabel("bp", rotation=0, ha="right", va="center", fontsize=style.fs * 0.85)
        ax.yaxis.set_label_coords(-0.02, 1.03)
    else:
        ax.set_yticks([ypos(bp) for bp in shown], [f"{bp} bp" for bp in shown], fontsize=style.fs * 0.85)
    ax.tick_params(axis="y", length=3)
    ax.set_xticks([])
    labels = sample_names[:]
    labels.insert(ladder_pos if ladder_pos == 0 else len(labels), _pick(rng, ["M", "L", "Ladder", "M"]))
    if not geno and rng.random() < 0.5 and n_s >= 3:
        labels[-1 if ladder_pos == 0 else -2] = "NTC"
        labels[-2 if ladder_pos == 0 else -3] = "+"
    rot = 90 if _long(labels) else 0
    for lane, nm in enumerate(labels):
        ax.text(lane, -6, nm, ha="center", va="bottom", fontsize=style.fs * 0.9, rotation=rot)
    if geno and rng.random() < 0.7:
        for bp, nm in ((wt_bp, "WT"), (mut_bp, _pick(rng, ["KO", "Mut", "Tg"]))):
            ax.annotate(f"{nm} ({bp} bp)", xy=(n_lanes - 0.45, ypos(bp)), xytext=(n_lanes + 0.3, ypos(bp)), va="center", fontsize=style.fs * 0.85,
                        arrowprops={"arrowstyle": "->", "lw": 0.8}, annotation_clip=False)  # fmt: skip
    if rng.random() < 0.3:
        ax.set_title(
            _pick(rng, ["Genotyping", "RT-PCR", "Tail DNA PCR", "Colony PCR"]),
            fontsize=style.fs,
            pad=style.fs * 2.4,
        )


def _blot_quant(fig: Any, rng: np.random.Generator, style: Style) -> None:
    design = _lane_design(rng, max_lanes=8)
    if design["mode"] in ("time", "dose") and rng.random() < 0.5:
        design = {
            **design,
            "mode": "names",
            "names": list(_pick(rng, [s for s in GROUP_SETS if len(s) <= 4])),
        }
    n_rows = int(rng.integers(2, 5))
    rows = _blot_rows(rng, design, n_rows)
    reps = design.get("reps", 1)
    n_c = len(design["names"])
    n_lanes = n_c * reps
    lane_in = float(rng.uniform(0.26, 0.4))
    row_in = float(rng.uniform(0.2, 0.3))
    w_in = max(lane_in * n_lanes, 1.3)
    blot_h = row_in * n_rows * 1.08
    bar_h = float(rng.uniform(1.2, 1.9))
    gap_in = float(rng.uniform(0.2, 0.4))
    label_top = 0.5 + 0.3 * len(design.get("factors", [])) if design["mode"] == "pm" else 0.9
    fig.set_size_inches(w_in + 3.6, blot_h + bar_h + gap_in + label_top + 1.2)
    FW, FH = fig.get_size_inches()
    bottom_in = 0.9
    rect = (1.9 / FW, (bottom_in + bar_h + gap_in) / FH, w_in / FW, blot_h / FH)
    axes = _draw_blot(fig, rng, style, rect, design, rows)
    _draw_lane_labels(fig, axes[0], design, n_lanes, rng, style.fs, -0.03)
    # the quantification: target / loading control per condition, bars under their lanes
    target, _, lv, _ = rows[0]
    ctrl = rows[-1][2]
    ratio = np.asarray(lv) / np.asarray(ctrl)
    ratio = ratio / ratio[0]
    n_rep = int(rng.integers(3, 6))
    groups = [[np.clip(ratio[c] * rng.lognormal(0, 0.12, n_rep), 0.01, None) for c in range(n_c)]]
    ax = fig.add_axes((rect[0], bottom_in / FH, rect[2], bar_h / FH))
    xpos = [c * reps + (reps - 1) / 2 for c in range(n_c)]
    _draw_bar_groups(ax, rng, style, groups, design["names"], None, points=rng.random() < 0.6, sig=rng.random() < 0.8, xpos=xpos,
                     width=min(0.8 * reps, 0.75) if reps > 1 else float(rng.uniform(0.5, 0.75)))  # fmt: skip
    ax.set_xlim(-0.5, n_lanes - 0.5)
    if design["mode"] == "names" or design["mode"] == "groups" or rng.random() < 0.3:
        if design["mode"] == "pm":
            ax.set_xticks(xpos, ["/".join(c) for c in design["conds"]])
        else:
            _set_xticklabels(
                ax,
                xpos,
                design["names"]
                if design["mode"] != "time"
                else [f"{t} {design['unit']}" for t in design["names"]],
                rng,
            )
    else:
        ax.set_xticks([])
    base = target.split(" (")[0]
    ctrl_name = (
        rows[-1][0]
        if not (len(rows) > 1 and rows[1][0] in {p[1] for p in BLOT_PAIRS} and rows[1][0] in base)
        else rows[1][0]
    )
    ax.set_ylabel(_pick(rng, [f"{base}/{ctrl_name}\n(fold change)", f"{base}/{ctrl_name}", f"Relative {base}\nexpression", f"{base} level\n(fold of control)"]),
                  fontsize=style.fs * 0.95)  # fmt: skip
    _yfmt(ax)
    if style.theme in ("ggplot", "minimal", "bw"):
        ax.grid(axis="x", visible=False)


# ---------------------------------------------------------------------------------- micrographs


@lru_cache(maxsize=16)
def _micrograph(path: str) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _micrograph_paths() -> list[tuple[str, str]]:
    """(path, kind) of the real micrographs available: 'bright', 'dark' or 'grey'."""
    out: list[tuple[str, str]] = []
    sk = _package_dir("skimage")
    if sk is not None:
        for name, kind in (("ihc.png", "bright"), ("cell.png", "grey")):
            if (sk / "data" / name).exists():
                out.append((str(sk / "data" / name), kind))
    for p in sorted(PANELS_DIR.glob("*.jpg")):
        out.append((str(p), "dark"))
    return out


def _micro_crops(rng: np.random.Generator, n: int, side: int = 160) -> tuple[list[np.ndarray], str]:
    """``n`` crops of one real micrograph (as fields of different conditions), optionally pseudo-coloured."""
    paths = _micrograph_paths()
    if not paths:
        g = np.random.default_rng(3)
        base = (g.random((400, 400, 3)) * 255).astype(np.uint8)
        paths_arr, kind = base, "bright"
    else:
        p, kind = _pick(rng, paths)
        paths_arr = _micrograph(p)
    h, w = paths_arr.shape[:2]
    pseudo = None
    if kind == "grey" or (kind != "bright" and rng.random() < 0.5):
        pseudo = _pick(rng, [(0, 1, 0), (1, 0, 0), (0.2, 0.4, 1), (1, 0, 1), (0, 1, 1)])
    crops = []
    for _ in range(n):
        s = int(min(h, w) * float(rng.uniform(0.35, 0.7)))
        y0, x0 = int(rng.integers(0, h - s + 1)), int(rng.integers(0, w - s + 1))
        c = Image.fromarray(paths_arr[y0 : y0 + s, x0 : x0 + s]).resize(
            (side, side), Image.Resampling.BILINEAR
        )
        a = np.asarray(c).astype(float) / 255.0
        if pseudo is not None:
            g = a.mean(2)
            if kind == "grey":  # phase contrast -> fluorescence-like: bright structure on black
                g = np.abs(g - np.median(g))
            g = np.clip(
                (g - np.percentile(g, 2)) / max(1e-6, np.percentile(g, 99.5) - np.percentile(g, 2)), 0, 1
            ) ** float(rng.uniform(0.8, 1.4))
            a = g[..., None] * np.asarray(pseudo, float)[None, None, :]
        if rng.random() < 0.3 and len(crops) == 0:
            a = a[:, ::-1]
        crops.append(np.clip(a, 0, 1))
    return crops, ("dark" if pseudo is not None or kind == "dark" else "bright")


def _image_graph(fig: Any, rng: np.random.Generator, style: Style, dd: Mapping[str, Path]) -> None:
    names = list(_pick(rng, [s for s in GROUP_SETS if 2 <= len(s) <= 4 and not s[0][0].isdigit()]))
    n = len(names)
    n_rows = 1 if rng.random() < 0.75 else 2
    img_in = float(rng.uniform(0.7, 1.1))
    gap = float(rng.uniform(0.02, 0.06))
    beside = rng.random() < 0.3
    graph_w = float(rng.uniform(1.6, 2.4)) if beside else None
    graph_h = float(rng.uniform(1.2, 1.7))
    row_w = n * img_in + (n - 1) * gap
    rows_h = n_rows * img_in + (n_rows - 1) * gap
    left, top_band = 1.0, 0.45
    vgap = float(rng.uniform(0.3, 0.5))
    if beside:
        W = left + row_w + 0.9 + (graph_w or 0) + 0.3
        H = top_band + max(rows_h, graph_h + 0.6) + 0.9
    else:
        W = left + row_w + 0.4
        H = top_band + rows_h + vgap + graph_h + 1.0
    fig.set_size_inches(W, H)
    crops_by_row = []
    channel_names = [
        _pick(rng, ["DAPI", "Hoechst"]),
        _pick(rng, ["Ki67", "CD31", "F4/80", "\u03b1-SMA", "GFP", "LC3", "TUNEL", "Merge"]),
    ]
    for _ in range(n_rows):
        crops, tone = _micro_crops(rng, n)
        crops_by_row.append((crops, tone))
    y_img_top = H - top_band
    for r, (crops, tone) in enumerate(crops_by_row):
        for c, a in enumerate(crops):
            x0 = left + c * (img_in + gap)
            y0 = y_img_top - (r + 1) * img_in - r * gap
            ax = fig.add_axes((x0 / W, y0 / H, img_in / W, img_in / H))
            ax.imshow(a, interpolation="bilinear")
            ax.set_xticks([])
            ax.set_yticks([])
            for sp in ax.spines.values():
                sp.set_visible(False)
            if r == 0:
                ax.set_title(names[c], fontsize=style.fs, pad=3)
            if c == n - 1 and r == n_rows - 1 and rng.random() < 0.8:
                col = "white" if tone == "dark" else "black"
                ax.plot(
                    [0.62 * a.shape[1], 0.9 * a.shape[1]],
                    [0.9 * a.shape[0]] * 2,
                    color=col,
                    lw=2.2,
                    solid_capstyle="butt",
                )
                if rng.random() < 0.4:
                    ax.text(
                        0.76 * a.shape[1],
                        0.86 * a.shape[0],
                        _pick(rng, ["50 \u03bcm", "100 \u03bcm", "20 \u03bcm"]),
                        color=col,
                        ha="center",
                        va="bottom",
                        fontsize=style.fs * 0.75,
                    )
            if c == 0 and (n_rows > 1 or rng.random() < 0.4):
                ax.set_ylabel(
                    channel_names[r] if n_rows > 1 else _pick(rng, ["H&E", "IHC", "IF", "Ki67", "TUNEL"]),
                    fontsize=style.fs,
                )
    if beside:
        gx = (left + row_w + 0.85) / W
        gy = (y_img_top - rows_h + max(0.0, (rows_h - graph_h) / 2)) / H
        ax = fig.add_axes((gx, gy, (graph_w or 2.0) / W, graph_h / H))
    else:
        gy = (y_img_top - rows_h - vgap - graph_h) / H
        frac = float(rng.uniform(0.6, 1.0))
        ax = fig.add_axes(((left + row_w * (1 - frac) / 2) / W, gy, row_w * frac / W, graph_h / H))
    vals, _, _ = _column(rng, dd)
    ylabel, mode = _pick(rng, Y_MEASURES)
    groups = _scale_groups(_group_samples(rng, vals, n, [int(rng.integers(3, 9))] * n), mode)
    if rng.random() < 0.7:
        _draw_bar_groups(
            ax, rng, style, [groups], names, None, points=rng.random() < 0.7, sig=rng.random() < 0.8
        )
    else:
        pos = np.arange(n, dtype=float)
        bp = ax.boxplot(
            groups,
            positions=pos,
            widths=0.55,
            patch_artist=True,
            showfliers=False,
            medianprops={"color": "black"},
        )
        for k, patch in enumerate(bp["boxes"]):
            patch.set_facecolor(style.colors(n, rng)[k])
        tops = [float(np.max(g)) for g in groups]
        _brackets(
            ax,
            [(0.0, float(k)) for k in range(1, n)],
            list(pos),
            tops,
            [_p_text(_welch_p(groups[0], groups[k]), style.sig_style) for k in range(1, n)],
            style.fs,
            style.lw,
        )
    _set_xticklabels(ax, range(n), names, rng)
    ax.set_ylabel(ylabel if len(ylabel) < 16 else ylabel.replace(" (", "\n("), fontsize=style.fs * 0.9)
    _yfmt(ax)
    if style.theme in ("ggplot", "minimal", "bw"):
        ax.grid(axis="x", visible=False)


# texts printed inside grid images (methods, channels, time points), as in real figures
GRID_IMAGE_TEXTS: tuple[tuple[str, ...], ...] = (
    ("brightfield", "ground truth", "prediction", "U-Net", "fnet", "pix2pix", "CARE", "raw"),
    ("DAPI", "GFP", "mCherry", "Merge", "phalloidin", "LAMP1", "LC3", "Tubulin"),
    ("0 h", "6 h", "12 h", "24 h", "48 h", "72 h", "t = 0", "t = 30 min"),
    ("input", "output", "target", "noisy", "denoised", "residual", "mask", "overlay"),
)
ROW_LABELS: tuple[str, ...] = (
    "DAPI", "Hoechst", "GFP", "Ki67", "CD31", "F4/80", "\u03b1-SMA", "LC3", "TUNEL", "Merge", "H&E",
    "IHC", "Phase", "BF", "NPM1", "LMNB1", "Actin", "Tubulin", "Input", "Prediction",
)  # fmt: skip


def _grid_names(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` column headers: a condition set of that length, else a numbered series."""
    sets = [st for st in GROUP_SETS if len(st) == n]
    if sets and rng.random() < 0.8:
        return list(_pick(rng, sets))
    stem = _pick(rng, ["Day ", "Field ", "Patient ", "Slice ", "#", "t"])
    return [f"{stem}{i + 1}" for i in range(n)]


def _image_grid(fig: Any, rng: np.random.Generator, style: Style) -> None:
    """One lettered panel made of a grid of micrograph fields (see the module table)."""
    n_rows = int(_weighted(rng, [(1, 0.3), (2, 0.35), (3, 0.25), (4, 0.1)]))
    n_cols = int(_weighted(rng, [(2, 0.2), (3, 0.35), (4, 0.3), (5, 0.15)]))
    img_in = float(rng.uniform(0.55, 1.0))
    gap = 0.0 if rng.random() < 0.2 else float(rng.uniform(0.01, 0.06))
    headers = rng.random() < 0.65
    row_labels = n_rows > 1 and rng.random() < 0.55
    in_text = rng.random() < 0.35
    texts = list(_pick(rng, GRID_IMAGE_TEXTS))
    text_col = _pick(rng, ["white", "white", "yellow", "#00FF00"])
    zoom = rng.random() < 0.3
    arrows = rng.random() < 0.25
    frame = _pick(rng, [None, None, None, "#E08030", "#3070E0", "white"])
    left = 0.45 if row_labels else 0.1
    top = 0.35 if headers else 0.1
    W = left + n_cols * img_in + (n_cols - 1) * gap + 0.1
    H = top + n_rows * img_in + (n_rows - 1) * gap + 0.1
    fig.set_size_inches(W, H)
    names = _grid_names(rng, n_cols)
    rows = [_micro_crops(rng, n_cols) for _ in range(n_rows)]  # a row: fields of one micrograph
    row_names = [str(x) for x in rng.choice(np.asarray(ROW_LABELS, dtype=object), n_rows, replace=False)]
    zoom_at = (int(rng.integers(0, n_rows)), int(rng.integers(0, n_cols))) if zoom else None
    for r, (crops, tone) in enumerate(rows):
        for c, a in enumerate(crops):
            x0 = left + c * (img_in + gap)
            y0 = H - top - (r + 1) * img_in - r * gap
            ax = fig.add_axes((x0 / W, y0 / H, img_in / W, img_in / H))
            ax.imshow(a, interpolation="bilinear")
            ax.set_xticks([])
            ax.set_yticks([])
            for sp in ax.spines.values():
                sp.set_visible(frame is not None)
                if frame is not None:
                    sp.set_color(frame)
                    sp.set_linewidth(1.5)
            h, w = a.shape[:2]
            if headers and r == 0:
                ax.set_title(names[c], fontsize=style.fs, pad=3)
            if row_labels and c == 0:
                ax.set_ylabel(row_names[r], fontsize=style.fs)
            if in_text:
                word = texts[(r * n_cols + c) % len(texts)]
                ax.text(0.04 * w, 0.94 * h, word, color=text_col, fontsize=style.fs * 0.8, va="bottom")
            if arrows and rng.random() < 0.5:
                for _ in range(int(rng.integers(1, 3))):
                    px, py = float(rng.uniform(0.2, 0.8)) * w, float(rng.uniform(0.2, 0.8)) * h
                    ax.annotate(
                        "", xy=(px, py), xytext=(px + 0.12 * w, py - 0.12 * h),
                        arrowprops={"arrowstyle": "-|>", "color": "yellow", "lw": 1.5},
                    )  # fmt: skip
            if zoom_at == (r, c):
                from matplotlib.patches import Rectangle

                zx, zy, zs = float(rng.uniform(0.1, 0.5)) * w, float(rng.uniform(0.4, 0.7)) * h, 0.22 * w
                ax.add_patch(Rectangle((zx, zy), zs, zs, fill=False, edgecolor="#FFD000", lw=1.2))
                ins = fig.add_axes(((x0 + img_in * 0.6) / W, (y0 + img_in * 0.6) / H, img_in * 0.38 / W,
                                    img_in * 0.38 / H), label="inset")  # fmt: skip
                ins.imshow(a[int(zy) : int(zy + zs), int(zx) : int(zx + zs)], interpolation="bilinear")
                ins.set_xticks([])
                ins.set_yticks([])
                for sp in ins.spines.values():
                    sp.set_color("#FFD000")
            if r == n_rows - 1 and c == n_cols - 1 and rng.random() < 0.7:
                col = "white" if tone == "dark" else "black"
                ax.plot([0.62 * w, 0.9 * w], [0.9 * h] * 2, color=col, lw=2.0, solid_capstyle="butt")


# ----------------------------------------------------------------------------------------------
# entry points
# ----------------------------------------------------------------------------------------------

_SIZES: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {  # (width range, height range), inches
    "bar": ((1.8, 3.6), (1.8, 3.0)),
    "line": ((2.4, 4.2), (1.8, 3.0)),
    "scatter": ((2.2, 3.6), (2.0, 3.2)),
    "box": ((1.8, 3.6), (1.9, 3.0)),
    "violin": ((1.8, 3.6), (1.9, 3.0)),
    "heatmap": ((2.4, 4.0), (2.4, 4.2)),
    "survival": ((2.6, 4.2), (2.2, 3.4)),
    "flow": ((2.2, 2.8), (2.2, 2.8)),
}


def _draw(kind: str, fig: Any, rng: np.random.Generator, style: Style, dd: Mapping[str, Path], k: int) -> None:
    table: dict[str, Callable[[], None]] = {
        "bar": lambda: _bar(fig, rng, style, dd),
        "line": lambda: _line(fig, rng, style, dd),
        "scatter": lambda: _scatter(fig, rng, style, dd),
        "box": lambda: _box(fig, rng, style, dd),
        "violin": lambda: _box(fig, rng, style, dd, violin=True),
        "heatmap": lambda: _heatmap(fig, rng, style, dd),
        "survival": lambda: _survival(fig, rng, style),
        "flow": lambda: _flow(fig, rng, style),
        "blot": lambda: _blot(fig, rng, style),
        "gel": lambda: _gel(fig, rng, style),
        "blot_quant": lambda: _blot_quant(fig, rng, style),
        "image_graph": lambda: _image_graph(fig, rng, style, dd),
        "image_grid": lambda: _image_grid(fig, rng, style),
        "diagram": lambda: _diagrams().diagram(fig, rng, style, k),
        "network": lambda: _diagrams().network(fig, rng, style),
    }
    table[kind]()


def _diagrams() -> Any:
    from pmcflow.synth import diagrams  # imports this module: loaded on first use

    return diagrams


@contextlib.contextmanager
def _quiet_font_fallbacks() -> Iterator[None]:
    """Mute matplotlib's "findfont: ... Falling back to DejaVu Sans" warnings (mathtext fallbacks)."""
    log = logging.getLogger("matplotlib.font_manager")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def render_canvas(kind: str, k: int, data_dirs: Mapping[str, Path] | None = None) -> tuple[np.ndarray, int]:
    """The full matplotlib canvas of variant ``k`` of ``kind`` (before the crop) and the crop margin."""
    import matplotlib

    from pmcflow.mplfonts import ensure_bundled_fonts

    if kind not in CHART_KINDS:
        raise ValueError(f"unknown chart kind {kind!r}; known: {', '.join(CHART_KINDS)}")
    ensure_bundled_fonts()
    dd = dict(default_data_dirs() if data_dirs is None else data_dirs)
    rng = rng_for(CHART_SEED, "chart", f"{kind}/{k}")
    style = Style(rng)
    if kind in ("blot", "gel", "blot_quant"):
        style.fs = float(rng.choice([7, 8, 8, 9, 10]))
    with matplotlib.rc_context(style.rc()), _quiet_font_fallbacks():
        (w0, w1), (h0, h1) = _SIZES.get(kind, ((3.0, 3.0), (3.0, 3.0)))
        fig = _figure(style, float(rng.uniform(w0, w1)), float(rng.uniform(h0, h1)))
        _draw(kind, fig, rng, style, dd, k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "not compatible with tight_layout": fixed below
            if kind in _SIZES:
                fig.tight_layout(pad=0.6)
            if kind == "flow":
                fig.subplots_adjust(wspace=0.12)
        _grow_to_content(fig)
        arr = _canvas_array(fig)
    margin = int(rng.integers(2, 10))
    return arr, margin


def render_chart(kind: str, k: int, data_dirs: Mapping[str, Path] | None = None) -> Image.Image:
    """Variant ``k`` of chart kind ``kind`` as an RGB image cropped to its content (deterministic)."""
    arr, margin = render_canvas(kind, k, data_dirs)
    return Image.fromarray(np.ascontiguousarray(_autocrop(arr, margin)), "RGB")


def chart_source_ids() -> list[str]:
    """The ids the builtin pool registers: ``chart:<kind>:<k>``, ``k < variants(kind)``."""
    return [f"chart:{kind}:{k}" for kind in CHART_KINDS for k in range(variants(kind))]
