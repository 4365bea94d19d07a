"""Rule report_<name>: execute a papermill notebook and write self-contained HTML (pmcflow.report)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.report import ReportSettings, render_report  # noqa: E402

sm = snakemake  # noqa: F821
opts = ReportSettings.from_section(sm.params.report)
render_report(
    sm.params.name,
    {
        "results_dir": sm.params.results,
        "config": dict(sm.params.config),  # the config sections this report reads (rules/report.smk)
        "run_name": sm.params.run,
        "workdir": ".",
        "n_examples": opts.n_examples,
        "seed": opts.seed,
    },
    sm.output.html,
    no_input=not opts.show_input,
)
