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
    threads: 2
    resources:
        mem_mb=4000,
        runtime=120,
    container:
        DECOMPOSE_IMAGE
    conda:
        ENV
    script:
        "../scripts/decompose_chunk.py"


rule decompose_summary:
    input:
        counts=per_chunk(f"{RESULTS}/decompose/{{chunk}}/counts.json"),
        rejections=per_chunk(f"{RESULTS}/decompose/{{chunk}}/rejections.parquet"),
    output:
        counts=f"{RESULTS}/decompose/counts.json",
        rejections=f"{RESULTS}/decompose/rejections.parquet",
    params:
        stage="decompose",
        code=code_version("scripts/merge_stage.py"),
    log:
        f"{LOGS}/decompose/summary.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/merge_stage.py"


FINAL_TARGETS.append(f"{RESULTS}/decompose/counts.json")
