"""Aggregate rules: merge one stage's per-chunk counts and rejections (pmcflow.workflow)."""
from pmcflow import schema
from pmcflow.workflow import concat_parquet, log_to_file, merge_stage

sm = snakemake  # noqa: F821 - injected by Snakemake
log_to_file(sm.log[0])

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
