# Stage 10: papermill reports -> self-contained HTML, shown by `snakemake --report report.zip`.

REPORT_DIR = f"{RESULTS}/reports"
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
    # Each report's overview names only the stages it takes as inputs (report.sections.overview).
    "detector": (
        f"{RESULTS}/detector/eval/eval.json",
        f"{RESULTS}/listing/counts.json",
        f"{RESULTS}/acquire/counts.json",
        f"{RESULTS}/parse/counts.json",
        f"{RESULTS}/decompose/counts.json",
    ),
    "enrichment": (
        f"{RESULTS}/listing/counts.json",
        f"{RESULTS}/acquire/counts.json",
        f"{RESULTS}/parse/counts.json",
        f"{RESULTS}/decompose/counts.json",
        f"{RESULTS}/enrich/counts.json",
    ),
    "training": (
        *(f"{RESULTS}/encoders/{r}" for r in ENCODER_RUNS),
        *(f"{RESULTS}/evaluation/{r}/metrics.json" for r in ENCODER_RUNS),
        *(f"{d}/metrics.json" for d in BASELINE_DIRS.values()),
        *([f"{RESULTS}/evaluation/embeddings/embeddings.json"] if EMBEDDING_MODELS else []),
    ),
}

REPORT_CONFIG = {
    "dataset": ("train", "shard", "filter"),  # tokenizer and text fields; modality classifier
    "detector": ("detector",),  # detector.train off: an old model's record is not this run's
    "enrichment": ("enrich",),
    "training": ("train", "evaluate"),  # runs and their texts; baselines; embedding analysis
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
            results=lambda wc, output: str(Path(output.html).parent.parent),
            run=",".join(ENCODER_RUNS),  # the report's runs, in the configured order
            report=REPORT,
            # The config sections the report reads (stages turned off, the train texts, the
            # baselines), so what it says never depends on which other jobs finished first.
            config={k: config[k] for k in REPORT_CONFIG[_name]},
            code=code_version("scripts/report.py", f"notebooks/{_name}.ipynb"),
        log:
            f"{LOGS}/report/{_name}.log",
        threads: 1
        resources:
            mem_mb=4000,
            runtime=30,
        container:
            IMAGES["base"]
        conda:
            ENV
        script:
            "../scripts/report.py"

    FINAL_TARGETS.append(f"{REPORT_DIR}/{_name}.html")
