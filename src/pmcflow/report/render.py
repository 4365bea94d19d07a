"""Execute a report notebook with papermill and render it to one self-contained HTML file."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pmcflow.settings import Settings
from pmcflow.tables import atomic_open

REPORTS: dict[str, str] = {
    "dataset": "dataset.ipynb",
    "detector": "detector.ipynb",
    "enrichment": "enrichment.ipynb",
    "training": "training.ipynb",
}
TITLES: dict[str, str] = {
    "dataset": "pmcflow dataset report",
    "detector": "pmcflow detector report",
    "enrichment": "pmcflow enrichment report",
    "training": "pmcflow training report",
}

# The lab template minus its CDN scripts (require.js, MathJax, mermaid): the reports use none of
# them, and a report must open offline with nothing outside the file.
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block html_head_css %}<style>
body.jp-Notebook { max-width: 1200px; margin: auto; }
.jp-RenderedHTMLCommon table.pmcflow-table { border-collapse: collapse; font-size: 12px; margin: 6px 0 14px 0; }
.jp-RenderedHTMLCommon table.pmcflow-table th, .jp-RenderedHTMLCommon table.pmcflow-table td { padding: 2px 8px; border: 1px solid #ccc; vertical-align: top; text-align: left; }
.jp-RenderedHTMLCommon table.pmcflow-table td.num { text-align: right; font-variant-numeric: tabular-nums; }
.jp-RenderedHTMLCommon table.pmcflow-table th { background: #f3f3f3; }
p.pmcflow-caption { font-style: italic; margin: 10px 0 2px 0; }
</style>{% endblock html_head_css %}
"""


@dataclass(frozen=True)
class ReportSettings(Settings):
    """``report``, typed and frozen (defaults in the schema): what every report rule renders with."""

    SECTION: ClassVar[tuple[str, ...]] = ("report",)

    show_input: bool  # the code cells in the HTML
    n_examples: int  # example pairs shown
    seed: int  # which examples


def notebooks_dir() -> Path:
    """``notebooks/`` of the workflow: ``PMCFLOW_NOTEBOOKS`` or the repository holding this package."""
    env = os.environ.get("PMCFLOW_NOTEBOOKS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "notebooks"


def notebook_path(name: str) -> Path:
    if name not in REPORTS:
        raise ValueError(f"unknown report {name!r}; one of {sorted(REPORTS)}")
    return notebooks_dir() / REPORTS[name]


def to_html(nb: Any, *, no_input: bool = True, title: str | None = None) -> str:
    """An executed notebook as one HTML page (PNG outputs embedded, no external scripts)."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[DictLoader({"pmcflow_report.html.j2": _TEMPLATE})],
        template_file="pmcflow_report.html.j2",
        exclude_input=no_input,
        exclude_input_prompt=no_input,
        exclude_output_prompt=no_input,
        embed_images=True,
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title or "pmcflow report"}})
    return body


def render_report(
    name: str,
    params: Mapping[str, Any],
    out_html: str | os.PathLike[str],
    *,
    out_ipynb: str | os.PathLike[str] | None = None,
    no_input: bool = True,
    cwd: str | os.PathLike[str] | None = None,
    kernel: str = "python3",
    timeout_s: int = 600,
) -> Path:
    """Run notebook ``name`` with ``params`` (papermill) and write its HTML to ``out_html`` atomically.

    ``cwd``: the directory the kernel runs in (the workflow directory: stored paths in the tables
    are relative to it); default the current directory.  The executed notebook is kept at
    ``out_ipynb`` when given.  Raises papermill's ``PapermillExecutionError`` when a cell fails
    (no HTML is written then).
    """
    import nbformat
    import papermill as pm

    src = notebook_path(name)
    run_dir = Path(cwd) if cwd is not None else Path.cwd()
    env_backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"  # inherited by the kernel: no display needed
    try:
        with tempfile.TemporaryDirectory(prefix="pmcflow-report-") as tmp:
            executed = Path(out_ipynb) if out_ipynb is not None else Path(tmp) / REPORTS[name]
            executed.parent.mkdir(parents=True, exist_ok=True)
            pm.execute_notebook(
                str(src),
                str(executed),
                parameters=dict(params),
                kernel_name=kernel,
                cwd=str(run_dir),
                progress_bar=False,
                log_output=False,
                execution_timeout=timeout_s,
            )
            nb = nbformat.read(executed, as_version=4)
            for cell in nb.cells:  # papermill gives its injected cell a random id: keep the HTML reproducible
                if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
                    cell["id"] = "injected-parameters"
    finally:
        if env_backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = env_backend
    html = to_html(nb, no_input=no_input, title=TITLES[name])
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out, "w", encoding="utf-8") as fh:
        fh.write(html)
    umask = os.umask(0)
    os.umask(umask)
    out.chmod(0o666 & ~umask)  # the temporary file was private; a report is meant to be read
    return out


def _param(text: str) -> tuple[str, Any]:
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, yaml.safe_load(value)


def cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pmcflow report",
        description="Execute a report notebook (papermill) and write it as one self-contained HTML file.",
    )
    parser.add_argument("name", choices=sorted(REPORTS), help="which report")
    parser.add_argument(
        "--results",
        default=None,
        help="results directory (default: paths.results of --config, else 'results')",
    )
    parser.add_argument("--out", required=True, help="output HTML file")
    parser.add_argument("--config", default=None, help="workflow config YAML (results path, run name)")
    parser.add_argument("--run", default=None, help="encoder run name (training report; default: all runs)")
    parser.add_argument("--ipynb", default=None, help="also keep the executed notebook here")
    parser.add_argument("--show-input", action="store_true", help="include the code cells in the HTML")
    parser.add_argument("--workdir", default=".", help="workflow directory (stored paths are relative to it)")
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        type=_param,
        default=[],
        metavar="KEY=VALUE",
        help="extra notebook parameter (YAML value), e.g. -p n_examples=12",
    )
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    params: dict[str, Any] = {
        "results_dir": args.results,
        "config": args.config,
        "run_name": args.run,
        "workdir": ".",
    }
    params.update(dict(args.param))
    out = render_report(
        args.name, params, args.out, out_ipynb=args.ipynb, no_input=not args.show_input, cwd=args.workdir
    )
    print(out)
    return 0
