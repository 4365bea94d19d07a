# Stage 9b: evaluate the encoder: retrieval Recall@K both directions, zero-shot classification.


rule evaluate_encoder:
    input:
        encoder=f"{RESULTS}/encoders/{{run}}",
        shards=f"{RESULTS}/shards",
    output:
        metrics=f"{RESULTS}/evaluation/{{run}}/metrics.parquet",
        metrics_json=f"{RESULTS}/evaluation/{{run}}/metrics.json",
        ranks=f"{RESULTS}/evaluation/{{run}}/retrieval_ranks.parquet",
    params:
        evaluate=config["evaluate"],
        seed=config["seed"],
        code=code_version("scripts/evaluate_encoder.py"),
    log:
        f"{LOGS}/evaluate/{{run}}.log",
    threads: 1
    resources:
        mem_mb=8000,
        runtime=240,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/evaluate_encoder.py"


FINAL_TARGETS.append(f"{RESULTS}/evaluation/{config['train']['run']}/metrics.json")
