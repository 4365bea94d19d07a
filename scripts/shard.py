"""Rule shard: the chunks' shards -> one folder with sizes.json, index, manifest (pmcflow.shard)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.shard import ShardSettings, assemble_shards  # noqa: E402

sm = snakemake  # noqa: F821
assemble_shards(
    ShardSettings.from_section(sm.params.shard), int(sm.params.seed), list(sm.input.parts), list(sm.input.dataset), sm.output[0]
)
