"""Rule train_encoder: open_clip training on the shards (pmcflow.encoders.train)."""
from pmcflow.workflow import log_to_file

log_to_file(snakemake.log[0])  # noqa: F821 - injected by Snakemake

from pmcflow.encoders.train import train_encoder  # noqa: E402

sm = snakemake  # noqa: F821
train_encoder(dict(sm.params.train), int(sm.params.seed), sm.input.shards, sm.output[0])
