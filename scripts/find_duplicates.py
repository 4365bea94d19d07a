"""Rule find_duplicates: corpus-wide near-duplicate clusters (pmcflow.filter)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.filter.checks import FilterSettings  # noqa: E402
from pmcflow.filter.stage import find_duplicates  # noqa: E402

sm = snakemake  # noqa: F821
# The rule passes filter.dedup only (the one part it reads): the rest of the section takes the
# schema's defaults here and is not read.
find_duplicates(FilterSettings.from_section({"dedup": sm.params.dedup}), list(sm.input), sm.output[0])
