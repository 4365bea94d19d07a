# Stage 1: acquire PMC OA article versions (cloud / legacy FTP / local mirror).


ACQUIRE_ONLY = ("media_types", "verify_images")


checkpoint list_articles:
    output:
        listing=results_path(_LAYOUT.LISTING),
        chunks=results_path(_LAYOUT.CHUNKS),
        rejections=results_path(_LAYOUT.rejections("list")),
        counts=results_path(_LAYOUT.counts("list")),
    params:
        # What is fetched per article (media_types, verify_images) is acquisition's alone: a change
        # there reruns the chunks, not the listing.
        source={k: v for k, v in config["source"].items() if k not in ACQUIRE_ONLY},
        select=config["select"],
        chunking=config["chunking"],
        http=config["http"],
        code=code_version("scripts/list_articles.py"),
    log:
        f"{LOGS}/acquire/list_articles.log",
    threads: 1
    resources:
        mem_mb=8000,
        runtime=240,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/list_articles.py"


rule acquire_chunk:
    input:
        # The listing changes whenever any chunk changes; a chunk reruns only when its own
        # rows do (params.digest), hence ancient().
        listing=ancient(results_path(_LAYOUT.LISTING)),
        # No rule writes it: touched while this chunk has articles pending a retry (a transient
        # failure), so the next plain run re-acquires them (pmcflow.retry).
        retry=retry_stamp,
    output:
        articles=results_path(_LAYOUT.ACQUIRED),
        rejections=results_path(_LAYOUT.chunk_rejections("acquire")),
        pending=results_path(_LAYOUT.ACQUIRE_PENDING),
        media_rejections=results_path(_LAYOUT.ACQUIRE_MEDIA_REJECTIONS),
        counts=results_path(_LAYOUT.chunk_counts("acquire")),
    params:
        digest=lambda wc: chunk_digest(wc.chunk),
        # Everything acquisition reads (media_types, verify_images, the backend and its settings).
        # source.snapshot only labels the listing: its effect reaches a chunk through its digest.
        source={k: v for k, v in config["source"].items() if k != "snapshot"},
        select=config["select"],
        http=config["http"],
        cache=f"{RESOURCES}/pmc",
        code=code_version("scripts/acquire_chunk.py"),
    log:
        log=f"{LOGS}/acquire/{{chunk}}.log",
        # requests, bytes, retries, resumed/cached files of this run (not content: not an output)
        transfer=f"{LOGS}/acquire/{{chunk}}.transfer.json",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=720,
        # One token per job that talks to PMC: with `--resources pmc_http=1` (the profiles set
        # it) parallel chunks share NCBI's request-rate limit instead of multiplying it.
        pmc_http=1,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/acquire_chunk.py"


rule acquire_summary:
    input:
        **summary_inputs("acquire"),
        media_rejections=per_chunk(results_path(_LAYOUT.ACQUIRE_MEDIA_REJECTIONS)),
        pending=per_chunk(results_path(_LAYOUT.ACQUIRE_PENDING)),
        listing_counts=results_path(_LAYOUT.counts("list")),
        listing_rejections=results_path(_LAYOUT.rejections("list")),
    output:
        **summary_outputs("acquire"),
        media_rejections=results_path(_LAYOUT.stage_file("acquire", _LAYOUT.MEDIA_REJECTIONS)),
        pending=results_path(_LAYOUT.stage_file("acquire", _LAYOUT.PENDING)),
    params:
        stage="acquire",
        code=code_version("scripts/merge_stage.py"),
    log:
        f"{LOGS}/acquire/summary.log",
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


FINAL_TARGETS.append(results_path(_LAYOUT.counts("acquire")))
