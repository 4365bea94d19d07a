# Stage 5: decompose compound figures into subfigures (boxes, crops, panel letters).


rule decompose_chunk:
    input:
        unpack(decompose_model_input),
        figures=f"{RESULTS}/parse/{{chunk}}/figures.parquet",
    output:
        subfigures=f"{RESULTS}/decompose/{{chunk}}/subfigures.parquet",
        rejections=f"{RESULTS}/decompose/{{chunk}}/rejections.parquet",
        counts=f"{RESULTS}/decompose/{{chunk}}/counts.json",
        crops=directory(f"{RESULTS}/decompose/{{chunk}}/crops"),
    params:
        decompose=config["decompose"],
        code=code_version("scripts/decompose_chunk.py"),
    log:
        f"{LOGS}/decompose/{{chunk}}.log",
    threads: rule_threads("decompose_chunk", 2)
    resources:
        **rule_resources("decompose_chunk", mem_mb=4000, runtime=120),
    container:
        DECOMPOSE_IMAGE
    conda:
        ENV
    script:
        "../scripts/decompose_chunk.py"


# The stage summary: acquire_summary's rule (rules/acquire.smk) over this stage's chunks.
use rule acquire_summary as decompose_summary with:
    input:
        **summary_inputs("decompose"),
    output:
        **summary_outputs("decompose"),
    params:
        stage="decompose",
        code=code_version("scripts/merge_stage.py"),
    log:
        f"{LOGS}/decompose/summary.log",


FINAL_TARGETS.append(f"{RESULTS}/decompose/counts.json")
