"""list_articles + acquire_chunk end to end against the loopback mock server (and local mirrors).

Corpora are built in tmp_path from real JATS text (tests/fixtures/pmc) and tiny Pillow images,
including bad input of every kind the stage must reject or record.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from PIL import Image

from pmcflow.config import load_config
from pmcflow.pmc import stage
from pmcflow.pmc.layout import (
    CloudArticle,
    LegacyRow,
    make_tar_gz,
    package_path,
    regular,
    write_cloud_article,
    write_file_list_csv,
    write_file_list_txt,
    write_inventory,
    write_package,
)
from pmcflow.pmc.mockserver import Fault, MockPMCServer
from pmcflow.pmc.settings import PmcSettings
from pmcflow.tables import read_counts

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "pmc"
XML_A = (FIX / "PMC2775662.xml").read_bytes()
XML_B = (FIX / "PMC3339583.xml").read_bytes()
XML_C = (FIX / "ehp-116-1694.nxml").read_bytes()
SPAN = 1_000_000  # -> chunks c000000 (PMC1000xx), c000002 (PMC2xxxxxx), c000003 (PMC3xxxxxx)


def image(fmt: str, color: tuple[int, int, int], size: int = 24) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, fmt)
    return buf.getvalue()


PNG = image("PNG", (200, 30, 30))
JPG = image("JPEG", (30, 200, 30), 64)
BIGPNG = Image.effect_noise((256, 256), 64)


def _big_png() -> bytes:
    buf = io.BytesIO()
    BIGPNG.convert("L").save(buf, "PNG")
    return buf.getvalue()


NOISE = _big_png()  # ~60 kB: big enough for mid-body drops
CIT = "Adv Bioinformatics. 2008 Nov 2; 2008:789026"

# ---------------------------------------------------------------------------------- cloud corpus
# uid -> expected outcome with select = {licenses: [CC0, CC BY], include_retracted: false, date_from: 2000}
EXPECT_CLOUD = {
    "PMC2775662.2": "kept",
    "PMC3339583.1": "license_not_selected",
    "PMC2599765.1": "retracted",
    "PMC100001.1": "retracted",
    "PMC100002.1": "metadata_invalid_json",
    "PMC100003.1": "metadata_missing_keys",
    "PMC100004.1": "xml_missing",
    "PMC100005.1": "kept",
    "PMC100006.1": "checksum_mismatch",
    "PMC100007.1": "out_of_date_range",
    "PMC100008.1": "metadata_missing",
}


def build_cloud(root: Path) -> dict[str, dict[str, bytes]]:
    """Write the bucket; return uid -> {name: bytes} of the files each kept article must have."""
    files: dict[str, dict[str, bytes]] = {}
    a1 = CloudArticle(2775662, 1, XML_A, {"f1.png": PNG}, citation=CIT)
    a2 = CloudArticle(
        2775662,
        2,
        XML_A,
        {"f1.png": PNG, "f2.jpg": JPG, "f3.png": NOISE},
        citation=CIT,
        pmid="19956770",
        doi="10.1155/2008/789026",
    )
    write_cloud_article(root, a1)
    write_cloud_article(root, a2)
    files[a2.uid] = {"PMC2775662.2.xml": XML_A, **a2.media}
    write_cloud_article(
        root,
        CloudArticle(
            3339583,
            1,
            XML_B,
            {"f1.png": PNG},
            license_code="CC BY-NC",
            citation="3 Biotech. 2012 Mar; 2(1):1-10",
        ),
    )
    write_cloud_article(
        root,
        CloudArticle(
            2599765,
            1,
            XML_C,
            {"g1.jpg": JPG},
            is_retracted="yes",
            citation="Environ Health Perspect. 2008 Dec; 116(12):1694",
        ),
    )
    write_cloud_article(root, CloudArticle(100001, 1, XML_B, {}, is_retracted=True, citation=CIT))
    bad = CloudArticle(100002, 1, XML_B, {}, citation=CIT)
    write_cloud_article(root, bad, metadata=b'{"pmcid": "PMC100002", "version": 1, "xml_url": ')
    nokeys = CloudArticle(100003, 1, XML_B, {}, citation=CIT)
    write_cloud_article(root, nokeys, metadata=json.dumps({"pmcid": "PMC100003", "version": 1}).encode())
    noxml = CloudArticle(100004, 1, XML_B, {}, citation=CIT)
    write_cloud_article(root, noxml)
    (root / noxml.uid / f"{noxml.uid}.xml").unlink()
    # Kept with media problems: one missing, one not an image, one supplementary PDF (skipped).
    mm = CloudArticle(
        100005,
        1,
        XML_C,
        {"ok.png": PNG, "gone.jpg": JPG, "fake.jpg": b"%PDF-1.4 not an image", "supp.pdf": b"%PDF-1.4"},
        citation=CIT,
        license_code="CC0",
    )
    write_cloud_article(root, mm)
    (root / mm.uid / "gone.jpg").unlink()
    files[mm.uid] = {f"{mm.uid}.xml": XML_C, "ok.png": PNG}
    wrong = CloudArticle(100006, 1, XML_B, {}, citation=CIT)
    meta = wrong.metadata()
    meta["xml_url"] = meta["xml_url"].split("?md5=")[0] + "?md5=" + "0" * 32
    write_cloud_article(root, wrong, metadata=json.dumps(meta).encode())
    write_cloud_article(root, CloudArticle(100007, 1, XML_B, {}, citation="Old J. 1990 Jan 5; 1:1"))
    gone = CloudArticle(100008, 1, XML_B, {}, citation=CIT)
    write_cloud_article(root, gone)
    (root / "metadata" / f"{gone.uid}.json").unlink()
    # 100008 must still be listed: inventory/list-objects see metadata keys, so keep a stale inventory
    # entry and name it explicitly in the pmcids list.
    write_inventory(
        root,
        keys=sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        + ["metadata/PMC100008.1.json"],
    )
    return files


def cfg_for(overrides: dict[str, Any]) -> dict[str, Any]:
    base = {
        "chunking": {"pmcid_span": SPAN},
        "select": {"licenses": ["CC0", "CC BY"], "include_retracted": False, "date_from": "2000"},
        "http": {
            "rate_limit_per_s": 1000,
            "backoff_s": 0.001,
            "backoff_max_s": 0.01,
            "retries": 4,
            "timeout_s": 10,
        },
    }
    from pmcflow.config import deep_merge

    return load_config(overrides=deep_merge(base, overrides))


def run_all(
    cfg: dict[str, Any], out: Path, cache: Path
) -> tuple[dict, list[dict], list[dict], list[dict], list[dict]]:
    """list + acquire every chunk; returns (list counts, listing, acquired, rejections, media rejections)."""
    lc = stage.list_articles(PmcSettings.from_config(cfg), str(out / "list"))
    listing = pq.read_table(out / "list" / "listing.parquet").to_pylist()
    chunks = json.loads((out / "list" / "chunks.json").read_text())["chunks"]
    acquired, rej, media_rej = [], pq.read_table(out / "list" / "rejections.parquet").to_pylist(), []
    for ch in chunks:
        c = stage.acquire_chunk(
            PmcSettings.from_config(cfg),
            ch,
            str(out / "list" / "listing.parquet"),
            str(out / ch),
            str(cache),
            transfer_path=out / ch / "transfer.json",
        )
        assert not any(k.startswith("http.") for k in c.get("extra", {}))  # transfer stats: not content
        assert c["in"] == chunks[ch]["n"] == c["kept"] + sum(c["rejected"].values())
        assert read_counts(out / ch / "counts.json") == c
        acquired += pq.read_table(out / ch / "articles.parquet").to_pylist()
        rows = pq.read_table(out / ch / "rejections.parquet").to_pylist()
        assert len(rows) == sum(c["rejected"].values())
        rej += rows
        media_rej += pq.read_table(out / ch / "media_rejections.parquet").to_pylist()
    assert lc["in"] == lc["kept"] + sum(lc["rejected"].values())
    return lc, listing, acquired, rej, media_rej


def outcomes(acquired: list[dict], rej: list[dict]) -> dict[str, str]:
    out = {r["article_uid"]: "kept" for r in acquired}
    for r in rej:
        if r["reason"] != "older_version":
            out[r["item_id"]] = r["reason"]
    return out


def assert_files_verified(acquired: list[dict], expected: dict[str, dict[str, bytes]]) -> None:
    for row in acquired:
        want = expected[row["article_uid"]]
        got = {Path(row["xml_path"]).name: Path(row["xml_path"]).read_bytes()}
        assert not os.path.isabs(row["xml_path"])
        assert row["xml_md5"] == hashlib.md5(got[Path(row["xml_path"]).name]).hexdigest()
        for m in row["media"]:
            data = Path(m["path"]).read_bytes()
            assert m["md5"] == hashlib.md5(data).hexdigest() and m["size"] == len(data)
            got[m["name"]] = data
        assert got == want  # byte-identical, nothing missing, nothing extra


@pytest.fixture()
def cloud_root(tmp_path):
    root = tmp_path / "bucket"
    files = build_cloud(root)
    return root, files


PMCIDS = ["PMC2775662", "PMC3339583", "PMC2599765"] + [f"PMC10000{i}" for i in range(1, 9)] + ["PMC999"]


@pytest.mark.network
@pytest.mark.parametrize("listing", ["inventory", "list-objects", "pmcids"])
def test_cloud_three_listing_modes(cloud_root, tmp_path, monkeypatch, listing):
    root, files = cloud_root
    monkeypatch.chdir(tmp_path)
    with MockPMCServer(root) as srv:
        cfg = cfg_for(
            {
                "source": {
                    "backend": "cloud",
                    "cloud": {"base_url": srv.url, "listing": listing, "pmcids": PMCIDS},
                }
            }
        )
        lc, listing_rows, acquired, rej, media_rej = run_all(cfg, Path("out"), Path("cache"))
    expect = dict(EXPECT_CLOUD)
    if listing == "list-objects":  # no metadata key -> not enumerated at all
        expect.pop("PMC100008.1")
    got = outcomes(acquired, rej)
    if listing == "pmcids":
        assert got.pop("PMC999") == "unknown_pmcid"
    assert got == expect
    assert [r["article_uid"] for r in listing_rows] == sorted(
        (r["article_uid"] for r in listing_rows), key=lambda u: tuple(map(int, u[3:].split(".")))
    )
    assert lc["rejected"]["older_version"] == 1
    assert_files_verified(acquired, files)
    assert sorted((r["item_id"], r["reason"]) for r in media_rej) == [
        ("PMC100005.1/fake.jpg", "media_not_image"),
        ("PMC100005.1/gone.jpg", "media_missing"),
    ]
    assert not list(Path("cache").rglob("*.part"))
    assert not Path("cache/cloud/PMC100005.1/fake.jpg").exists()
    kept = {r["article_uid"]: r for r in acquired}
    a = kept["PMC2775662.2"]
    assert (a["pmid"], a["doi"], a["license_code"], a["is_retracted"]) == (
        "19956770",
        "10.1155/2008/789026",
        "CC BY",
        False,
    )
    assert json.loads(a["metadata_json"])["pmcid"] == "PMC2775662"
    assert a["xml_path"] == "cache/cloud/PMC2775662.2/PMC2775662.2.xml"
    assert a["source_url"].startswith(srv.url)


@pytest.mark.network
def test_cloud_every_fault_type_and_rerun_resumes(cloud_root, tmp_path, monkeypatch):
    root, files = cloud_root
    monkeypatch.chdir(tmp_path)
    faults = [
        Fault("drop", "PMC2775662.2/f3.png", count=1, after_bytes=20_000),
        Fault("ignore_range", "PMC2775662.2/f3.png", count=1),  # the resume attempt gets 200: restart
        Fault("drop", "PMC2775662.2/PMC2775662.2.xml", count=1, after_bytes=10_000),
        Fault("status", "metadata/PMC2775662.2.json", count=1, status=500),
        Fault("status", "PMC100005.1/ok.png", count=1, status=503),
        Fault("429", "PMC2775662.2/f1.png", count=1, retry_after="1"),
        Fault("delay", "metadata/PMC100005.1.json", count=1, delay_s=0.05),
        Fault("truncate", "PMC100005.1/PMC100005.1.xml", count=1, extra_bytes=300),
        Fault("corrupt", "PMC2775662.2/f2.jpg", count=1),
        Fault("missing", "metadata/PMC100007.1.json", count=1),  # -> metadata_missing (404 not retried)
        Fault("status", "?list-type=2*", count=1, status=503),
    ]
    with MockPMCServer(root, faults) as srv:
        cfg = cfg_for(
            {"source": {"backend": "cloud", "cloud": {"base_url": srv.url, "listing": "list-objects"}}}
        )
        _, _, acquired, rej, _ = run_all(cfg, Path("out"), Path("cache"))
        log = srv.log
        assert [(f.kind, f.pattern) for f in srv.faults if f.fired != f.count] == []
        expect = dict(EXPECT_CLOUD, **{"PMC100007.1": "metadata_missing"})
        expect.pop("PMC100008.1")
        assert outcomes(acquired, rej) == expect
        assert_files_verified(acquired, files)
        xml = [(r.range, r.status) for r in log if r.target == "PMC2775662.2/PMC2775662.2.xml"]
        assert xml == [(None, 200), ("bytes=10000-", 206)]  # resumed with Range
        f3 = [(r.range, r.status) for r in log if r.target == "PMC2775662.2/f3.png"]
        assert f3 == [(None, 200), ("bytes=20000-", 200)]  # Range ignored -> full restart
        f2 = [r.fault for r in log if r.target == "PMC2775662.2/f2.jpg"]
        assert f2 == ["corrupt", None]  # wrong bytes deleted and fetched again
        transfer = json.loads(Path("out/c000002/transfer.json").read_text())
        assert transfer["http.resumed"] == 1 and transfer["http.checksum_failures"] == 1
        assert transfer["http.range_ignored"] == 1

        # Rerun: every verified file is reused (no request); metadata and failures are re-checked.
        first = {ch: pq.read_table(f"out/{ch}/articles.parquet") for ch in ("c000000", "c000002")}
        srv.clear()
        for ch in first:
            c = stage.acquire_chunk(
                PmcSettings.from_config(cfg),
                ch,
                "out/list/listing.parquet",
                f"out2/{ch}",
                "cache",
                transfer_path=f"out2/{ch}.transfer.json",
            )
            t = json.loads(Path(f"out2/{ch}.transfer.json").read_text())
            # Only the file refused as not-an-image (deleted, so fetched again to re-check) moves.
            assert t["http.files_downloaded"] == c["extra"].get("media_rejected.media_not_image", 0)
            assert t["http.files_cached"] > 0
            assert pq.read_table(f"out2/{ch}/articles.parquet").equals(first[ch])
        kept_files = {f"{uid}/{name}" for uid, names in files.items() for name in names}
        assert not kept_files & {r.target for r in srv.log}


@pytest.mark.network
def test_crash_mid_download_resumes_from_part_file(cloud_root, tmp_path, monkeypatch):
    root, files = cloud_root
    monkeypatch.chdir(tmp_path)
    # Simulate a job killed mid-file: a .part with the first 15000 bytes of f3.png is left behind.
    part = Path("cache/cloud/PMC2775662.2/f3.png.part")
    part.parent.mkdir(parents=True)
    part.write_bytes(NOISE[:15000])
    with MockPMCServer(root) as srv:
        cfg = cfg_for(
            {
                "source": {
                    "backend": "cloud",
                    "cloud": {"base_url": srv.url, "listing": "pmcids", "pmcids": ["PMC2775662"]},
                }
            }
        )
        _, _, acquired, _, _ = run_all(cfg, Path("out"), Path("cache"))
        assert [(r.range, r.status) for r in srv.log if r.target.endswith("f3.png")] == [
            ("bytes=15000-", 206)
        ]
    assert_files_verified(acquired, files)


@pytest.mark.network
def test_rate_limit_respected(cloud_root, tmp_path, monkeypatch):
    root, _ = cloud_root
    monkeypatch.chdir(tmp_path)
    rate = 40.0
    with MockPMCServer(root) as srv:
        cfg = cfg_for(
            {
                "source": {
                    "backend": "cloud",
                    "cloud": {
                        "base_url": srv.url,
                        "listing": "pmcids",
                        "pmcids": ["PMC2775662", "PMC100005"],
                    },
                },
                "http": {"rate_limit_per_s": rate},
            }
        )
        run_all(cfg, Path("out"), Path("cache"))
        t = sorted(r.t for r in srv.log)
    assert len(t) >= 12
    # Each job (list, then each chunk) has its own bucket: within a job, arrivals are >= 1/rate apart
    # (tolerance for scheduling); overall no window of 1 s holds more than rate + 1 requests.
    gaps = [b - a for a, b in zip(t, t[1:], strict=False)]
    assert sum(1 for g in gaps if g < 0.8 / rate) <= 2  # the job boundaries (new bucket, burst 1)
    for i, start in enumerate(t):
        assert sum(1 for x in t[i:] if x - start < 1.0) <= rate + 3


def test_selection_max_articles_and_versions_all(cloud_root, tmp_path, monkeypatch):
    root, _ = cloud_root
    monkeypatch.chdir(tmp_path)
    cfg = cfg_for(
        {
            "source": {
                "backend": "local",
                "local": {"root": str(root), "layout": "cloud"},
                "cloud": {"listing": "list-objects", "versions": "all"},
            },
            "select": {"max_articles": 3},
        }
    )
    lc = stage.list_articles(PmcSettings.from_config(cfg), "out")
    rows = pq.read_table("out/listing.parquet").to_pylist()
    assert [r["article_uid"] for r in rows] == ["PMC100001.1", "PMC100002.1", "PMC100003.1"]
    assert lc["rejected"] == {"over_max_articles": 8} and lc["in"] == 11
    man = json.loads(Path("out/chunks.json").read_text())
    assert list(man["chunks"]) == ["c000000"] and man["chunks"]["c000000"]["n"] == 3
    assert len(man["chunks"]["c000000"]["digest"]) == 64


@pytest.mark.parametrize("as_url", [False, True])
def test_local_cloud_mirror(cloud_root, tmp_path, monkeypatch, as_url):
    root, files = cloud_root
    monkeypatch.chdir(tmp_path)
    loc = root.resolve().as_uri() if as_url else str(root)
    cfg = cfg_for(
        {
            "source": {
                "backend": "local",
                "local": {"root": loc, "layout": "cloud"},
                "cloud": {"listing": "inventory"},
            }
        }
    )
    _, listing, acquired, rej, media_rej = run_all(cfg, Path("out"), Path("cache"))
    assert {r["source"] for r in listing} == {"local"}
    assert outcomes(acquired, rej) == EXPECT_CLOUD
    assert_files_verified(acquired, files)
    assert all(r["xml_path"].startswith("cache/local/") for r in acquired)
    assert len(media_rej) == 2


# ------------------------------------------------------------------------------------ ftp corpus
EXPECT_FTP = {
    "PMC2775662.1": "kept",
    "PMC3339583.1": "license_not_selected",  # decided at listing time
    "PMC2599765.1": "kept",  # package with unsafe members: they are skipped, the article is kept
    "PMC100001.1": "bad_package",  # truncated tar.gz
    "PMC100002.1": "package_missing",
    "PMC100003.1": "xml_missing",
    "PMC100004.1": "out_of_date_range",  # decided at listing time
    "PMC100005.1": "retracted",  # 7-column list
}


def build_ftp(root: Path, txt: bool = False) -> dict[str, dict[str, bytes]]:
    files: dict[str, dict[str, bytes]] = {}
    rows = []
    p = write_package(
        root, 2775662, {"PMC2775662.nxml": XML_A, "f1.jpg": JPG, "f2.png": NOISE, "supp.docx": b"d"}
    )
    files["PMC2775662.1"] = {"PMC2775662.nxml": XML_A, "f1.jpg": JPG, "f2.png": NOISE}
    rows.append(LegacyRow(p, CIT, 2775662, pmid="19956770", retracted=None if txt else "no"))
    p = write_package(root, 3339583, {"PMC3339583.nxml": XML_B})
    rows.append(LegacyRow(p, "3 Biotech. 2012 Mar; 2(1):1-10", 3339583, license_code="CC BY-NC"))
    evil = [
        regular("PMC2599765/ehp.nxml", XML_C),
        regular("PMC2599765/g1.png", PNG),
        regular("PMC2599765/../../../evil.png", PNG),
        regular("/tmp/abs.png", PNG),
        (_link("PMC2599765/link.png"), None),
        regular("PMC2599765/broken.png", b"\x89PNG\r\n\x1a\n garbage"),
    ]
    p = package_path(2599765)
    (root / p).parent.mkdir(parents=True, exist_ok=True)
    (root / p).write_bytes(make_tar_gz(evil))
    files["PMC2599765.1"] = {"ehp.nxml": XML_C, "g1.png": PNG}
    rows.append(LegacyRow(p, "Environ Health Perspect. 2008 Dec; 116(12):1694", 2599765, license_code="CC0"))
    p = write_package(root, 100001, {"a.nxml": XML_B, "f.png": NOISE})
    (root / p).write_bytes((root / p).read_bytes()[:-2000])
    rows.append(LegacyRow(p, CIT, 100001))
    rows.append(LegacyRow(package_path(100002), CIT, 100002))
    p = write_package(root, 100003, {"f.png": PNG})
    rows.append(LegacyRow(p, CIT, 100003))
    p = write_package(root, 100004, {"a.nxml": XML_B})
    rows.append(LegacyRow(p, "Old J. 1990 Jan 5; 1:1", 100004))
    p = write_package(root, 100005, {"a.nxml": XML_B})
    rows.append(LegacyRow(p, CIT, 100005, retracted="yes"))
    if txt:
        rows = [r for r in rows if r.pmcid_num != 100005]
        write_file_list_txt(root, rows)
    else:
        write_file_list_csv(root, rows)
    return files


def _link(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = "/etc/passwd"
    return info


@pytest.mark.network
@pytest.mark.parametrize(
    ("file_list", "base_suffix"),
    [
        ("oa_file_list.csv", "/pub/pmc/deprecated"),
        ("oa_file_list.txt", "/pub/pmc"),  # base without deprecated/: 404 fallback finds the moved tree
    ],
)
def test_ftp_packages_over_http(tmp_path, monkeypatch, file_list, base_suffix):
    site = tmp_path / "site"
    files = build_ftp(site / "pub/pmc/deprecated", txt=file_list.endswith(".txt"))
    monkeypatch.chdir(tmp_path)
    faults = [
        Fault("drop", "pub/pmc/deprecated/*PMC2775662.tar.gz", count=1, after_bytes=30_000),
        Fault("status", "*oa_file_list*", count=1, status=503),
    ]
    with MockPMCServer(site, faults) as srv:
        cfg = cfg_for(
            {"source": {"backend": "ftp", "ftp": {"base_url": srv.url + base_suffix, "file_list": file_list}}}
        )
        lc, listing, acquired, rej, media_rej = run_all(cfg, Path("out"), Path("cache"))
        pkg = [(r.range, r.status) for r in srv.log if r.target.endswith("PMC2775662.tar.gz")]
        assert pkg[-2:] == [(None, 200), ("bytes=30000-", 206)]
    expect = dict(EXPECT_FTP)
    if file_list.endswith(".txt"):
        expect.pop("PMC100005.1")
    assert outcomes(acquired, rej) == expect
    assert_files_verified(acquired, files)
    assert {r["source"] for r in listing} == {"ftp"}
    assert lc["rejected"] == {
        "license_not_selected": 1,
        "out_of_date_range": 1,
        **({"retracted": 1} if file_list.endswith(".csv") else {}),
    }
    reasons = sorted((r["item_id"], r["reason"]) for r in media_rej)
    assert reasons == [
        ("PMC2599765.1//tmp/abs.png", "unsafe_member"),
        ("PMC2599765.1/PMC2599765/../../../evil.png", "unsafe_member"),
        ("PMC2599765.1/PMC2599765/link.png", "link_member"),
        ("PMC2599765.1/broken.png", "media_not_image"),
    ]
    assert not (tmp_path / "evil.png").exists() and not list(tmp_path.rglob("evil.png"))
    assert not list(Path("cache").rglob("*.tar.gz")) and not list(Path("cache").rglob("*.part"))
    kept = {r["article_uid"]: r for r in acquired}
    a = kept["PMC2775662.1"]
    assert a["xml_path"] == "cache/ftp/PMC2775662/PMC2775662.nxml"
    assert a["pmid"] == "19956770" and a["license_code"] == "CC BY" and a["citation"] == CIT
    assert json.loads(a["metadata_json"])["File"] == package_path(2775662)
    c = read_counts(Path("out/c000002/counts.json"))
    assert c["extra"]["media_skipped"] == 1  # supp.docx is not an image type


def test_ftp_local_mirror_and_rerun_uses_extracted_files(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    files = build_ftp(mirror)
    monkeypatch.chdir(tmp_path)
    cfg = cfg_for({"source": {"backend": "local", "local": {"root": mirror.as_uri(), "layout": "ftp"}}})
    _, _, acquired, rej, media_rej = run_all(cfg, Path("out"), Path("cache"))
    assert outcomes(acquired, rej) == EXPECT_FTP
    assert_files_verified(acquired, files)
    stage.acquire_chunk(PmcSettings.from_config(cfg), "c000002", "out/list/listing.parquet", "out2", "cache", transfer_path="t.json")
    t = json.loads(Path("t.json").read_text())
    assert t["packages_cached"] == 2 and t["http.files_downloaded"] == 0
    assert Path("out2/counts.json").read_bytes() == Path("out/c000002/counts.json").read_bytes()
    assert pq.read_table("out2/articles.parquet").equals(pq.read_table("out/c000002/articles.parquet"))
    assert pq.read_table("out2/media_rejections.parquet").equals(
        pq.read_table("out/c000002/media_rejections.parquet")
    )


def test_cli_roundtrip(cloud_root, tmp_path, monkeypatch, capsys):
    from pmcflow.cli import main

    root, _ = cloud_root
    monkeypatch.chdir(tmp_path)
    sets = [
        "--set",
        "source.backend=local",
        "--set",
        f"source.local.root={root}",
        "--set",
        "source.cloud.listing=list-objects",
        "--set",
        f"chunking.pmcid_span={SPAN}",
    ]
    assert main(["list-articles", *sets, "--out", "out/list"]) == 0
    assert (
        main(
            [
                "acquire-chunk",
                *sets,
                "--chunk",
                "c000002",
                "--listing",
                "out/list/listing.parquet",
                "--out",
                "out/c000002",
                "--cache",
                "cache",
            ]
        )
        == 0
    )
    counts = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert counts["chunk"] == "c000002" and counts["in"] == 2 and counts["kept"] == 1
    assert counts["rejected"] == {"retracted": 1}
