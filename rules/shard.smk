# Stage 8: WebDataset shards (open_clip reads them as-is), Parquet index, sizes.json, manifest.
# Written per chunk in parallel (shard_chunk); a cheap global step (shard) links the chunks' tars
# into one folder and writes sizes.json, the index and the manifest. A changed chunk rewrites only
# its own shards.


rule shard_chunk:
    input:
        dataset=results_path(_LAYOUT.DATASET),
        # What the dataset rows point to: a crops folder that is gone (a killed decompose rerun)
        # makes Snakemake rerun decompose_chunk; the stage itself refuses a dangling pointer.
        crops=results_path(_LAYOUT.CROPS),
    output:
        directory(results_path(_LAYOUT.SHARD_CHUNK)),
    params:
        shard=config["shard"],
        seed=config["seed"],
        code=code_version("scripts/shard_chunk.py"),
    log:
        f"{LOGS}/shard/{{chunk}}.log",
    threads: 1
    resources:
        mem_mb=4000,
        runtime=240,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/shard_chunk.py"


rule shard:
    input:
        parts=per_chunk(results_path(_LAYOUT.SHARD_CHUNK)),
        # the chunks' inputs: column types of the sample json (schemas only; no rows re-read)
        dataset=per_chunk(results_path(_LAYOUT.DATASET)),
    output:
        directory(results_path(_LAYOUT.SHARDS)),
    params:
        shard=config["shard"],
        seed=config["seed"],
        code=code_version("scripts/shard.py"),
    log:
        f"{LOGS}/shard/shard.log",
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/shard.py"


FINAL_TARGETS.append(results_path(_LAYOUT.SHARDS))
