"""Rule list_articles: enumerate article versions and assign chunks (pmcflow.pmc.stage)."""
from pmcflow.workflow import start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.pmc.settings import PmcSettings  # noqa: E402
from pmcflow.pmc.stage import list_articles  # noqa: E402

sm = snakemake  # noqa: F821
list_articles(PmcSettings.from_sections(sm.params.source, sm.params.select, sm.params.http, sm.params.chunking), sm.output)
