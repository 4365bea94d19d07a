# Stage 6: subcaptions and in-text reference summaries per subfigure, as two jobs per chunk so that
# one model (one vLLM engine) owns the GPUs of a job: subcaptions first, then the summaries, which
# read them and write the chunk's enriched table.


rule enrich_subcaptions:
    input:
        subfigures=f"{RESULTS}/decompose/{{chunk}}/subfigures.parquet",
        crops=f"{RESULTS}/decompose/{{chunk}}/crops",  # the VLM reads them
        # Snakemake keeps outputs built from a since-deleted intermediate; this stamp changes while
        # the crops are missing, so nothing downstream keeps pointing to them (docs/reliability.md).
        crops_present=crops_present,
        figures=f"{RESULTS}/parse/{{chunk}}/figures.parquet",
        articles=f"{RESULTS}/parse/{{chunk}}/articles.parquet",
    output:
        subcaptions=f"{RESULTS}/enrich/{{chunk}}/subcaptions.parquet",
        rejections=f"{RESULTS}/enrich/{{chunk}}/subcaption_rejections.parquet",
    params:
        enrich=config["enrich"],
        code=code_version("scripts/enrich_subcaptions.py"),
    log:
        f"{LOGS}/enrich/{{chunk}}.subcaptions.log",
    threads: rule_threads("enrich_subcaptions", 1)
    resources:
        **rule_resources("enrich_subcaptions", mem_mb=4000, runtime=720),
    container:
        ENRICH_IMAGE["subcaption"]
    conda:
        ENRICH_ENV["subcaption"]
    script:
        "../scripts/enrich_subcaptions.py"


rule enrich_chunk:
    input:
        subcaptions=f"{RESULTS}/enrich/{{chunk}}/subcaptions.parquet",
        subcaption_rejections=f"{RESULTS}/enrich/{{chunk}}/subcaption_rejections.parquet",
        subfigures=f"{RESULTS}/decompose/{{chunk}}/subfigures.parquet",
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
    threads: rule_threads("enrich_chunk", 1)
    resources:
        **rule_resources("enrich_chunk", mem_mb=4000, runtime=720),
    container:
        ENRICH_IMAGE["summary"]
    conda:
        ENRICH_ENV["summary"]
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
