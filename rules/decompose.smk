# Stage 5: decompose compound figures into subfigures (boxes, crops, panel letters).


rule decompose_chunk:
    input:
        unpack(decompose_model_input),
        figures=results_path(_LAYOUT.FIGURES),
    output:
        subfigures=results_path(_LAYOUT.SUBFIGURES),
        rejections=results_path(_LAYOUT.chunk_rejections("decompose")),
        counts=results_path(_LAYOUT.chunk_counts("decompose")),
        crops=directory(results_path(_LAYOUT.CROPS)),
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


FINAL_TARGETS.append(results_path(_LAYOUT.counts("decompose")))
