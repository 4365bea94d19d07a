"""Rule render_merge: merge the shards of one split into one COCO file (pmcflow.synth)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.synth.render import merge_shards  # noqa: E402

sm = snakemake  # noqa: F821
merge_shards(list(sm.input), sm.output)
