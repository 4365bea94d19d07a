"""HTTP client for PMC downloads: rate limit, retries, resumable verified downloads.

* Every request attempt (retries included) takes one token from a token bucket
  (``http.rate_limit_per_s``, burst 1), so a job never exceeds the configured rate.
* 5xx, 429, timeouts, connection errors and bodies cut short are retried with exponential backoff
  and jitter (``backoff_s * 2**attempt``, capped at ``backoff_max_s``, half fixed, half random);
  a ``Retry-After`` header (seconds or HTTP date) replaces the backoff, capped at ``backoff_max_s``.
* :meth:`HttpClient.download` streams into ``<dest>.part``; after a drop it resumes with
  ``Range: bytes=<have>-`` (a server that ignores Range and answers 200 restarts the file); the file
  is renamed to ``dest`` only after its size and md5 match what the source promised.  A file whose
  checksum or size is wrong is deleted and fetched again (``checksum_retries`` times), then refused.
* A ``dest`` already present and verified is not fetched again, so a rerun after a crash resumes.
* Every attempt has a total deadline (``deadline_s``): a watchdog shuts the socket down when it
  passes, because the per-read ``timeout_s`` never fires on a server that trickles a byte at a time.
* When the retries are used up the :class:`FetchError` is ``transient``: the acquire stage records
  the article as a pending retry (not a rejection) and the next run fetches it again.

Clocks and sleeps are injectable so tests never wait for real.
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import requests
import urllib3

from pmcflow.errors import RejectionError
from pmcflow.settings import Settings
from pmcflow.tables import file_md5

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
NOT_FOUND_STATUSES = frozenset({404, 410})
CHUNK_BYTES = 1 << 16
_CONTENT_RANGE_RE = re.compile(r"^bytes\s+(\d+)-(\d+)/(\d+|\*)$")

# Errors that mean "the transfer broke; try again (resuming if possible)".
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
    urllib3.exceptions.ProtocolError,
    urllib3.exceptions.ReadTimeoutError,
    ConnectionError,
    TimeoutError,  # DeadlineExceeded included
)


class FetchError(RejectionError):
    """A file could not be fetched.  ``reason`` is a machine-readable code.

    not_found, http_error, http_status, deadline_exceeded, checksum_mismatch, size_mismatch,
    file_too_large, bad_key.  ``transient`` is true when the cause may go away by itself (5xx, 429,
    resets, timeouts, deadlines after every retry was used): such a failure is retried on the next
    run, never recorded as final.
    """

    def __init__(
        self,
        reason: str,
        detail: str,
        *,
        url: str = "",
        status: int | None = None,
        transient: bool = False,
    ) -> None:
        super().__init__(reason, detail)
        if url:
            self.args = (f"{self.args[0]} ({url})",)
        self.url = url
        self.status = status
        self.transient = transient


class DeadlineExceeded(TimeoutError):
    """One transfer attempt ran past ``deadline_s`` (the watchdog cut its socket)."""


class _Watchdog:
    """Shut a response's socket down once ``deadline_s`` has passed since the attempt started.

    A blocked read then returns at once (EOF or an error); leaving the block turns whatever the read
    raised (a transient error) or returned (a short body) into :class:`DeadlineExceeded`.  Other
    exceptions (``file_too_large``) pass through unchanged.
    """

    def __init__(self, resp: requests.Response, deadline_s: float) -> None:
        self.fired = False
        self._resp = resp
        self._timer = threading.Timer(max(0.0, deadline_s), self._fire)
        self._timer.daemon = True
        self.deadline_s = deadline_s

    def _fire(self) -> None:
        self.fired = True
        conn = getattr(self._resp.raw, "connection", None)
        sock = getattr(conn, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        self._timer.cancel()
        if self.fired and (exc_type is None or issubclass(exc_type, TRANSIENT_ERRORS)):
            raise DeadlineExceeded(f"transfer not finished after {self.deadline_s:g} s (deadline_s)") from exc


@dataclass(frozen=True)
class HttpSettings(Settings):
    """``http``, typed and frozen (defaults and ranges in the schema only). A library caller may
    set ``rate_limit_per_s`` to None (no limit) with :func:`dataclasses.replace`; a config cannot."""

    SECTION: ClassVar[tuple[str, ...]] = ("http",)

    rate_limit_per_s: float | None
    retries: int
    backoff_s: float
    backoff_max_s: float
    timeout_s: float
    deadline_s: float
    max_file_mb: float
    user_agent: str
    checksum_retries: int

    @property
    def max_bytes(self) -> int:
        return int(self.max_file_mb * 1024 * 1024)


class RateLimiter:
    """Token bucket: ``rate`` tokens per second, at most ``burst`` stored.  Thread-safe."""

    def __init__(
        self,
        rate_per_s: float | None,
        burst: float = 1.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_s is not None and rate_per_s <= 0:
            raise ValueError("rate_per_s must be > 0 (or None for no limit)")
        self.rate = rate_per_s
        self.burst = max(1.0, burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._last = clock()
        self._lock = threading.Lock()
        self.waited_s = 0.0

    def acquire(self) -> float:
        """Take one token, sleeping until one is available.  Returns the time waited."""
        if self.rate is None:
            return 0.0
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            wait = 0.0
            if self._tokens < 1.0:
                wait = (1.0 - self._tokens) / self.rate
                self._sleep(wait)
                now = self._clock()
                self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
                self._last = now
                # A sleep that returned early (fake clocks) still pays for the token.
                self._tokens = max(self._tokens, 1.0)
            self._tokens -= 1.0
            self.waited_s += wait
            return wait


@dataclass
class Stats:
    requests: int = 0
    retries: int = 0
    bytes_downloaded: int = 0
    files_downloaded: int = 0
    files_cached: int = 0  # already present and verified: not fetched again
    resumed: int = 0  # Range requests answered 206
    range_ignored: int = 0  # Range requests answered 200 (restart)
    checksum_failures: int = 0
    size_failures: int = 0
    sleep_s: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        d: dict[str, float | int] = dict(self.__dict__)
        d["sleep_s"] = round(self.sleep_s, 3)
        return d


@dataclass(frozen=True)
class DownloadResult:
    path: Path
    md5: str
    size: int
    cached: bool = False
    resumed: bool = False


def verify_file(path: Path, md5: str | None, size: int | None) -> tuple[bool, str, str]:
    """``(ok, reason, actual_md5)``: size checked first (cheap), then md5."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        return False, "size_mismatch", ""
    actual = file_md5(path)
    if md5 is not None and actual.lower() != md5.lower():
        return False, "checksum_mismatch", actual
    return True, "", actual


def reuse_verified(dest: Path, md5: str | None, size: int | None, stats: Stats) -> DownloadResult | None:
    """The cached ``dest`` when it verifies (a rerun or resumed run skips it); a bad one is removed."""
    if not dest.exists():
        return None
    ok, _, actual = verify_file(dest, md5, size)
    if ok:
        stats.files_cached += 1
        return DownloadResult(dest, actual, dest.stat().st_size, cached=True)
    dest.unlink()
    return None


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now())


@dataclass
class HttpClient:
    """A requests Session with rate limiting, retries and verified, resumable downloads."""

    settings: HttpSettings = field(default_factory=lambda: HttpSettings.from_section(None))
    session: requests.Session | None = None
    limiter: RateLimiter | None = None
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        if self.session is None:
            self.session = requests.Session()
        self.session.headers["User-Agent"] = self.settings.user_agent
        if self.limiter is None:
            self.limiter = RateLimiter(self.settings.rate_limit_per_s, sleep=self.sleep)

    # ---------------------------------------------------------------------------------- basics
    def close(self) -> None:
        if self.session is not None:
            self.session.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, url: str, headers: Mapping[str, str] | None = None) -> requests.Response:
        assert self.limiter is not None and self.session is not None
        self.limiter.acquire()
        self.stats.requests += 1
        resp = self.session.get(url, headers=dict(headers or {}), stream=True, timeout=self.settings.timeout_s)
        # We compare the bytes received with Content-Length ourselves: urllib3 would raise on a short
        # body and drop the bytes of the last read, which a resumed download wants to keep.
        if hasattr(resp.raw, "enforce_content_length"):
            resp.raw.enforce_content_length = False
        return resp

    def backoff_delay(self, attempt: int, retry_after: float | None = None) -> float:
        s = self.settings
        if retry_after is not None:
            return min(max(retry_after, 0.0), s.backoff_max_s)
        d = min(s.backoff_max_s, s.backoff_s * (2**attempt))
        return d / 2 + self.rng.uniform(0, d / 2)

    def _retry(
        self, attempt: int, url: str, what: str, retry_after: float | None = None, *, reason: str = "http_error"
    ) -> int:
        """Sleep before the next attempt, or raise a transient FetchError once ``retries`` are used up."""
        if attempt >= self.settings.retries:
            detail = f"{what} (gave up after {attempt + 1} attempts)"
            raise FetchError(reason, detail, url=url, transient=True)
        delay = self.backoff_delay(attempt, retry_after)
        self.stats.retries += 1
        self.stats.sleep_s += delay
        if delay > 0:
            self.sleep(delay)
        return attempt + 1

    @staticmethod
    def _status_error(resp: requests.Response, url: str) -> FetchError:
        """A status that retrying will not change (404/410 -> not_found; other 4xx -> http_status)."""
        if resp.status_code in NOT_FOUND_STATUSES:
            return FetchError("not_found", f"HTTP {resp.status_code}", url=url, status=resp.status_code)
        return FetchError("http_status", f"HTTP {resp.status_code}", url=url, status=resp.status_code)

    def _broken(self, attempt: int, url: str, e: BaseException, what: str = "") -> int:
        """Retry after a transfer that broke (reset, timeout, deadline)."""
        reason = "deadline_exceeded" if isinstance(e, DeadlineExceeded) else "http_error"
        return self._retry(attempt, url, f"{what}{type(e).__name__}: {e}", reason=reason)

    # ------------------------------------------------------------------------------- get bytes
    def get_bytes(self, url: str, max_bytes: int | None = None) -> bytes:
        """GET a (small) resource into memory, retrying transient failures."""
        limit = self.settings.max_bytes if max_bytes is None else max_bytes
        attempt = 0
        while True:
            try:
                resp = self._send(url)
            except TRANSIENT_ERRORS as e:
                attempt = self._broken(attempt, url, e)
                continue
            with contextlib.closing(resp):
                if resp.status_code in RETRY_STATUSES:
                    ra = parse_retry_after(resp.headers.get("Retry-After"))
                    attempt = self._retry(attempt, url, f"HTTP {resp.status_code}", ra)
                    continue
                if resp.status_code != 200:
                    raise self._status_error(resp, url)
                declared = resp.headers.get("Content-Length")
                if declared is not None and declared.isdigit() and int(declared) > limit:
                    raise FetchError("file_too_large", f"{declared} bytes > limit {limit}", url=url)
                buf = bytearray()
                try:
                    with _Watchdog(resp, self.settings.deadline_s):
                        for block in resp.iter_content(CHUNK_BYTES):
                            buf += block
                            if len(buf) > limit:
                                raise FetchError("file_too_large", f"more than {limit} bytes", url=url)
                except TRANSIENT_ERRORS as e:
                    attempt = self._broken(attempt, url, e, "body cut short: ")
                    continue
                if declared is not None and declared.isdigit() and len(buf) != int(declared):
                    attempt = self._retry(attempt, url, f"body cut short: {len(buf)} of {declared} bytes")
                    continue
                self.stats.bytes_downloaded += len(buf)
                return bytes(buf)

    # -------------------------------------------------------------------------------- download
    def download(
        self,
        url: str,
        dest: str | os.PathLike[str],
        *,
        md5: str | None = None,
        size: int | None = None,
    ) -> DownloadResult:
        """Download ``url`` to ``dest`` (atomically, verified against ``md5``/``size`` when given)."""
        dest = Path(dest)
        limit = self.settings.max_bytes
        if size is not None and size > limit:
            raise FetchError("file_too_large", f"{size} bytes > limit {limit}", url=url)
        cached = reuse_verified(dest, md5, size, self.stats)
        if cached is not None:
            return cached
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        attempt = 0
        verify_failures = 0
        resumed = False
        while True:
            offset = part.stat().st_size if part.exists() else 0
            headers = {"Range": f"bytes={offset}-"} if offset else {}
            try:
                resp = self._send(url, headers)
            except TRANSIENT_ERRORS as e:
                attempt = self._broken(attempt, url, e)
                continue
            expected_total: int | None = None
            with contextlib.closing(resp):
                status = resp.status_code
                if status in RETRY_STATUSES:
                    ra = parse_retry_after(resp.headers.get("Retry-After"))
                    attempt = self._retry(attempt, url, f"HTTP {status}", ra)
                    continue
                if status == 416 and offset:
                    # We already hold at least the whole object (e.g. a body that was complete but
                    # announced as longer).  Verify what we have below; restart if it is wrong.
                    expected_total = offset
                elif status == 206 and offset:
                    m = _CONTENT_RANGE_RE.match(resp.headers.get("Content-Range", ""))
                    if not m or int(m.group(1)) != offset:
                        part.unlink(missing_ok=True)
                        attempt = self._retry(attempt, url, "unexpected Content-Range")
                        continue
                    if m.group(3) != "*":
                        expected_total = int(m.group(3))
                    self.stats.resumed += 1
                    resumed = True
                elif status == 200:
                    if offset:
                        self.stats.range_ignored += 1
                        offset = 0
                    cl = resp.headers.get("Content-Length")
                    if cl is not None and cl.isdigit():
                        expected_total = int(cl)
                else:
                    part.unlink(missing_ok=True)
                    raise self._status_error(resp, url)
                if expected_total is not None and expected_total > limit:
                    part.unlink(missing_ok=True)
                    raise FetchError("file_too_large", f"{expected_total} bytes > limit {limit}", url=url)
                if status != 416:
                    try:
                        with _Watchdog(resp, self.settings.deadline_s):
                            self._stream_to(resp, part, offset, limit, url)
                    except TRANSIENT_ERRORS as e:
                        attempt = self._broken(attempt, url, e, "body cut short: ")
                        continue
            have = part.stat().st_size if part.exists() else 0
            if expected_total is not None and have < expected_total:
                attempt = self._retry(attempt, url, f"body cut short: {have} of {expected_total} bytes")
                continue
            ok, reason, actual = verify_file(part, md5, size)
            if not ok:
                part.unlink(missing_ok=True)
                if reason == "size_mismatch":
                    self.stats.size_failures += 1
                else:
                    self.stats.checksum_failures += 1
                verify_failures += 1
                if verify_failures > self.settings.checksum_retries:
                    got = have if reason == "size_mismatch" else actual
                    want = size if reason == "size_mismatch" else md5
                    raise FetchError(reason, f"expected {want}, got {got}", url=url)
                continue
            os.replace(part, dest)
            self.stats.files_downloaded += 1
            return DownloadResult(dest, actual, have, cached=False, resumed=resumed)

    def _stream_to(self, resp: requests.Response, part: Path, offset: int, limit: int, url: str) -> None:
        mode = "ab" if offset else "wb"
        written = offset
        with open(part, mode) as fh:
            for block in resp.iter_content(CHUNK_BYTES):
                written += len(block)
                if written > limit:
                    fh.close()
                    part.unlink(missing_ok=True)
                    raise FetchError("file_too_large", f"more than {limit} bytes", url=url)
                fh.write(block)
                self.stats.bytes_downloaded += len(block)


def http_date(ts: float) -> str:
    """RFC 7231 date (used by the mock server's Last-Modified / Retry-After)."""
    return email.utils.format_datetime(datetime.fromtimestamp(ts, tz=UTC), usegmt=True)
