"""The legacy PMC FTP layout: ``oa_file_list.csv``/``.txt`` and ``oa_package/xx/yy/PMC*.tar.gz``.

Since 2026-04-13 the tree lives under ``.../pub/pmc/deprecated/``; :func:`legacy_key` and the stage's
404 fallback keep a base URL with or without that prefix working.

Packages are extracted by :func:`extract_package`, which never calls ``tarfile.extract``: every
member is checked (no absolute paths or ``..``, no links, devices or fifos, per-member, total and
member-count limits) and regular files are copied out by hand.  A bad member is skipped and
reported; a package that cannot be read to the end (truncated, corrupt gzip/CRC) or breaks a
package-level limit raises :class:`BadPackage`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import shutil
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pmcflow.errors import RejectionError
from pmcflow.pmc.cloud import PMCID_SPEC_RE, parse_bool
from pmcflow.tables import temp_sibling

PACKAGE_RE = re.compile(r"(?:^|/)(PMC\d+)\.tar\.gz$")
DEPRECATED = "deprecated"


@dataclass(frozen=True)
class FileListRow:
    line: int
    package: str  # path relative to the FTP base, e.g. oa_package/08/e0/PMC13900.tar.gz
    citation: str | None
    pmcid: str
    pmcid_num: int
    pmid: str | None
    license_code: str | None
    last_updated: str | None
    is_retracted: bool | None

    def as_record(self) -> dict[str, object]:
        return {
            "File": self.package,
            "Article Citation": self.citation,
            "Accession ID": self.pmcid,
            "Last Updated": self.last_updated,
            "PMID": self.pmid,
            "License": self.license_code,
            "Retracted": self.is_retracted,
        }


@dataclass
class FileList:
    rows: list[FileListRow] = field(default_factory=list)
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (item, reason, detail)
    generated: str | None = None  # .txt first line


# header name (lower-cased, prefix) -> field
_HEADER_FIELDS = (
    ("article file", "package"),
    ("file", "package"),
    ("key", "package"),
    ("article citation", "citation"),
    ("accession id", "pmcid"),
    ("accessionid", "pmcid"),
    ("last updated", "last_updated"),
    ("lastupdated", "last_updated"),
    ("pmid", "pmid"),
    ("license", "license_code"),
    ("retracted", "is_retracted"),
)
_POSITIONAL = ("package", "citation", "pmcid", "last_updated", "pmid", "license_code", "is_retracted")


def _header_map(header: list[str]) -> dict[str, int] | None:
    out: dict[str, int] = {}
    for i, name in enumerate(header):
        n = name.strip().lower()
        for prefix, fld in _HEADER_FIELDS:
            if n.startswith(prefix) and fld not in out:
                out[fld] = i
                break
    return out if {"package", "pmcid"} <= out.keys() else None


def _norm_pmid(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip()
    if v.upper().startswith("PMID:"):
        v = v[5:].strip()
    return v if v and v != "0" else None


def _make_row(line: int, f: dict[str, str | None], out: FileList) -> None:
    package = (f.get("package") or "").strip()
    pmcid_raw = (f.get("pmcid") or "").strip()
    m = PMCID_SPEC_RE.match(pmcid_raw)
    item = pmcid_raw or f"line {line}"
    if not m or m.group(2):
        out.problems.append((item, "bad_listing_row", f"line {line}: bad accession {pmcid_raw!r}"))
        return
    pm = PACKAGE_RE.search(package)
    if not package or not pm or package.startswith("/") or ".." in package.split("/"):
        out.problems.append((item, "bad_listing_row", f"line {line}: bad package path {package!r}"))
        return
    num = int(m.group(1))
    lic = (f.get("license_code") or "").strip() or None
    cit = (f.get("citation") or "").strip() or None
    lu = (f.get("last_updated") or "").strip() or None
    ret = f.get("is_retracted")
    out.rows.append(
        FileListRow(
            line=line,
            package=package,
            citation=cit,
            pmcid=f"PMC{num}",
            pmcid_num=num,
            pmid=_norm_pmid(f.get("pmid")),
            license_code=lic,
            last_updated=lu,
            is_retracted=parse_bool(ret) if ret not in (None, "") else None,
        )
    )


def parse_file_list_csv(text: str) -> FileList:
    """``oa_file_list.csv`` (6 columns, or 7 with Retracted), with or without a header row."""
    out = FileList()
    reader = csv.reader(io.StringIO(text))
    mapping: dict[str, int] | None = None
    for lineno, row in enumerate(reader, start=1):
        if not row or all(not c.strip() for c in row):
            continue
        if lineno == 1:
            mapping = _header_map(row)
            if mapping is not None:
                continue
        if mapping is not None:
            f = {fld: (row[i] if i < len(row) else None) for fld, i in mapping.items()}
        else:
            if len(row) not in (6, 7):
                out.problems.append(
                    (f"line {lineno}", "bad_listing_row", f"line {lineno}: {len(row)} columns")
                )
                continue
            f = dict(zip(_POSITIONAL, row, strict=False))
        _make_row(lineno, f, out)
    return out


def parse_file_list_txt(text: str) -> FileList:
    """``oa_file_list.txt``: first line a timestamp, then ``path\\tcitation\\tPMCID\\tPMID:n\\tlicense``."""
    out = FileList()
    lines = text.splitlines()
    start = 0
    if lines and "\t" not in lines[0]:
        out.generated = lines[0].strip()
        start = 1
    for idx in range(start, len(lines)):
        raw = lines[idx]
        if not raw.strip():
            continue
        cols = raw.split("\t")
        lineno = idx + 1
        if len(cols) < 3:
            out.problems.append((f"line {lineno}", "bad_listing_row", f"line {lineno}: {len(cols)} columns"))
            continue
        f: dict[str, str | None] = {
            "package": cols[0],
            "citation": cols[1],
            "pmcid": cols[2],
            "pmid": cols[3] if len(cols) > 3 else None,
            "license_code": cols[4] if len(cols) > 4 else None,
        }
        _make_row(lineno, f, out)
    return out


def parse_file_list(name: str, data: bytes) -> FileList:
    text = data.decode("utf-8-sig", errors="replace")
    if name.lower().endswith(".txt"):
        return parse_file_list_txt(text)
    return parse_file_list_csv(text)


def legacy_key(base_url: str, rel: str) -> str:
    """A file-list path as a key under ``base_url``, without doubling ``deprecated/``.

    ``legacy_key(".../pub/pmc/deprecated", "oa_package/08/e0/PMC13900.tar.gz")`` and
    ``legacy_key(".../pub/pmc/deprecated", "deprecated/oa_package/...")`` both give
    ``oa_package/08/e0/PMC13900.tar.gz``.
    """
    rel = rel.lstrip("/")
    if base_url.rstrip("/").rsplit("/", 1)[-1] == DEPRECATED and rel.startswith(DEPRECATED + "/"):
        rel = rel[len(DEPRECATED) + 1 :]
    return rel


def base_is_deprecated(base_url: str) -> bool:
    return base_url.rstrip("/").rsplit("/", 1)[-1] == DEPRECATED


# ------------------------------------------------------------------------------ extraction
class BadPackage(RejectionError):
    """A package refused as a whole (``bad_package``); its message is the detail."""

    def __init__(self, detail: str) -> None:
        super().__init__("bad_package", detail)
        self.args = (detail,)


@dataclass(frozen=True)
class TarLimits:
    max_member_bytes: int = 256 * 1024 * 1024
    max_total_bytes: int = 2048 * 1024 * 1024
    max_members: int = 20000


@dataclass(frozen=True)
class ExtractedFile:
    name: str
    path: Path
    md5: str
    size: int


@dataclass
class ExtractReport:
    files: list[ExtractedFile] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (member, reason, detail)
    not_selected: int = 0  # regular files left out by the wanted() filter
    n_members: int = 0


def _member_problem(m: tarfile.TarInfo) -> tuple[str, str] | None:
    name = m.name
    if "\x00" in name:
        return "unsafe_member", "NUL in name"
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "unsafe_member", "absolute path"
    if ".." in PurePosixPath(name.replace("\\", "/")).parts:
        return "unsafe_member", "'..' in path"
    if m.issym() or m.islnk():
        return "link_member", f"{'symlink' if m.issym() else 'hardlink'} -> {m.linkname}"
    if m.ischr() or m.isblk() or m.isfifo():
        return "special_member", "device file or fifo"
    if not (m.isreg() or m.isdir()):
        return "special_member", f"member type {m.type!r}"
    return None


def extract_package(
    tar_path: str | os.PathLike[str],
    dest_dir: str | os.PathLike[str],
    *,
    limits: TarLimits = TarLimits(),
    wanted: Callable[[str], bool] = lambda name: True,
) -> ExtractReport:
    """Safely extract the wanted regular files of a ``.tar.gz`` into ``dest_dir`` (flat, by base name).

    The files appear in ``dest_dir`` only if the whole package reads cleanly (extraction goes to a
    temporary sibling directory that is renamed at the end).
    """
    dest = Path(dest_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(dest, directory=True)
    report = ExtractReport()
    total = 0
    seen: set[str] = set()
    try:
        try:
            with tarfile.open(tar_path, mode="r:gz") as tf:
                for m in tf:
                    report.n_members += 1
                    if report.n_members > limits.max_members:
                        raise BadPackage(f"more than {limits.max_members} members")
                    problem = _member_problem(m)
                    if problem:
                        report.skipped.append((m.name, *problem))
                        continue
                    if m.isdir():
                        continue
                    base = PurePosixPath(m.name.replace("\\", "/")).name
                    if not base or base.startswith("."):
                        report.skipped.append((m.name, "unsafe_member", "hidden or empty file name"))
                        continue
                    if not wanted(base):
                        report.not_selected += 1
                        continue
                    if m.size > limits.max_member_bytes:
                        report.skipped.append(
                            (m.name, "member_too_large", f"{m.size} bytes > {limits.max_member_bytes}")
                        )
                        continue
                    if base in seen:
                        report.skipped.append((m.name, "duplicate_member", f"second file named {base}"))
                        continue
                    total += m.size
                    if total > limits.max_total_bytes:
                        raise BadPackage(f"extracted files exceed {limits.max_total_bytes} bytes")
                    seen.add(base)
                    src = tf.extractfile(m)
                    if src is None:
                        report.skipped.append((m.name, "special_member", "no data"))
                        continue
                    h = hashlib.md5()
                    out_path = tmp / base
                    n = 0
                    with src, open(out_path, "xb") as fh:
                        for block in iter(lambda: src.read(1 << 20), b""):  # noqa: B023
                            n += len(block)
                            h.update(block)
                            fh.write(block)
                    if n != m.size:
                        raise BadPackage(f"member {m.name} truncated ({n} of {m.size} bytes)")
                    report.files.append(ExtractedFile(base, dest / base, h.hexdigest(), n))
                # Read the compressed stream to its end so gzip checks its CRC and length.
                fobj = tf.fileobj
                if fobj is not None:
                    while fobj.read(1 << 20):
                        pass
        except BadPackage:
            raise
        except (tarfile.TarError, EOFError, zlib.error, OSError) as e:
            raise BadPackage(f"{type(e).__name__}: {e}") from e
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    report.files.sort(key=lambda f: f.name)
    return report
