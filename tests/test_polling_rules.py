"""Pure unit tests of every polling rule (newsflow/polling.py) and of the feed registry.

Each section names the rule of docs/rules.md#polling it guards; breaking the rule breaks the
test.
"""

from __future__ import annotations

import email.utils
from dataclasses import replace
from pathlib import Path

import pytest

from newsflow.core.timeutil import DAY_MS, HOUR_MS
from newsflow.feeds import urls
from newsflow.polling import rules as prules
from newsflow.polling import safety as psafety
from newsflow.polling import scan as pscan
from newsflow.polling import state as pstate
from newsflow.polling.registry import (
    FeedSpec,
    Registry,
    check,
    dump_registry,
    export_opml,
    import_opml,
    load_registry,
    parse_duration_s,
    parse_registry,
    valid_feeds,
)
from newsflow.polling.state import (
    DomainState,
    FeedState,
    FetchKind,
    FetchOutcome,
    PollPolicy,
    RedirectHop,
)
from newsflow.wire import codec as phealth
from newsflow.wire.contracts import validate

FIX = Path(__file__).resolve().parent / "fixtures" / "feeds"
T0 = 1_715_000_000_000  # 2024-05-06T12:53:20Z
POLICY = PollPolicy()


def fixture(name: str) -> bytes:
    return (FIX / name).read_bytes()


def rss(guids: list[str], ttl: int | None = None) -> bytes:
    items = "".join(f"<item><title>t {g}</title><link>https://x.example/{g}</link><guid>{g}</guid>"
                    f"<pubDate>Mon, 06 May 2024 08:00:00 GMT</pubDate></item>" for g in guids)
    t = f"<ttl>{ttl}</ttl>" if ttl else ""
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>x</title>{t}{items}</channel></rss>'.encode()


def resp(status: int = 200, body: bytes | None = None, headers: dict[str, str] | None = None,
         redirects: tuple[RedirectHop, ...] = (), url: str = "https://feeds.example.com/rss") -> FetchOutcome:
    return FetchOutcome(FetchKind.RESPONSE, url, status=status, headers=headers or {}, body=body,
                        redirects=redirects, elapsed_ms=12.0)


def fresh(url: str = "https://feeds.example.com/rss", **kw: object) -> FeedState:
    return pstate.initial_state("f1", url, policy=POLICY, now_ms=T0, **kw)  # type: ignore[arg-type]


def poll(state: FeedState, outcome: FetchOutcome, now: int = T0, policy: PollPolicy = POLICY) -> prules.PollVerdict:
    return prules.decide_poll(state, outcome, now, policy)


def baseline(body: bytes | None = None) -> FeedState:
    """A feed after one successful poll of ``body``."""
    return poll(fresh(), resp(200, body or rss(["a", "b"]))).state


# ------------------------------------------------------------------------------------------
# Conditional GET, 304, body hash (docs/rules.md#requests, docs/rules.md#responses)
# ------------------------------------------------------------------------------------------


def test_conditional_headers_come_from_previous_poll() -> None:
    st = poll(fresh(), resp(200, rss(["a"]), {"etag": '"v1"', "last-modified": "Mon, 06 May 2024 08:00:00 GMT"})).state
    assert prules.conditional_headers(st) == {"If-None-Match": '"v1"',
                                         "If-Modified-Since": "Mon, 06 May 2024 08:00:00 GMT"}
    assert prules.conditional_headers(fresh()) == {}


def test_304_is_a_successful_poll_without_payload() -> None:
    st = baseline()
    v = poll(st, resp(304, None, {"etag": '"v2"'}))
    assert v.status == "not_modified" and v.success and not v.emit_body
    assert v.state.ok_polls == 2 and v.state.not_modified_polls == 1 and v.state.last_success_ms == T0
    assert v.state.etag == '"v2"'  # a 304 may refresh the validator


def test_200_with_same_body_hash_is_not_modified() -> None:
    body = rss(["a", "b"])
    v = poll(baseline(body), resp(200, body))
    assert v.status == "not_modified" and v.success and not v.emit_body and v.changed is False
    v2 = poll(baseline(body), resp(200, rss(["a", "b", "c"])))
    assert v2.status == "ok" and v2.emit_body and v2.new_items == 1


def test_first_poll_emits_body_and_sets_baseline() -> None:
    v = poll(fresh(), resp(200, rss(["a", "b"]), {"etag": '"e"'}))
    assert v.status == "ok" and v.emit_body and v.changed is None and v.new_items is None
    assert v.state.has_baseline and len(v.state.item_keys) == 2 and v.state.etag == '"e"'


# ------------------------------------------------------------------------------------------
# Which failures are retried immediately (docs/rules.md#retries-and-backoff)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "status", "headers", "expected"), [
    (FetchKind.CONNECT_ERROR, None, {}, True),
    (FetchKind.PROTOCOL_ERROR, None, {}, True),
    (FetchKind.RESPONSE, 500, {}, True),
    (FetchKind.RESPONSE, 502, {}, True),
    (FetchKind.RESPONSE, 504, {}, True),
    (FetchKind.RESPONSE, 503, {}, True),
    (FetchKind.RESPONSE, 503, {"retry-after": "120"}, False),  # the server said when
    (FetchKind.RESPONSE, 429, {}, False),
    (FetchKind.RESPONSE, 404, {}, False),
    (FetchKind.RESPONSE, 200, {}, False),
    (FetchKind.TIMEOUT, None, {}, False),  # retried once after 60 s instead
    (FetchKind.BLOCKED, None, {}, False),
    (FetchKind.TOO_LARGE, None, {}, False),
])
def test_is_transient_failure(kind: FetchKind, status: int | None, headers: dict[str, str], expected: bool) -> None:
    assert prules.is_transient_failure(kind, status, headers) is expected


# ------------------------------------------------------------------------------------------
# HTML instead of a feed, feed scanning, lenient recovery (docs/rules.md#responses)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "ct", "html"), [
    (fixture("cloudflare.html"), "text/html; charset=UTF-8", True),
    (fixture("error.html"), "text/html", True),
    (fixture("cloudflare.html"), "application/rss+xml", True),  # the body decides
    (b'<?xml version="1.0"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><body/></html>', "application/xml", True),
    (fixture("rss20.xml"), "text/html", False),  # feeds served as text/html are still feeds
    (fixture("atom.xml"), "text/html; charset=utf-8", False),
    (fixture("rss10_sy.xml"), None, False),
    (b"\xef\xbb\xbf<!-- c --><?xml-stylesheet href='x'?><rss version='2.0'/>", "text/html", False),
    (b"<p>Service unavailable</p>", "text/html", True),
    (fixture("broken.xml"), "application/json", False),  # not HTML: a parse error instead
])
def test_looks_like_html(body: bytes, ct: str | None, html: bool) -> None:
    assert pscan.looks_like_html(body, ct) is html


def test_html_page_is_its_own_status_not_a_parse_error() -> None:
    st = baseline()
    v = poll(st, resp(200, fixture("cloudflare.html"), {"content-type": "text/html"}))
    assert v.status == "html_instead_of_feed" and not v.success and not v.emit_body
    assert v.state.consecutive_parse_failures == 0 and v.state.parse_failures == 0
    assert v.state.body_hash == st.body_hash  # the challenge page is not remembered as the feed


@pytest.mark.parametrize(("name", "fmt", "items", "undated"), [
    ("rss20.xml", "rss20", 3, 0),
    ("rss10_sy.xml", "rss10", 2, 0),
    ("atom.xml", "atom10", 2, 0),
    ("empty.xml", "rss20", 0, 0),
    ("undated.xml", "rss20", 2, 2),
    ("partial_undated.xml", "rss20", 3, 2),  # one missing, one in 2100 (docs/rules.md#dates)
    ("windows1252.xml", "rss20", 1, 0),
])
def test_scan_feed_formats_items_dates(name: str, fmt: str, items: int, undated: int) -> None:
    s = pscan.scan_feed(fixture(name), T0)
    assert s.ok and s.feed_format == fmt and s.items == items and s.undated == undated
    assert len(s.item_keys) == items


def test_lenient_recovery_repairs_bare_ampersands_and_html_entities() -> None:
    body = fixture("ampersand.xml")
    with pytest.raises(Exception):  # noqa: B017 - strict XML really fails on this fixture
        import xml.etree.ElementTree as ET

        ET.fromstring(body)
    s = pscan.scan_feed(body, T0)
    assert s.ok and s.recovered == "repaired_xml" and s.items == 1


def test_lenient_recovery_falls_back_to_tolerant_parser() -> None:
    body = b"<rss version='2.0'><channel><title>x</title><item><title>a</title><link>https://x/1</link></item>"
    s = pscan.scan_feed(body, T0)  # unclosed: strict and repaired XML fail, feedparser recovers
    assert s.ok and s.recovered == "lenient_parser" and s.items == 1


def test_unparseable_body_fails_scan() -> None:
    s = pscan.scan_feed(fixture("broken.xml"), T0)
    assert not s.ok and s.error


@pytest.mark.parametrize(("name", "status"), [
    ("empty.xml", "empty"),
    ("undated.xml", "all_undated"),
    ("partial_undated.xml", "partial_undated"),
    ("rss20.xml", "ok"),
])
def test_004_date_statuses(name: str, status: str) -> None:
    v = poll(fresh(), resp(200, fixture(name)))
    assert v.status == status and v.success and v.emit_body


# ------------------------------------------------------------------------------------------
# 3+ parse failures -> unhealthy (docs/rules.md#feed-health)
# ------------------------------------------------------------------------------------------


def test_three_consecutive_parse_failures_flag_unhealthy_once() -> None:
    st = baseline()
    alerts = []
    for i in range(4):
        v = poll(st, resp(200, fixture("broken.xml")), T0 + i * HOUR_MS)
        assert v.status == "parse_error" and not v.success
        st = v.state
        alerts.append(v.alerts)
        assert st.unhealthy is (i >= 2)
    assert alerts[2] and "unhealthy" in alerts[2][0]
    assert not alerts[0] and not alerts[1] and not alerts[3]  # alert on the transition only
    v = poll(st, resp(200, rss(["a", "b", "z"])), T0 + 5 * HOUR_MS)
    assert not v.state.unhealthy and v.state.consecutive_parse_failures == 0


def test_unparseable_body_is_emitted_once_for_dead_lettering() -> None:
    st = baseline()
    v1 = poll(st, resp(200, fixture("broken.xml")))
    v2 = poll(v1.state, resp(200, fixture("broken.xml")), T0 + HOUR_MS)
    assert v1.emit_body and not v2.emit_body
    assert v2.state.consecutive_parse_failures == 2  # the same broken body still counts


# ------------------------------------------------------------------------------------------
# 301/308 adoption after N, 302/307 keep the URL
# ------------------------------------------------------------------------------------------

OLD = "https://feeds.example.com/rss"
NEW = "https://new.example.com/feed"


def hops(*codes: int) -> tuple[RedirectHop, ...]:
    urls = [OLD, *[f"https://hop{i}.example.com/" for i in range(len(codes) - 1)], NEW]
    return tuple(RedirectHop(c, urls[i], urls[i + 1]) for i, c in enumerate(codes))


def test_permanent_redirect_target() -> None:
    assert prules.permanent_redirect_target(hops(301)) == NEW
    assert prules.permanent_redirect_target(hops(308)) == NEW
    assert prules.permanent_redirect_target(hops(301, 308)) == NEW
    assert prules.permanent_redirect_target(hops(301, 302)) == "https://hop0.example.com/"
    assert prules.permanent_redirect_target(hops(302, 301)) is None
    assert prules.permanent_redirect_target(hops(307)) is None
    assert prules.permanent_redirect_target(()) is None


@pytest.mark.parametrize("code", [301, 308])
def test_permanent_redirect_adopted_after_n_consecutive(code: int) -> None:
    pol = replace(POLICY, redirect_adopt_after=3)
    st = baseline()
    for i in range(3):
        v = poll(st, resp(200, rss(["a", "b"]), redirects=hops(code)), T0 + i * HOUR_MS, pol)
        st = v.state
        if i < 2:
            assert st.url == OLD and st.redirect_count == i + 1 and v.adopted_url is None
    assert st.url == NEW and v.adopted_url == NEW and any("url_changed" in a for a in v.alerts)
    assert st.registry_url == OLD


def test_one_off_redirect_does_not_move_the_feed() -> None:
    st = baseline()
    st = poll(st, resp(200, rss(["a", "b"]), redirects=hops(301))).state
    st = poll(st, resp(200, rss(["a", "b"]), redirects=hops(301)), T0 + HOUR_MS).state
    st = poll(st, resp(304), T0 + 2 * HOUR_MS).state  # served directly again: streak broken
    assert st.redirect_count == 0
    st = poll(st, resp(200, rss(["a", "b"]), redirects=hops(301)), T0 + 3 * HOUR_MS).state
    assert st.url == OLD and st.redirect_count == 1


def test_redirect_to_a_different_target_restarts_the_count() -> None:
    st = baseline()
    st = poll(st, resp(200, rss(["a"]), redirects=hops(301))).state
    other = (RedirectHop(301, OLD, "https://maintenance.example.com/"),)
    st = poll(st, resp(200, rss(["a"]), redirects=other), T0 + HOUR_MS).state
    assert st.redirect_target == "https://maintenance.example.com/" and st.redirect_count == 1


def test_failed_poll_after_permanent_redirect_does_not_count() -> None:
    st = baseline()
    for i in range(5):
        st = poll(st, resp(404, redirects=hops(301)), T0 + i * HOUR_MS).state
    assert st.url == OLD and st.redirect_count == 0


@pytest.mark.parametrize("code", [302, 303, 307])
def test_temporary_redirects_keep_the_url(code: int) -> None:
    st = baseline()
    for i in range(6):
        st = poll(st, resp(200, rss(["a", "b"]), redirects=hops(code)), T0 + i * HOUR_MS).state
    assert st.url == OLD and st.redirect_count == 0


# ------------------------------------------------------------------------------------------
# 410 dead; 429/503 Retry-After; other errors back off
# ------------------------------------------------------------------------------------------


def test_410_marks_dead_and_removes_from_polling() -> None:
    v = poll(baseline(), resp(410))
    assert v.status == "dead" and v.state.dead and v.state.next_poll_ms is None
    assert v.alerts and "dead" in v.alerts[0]
    assert not v.success and not v.emit_body


def test_parse_retry_after_seconds_and_http_date() -> None:
    assert prules.parse_retry_after("120", T0) == 120.0
    assert prules.parse_retry_after(" 0 ", T0) == 0.0
    date = email.utils.formatdate((T0 + 90_000) / 1000, usegmt=True)
    assert prules.parse_retry_after(date, T0) == pytest.approx(90.0)
    past = email.utils.formatdate((T0 - 90_000) / 1000, usegmt=True)
    assert prules.parse_retry_after(past, T0) == 0.0
    assert prules.parse_retry_after("soon", T0) is None
    assert prules.parse_retry_after(None, T0) is None
    assert prules.parse_retry_after("-5", T0) is None


@pytest.mark.parametrize("form", ["seconds", "date"])
def test_429_honours_retry_after_and_doubles_interval(form: str) -> None:
    st = baseline()
    ra = "600" if form == "seconds" else email.utils.formatdate((T0 + 600_000) / 1000, usegmt=True)
    v = poll(st, resp(429, headers={"retry-after": ra}))
    assert v.status == "rate_limited" and v.rate_limited and not v.success
    assert v.retry_after_s == pytest.approx(600.0)
    assert v.state.next_poll_ms == T0 + 600_000
    assert v.state.interval_s == st.interval_s * 2


def test_429_without_retry_after_waits_the_doubled_interval() -> None:
    st = baseline()
    v = poll(st, resp(429))
    assert v.status == "rate_limited" and v.state.interval_s == st.interval_s * 2
    assert v.state.next_poll_ms is not None and v.state.next_poll_ms >= T0 + st.interval_s * 2000


def test_503_with_retry_after_is_rate_limited_without_is_an_error() -> None:
    st = baseline()
    v = poll(st, resp(503, headers={"retry-after": "900"}))
    assert v.status == "rate_limited" and v.state.next_poll_ms == T0 + 900_000
    assert v.state.interval_s == st.interval_s * 2
    v2 = poll(st, resp(503))
    assert v2.status == "http_error" and v2.state.interval_s == st.interval_s


@pytest.mark.parametrize("code", [429, 503])
@pytest.mark.parametrize("ra", ["0", "30", "past"])
def test_retry_after_below_the_minimum_interval_is_floored(code: int, ra: str) -> None:
    st = baseline()
    if ra == "past":
        ra = email.utils.formatdate((T0 - 3_600_000) / 1000, usegmt=True)
    v = poll(st, resp(code, headers={"retry-after": ra}))
    assert v.status == "rate_limited"
    assert v.state.next_poll_ms == T0 + int(POLICY.min_interval_s * 1000)
    # a registry interval is a floor too
    st2 = replace(st, registry_floor_s=1800.0)
    assert poll(st2, resp(code, headers={"retry-after": ra})).state.next_poll_ms == T0 + 1_800_000
    # and the domain pauses at least domain_rate_limit_default_s
    d = prules.update_domain_backoff(DomainState("example.org"), rate_limited=True, retry_after_s=0.0,
                                     server_trouble=False, success=False, now_ms=T0, policy=POLICY)
    assert d.backoff_until_ms == T0 + int(POLICY.domain_rate_limit_default_s * 1000)


def test_retry_after_is_capped() -> None:
    v = poll(baseline(), resp(429, headers={"retry-after": str(30 * 86400)}))
    assert v.state.next_poll_ms == T0 + int(POLICY.max_retry_after_s * 1000)


def test_http_errors_increment_counter_and_back_off_exponentially() -> None:
    st = baseline()
    delays = []
    for i in range(4):
        now = T0 + i * DAY_MS
        v = poll(st, resp(500), now)
        assert v.status == "http_error" and v.server_trouble
        st = v.state
        assert st.consecutive_errors == i + 1
        delays.append((st.next_poll_ms or 0) - now)
    assert delays == [int(st.interval_s * 1000 * 2**i) for i in range(4)]
    assert st.http_errors == 4 and st.failed_polls == 4
    v = poll(st, resp(404))
    assert v.status == "http_error" and not v.server_trouble  # client error: not the server's health
    st = poll(v.state, resp(200, rss(["a", "b"])), T0 + 10 * DAY_MS).state
    assert st.consecutive_errors == 0


def test_error_backoff_s_caps_at_24h() -> None:
    assert prules.error_backoff_s(1800, 1, 86400) == 1800
    assert prules.error_backoff_s(1800, 3, 86400) == 7200
    assert prules.error_backoff_s(1800, 30, 86400) == 86400


# ------------------------------------------------------------------------------------------
# Timeout: retry once after 60 s, then slow
# ------------------------------------------------------------------------------------------


def test_timeout_retries_after_60s_then_flags_slow() -> None:
    st = baseline()
    t = FetchOutcome(FetchKind.TIMEOUT, OLD, error="timed out")
    v1 = poll(st, t)
    assert v1.status == "timeout" and v1.state.next_poll_ms == T0 + 60_000 and not v1.state.slow
    assert not v1.alerts
    v2 = poll(v1.state, t, T0 + 60_000)
    assert v2.state.slow and v2.alerts and "slow" in v2.alerts[0]
    assert v2.state.next_poll_ms is not None and v2.state.next_poll_ms > T0 + 60_000 + 60_000
    v3 = poll(v2.state, t, T0 + DAY_MS)
    assert v3.state.slow and not v3.alerts  # alert once
    v4 = poll(v3.state, resp(200, rss(["a", "b"])), T0 + 2 * DAY_MS)
    assert not v4.state.slow and v4.state.consecutive_timeouts == 0


# ------------------------------------------------------------------------------------------
# Hints as lower bounds, default table, adaptation, jitter (docs/rules.md#poll-interval)
# ------------------------------------------------------------------------------------------


def test_default_interval_table_of_001() -> None:
    assert pstate.default_interval_s("breaking") == 15 * 60
    assert pstate.default_interval_s("major") == 30 * 60
    assert pstate.default_interval_s("blog") == 2 * 3600
    assert pstate.default_interval_s("newsletter") == 12 * 3600
    assert pstate.default_interval_s("dormant") == 24 * 3600
    assert pstate.default_interval_s(None) == 30 * 60
    assert fresh(feed_type="blog").interval_s == 7200
    st = fresh(interval_s=3 * 3600)
    assert st.interval_s == 3 * 3600 and prules.hint_floor_s(st, POLICY) == 3 * 3600


def test_sy_update_interval() -> None:
    assert pscan.sy_update_interval_s("hourly", "1") == 3600
    assert pscan.sy_update_interval_s("daily", "2") == 43200
    assert pscan.sy_update_interval_s("weekly", None) == 7 * 86400
    assert pscan.sy_update_interval_s("fortnightly", "1") is None
    assert pscan.sy_update_interval_s("hourly", "abc") == 3600


def test_cache_control_and_expires_hints() -> None:
    assert prules.cache_control_max_age_s("public, max-age=7200") == 7200
    assert prules.cache_control_max_age_s("no-cache, max-age=60") is None
    assert prules.cache_control_max_age_s("max-age=0") is None
    date = email.utils.formatdate(T0 / 1000, usegmt=True)
    exp = email.utils.formatdate(T0 / 1000 + 5400, usegmt=True)
    assert prules.expires_hint_s(exp, date, T0) == pytest.approx(5400)
    assert prules.expires_hint_s(exp, None, T0) == pytest.approx(5400)
    assert prules.expires_hint_s("0", date, T0) is None
    # max-age wins over Expires (RFC 9111)
    assert prules.http_cache_hint_s({"cache-control": "max-age=600", "expires": exp, "date": date}, T0) == 600
    assert prules.http_cache_hint_s({"expires": exp, "date": date}, T0) == pytest.approx(5400)
    assert prules.http_cache_hint_s({"cache-control": "no-store", "expires": exp}, T0) is None


@pytest.mark.parametrize(("body", "headers", "floor"), [
    (rss(["a"], ttl=120), {}, 7200),  # <ttl> minutes
    (fixture("rss10_sy.xml"), {}, 43200),  # sy: daily / 2
    (rss(["a"]), {"cache-control": "max-age=5400"}, 5400),
    (rss(["a"], ttl=60), {"cache-control": "max-age=5400"}, 5400),  # the larger bound wins
    (rss(["a"], ttl=60 * 24 * 30), {}, 86400),  # capped at the 24 h maximum
])
def test_publisher_hints_are_lower_bounds(body: bytes, headers: dict[str, str], floor: float) -> None:
    v = poll(fresh(), resp(200, body, headers))
    assert prules.hint_floor_s(v.state, POLICY) == floor
    assert v.state.interval_s >= floor
    assert (v.state.next_poll_ms or 0) - T0 >= floor * 1000


def test_five_unchanged_polls_double_the_interval_up_to_24h() -> None:
    st = baseline()
    start = st.interval_s
    for i in range(4):
        st = poll(st, resp(304), T0 + (i + 1) * HOUR_MS).state
    assert st.interval_s == start  # 4 unchanged: not yet
    st = poll(st, resp(304), T0 + 5 * HOUR_MS).state
    assert st.interval_s == start * 2
    for i in range(200):
        st = poll(st, resp(304), T0 + (6 + i) * DAY_MS).state
    assert st.interval_s == 86400


def test_new_items_on_every_poll_halve_the_interval_down_to_the_floor() -> None:
    st = replace(baseline(), interval_s=4 * 3600.0)
    guids = ["a", "b"]
    for i in range(3):
        guids.append(f"n{i}")
        st = poll(st, resp(200, rss(guids)), T0 + (i + 1) * HOUR_MS).state
    assert st.interval_s == 2 * 3600
    for i in range(60):
        guids.append(f"m{i}")
        st = poll(st, resp(200, rss(guids)), T0 + (10 + i) * HOUR_MS).state
    assert st.interval_s == POLICY.min_interval_s  # never below the floor
    # with a ttl hint the floor is the ttl
    st = replace(st, interval_s=4 * 3600.0)
    for i in range(60):
        guids.append(f"k{i}")
        st = poll(st, resp(200, rss(guids, ttl=90)), T0 + (100 + i) * HOUR_MS).state
    assert st.interval_s == 90 * 60


def test_adapt_interval_mixed_polls_do_not_adapt() -> None:
    st = replace(baseline(), interval_s=7200.0)
    for i in range(20):
        st = prules.adapt_interval(st, i % 2 == 0, POLICY)
    assert st.interval_s == 7200.0


def test_jitter_is_deterministic_bounded_and_spreads_feeds() -> None:
    d1 = prules.jittered_delay_s(1800, "feed-a", 7, 0.1)
    assert d1 == prules.jittered_delay_s(1800, "feed-a", 7, 0.1)  # stable across runs (no hash())
    assert 1800 <= d1 < 1980
    delays = {prules.jittered_delay_s(1800, f"feed-{i}", 1, 0.1) for i in range(200)}
    assert len(delays) > 150 and max(delays) - min(delays) > 120
    assert prules.jittered_delay_s(1800, "feed-a", 8, 0.1) != d1
    assert prules.jitter_unit("feed-a", 7) == pytest.approx(0.0 + prules.jitter_unit("feed-a", 7))


def test_next_poll_uses_jittered_interval() -> None:
    v = poll(fresh(), resp(200, rss(["a"])))
    delay = (v.state.next_poll_ms or 0) - T0
    assert v.state.interval_s * 1000 <= delay < v.state.interval_s * 1000 * 1.1


# ------------------------------------------------------------------------------------------
# Feed health: reliability over 30 days, silent zero, counters, record schema
# ------------------------------------------------------------------------------------------


def test_reliability_is_success_ratio_over_30_days() -> None:
    daily: tuple[tuple[int, int, int], ...] = ()
    for i in range(40):  # days 0..9 all fail, days 10..39 all succeed
        daily = prules.record_daily_outcome(daily, T0 + i * DAY_MS, success=i >= 10)
    assert len(daily) == 30
    assert prules.reliability_score(daily, T0 + 39 * DAY_MS) == 1.0
    daily = prules.record_daily_outcome(daily, T0 + 39 * DAY_MS, success=False)
    assert prules.reliability_score(daily, T0 + 39 * DAY_MS) == pytest.approx(30 / 31)
    assert prules.reliability_score((), T0) is None


def test_decide_poll_feeds_reliability() -> None:
    st = baseline()
    st = poll(st, resp(500), T0 + 1000).state
    st = poll(st, resp(304), T0 + 2000).state
    st = poll(st, resp(410), T0 + 3000).state
    assert prules.reliability_score(st.daily, T0 + 3000) == pytest.approx(2 / 4)


def test_silent_zero_for_a_daily_feed_gone_quiet() -> None:
    st = baseline()
    guids = ["a", "b"]
    for d in range(1, 6):  # new item every day
        guids.append(f"d{d}")
        v = poll(st, resp(200, rss(guids)), T0 + d * DAY_MS)
        st = v.state
        assert v.status == "ok"
    # quiet: 200 with the same items (body differs by a build date so the hash does not match)
    statuses, alerts = [], []
    for h in range(1, 6 * 24, 6):
        body = rss(guids).replace(b"<title>x</title>", f"<title>x {h}</title>".encode())
        v = poll(st, resp(200, body), T0 + 5 * DAY_MS + h * HOUR_MS)
        st = v.state
        statuses.append(v.status)
        alerts.extend(a for a in v.alerts if "silent_zero" in a)
    assert statuses[0] == "ok"
    assert statuses[-1] == "silent_zero" and st.silent
    assert len(alerts) == 1  # alert on the transition
    first_silent = statuses.index("silent_zero")
    assert first_silent * 6 + 1 >= 4 * 24  # not before 4x the usual (1 day) gap
    guids.append("back")
    v = poll(st, resp(200, rss(guids)), T0 + 12 * DAY_MS)
    assert v.status == "ok" and not v.state.silent


def test_new_feed_is_never_silent_zero() -> None:
    st = baseline()
    for d in range(1, 40):
        v = poll(st, resp(304), T0 + d * DAY_MS)
        st = v.state
        assert v.status == "not_modified"


def test_health_counters_and_record_validate_against_schema() -> None:
    st = fresh()
    outcomes = [resp(200, rss(["a"]), {"etag": '"1"'}), resp(304), resp(500),
                FetchOutcome(FetchKind.TIMEOUT, OLD), resp(429, headers={"retry-after": "5"}),
                resp(200, fixture("cloudflare.html")), resp(200, fixture("broken.xml")),
                FetchOutcome(FetchKind.BLOCKED, OLD, error="refused"),
                FetchOutcome(FetchKind.TOO_LARGE, OLD), resp(200, fixture("undated.xml")), resp(410)]
    seen = set()
    for i, o in enumerate(outcomes):
        v = poll(st, o, T0 + i * 1000)
        st = v.state
        rec = phealth.poll_health_record(v, o, T0 + i * 1000, POLICY, domain="example.com")
        validate("feed-health", rec)
        assert list(rec)[:8] == ["schema", "schema_version", "record_id", "poll_id", "feed_id",
                                 "source", "at", "status"]
        assert type(st.last_status) is str  # snapshots hold plain values, never enum members
        seen.add(rec["status"])
    assert seen >= {"ok", "not_modified", "http_error", "timeout", "rate_limited",
                    "html_instead_of_feed", "parse_error", "blocked", "too_large", "all_undated", "dead"}
    c = phealth.health_counters(st)
    assert c["total_polls"] == 11 and c["successful_polls"] == 3 and c["not_modified_polls"] == 1
    assert c["not_modified_ratio"] == pytest.approx(1 / 3)
    assert c["avg_response_ms"] == 12.0 and c["last_success_at"] is not None


# ------------------------------------------------------------------------------------------
# Politeness: registrable domain and shared backoff
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "domain"), [
    ("https://staff.tumblr.com/rss", "tumblr.com"),
    ("https://a.b.tumblr.com/rss", "tumblr.com"),
    ("http://feeds.bbci.co.uk/news/rss.xml", "bbci.co.uk"),
    ("https://www.example.com.au/feed", "example.com.au"),
    ("http://127.0.0.1:8080/feed", "127.0.0.1"),
    ("http://[::1]:80/feed", "::1"),
    ("http://localhost/feed", "localhost"),
])
def test_registrable_domain(url: str, domain: str) -> None:
    assert urls.registrable_domain(url) == domain


def test_domain_backoff_on_rate_limit_and_server_failures() -> None:
    d = DomainState("tumblr.com")
    d = prules.update_domain_backoff(d, rate_limited=True, retry_after_s=120, server_trouble=False,
                                success=False, now_ms=T0, policy=POLICY)
    assert prules.domain_backoff_remaining_ms(d, T0) == 120_000
    assert prules.domain_backoff_remaining_ms(d, T0 + 120_000) == 0
    d = DomainState("x.com")
    for _ in range(2):
        d = prules.update_domain_backoff(d, rate_limited=False, retry_after_s=None, server_trouble=True,
                                    success=False, now_ms=T0, policy=POLICY)
        assert prules.domain_backoff_remaining_ms(d, T0) == 0
    d = prules.update_domain_backoff(d, rate_limited=False, retry_after_s=None, server_trouble=True,
                                success=False, now_ms=T0, policy=POLICY)
    assert prules.domain_backoff_remaining_ms(d, T0) == 60_000
    d = prules.update_domain_backoff(d, rate_limited=False, retry_after_s=None, server_trouble=True,
                                success=False, now_ms=T0, policy=POLICY)
    assert prules.domain_backoff_remaining_ms(d, T0) == 120_000
    d = prules.update_domain_backoff(d, rate_limited=False, retry_after_s=None, server_trouble=False,
                                success=False, now_ms=T0, policy=POLICY)
    assert d.consecutive_failures == 4  # neutral (404/parse) changes nothing
    d = prules.update_domain_backoff(d, rate_limited=False, retry_after_s=None, server_trouble=False,
                                success=True, now_ms=T0, policy=POLICY)
    assert d.consecutive_failures == 0


# ------------------------------------------------------------------------------------------
# Safety helpers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("addr", "reason"), [
    ("93.184.216.34", None),
    ("2606:2800:220:1:248:1893:25c8:1946", None),
    ("127.0.0.1", "loopback address"),
    ("::1", "loopback address"),
    ("10.1.2.3", "private address"),
    ("172.16.0.1", "private address"),
    ("192.168.1.1", "private address"),
    ("100.64.0.1", "private address"),
    ("fd00::1", "private address"),
    ("169.254.169.254", "link-local address"),
    ("fe80::1", "link-local address"),
    ("0.0.0.0", "unspecified address"),
    ("224.0.0.1", "multicast address"),
    ("::ffff:10.0.0.1", "private address"),
])
def test_address_block_reason(addr: str, reason: str | None) -> None:
    assert psafety.address_block_reason(addr) == reason


def test_allow_private_never_allows_link_local_and_allowlist_is_explicit() -> None:
    assert psafety.address_block_reason("10.0.0.1", allow_private=True) is None
    assert psafety.address_block_reason("127.0.0.1", allow_private=True) is None
    assert psafety.address_block_reason("169.254.169.254", allow_private=True) == "link-local address"
    assert psafety.address_block_reason("127.0.0.1", allowed_networks=["127.0.0.1/32"]) is None
    assert psafety.address_block_reason("127.0.0.2", allowed_networks=["127.0.0.1/32"]) == "loopback address"


@pytest.mark.parametrize(("addr", "reason"), [
    # cloud metadata endpoints that are not link-local (AWS IPv6, Alibaba, Oracle)
    ("fd00:ec2::254", "cloud metadata address"),
    ("100.100.100.200", "cloud metadata address"),
    ("192.0.0.192", "cloud metadata address"),
    # IPv6 transition addresses are judged by the IPv4 they wrap
    ("2002:a00:1::1", "6to4 address wrapping a private address"),
    ("2002:a9fe:a9fe::", "6to4 address wrapping a link-local address"),
    ("64:ff9b::10.0.0.1", "NAT64 address wrapping a private address"),
    ("64:ff9b::127.0.0.1", "NAT64 address wrapping a loopback address"),
    ("64:ff9b:1::a00:1", "NAT64 address wrapping a private address"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo address"),
    # special-purpose ranges that are neither public nor an operator's private network
    ("192.0.0.8", "non-public address"),
    ("198.18.0.1", "non-public address"),
    ("192.0.2.1", "non-public address"),
    ("2001:db8::1", "non-public address"),
    ("240.0.0.1", "reserved address"),
])
def test_metadata_wrappers_and_special_ranges_blocked_even_with_allow_private(addr: str, reason: str) -> None:
    assert psafety.address_block_reason(addr) == reason
    assert psafety.address_block_reason(addr, allow_private=True) == reason
    assert psafety.address_block_reason(addr, allowed_networks=[addr]) is None  # explicit opt-in only


def test_wrappers_of_public_ipv4_and_operator_networks() -> None:
    assert psafety.address_block_reason("2002:5db8:d822::1") is None  # 6to4 of 93.184.216.34
    assert psafety.address_block_reason("64:ff9b::93.184.216.34") is None
    for a in ("10.0.0.1", "172.16.5.4", "192.168.0.1", "100.64.1.1", "fd12::1", "::ffff:192.168.0.1"):
        assert psafety.address_block_reason(a) == "private address"
        assert psafety.address_block_reason(a, allow_private=True) is None


@pytest.mark.parametrize(("url", "ok"), [
    ("https://x.example/feed", True), ("HTTP://x.example/feed", True),
    ("ftp://x.example/feed", False), ("file:///etc/passwd", False),
    ("javascript:alert(1)", False), ("gopher://x.example/", False), ("http:///nohost", False),
])
def test_scheme_allow_list(url: str, ok: bool) -> None:
    assert psafety.scheme_allowed(url) is ok


def test_redact_url_and_messages() -> None:
    assert psafety.redact_url("https://user:pa55@x.example/f?a=1") == "https://x.example/f?a=1"
    r = psafety.redact_url("https://x.example/f?token=abc&x=1&api_key=zzz")
    assert "abc" not in r and "zzz" not in r and "x=1" in r
    m = psafety.redact_message("ConnectError for https://u:secret@x.example/f?key=k1 failed")
    assert m is not None and "secret" not in m and "k1" not in m


# ------------------------------------------------------------------------------------------
# State reconciliation
# ------------------------------------------------------------------------------------------


def test_reconcile_state_keeps_state_until_registry_url_changes() -> None:
    st = poll(fresh(), resp(200, rss(["a"]), {"etag": '"1"'})).state
    same = pstate.reconcile_state(st, "f1", OLD, policy=POLICY, now_ms=T0 + 5)
    assert same is st
    moved = pstate.reconcile_state(st, "f1", NEW, policy=POLICY, now_ms=T0 + 5)
    assert moved.url == NEW and moved.etag is None and moved.next_poll_ms == T0 + 5
    dead = prules.mark_dead_on_gone(st)
    revived = pstate.reconcile_state(dead, "f1", NEW, policy=POLICY, now_ms=T0)
    assert not revived.dead
    slower = pstate.reconcile_state(st, "f1", OLD, interval_s=6 * 3600, policy=POLICY, now_ms=T0)
    assert slower.interval_s == 6 * 3600 and slower.registry_floor_s == 6 * 3600


# ------------------------------------------------------------------------------------------
# Registry: TOML, check, OPML
# ------------------------------------------------------------------------------------------

REG_TOML = """
[defaults]
language = "en"

[[feed]]
id = "bbc-world"
url = "https://feeds.bbci.co.uk/news/world/rss.xml"
name = "BBC World"
publisher = "BBC"
tier = "T2"
category = "world"
interval = "30m"
feed_type = "major"

[[feed]]
id = "blog"
url = "https://someone.tumblr.com/rss"
tier = "t4"
"""


def test_load_registry_with_defaults(tmp_path: Path) -> None:
    p = tmp_path / "feeds.toml"
    p.write_text(REG_TOML)
    reg = load_registry(p)
    a, b = reg.feeds
    assert (a.id, a.tier, a.language, a.interval_s, a.feed_type) == ("bbc-world", "T2", "en", 1800, "major")
    assert b.publisher == "tumblr.com" and b.tier == "T4" and b.name == "someone.tumblr.com"
    assert b.category == "general" and b.language == "en"
    assert check(reg) == []


def test_check_reports_every_problem() -> None:
    reg = parse_registry({"feed": [
        {"id": "ok", "url": "https://a.example/f"},
        {"id": "ok", "url": "https://b.example/f"},
        {"id": "__tick__", "url": "https://c.example/f"},
        {"id": "Bad Id", "url": "https://d.example/f"},
        {"id": "ftp", "url": "ftp://e.example/f"},
        {"id": "tier", "url": "https://f.example/f", "tier": "T9"},
        {"id": "iv", "url": "https://g.example/f", "interval": "soon"},
        {"id": "fast", "url": "https://h.example/f", "interval": 30},
        {"id": "ft", "url": "https://i.example/f", "feed_type": "hourly"},
        {"id": "cred", "url": "https://u:p@j.example/f"},
        {"id": "dupurl", "url": "https://a.example/f"},
        {"id": "lan", "url": "http://192.168.0.10/f", "language": "english!"},
        {"id": "typo", "url": "https://k.example/f", "teir": "T1"},
        {"url": "https://noid.example/f"},
    ]})
    probs = check(reg)
    text = "\n".join(map(str, probs))
    errors = {(p.feed_id, p.field) for p in probs if p.level == "error"}
    warnings = {(p.feed_id, p.field) for p in probs if p.level == "warning"}
    assert {("ok", "id"), ("__tick__", "id"), ("Bad Id", "id"), ("ftp", "url"), ("tier", "tier"),
            ("iv", "interval"), ("ft", "feed_type"), ("#14", "id")} <= errors
    assert {("fast", "interval"), ("cred", "url"), ("dupurl", "url"), ("lan", "url"),
            ("lan", "language"), ("typo", "teir")} <= warnings
    assert "duplicate id" in text and probs[0].level == "error"
    ok, _ = valid_feeds(reg)
    assert {f.id for f in ok} == {"fast", "cred", "dupurl", "lan", "typo"}


def test_parse_duration() -> None:
    assert parse_duration_s("15m") == 900
    assert parse_duration_s("1h30m") == 5400
    assert parse_duration_s("2h") == 7200
    assert parse_duration_s("1d") == 86400
    assert parse_duration_s(600) == 600
    assert parse_duration_s("600") == 600
    assert parse_duration_s("abc") is None
    assert parse_duration_s(0) is None


OPML = b"""<?xml version="1.0" encoding="UTF-8"?>
<opml version="1.0">
  <head><title>My feeds & more</title></head>
  <body>
    <outline text="News">
      <outline type="rss" text="Wire &amp; Co" xmlUrl="https://wire.example/rss?a=1&b=2" htmlUrl="https://www.wire.example/"/>
      <outline text="World">
        <outline type="rss" title="Deep One" xmlurl="https://deep.example/feed"/>
      </outline>
    </outline>
    <outline type="rss" text="" xmlUrl="https://blog.tumblr.com/rss" category="/Tech/Blogs"/>
    <outline type="rss" text="Wire duplicate" xmlUrl="https://wire.example/rss?a=1&b=2"/>
    <outline type="link" text="just a link" url="https://not-a-feed.example/"/>
  </body>
</opml>
"""


def test_import_opml_is_tolerant() -> None:
    feeds = import_opml(OPML, existing_ids=["wire-co"])  # bare & in the attribute: repaired
    assert [f.url for f in feeds] == ["https://wire.example/rss?a=1&b=2", "https://deep.example/feed",
                                      "https://blog.tumblr.com/rss"]
    wire, deep, blog = feeds
    assert wire.id == "wire-co-2" and wire.name == "Wire & Co" and wire.category == "News"
    assert wire.publisher == "wire.example" and wire.tier is None
    assert deep.category == "News/World" and deep.id == "deep-one"  # nested folders keep their path
    assert blog.category == "Blogs" and blog.publisher == "tumblr.com" and blog.id.startswith("feed-")
    reg = Registry(tuple(feeds))
    assert not [p for p in check(reg) if p.level == "error"]


def test_opml_export_import_roundtrip_is_lossless() -> None:
    reg = parse_registry({"feed": [
        {"id": "bbc-world", "url": "https://feeds.bbci.co.uk/news/world/rss.xml", "name": "BBC <World> & \"more\"",
         "publisher": "BBC", "tier": "T2", "category": "world", "language": "en-GB", "interval": "45m",
         "feed_type": "major"},
        {"id": "blog", "url": "https://x.tumblr.com/rss", "name": "X", "publisher": "X", "tier": "T5",
         "category": "tech", "language": "de"},
    ]})
    back = import_opml(export_opml(reg.feeds))
    assert tuple(back) == reg.feeds


def test_registry_toml_dump_roundtrip(tmp_path: Path) -> None:
    feeds = (FeedSpec("a", "https://a.example/f?x=1&y=\"2\"", 'Name "quoted" \\ back', "Pub", "T1",
                      "cat", "fr", 5400.0, "blog"),
             FeedSpec("b", "https://b.example/f", "B\nnewline", "PubB"))
    p = tmp_path / "r.toml"
    p.write_text(dump_registry(feeds, header="test"))
    assert load_registry(p).feeds == feeds


def test_state_never_holds_credentials_and_password_change_keeps_state() -> None:
    url = "https://alice:pw1@private.example.com/feed?x=1"
    st = pstate.initial_state("p", url, policy=POLICY, now_ms=T0)
    assert st.url == st.registry_url == "https://private.example.com/feed?x=1"
    st = poll(st, resp(200, rss(["a"]), {"etag": '"1"'}, url=st.url)).state
    same = pstate.reconcile_state(st, "p", "https://alice:pw2@private.example.com/feed?x=1", policy=POLICY)
    assert same is st  # a new password is not a new feed
    assert psafety.strip_userinfo("http://u@h.example/x") == "http://h.example/x"
    assert psafety.strip_userinfo("http://h.example/x") == "http://h.example/x"
