# Stage 2: parse JATS into articles, figures and in-text figure mentions.


rule parse_chunk:
    input:
        acquired=f"{RESULTS}/acquire/{{chunk}}/articles.parquet",
    output:
        articles=f"{RESULTS}/parse/{{chunk}}/articles.parquet",
        figures=f"{RESULTS}/parse/{{chunk}}/figures.parquet",
        mentions=f"{RESULTS}/parse/{{chunk}}/mentions.parquet",
        rejections=f"{RESULTS}/parse/{{chunk}}/rejections.parquet",
        counts=f"{RESULTS}/parse/{{chunk}}/counts.json",
    params:
        parse=config["parse"],
        code=code_version("scripts/parse_chunk.py"),
    log:
        f"{LOGS}/parse/{{chunk}}.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/parse_chunk.py"


# The stage summary: acquire_summary's rule (rules/acquire.smk) over this stage's chunks.
use rule acquire_summary as parse_summary with:
    input:
        **summary_inputs("parse"),
    output:
        **summary_outputs("parse"),
    params:
        stage="parse",
        code=code_version("scripts/merge_stage.py"),
    log:
        f"{LOGS}/parse/summary.log",


FINAL_TARGETS.append(f"{RESULTS}/parse/counts.json")
