"""Transports: one interface over an HTTPS bucket / FTP mirror and a local directory.

Keys are bucket-style paths relative to the source root (``metadata/PMC13900.1.json``,
``oa_package/08/e0/PMC13900.tar.gz``).  Both transports offer the same four operations, so the
``cloud``, ``ftp`` and ``local`` backends run the same code:

* :meth:`Transport.get` -- a small object into memory,
* :meth:`Transport.download` -- a verified file into the cache,
* :meth:`Transport.list` -- S3 ListObjectsV2 semantics (keys under a prefix, optionally rolled up
  into common prefixes at ``/``), sorted by key,
* :meth:`Transport.location` -- the URL or path recorded as provenance.
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from pmcflow.pmc.http import DownloadResult, FetchError, HttpClient, Stats, reuse_verified, verify_file


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int | None = None
    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True)
class CommonPrefix:
    prefix: str


ListEntry = ObjectInfo | CommonPrefix


def check_key(key: str) -> str:
    """Refuse keys that could escape the source root."""
    parts = key.split("/")
    if not key or key.startswith("/") or "\\" in key or any(p in ("..", ".") for p in parts) or "\x00" in key:
        raise FetchError("bad_key", f"unsafe key {key!r}")
    return key


class Transport(ABC):
    name: str = "?"
    stats: Stats

    @abstractmethod
    def location(self, key: str) -> str: ...

    @abstractmethod
    def get(self, key: str, max_bytes: int | None = None) -> bytes: ...

    @abstractmethod
    def download(
        self, key: str, dest: str | os.PathLike[str], *, md5: str | None = None, size: int | None = None
    ) -> DownloadResult: ...

    @abstractmethod
    def list(self, prefix: str, delimiter: str | None = None) -> Iterator[ListEntry]: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


# ----------------------------------------------------------------------------------------- HTTP
def _local(tag: object) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


def parse_list_objects_v2(xml: bytes) -> tuple[list[ListEntry], str | None]:
    """Parse one ListObjectsV2 page: ``(entries, next_continuation_token or None)``."""
    try:
        root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as e:
        raise FetchError("http_error", f"bad ListObjectsV2 XML: {e}") from e
    if _local(root.tag) == "Error":
        code = "".join(x.text or "" for x in root if _local(x.tag) == "Code")
        raise FetchError("http_error", f"S3 error {code}")
    entries: list[ListEntry] = []
    truncated = False
    token: str | None = None
    for el in root:
        name = _local(el.tag)
        if name == "Contents":
            f = {_local(c.tag): (c.text or "") for c in el}
            size = f.get("Size")
            entries.append(
                ObjectInfo(
                    key=f.get("Key", ""),
                    size=int(size) if size and size.isdigit() else None,
                    etag=f.get("ETag", "").strip('"') or None,
                    last_modified=f.get("LastModified") or None,
                )
            )
        elif name == "CommonPrefixes":
            for c in el:
                if _local(c.tag) == "Prefix" and c.text:
                    entries.append(CommonPrefix(c.text))
        elif name == "IsTruncated":
            truncated = (el.text or "").strip().lower() == "true"
        elif name == "NextContinuationToken":
            token = el.text
    if truncated and not token:
        raise FetchError("http_error", "ListObjectsV2 page truncated without NextContinuationToken")
    return entries, (token if truncated else None)


class HttpTransport(Transport):
    """A bucket or FTP tree over HTTP(S) (ListObjectsV2 for listing)."""

    name = "http"

    def __init__(self, base_url: str, client: HttpClient) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client
        self.stats = client.stats

    def location(self, key: str) -> str:
        return f"{self.base_url}/{urllib.parse.quote(check_key(key), safe='/')}"

    def get(self, key: str, max_bytes: int | None = None) -> bytes:
        return self.client.get_bytes(self.location(key), max_bytes)

    def download(
        self, key: str, dest: str | os.PathLike[str], *, md5: str | None = None, size: int | None = None
    ) -> DownloadResult:
        return self.client.download(self.location(key), dest, md5=md5, size=size)

    def list(self, prefix: str, delimiter: str | None = None, max_keys: int | None = None) -> Iterator[ListEntry]:
        token: str | None = None
        while True:
            q: dict[str, str] = {"list-type": "2", "prefix": prefix}
            if delimiter:
                q["delimiter"] = delimiter
            if max_keys:
                q["max-keys"] = str(max_keys)
            if token:
                q["continuation-token"] = token
            page = self.client.get_bytes(f"{self.base_url}/?{urllib.parse.urlencode(q)}")
            entries, token = parse_list_objects_v2(page)
            yield from entries
            if token is None:
                return

    def close(self) -> None:
        self.client.close()


# ----------------------------------------------------------------------------------------- file
def root_from_location(location: str) -> Path:
    """A directory path or ``file://`` URL -> Path."""
    if location.startswith("file:"):
        parsed = urllib.parse.urlparse(location)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"file URL with a remote host is not supported: {location}")
        return Path(urllib.request.url2pathname(parsed.path))
    return Path(location)


class FileTransport(Transport):
    """A local directory (or ``file://`` URL) laid out like the bucket or the FTP tree."""

    name = "file"

    def __init__(self, root: str | os.PathLike[str], max_file_mb: float = 512.0) -> None:
        self.root = root_from_location(os.fspath(root))
        if not self.root.is_dir():
            raise FileNotFoundError(f"local source root {self.root} is not a directory")
        self.max_bytes = int(max_file_mb * 1024 * 1024)
        self.stats = Stats()

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def location(self, key: str) -> str:
        return self._path(key).resolve().as_uri()

    def get(self, key: str, max_bytes: int | None = None) -> bytes:
        p = self._path(key)
        limit = self.max_bytes if max_bytes is None else max_bytes
        if not p.is_file():
            raise FetchError("not_found", "no such file", url=self.location(key))
        if p.stat().st_size > limit:
            raise FetchError("file_too_large", f"{p.stat().st_size} bytes > limit {limit}", url=str(p))
        self.stats.requests += 1
        data = p.read_bytes()
        self.stats.bytes_downloaded += len(data)
        return data

    def download(
        self, key: str, dest: str | os.PathLike[str], *, md5: str | None = None, size: int | None = None
    ) -> DownloadResult:
        src = self._path(key)
        dest = Path(dest)
        if not src.is_file():
            raise FetchError("not_found", "no such file", url=self.location(key))
        src_size = src.stat().st_size
        if src_size > self.max_bytes or (size is not None and size > self.max_bytes):
            raise FetchError("file_too_large", f"{src_size} bytes > limit {self.max_bytes}", url=str(src))
        cached = reuse_verified(dest, md5, size, self.stats)
        if cached is not None:
            return cached
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        self.stats.requests += 1
        shutil.copyfile(src, part)
        ok, reason, actual = verify_file(part, md5, size)
        if not ok:
            part.unlink(missing_ok=True)
            if reason == "size_mismatch":
                self.stats.size_failures += 1
            else:
                self.stats.checksum_failures += 1
            want = size if reason == "size_mismatch" else md5
            raise FetchError(reason, f"expected {want}", url=self.location(key))
        os.replace(part, dest)
        n = dest.stat().st_size
        self.stats.files_downloaded += 1
        self.stats.bytes_downloaded += n
        return DownloadResult(dest, actual, n)

    def list(self, prefix: str, delimiter: str | None = None) -> Iterator[ListEntry]:
        if delimiter not in (None, "/"):
            raise ValueError("FileTransport supports only the '/' delimiter")
        head, _, _ = prefix.rpartition("/")
        base = self.root / head if head else self.root
        if head:
            check_key(head)
        if not base.is_dir():
            return
        lead = f"{head}/" if head else ""
        if delimiter == "/":
            out: list[ListEntry] = []
            for entry in os.scandir(base):
                if entry.name.startswith("."):
                    continue
                key = lead + entry.name
                if not key.startswith(prefix):
                    continue
                if entry.is_dir():
                    out.append(CommonPrefix(key + "/"))
                elif entry.is_file():
                    out.append(ObjectInfo(key, entry.stat().st_size))
            out.sort(key=lambda e: (e.prefix if isinstance(e, CommonPrefix) else e.key).encode())
            yield from out
            return
        found: list[ObjectInfo] = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = os.path.relpath(dirpath, self.root)
            rel = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for fn in filenames:
                key = rel + fn
                if fn.startswith(".") or not key.startswith(prefix):
                    continue
                found.append(ObjectInfo(key, os.stat(os.path.join(dirpath, fn)).st_size))
        found.sort(key=lambda o: o.key.encode())
        yield from found
