"""Rule train_encoder: open_clip training on the shards (pmcflow.encoders.train)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.encoders.train import train_encoder  # noqa: E402

sm = snakemake  # noqa: F821
# `run` names the output folder (a workflow key); the rest is the trainer's configuration.
settings = {k: v for k, v in dict(sm.params.train).items() if k != "run"}
train_encoder(settings, int(sm.params.seed), sm.input.shards, sm.output[0])
