# Stage 6: subcaptions and in-text reference summaries per subfigure, as two jobs per chunk so that
# one model (one vLLM engine) owns the GPUs of a job: subcaptions first, then the summaries, which
# read them and write the chunk's enriched table.


rule enrich_subcaptions:
    input:
        subfigures=results_path(_LAYOUT.SUBFIGURES),
        crops=results_path(_LAYOUT.CROPS),  # the VLM reads them
        # Snakemake keeps outputs built from a since-deleted intermediate; this stamp changes while
        # the crops are missing, so nothing downstream keeps pointing to them (docs/reliability.md).
        crops_present=crops_present,
        figures=results_path(_LAYOUT.FIGURES),
        articles=results_path(_LAYOUT.ARTICLES),
    output:
        subcaptions=results_path(_LAYOUT.SUBCAPTIONS),
        rejections=results_path(_LAYOUT.SUBCAPTION_REJECTIONS),
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
        subcaptions=results_path(_LAYOUT.SUBCAPTIONS),
        subcaption_rejections=results_path(_LAYOUT.SUBCAPTION_REJECTIONS),
        subfigures=results_path(_LAYOUT.SUBFIGURES),
        figures=results_path(_LAYOUT.FIGURES),
        mentions=results_path(_LAYOUT.MENTIONS),
        articles=results_path(_LAYOUT.ARTICLES),
    output:
        enriched=results_path(_LAYOUT.ENRICHED),
        rejections=results_path(_LAYOUT.chunk_rejections("enrich")),
        counts=results_path(_LAYOUT.chunk_counts("enrich")),
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


FINAL_TARGETS.append(results_path(_LAYOUT.counts("enrich")))
