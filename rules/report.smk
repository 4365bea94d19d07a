# Stage 10: papermill reports -> self-contained HTML, shown by `snakemake --report report.zip`.

REPORT_DIR = f"{RESULTS}/reports"
RUN = config["train"]["run"]
REPORT = config["report"]


REPORT_INPUTS = {
    "dataset": (
        f"{RESULTS}/listing/counts.json",
        f"{RESULTS}/acquire/counts.json",
        f"{RESULTS}/parse/counts.json",
        f"{RESULTS}/decompose/counts.json",
        f"{RESULTS}/enrich/counts.json",
        f"{RESULTS}/filter/counts.json",
        f"{RESULTS}/shards",
    ),
    "detector": (
        f"{RESULTS}/detector/eval/eval.json",
        f"{RESULTS}/decompose/counts.json",
    ),
    "enrichment": (f"{RESULTS}/enrich/counts.json"),
    "training": (
        f"{RESULTS}/encoders/{RUN}",
        f"{RESULTS}/evaluation/{RUN}/metrics.json",
    ),
}

for _name, _inputs in REPORT_INPUTS.items():

    rule:
        name:
            f"report_{_name}"
        input:
            notebook=f"notebooks/{_name}.ipynb",
            stages=_inputs,
        output:
            html=report(
                f"{REPORT_DIR}/{_name}.html",
                category="Reports",
                labels={"report": _name},
            ),
        params:
            name=_name,
            show_input="--show-input" if REPORT.get("show_input", False) else "",
            n_examples=REPORT.get("n_examples", 8),
            seed=REPORT.get("seed", 0),
            code=code_version("report"),
        log:
            f"{LOGS}/report/{_name}.log",
        threads: 1
        resources:
            mem_mb=4000,
            runtime=30,
        conda:
            ENV
        shell:
            "{PYTHON} -m pmcflow.cli report {params.name} --results {RESULTS} --run {RUN} --out {output.html}"
            " {params.show_input} -p n_examples={params.n_examples} -p seed={params.seed} > {log} 2>&1"

    FINAL_TARGETS.append(f"{REPORT_DIR}/{_name}.html")
