"""Rule find_duplicates: corpus-wide near-duplicate clusters (pmcflow.filter)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.filter.stage import find_duplicates  # noqa: E402

sm = snakemake  # noqa: F821
find_duplicates({"filter": {"dedup": dict(sm.params.dedup)}}, list(sm.input), sm.output[0])
