"""The dataset card written beside the shards: ``README.md`` with a Hugging Face YAML header.

``datasets.load_dataset("<shards dir>")`` reads the header: one ``configs`` entry maps each split
to its tars, and ``dataset_info.features`` declares every column with its type. Inferring them
from the first samples fails on our shards (a text field that is null in every sample of the first
shard is inferred as ``null`` and a later string cannot be cast), so the types come from the
dataset table's Arrow schema, the one every sample's ``.json`` is written from.

The body says what a reader needs before using the data: counts per split, the licence mix (each
sample keeps its article's licence; filter by ``license_code``), the modality mix, the fields,
how the text was composed, provenance and citation.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import yaml

from pmcflow import schema as S

# libyaml's emitter when present: the same bytes as the Python one for the card's plain types
# (tested), four times faster.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

CITATION = """\
Open-PMC-18M (the recipe this dataset follows):
  Negin Baghbanzadeh, Mohammed Saidul Islam, Sajad Ashkezari, Elham Dolatabadi, Arash Afkanpour.
  "Open-PMC-18M: A High-Fidelity Large Scale Medical Dataset for Multimodal Representation
  Learning." Vector Institute.
Source articles: the PubMed Central Open Access Subset (https://pmc.ncbi.nlm.nih.gov/tools/openftlist/);
cite each article you use (doi / pmid / pmcid are in every sample's json)."""

# Keys the shard writer adds to each row's columns in the sample's .json (pmcflow.shard).
SAMPLE_EXTRAS: tuple[tuple[str, pa.DataType], ...] = (
    ("key", pa.string()),
    ("split", pa.string()),
    ("shard", pa.string()),
    ("text", pa.string()),
    ("text_fields", pa.list_(pa.string())),
    ("image_ext", pa.string()),
    ("image_sha256", pa.string()),
    ("image_source_format", pa.string()),
    ("image_reencoded", pa.bool_()),
    ("image_width", pa.int64()),
    ("image_height", pa.int64()),
)

_SCALARS = {
    pa.string(): "string",
    pa.large_string(): "string",
    pa.bool_(): "bool",
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.float16(): "float16",
    pa.float32(): "float32",
    pa.float64(): "float64",
}


def sample_json_schema(table_schema: pa.Schema) -> pa.Schema:
    """The Arrow schema of a sample's ``.json``: the dataset columns plus the writer's keys."""
    fields = {f.name: f.type for f in table_schema}
    fields.update(dict(SAMPLE_EXTRAS))
    return pa.schema([pa.field(k, fields[k]) for k in sorted(fields)])


def _feature(name: str | None, typ: pa.DataType) -> dict[str, Any]:
    out: dict[str, Any] = {} if name is None else {"name": name}
    if typ in _SCALARS:
        out["dtype"] = _SCALARS[typ]
    elif pa.types.is_timestamp(typ) or pa.types.is_date(typ):
        out["dtype"] = "string"  # written to JSON as ISO text
    elif pa.types.is_fixed_size_list(typ) or pa.types.is_list(typ) or pa.types.is_large_list(typ):
        inner = _feature(None, typ.value_type)
        if set(inner) != {"dtype"}:
            raise ValueError(f"{name}: nested list types are not supported in the card")
        out["list"] = inner["dtype"]
        if pa.types.is_fixed_size_list(typ):
            out["length"] = typ.list_size
    elif pa.types.is_struct(typ):
        out["struct"] = [_feature(f.name, f.type) for f in typ]
    else:
        raise ValueError(f"{name}: no dataset-card type for Arrow type {typ}")
    return out


def hf_features(json_schema: pa.Schema, image_exts: Sequence[str]) -> list[dict[str, Any]]:
    """``dataset_info.features`` for Hugging Face's webdataset builder (columns = member extensions)."""
    feats: list[dict[str, Any]] = [
        {"name": "__key__", "dtype": "string"},
        {"name": "__url__", "dtype": "string"},
    ]
    feats += [{"name": ext, "dtype": "image"} for ext in sorted(set(image_exts))]
    # Then the sample's other members (pmcflow.schema.SAMPLE_MEMBERS): json, txt, <field>.txt ...
    for member in S.SAMPLE_MEMBERS:
        if member == "json":
            feats.append({"name": "json", "struct": [_feature(f.name, f.type) for f in json_schema]})
        else:
            feats.append({"name": member, "dtype": "string"})
    return feats


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")):
        if n < limit:
            return label
    return "100M<n<1B"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


# The columns of the shard index (pmcflow.schema.SHARD_INDEX) that dataset_card reads from its
# rows: pmcflow.shard hands it only these.
CARD_INDEX_COLUMNS: tuple[str, ...] = ("license_code", "modality")


def dataset_card(
    manifest: Mapping[str, Any],
    index_rows: Sequence[Mapping[str, Any]],
    json_schema: pa.Schema,
    *,
    name: str = "pmcflow dataset",
) -> str:
    """The card's text. Deterministic: the same shards give the same bytes.  Of ``index_rows`` it
    reads the :data:`CARD_INDEX_COLUMNS`."""
    splits = [n for n, s in manifest["splits"].items() if s["n_samples"] > 0]
    exts = sorted(manifest.get("image_formats") or {})
    n = int(manifest["n_samples"])
    header = {
        "pretty_name": name,
        "license": "other",
        "task_categories": ["zero-shot-image-classification", "image-to-text"],
        "tags": ["biomedical", "pubmed-central", "subfigures", "webdataset", "pmcflow"],
        "size_categories": [_size_category(n)],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s, "path": f"{s}/{s}-*.tar"} for s in splits],
            }
        ],
        "dataset_info": {
            "features": hf_features(json_schema, exts),
            "splits": [
                {
                    "name": s,
                    "num_bytes": sum(int(sh["size"]) for sh in manifest["splits"][s]["shards"]),
                    "num_examples": manifest["splits"][s]["n_samples"],
                }
                for s in splits
            ],
        },
    }
    licences = Counter(str(r.get("license_code") or "unknown") for r in index_rows)
    modalities = Counter(str(r.get("modality") or "unknown") for r in index_rows)
    cfg = manifest.get("config") or {}
    lines = ["---", yaml.dump(header, Dumper=_DUMPER, sort_keys=False, allow_unicode=True).rstrip("\n"), "---", "", f"# {name}", ""]
    lines += [
        "Subfigure-level biomedical image-text pairs from PubMed Central Open Access articles, built",
        "by pmcflow following the Open-PMC-18M recipe: compound figures",
        "decomposed into subfigures, each paired with its subcaption and a summary of the article",
        "text that cites it, filtered for licence, retraction, modality, size and near-duplicates.",
        "",
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        'ds = load_dataset("path/to/this/folder")           # splits and features from this card',
        "```",
        "",
        "The tars are plain WebDataset shards (`<key>.<image ext>`, `<key>.json`, `<key>.txt`, and one",
        f"`<key>.<field>.txt` per text field: {', '.join(f'`{S.text_member(f)}`' for f in S.SAMPLE_TEXT_FIELDS)}):",
        "`webdataset` and `open_clip_train` read them as they are (`<split>/sizes.json` holds the",
        "sample counts open_clip asks for); `index.parquet` lists every sample with its shard.",
        "",
        "## Splits",
        "",
        *_table(
            ["split", "samples", "shards", "articles"],
            [
                [s, manifest["splits"][s]["n_samples"], manifest["splits"][s]["n_shards"],
                 (manifest.get("n_articles") or {}).get(s, "")]
                for s in manifest["splits"]
            ],
        ),
        "",
        f"Splits are assigned by `{cfg.get('split_key', 'pmcid')}` (seeded hash), so all samples that share",
        "it land in the same split.",
        "",
        "## Licences",
        "",
        "Every sample keeps its article's licence (`json.license_code`). The mix is not one licence:",
        "select the samples your use allows.",
        "",
        *_table(["license_code", "samples"], sorted(licences.items(), key=lambda kv: (-kv[1], kv[0]))),
        "",
        "## Modalities",
        "",
        *_table(["modality", "samples"], sorted(modalities.items(), key=lambda kv: (-kv[1], kv[0]))),
        "",
        "## Text",
        "",
        f"`txt` is `json.text`: the fields {list(cfg.get('text_fields') or [])} joined with "
        f"{json.dumps(cfg.get('text_separator', ' '))} (a field equal to the previous one is not repeated).",
        "Each text field is also a member of its own in every sample, cleaned and whitespace-collapsed",
        "as it is for `txt` and empty when the field is null:",
        "",
        *_table(
            ["member", "field"],
            [[f"`{S.text_member(f)}`", f"`{f}`"] for f in S.SAMPLE_TEXT_FIELDS],
        ),
        "",
        "so another composition needs no re-sharding: join the members you want (pmcflow's",
        "`train.text_fields` does it at load time). The raw fields are in the json as well.",
        "",
        "## Fields of `json`",
        "",
        *_table(["field", "type"], [[f"`{f.name}`", str(f.type)] for f in json_schema]),
        "",
        "## Provenance",
        "",
        f"Shard seed {manifest.get('seed')}; image formats {dict(manifest.get('image_formats') or {})}.",
        "Each sample's json records its article (`pmcid`, `doi`, `pmid`), figure, detector box and",
        "score, and which model or rule produced its subcaption and summary.",
        "",
        "## Citation",
        "",
        "```text",
        CITATION,
        "```",
        "",
    ]
    return "\n".join(lines)
