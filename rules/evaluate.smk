# Stage 9b: evaluate each encoder run: retrieval Recall@K both directions and zero-shot on the
# held-out split, and every configured benchmark (retrieval, zero-shot, linear probe, robustness);
# the configured baselines with the same code; t-SNE / MMD between the evaluated models.

BASELINE_DIRS = {f"baseline:{b}": results_path(_LAYOUT.baseline_dir(b)) for b in BASELINES}
# The models compared by t-SNE / MMD (display name -> evaluation folder): runs, then baselines.
EMBEDDING_MODELS = {**{r: results_path(_LAYOUT.evaluation_dir(r)) for r in ENCODER_RUNS}, **BASELINE_DIRS}
if not config["evaluate"]["embedding"]["enabled"] or len(EMBEDDING_MODELS) < 2:
    EMBEDDING_MODELS = {}


wildcard_constraints:
    baseline="|".join(re.escape(b) for b in BASELINES) or "(?!)",


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
        encoder=results_path(_LAYOUT.encoder_dir()),
        shards=results_path(_LAYOUT.SHARDS),
    output:
        **evaluation_outputs(_LAYOUT.evaluation_dir()),
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


FINAL_TARGETS.extend(evaluation_outputs(_LAYOUT.evaluation_dir(r))["metrics_json"] for r in ENCODER_RUNS)


rule evaluate_baseline:
    input:
        unpack(demo_benchmarks_input),
        shards=results_path(_LAYOUT.SHARDS),
    output:
        **evaluation_outputs(_LAYOUT.baseline_dir()),
        model=directory(results_path(_LAYOUT.baseline_model())),
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


FINAL_TARGETS.extend(evaluation_outputs(_LAYOUT.baseline_dir(b))["metrics_json"] for b in BASELINES)

if EMBEDDING_MODELS:

    rule compare_embeddings:
        input:
            [_LAYOUT.evaluation_file(d, "embeddings") for d in EMBEDDING_MODELS.values()],
        output:
            mmd=results_path(_LAYOUT.EMBEDDINGS_MMD),
            tsne=results_path(_LAYOUT.EMBEDDINGS_TSNE),
            summary=results_path(_LAYOUT.EMBEDDINGS_SUMMARY),
            plots=directory(results_path(_LAYOUT.EMBEDDINGS_PLOTS)),
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

    FINAL_TARGETS.append(results_path(_LAYOUT.EMBEDDINGS_SUMMARY))
