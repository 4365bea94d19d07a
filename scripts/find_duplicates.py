"""Rule find_duplicates: corpus-wide near-duplicate clusters (pmcflow.filter)."""
from pmcflow.workflow import log_to_file

log_to_file(snakemake.log[0])  # noqa: F821 - injected by Snakemake

from pmcflow.filter.stage import find_duplicates  # noqa: E402

sm = snakemake  # noqa: F821
find_duplicates({"filter": {"dedup": dict(sm.params.dedup)}}, list(sm.input), sm.output[0])
