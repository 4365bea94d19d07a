# Stage 9: train an image-text encoder with open_clip on the shards: one per train.variants entry
# (the paper's text ablation: the text is composed at load time from the same shards), else one.

_RUNS = _stdlib_module("runs")
ENCODER_RUNS = _RUNS.encoder_runs(config["train"])


wildcard_constraints:
    run="|".join(re.escape(r) for r in ENCODER_RUNS),


rule train_encoder:
    input:
        shards=results_path(_LAYOUT.SHARDS),
    output:
        directory(results_path(_LAYOUT.encoder_dir())),
    params:
        train=lambda wc: _RUNS.run_settings(config["train"], wc.run),
        seed=config["seed"],
        code=code_version("scripts/train_encoder.py"),
    log:
        f"{LOGS}/train/{{run}}.log",
    threads: rule_threads("train_encoder", 1)
    resources:
        # train.n_gpus GPUs when the run trains on cuda (pmcflow.compute); torchrun uses them all.
        **rule_resources("train_encoder", mem_mb=16000, runtime=7200),
    container:
        IMAGES["base"]
    conda:
        ENV
    script:
        "../scripts/train_encoder.py"


FINAL_TARGETS.extend(results_path(_LAYOUT.encoder_dir(r)) for r in ENCODER_RUNS)
