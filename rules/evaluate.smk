# Stage 9b: evaluate each encoder run: retrieval Recall@K both directions and zero-shot on the
# held-out split, and every configured benchmark (retrieval, zero-shot, linear probe, robustness);
# the configured baselines with the same code; t-SNE / MMD between the evaluated models.

BASELINE_DIRS = {f"baseline:{b}": f"{RESULTS}/evaluation/baselines/{b}" for b in BASELINES}
# The models compared by t-SNE / MMD (display name -> evaluation folder): runs, then baselines.
EMBEDDING_MODELS = {**{r: f"{RESULTS}/evaluation/{r}" for r in ENCODER_RUNS}, **BASELINE_DIRS}
if not config["evaluate"]["embedding"]["enabled"] or len(EMBEDDING_MODELS) < 2:
    EMBEDDING_MODELS = {}


wildcard_constraints:
    baseline="|".join(re.escape(b) for b in BASELINES) or "(?!)",


EVAL_OUTPUTS = {
    "metrics": "metrics.parquet",
    "metrics_json": "metrics.json",
    "ranks": "retrieval_ranks.parquet",
    "robustness": "robustness.parquet",
    "benchmarks": "benchmarks.json",
    "embeddings": "embeddings.npz",
}

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
        **{k: f"{RESULTS}/evaluation/{{run}}/{v}" for k, v in EVAL_OUTPUTS.items()},
    params:
        evaluate=EVALUATE,
        seed=config["seed"],
        code=code_version("scripts/evaluate_encoder.py"),
    log:
        f"{LOGS}/evaluate/{{run}}.log",
    threads: rule_threads("evaluate_encoder", 1)
    resources:
        **rule_resources("evaluate_encoder", mem_mb=8000, runtime=240),
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/evaluate_encoder.py"


FINAL_TARGETS.extend(f"{RESULTS}/evaluation/{r}/metrics.json" for r in ENCODER_RUNS)


rule evaluate_baseline:
    input:
        unpack(demo_benchmarks_input),
        shards=f"{RESULTS}/shards",
    output:
        **{k: f"{RESULTS}/evaluation/baselines/{{baseline}}/{v}" for k, v in EVAL_OUTPUTS.items()},
        model=directory(f"{RESULTS}/evaluation/baselines/{{baseline}}/model"),
    params:
        evaluate=lambda wc: {**EVALUATE, "baselines": {wc.baseline: BASELINES[wc.baseline]}},
        seed=config["seed"],
        code=code_version("scripts/evaluate_encoder.py"),
    log:
        f"{LOGS}/evaluate/baseline-{{baseline}}.log",
    threads: rule_threads("evaluate_baseline", 1)
    resources:
        **rule_resources("evaluate_baseline", mem_mb=8000, runtime=240),
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/evaluate_encoder.py"


FINAL_TARGETS.extend(f"{RESULTS}/evaluation/baselines/{b}/metrics.json" for b in BASELINES)

if EMBEDDING_MODELS:

    rule compare_embeddings:
        input:
            [f"{d}/embeddings.npz" for d in EMBEDDING_MODELS.values()],
        output:
            mmd=f"{RESULTS}/evaluation/embeddings/mmd.parquet",
            tsne=f"{RESULTS}/evaluation/embeddings/tsne.parquet",
            summary=f"{RESULTS}/evaluation/embeddings/embeddings.json",
            plots=directory(f"{RESULTS}/evaluation/embeddings/tsne"),
        params:
            embedding=config["evaluate"]["embedding"],
            models=list(EMBEDDING_MODELS),  # display names, in order (runs, then baselines)
            seed=config["seed"],
            code=code_version("scripts/compare_embeddings.py"),
        log:
            f"{LOGS}/evaluate/compare_embeddings.log",
        threads: 1
        resources:
            mem_mb=8000,
            runtime=120,
        container:
            IMAGES["base"]
        conda:
            ENV
        script:
            "../scripts/compare_embeddings.py"

    FINAL_TARGETS.append(f"{RESULTS}/evaluation/embeddings/embeddings.json")
