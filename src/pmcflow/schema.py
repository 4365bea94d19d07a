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
        pa.field("retraction_source", pa.string()),  # metadata | jats-related-article | title | null
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

ALL_TABLES: dict[str, pa.Schema] = {
    "rejections": REJECTIONS,
    "listing": LISTING,
    "acquired": ACQUIRED,
    "articles": ARTICLES,
    "figures": FIGURES,
    "mentions": MENTIONS,
}
