"""Write PMC source trees (cloud bucket layout, legacy FTP layout) from article files.

Used by the tests, the benchmark and anyone building a local mirror or demo corpus: the trees have
exactly the shapes :mod:`pmcflow.pmc.cloud` and :mod:`pmcflow.pmc.ftp` read (see
``docs/pmc-formats.md``).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import tarfile
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUCKET = "pmc-oa-opendata"


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


@dataclass
class CloudArticle:
    pmcid_num: int
    version: int
    xml: bytes
    media: dict[str, bytes] = field(default_factory=dict)
    license_code: str = "CC BY"
    is_retracted: Any = "no"  # "yes"/"no" or a bool: both occur in the wild
    citation: str = ""
    pmid: str | None = None
    doi: str | None = None
    title: str = ""

    @property
    def uid(self) -> str:
        return f"PMC{self.pmcid_num}.{self.version}"

    def s3_url(self, name: str, data: bytes) -> str:
        return f"s3://{BUCKET}/{self.uid}/{name}?md5={md5_hex(data)}"

    def metadata(self) -> dict[str, Any]:
        xml_name = f"{self.uid}.xml"
        return {
            "pmcid": f"PMC{self.pmcid_num}",
            "version": self.version,
            "pmid": self.pmid,
            "doi": self.doi,
            "title": self.title,
            "citation": self.citation,
            "license_code": self.license_code,
            "is_pmc_openaccess": "yes",
            "is_manuscript": "no",
            "is_historical_ocr": "no",
            "is_retracted": self.is_retracted,
            "xml_url": self.s3_url(xml_name, self.xml),
            "media_urls": [self.s3_url(n, d) for n, d in sorted(self.media.items())],
        }


def write_cloud_article(root: str | Path, art: CloudArticle, metadata: bytes | None = None) -> dict[str, Any]:
    """Write ``PMC<id>.<v>/`` (xml, json, media) and ``metadata/PMC<id>.<v>.json``.

    ``metadata`` overrides the JSON bytes written (to build malformed inputs).
    """
    root = Path(root)
    d = root / art.uid
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{art.uid}.xml").write_bytes(art.xml)
    for name, data in art.media.items():
        (d / name).write_bytes(data)
    meta = art.metadata()
    blob = metadata if metadata is not None else json.dumps(meta, indent=1).encode()
    (d / f"{art.uid}.json").write_bytes(blob)
    (root / "metadata").mkdir(exist_ok=True)
    (root / "metadata" / f"{art.uid}.json").write_bytes(blob)
    return meta


def all_keys(root: str | Path) -> list[str]:
    root = Path(root)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def write_inventory(
    root: str | Path,
    stamp: str = "2026-04-14T01-00Z",
    keys: Sequence[str] | None = None,
    n_files: int = 2,
    config_id: str = "all",
) -> str:
    """Write an S3 Inventory report (CSV, gzipped) of ``keys`` (default: every file under root).

    Returns the manifest key, ``inventory-reports/<bucket>/<config>/<stamp>/manifest.json``.
    """
    root = Path(root)
    keys = [k for k in (all_keys(root) if keys is None else keys) if not k.startswith("inventory-reports/")]
    base = f"inventory-reports/{BUCKET}/{config_id}"
    files = []
    per = max(1, -(-len(keys) // n_files))
    for i in range(0, max(len(keys), 1), per):
        buf = io.StringIO()
        w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
        for k in keys[i : i + per]:
            p = root / k
            data = p.read_bytes() if p.is_file() else b""
            w.writerow([BUCKET, urllib.parse.quote_plus(k, safe="/"), len(data), "2026-04-13T00:00:00.000Z", md5_hex(data)])
        gz = gzip.compress(buf.getvalue().encode(), mtime=0)
        dkey = f"{base}/data/{stamp}-{i // per:04d}.csv.gz"
        (root / dkey).parent.mkdir(parents=True, exist_ok=True)
        (root / dkey).write_bytes(gz)
        files.append({"key": dkey, "size": len(gz), "MD5checksum": md5_hex(gz)})
    manifest = {
        "sourceBucket": BUCKET,
        "destinationBucket": f"arn:aws:s3:::{BUCKET}",
        "version": "2016-11-30",
        "creationTimestamp": "1776128400000",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag",
        "files": files,
    }
    mkey = f"{base}/{stamp}/manifest.json"
    (root / mkey).parent.mkdir(parents=True, exist_ok=True)
    (root / mkey).write_text(json.dumps(manifest, indent=1))
    return mkey


# ------------------------------------------------------------------------------------ legacy
def package_path(pmcid_num: int) -> str:
    """``oa_package/xx/yy/PMC<n>.tar.gz`` with two hex levels derived from the PMCID."""
    h = hashlib.sha1(str(pmcid_num).encode()).hexdigest()
    return f"oa_package/{h[:2]}/{h[2:4]}/PMC{pmcid_num}.tar.gz"


def make_tar_gz(members: Iterable[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A ``.tar.gz`` from ``(TarInfo, data)`` pairs (data None for links, dirs, devices)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return buf.getvalue()


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    info.mtime = 0
    return info, data


def write_package(root: str | Path, pmcid_num: int, files: Mapping[str, bytes], path: str | None = None) -> str:
    """Write ``oa_package/xx/yy/PMC<n>.tar.gz`` holding ``PMC<n>/<name>`` for each file."""
    rel = path or package_path(pmcid_num)
    blob = make_tar_gz(regular(f"PMC{pmcid_num}/{n}", d) for n, d in sorted(files.items()))
    p = Path(root) / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(blob)
    return rel


@dataclass
class LegacyRow:
    package: str
    citation: str
    pmcid_num: int
    last_updated: str = "2024-01-01 00:00:00"
    pmid: str | None = None
    license_code: str = "CC BY"
    retracted: str | None = None  # "yes"/"no" -> 7-column CSV


def write_file_list_csv(root: str | Path, rows: Sequence[LegacyRow], name: str = "oa_file_list.csv") -> str:
    seven = any(r.retracted is not None for r in rows)
    header = ["File", "Article Citation", "Accession ID", "Last Updated (YYYY-MM-DD HH:MM:SS)", "PMID", "License"]
    if seven:
        header.append("Retracted")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        rec = [r.package, r.citation, f"PMC{r.pmcid_num}", r.last_updated, r.pmid or "", r.license_code]
        if seven:
            rec.append(r.retracted or "no")
        w.writerow(rec)
    (Path(root) / name).parent.mkdir(parents=True, exist_ok=True)
    (Path(root) / name).write_text(buf.getvalue(), encoding="utf-8")
    return name


def write_file_list_txt(
    root: str | Path, rows: Sequence[LegacyRow], name: str = "oa_file_list.txt", stamp: str = "2026-03-06 21:31:45"
) -> str:
    lines = [stamp]
    for r in rows:
        pmid = f"PMID:{r.pmid}" if r.pmid else ""
        lines.append("\t".join([r.package, r.citation, f"PMC{r.pmcid_num}", pmid, r.license_code]))
    (Path(root) / name).parent.mkdir(parents=True, exist_ok=True)
    (Path(root) / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return name
