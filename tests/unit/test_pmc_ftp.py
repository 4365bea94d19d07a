"""Legacy FTP layout: file lists (csv 6/7 columns, txt) and safe package extraction."""

from __future__ import annotations

import tarfile

import pytest

from pmcflow.pmc import ftp
from pmcflow.pmc.layout import make_tar_gz, regular

# Real rows (pmc-formats.md sections 1 and 2).
CSV6 = (
    "File,Article Citation,Accession ID,Last Updated (YYYY-MM-DD HH:MM:SS),PMID,License\n"
    "oa_package/08/e0/PMC13900.tar.gz,Breast Cancer Res. 2001 Nov 2; 3(1):55-60,PMC13900,2019-11-05 11:56:12,"
    "11250746,NO-CC CODE\n"
    'oa_package/b0/ac/PMC13901.tar.gz,"Breast Cancer Res. 2001 Nov 9; 3(1):61-65, suppl",PMC13901,'
    "2019-11-05 11:56:12,,CC BY\n"
)
CSV7 = (
    "Article File,Article Citation,AccessionID,LastUpdated (YYYY-MM-DD HH:MM:SS),PMID,License,Retracted\n"
    'oa_package/aa/bb/PMC6908519.tar.gz,"Front Oncol. 2019 Dec 6; 9:1306",PMC6908519,"2024-02-07 23:35:31",'
    '31867269,"CC BY",no\n'
    'oa_package/aa/cc/PMC6908520.tar.gz,"Front Oncol. 2019 Dec 6; 9:1307",PMC6908520,"2024-02-07 23:35:31",'
    ',"CC BY-NC",yes\n'
    "oa_package/zz/zz/NOTAPMC.tar.gz,Bad,PMCx,2024-01-01 00:00:00,,CC BY,no\n"
    "../../etc/PMC5.tar.gz,Bad,PMC5,2024-01-01 00:00:00,,CC BY,no\n"
)
TXT = (
    "2026-03-06 21:31:45\n"
    "oa_package/08/e0/PMC13900.tar.gz\tBreast Cancer Res. 2001 Nov 2; 3(1):55-60\tPMC13900\tPMID:11250746\t"
    "NO-CC CODE\n"
    "oa_package/f6/9d/PMC12904753.tar.gz\tJ Neurol Surg Rep. 2026 Feb 13; 87(1):e17-e18\tPMC12904753\t\tCC BY\n"
)


def test_csv_six_columns_quoted_citation_and_empty_pmid():
    fl = ftp.parse_file_list("oa_file_list.csv", CSV6.encode())
    assert not fl.problems
    a, b = fl.rows
    assert (a.package, a.pmcid, a.pmcid_num, a.pmid, a.license_code) == (
        "oa_package/08/e0/PMC13900.tar.gz", "PMC13900", 13900, "11250746", "NO-CC CODE")
    assert a.last_updated == "2019-11-05 11:56:12" and a.is_retracted is None
    assert b.citation == "Breast Cancer Res. 2001 Nov 9; 3(1):61-65, suppl" and b.pmid is None


def test_csv_seven_columns_with_retracted_and_bad_rows():
    fl = ftp.parse_file_list("filelist.csv", CSV7.encode())
    assert [(r.pmcid, r.is_retracted, r.license_code, r.pmid) for r in fl.rows] == [
        ("PMC6908519", False, "CC BY", "31867269"), ("PMC6908520", True, "CC BY-NC", None)]
    assert [p[1] for p in fl.problems] == ["bad_listing_row", "bad_listing_row"]


def test_csv_without_header_is_positional():
    body = CSV6.split("\n", 1)[1]
    fl = ftp.parse_file_list("oa_file_list.csv", body.encode())
    assert [r.pmcid for r in fl.rows] == ["PMC13900", "PMC13901"]


def test_txt_timestamp_and_empty_pmid():
    fl = ftp.parse_file_list("oa_file_list.txt", TXT.encode())
    assert fl.generated == "2026-03-06 21:31:45"
    assert [(r.pmcid, r.pmid, r.license_code) for r in fl.rows] == [
        ("PMC13900", "11250746", "NO-CC CODE"), ("PMC12904753", None, "CC BY")]
    assert fl.rows[1].citation == "J Neurol Surg Rep. 2026 Feb 13; 87(1):e17-e18"


def test_legacy_key_deprecated_prefix():
    dep = "https://ftp.ncbi.nlm.nih.gov/pub/pmc/deprecated"
    assert ftp.legacy_key(dep, "oa_package/08/e0/PMC13900.tar.gz") == "oa_package/08/e0/PMC13900.tar.gz"
    assert ftp.legacy_key(dep + "/", "deprecated/oa_package/a/b/PMC1.tar.gz") == "oa_package/a/b/PMC1.tar.gz"
    assert ftp.legacy_key("https://x/pub/pmc", "deprecated/oa_package/a/b/PMC1.tar.gz") == \
        "deprecated/oa_package/a/b/PMC1.tar.gz"
    assert ftp.base_is_deprecated(dep) and not ftp.base_is_deprecated("https://x/pub/pmc")


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def _write(tmp_path, members, name="PMC1.tar.gz"):
    p = tmp_path / name
    p.write_bytes(make_tar_gz(members))
    return p


def test_extract_skips_unsafe_members(tmp_path):
    evil_abs = regular("/etc/evil.jpg", b"x")
    members = [
        regular("PMC1/article.nxml", b"<article/>"),
        regular("PMC1/f1.jpg", b"jpegbytes"),
        regular("PMC1/../../escape.jpg", b"x"),
        evil_abs,
        _special("PMC1/link.jpg", tarfile.SYMTYPE, "/etc/passwd"),
        _special("PMC1/hard.jpg", tarfile.LNKTYPE, "PMC1/f1.jpg"),
        _special("PMC1/dev.jpg", tarfile.CHRTYPE),
        _special("PMC1/fifo.jpg", tarfile.FIFOTYPE),
        regular("PMC1/big.jpg", b"y" * 5000),
        regular("PMC1/sub/f1.jpg", b"dup"),
        regular("PMC1/supp.docx", b"doc"),
        _special("PMC1/subdir", tarfile.DIRTYPE),
    ]
    tar = _write(tmp_path, members)
    dest = tmp_path / "out" / "PMC1"
    rep = ftp.extract_package(
        tar, dest, limits=ftp.TarLimits(max_member_bytes=1000),
        wanted=lambda n: n.endswith((".nxml", ".jpg")),
    )
    assert [f.name for f in rep.files] == ["article.nxml", "f1.jpg"]
    assert sorted(p.name for p in dest.iterdir()) == ["article.nxml", "f1.jpg"]
    assert (dest / "f1.jpg").read_bytes() == b"jpegbytes"
    reasons = {m: r for m, r, _ in rep.skipped}
    assert reasons == {
        "PMC1/../../escape.jpg": "unsafe_member",
        "/etc/evil.jpg": "unsafe_member",
        "PMC1/link.jpg": "link_member",
        "PMC1/hard.jpg": "link_member",
        "PMC1/dev.jpg": "special_member",
        "PMC1/fifo.jpg": "special_member",
        "PMC1/big.jpg": "member_too_large",
        "PMC1/sub/f1.jpg": "duplicate_member",
    }
    assert rep.not_selected == 1
    assert not (tmp_path / "escape.jpg").exists() and not (tmp_path / "out" / "escape.jpg").exists()
    assert not any(p.is_symlink() for p in (tmp_path / "out").rglob("*"))


def test_member_count_and_total_size_limits(tmp_path):
    many = _write(tmp_path, [regular(f"PMC1/f{i}.jpg", b"x") for i in range(6)], "many.tar.gz")
    with pytest.raises(ftp.BadPackage, match="members"):
        ftp.extract_package(many, tmp_path / "a", limits=ftp.TarLimits(max_members=5))
    big = _write(tmp_path, [regular(f"PMC1/f{i}.jpg", b"x" * 600) for i in range(3)], "big.tar.gz")
    with pytest.raises(ftp.BadPackage, match="exceed"):
        ftp.extract_package(big, tmp_path / "b", limits=ftp.TarLimits(max_total_bytes=1000))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert not list(tmp_path.glob(".*tmp-*"))


def test_truncated_and_corrupt_packages_are_rejected(tmp_path):
    blob = make_tar_gz([regular("PMC1/article.nxml", b"<article>" + b"z" * 20000 + b"</article>"),
                        regular("PMC1/f1.jpg", bytes(range(256)) * 40)])
    for cut in (len(blob) // 2, len(blob) - 4, 10):
        p = tmp_path / f"cut{cut}.tar.gz"
        p.write_bytes(blob[:cut])
        with pytest.raises(ftp.BadPackage):
            ftp.extract_package(p, tmp_path / f"out{cut}")
        assert not (tmp_path / f"out{cut}").exists()
    bad_crc = bytearray(blob)
    bad_crc[-6] ^= 0xFF  # inside the gzip CRC32 trailer
    p = tmp_path / "crc.tar.gz"
    p.write_bytes(bytes(bad_crc))
    with pytest.raises(ftp.BadPackage):
        ftp.extract_package(p, tmp_path / "outcrc")
    p.write_bytes(b"this is not a tarball")
    with pytest.raises(ftp.BadPackage):
        ftp.extract_package(p, tmp_path / "outjunk")
