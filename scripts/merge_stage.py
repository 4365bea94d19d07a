"""Aggregate rules: merge one stage's per-chunk counts and rejections (pmcflow.workflow)."""
from pmcflow import schema
from pmcflow.workflow import concat_parquet, merge_stage, start_rule_log

sm = snakemake  # noqa: F821 - injected by Snakemake
start_rule_log(sm)

upstream = {}
if "listing_counts" in sm.input.keys():
    upstream["listing"] = sm.input.listing_counts
rejections = list(sm.input.rejections)
if "listing_rejections" in sm.input.keys():
    rejections.append(sm.input.listing_rejections)
merge_stage(sm.params.stage, sm.input.counts, rejections, sm.output.counts, sm.output.rejections, upstream)

# Item-level rejections that do not reject the article (e.g. one media file of an article).
if "media_rejections" in sm.output.keys():
    concat_parquet(sm.input.media_rejections, schema.REJECTIONS, sm.output.media_rejections)
# Articles waiting for a retry after a transient failure (acquisition only).
if "pending" in sm.output.keys():
    concat_parquet(sm.input.pending, schema.REJECTIONS, sm.output.pending)
