"""A loopback HTTP server that behaves like the PMC Cloud bucket and the legacy FTP tree.

Serves a directory laid out like the bucket (``PMC<id>.<v>/...``, ``metadata/...``,
``inventory-reports/...``) and/or the legacy tree (``oa_file_list.csv``, ``oa_package/...``,
``deprecated/...``):

* static GET and HEAD with ``Content-Length``, ``ETag`` (md5), ``Accept-Ranges``;
  ``Range: bytes=a-b`` / ``a-`` / ``-n`` answered 206 + ``Content-Range`` (416 past the end);
* S3 ListObjectsV2 (``GET /?list-type=2&prefix=&delimiter=/&max-keys=&continuation-token=&start-after=``);
* ``404 NoSuchKey`` XML for a missing object;
* injectable faults, by path pattern (fnmatch over the request path + query, without the leading
  ``/``) and count: ``drop`` (close the connection mid-body), ``status`` (500/503/...), ``429``
  (with ``Retry-After``), ``delay`` (slow answer), ``trickle`` (the body a few bytes at a time,
  ``delay_s`` apart: every read succeeds, the transfer never ends in time), ``reset`` (the
  connection reset before any answer), ``truncate`` (Content-Length larger than the body
  sent), ``corrupt`` (same length, wrong bytes), ``missing`` (404), ``ignore_range`` (200 + full
  body whatever the Range header says);
* a request log (monotonic timestamps, status, bytes, fault) for tests about retries and rates.

``with MockPMCServer(root, faults=[Fault("drop", "PMC*/*.jpg")]) as srv: srv.url`` in tests;
``pmcflow serve-mock --root DIR --port 8000 --fault drop:*.jpg:1`` from the shell.
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import mimetypes
import os
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

from pmcflow.pmc.http import http_date
from pmcflow.pmc.transport import CommonPrefix, FileTransport, ObjectInfo

FAULT_KINDS = (
    "drop", "status", "429", "delay", "trickle", "reset", "truncate", "corrupt", "missing", "ignore_range"
)
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")
S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


@dataclass
class Fault:
    """One injected fault.  ``count`` = how many matching requests it hits (-1 = all)."""

    kind: str
    pattern: str = "*"
    count: int = 1
    status: int = 503  # status
    retry_after: str = "1"  # 429
    delay_s: float = 0.2  # delay; trickle: pause between pieces
    trickle_bytes: int = 16  # trickle: bytes per piece
    after_bytes: int | None = None  # drop: body bytes sent before the connection is cut (None = half)
    extra_bytes: int = 1000  # truncate: how much longer the announced Content-Length is
    fired: int = 0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r} (one of {', '.join(FAULT_KINDS)})")

    def matches(self, target: str) -> bool:
        return (self.count < 0 or self.fired < self.count) and fnmatch.fnmatchcase(target, self.pattern)

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``kind:pattern[:count[:param]]``; param = status, Retry-After, delay seconds, bytes."""
        parts = spec.split(":")
        if len(parts) < 2:
            raise ValueError(f"fault {spec!r} is not kind:pattern[:count[:param]]")
        f = cls(kind=parts[0], pattern=parts[1], count=int(parts[2]) if len(parts) > 2 and parts[2] else 1)
        if len(parts) > 3 and parts[3]:
            p = parts[3]
            if f.kind == "status":
                f.status = int(p)
            elif f.kind == "429":
                f.retry_after = p
            elif f.kind in ("delay", "trickle"):
                f.delay_s = float(p)
            elif f.kind == "drop":
                f.after_bytes = int(p)
            elif f.kind == "truncate":
                f.extra_bytes = int(p)
        return f


@dataclass(frozen=True)
class RequestRecord:
    t: float  # time.monotonic() when the request arrived
    method: str
    target: str  # path + query without the leading "/"
    key: str
    range: str | None
    status: int
    bytes_sent: int
    fault: str | None


@dataclass
class _State:
    root: Path
    bucket: str
    faults: list[Fault]
    log: list[RequestRecord] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    etags: dict[tuple[str, int, int], str] = field(default_factory=dict)
    in_flight: int = 0
    idle: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.idle = threading.Condition(self.lock)

    def settled_log(self, timeout: float = 5.0) -> list[RequestRecord]:
        """The log once no request is half-way through being answered, in order of arrival.

        A request is recorded when its answer is sent, so a client's next request (answered by
        another handler thread) can be recorded first; arrival times put them back in order."""
        with self.idle:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout)
            return sorted(self.log, key=lambda r: r.t)

    def take_fault(self, target: str) -> Fault | None:
        with self.lock:
            for f in self.faults:
                if f.matches(target):
                    f.fired += 1
                    return f
        return None

    def etag(self, p: Path) -> str:
        st = p.stat()
        k = (str(p), st.st_size, st.st_mtime_ns)
        with self.lock:
            if k in self.etags:
                return self.etags[k]
        h = hashlib.md5(p.read_bytes()).hexdigest()
        with self.lock:
            self.etags[k] = h
        return h


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pmcflow-mock/0.1"
    state: _State  # set on the subclass made per server

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base-class signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._serve(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    # ------------------------------------------------------------------------------ helpers
    def _record(self, target: str, key: str, status: int, sent: int, fault: Fault | None, t0: float) -> None:
        rec = RequestRecord(t0, self.command, target, key, self.headers.get("Range"), status, sent,
                            fault.kind if fault else None)
        with self.state.idle:
            self.state.log.append(rec)
            self.state.in_flight -= 1
            self.state.idle.notify_all()

    def _send_body(self, status: int, body: bytes, ctype: str, head: bool, headers: dict[str, str] | None = None) -> int:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)
            return len(body)
        return 0

    def _error(self, status: int, code: str, message: str, key: str, head: bool,
               headers: dict[str, str] | None = None) -> int:
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message>"
            f"<Key>{escape(key)}</Key><RequestId>mock</RequestId></Error>"
        ).encode()
        return self._send_body(status, body, "application/xml", head, headers)

    def _cut(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _reset(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0), before any byte of an answer."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    # -------------------------------------------------------------------------------- serve
    def _serve(self, head: bool) -> None:
        t0 = time.monotonic()
        with self.state.lock:
            self.state.in_flight += 1
        target = self.path.lstrip("/")
        parsed = urllib.parse.urlsplit(self.path)
        key = urllib.parse.unquote(parsed.path.lstrip("/"))
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        fault = self.state.take_fault(target)
        status, sent = 500, 0
        try:
            if fault and fault.kind == "delay":
                time.sleep(fault.delay_s)
            if fault and fault.kind == "reset":
                self._reset()
                self._record(target, key, 0, 0, fault, t0)
                return
            if fault and fault.kind == "status":
                status = fault.status
                sent = self._error(status, "InternalError" if status == 500 else "ServiceUnavailable",
                                   "injected fault", key, head)
                return
            if fault and fault.kind == "429":
                status = 429
                sent = self._error(429, "SlowDown", "injected fault", key, head, {"Retry-After": fault.retry_after})
                return
            if fault and fault.kind == "missing":
                status = 404
                sent = self._error(404, "NoSuchKey", "The specified key does not exist.", key, head)
                return
            if key == "" and query.get("list-type") == ["2"]:
                status, sent = self._list_objects(query, head)
                return
            status, sent = self._object(key, head, fault)
        finally:
            self._record(target, key, status, sent, fault, t0)

    def _resolve(self, key: str) -> Path | None:
        if not key or key.startswith("/") or any(p in ("..", ".") for p in key.split("/")) or "\x00" in key:
            return None
        p = self.state.root / key
        return p if p.is_file() else None

    def _object(self, key: str, head: bool, fault: Fault | None) -> tuple[int, int]:
        p = self._resolve(key)
        if p is None:
            return 404, self._error(404, "NoSuchKey", "The specified key does not exist.", key, head)
        data = p.read_bytes()
        size = len(data)
        if fault and fault.kind == "corrupt" and data:
            data = bytes(b ^ 0xFF for b in data[:64]) + data[64:]
        headers = {
            "ETag": f'"{self.state.etag(p)}"',
            "Last-Modified": http_date(p.stat().st_mtime),
            "Accept-Ranges": "bytes",
        }
        status = 200
        body = data
        rng = self.headers.get("Range")
        if rng and not (fault and fault.kind == "ignore_range"):
            m = _RANGE_RE.match(rng.strip())
            if m and (m.group(1) or m.group(2)):
                if m.group(1):
                    start = int(m.group(1))
                    end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
                else:
                    start, end = max(0, size - int(m.group(2))), size - 1
                if start >= size or start > end:
                    return 416, self._error(416, "InvalidRange", "The requested range is not satisfiable",
                                            key, head, {"Content-Range": f"bytes */{size}"})
                status = 206
                body = data[start : end + 1]
                headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        ctype = mimetypes.guess_type(key)[0] or "application/octet-stream"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        announced = len(body) + (fault.extra_bytes if fault and fault.kind == "truncate" else 0)
        self.send_header("Content-Length", str(announced))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return status, 0
        if fault and fault.kind == "drop":
            n = fault.after_bytes if fault.after_bytes is not None else len(body) // 2
            n = min(n, max(len(body) - 1, 0))
            self.wfile.write(body[:n])
            self._cut()
            return status, n
        if fault and fault.kind == "trickle":
            sent = 0
            try:
                for i in range(0, len(body), max(1, fault.trickle_bytes)):
                    self.wfile.write(body[i : i + fault.trickle_bytes])
                    self.wfile.flush()
                    sent += len(body[i : i + fault.trickle_bytes])
                    time.sleep(fault.delay_s)
            except OSError:  # the client gave up (its deadline): what a slow server sees
                self.close_connection = True
            return status, sent
        self.wfile.write(body)
        if fault and fault.kind == "truncate":
            self._cut()
        return status, len(body)

    def _list_objects(self, query: dict[str, list[str]], head: bool) -> tuple[int, int]:
        def q(name: str, default: str = "") -> str:
            return query.get(name, [default])[0]

        prefix = q("prefix")
        delimiter = q("delimiter") or None
        if delimiter not in (None, "/"):
            return 400, self._error(400, "InvalidArgument", "mock supports only delimiter=/", "", head)
        try:
            max_keys = max(0, min(1000, int(q("max-keys", "1000"))))
        except ValueError:
            return 400, self._error(400, "InvalidArgument", "bad max-keys", "", head)
        token = q("continuation-token")
        after = q("start-after")
        if token:
            try:
                after = base64.urlsafe_b64decode(token.encode()).decode()
            except (ValueError, UnicodeDecodeError):
                return 400, self._error(400, "InvalidArgument", "The continuation token provided is incorrect",
                                        "", head)
        transport = FileTransport(self.state.root)
        entries = []
        for e in transport.list(prefix, delimiter):
            name = e.prefix if isinstance(e, CommonPrefix) else e.key
            if after and name.encode() <= after.encode():
                continue
            entries.append(e)
        page = entries[:max_keys]
        truncated = len(entries) > max_keys
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>\n',
            f'<ListBucketResult xmlns="{S3_NS}">',
            f"<Name>{escape(self.state.bucket)}</Name><Prefix>{escape(prefix)}</Prefix>",
            f"<KeyCount>{len(page)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>",
        ]
        if delimiter:
            parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
        parts.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        if token:
            parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
        if truncated and page:
            last = page[-1]
            name = last.prefix if isinstance(last, CommonPrefix) else last.key
            nxt = base64.urlsafe_b64encode(name.encode()).decode()
            parts.append(f"<NextContinuationToken>{escape(nxt)}</NextContinuationToken>")
        for e in page:
            if isinstance(e, ObjectInfo):
                p = self.state.root / e.key
                parts.append(
                    f"<Contents><Key>{escape(e.key)}</Key>"
                    f"<LastModified>{time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(p.stat().st_mtime))}"
                    f"</LastModified><ETag>&quot;{self.state.etag(p)}&quot;</ETag><Size>{e.size}</Size>"
                    "<StorageClass>STANDARD</StorageClass></Contents>"
                )
            else:
                parts.append(f"<CommonPrefixes><Prefix>{escape(e.prefix)}</Prefix></CommonPrefixes>")
        parts.append("</ListBucketResult>")
        return 200, self._send_body(200, "".join(parts).encode(), "application/xml", head)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients that hang up (after a dropped body, at shutdown) are normal here.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class MockPMCServer:
    """Threaded loopback server over ``root``; use as a context manager."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        faults: Iterable[Fault] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bucket: str = "pmc-oa-opendata",
    ) -> None:
        self.state = _State(Path(root), bucket, list(faults))
        handler = type("MockPMCHandler", (_Handler,), {"state": self.state})
        self.httpd = _QuietServer((host, port), handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def log(self) -> list[RequestRecord]:
        """Requests answered so far (waits for any request being answered to be logged)."""
        return self.state.settled_log()

    @property
    def faults(self) -> list[Fault]:
        return self.state.faults

    def add_fault(self, fault: Fault) -> None:
        with self.state.lock:
            self.state.faults.append(fault)

    def clear(self) -> None:
        """Forget the request log and every fault."""
        with self.state.lock:
            self.state.log.clear()
            self.state.faults.clear()

    def requests(self, pattern: str = "*") -> list[RequestRecord]:
        return [r for r in self.log if fnmatch.fnmatchcase(r.target, pattern)]

    def start(self) -> MockPMCServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="mock-pmc", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> MockPMCServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def cli(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="pmcflow serve-mock", description="Serve a PMC layout over loopback HTTP.")
    p.add_argument("--root", required=True, help="Directory laid out like the bucket and/or the FTP tree.")
    p.add_argument("--host", default="127.0.0.1", help="Address to bind (default 127.0.0.1).")
    p.add_argument("--port", type=int, default=0, help="Port (0 = any free port).")
    p.add_argument("--fault", action="append", default=[], metavar="KIND:PATTERN[:COUNT[:PARAM]]",
                   help=f"Inject a fault ({', '.join(FAULT_KINDS)}); COUNT -1 = always. Repeatable.")
    args = p.parse_args(list(argv))
    srv = MockPMCServer(args.root, [Fault.parse(f) for f in args.fault], host=args.host, port=args.port)
    print(f"serving {args.root} at {srv.url}", flush=True)
    try:
        srv.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.httpd.server_close()
    return 0
