# Stage 7: filter enriched subfigures (licence, retraction, size, text quality, modality,
# corpus-wide near-duplicates) into dataset rows.


rule phash_chunk:
    input:
        enriched=results_path(_LAYOUT.ENRICHED),
        # The crops the rows point to: declared, so a missing or stale folder reruns decompose_chunk.
        crops=results_path(_LAYOUT.CROPS),
    output:
        results_path(_LAYOUT.PHASH),
    params:
        filter=config["filter"],
        code=code_version("scripts/phash_chunk.py"),
    log:
        f"{LOGS}/filter/phash-{{chunk}}.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/phash_chunk.py"


rule find_duplicates:
    input:
        per_chunk(results_path(_LAYOUT.PHASH)),
    output:
        results_path(_LAYOUT.DUPLICATES),
    params:
        dedup=config["filter"]["dedup"],
        code=code_version("scripts/find_duplicates.py"),
    log:
        f"{LOGS}/filter/find_duplicates.log",
    threads: 1
    resources:
        mem_mb=16000,
        runtime=60,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/find_duplicates.py"


rule filter_chunk:
    input:
        unpack(corpus_duplicates_input),
        enriched=results_path(_LAYOUT.ENRICHED),
        phash=results_path(_LAYOUT.PHASH),
    output:
        dataset=results_path(_LAYOUT.DATASET),
        rejections=results_path(_LAYOUT.chunk_rejections("filter")),
        counts=results_path(_LAYOUT.chunk_counts("filter")),
    params:
        filter=config["filter"],
        code=code_version("scripts/filter_chunk.py"),
    log:
        f"{LOGS}/filter/{{chunk}}.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/filter_chunk.py"


# The stage summary: acquire_summary's rule (rules/acquire.smk) over this stage's chunks.
use rule acquire_summary as filter_summary with:
    input:
        **summary_inputs("filter"),
    output:
        **summary_outputs("filter"),
    params:
        stage="filter",
        code=code_version("scripts/merge_stage.py"),
    log:
        f"{LOGS}/filter/summary.log",


FINAL_TARGETS.append(results_path(_LAYOUT.counts("filter")))
