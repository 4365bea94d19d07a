"""HTTP client: rate limit, retries/backoff, Retry-After, resumable verified downloads, mock server."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

import pytest
import requests

from pmcflow.pmc.http import FetchError, HttpClient, HttpSettings, RateLimiter, parse_retry_after
from pmcflow.pmc.mockserver import Fault, MockPMCServer
from pmcflow.pmc.transport import CommonPrefix, HttpTransport, ObjectInfo

BODY = os.urandom(200_000)
MD5 = hashlib.md5(BODY).hexdigest()


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def test_token_bucket_spacing_with_fake_clock():
    clk = FakeClock()
    lim = RateLimiter(4.0, clock=clk, sleep=clk.sleep)
    for _ in range(9):
        lim.acquire()
    # burst 1: the first request is free, then one every 1/4 s.
    assert clk.t == pytest.approx(2.0)
    assert all(s == pytest.approx(0.25) for s in clk.sleeps)
    clk.t += 10  # idle time does not bank more than one token
    lim.acquire()
    lim.acquire()
    assert clk.sleeps[-1] == pytest.approx(0.25)
    assert RateLimiter(None).acquire() == 0.0


def test_backoff_exponential_jitter_and_cap():
    c = HttpClient(replace(HttpSettings.from_section({}), backoff_s=1.0, backoff_max_s=10.0, rate_limit_per_s=None))
    for attempt, full in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (9, 10.0)]:
        d = c.backoff_delay(attempt)
        assert full / 2 <= d <= full
    assert c.backoff_delay(0, retry_after=7) == 7
    assert c.backoff_delay(0, retry_after=700) == 10.0  # capped at backoff_max_s
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=lambda: 1445412480.0 - 5) == pytest.approx(5.0)
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


@pytest.fixture()
def site(tmp_path):
    root = tmp_path / "site"
    (root / "PMC1.1").mkdir(parents=True)
    (root / "PMC1.1" / "big.bin").write_bytes(BODY)
    (root / "metadata").mkdir()
    for i in range(5):
        (root / "metadata" / f"PMC{i}.1.json").write_text("{}")
    return root


def _client(**kw) -> tuple[HttpClient, FakeClock]:
    clk = FakeClock()
    settings = replace(HttpSettings.from_section({}), rate_limit_per_s=None, retries=kw.pop("retries", 4), backoff_s=0.5,
                            backoff_max_s=4.0, timeout_s=5.0, **kw)
    return HttpClient(settings, sleep=clk.sleep), clk


pytestmark = pytest.mark.network


def test_download_verified_and_cached(site, tmp_path):
    with MockPMCServer(site) as srv:
        c, _ = _client()
        dest = tmp_path / "dl" / "big.bin"
        r = c.download(f"{srv.url}/PMC1.1/big.bin", dest, md5=MD5, size=len(BODY))
        assert dest.read_bytes() == BODY and r.md5 == MD5 and not r.cached
        r2 = c.download(f"{srv.url}/PMC1.1/big.bin", dest, md5=MD5)
        assert r2.cached and len(srv.log) == 1  # verified file present: no request
        assert not list(dest.parent.glob("*.part"))


@pytest.mark.parametrize("fault", [Fault("status", status=500, count=2), Fault("status", status=503),
                                   Fault("delay", delay_s=0.05)])
def test_retries_on_5xx(site, tmp_path, fault):
    with MockPMCServer(site, [fault]) as srv:
        c, clk = _client()
        c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b", md5=MD5)
        assert (tmp_path / "b").read_bytes() == BODY
        assert len(srv.log) == (1 if fault.kind == "delay" else fault.count + 1)
        assert c.stats.retries == len(clk.sleeps) == len(srv.log) - 1


def test_429_honours_retry_after(site, tmp_path):
    with MockPMCServer(site, [Fault("429", retry_after="3", count=2)]) as srv:
        c, clk = _client()
        assert c.get_bytes(f"{srv.url}/PMC1.1/big.bin") == BODY
        assert clk.sleeps == [3.0, 3.0]
        assert [r.status for r in srv.log] == [429, 429, 200]


def test_gives_up_after_retries(site, tmp_path):
    with MockPMCServer(site, [Fault("status", status=503, count=-1)]) as srv:
        c, clk = _client(retries=2)
        with pytest.raises(FetchError) as ei:
            c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b", md5=MD5)
        assert ei.value.reason == "http_error" and len(srv.log) == 3
        assert clk.sleeps[1] > clk.sleeps[0] * 0.9  # backoff grows (with jitter)
        assert not (tmp_path / "b").exists()


def test_drop_mid_body_resumes_with_range(site, tmp_path):
    with MockPMCServer(site, [Fault("drop", after_bytes=70_000), Fault("drop", after_bytes=50_000)]) as srv:
        c, _ = _client()
        r = c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b", md5=MD5, size=len(BODY))
        assert (tmp_path / "b").read_bytes() == BODY and r.resumed
        assert [(x.range, x.status, x.bytes_sent) for x in srv.log] == [
            (None, 200, 70_000), ("bytes=70000-", 206, 50_000), ("bytes=120000-", 206, 80_000)]
        assert c.stats.resumed == 2


def test_server_ignoring_range_restarts(site, tmp_path):
    faults = [Fault("drop", after_bytes=100_000), Fault("ignore_range")]
    with MockPMCServer(site, faults) as srv:
        c, _ = _client()
        c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b", md5=MD5)
        assert (tmp_path / "b").read_bytes() == BODY
        assert [(x.range, x.status) for x in srv.log] == [(None, 200), ("bytes=100000-", 200)]
        assert c.stats.range_ignored == 1


def test_truncated_body_content_length_too_large(site, tmp_path):
    with MockPMCServer(site, [Fault("truncate", extra_bytes=500)]) as srv:
        c, _ = _client()
        c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b", md5=MD5)
        assert (tmp_path / "b").read_bytes() == BODY
        # The whole body arrived but was announced longer: the Range follow-up gets 416, and the
        # bytes held verify.
        assert [x.status for x in srv.log] == [200, 416]
        data = c.get_bytes(f"{srv.url}/PMC1.1/big.bin")
        assert data == BODY


def test_truncated_get_bytes_retries(site):
    with MockPMCServer(site, [Fault("truncate", extra_bytes=10), Fault("drop", after_bytes=10)]) as srv:
        c, _ = _client()
        assert c.get_bytes(f"{srv.url}/PMC1.1/big.bin") == BODY
        assert len(srv.log) == 3


def test_wrong_bytes_deleted_and_refetched_then_refused(site, tmp_path):
    with MockPMCServer(site, [Fault("corrupt", count=1)]) as srv:
        c, _ = _client()
        c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b", md5=MD5)
        assert (tmp_path / "b").read_bytes() == BODY and c.stats.checksum_failures == 1
    with MockPMCServer(site, [Fault("corrupt", count=-1)]) as srv:
        c, _ = _client(checksum_retries=2)
        with pytest.raises(FetchError) as ei:
            c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "c", md5=MD5)
        assert ei.value.reason == "checksum_mismatch" and len(srv.log) == 3
        assert not (tmp_path / "c").exists() and not (tmp_path / "c.part").exists()
        with pytest.raises(FetchError) as ei:
            c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "d", size=len(BODY) + 1)
        assert ei.value.reason == "size_mismatch"


def test_stale_cached_file_is_replaced(site, tmp_path):
    dest = tmp_path / "b"
    dest.write_bytes(b"old bytes")
    with MockPMCServer(site) as srv:
        c, _ = _client()
        r = c.download(f"{srv.url}/PMC1.1/big.bin", dest, md5=MD5)
        assert not r.cached and dest.read_bytes() == BODY


def test_missing_and_too_large(site, tmp_path):
    with MockPMCServer(site, [Fault("missing", pattern="PMC1.1/*")]) as srv:
        c, _ = _client(max_file_mb=0.1)
        with pytest.raises(FetchError) as ei:
            c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b")
        assert ei.value.reason == "not_found"
        with pytest.raises(FetchError) as ei:
            c.download(f"{srv.url}/PMC1.1/big.bin", tmp_path / "b")
        assert ei.value.reason == "file_too_large"
        with pytest.raises(FetchError) as ei:
            c.get_bytes(f"{srv.url}/nope.json")
        assert ei.value.reason == "not_found"
        assert not (tmp_path / "b").exists() and not (tmp_path / "b.part").exists()


def test_connection_refused_is_retried_then_http_error(tmp_path):
    c, clk = _client(retries=1)
    with pytest.raises(FetchError) as ei:
        c.get_bytes("http://127.0.0.1:9/x")  # discard port: nothing listens
    assert ei.value.reason == "http_error" and len(clk.sleeps) == 1


def test_mock_server_range_head_404_and_listing(site):
    with MockPMCServer(site) as srv:
        r = requests.get(f"{srv.url}/PMC1.1/big.bin", headers={"Range": "bytes=10-19"}, timeout=5)
        assert r.status_code == 206 and r.content == BODY[10:20]
        assert r.headers["Content-Range"] == f"bytes 10-19/{len(BODY)}"
        r = requests.get(f"{srv.url}/PMC1.1/big.bin", headers={"Range": "bytes=-5"}, timeout=5)
        assert r.content == BODY[-5:]
        r = requests.get(f"{srv.url}/PMC1.1/big.bin", headers={"Range": f"bytes={len(BODY)}-"}, timeout=5)
        assert r.status_code == 416
        h = requests.head(f"{srv.url}/PMC1.1/big.bin", timeout=5)
        assert h.status_code == 200 and int(h.headers["Content-Length"]) == len(BODY)
        assert h.headers["ETag"] == f'"{MD5}"'
        r = requests.get(f"{srv.url}/PMC1.1/none.bin", timeout=5)
        assert r.status_code == 404 and b"<Code>NoSuchKey</Code>" in r.content
        assert requests.get(f"{srv.url}/../etc/passwd", timeout=5).status_code == 404
        # ListObjectsV2 paging (max-keys=2 -> 3 pages) and delimiter roll-up.
        c, _ = _client()
        t = HttpTransport(srv.url, c)
        keys = [e.key for e in t.list("metadata/", max_keys=2)]
        assert keys == [f"metadata/PMC{i}.1.json" for i in range(5)]
        assert sum(1 for x in srv.log if "list-type" in x.target) == 3
        top = list(t.list("", delimiter="/"))
        assert top == [CommonPrefix("PMC1.1/"), CommonPrefix("metadata/")]
        assert list(t.list("PMC1.", delimiter="/")) == [CommonPrefix("PMC1.1/")]
        one = list(t.list("PMC1.1/"))
        assert one == [ObjectInfo("PMC1.1/big.bin", len(BODY), MD5, one[0].last_modified)]


def test_fault_spec_parsing():
    f = Fault.parse("drop:PMC*/*.jpg:2:100")
    assert (f.kind, f.pattern, f.count, f.after_bytes) == ("drop", "PMC*/*.jpg", 2, 100)
    assert Fault.parse("429:*:-1:5").retry_after == "5"
    assert Fault.parse("status:*.xml:1:500").status == 500
    with pytest.raises(ValueError):
        Fault.parse("explode:*")
