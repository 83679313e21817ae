"""A real threaded HTTP/1.1 server on 127.0.0.1 (random port) serving fixture feeds.

Used by the poller tests and ``bench/bench_poller.py``; also runnable on its own::

    python tests/http_fixture_server.py [--ports N]   # prints the base URL(s), serves until Ctrl-C

Routes (all GET):

=====================================  =========================================================
``/feeds/<file>``                      fixture from tests/fixtures/feeds with a real ETag and
                                       Last-Modified; answers 304 to If-None-Match (first) or
                                       If-Modified-Since
``/m/<name>``                          a mutable feed (:meth:`FixtureServer.set_feed`), with
                                       validators, optional extra headers
``/noval/<name>``                      the same mutable feed without any validator (body-hash rule)
``/redir/<c1>/<c2>/.../-/<path>``      a redirect chain: each hop answers the next status code
``/loop/<n>``                          redirects forever
``/status/<code>``                     an empty answer with that status
``/flaky/<key>/<n>/<file>``            500 for the first n requests of ``key``, then the fixture
``/ratelimit/seconds/<n>``             429 with ``Retry-After: <n>``
``/ratelimit/date/<n>``                429 with ``Retry-After: <HTTP-date now+n>``
``/unavailable/<n>``                   503 with ``Retry-After: <n>``
``/slow/<seconds>/<file>``             waits, then serves the fixture (past the client timeout)
``/trickle/<seconds>``                 200, then one byte every 50 ms for that long
``/big/<mb>``                          a generated body of that many MB, chunked (no length)
``/big-cl/<mb>``                       the same with Content-Length
``/bomb``                              a gzip bomb (~1 GiB decoded from ~1 MiB), built at runtime
``/gzip/<file>``, ``/deflate/<file>``  the fixture, content-encoded
``/html/<file>``                       an HTML fixture as ``200 text/html``
``/html403/<file>``                    an HTML fixture as ``403 text/html``
``/private-redirect``                  302 to http://10.0.0.1/feed.xml
``/metadata-redirect``                 301 to http://169.254.169.254/latest/meta-data/
``/localhost-redirect/<file>``         302 to http://localhost:<port>/feeds/<file>
``/scheme-redirect``                   302 to file:///etc/passwd
``/cache/<max-age>/<file>``            the fixture with ``Cache-Control: max-age=<n>``
``/expires/<seconds>/<file>``          the fixture with ``Expires`` = Date + seconds
``/auth/<file>``                       requires HTTP basic auth ``user:secret``
``/bench/<i>``                         small generated feeds: even i stable (304 with validators),
                                       odd i a new item on every request (200)
=====================================  =========================================================

Every request is recorded (path and headers) in :attr:`FixtureServer.requests`.
"""

from __future__ import annotations

import base64
import email.utils
import gzip
import hashlib
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "feeds"
FIXED_LAST_MODIFIED = "Mon, 06 May 2024 08:00:00 GMT"


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    at: float
    client_port: int = 0  # the client's source port: one port = one (kept-alive) connection


@dataclass(slots=True)
class MutableFeed:
    body: bytes
    etag: str
    last_modified: str
    content_type: str = "application/rss+xml; charset=utf-8"
    extra_headers: tuple[tuple[str, str], ...] = ()


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=8).hexdigest() + '"'


def rss_feed(title: str, items: list[tuple[str, str]], *, ttl: int | None = None) -> bytes:
    """A small RSS 2.0 document; items are (guid, title)."""
    parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel><title>{title}</title>'
             f"<link>https://fixture.example/</link><description>generated</description>"]
    if ttl is not None:
        parts.append(f"<ttl>{ttl}</ttl>")
    for guid, t in items:
        parts.append(f"<item><title>{t}</title><link>https://fixture.example/{guid}</link>"
                     f"<guid>{guid}</guid><pubDate>Mon, 06 May 2024 08:00:00 GMT</pubDate>"
                     f"<description>{t} body text</description></item>")
    parts.append("</channel></rss>\n")
    return "".join(parts).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # one send per response (status line, headers and body are buffered until the handler
    # returns) and TCP_NODELAY: otherwise Nagle + delayed ACK add ~40 ms to every request
    wbufsize = 64 * 1024
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    # ---- helpers ---------------------------------------------------------------------
    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None,
              content_type: str | None = "application/rss+xml; charset=utf-8") -> None:
        self.send_response(code)
        h = dict(headers or {})
        if content_type and code not in (204, 304):
            h.setdefault("Content-Type", content_type)
        if code != 304:
            h.setdefault("Content-Length", str(len(body)))
        for k, v in h.items():
            self.send_header(k, v)
        self.end_headers()
        if body and code not in (204, 304):
            self.wfile.write(body)

    def _conditional(self, body: bytes, etag: str | None, last_modified: str | None,
                     extra: dict[str, str] | None = None, content_type: str | None = None) -> None:
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        headers = dict(extra or {})
        if etag:
            headers["ETag"] = etag
        if last_modified:
            headers["Last-Modified"] = last_modified
        not_modified = False
        if inm is not None and etag:
            tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
            not_modified = etag in tags or "*" in tags
        elif ims is not None and last_modified:
            a = email.utils.parsedate_to_datetime(ims)
            b = email.utils.parsedate_to_datetime(last_modified)
            not_modified = a is not None and b is not None and b <= a
        if not_modified:
            self._send(304, headers=headers)
        else:
            self._send(200, body, headers, content_type or "application/rss+xml; charset=utf-8")

    def _fixture(self, name: str) -> bytes | None:
        p = (FIXTURES / name).resolve()
        if p.parent != FIXTURES or not p.is_file():
            return None
        return p.read_bytes()

    def _serve_fixture(self, name: str, extra: dict[str, str] | None = None) -> None:
        body = self._fixture(name)
        if body is None:
            self._send(404, b"not found", content_type="text/plain")
            return
        ct = "text/html; charset=utf-8" if name.endswith(".html") else "application/rss+xml; charset=utf-8"
        self._conditional(body, _etag(body), FIXED_LAST_MODIFIED, extra, ct)

    def _stream(self, total: int, with_length: bool, chunk: int = 256 * 1024) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/rss+xml")
        if with_length:
            self.send_header("Content-Length", str(total))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        head = b'<?xml version="1.0"?><rss version="2.0"><channel><title>big</title><description>'
        block = b"x" * chunk
        sent = 0
        try:
            first = True
            while sent < total:
                data = head + block[len(head):] if first else block
                first = False
                data = data[: total - sent]
                if with_length:
                    self.wfile.write(data)
                else:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                sent += len(data)
            if not with_length:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # ---- routing ---------------------------------------------------------------------
    def do_GET(self) -> None:
        srv = self.server
        srv.record(self.path, dict(self.headers.items()), int(self.client_address[1]))
        parts = [p for p in self.path.split("?", 1)[0].split("/") if p]
        try:
            self._route(parts)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _route(self, parts: list[str]) -> None:
        srv = self.server
        head = parts[0] if parts else ""
        if head == "feeds" and len(parts) == 2:
            self._serve_fixture(parts[1])
        elif head in ("m", "noval") and len(parts) == 2:
            feed = srv.get_feed(parts[1])
            if feed is None:
                self._send(404, b"no such feed", content_type="text/plain")
            elif head == "m":
                self._conditional(feed.body, feed.etag, feed.last_modified, dict(feed.extra_headers),
                                  feed.content_type)
            else:
                self._send(200, feed.body, dict(feed.extra_headers), feed.content_type)
        elif head == "redir" and "-" in parts:
            i = parts.index("-")
            codes, rest = parts[1:i], parts[i + 1:]
            if not codes:
                self._route(rest)
                return
            nxt = "/redir/" + "/".join([*codes[1:], "-", *rest]) if codes[1:] else "/" + "/".join(rest)
            self._send(int(codes[0]), b"", {"Location": nxt}, content_type=None)
        elif head == "loop":
            n = int(parts[1]) if len(parts) > 1 else 0
            self._send(302, b"", {"Location": f"/loop/{n + 1}"}, content_type=None)
        elif head == "status" and len(parts) == 2:
            code = int(parts[1])
            self._send(code, b"" if code == 304 else f"status {code}\n".encode(), content_type="text/plain")
        elif head == "flaky" and len(parts) == 4:
            n = srv.bump(f"flaky:{parts[1]}")
            if n <= int(parts[2]):
                self._send(500, b"internal error\n", content_type="text/plain")
            else:
                self._serve_fixture(parts[3])
        elif head == "ratelimit" and len(parts) == 3:
            n = int(parts[2])
            ra = str(n) if parts[1] == "seconds" else email.utils.formatdate(time.time() + n, usegmt=True)
            self._send(429, b"slow down\n", {"Retry-After": ra}, content_type="text/plain")
        elif head == "unavailable":
            headers = {"Retry-After": parts[1]} if len(parts) > 1 else {}
            self._send(503, b"maintenance\n", headers, content_type="text/plain")
        elif head == "slow" and len(parts) == 3:
            srv.stopping.wait(float(parts[1]))
            self._serve_fixture(parts[2])
        elif head == "trickle" and len(parts) == 2:
            self.send_response(200)
            self.send_header("Content-Type", "application/rss+xml")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            deadline = time.monotonic() + float(parts[1])
            self.wfile.write(b"<")
            while time.monotonic() < deadline and not srv.stopping.is_set():
                self.wfile.write(b" ")
                self.wfile.flush()
                srv.stopping.wait(0.05)
            self.close_connection = True
        elif head in ("big", "big-cl") and len(parts) == 2:
            self._stream(int(float(parts[1]) * 1024 * 1024), with_length=head == "big-cl")
        elif head == "bomb":
            body = srv.gzip_bomb()
            self._send(200, body, {"Content-Encoding": "gzip"})
        elif head in ("gzip", "deflate") and len(parts) == 2:
            raw = self._fixture(parts[1]) or b""
            enc = gzip.compress(raw) if head == "gzip" else zlib.compress(raw)
            self._send(200, enc, {"Content-Encoding": head})
        elif head in ("html", "html403") and len(parts) == 2:
            body = self._fixture(parts[1]) or b"<html><body>error</body></html>"
            self._send(200 if head == "html" else 403, body, content_type="text/html; charset=utf-8")
        elif head == "private-redirect":
            self._send(302, b"", {"Location": "http://10.0.0.1/feed.xml"}, content_type=None)
        elif head == "metadata-redirect":
            self._send(301, b"", {"Location": "http://169.254.169.254/latest/meta-data/"},
                       content_type=None)
        elif head == "localhost-redirect" and len(parts) == 2:
            self._send(302, b"", {"Location": f"http://localhost:{srv.port}/feeds/{parts[1]}"},
                       content_type=None)
        elif head == "goto" and len(parts) == 2:  # /goto/<percent-encoded absolute URL>
            self._send(302, b"", {"Location": urllib.parse.unquote(parts[1])}, content_type=None)
        elif head == "scheme-redirect":
            self._send(302, b"", {"Location": "file:///etc/passwd"}, content_type=None)
        elif head == "cache" and len(parts) == 3:
            self._serve_fixture(parts[2], {"Cache-Control": f"public, max-age={int(parts[1])}"})
        elif head == "expires" and len(parts) == 3:
            now = time.time()
            self._serve_fixture(parts[2], {"Date": email.utils.formatdate(now, usegmt=True),
                                           "Expires": email.utils.formatdate(now + int(parts[1]), usegmt=True)})
        elif head == "auth" and len(parts) == 2:
            want = "Basic " + base64.b64encode(b"user:secret").decode()
            if self.headers.get("Authorization") != want:
                self._send(401, b"auth required\n", {"WWW-Authenticate": 'Basic realm="f"'},
                           content_type="text/plain")
            else:
                self._serve_fixture(parts[1])
        elif head == "bench" and len(parts) == 2:
            i = int(parts[1])
            if i % 2 == 0:
                body = srv.bench_stable(i)
                self._conditional(body, _etag(body), FIXED_LAST_MODIFIED)
            else:
                n = srv.bump(f"bench:{i}")
                items = [(f"b{i}-{k}", f"Bench {i} item {k}") for k in range(n, n + 10)]
                body = rss_feed(f"bench {i}", items)
                self._send(200, body, {"ETag": f'"{i}-{n}"'})
        else:
            self._send(404, b"no route\n", content_type="text/plain")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024
    owner: FixtureServer

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return  # clients hanging up early (size caps, timeouts) are expected here
        super().handle_error(request, client_address)

    def record(self, path: str, headers: dict[str, str], port: int = 0) -> None:
        self.owner._record(path, headers, port)

    def bump(self, key: str) -> int:
        return self.owner._bump(key)

    def get_feed(self, name: str) -> MutableFeed | None:
        return self.owner._feeds.get(name)

    @property
    def stopping(self) -> threading.Event:
        return self.owner._stopping

    def gzip_bomb(self) -> bytes:
        return self.owner._gzip_bomb()

    def bench_stable(self, i: int) -> bytes:
        return self.owner._bench_stable(i)


class FixtureServer:
    """Start with :meth:`start` (or as a context manager); :attr:`base_url` is
    ``http://127.0.0.1:<port>``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counters: dict[str, int] = {}
        self._feeds: dict[str, MutableFeed] = {}
        self._bomb: bytes | None = None
        self._bench: dict[int, bytes] = {}
        self.requests: list[RecordedRequest] = []
        self.record_requests = True
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> FixtureServer:
        httpd = _Server((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fixture-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FixtureServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + ("" if path.startswith("/") else "/") + path

    # state
    def _record(self, path: str, headers: dict[str, str], port: int = 0) -> None:
        if not self.record_requests:
            return
        with self._lock:
            self.requests.append(RecordedRequest(path, headers, time.monotonic(), port))

    def _bump(self, key: str) -> int:
        with self._lock:
            self._counters[key] = self._counters.get(key, 0) + 1
            return self._counters[key]

    def requests_for(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def set_feed(self, name: str, body: bytes, *, content_type: str = "application/rss+xml; charset=utf-8",
                 headers: dict[str, str] | None = None, last_modified: str | None = None) -> None:
        """Create or replace a mutable feed; ETag and Last-Modified change with the body."""
        with self._lock:
            old = self._feeds.get(name)
            if last_modified is None:
                if old is not None and old.body == body:
                    last_modified = old.last_modified
                else:
                    last_modified = email.utils.formatdate(time.time(), usegmt=True)
            self._feeds[name] = MutableFeed(body, _etag(body), last_modified, content_type,
                                            tuple((headers or {}).items()))

    def _gzip_bomb(self) -> bytes:
        with self._lock:
            if self._bomb is None:
                # one gzip member of 64 MiB of zeros (~64 KiB) repeated: ~1 GiB decoded
                member = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)
                self._bomb = member * 16
            return self._bomb

    def _bench_stable(self, i: int) -> bytes:
        with self._lock:
            b = self._bench.get(i)
            if b is None:
                b = rss_feed(f"bench {i}", [(f"s{i}-{k}", f"Stable {i} item {k}") for k in range(10)])
                self._bench[i] = b
            return b


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ports", type=int, default=1, help="serve on this many random ports (origins)")
    ap.add_argument("--quiet", action="store_true", help="do not record requests")
    args = ap.parse_args()
    servers = []
    for i in range(max(args.ports, 1)):
        srv = FixtureServer(port=args.port if i == 0 else 0)
        srv.record_requests = not args.quiet
        servers.append(srv.start())
    print(" ".join(s.base_url for s in servers), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
