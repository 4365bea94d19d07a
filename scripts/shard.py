"""Rule shard: filtered dataset -> WebDataset tars, index, sizes.json, manifest (pmcflow.shard)."""
from pmcflow.workflow import log_to_file

log_to_file(snakemake.log[0])  # noqa: F821 - injected by Snakemake

from pmcflow.shard import shard_dataset  # noqa: E402

sm = snakemake  # noqa: F821
shard_dataset(dict(sm.params.shard), int(sm.params.seed), list(sm.input.dataset), sm.output[0])
