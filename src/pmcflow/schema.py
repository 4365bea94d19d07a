"""Every table pmcflow writes, defined once.

Each stage writes Parquet files whose schema is one of the constants below and a small
``counts.json`` (see :mod:`pmcflow.tables`).  Column names are the contract between stages,
the reports and downstream users: add columns freely, never rename or retype one silently.

Identifiers used across tables
------------------------------
``pmcid``        ``"PMC1234567"`` (always with the ``PMC`` prefix)
``version``      article version in the PMC Cloud layout (1, 2, ...); legacy sources use 1
``article_uid``  ``"PMC1234567.1"`` -- pmcid + version, the unit of acquisition
``figure_uid``   ``"PMC1234567.1/<figure_id>"``
``mention_uid``  ``"PMC1234567.1/m<ordinal>"``
``chunk``        the chunk id the article belongs to (see :mod:`pmcflow.chunks`)
"""

from __future__ import annotations

import pyarrow as pa

# --------------------------------------------------------------------------------------
# Rejections: one shared table shape for every stage.  Nothing is dropped silently.
# --------------------------------------------------------------------------------------
REJECTIONS = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),  # acquire, parse, ...
        pa.field("chunk", pa.string()),
        pa.field("item_id", pa.string(), nullable=False),  # article_uid, figure_uid, key, ...
        pa.field("pmcid", pa.string()),
        pa.field("reason", pa.string(), nullable=False),  # short machine-readable code
        pa.field("detail", pa.string()),  # human-readable explanation
    ]
)

# --------------------------------------------------------------------------------------
# Acquire
# --------------------------------------------------------------------------------------
# One row per article version enumerated from the source (before per-article checks).
LISTING = pa.schema(
    [
        pa.field("article_uid", pa.string(), nullable=False),
        pa.field("pmcid", pa.string(), nullable=False),
        pa.field("pmcid_num", pa.int64(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # cloud | ftp | local
        pa.field("key", pa.string(), nullable=False),  # metadata key or package path in the source
        pa.field("chunk", pa.string(), nullable=False),
        # Known at listing time for some sources (legacy file lists), else null:
        pa.field("license_code", pa.string()),
        pa.field("is_retracted", pa.bool_()),
        pa.field("pmid", pa.string()),
        pa.field("citation", pa.string()),
        pa.field("last_updated", pa.string()),
    ]
)

MEDIA_ITEM = pa.struct(
    [
        pa.field("name", pa.string()),  # file name as in the source (e.g. "pone.0046493.g001.jpg")
        pa.field("path", pa.string()),  # local path, relative to the workflow directory
        pa.field("md5", pa.string()),
        pa.field("size", pa.int64()),
    ]
)

# One row per article version downloaded and verified.
ACQUIRED = pa.schema(
    [
        pa.field("article_uid", pa.string(), nullable=False),
        pa.field("pmcid", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("source_url", pa.string()),  # where the XML came from
        pa.field("pmid", pa.string()),
        pa.field("doi", pa.string()),
        pa.field("citation", pa.string()),
        pa.field("license_code", pa.string()),
        pa.field("is_retracted", pa.bool_()),
        pa.field("xml_path", pa.string(), nullable=False),
        pa.field("xml_md5", pa.string()),
        pa.field("media", pa.list_(MEDIA_ITEM)),
        pa.field("metadata_json", pa.string()),  # the source's metadata record, verbatim
    ]
)

# --------------------------------------------------------------------------------------
# Parse (JATS)
# --------------------------------------------------------------------------------------
ARTICLES = pa.schema(
    [
        pa.field("article_uid", pa.string(), nullable=False),
        pa.field("pmcid", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),
        pa.field("pmid", pa.string()),
        pa.field("doi", pa.string()),
        pa.field("title", pa.string()),
        pa.field("journal", pa.string()),
        pa.field("article_type", pa.string()),
        pa.field("pub_date", pa.string()),  # ISO 8601, as precise as the XML allows (YYYY[-MM[-DD]])
        pa.field("year", pa.int32()),
        pa.field("license_code", pa.string()),  # normalised code ("CC BY", "CC0", ...)
        pa.field("license_url", pa.string()),
        pa.field("is_retracted", pa.bool_()),
        pa.field("retraction_source", pa.string()),  # metadata | jats-article-type | jats-related-article | title | null
        pa.field("n_figures", pa.int32()),
        pa.field("n_mentions", pa.int32()),
        pa.field("xml_path", pa.string()),
    ]
)

FIGURES = pa.schema(
    [
        pa.field("figure_uid", pa.string(), nullable=False),
        pa.field("article_uid", pa.string(), nullable=False),
        pa.field("pmcid", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),
        pa.field("figure_id", pa.string(), nullable=False),  # XML id, or "fig-auto-<n>" when absent
        pa.field("figure_id_synthetic", pa.bool_()),
        pa.field("ordinal", pa.int32()),  # position of the figure in the article (0-based)
        pa.field("label", pa.string()),
        pa.field("caption_title", pa.string()),
        pa.field("caption", pa.string()),  # title + paragraphs, whitespace-normalised
        pa.field("fig_group_id", pa.string()),
        pa.field("parent_figure_id", pa.string()),  # e.g. eLife figure supplements
        pa.field("graphics", pa.list_(pa.string())),  # xlink:href values as written
        pa.field("graphic_paths", pa.list_(pa.string())),  # resolved local files (same order)
        pa.field("n_mentions", pa.int32()),
    ]
)

MENTIONS = pa.schema(
    [
        pa.field("mention_uid", pa.string(), nullable=False),
        pa.field("article_uid", pa.string(), nullable=False),
        pa.field("pmcid", pa.string(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32()),
        pa.field("text", pa.string()),  # the xref's own text, e.g. "Figure 2B"
        pa.field("figure_ids", pa.list_(pa.string())),  # rid list
        pa.field("figure_uids", pa.list_(pa.string())),
        pa.field("panels", pa.list_(pa.string())),  # panel letters named, lower-case ("b", "c")
        pa.field("paragraph_index", pa.int32()),
        pa.field("paragraph", pa.string()),  # the enclosing paragraph's text
        pa.field("section", pa.string()),  # title of the enclosing section, if any
    ]
)

# --------------------------------------------------------------------------------------
# Decompose: one row per subfigure (a figure judged single-panel gives one row covering it)
# --------------------------------------------------------------------------------------
BBOX = pa.list_(pa.float32(), 4)  # [x, y, w, h] in pixels of the parent image

SUBFIGURES = pa.schema(
    [
        pa.field("subfigure_uid", pa.string(), nullable=False),  # <figure_uid>/s<index>
        pa.field("figure_uid", pa.string(), nullable=False),
        pa.field("article_uid", pa.string(), nullable=False),
        pa.field("pmcid", pa.string(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("chunk", pa.string(), nullable=False),
        pa.field("graphic_index", pa.int32()),  # which graphic of the figure (usually 0)
        pa.field("subfigure_index", pa.int32()),  # reading order (rows, then columns)
        pa.field("image_path", pa.string()),  # the parent figure image
        pa.field("image_width", pa.int32()),
        pa.field("image_height", pa.int32()),
        pa.field("bbox", BBOX),
        pa.field("score", pa.float32()),
        pa.field("is_single_panel", pa.bool_()),
        pa.field("panel_label", pa.string()),  # lower-case letter ("a"...) or caption place ("left"), null if unknown
        pa.field("label_source", pa.string()),  # detected-label | reading-order | inherited | caption-position | single
        pa.field("detector", pa.string()),  # backend + model name
        pa.field("detector_checkpoint_sha256", pa.string()),
        pa.field("crop_path", pa.string()),
        pa.field("crop_format", pa.string()),  # png | jpeg-q95 ...
        pa.field("crop_width", pa.int32()),
        pa.field("crop_height", pa.int32()),
        pa.field("crop_sha256", pa.string()),  # of the crop file's bytes: readers check what they point to
    ]
)

# --------------------------------------------------------------------------------------
# Enrich: subfigure + its text, with provenance of every generated field
# --------------------------------------------------------------------------------------
# The subcaption job's output (rule enrich_subcaptions): one row per subfigure that got a
# subcaption, the columns of the enriched table it fills; the summary job completes the rows.
SUBCAPTION_COLUMNS = (
    "subcaption",
    "shared_text",
    "subcaption_source",
    "subcaption_reason",
    "subcaption_model",
    "subcaption_prompt_sha256",
    "subcaption_sampling",
)
ENRICHED = pa.schema(
    list(SUBFIGURES)
    + [
        pa.field("doi", pa.string()),
        pa.field("pmid", pa.string()),
        pa.field("license_code", pa.string()),
        pa.field("is_retracted", pa.bool_()),
        pa.field("figure_label", pa.string()),
        pa.field("caption", pa.string()),
        pa.field("subcaption", pa.string()),
        pa.field("shared_text", pa.string()),  # caption title + lead shared by every panel
        pa.field("subcaption_source", pa.string()),  # rules | vlm | fallback-full
        pa.field("subcaption_reason", pa.string()),  # why a fallback was used, else null
        pa.field("subcaption_model", pa.string()),  # model id@revision, or "rules"
        pa.field("subcaption_prompt_sha256", pa.string()),
        pa.field("subcaption_sampling", pa.string()),  # JSON of the sampling parameters (LLM only)
        pa.field("summary", pa.string()),
        pa.field("summary_source", pa.string()),  # extractive | llm | none
        pa.field("summary_reason", pa.string()),
        pa.field("summary_model", pa.string()),
        pa.field("summary_prompt_sha256", pa.string()),
        pa.field("summary_sampling", pa.string()),
        pa.field("mention_uids", pa.list_(pa.string())),  # the in-text references used
    ]
)

# --------------------------------------------------------------------------------------
# Filter: the enriched rows that survive, with the evidence used to keep them
# --------------------------------------------------------------------------------------
DATASET = pa.schema(
    list(ENRICHED)
    + [
        pa.field("modality", pa.string()),  # predicted modality class
        pa.field("modality_score", pa.float32()),
        pa.field("modality_backend", pa.string()),  # the classifier: timm:<model>@<file>#<sha> | openclip:<model...>
        pa.field("phash", pa.string()),  # 64-bit perceptual hash, hex
    ]
)

# --------------------------------------------------------------------------------------
# Filter steps: per-chunk verdicts and hashes (phash_chunk), corpus-wide duplicates
# --------------------------------------------------------------------------------------
PHASHES = pa.schema(
    [
        pa.field("subfigure_uid", pa.string(), nullable=False),
        pa.field("chunk", pa.string()),
        pa.field("pmcid", pa.string()),
        pa.field("phash", pa.string()),  # 16 hex digits; null when the crop was not decoded
        pa.field("modality", pa.string()),
        pa.field("modality_score", pa.float32()),
        pa.field("modality_backend", pa.string()),
        pa.field("reason", pa.string()),  # first failing check 1-6, null = candidate for the dataset
        pa.field("detail", pa.string()),
    ]
)

DUPLICATES = pa.schema(
    [
        pa.field("subfigure_uid", pa.string(), nullable=False),
        pa.field("duplicate_of", pa.string(), nullable=False),  # the cluster's representative
        pa.field("distance", pa.int32(), nullable=False),  # Hamming distance to it
        pa.field("chunk", pa.string()),
        pa.field("duplicate_of_chunk", pa.string()),
    ]
)

# --------------------------------------------------------------------------------------
# Shard index: one row per WebDataset sample
# --------------------------------------------------------------------------------------
SHARD_INDEX = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),  # __key__ inside the tar
        pa.field("split", pa.string(), nullable=False),  # train | val | test
        pa.field("shard", pa.string(), nullable=False),  # e.g. train-000003.tar
        pa.field("subfigure_uid", pa.string(), nullable=False),
        pa.field("article_uid", pa.string(), nullable=False),
        pa.field("pmcid", pa.string(), nullable=False),
        pa.field("image_ext", pa.string()),  # jpg | png
        pa.field("image_sha256", pa.string()),
        pa.field("text", pa.string()),  # the training text written to .txt
        pa.field("license_code", pa.string()),
        pa.field("modality", pa.string()),
    ]
)

# --------------------------------------------------------------------------------------
# WebDataset sample: the members of every sample in every shard (pmcflow.shard)
# --------------------------------------------------------------------------------------
# DATASET text columns written each to its own member ``<key>.<field>.txt``: cleaned and
# whitespace-collapsed as ``pmcflow.shard.compose_text`` does with that one field, "" when null.
# Every ``shard.text_fields`` choice that is a DATASET column is here (``caption_title`` is a
# FIGURES column only), so any composition can be rebuilt at load time (``train.text_fields``).
SAMPLE_TEXT_FIELDS: tuple[str, ...] = ("caption", "shared_text", "subcaption", "summary", "figure_label")
# Image members: exactly one per sample, its extension from the bytes' format (Pillow format name
# -> the WebDataset extension open_clip reads, "jpg;png;jpeg;webp"); other formats are re-encoded.
SAMPLE_IMAGE_FORMATS: dict[str, str] = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp"}


def text_member(field_name: str) -> str:
    """The member extension of a text field: ``subcaption`` -> ``subcaption.txt``."""
    if field_name not in SAMPLE_TEXT_FIELDS:
        raise KeyError(f"{field_name!r} has no sample member; known: {SAMPLE_TEXT_FIELDS}")
    return f"{field_name}.txt"


# The other members of a sample, in the order they are written after the image:
# ``json`` (the DATASET row + the writer's keys), ``txt`` (the default composed text, what
# open_clip reads), then one ``<field>.txt`` per SAMPLE_TEXT_FIELDS.
SAMPLE_MEMBERS: tuple[str, ...] = ("json", "txt", *(text_member(f) for f in SAMPLE_TEXT_FIELDS))


ALL_TABLES: dict[str, pa.Schema] = {
    "rejections": REJECTIONS,
    "listing": LISTING,
    "acquired": ACQUIRED,
    "articles": ARTICLES,
    "figures": FIGURES,
    "mentions": MENTIONS,
    "subfigures": SUBFIGURES,
    "enriched": ENRICHED,
    "dataset": DATASET,
    "phashes": PHASHES,
    "duplicates": DUPLICATES,
    "shard_index": SHARD_INDEX,
}


SUBCAPTIONS = pa.schema(
    [pa.field("subfigure_uid", pa.string(), nullable=False)] + [ENRICHED.field(c) for c in SUBCAPTION_COLUMNS]
)
