"""The HTTP side of the poller: one polite, safe, conditional GET of a feed (httpx, async).

I/O only; every decision about what a response *means* is in :mod:`newsflow.polling`.

What one :meth:`HttpFetcher.fetch` does (the rules: docs/rules.md#requests and
docs/rules.md#retries-and-backoff):

- **Headers**: ``If-None-Match``/``If-Modified-Since`` as given by the caller,
  ``Accept: application/rss+xml, application/atom+xml, application/xml, text/xml;q=0.9``, a real
  ``User-Agent`` (some feeds block a library's default one), ``Accept-Encoding: gzip, deflate``.
- **Timeout**: two bounds. 30 s is the deadline of a whole attempt (connect, redirects, body),
  so a big feed on a slow link still completes, and 10 s bounds every single socket operation
  (connect, each read), so a dead server is noticed in 10 s and a trickling one is cut at 30 s.
  Both configurable.
- **Transient retries**: 2 retries after 1 s and 2 s for connection/protocol errors and
  500/502/503(no Retry-After)/504 (:func:`newsflow.polling.is_transient_failure`). Timeouts are
  not retried here: a timeout is retried once after 60 seconds, which the scheduler does.
- **Redirects** by hand, at most 5: every hop is recorded (301/308 vs 302/307 matter to the
  URL-adoption rule) and every hop passes the scheme and address checks.
- **Safety**: only http/https; the host is resolved and connections go only to addresses that
  are not loopback/private/link-local/multicast/reserved unless allowed by config -- checked in
  the connection backend itself, on the resolved IP we then connect to (no DNS-rebinding window,
  redirects included). Body streamed with a cap on wire bytes (default 10 MB; a larger
  Content-Length is refused before reading) and a separate cap on *decoded* bytes, enforced
  inside the decompressor (a gzip bomb stops after the cap, not after inflating).
  Credentials in a feed URL are sent (HTTP basic, same origin only) but never logged or stored:
  everything that leaves this module has passed :func:`newsflow.polling.redact_url`.
- Environment proxies are ignored (``trust_env=False``): a poller must not silently route
  through whatever ``HTTP_PROXY`` a shell happens to export.
"""

from __future__ import annotations

import asyncio
import logging
import select
import socket
import time
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import httpcore
import httpx

from newsflow import __version__
from newsflow.polling.rules import is_transient_failure
from newsflow.polling.safety import address_block_reason, redact_message, redact_url, scheme_allowed
from newsflow.polling.state import FetchKind, FetchOutcome, PollPolicy, RedirectHop

#: docs/rules.md#requests
ACCEPT = "application/rss+xml, application/atom+xml, application/xml, text/xml;q=0.9"
DEFAULT_USER_AGENT = f"newsflow/{__version__} (RSS/Atom feed poller; python-httpx/{httpx.__version__})"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class FetchConfig:
    """Fetcher settings. Defaults follow docs/rules.md#requests; tests shrink the times."""

    #: deadline of one attempt: connect + redirects + body (30 s per feed)
    timeout_s: float = 30.0
    #: bound on each socket operation: connect, each read/write (10 s)
    io_timeout_s: float = 10.0
    #: 2 retries (3 tries) ...
    retries: int = 2
    #: ... after 1 s and 2 s
    retry_backoff_s: tuple[float, ...] = (1.0, 2.0)
    max_redirects: int = 5
    #: cap on body bytes on the wire
    max_bytes: int = 10 * 1024 * 1024
    #: cap on decoded (decompressed) body bytes: the decompression-bomb guard
    max_decoded_bytes: int = 10 * 1024 * 1024
    #: allow private (RFC 1918/ULA/CGNAT) and loopback addresses (never link-local/metadata)
    allow_private: bool = False
    #: CIDRs allowed even though they are private/loopback/link-local (tests: 127.0.0.1/32)
    allowed_networks: tuple[str, ...] = ()
    user_agent: str = DEFAULT_USER_AGENT
    accept: str = ACCEPT
    accept_language: str | None = None
    #: connections kept per origin (scheme, host, port); the poller's concurrency caps
    #: (global, per registrable domain) are separate
    max_connections_per_origin: int = 4
    #: idle keep-alive connections are closed after this long (s)
    keepalive_s: float = 5.0
    verify_tls: bool = True


class BlockedAddressError(Exception):
    """The host resolves only to addresses the safety policy refuses."""


class BodyTooLargeError(Exception):
    """Body over the wire or decoded cap."""


class UnsupportedEncodingError(Exception):
    """A Content-Encoding we did not offer."""


# --------------------------------------------------------------------------------------------
# Connection backend that refuses private addresses after resolution
# --------------------------------------------------------------------------------------------

Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolve(host: str, port: int) -> list[str]:
    """All addresses of ``host`` (IP literals resolve to themselves without a DNS query)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        addr = str(sockaddr[0])
        if addr not in out:
            out.append(addr)
    return out


def _socket_readable(sock: socket.socket | None) -> bool:
    """Readable (data or EOF waiting) without reading; a closed socket counts as readable."""
    if sock is None or sock.fileno() < 0:
        return True
    p = select.poll()
    p.register(sock, select.POLLIN)
    return bool(p.poll(0))


class _CachedSocketStream(httpcore.AsyncNetworkStream):
    """Wraps an httpcore stream and answers ``get_extra_info("is_readable"/"socket")`` from a
    cached socket. httpcore's pool asks every idle connection "is_readable" on every request
    event, and anyio builds its typed-attribute table on each call: with 50 keep-alive
    connections that was ~3 ms of CPU per request."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._sock: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        return _CachedSocketStream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _socket_readable(self._sock)
        if info == "socket":
            return self._sock
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore network backend: resolve, drop refused addresses, connect to an allowed IP.

    Checking here (not before the request) covers every connection, redirects included, and
    connects to the very address that was checked, so DNS rebinding cannot slip in between.
    TLS still verifies the certificate against the URL's host name (httpcore passes it as SNI).
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        allowed_networks: Iterable[str] = (),
        resolver: Resolver | None = None,
    ) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._allow_private = allow_private
        self._allowed = tuple(allowed_networks)
        self._resolve = resolver or system_resolve

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        bare = host.strip("[]")
        try:
            addrs = await asyncio.wait_for(self._resolve(bare, port), timeout)
        except TimeoutError as e:
            msg = f"DNS resolution of {bare} timed out"
            raise httpcore.ConnectTimeout(msg) from e
        except OSError as e:
            msg = f"cannot resolve {bare}: {e}"
            raise httpcore.ConnectError(msg) from e
        allowed: list[str] = []
        reasons: list[str] = []
        for a in addrs:
            reason = address_block_reason(a, allow_private=self._allow_private,
                                          allowed_networks=self._allowed)
            if reason is None:
                allowed.append(a)
            else:
                reasons.append(f"{a} is a {reason}")
        if not allowed:
            msg = f"refused to connect to {bare}: {'; '.join(reasons) or 'no address'}"
            raise BlockedAddressError(msg)
        last: Exception | None = None
        for a in allowed:
            try:
                return _CachedSocketStream(await self._inner.connect_tcp(
                    a, port, timeout=timeout, local_address=local_address,
                    socket_options=socket_options))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                last = e
        assert last is not None
        raise last

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        msg = "unix sockets are not allowed"
        raise BlockedAddressError(msg)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PerOriginTransport(httpx.AsyncBaseTransport):
    """One small httpcore connection pool per origin (scheme, host, port).

    A single shared pool rescans all its connections on every request event, quadratically
    in the number of idle ones (httpcore 1.0): with 50 keep-alive connections that was the
    largest CPU cost of a poll. Small per-origin pools keep the scans tiny and also cap
    connections per origin (politeness). Pools idle longest are closed beyond ``max_pools``.
    All pools connect through one :class:`GuardedBackend`.
    """

    def __init__(self, config: FetchConfig, resolver: Resolver | None = None, *,
                 max_pools: int = 512) -> None:
        self._config = config
        self._ssl = httpx.create_ssl_context(verify=config.verify_tls, trust_env=False)
        self._backend = GuardedBackend(allow_private=config.allow_private,
                                       allowed_networks=config.allowed_networks, resolver=resolver)
        self._pools: dict[tuple[str, str, int | None], httpx.AsyncHTTPTransport] = {}
        self._max_pools = max_pools

    def _make(self) -> httpx.AsyncHTTPTransport:
        c = self._config
        transport = httpx.AsyncHTTPTransport(verify=self._ssl, trust_env=False)
        # httpx has no public hook for the network backend: swap its pool for one that uses ours
        # (httpx is pinned <1 in pyproject; tests/test_poller_http.py fails if this stops working)
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=self._ssl,
            max_connections=c.max_connections_per_origin,
            max_keepalive_connections=c.max_connections_per_origin,
            keepalive_expiry=c.keepalive_s,
            network_backend=self._backend,
        )
        return transport

    async def _evict(self) -> None:
        for key in list(self._pools):  # insertion order = least recently used first
            if len(self._pools) <= self._max_pools:
                return
            t = self._pools[key]
            if not t._pool.connections or all(conn.is_idle() for conn in t._pool.connections):
                del self._pools[key]
                await t.aclose()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = (request.url.scheme, request.url.host, request.url.port)
        t = self._pools.pop(key, None)
        if t is None:
            t = self._make()
        self._pools[key] = t  # most recently used last
        if len(self._pools) > self._max_pools:
            await self._evict()
        return await t.handle_async_request(request)

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for t in pools:
            await t.aclose()


def make_transport(config: FetchConfig, resolver: Resolver | None = None) -> PerOriginTransport:
    """The fetcher's transport: guarded connections, one small pool per origin."""
    return PerOriginTransport(config, resolver)


# --------------------------------------------------------------------------------------------
# Bounded content decoding (decompression-bomb guard)
# --------------------------------------------------------------------------------------------


class _ZlibStage:
    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._d = self._new()
        self._first = True

    def _new(self) -> Any:
        if self._encoding in ("gzip", "x-gzip"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        return zlib.decompressobj()  # deflate: zlib-wrapped; raw deflate handled below

    def feed(self, data: bytes, limit: int) -> bytes:
        out = bytearray()
        while data:
            try:
                chunk = self._d.decompress(data, limit - len(out) + 1)
            except zlib.error:
                if self._encoding == "deflate" and self._first:
                    # some servers send raw deflate without the zlib header
                    self._d = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._first = False
                    continue
                raise
            self._first = False
            out += chunk
            if len(out) > limit:
                msg = "decoded body over the cap"
                raise BodyTooLargeError(msg)
            if self._d.unconsumed_tail:
                data = self._d.unconsumed_tail
                if len(out) >= limit:
                    msg = "decoded body over the cap"
                    raise BodyTooLargeError(msg)
                continue
            if self._d.eof and self._d.unused_data:
                # concatenated gzip members
                data = self._d.unused_data
                self._d = self._new()
                continue
            break
        return bytes(out)

    def flush(self, limit: int) -> bytes:
        out: bytes = self._d.flush(max(limit, 0) + 1)
        if len(out) > limit:
            msg = "decoded body over the cap"
            raise BodyTooLargeError(msg)
        return out


class BoundedDecoder:
    """Removes Content-Encoding (gzip, deflate; chained) and never produces more than
    ``limit`` bytes: each decompress call is bounded with ``max_length``."""

    def __init__(self, content_encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.produced = 0
        encs = [e.strip().lower() for e in (content_encoding or "").split(",") if e.strip()]
        encs = [e for e in encs if e != "identity"]
        for e in encs:
            if e not in ("gzip", "x-gzip", "deflate"):
                msg = f"unsupported Content-Encoding {e!r}"
                raise UnsupportedEncodingError(msg)
        # decoding order is the reverse of the order the codings were applied
        self._stages = [_ZlibStage(e) for e in reversed(encs)]

    def feed(self, data: bytes) -> bytes:
        for st in self._stages:
            data = st.feed(data, self.limit - self.produced)
        self.produced += len(data)
        if self.produced > self.limit:
            msg = "decoded body over the cap"
            raise BodyTooLargeError(msg)
        return data

    def flush(self) -> bytes:
        data = b""
        for st in self._stages:  # each stage: feed what the previous one flushed, then flush
            remaining = self.limit - self.produced
            data = st.feed(data, remaining) if data else b""
            data += st.flush(remaining - len(data))
        self.produced += len(data)
        if self.produced > self.limit:
            msg = "decoded body over the cap"
            raise BodyTooLargeError(msg)
        return data


# --------------------------------------------------------------------------------------------
# The fetcher
# --------------------------------------------------------------------------------------------

Sleep = Callable[[float], Awaitable[None]]


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


def _strip_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]).geturl()


def _basic_auth(url: str) -> httpx.BasicAuth | None:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return None
    return httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))


class _RedactingFilter(logging.Filter):
    """httpx logs every request URL at INFO: strip credentials from log arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(redact_url(str(a)) if isinstance(a, httpx.URL | str) and "://" in str(a)
                                else a for a in record.args)
        elif isinstance(record.msg, str) and "://" in record.msg:
            record.msg = redact_message(record.msg) or ""
        return True


def install_log_redaction() -> None:
    """Idempotently attach the redacting filter to the httpx/httpcore loggers."""
    for name in ("httpx", "httpcore"):
        lg = logging.getLogger(name)
        if not any(isinstance(f, _RedactingFilter) for f in lg.filters):
            lg.addFilter(_RedactingFilter())


class HttpFetcher:
    """Fetches feeds. Create one per event loop; ``await aclose()`` when done."""

    def __init__(
        self,
        config: FetchConfig | None = None,
        *,
        policy: PollPolicy | None = None,
        sleep: Sleep | None = None,
        resolver: Resolver | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or FetchConfig()
        self.policy = policy or PollPolicy()
        self._sleep = sleep or asyncio.sleep
        self._resolver = resolver
        self._monotonic = monotonic
        self._client: httpx.AsyncClient | None = None
        install_log_redaction()

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            c = self.config
            headers = {"User-Agent": c.user_agent, "Accept": c.accept,
                       "Accept-Encoding": "gzip, deflate"}
            if c.accept_language:
                headers["Accept-Language"] = c.accept_language
            self._client = httpx.AsyncClient(
                transport=make_transport(c, self._resolver),
                headers=headers,
                timeout=httpx.Timeout(c.io_timeout_s),
                follow_redirects=False,
                trust_env=False,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def fetch(self, url: str, headers: Mapping[str, str] | None = None, *,
                    auth_url: str | None = None) -> FetchOutcome:
        """GET with conditional ``headers``, retrying transient failures (after 1 s, 2 s).

        Credentials come from ``url``'s or ``auth_url``'s userinfo and are sent as HTTP basic
        auth to that URL's origin only.
        """
        c = self.config
        outcome = await self.fetch_once(url, headers, auth_url=auth_url)
        attempt = 1
        while attempt <= c.retries and is_transient_failure(outcome.kind, outcome.status,
                                                            outcome.headers, self.policy):
            delay = c.retry_backoff_s[min(attempt - 1, len(c.retry_backoff_s) - 1)] \
                if c.retry_backoff_s else 0.0
            await self._sleep(delay)
            outcome = await self.fetch_once(url, headers, auth_url=auth_url)
            attempt += 1
        return replace(outcome, attempts=attempt)

    async def fetch_once(self, url: str, headers: Mapping[str, str] | None = None, *,
                         auth_url: str | None = None) -> FetchOutcome:
        """One attempt: redirects followed by hand, body read with caps; never raises for
        network trouble (the outcome says what happened)."""
        c = self.config
        start = self._monotonic()
        hops: list[RedirectHop] = []
        current = url
        safe_url = redact_url(url)

        def done(kind: FetchKind, **kw: Any) -> FetchOutcome:
            return FetchOutcome(kind=kind, url=safe_url,
                                final_url=redact_url(current) if hops else None,
                                redirects=tuple(hops),
                                elapsed_ms=(self._monotonic() - start) * 1000.0, **kw)

        try:
            async with asyncio.timeout(c.timeout_s):
                for _ in range(c.max_redirects + 1):
                    if not scheme_allowed(current):
                        return done(FetchKind.BLOCKED,
                                    error=f"scheme not allowed: {urlsplit(current).scheme or '?'}:")
                    # credentials go in an Authorization header, to the feed's own origin only,
                    # never in the URL (httpx logs request URLs)
                    cred = auth_url or url
                    auth = _basic_auth(cred) if _same_origin(current, cred) else None
                    async with self._get_client().stream(
                        "GET", _strip_userinfo(current), headers=dict(headers or {}),
                        auth=auth if auth is not None else httpx.USE_CLIENT_DEFAULT,
                    ) as resp:
                        status = resp.status_code
                        rh = {k.lower(): v for k, v in resp.headers.items()}
                        location = rh.get("location")
                        if status in REDIRECT_STATUSES and location:
                            await self._drain(resp)
                            nxt = urljoin(current, location.strip())
                            # real URLs: an adopted 301 target must keep its query; every
                            # place that logs or emits a hop redacts it
                            hops.append(RedirectHop(status, current, nxt))
                            current = nxt
                            continue
                        body: bytes | None = None
                        if 200 <= status < 300:
                            body = await self._read_body(resp, rh)
                        else:
                            await self._drain(resp)
                        return done(FetchKind.RESPONSE, status=status, headers=rh, body=body)
                return done(FetchKind.TOO_MANY_REDIRECTS,
                            error=f"more than {c.max_redirects} redirects")
        except BlockedAddressError as e:
            return done(FetchKind.BLOCKED, error=redact_message(str(e)))
        except BodyTooLargeError as e:
            return done(FetchKind.TOO_LARGE, error=str(e))
        except (TimeoutError, httpx.TimeoutException):
            return done(FetchKind.TIMEOUT, error=f"timed out (limit {c.timeout_s:g} s per attempt, "
                                                 f"{c.io_timeout_s:g} s per operation)")
        except (httpx.ConnectError, httpx.ProxyError) as e:
            return done(FetchKind.CONNECT_ERROR, error=redact_message(f"{type(e).__name__}: {e}"))
        except UnsupportedEncodingError as e:
            return done(FetchKind.PROTOCOL_ERROR, error=str(e))
        except (httpx.TransportError, httpx.DecodingError, zlib.error, httpx.InvalidURL,
                httpx.UnsupportedProtocol, ValueError) as e:
            return done(FetchKind.PROTOCOL_ERROR, error=redact_message(f"{type(e).__name__}: {e}"))

    async def _drain(self, resp: httpx.Response, limit: int = 64 * 1024) -> None:
        """Read (and drop) a small body so the connection can be reused: httpcore only returns a
        connection to the pool once the response was read to its end (304s included). Bigger
        bodies are not worth the bytes; the connection is closed instead."""
        cl = resp.headers.get("content-length")
        if cl is not None and cl.strip().isdigit() and int(cl) > limit:
            return
        n = 0
        async for chunk in resp.aiter_raw():
            n += len(chunk)
            if n > limit:
                return

    async def _read_body(self, resp: httpx.Response, headers: Mapping[str, str]) -> bytes:
        c = self.config
        cl = headers.get("content-length")
        if cl and cl.strip().isdigit() and int(cl) > c.max_bytes:
            msg = f"Content-Length {int(cl)} over the cap of {c.max_bytes} bytes"
            raise BodyTooLargeError(msg)
        decoder = BoundedDecoder(headers.get("content-encoding"), c.max_decoded_bytes)
        out = bytearray()
        wire = 0
        async for chunk in resp.aiter_raw():
            wire += len(chunk)
            if wire > c.max_bytes:
                msg = f"body over the cap of {c.max_bytes} bytes"
                raise BodyTooLargeError(msg)
            out += decoder.feed(chunk)
        out += decoder.flush()
        return bytes(out)
