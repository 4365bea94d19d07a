"""Rule list_articles: enumerate article versions and assign chunks (pmcflow.pmc.stage)."""
from pmcflow.workflow import params_config, start_rule_log

start_rule_log(snakemake)  # noqa: F821 - injected by Snakemake

from pmcflow.pmc.stage import list_articles  # noqa: E402

list_articles(params_config(snakemake.params, "source", "select", "chunking", "http"), snakemake.output)  # noqa: F821
