"""Rule acquire_chunk: download and verify one chunk's articles (pmcflow.pmc.stage)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake, snakemake.log.log)  # noqa: F821 - injected by Snakemake

from pmcflow.pmc.settings import PmcSettings  # noqa: E402
from pmcflow.pmc.stage import acquire_chunk  # noqa: E402

sm = snakemake  # noqa: F821
acquire_chunk(
    PmcSettings.from_sections(sm.params.source, sm.params.select, sm.params.http),
    sm.wildcards.chunk,
    sm.input.listing,
    sm.output,
    sm.params.cache,
    transfer_path=sm.log.transfer,
)
