# Stage 7: filter enriched subfigures (licence, retraction, size, text quality, modality,
# corpus-wide near-duplicates) into dataset rows.


rule phash_chunk:
    input:
        enriched=f"{RESULTS}/enrich/{{chunk}}/enriched.parquet",
        # The crops the rows point to: declared, so a missing or stale folder reruns decompose_chunk.
        crops=f"{RESULTS}/decompose/{{chunk}}/crops",
    output:
        f"{RESULTS}/filter/{{chunk}}/phash.parquet",
    params:
        filter=config["filter"],
        seed=config["seed"],
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
        per_chunk(f"{RESULTS}/filter/{{chunk}}/phash.parquet"),
    output:
        f"{RESULTS}/filter/duplicates.parquet",
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
        enriched=f"{RESULTS}/enrich/{{chunk}}/enriched.parquet",
        phash=f"{RESULTS}/filter/{{chunk}}/phash.parquet",
    output:
        dataset=f"{RESULTS}/filter/{{chunk}}/dataset.parquet",
        rejections=f"{RESULTS}/filter/{{chunk}}/rejections.parquet",
        counts=f"{RESULTS}/filter/{{chunk}}/counts.json",
    params:
        filter=config["filter"],
        seed=config["seed"],
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


FINAL_TARGETS.append(f"{RESULTS}/filter/counts.json")
