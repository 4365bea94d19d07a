"""Rule shard_chunk: one chunk's filtered rows -> its WebDataset tars and index (pmcflow.shard)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.shard import ShardSettings, shard_chunk  # noqa: E402

sm = snakemake  # noqa: F821
shard_chunk(
    ShardSettings.from_section(sm.params.shard), int(sm.params.seed), [sm.input.dataset], sm.output[0], chunk=sm.wildcards.chunk
)
