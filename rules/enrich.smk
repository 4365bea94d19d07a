# Stage 6: subcaptions and in-text reference summaries per subfigure.


rule enrich_chunk:
    input:
        subfigures=f"{RESULTS}/decompose/{{chunk}}/subfigures.parquet",
        crops=f"{RESULTS}/decompose/{{chunk}}/crops",  # the VLM reads them
        # Snakemake keeps outputs built from a since-deleted intermediate; this stamp changes while
        # the crops are missing, so nothing downstream keeps pointing to them (docs/reliability.md).
        crops_present=crops_present,
        figures=f"{RESULTS}/parse/{{chunk}}/figures.parquet",
        mentions=f"{RESULTS}/parse/{{chunk}}/mentions.parquet",
        articles=f"{RESULTS}/parse/{{chunk}}/articles.parquet",
    output:
        enriched=f"{RESULTS}/enrich/{{chunk}}/enriched.parquet",
        rejections=f"{RESULTS}/enrich/{{chunk}}/rejections.parquet",
        counts=f"{RESULTS}/enrich/{{chunk}}/counts.json",
    params:
        enrich=config["enrich"],
        code=code_version("scripts/enrich_chunk.py"),
    log:
        f"{LOGS}/enrich/{{chunk}}.log",
    threads: 1
    resources:
        mem_mb=64000 if ENRICH_GPUS else 4000,
        runtime=720 if ENRICH_GPUS else 120,
        gpu=ENRICH_GPUS,
    container:
        ENRICH_IMAGE
    conda:
        ENRICH_ENV
    script:
        "../scripts/enrich_chunk.py"


# The stage summary: acquire_summary's rule (rules/acquire.smk) over this stage's chunks.
use rule acquire_summary as enrich_summary with:
    input:
        **summary_inputs("enrich"),
    output:
        **summary_outputs("enrich"),
    params:
        stage="enrich",
        code=code_version("scripts/merge_stage.py"),
    log:
        f"{LOGS}/enrich/summary.log",


FINAL_TARGETS.append(f"{RESULTS}/enrich/counts.json")
