"""The poller against a real HTTP server on 127.0.0.1 (tests/http_fixture_server.py).

Tests marked ``http`` do real HTTP on loopback; the others exercise the engine, the Bytewax
source and the CLI with a fake fetcher or files only.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest
from bytewax.testing import TestingSink

from newsflow.config import Topics
from newsflow.connectors.http_fetch import ACCEPT, FetchConfig, HttpFetcher
from newsflow.connectors.poller.config import PollerConfig, poller_config
from newsflow.connectors.poller.engine import PollEngine, feed_partition
from newsflow.connectors.poller.records import TICK_FEED_ID, KafkaRecord, PollEvent, tick_event
from newsflow.connectors.poller.snapshot import restore_snapshot, state_from_dict, state_to_dict
from newsflow.connectors.poller.sources import HeartbeatSource, PollerSource
from newsflow.core.timeutil import HOUR_MS
from newsflow.feeds.urls import registrable_domain
from newsflow.flows.poller import run_poller_flow
from newsflow.polling.registry import FeedSpec
from newsflow.polling.state import FeedState, FetchKind, FetchOutcome, PollPolicy
from newsflow.wire.codec import decode_raw
from newsflow.wire.contracts import validate
from tests.http_fixture_server import FIXTURES, FixtureServer, rss_feed

T = TypeVar("T")
LOOPBACK = ("127.0.0.1/32",)
T0 = 1_715_000_000_000


class FakeClock:
    def __init__(self, now_ms: int = T0) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@pytest.fixture(scope="module")
def server() -> Iterator[FixtureServer]:
    with FixtureServer() as s:
        yield s


def fcfg(**kw: Any) -> FetchConfig:
    base: dict[str, Any] = {"allowed_networks": LOOPBACK, "timeout_s": 2.0, "io_timeout_s": 1.0,
                            "retry_backoff_s": (0.0, 0.0)}
    base.update(kw)
    return FetchConfig(**base)


def pcfg(fetch: FetchConfig | None = None, **kw: Any) -> PollerConfig:
    return PollerConfig(fetch=fetch or fcfg(), **kw)


def feed(fid: str, url: str, **kw: Any) -> FeedSpec:
    return FeedSpec(id=fid, url=url, name=fid.title(), publisher=kw.pop("publisher", "Fixture"),
                    tier=kw.pop("tier", "T3"), category=kw.pop("category", "news"),
                    language=kw.pop("language", "en"), **kw)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(fn())  # type: ignore[arg-type]


def health(ev: PollEvent) -> dict[str, Any]:
    recs = [r for r in ev.records if r.topic == "feed-health"]
    assert len(recs) == 1 and recs[0].key == b"poller:" + ev.feed_id.encode()
    d = orjson.loads(recs[0].value)
    validate("feed-health", d)
    return d


def raw(ev: PollEvent) -> dict[str, Any] | None:
    """The poll's ``feeds.raw`` record when it carries a body to parse; None for a poll sent
    without one (every poll is sent: then its ``poll_status`` is the poll's status)."""
    recs = [r for r in ev.records if r.topic == "feeds.raw"]
    assert len(recs) == 1 and recs[0].key == ev.feed_id.encode()
    d = orjson.loads(recs[0].value)
    validate("feeds.raw", d)
    if d.get("poll_status") is not None:
        assert d["body_b64"] is None and d.get("body_ref") is None and d["poll_status"] == ev.status, d
        return None
    return d


async def poll_n(eng: PollEngine, fid: str, n: int = 1, *, step_ms: int = 0,
                 clock: FakeClock | None = None) -> list[PollEvent]:
    out = []
    for _ in range(n):
        out.append(await eng.poll_feed(eng.feeds[fid]))
        if clock is not None and step_ms:
            clock.advance(step_ms)
    return out


# ------------------------------------------------------------------------------------------
# Headers, conditional GET, 304, body hash
# ------------------------------------------------------------------------------------------


@pytest.mark.http
def test_headers_conditional_get_and_304(server: FixtureServer) -> None:
    path = "/feeds/rss20.xml"
    eng = PollEngine([feed("wire", server.url(path))], pcfg(), clock=FakeClock())

    async def go() -> list[PollEvent]:
        try:
            return await poll_n(eng, "wire", 2)
        finally:
            await eng.aclose()

    first, second = run(go)
    reqs = server.requests_for(path)[-2:]
    h0, h1 = reqs[0].headers, reqs[1].headers
    assert h0["Accept"] == ACCEPT == "application/rss+xml, application/atom+xml, application/xml, text/xml;q=0.9"
    assert h0["User-Agent"].startswith("newsflow/") and "python-requests" not in h0["User-Agent"]
    assert "If-None-Match" not in h0 and "If-Modified-Since" not in h0
    assert h1["If-None-Match"].startswith('"') and h1["If-Modified-Since"] == "Mon, 06 May 2024 08:00:00 GMT"
    assert first.status == "ok" and raw(first) is not None
    assert second.status == "not_modified" and second.http_status == 304 and raw(second) is None
    h = health(second)
    assert h["counters"]["successful_polls"] == 2 and h["counters"]["not_modified_polls"] == 1
    assert h["reliability"] == 1.0


@pytest.mark.http
def test_connections_are_kept_alive_across_304s_errors_and_redirects(server: FixtureServer) -> None:
    paths = ["/feeds/atom.xml", "/status/500", "/redir/302/-/feeds/rss20.xml", "/status/404"]
    eng = PollEngine([feed(f"k{i}", server.url(p)) for i, p in enumerate(paths)], pcfg(), clock=FakeClock())

    async def go() -> None:
        try:
            for _ in range(3):
                for i in range(len(paths)):
                    await eng.poll_feed(eng.feeds[f"k{i}"])
        finally:
            await eng.aclose()

    n = len(server.requests)
    run(go)
    reqs = server.requests[n:]
    assert len(reqs) >= 12 + 3 + 6  # 500s retried twice, redirects are two requests
    assert len({r.client_port for r in reqs}) == 1  # one connection: bodies drained, reused


@pytest.mark.http
def test_if_modified_since_alone_gives_304(server: FixtureServer) -> None:
    server.set_feed("lm-only", rss_feed("lm", [("a", "A")]), last_modified="Mon, 06 May 2024 08:00:00 GMT")
    eng = PollEngine([feed("lm", server.url("/m/lm-only"))], pcfg(), clock=FakeClock())

    async def go() -> PollEvent:
        try:
            await eng.poll_feed(eng.feeds["lm"])
            eng.states["lm"] = replace(eng.states["lm"], etag=None)  # only Last-Modified known
            return await eng.poll_feed(eng.feeds["lm"])
        finally:
            await eng.aclose()

    ev = run(go)
    assert ev.http_status == 304 and ev.status == "not_modified"
    assert "If-None-Match" not in server.requests_for("/m/lm-only")[-1].headers


@pytest.mark.http
def test_same_body_without_validators_is_not_modified_and_new_items_count(server: FixtureServer) -> None:
    server.set_feed("nv", rss_feed("nv", [("a", "A"), ("b", "B")]))
    eng = PollEngine([feed("nv", server.url("/noval/nv"))], pcfg(), clock=FakeClock())

    async def go() -> list[PollEvent]:
        try:
            evs = await poll_n(eng, "nv", 2)
            server.set_feed("nv", rss_feed("nv", [("c", "C"), ("a", "A"), ("b", "B")]))
            evs.append(await eng.poll_feed(eng.feeds["nv"]))
            return evs
        finally:
            await eng.aclose()

    e1, e2, e3 = run(go)
    assert e1.status == "ok" and raw(e1) is not None
    assert e2.http_status == 200 and e2.status == "not_modified" and raw(e2) is None
    assert e3.status == "ok" and health(e3)["new_items"] == 1 and raw(e3) is not None


@pytest.mark.http
def test_raw_envelope_contents(server: FixtureServer) -> None:
    clock = FakeClock()
    f = feed("atom", server.url("/feeds/atom.xml"), publisher="Atom Co", tier="T2", category="tech",
             language="de")
    eng = PollEngine([f], pcfg(), clock=clock)

    async def go() -> PollEvent:
        try:
            return await eng.poll_feed(f)
        finally:
            await eng.aclose()

    ev = run(go)
    r = raw(ev)
    assert r is not None
    assert r["feed_id"] == "atom" and r["poll_id"] == f"atom@{T0}" and r["status"] == 200
    assert r["url"] == f.url and r["final_url"] is None
    assert (r["publisher"], r["tier"], r["category"], r["language"]) == ("Atom Co", "T2", "tech", "de")
    assert r["etag"] and r["last_modified"] and "rss+xml" in r["content_type"]
    assert base64.b64decode(r["body_b64"]) == (FIXTURES / "atom.xml").read_bytes()
    p = decode_raw(next(x.value for x in ev.records if x.topic == "feeds.raw"))
    assert p.fetched_at_ms == T0 and p.body == (FIXTURES / "atom.xml").read_bytes()
    h = health(ev)
    assert h["feed_format"] == "atom10" and h["items"] == 2 and h["source"] == "poller"
    assert h["record_id"] == f"poller:atom@{T0}" and h["domain"] == "127.0.0.1"


# ------------------------------------------------------------------------------------------
# Redirects
# ------------------------------------------------------------------------------------------


@pytest.mark.http
@pytest.mark.parametrize(("chain", "adopted"), [
    ("/redir/301/308/-/feeds/atom.xml", "/feeds/atom.xml"),
    ("/redir/301/302/-/feeds/rss20.xml", "/redir/302/-/feeds/rss20.xml"),  # the 302 hop stays
])
def test_permanent_redirects_adopted_after_n_polls(server: FixtureServer, chain: str, adopted: str) -> None:
    clock = FakeClock()
    cfg = pcfg(policy=PollPolicy(redirect_adopt_after=3))
    eng = PollEngine([feed("mv", server.url(chain))], cfg, clock=clock)

    async def go() -> list[PollEvent]:
        try:
            evs = []
            for _ in range(4):
                eng.states["mv"] = replace(eng.states["mv"], etag=None, last_modified=None, body_hash=None)
                evs.append(await eng.poll_feed(eng.feeds["mv"]))
                clock.advance(3_600_000)
            return evs
        finally:
            await eng.aclose()

    before = len(server.requests_for(chain))
    evs = run(go)
    assert [eng.states["mv"].url] == [server.url(adopted)]
    assert eng.states["mv"].registry_url == server.url(chain)
    assert "url_changed" in (evs[2].alert or "") and evs[0].alert is None and evs[1].alert is None
    assert len(server.requests_for(chain)) - before == 3  # 4th poll went straight to the target
    r0 = raw(evs[0])
    assert r0 is not None and r0["url"] == server.url(chain) and r0["final_url"] is not None


@pytest.mark.http
def test_temporary_redirects_are_followed_but_url_kept(server: FixtureServer) -> None:
    chain = "/redir/302/307/-/feeds/rss20.xml"
    eng = PollEngine([feed("tmp", server.url(chain))], pcfg(policy=PollPolicy(redirect_adopt_after=2)),
                     clock=FakeClock())

    async def go() -> list[PollEvent]:
        try:
            evs = []
            for _ in range(4):
                eng.states["tmp"] = replace(eng.states["tmp"], body_hash=None, etag=None, last_modified=None)
                evs.append(await eng.poll_feed(eng.feeds["tmp"]))
            return evs
        finally:
            await eng.aclose()

    evs = run(go)
    assert all(e.status == "ok" for e in evs)
    assert eng.states["tmp"].url == server.url(chain)
    r = raw(evs[-1])
    assert r is not None and r["final_url"] == server.url("/feeds/rss20.xml")


@pytest.mark.http
def test_redirect_loop_stops_after_5(server: FixtureServer) -> None:
    async def go() -> FetchOutcome:
        f = HttpFetcher(fcfg())
        try:
            return await f.fetch(server.url("/loop/0"))
        finally:
            await f.aclose()

    o = run(go)
    assert o.kind is FetchKind.TOO_MANY_REDIRECTS and len(o.redirects) == 6


# ------------------------------------------------------------------------------------------
# 410, 429, 503, 5xx, timeouts
# ------------------------------------------------------------------------------------------


@pytest.mark.http
def test_410_dead_removed_from_polling(server: FixtureServer) -> None:
    eng = PollEngine([feed("gone", server.url("/status/410"))], pcfg(), clock=FakeClock())

    async def go() -> PollEvent:
        try:
            return await eng.poll_feed(eng.feeds["gone"])
        finally:
            await eng.aclose()

    ev = run(go)
    assert ev.status == "dead" and "dead" in (ev.alert or "")
    h = health(ev)
    assert h["next_poll_at"] is None and "dead" in h["flags"]
    assert eng.due(T0 + 10**12, force=True) == [] and eng.next_wakeup_ms() is None


@pytest.mark.http
@pytest.mark.parametrize("form", ["seconds", "date"])
def test_429_retry_after_both_forms_doubles_interval_and_pauses_domain(server: FixtureServer, form: str) -> None:
    from newsflow.connectors.poller.config import system_clock_ms

    feeds = [feed("limited", server.url(f"/ratelimit/{form}/600")), feed("sibling", server.url("/feeds/rss20.xml"))]
    eng = PollEngine(feeds, pcfg(), clock=system_clock_ms)
    start = eng.states["limited"].interval_s

    async def go() -> tuple[PollEvent, PollEvent]:
        try:
            ev = await eng.poll_feed(eng.feeds["limited"])
            return ev, await eng.poll_feed(eng.feeds["sibling"])
        finally:
            await eng.aclose()

    before = len(server.requests_for("/feeds/rss20.xml"))
    ev, sib = run(go)
    now = system_clock_ms()
    assert ev.status == "rate_limited" and ev.http_status == 429
    h = health(ev)
    assert h["retry_after_s"] == pytest.approx(600, abs=2)
    st = eng.states["limited"]
    assert st.interval_s == start * 2
    assert st.next_poll_ms is not None and abs(st.next_poll_ms - (now + 600_000)) < 3_000
    # shared per-domain backoff: the sibling feed on the same host waits too
    assert sib.status == "deferred" and sib.records == ()
    assert len(server.requests_for("/feeds/rss20.xml")) == before
    assert eng.due(now, force=True) == []


@pytest.mark.http
def test_503_with_retry_after_is_rate_limited_bare_503_is_retried(server: FixtureServer) -> None:
    feeds = [feed("maint", server.url("/unavailable/900")), feed("bare", server.url("/unavailable"))]
    eng = PollEngine(feeds, pcfg(), clock=FakeClock())

    async def go() -> tuple[PollEvent, PollEvent]:
        try:
            a = await eng.poll_feed(eng.feeds["maint"])
            eng.domains.clear()
            return a, await eng.poll_feed(eng.feeds["bare"])
        finally:
            await eng.aclose()

    a, b = run(go)
    assert a.status == "rate_limited" and health(a)["attempts"] == 1
    assert eng.states["maint"].next_poll_ms == T0 + 900_000
    assert b.status == "http_error" and health(b)["attempts"] == 3


@pytest.mark.http
@pytest.mark.parametrize("path", ["/ratelimit/seconds/0", "/ratelimit/date/-3600", "/unavailable/0"])
def test_retry_after_zero_or_past_does_not_make_continuous_mode_loop(server: FixtureServer, path: str) -> None:
    from datetime import UTC, datetime

    # a unique path per run: the server records requests per path
    url = server.url(path + f"?run={time.monotonic_ns()}")
    src = PollerSource([feed("zero", url)], pcfg(partitions=1, idle_wakeup_s=3600))
    part = src.build_part("poll", "feeds-0", None)
    try:
        evs: list[PollEvent] = []
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # what Bytewax does in continuous mode, at full speed
            evs += part.next_batch()
        wake = part.next_awake()
    finally:
        part.close()
    assert [e.status for e in evs] == ["rate_limited"]
    assert len(server.requests_for(url.split(str(server.port), 1)[1])) == 1
    assert wake is not None and (wake - datetime.now(UTC)).total_seconds() > 0.9 * 300


@pytest.mark.http
def test_transient_errors_retried_twice_with_1s_2s_backoff(server: FixtureServer) -> None:
    delays: list[float] = []

    async def fake_sleep(s: float) -> None:
        delays.append(s)

    async def go() -> list[FetchOutcome]:
        f = HttpFetcher(fcfg(retry_backoff_s=FetchConfig().retry_backoff_s), sleep=fake_sleep)
        try:
            return [await f.fetch(server.url(p)) for p in
                    ("/flaky/r1/2/rss20.xml", "/flaky/r2/5/rss20.xml", "/status/404")]
        finally:
            await f.aclose()

    ok, failing, missing = run(go)
    assert ok.status == 200 and ok.attempts == 3
    assert failing.status == 500 and failing.attempts == 3
    assert missing.status == 404 and missing.attempts == 1  # 4xx: retrying cannot help
    assert delays == [1.0, 2.0, 1.0, 2.0]


@pytest.mark.http
def test_5xx_counts_errors_and_backs_off(server: FixtureServer) -> None:
    clock = FakeClock()
    eng = PollEngine([feed("err", server.url("/status/500"))], pcfg(), clock=clock)

    async def go() -> list[PollEvent]:
        try:
            return await poll_n(eng, "err", 2)
        finally:
            await eng.aclose()

    e1, e2 = run(go)
    assert e1.status == e2.status == "http_error"
    st = eng.states["err"]
    assert st.consecutive_errors == 2 and st.http_errors == 2
    assert st.next_poll_ms is not None and st.next_poll_ms - T0 >= 2 * st.interval_s * 1000
    assert health(e2)["counters"]["failed_polls"] == 2 and health(e2)["reliability"] == 0.0


@pytest.mark.http
def test_timeout_retry_after_60s_then_slow(server: FixtureServer) -> None:
    clock = FakeClock()
    eng = PollEngine([feed("slow", server.url("/slow/5/rss20.xml"))],
                     pcfg(fcfg(timeout_s=0.4, io_timeout_s=0.3)), clock=clock)

    async def go() -> list[PollEvent]:
        try:
            first = await eng.poll_feed(eng.feeds["slow"])
            assert eng.states["slow"].next_poll_ms == T0 + 60_000
            clock.advance(60_000)
            assert [f.id for f in eng.due(clock())] == ["slow"]
            return [first, await eng.poll_feed(eng.feeds["slow"])]
        finally:
            await eng.aclose()

    t = time.monotonic()
    first, second = run(go)
    assert time.monotonic() - t < 3.0
    assert first.status == second.status == "timeout"
    assert health(first)["attempts"] == 1  # a timeout is not retried at once
    assert "slow" in (second.alert or "") and "slow" in health(second)["flags"]


@pytest.mark.http
def test_trickling_body_is_cut_by_the_per_attempt_deadline(server: FixtureServer) -> None:
    async def go() -> FetchOutcome:
        f = HttpFetcher(fcfg(timeout_s=0.6, io_timeout_s=0.4))
        try:
            return await f.fetch(server.url("/trickle/5"))
        finally:
            await f.aclose()

    t = time.monotonic()
    o = run(go)
    assert o.kind is FetchKind.TIMEOUT and time.monotonic() - t < 2.0


def test_default_fetch_rules() -> None:
    c = FetchConfig()
    # docs/rules.md#requests, docs/rules.md#retries-and-backoff
    assert (c.timeout_s, c.io_timeout_s) == (30.0, 10.0)  # 30 s per attempt, 10 s per operation
    assert c.retries == 2 and c.retry_backoff_s == (1.0, 2.0)
    assert c.max_redirects == 5 and c.max_bytes == c.max_decoded_bytes == 10 * 1024 * 1024
    assert not c.allow_private and c.allowed_networks == ()


# ------------------------------------------------------------------------------------------
# Size caps, decompression bomb, encodings, HTML
# ------------------------------------------------------------------------------------------


@pytest.mark.http
@pytest.mark.parametrize("path", ["/big/50", "/big-cl/50"])
def test_50mb_body_is_capped(server: FixtureServer, path: str) -> None:
    async def go() -> FetchOutcome:
        f = HttpFetcher(fcfg(timeout_s=10))
        try:
            return await f.fetch(server.url(path))
        finally:
            await f.aclose()

    t = time.monotonic()
    o = run(go)
    assert o.kind is FetchKind.TOO_LARGE and o.body is None and time.monotonic() - t < 5
    assert "10485760" in (o.error or "")


@pytest.mark.http
def test_gzip_bomb_stops_at_the_decoded_cap(server: FixtureServer) -> None:
    async def go() -> FetchOutcome:
        f = HttpFetcher(fcfg(timeout_s=20, max_decoded_bytes=4 * 1024 * 1024))
        try:
            return await f.fetch(server.url("/bomb"))
        finally:
            await f.aclose()

    server.gzip_bomb() if hasattr(server, "gzip_bomb") else server._gzip_bomb()  # build it untraced
    tracemalloc.start()
    try:
        o = run(go)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert o.kind is FetchKind.TOO_LARGE and "decoded" in (o.error or "")
    assert peak < 64 * 1024 * 1024  # never inflated beyond a few chunks past the 4 MiB cap


@pytest.mark.http
@pytest.mark.parametrize(("path", "items"), [("/gzip/rss20.xml", 3), ("/deflate/atom.xml", 2)])
def test_content_encodings_are_decoded(server: FixtureServer, path: str, items: int) -> None:
    eng = PollEngine([feed("enc", server.url(path))], pcfg(), clock=FakeClock())

    async def go() -> PollEvent:
        try:
            return await eng.poll_feed(eng.feeds["enc"])
        finally:
            await eng.aclose()

    ev = run(go)
    assert ev.status == "ok" and health(ev)["items"] == items


@pytest.mark.http
def test_too_large_poll_is_reported(server: FixtureServer) -> None:
    eng = PollEngine([feed("huge", server.url("/big/50"))], pcfg(), clock=FakeClock())

    async def go() -> PollEvent:
        try:
            return await eng.poll_feed(eng.feeds["huge"])
        finally:
            await eng.aclose()

    ev = run(go)
    assert ev.status == "too_large" and raw(ev) is None


@pytest.mark.http
def test_html_page_instead_of_feed(server: FixtureServer) -> None:
    feeds = [feed("cf", server.url("/html/cloudflare.html")), feed("e403", server.url("/html403/error.html"))]
    eng = PollEngine(feeds, pcfg(), clock=FakeClock())

    async def go() -> list[PollEvent]:
        try:
            return [await eng.poll_feed(f) for f in feeds]
        finally:
            await eng.aclose()

    cf, e403 = run(go)
    assert cf.status == "html_instead_of_feed" and raw(cf) is None
    assert eng.states["cf"].consecutive_parse_failures == 0
    assert e403.status == "http_error" and e403.http_status == 403


@pytest.mark.http
@pytest.mark.parametrize(("kind", "what"), [("html", "an HTML page"), ("404", "HTTP 404"), ("403", "HTTP 403")])
def test_html_or_4xx_for_ever_flags_unhealthy_with_an_alert(server: FixtureServer, kind: str, what: str) -> None:
    name = f"unhealthy-{kind}-{time.monotonic_ns()}"
    if kind == "html":
        server.set_feed(name, b"<!doctype html><html><body>Just a moment...</body></html>",
                        content_type="text/html; charset=utf-8")
    path = "/html403/error.html" if kind == "403" else f"/m/{name}"  # /m/<unknown> is a 404
    clock = FakeClock()
    n = PollPolicy().bad_responses_unhealthy
    eng = PollEngine([feed("bad", server.url(path))], pcfg(), clock=clock)

    async def go() -> tuple[list[PollEvent], PollEvent | None]:
        try:
            evs = []
            for _ in range(n + 2):
                evs.append(await eng.poll_feed(eng.feeds["bad"]))
                eng.domains.clear()  # no domain backoff in between: every poll reaches the server
                clock.advance(86_400_000)
            if kind == "403":
                return evs, None
            server.set_feed(name, rss_feed("back", [("g1", "Back again")]))
            return evs, await eng.poll_feed(eng.feeds["bad"])
        finally:
            await eng.aclose()

    evs, recovered = run(go)
    hs = [health(e) for e in evs]
    assert all("unhealthy" not in h["flags"] and h["alert"] is None for h in hs[:n - 1])
    assert "unhealthy" in hs[n - 1]["flags"]
    assert hs[n - 1]["alert"] == f"unhealthy: {n} consecutive polls answered with {what}"
    assert all("unhealthy" in h["flags"] and h["alert"] is None for h in hs[n:])  # alerted once
    if recovered is not None:  # the feed is back: flag and streak cleared
        assert recovered.status == "ok" and "unhealthy" not in health(recovered)["flags"]
        assert eng.states["bad"].consecutive_bad_responses == 0


@pytest.mark.http
def test_parse_failures_flag_unhealthy_over_http(server: FixtureServer) -> None:
    clock = FakeClock()
    eng = PollEngine([feed("bad", server.url("/feeds/broken.xml"))], pcfg(), clock=clock)

    async def go() -> list[PollEvent]:
        try:
            return await poll_n(eng, "bad", 3, step_ms=3_600_000, clock=clock)
        finally:
            await eng.aclose()

    evs = run(go)
    assert [e.status for e in evs] == ["parse_error"] * 3
    assert raw(evs[0]) is not None and raw(evs[1]) is None  # emitted once for dead-lettering
    assert "unhealthy" in (evs[2].alert or "") and "unhealthy" in health(evs[2])["flags"]
    # no validators kept from a broken body: every poll re-fetches it in full
    assert all("If-None-Match" not in r.headers for r in server.requests_for("/feeds/broken.xml")[-3:])


# ------------------------------------------------------------------------------------------
# Safety: private addresses, schemes, credentials
# ------------------------------------------------------------------------------------------


@pytest.mark.http
@pytest.mark.parametrize(("path", "why"), [
    ("/private-redirect", "private address"),
    ("/metadata-redirect", "link-local address"),
    ("/scheme-redirect", "scheme not allowed"),
])
def test_redirects_to_private_addresses_and_bad_schemes_are_refused(server: FixtureServer, path: str,
                                                                    why: str) -> None:
    # loopback is allowed for the fixture server only (127.0.0.1/32); the redirect targets are
    # refused by the policy before any connection (never use allow_private here: it opens 10/8)
    eng = PollEngine([feed("ssrf", server.url(path))], pcfg(fcfg()), clock=FakeClock())

    async def go() -> PollEvent:
        try:
            return await eng.poll_feed(eng.feeds["ssrf"])
        finally:
            await eng.aclose()

    t = time.monotonic()
    ev = run(go)
    assert time.monotonic() - t < 1.0  # refused before any connection attempt
    h = health(ev)
    assert ev.status == "blocked" and why in (h["message"] or "") and raw(ev) is None


@pytest.mark.http
@pytest.mark.parametrize(("target", "why"), [
    ("http://[fd00:ec2::254]/latest/meta-data/", "cloud metadata address"),
    ("http://100.100.100.200/latest/meta-data/", "cloud metadata address"),
    ("http://192.0.0.192/opc/v2/instance/", "cloud metadata address"),
    ("http://[2002:a00:1::1]/feed.xml", "6to4 address wrapping a private address"),
    ("http://[64:ff9b::a9fe:a9fe]/latest/", "NAT64 address wrapping a link-local address"),
])
def test_metadata_and_wrapped_private_targets_refused_even_with_allow_private(
        server: FixtureServer, target: str, why: str) -> None:
    from urllib.parse import quote

    async def go(url: str) -> FetchOutcome:
        f = HttpFetcher(fcfg(allow_private=True))
        try:
            return await f.fetch(url)
        finally:
            await f.aclose()

    t = time.monotonic()
    direct = run(lambda: go(target))
    via_redirect = run(lambda: go(server.url("/goto/" + quote(target, safe=""))))
    assert time.monotonic() - t < 1.0  # refused before any connection attempt
    for o in (direct, via_redirect):
        assert o.kind is FetchKind.BLOCKED and why in (o.error or ""), o
    assert via_redirect.redirects[0].to_url == target


@pytest.mark.http
def test_private_redirect_refused_without_allow_private(server: FixtureServer) -> None:
    async def go() -> FetchOutcome:
        f = HttpFetcher(fcfg())
        try:
            return await f.fetch(server.url("/private-redirect"))
        finally:
            await f.aclose()

    o = run(go)
    assert o.kind is FetchKind.BLOCKED and "10.0.0.1 is a private address" in (o.error or "")
    assert o.redirects[0].to_url == "http://10.0.0.1/feed.xml"


@pytest.mark.http
def test_loopback_refused_unless_explicitly_allowed(server: FixtureServer) -> None:
    path = "/feeds/rss20.xml?refused"

    async def go(cfg: FetchConfig, url: str) -> FetchOutcome:
        f = HttpFetcher(cfg)
        try:
            return await f.fetch(url)
        finally:
            await f.aclose()

    before = len(server.requests)
    refused = asyncio.run(go(FetchConfig(timeout_s=2), server.url(path)))
    assert refused.kind is FetchKind.BLOCKED and "loopback" in (refused.error or "")
    assert len(server.requests) == before  # nothing reached the server
    allowed = asyncio.run(go(FetchConfig(timeout_s=2, allow_private=True), server.url(path)))
    assert allowed.status == 200
    # a host name resolving to loopback is checked after resolution
    via_name = asyncio.run(go(fcfg(), server.url("/localhost-redirect/rss20.xml")))
    assert via_name.status == 200 and via_name.redirects[0].to_url.startswith("http://localhost:")
    blocked_name = asyncio.run(go(FetchConfig(timeout_s=2), f"http://localhost:{server.port}/feeds/rss20.xml"))
    assert blocked_name.kind is FetchKind.BLOCKED


@pytest.mark.http
def test_credentials_never_leak_into_records_or_logs(server: FixtureServer, caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://user:secret@127.0.0.1:{server.port}/auth/rss20.xml?token=tok123&x=1"
    bad = f"http://user:wrongpw@127.0.0.1:{server.port}/auth/rss20.xml?api_key=k999"
    eng = PollEngine([feed("priv", url), feed("bad", bad)], pcfg(), clock=FakeClock())

    async def go() -> list[PollEvent]:
        try:
            return [await eng.poll_feed(eng.feeds["priv"]), await eng.poll_feed(eng.feeds["bad"])]
        finally:
            await eng.aclose()

    with caplog.at_level(logging.DEBUG):
        ok, denied = run(go)
    assert ok.status == "ok" and denied.status == "http_error" and denied.http_status == 401
    snapshot = repr({fid: state_to_dict(st) for fid, st in eng.states.items()}).encode()
    assert b"secret" not in snapshot and b"wrongpw" not in snapshot  # state is persisted
    blob = b"".join(r.value for e in (ok, denied) for r in e.records) + caplog.text.encode()
    for secret in (b"secret", b"tok123", b"wrongpw", b"k999"):
        assert secret not in blob
    r = raw(ok)
    assert r is not None and r["url"].startswith(f"http://127.0.0.1:{server.port}/auth/rss20.xml?token=REDACTED")


# ------------------------------------------------------------------------------------------
# Hints from headers and feeds
# ------------------------------------------------------------------------------------------


@pytest.mark.http
@pytest.mark.parametrize(("path", "floor"), [
    ("/cache/7200/rss20.xml", 7200),
    ("/expires/5400/atom.xml", 5400),
    ("/feeds/rss20_ttl.xml", 7200),
    ("/feeds/rss10_sy.xml", 43200),
])
def test_publisher_hints_raise_the_interval(server: FixtureServer, path: str, floor: int) -> None:
    eng = PollEngine([feed("h", server.url(path))], pcfg(), clock=FakeClock())

    async def go() -> PollEvent:
        try:
            return await eng.poll_feed(eng.feeds["h"])
        finally:
            await eng.aclose()

    ev = run(go)
    st = eng.states["h"]
    assert ev.status == "ok" and st.interval_s == pytest.approx(floor, abs=2)
    assert (st.next_poll_ms or 0) - T0 >= (floor - 2) * 1000


# ------------------------------------------------------------------------------------------
# Engine scheduling, politeness (fake fetcher, no network)
# ------------------------------------------------------------------------------------------


class FakeFetcher(HttpFetcher):
    """Answers 200 with a small feed after ``delay`` s; counts concurrency."""

    def __init__(self, delay: float = 0.02, gates: Mapping[str, asyncio.Event] | None = None) -> None:
        super().__init__(FetchConfig())
        self.delay = delay
        self.gates = gates if gates is not None else {}
        self.active = 0
        self.max_active = 0
        self.by_host: dict[str, int] = {}
        self.max_by_host: dict[str, int] = {}
        self.calls: list[tuple[str, dict[str, str]]] = []

    async def fetch(self, url: str, headers: Mapping[str, str] | None = None, *,
                    auth_url: str | None = None) -> FetchOutcome:
        host = registrable_domain(url)
        self.calls.append((url, dict(headers or {})))
        self.active += 1
        self.by_host[host] = self.by_host.get(host, 0) + 1
        self.max_active = max(self.max_active, self.active)
        self.max_by_host[host] = max(self.max_by_host.get(host, 0), self.by_host[host])
        try:
            gate = self.gates.get(url)
            if gate is not None:
                await gate.wait()
            await asyncio.sleep(self.delay)
            return FetchOutcome(FetchKind.RESPONSE, url, status=200,
                                headers={"etag": f'"{url}"', "content-type": "application/rss+xml"},
                                body=rss_feed(url, [(url, "x")]), elapsed_ms=self.delay * 1000)
        finally:
            self.active -= 1
            self.by_host[host] -= 1

    async def aclose(self) -> None:
        return None


def test_concurrency_caps_global_and_per_domain() -> None:
    # 6 registrable domains x 5 hosts each: per-domain cap 2 applies across sub-domains
    feeds = [feed(f"d{d}-{i}", f"https://s{i}.site{d}.co.uk/feed") for d in range(6) for i in range(5)]
    fake = FakeFetcher()
    eng = PollEngine(feeds, pcfg(concurrency=8, per_domain_concurrency=2), clock=FakeClock(), fetcher=fake)
    evs = run(eng.poll_round)
    assert len(evs) == 30 and all(e.status == "ok" for e in evs)
    assert {eng.domain_of(f.id) for f in feeds} == {f"site{d}.co.uk" for d in range(6)}
    assert 6 <= fake.max_active <= 8  # global cap
    assert max(fake.max_by_host.values()) == 2  # per registrable domain, not per host


def test_schedule_respects_next_poll_and_jitter_spreads_feeds() -> None:
    clock = FakeClock()
    feeds = [feed(f"f{i}", f"https://f{i}.example.org/rss", interval_s=1800.0) for i in range(50)]
    eng = PollEngine(feeds, pcfg(), clock=clock, fetcher=FakeFetcher(delay=0))
    run(eng.poll_round)
    assert eng.due(clock()) == []
    nexts = sorted(st.next_poll_ms or 0 for st in eng.states.values())
    assert nexts[0] >= T0 + 1_800_000 and nexts[-1] < T0 + 1_980_000
    assert len(set(nexts)) > 40  # not synchronized
    clock.advance(1_900_000)
    assert 0 < len(eng.due(clock())) < 50


def test_state_dict_roundtrip_is_tolerant() -> None:
    st = FeedState("f", "https://x.example/", "https://x.example/", 1800.0, etag='"e"',
                   item_keys=frozenset({1, 2}), daily=((19850, 3, 4),))
    d = state_to_dict(st)
    assert state_from_dict(d) == st
    d2 = {**d, "some_future_field": 1}
    del d2["etag"]
    back = state_from_dict(d2)
    assert back is not None and back.etag is None and back.item_keys == frozenset({1, 2})
    assert state_from_dict({"feed_id": "x"}) is None
    assert restore_snapshot({"v": 99}) == ({}, {})


def test_tick_envelope_goes_to_every_partition() -> None:
    ev = tick_event(T0, Topics())
    (rec,) = ev.records
    assert rec.all_partitions and rec.topic == "feeds.raw" and rec.key == b"__tick__"
    d = orjson.loads(rec.value)
    validate("feeds.raw", d)
    assert d["feed_id"] == TICK_FEED_ID and d["status"] == 0 and d["body_b64"] is None and d["url"] == ""
    part = HeartbeatSource(3600, clock=FakeClock()).build_part("hb", "heartbeat", None)
    assert len(part.next_batch()) == 1 and part.next_batch() == []
    # profiles configured: the heartbeat goes to every interactions partition too
    from newsflow.config import ProfilesSettings, Settings

    assert not poller_config(Settings()).interactions_heartbeat
    s = Settings(profiles=ProfilesSettings.model_validate({"profile": {"reader": {}}}))
    assert poller_config(s).interactions_heartbeat
    raw, ix = tick_event(T0, Topics(), interactions=True).records
    assert raw == rec and ix.all_partitions and (ix.topic, ix.key) == ("interactions", b"__tick__")
    validate("interactions", orjson.loads(ix.value))
    assert orjson.loads(ix.value)["heartbeat"] is True
    part = HeartbeatSource(3600, clock=FakeClock(), interactions=True).build_part("hb", "heartbeat", None)
    [ev] = part.next_batch()
    assert [r.topic for r in ev.records] == ["feeds.raw", "interactions"]


def _two_partition_feeds() -> tuple[FeedSpec, FeedSpec]:
    a = feed("pa", "https://alpha.example.com/rss")
    for i in range(100):
        b = feed("pb", f"https://beta{i}.example.net/rss")
        if feed_partition(b, 2) != feed_partition(a, 2):
            return a, b
    raise AssertionError("no split found")


def test_snapshot_only_contains_states_whose_records_were_emitted() -> None:
    a, b = _two_partition_feeds()
    gate: dict[str, asyncio.Event] = {}
    holder: dict[str, FakeFetcher] = {}

    def factory(cfg: PollerConfig) -> HttpFetcher:
        holder["f"] = FakeFetcher(delay=0, gates=gate)
        return holder["f"]

    src = PollerSource([a, b], pcfg(partitions=2, loop_slice_s=0.02), clock=FakeClock(), fetcher_factory=factory)
    pa = src.build_part("poll", f"feeds-{feed_partition(a, 2)}", None)
    pb = src.build_part("poll", f"feeds-{feed_partition(b, 2)}", None)
    try:
        gate[b.url] = asyncio.Event()
        assert pb.next_batch() == []  # b's fetch waits on its gate
        gate[b.url].set()
        evs_a = pa.next_batch()  # runs the shared loop: b's poll completes here ...
        assert [e.feed_id for e in evs_a] == ["pa"]
        assert pb.snapshot()["feeds"]["pb"]["etag"] is None  # ... but is not emitted yet
        evs_b = pb.next_batch()
        assert [e.feed_id for e in evs_b] == ["pb"]
        assert pb.snapshot()["feeds"]["pb"]["etag"] == f'"{b.url}"'
        assert pa.snapshot()["feeds"]["pa"]["etag"] == f'"{a.url}"'
        # resume from the snapshot: conditional headers on the next poll
        pa2 = src.build_part("poll", f"feeds-{feed_partition(a, 2)}", pa.snapshot())
        assert pa2._engine.states["pa"].etag == f'"{a.url}"'
        pa2.close()
    finally:
        pa.close()
        pb.close()


# ------------------------------------------------------------------------------------------
# The Bytewax flow, --once, state across restarts
# ------------------------------------------------------------------------------------------


@pytest.mark.http
def test_flow_once_persists_state_across_restarts(server: FixtureServer, tmp_path: Path) -> None:
    feeds = [feed("wire", server.url("/feeds/rss20.xml")), feed("atom", server.url("/feeds/atom.xml")),
             feed("gone", server.url("/status/410"))]
    cfg = pcfg(partitions=3)
    state = tmp_path / "state"
    statuses: list[list[str]] = []

    def once(force: bool = False) -> list[KafkaRecord]:
        out: list[KafkaRecord] = []
        seen: list[str] = []
        run_poller_flow(feeds, cfg, [], state_dir=state, once=True, force=force, sink=TestingSink(out),
                        progress=lambda ev: seen.append(f"{ev.feed_id}:{ev.status}"), snapshot_s=0.5)
        statuses.append(sorted(seen))
        return out

    r1 = once()
    assert statuses[0] == ["__tick__:tick", "atom:ok", "gone:dead", "wire:ok"]
    assert sorted((r.topic, r.key) for r in r1 if r.key != b"__tick__") == [
        ("feed-health", b"poller:atom"), ("feed-health", b"poller:gone"), ("feed-health", b"poller:wire"),
        ("feeds.raw", b"atom"), ("feeds.raw", b"gone"), ("feeds.raw", b"wire")]
    for r in r1:
        validate("feeds.raw" if r.topic == "feeds.raw" else "feed-health", orjson.loads(r.value))
    r2 = once()  # restart: nothing is due yet, the dead feed stays dead
    assert statuses[1] == ["__tick__:tick"] and len(r2) == 1
    n410 = len(server.requests_for("/status/410"))
    once(force=True)  # ignore schedules: conditional requests from the recovered state
    assert statuses[2] == ["__tick__:tick", "atom:not_modified", "wire:not_modified"]
    assert "If-None-Match" in server.requests_for("/feeds/rss20.xml")[-1].headers
    assert len(server.requests_for("/status/410")) == n410


# ------------------------------------------------------------------------------------------
# CLI: feeds import-opml / export-opml / check, progress
# ------------------------------------------------------------------------------------------


def test_cli_feeds_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from newsflow.cli.main import main

    opml = tmp_path / "subs.opml"
    opml.write_text('<opml version="2.0"><body><outline text="Tech">'
                    '<outline type="rss" text="A &amp; B" xmlUrl="https://ab.example.com/rss"/>'
                    '<outline type="rss" text="C" xmlUrl="https://c.example.org/atom"/></outline></body></opml>')
    reg = tmp_path / "feeds.toml"
    assert main(["feeds", "import-opml", str(opml), "--registry", str(reg), "--tier", "T3"]) == 0
    assert main(["feeds", "import-opml", str(opml), "--registry", str(reg)]) == 0  # idempotent merge
    assert "0 feeds added, 2 already present" in capsys.readouterr().out
    assert main(["feeds", "check", "--registry", str(reg)]) == 0
    assert "2 feeds, 0 errors" in capsys.readouterr().out
    assert main(["feeds", "export-opml", "--registry", str(reg)]) == 0
    out = capsys.readouterr().out
    assert 'xmlUrl="https://ab.example.com/rss"' in out and 'tier="T3"' in out
    reg.write_text(reg.read_text() + '\n[[feed]]\nid = "x"\nurl = "ftp://x.example/f"\ntier = "T7"\n')
    assert main(["feeds", "check", "--registry", str(reg)]) == 1
    assert "error: x.url" in capsys.readouterr().out
    assert main(["feeds", "check", "--registry", str(tmp_path / "missing.toml")]) == 2


def test_progress_display_counts_statuses() -> None:
    import io

    from newsflow.cli.poll import Progress

    buf = io.StringIO()
    p = Progress(3, buf, live=True, min_interval_s=0)
    for st in ("ok", "not_modified", "timeout"):
        p(PollEvent("f", st, (), T0, alert="slow" if st == "timeout" else None))
    p(PollEvent("__tick__", "tick", (), T0))
    p.finish()
    text = buf.getvalue()
    assert "polled 3/3" in text and "not modified 1" in text and "errors 1" in text and "! f: slow" in text
    assert "\r" in text


def test_large_bodies_go_to_blob_dir_or_are_reported_too_large(tmp_path: Path) -> None:
    big = rss_feed("big", [(f"g{i}", "x" * 200) for i in range(40)])
    f = feed("big", "https://big.example.org/rss")
    outcome = FetchOutcome(FetchKind.RESPONSE, f.url, status=200, headers={}, body=big)
    no_blobs = PollEngine([f], pcfg(max_inline_body_bytes=1000), clock=FakeClock(), fetcher=FakeFetcher())
    ev = no_blobs.apply(f, no_blobs.states["big"], outcome, T0, "example.org")
    assert ev.status == "too_large" and raw(ev) is None
    blobs = PollEngine([f], pcfg(max_inline_body_bytes=1000, blob_dir=str(tmp_path / "blobs")),
                       clock=FakeClock(), fetcher=FakeFetcher())
    ev = blobs.apply(f, blobs.states["big"], outcome, T0, "example.org")
    r = raw(ev)
    assert ev.status == "ok" and r is not None and r["body_b64"] is None
    assert r["body_ref"].startswith("file://") and Path(r["body_ref"][7:]).read_bytes() == big
    small = FetchOutcome(FetchKind.RESPONSE, f.url, status=200, headers={}, body=rss_feed("s", [("a", "A")]))
    r2 = raw(blobs.apply(f, blobs.states["big"], small, T0 + 1, "example.org"))
    assert r2 is not None and r2["body_b64"] and r2["body_ref"] is None


def test_stored_bodies_expire_after_blob_ttl(tmp_path: Path) -> None:
    f = feed("big", "https://big.example.org/rss")
    clock = FakeClock()
    cfg = pcfg(max_inline_body_bytes=1000, blob_dir=str(tmp_path / "blobs"), blob_ttl_s=86_400.0,
               blob_sweep_s=3_600.0)
    eng = PollEngine([f], cfg, clock=clock, fetcher=FakeFetcher())

    def poll_body(tag: str, at_ms: int) -> Path:
        body = rss_feed(tag, [(f"{tag}{i}", "x" * 200) for i in range(40)])
        out = FetchOutcome(FetchKind.RESPONSE, f.url, status=200, headers={}, body=body)
        r = raw(eng.apply(f, eng.states["big"], out, at_ms, "example.org"))
        assert r is not None and r["body_ref"]
        return Path(r["body_ref"][7:])

    old = poll_body("old", T0)
    kept = poll_body("kept", T0 + 2 * HOUR_MS)
    leftover = old.parent / "x.tmp999"  # a temp file of a killed writer
    leftover.write_bytes(b"partial")
    os.utime(leftover, (T0 / 1000, T0 / 1000))
    assert old.exists() and kept.exists()
    poll_body("new", T0 + 25 * HOUR_MS)  # more than a day after "old": swept on this poll
    assert not old.exists() and not leftover.exists() and kept.exists()
    assert eng.expire_blobs(T0 + 45 * HOUR_MS) == 1 and not kept.exists()


def test_continuous_partition_sleeps_until_the_next_due_feed() -> None:
    from datetime import UTC, datetime

    clock = FakeClock()
    f = feed("c", "https://c.example.org/rss", interval_s=1800.0)
    src = PollerSource([f], pcfg(partitions=1, idle_wakeup_s=3600), clock=clock,
                       fetcher_factory=lambda cfg: FakeFetcher(delay=0))
    part = src.build_part("poll", "feeds-0", None)
    try:
        evs: list[PollEvent] = []
        for _ in range(50):
            evs += part.next_batch()
            if evs:
                break
        assert [e.feed_id for e in evs] == ["c"]
        wake = part.next_awake()
        assert wake is not None
        delay = (wake - datetime.now(UTC)).total_seconds()
        assert 1800 * 0.99 < delay < 1800 * 1.11  # the jittered interval, not a busy loop
        assert part.next_batch() == []  # nothing due: no fetch
        clock.advance(2_000_000)
        assert part.next_awake() is not None and part.next_awake() <= datetime.now(UTC)
    finally:
        part.close()


@pytest.mark.http
def test_adopted_redirect_keeps_its_real_query_but_records_stay_redacted(server: FixtureServer) -> None:
    target_query = "token=secret-tok"
    eng = PollEngine([feed("q", server.url("/redir/301/-/feeds/atom.xml"))],
                     pcfg(policy=PollPolicy(redirect_adopt_after=1)), clock=FakeClock())

    async def go() -> PollEvent:
        async def fake_fetch(url: str, headers: Mapping[str, str] | None = None, **kw: Any) -> FetchOutcome:
            o = await HttpFetcher.fetch(eng.fetcher, url, headers, **kw)
            # pretend the Location carried a token, as private feeds' redirects do
            hops = tuple(replace(h, to_url=h.to_url + "?" + target_query) for h in o.redirects)
            return replace(o, redirects=hops)

        eng.fetcher.fetch = fake_fetch  # type: ignore[method-assign]
        try:
            return await eng.poll_feed(eng.feeds["q"])
        finally:
            await eng.aclose()

    ev = run(go)
    assert eng.states["q"].url.endswith("?" + target_query)  # adopted with its token
    assert b"secret-tok" not in b"".join(r.value for r in ev.records)
    assert "REDACTED" in (ev.alert or "")


def _screen(text: str) -> list[str]:
    """The lines a terminal shows for ``text`` (``\\r`` back to column 0, ``ESC[K`` clears to the
    end of the line)."""
    lines: list[str] = []
    for raw_line in text.split("\n"):
        line: list[str] = []
        col = 0
        i = 0
        while i < len(raw_line):
            if raw_line.startswith("\x1b[K", i):
                del line[col:]
                i += 3
                continue
            ch = raw_line[i]
            if ch == "\r":
                col = 0
            else:
                line[col:col + 1] = [ch]
                col += 1
            i += 1
        lines.append("".join(line))
    return lines


def test_log_lines_never_share_a_line_with_the_progress_line() -> None:
    import io
    import logging

    from newsflow.cli.poll import Progress

    buf = io.StringIO()  # stdout and stderr on one terminal
    lg = logging.getLogger("newsflow.test-progress")
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    lg.addHandler(handler)
    lg.propagate = False
    try:
        p = Progress(None, buf, live=True, min_interval_s=0)
        p.share_terminal(lg)
        p(PollEvent("f", "ok", (), T0))
        lg.warning("Kafka has not acknowledged 3 records")
        p(PollEvent("g", "ok", (), T0))
        lg.warning("second line")
        p.finish()
    finally:
        lg.removeHandler(handler)
    screen = _screen(buf.getvalue())
    logs = [s for s in screen if "WARNING" in s]
    assert logs == ["WARNING Kafka has not acknowledged 3 records", "WARNING second line"], screen
    assert any(s.startswith("polled 2") for s in screen), screen
