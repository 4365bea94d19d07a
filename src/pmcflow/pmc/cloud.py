"""The 2026 PMC Cloud layout (``s3://pmc-oa-opendata/PMC<id>.<v>/`` + ``metadata/PMC<id>.<v>.json``).

Three ways to enumerate article versions, all over a :class:`~pmcflow.pmc.transport.Transport`:

* :func:`enumerate_inventory` -- the bucket's S3 Inventory report (``manifest.json`` + gzipped CSV
  data files, or Parquet), newest manifest under ``inventory-reports/`` unless one is named;
* :func:`enumerate_list_objects` -- ListObjectsV2 over ``metadata/``;
* :func:`enumerate_pmcids` -- given PMCIDs, versions discovered with ``delimiter=/`` prefix listing.

:func:`parse_metadata` turns one ``metadata/PMC<id>.<v>.json`` into a :class:`CloudMetadata` with
the XML and media keys and their md5 checksums (from the ``?md5=`` query of each URL).
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import tempfile
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pmcflow.errors import RejectionError
from pmcflow.pmc.http import FetchError
from pmcflow.pmc.transport import CommonPrefix, ObjectInfo, Transport

BUCKET = "pmc-oa-opendata"
METADATA_KEY_RE = re.compile(r"^metadata/PMC(\d+)\.(\d+)\.json$")
VERSION_PREFIX_RE = re.compile(r"^PMC(\d+)\.(\d+)/$")
PMCID_SPEC_RE = re.compile(r"^\s*(?:PMC)?(\d+)(?:\.(\d+))?\s*$", re.IGNORECASE)
MD5_RE = re.compile(r"^[0-9a-fA-F]{32}$")
INVENTORY_PREFIX = "inventory-reports/"


@dataclass(frozen=True, order=True)
class ArticleRef:
    pmcid_num: int
    version: int
    key: str  # metadata key (cloud) or package path (ftp)

    @property
    def pmcid(self) -> str:
        return f"PMC{self.pmcid_num}"

    @property
    def uid(self) -> str:
        return f"PMC{self.pmcid_num}.{self.version}"


def metadata_key(pmcid_num: int, version: int) -> str:
    return f"metadata/PMC{pmcid_num}.{version}.json"


def refs_from_keys(keys: Iterable[str]) -> Iterator[ArticleRef]:
    """Article versions named by ``metadata/PMC<id>.<v>.json`` keys (other keys ignored)."""
    for key in keys:
        m = METADATA_KEY_RE.match(key)
        if m:
            yield ArticleRef(int(m.group(1)), int(m.group(2)), key)


# ----------------------------------------------------------------------------- list-objects
def enumerate_list_objects(transport: Transport, prefix: str = "metadata/") -> Iterator[ArticleRef]:
    keys = (e.key for e in transport.list(prefix) if isinstance(e, ObjectInfo))
    yield from refs_from_keys(keys)


# ---------------------------------------------------------------------------------- pmcids
@dataclass
class PmcidLookup:
    refs: list[ArticleRef] = field(default_factory=list)
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (item, reason, detail)


def read_pmcids_file(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]


def enumerate_pmcids(transport: Transport, specs: Iterable[str]) -> PmcidLookup:
    """Versions of each PMCID (``PMC123``, ``123`` or ``PMC123.2`` for one version)."""
    out = PmcidLookup()
    seen: set[tuple[int, int | None]] = set()
    for spec in specs:
        m = PMCID_SPEC_RE.match(spec)
        if not m:
            out.problems.append((spec, "invalid_pmcid", f"not a PMCID: {spec!r}"))
            continue
        num = int(m.group(1))
        want = int(m.group(2)) if m.group(2) else None
        if (num, want) in seen:
            continue
        seen.add((num, want))
        versions = []
        for e in transport.list(f"PMC{num}.", delimiter="/"):
            if isinstance(e, CommonPrefix):
                pm = VERSION_PREFIX_RE.match(e.prefix)
                if pm and int(pm.group(1)) == num:
                    versions.append(int(pm.group(2)))
        if want is not None:
            versions = [v for v in versions if v == want]
        if not versions:
            what = f"PMC{num}" + (f".{want}" if want is not None else "")
            out.problems.append((what, "unknown_pmcid", "no PMC<id>.<v>/ prefix in the bucket"))
            continue
        out.refs.extend(ArticleRef(num, v, metadata_key(num, v)) for v in sorted(versions))
    return out


# ------------------------------------------------------------------------------- inventory
@dataclass(frozen=True)
class InventoryManifest:
    key: str
    file_format: str
    columns: list[str]
    files: list[dict[str, Any]]
    raw: dict[str, Any]


def find_newest_manifest(transport: Transport, prefix: str = INVENTORY_PREFIX) -> str:
    """The newest ``.../<YYYY-MM-DDTHH-MMZ>/manifest.json`` under ``prefix``."""
    best: tuple[str, str] | None = None
    for e in transport.list(prefix):
        if isinstance(e, ObjectInfo) and e.key.endswith("/manifest.json"):
            stamp = e.key.rsplit("/", 2)[-2]
            if best is None or (stamp, e.key) > best:
                best = (stamp, e.key)
    if best is None:
        raise FetchError("not_found", f"no inventory manifest.json under {prefix!r}")
    return best[1]


def parse_manifest(key: str, data: bytes) -> InventoryManifest:
    try:
        raw = json.loads(data)
    except ValueError as e:
        raise FetchError("http_error", f"inventory manifest {key} is not JSON: {e}") from e
    if not isinstance(raw, dict) or not isinstance(raw.get("files"), list):
        raise FetchError("http_error", f"inventory manifest {key} has no files list")
    fmt = str(raw.get("fileFormat", "CSV")).upper()
    columns = [c.strip() for c in str(raw.get("fileSchema", "")).split(",") if c.strip()]
    if fmt == "CSV" and "Key" not in columns:
        raise FetchError("http_error", f"inventory manifest {key}: fileSchema has no Key column")
    return InventoryManifest(key, fmt, columns, raw["files"], raw)


def _manifest_key(transport: Transport, ref: str) -> str:
    base = getattr(transport, "base_url", None)
    if ref.startswith(("http://", "https://", "file:")):
        if base and ref.startswith(base + "/"):
            return urllib.parse.unquote(ref[len(base) + 1 :])
        if ref.startswith("s3://"):
            return ref.split("/", 3)[3]
        raise FetchError("bad_key", f"inventory manifest URL {ref} is not under the source base URL")
    if ref.startswith("s3://"):
        return ref.split("/", 3)[3]
    return ref.lstrip("/")


def iter_inventory_keys(transport: Transport, manifest: InventoryManifest, work_dir: Path) -> Iterator[str]:
    """Every object key in the inventory's data files (each verified against its MD5checksum)."""
    for i, f in enumerate(sorted(manifest.files, key=lambda f: str(f.get("key", "")))):
        key = str(f.get("key", ""))
        md5 = f.get("MD5checksum")
        size = f.get("size")
        local = work_dir / f"inventory-{i:05d}"
        transport.download(
            key,
            local,
            md5=md5 if isinstance(md5, str) and MD5_RE.match(md5) else None,
            size=int(size) if isinstance(size, int) else None,
        )
        try:
            if manifest.file_format == "CSV":
                col = manifest.columns.index("Key")
                opener = gzip.open if key.endswith(".gz") else open
                with opener(local, "rt", encoding="utf-8", newline="") as fh:
                    for row in csv.reader(fh):
                        if len(row) > col:
                            # S3 Inventory URL-encodes keys in CSV reports.
                            yield urllib.parse.unquote_plus(row[col])
            elif manifest.file_format == "PARQUET":
                import pyarrow.parquet as pq

                table = pq.read_table(local, columns=["key"])
                yield from (str(k) for k in table.column("key").to_pylist())
            else:
                raise FetchError("http_error", f"unsupported inventory fileFormat {manifest.file_format}")
        finally:
            local.unlink(missing_ok=True)


def enumerate_inventory(
    transport: Transport, manifest_ref: str = "", work_dir: str | Path | None = None
) -> tuple[str, Iterator[ArticleRef]]:
    """``(manifest key, article versions)`` from an S3 Inventory report."""
    key = _manifest_key(transport, manifest_ref) if manifest_ref else find_newest_manifest(transport)
    manifest = parse_manifest(key, transport.get(key))
    tmp = Path(tempfile.mkdtemp(prefix=".inventory-", dir=work_dir))

    def _gen() -> Iterator[ArticleRef]:
        try:
            yield from refs_from_keys(iter_inventory_keys(transport, manifest, tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    return key, _gen()


# -------------------------------------------------------------------------------- metadata
class MetadataError(RejectionError):
    """The article's metadata JSON is missing, malformed or inconsistent."""


@dataclass(frozen=True)
class CloudFile:
    key: str
    md5: str | None
    url: str  # as written in the metadata

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]


@dataclass
class CloudMetadata:
    pmcid: str
    version: int
    pmid: str | None
    doi: str | None
    citation: str | None
    title: str | None
    license_code: str | None
    is_retracted: bool | None
    xml: CloudFile
    media: list[CloudFile]
    raw: dict[str, Any]


REQUIRED_KEYS = ("pmcid", "version", "xml_url")


def parse_bool(v: Any) -> bool | None:
    """``"yes"/"no"``, ``true/false``, ``"true"/"false"``, 1/0 -> bool; anything else -> None."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("yes", "y", "true", "t", "1"):
            return True
        if s in ("no", "n", "false", "f", "0"):
            return False
    return None


def parse_object_url(url: str, bucket: str = BUCKET) -> CloudFile:
    """``s3://<bucket>/<key>?md5=<hex>`` (or the HTTPS form) -> key + md5."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "s3":
        if parsed.netloc != bucket:
            raise MetadataError("metadata_bad_url", f"URL outside bucket {bucket}: {url}")
        key = parsed.path.lstrip("/")
    elif parsed.scheme in ("http", "https"):
        host = parsed.netloc
        path = parsed.path.lstrip("/")
        if host.startswith(f"{bucket}."):
            key = path
        elif path.startswith(f"{bucket}/"):
            key = path[len(bucket) + 1 :]
        else:
            raise MetadataError("metadata_bad_url", f"URL outside bucket {bucket}: {url}")
    elif not parsed.scheme and not parsed.netloc:
        key = parsed.path.lstrip("/")
    else:
        raise MetadataError("metadata_bad_url", f"unsupported URL: {url}")
    key = urllib.parse.unquote(key)
    if not key or any(p in ("", ".", "..") for p in key.split("/")):
        raise MetadataError("metadata_bad_url", f"unsafe key in URL: {url}")
    md5s = urllib.parse.parse_qs(parsed.query).get("md5", [])
    md5 = md5s[0] if md5s else None
    if md5 is not None and not MD5_RE.match(md5):
        raise MetadataError("metadata_bad_url", f"md5 is not 32 hex digits: {url}")
    return CloudFile(key=key, md5=md5.lower() if md5 else None, url=url)


def _opt_str(v: Any) -> str | None:
    if v is None:
        return None
    s = str(v).strip()
    return s or None


def parse_metadata(data: bytes, bucket: str = BUCKET) -> CloudMetadata:
    """Parse ``metadata/PMC<id>.<v>.json``; raises :class:`MetadataError` with a reason code."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise MetadataError("metadata_invalid_json", str(e)[:300]) from e
    if not isinstance(raw, dict):
        raise MetadataError("metadata_invalid_json", f"top level is {type(raw).__name__}, not an object")
    missing = [k for k in REQUIRED_KEYS if raw.get(k) in (None, "")]
    if missing:
        raise MetadataError("metadata_missing_keys", "missing " + ", ".join(missing))
    pm = PMCID_SPEC_RE.match(str(raw["pmcid"]))
    if not pm:
        raise MetadataError("metadata_invalid_json", f"bad pmcid {raw['pmcid']!r}")
    try:
        version = int(raw["version"])
    except (TypeError, ValueError) as e:
        raise MetadataError("metadata_invalid_json", f"bad version {raw['version']!r}") from e
    media_urls = raw.get("media_urls") or []
    if not isinstance(media_urls, list) or not all(isinstance(u, str) for u in media_urls):
        raise MetadataError("metadata_invalid_json", "media_urls is not a list of strings")
    xml = parse_object_url(str(raw["xml_url"]), bucket)
    media = [parse_object_url(u, bucket) for u in media_urls]
    pmid = _opt_str(raw.get("pmid"))
    return CloudMetadata(
        pmcid=f"PMC{int(pm.group(1))}",
        version=version,
        pmid=pmid,
        doi=_opt_str(raw.get("doi")),
        citation=_opt_str(raw.get("citation")),
        title=_opt_str(raw.get("title")),
        license_code=_opt_str(raw.get("license_code")),
        is_retracted=parse_bool(raw.get("is_retracted")),
        xml=xml,
        media=media,
        raw=raw,
    )


def metadata_to_json(raw: dict[str, Any]) -> str:
    return json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
