"""Rule train_encoder: open_clip training on the shards (pmcflow.encoders.train)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.encoders.train import TrainSettings, train_encoder  # noqa: E402

sm = snakemake  # noqa: F821
# The run's settings: the train section less the workflow keys (run, variants), with its variant's
# keys applied (pmcflow.runs.run_settings, in the rule's params).
train_encoder(TrainSettings.from_section(sm.params.train), int(sm.params.seed), sm.input.shards, sm.output[0])
