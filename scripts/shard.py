"""Rule shard: filtered dataset -> WebDataset tars, index, sizes.json, manifest (pmcflow.shard)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.shard import shard_dataset  # noqa: E402

sm = snakemake  # noqa: F821
shard_dataset(dict(sm.params.shard), int(sm.params.seed), list(sm.input.dataset), sm.output[0])
