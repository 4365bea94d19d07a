"""Papermill reports: one notebook per topic, executed on a results directory and rendered to HTML.

``render_report(name, params, out_html)`` runs ``notebooks/<name>.ipynb``; the notebooks call the
section functions of :mod:`pmcflow.report.sections` (data loading in :mod:`.load`, figures in
:mod:`.plots`, HTML pieces in :mod:`.html`).  CLI: ``pmcflow report NAME --results DIR --out FILE``.
"""

from __future__ import annotations

from pmcflow.report.render import REPORTS, ReportSettings, cli, render_report

__all__ = ["REPORTS", "ReportSettings", "cli", "render_report"]
