# Stage 9: train an image-text encoder with open_clip on the shards.


rule train_encoder:
    input:
        shards=f"{RESULTS}/shards",
    output:
        directory(f"{RESULTS}/encoders/{{run}}"),
    params:
        train=config["train"],
        seed=config["seed"],
        code=code_version("scripts/train_encoder.py"),
    log:
        f"{LOGS}/train/{{run}}.log",
    threads: 1
    resources:
        mem_mb=16000,
        runtime=7200,
        # GPU partitions: the slurm profile sets gpu / gpu_model / cpus_per_gpu for this rule.
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/train_encoder.py"


FINAL_TARGETS.append(f"{RESULTS}/encoders/{config['train']['run']}")
