# Stage 3: synthetic compound figures (COCO + YOLO) rendered in shards, merged per split.

# Figure indices: train from 0, validation and holdout far beyond, so splits never share a figure.
SYNTH_SPLITS = {
    "train": (config["synth"]["n_train"], 0),
    "val": (config["synth"]["n_val"], 100_000_000),
    "holdout": (config["synth"]["n_holdout"], 200_000_000),
}


wildcard_constraints:
    split="train|val|holdout",
    shard=r"\d{5}",


rule render_shard:
    input:
        unpack(synth_sources_input),
    output:
        directory(results_path(_LAYOUT.SYNTH_SHARD)),
    params:
        n=lambda wc: SYNTH_SPLITS[wc.split][0],
        start=lambda wc: SYNTH_SPLITS[wc.split][1],
        synth=config["synth"],
        seed=config["seed"],
        code=code_version("scripts/render_shard.py"),
    log:
        f"{LOGS}/synth/{{split}}-{{shard}}.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=240,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/render_shard.py"


rule render_merge:
    input:
        lambda wc: expand(
            results_path(_LAYOUT.SYNTH_SHARD),
            split=wc.split,
            shard=[f"{k:05d}" for k in range(config["synth"]["num_shards"])],
        ),
    output:
        annotations=results_path(_LAYOUT.SYNTH_ANNOTATIONS),
        records=results_path(_LAYOUT.SYNTH_RECORDS),
        counts=results_path(_LAYOUT.SYNTH_COUNTS),
    params:
        code=code_version("scripts/render_merge.py"),
    log:
        f"{LOGS}/synth/{{split}}-merge.log",
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/render_merge.py"


FINAL_TARGETS.append(results_path(_LAYOUT.SYNTH_COUNTS.format(split="holdout")))
