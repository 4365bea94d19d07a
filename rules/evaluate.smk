# Stage 9b: evaluate each encoder run: retrieval Recall@K both directions and zero-shot on the
# held-out split, and every configured benchmark (retrieval, zero-shot, linear probe, robustness).

rule demo_benchmarks:
    output:
        directory(DEMO_BENCHMARKS),
    params:
        seed=config["seed"],
        code=code_version("scripts/demo_benchmarks.py"),
    log:
        f"{LOGS}/evaluate/demo_benchmarks.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/demo_benchmarks.py"



rule evaluate_encoder:
    input:
        unpack(demo_benchmarks_input),
        encoder=f"{RESULTS}/encoders/{{run}}",
        shards=f"{RESULTS}/shards",
    output:
        metrics=f"{RESULTS}/evaluation/{{run}}/metrics.parquet",
        metrics_json=f"{RESULTS}/evaluation/{{run}}/metrics.json",
        ranks=f"{RESULTS}/evaluation/{{run}}/retrieval_ranks.parquet",
        robustness=f"{RESULTS}/evaluation/{{run}}/robustness.parquet",
        benchmarks=f"{RESULTS}/evaluation/{{run}}/benchmarks.json",
        embeddings=f"{RESULTS}/evaluation/{{run}}/embeddings.npz",
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


FINAL_TARGETS.extend(f"{RESULTS}/evaluation/{r}/metrics.json" for r in ENCODER_RUNS)
