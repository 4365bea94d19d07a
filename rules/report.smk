# Stage 10: papermill reports -> self-contained HTML, shown by `snakemake --report report.zip`.

REPORT = config["report"]


REPORT_INPUTS = {
    "dataset": (
        *stage_counts("list", "acquire", "parse", "decompose", "enrich", "filter"),
        results_path(_LAYOUT.SHARDS),
    ),
    # Each report's overview names only the stages it takes as inputs (report.sections.overview).
    "detector": (
        results_path(_LAYOUT.DETECTOR_EVAL),
        *stage_counts("list", "acquire", "parse", "decompose"),
    ),
    "enrichment": stage_counts("list", "acquire", "parse", "decompose", "enrich"),
    "training": (
        *(results_path(_LAYOUT.encoder_dir(r)) for r in ENCODER_RUNS),
        *(evaluation_outputs(_LAYOUT.evaluation_dir(r))["metrics_json"] for r in ENCODER_RUNS),
        *(_LAYOUT.evaluation_file(d, "metrics_json") for d in BASELINE_DIRS.values()),
        *([results_path(_LAYOUT.EMBEDDINGS_SUMMARY)] if EMBEDDING_MODELS else []),
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
                results_path(_LAYOUT.report_html(_name)),
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

    FINAL_TARGETS.append(results_path(_LAYOUT.report_html(_name)))
