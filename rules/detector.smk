# Stage 4: train the subfigure detector on synthetic figures; evaluate it on every set.


rule train_detector:
    input:
        train=results_path(_LAYOUT.SYNTH_ANNOTATIONS.format(split="train")),
        val=results_path(_LAYOUT.SYNTH_ANNOTATIONS.format(split="val")),
    output:
        directory(results_path(_LAYOUT.DETECTOR_MODEL)),
    params:
        detector=config["detector"],
        seed=config["seed"],
        code=code_version("scripts/train_detector.py"),
    log:
        f"{LOGS}/detector/train.log",
    threads: rule_threads("train_detector", 2)
    resources:
        **rule_resources("train_detector", mem_mb=8000, runtime=2880),
    container:
        DETECTOR_IMAGE
    conda:
        ENV
    script:
        "../scripts/train_detector.py"


rule evaluate_detector:
    input:
        unpack(detector_model_input),
        holdout=results_path(_LAYOUT.SYNTH_ANNOTATIONS.format(split="holdout")),
        real=[s["annotations"] for s in config["detector"]["eval"]["real_coco"]],
    output:
        eval=results_path(_LAYOUT.DETECTOR_EVAL),
    params:
        detector=config["detector"],
        code=code_version("scripts/evaluate_detector.py"),
    log:
        f"{LOGS}/detector/evaluate.log",
    threads: rule_threads("evaluate_detector", 2)
    resources:
        **rule_resources("evaluate_detector", mem_mb=8000, runtime=240),
    container:
        DETECTOR_IMAGE
    conda:
        ENV
    script:
        "../scripts/evaluate_detector.py"


FINAL_TARGETS.append(results_path(_LAYOUT.DETECTOR_EVAL))
