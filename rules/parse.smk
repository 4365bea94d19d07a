# Stage 2: parse JATS into articles, figures and in-text figure mentions.


rule parse_chunk:
    input:
        acquired=results_path(_LAYOUT.ACQUIRED),
    output:
        articles=results_path(_LAYOUT.ARTICLES),
        figures=results_path(_LAYOUT.FIGURES),
        mentions=results_path(_LAYOUT.MENTIONS),
        rejections=results_path(_LAYOUT.chunk_rejections("parse")),
        counts=results_path(_LAYOUT.chunk_counts("parse")),
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


FINAL_TARGETS.append(results_path(_LAYOUT.counts("parse")))
