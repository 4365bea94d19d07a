"""PMC Cloud layout: metadata JSON, object URLs, ListObjectsV2 XML, inventory reports, PMCID lookup."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pmcflow.pmc import cloud
from pmcflow.pmc.http import FetchError
from pmcflow.pmc.layout import CloudArticle, md5_hex, write_cloud_article, write_inventory
from pmcflow.pmc.transport import CommonPrefix, FileTransport, ObjectInfo, parse_list_objects_v2

MD5 = "0123456789abcdef0123456789abcdef"


def _meta(**kw):
    m = {
        "pmcid": "PMC99990001",
        "pmid": "90000001",
        "version": 1,
        "doi": "10.9999/synthetic-demo",
        "license_code": "CC BY",
        "is_pmc_openaccess": "yes",
        "is_manuscript": "no",
        "is_retracted": "no",
        "citation": "Breast Cancer Res. 2001 Nov 2; 3(1):55-60",
        "xml_url": f"s3://pmc-oa-opendata/PMC99990001.1/PMC99990001.1.xml?md5={MD5}",
        "media_urls": [f"s3://pmc-oa-opendata/PMC99990001.1/case-f1.jpg?md5={MD5.upper()}"],
    }
    m.update(kw)
    return json.dumps(m).encode()


def test_parse_metadata_fields():
    md = cloud.parse_metadata(_meta())
    assert (md.pmcid, md.version, md.pmid, md.doi) == ("PMC99990001", 1, "90000001", "10.9999/synthetic-demo")
    assert md.license_code == "CC BY" and md.is_retracted is False
    assert md.xml.key == "PMC99990001.1/PMC99990001.1.xml" and md.xml.md5 == MD5
    assert [(f.key, f.md5, f.name) for f in md.media] == [("PMC99990001.1/case-f1.jpg", MD5, "case-f1.jpg")]
    assert md.citation.startswith("Breast Cancer Res.")


@pytest.mark.parametrize(("value", "expected"), [("yes", True), ("no", False), (True, True), (False, False),
                                                  ("true", True), ("False", False), (None, None), ("?", None)])
def test_retraction_flag_both_typings(value, expected):
    assert cloud.parse_metadata(_meta(is_retracted=value)).is_retracted is expected


def test_version_as_string_and_pmcid_without_prefix():
    md = cloud.parse_metadata(_meta(version="2", pmcid="99990001"))
    assert (md.pmcid, md.version) == ("PMC99990001", 2)


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (b"{not json", "metadata_invalid_json"),
        (b"\xff\xfe", "metadata_invalid_json"),
        (b"[1, 2]", "metadata_invalid_json"),
        (_meta(xml_url=None), "metadata_missing_keys"),
        (json.dumps({"pmcid": "PMC1"}).encode(), "metadata_missing_keys"),
        (_meta(version="v1"), "metadata_invalid_json"),
        (_meta(media_urls="s3://x"), "metadata_invalid_json"),
        (_meta(xml_url="s3://other-bucket/PMC1.1/PMC1.1.xml?md5=" + MD5), "metadata_bad_url"),
        (_meta(xml_url="s3://pmc-oa-opendata/PMC1.1/../../etc/passwd?md5=" + MD5), "metadata_bad_url"),
        (_meta(xml_url="s3://pmc-oa-opendata/PMC1.1/PMC1.1.xml?md5=xyz"), "metadata_bad_url"),
        (_meta(xml_url="ftp://host/PMC1.1.xml"), "metadata_bad_url"),
    ],
)
def test_bad_metadata_reasons(blob, reason):
    with pytest.raises(cloud.MetadataError) as ei:
        cloud.parse_metadata(blob)
    assert ei.value.reason == reason


def test_object_url_forms():
    https = cloud.parse_object_url(f"https://pmc-oa-opendata.s3.amazonaws.com/PMC5.1/a%20b.jpg?md5={MD5}")
    assert https.key == "PMC5.1/a b.jpg" and https.md5 == MD5
    path_style = cloud.parse_object_url("https://s3.amazonaws.com/pmc-oa-opendata/PMC5.1/x.png")
    assert path_style.key == "PMC5.1/x.png" and path_style.md5 is None


def test_parse_list_objects_v2_page():
    xml = b"""<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>pmc-oa-opendata</Name><Prefix>PMC123456.</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>
  <Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>
  <Contents><Key>PMC123456.README</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>
    <ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>PMC123456.1/</Prefix></CommonPrefixes>
  <CommonPrefixes><Prefix>PMC123456.2/</Prefix></CommonPrefixes>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>"""
    entries, token = parse_list_objects_v2(xml)
    assert entries == [
        ObjectInfo("PMC123456.README", 0, "d41d8cd98f00b204e9800998ecf8427e", "2026-01-01T00:00:00.000Z"),
        CommonPrefix("PMC123456.1/"),
        CommonPrefix("PMC123456.2/"),
    ]
    assert token == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="
    with pytest.raises(FetchError):
        parse_list_objects_v2(b"<Error><Code>AccessDenied</Code></Error>")


def _bucket(tmp_path: Path) -> Path:
    root = tmp_path / "bucket"
    for num, v in [(123456, 1), (123456, 2), (7, 1), (1234567, 1)]:
        write_cloud_article(root, CloudArticle(num, v, b"<article/>", {"f1.jpg": b"x"}))
    return root


def test_list_objects_and_pmcids_over_files(tmp_path):
    t = FileTransport(_bucket(tmp_path))
    refs = list(cloud.enumerate_list_objects(t))
    assert sorted((r.pmcid, r.version) for r in refs) == [
        ("PMC123456", 1), ("PMC123456", 2), ("PMC1234567", 1), ("PMC7", 1)]
    look = cloud.enumerate_pmcids(t, ["PMC123456", "7", "PMC123456.1", "PMC42", "bogus", "PMC7"])
    assert [r.uid for r in look.refs] == ["PMC123456.1", "PMC123456.2", "PMC7.1", "PMC123456.1"]
    assert look.problems == [
        ("PMC42", "unknown_pmcid", "no PMC<id>.<v>/ prefix in the bucket"),
        ("bogus", "invalid_pmcid", "not a PMCID: 'bogus'"),
    ]


def test_inventory_newest_manifest_and_checksums(tmp_path):
    root = _bucket(tmp_path)
    old = write_inventory(root, stamp="2026-04-01T01-00Z", keys=["metadata/PMC7.1.json"], n_files=1)
    new = write_inventory(root, stamp="2026-04-14T01-00Z", n_files=3)
    t = FileTransport(root)
    assert cloud.find_newest_manifest(t) == new
    key, refs = cloud.enumerate_inventory(t, "", tmp_path)
    assert key == new
    assert sorted(r.uid for r in refs) == ["PMC123456.1", "PMC123456.2", "PMC1234567.1", "PMC7.1"]
    key, refs = cloud.enumerate_inventory(t, old, tmp_path)
    assert [r.uid for r in refs] == ["PMC7.1"]
    assert not list(tmp_path.glob(".inventory-*"))  # temporary data files are removed
    # A data file whose bytes do not match the manifest's MD5checksum is refused.
    man = json.loads((root / new).read_text())
    data_key = man["files"][0]["key"]
    (root / data_key).write_bytes(gzip.compress(b'"pmc-oa-opendata","metadata%2FPMC9.1.json","1","x","y"\n'))
    with pytest.raises(FetchError) as ei:
        list(cloud.enumerate_inventory(t, new, tmp_path)[1])
    assert ei.value.reason in ("checksum_mismatch", "size_mismatch")


def test_inventory_keys_are_url_decoded(tmp_path):
    root = tmp_path / "b"
    root.mkdir()
    csv_body = b'"pmc-oa-opendata","metadata/PMC5.2.json","10","2026-01-01T00:00:00.000Z","e"\n' \
               b'"pmc-oa-opendata","metadata%2FPMC6.1.json","10","2026-01-01T00:00:00.000Z","e"\n' \
               b'"pmc-oa-opendata","PMC6.1/fig+1.jpg","10","2026-01-01T00:00:00.000Z","e"\n'
    gz = gzip.compress(csv_body)
    (root / "inv").mkdir()
    (root / "inv/d.csv.gz").write_bytes(gz)
    (root / "inv/manifest.json").write_text(json.dumps({
        "fileFormat": "CSV", "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag",
        "files": [{"key": "inv/d.csv.gz", "size": len(gz), "MD5checksum": md5_hex(gz)}]}))
    _, refs = cloud.enumerate_inventory(FileTransport(root), "inv/manifest.json", tmp_path)
    assert [r.uid for r in refs] == ["PMC5.2", "PMC6.1"]
    with pytest.raises(FetchError):
        cloud.find_newest_manifest(FileTransport(root))  # nothing under inventory-reports/
