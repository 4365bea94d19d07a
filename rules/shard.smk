# Stage 8: WebDataset shards (open_clip reads them as-is), Parquet index, sizes.json, manifest.


rule shard:
    input:
        dataset=per_chunk(f"{RESULTS}/filter/{{chunk}}/dataset.parquet"),
        # What the dataset rows point to: a crops folder that is gone (a killed decompose rerun)
        # makes Snakemake rerun decompose_chunk; the stage itself refuses a dangling pointer.
        crops=per_chunk(f"{RESULTS}/decompose/{{chunk}}/crops"),
    output:
        directory(f"{RESULTS}/shards"),
    params:
        shard=config["shard"],
        seed=config["seed"],
        code=code_version("scripts/shard.py"),
    log:
        f"{LOGS}/shard/shard.log",
    threads: 1
    resources:
        mem_mb=16000,
        runtime=720,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/shard.py"


FINAL_TARGETS.append(f"{RESULTS}/shards")
