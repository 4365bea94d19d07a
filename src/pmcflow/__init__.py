"""pmcflow: PMC Open Access -> subfigure-level biomedical image-text dataset (Open-PMC-18M recipe)."""

__version__ = "0.1.0"
