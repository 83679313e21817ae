"""Pure polling rules of the feed poller: what one HTTP poll means for a feed, and when to poll next.

No I/O and no wall clock here: every function takes ``now_ms`` (epoch milliseconds, UTC) and returns
new immutable values. ``connectors/http_fetch.py`` does the HTTP, ``connectors/poller.py`` wires
fetches to these decisions. Each rule of the seeds lives in one function a reader can search for:

========================================  ==================================================
rule (seed)                               function
========================================  ==================================================
conditional GET (000 Step 1)              :func:`conditional_headers`
transient errors retried 2x (002 §1)      :func:`is_transient_failure`
304 -> success, no payload (000)          :func:`decide_poll` (``not_modified``)
200, same body hash -> not modified       :func:`is_unchanged_body`
HTML page instead of a feed (004)         :func:`looks_like_html`
feed format, items, dates, ttl, sy:*      :func:`scan_feed` (lenient recovery: :func:`repair_xml`)
all/partial undated (004)                 :func:`undated_status`
301/308 adopted after N times (000/001)   :func:`permanent_redirect_target`, :func:`track_permanent_redirect`
410 -> dead, stop polling (000/001)       :func:`mark_dead_on_gone`
429 / 503+Retry-After (000/001)           :func:`is_rate_limited`, :func:`parse_retry_after`,
                                          :func:`apply_rate_limit`
other 4xx/5xx -> error backoff (000)      :func:`error_backoff_s`
3+ parse failures -> unhealthy (001)      :func:`track_parse_failures`
timeout -> retry after 60 s, slow (001)   :func:`handle_timeout`
publisher hints as lower bounds (001)     :func:`feed_hint_s`, :func:`cache_control_max_age_s`,
                                          :func:`expires_hint_s`, :func:`http_cache_hint_s`,
                                          :func:`hint_floor_s`, :func:`sy_update_interval_s`
default interval per feed type (001)      :func:`default_interval_s`
5 unchanged -> x2, always new -> /2 (001) :func:`adapt_interval`
jitter (stable hash of id + poll number)  :func:`jittered_delay_s`
reliability over 30 days (000 Step 4)     :func:`record_daily_outcome`, :func:`reliability_score`
silent zero                               :func:`update_publication_rhythm`, :func:`is_silent_zero`
per-domain shared backoff (eTLD+1)        :func:`registrable_domain`, :func:`update_domain_backoff`,
                                          :func:`domain_backoff_remaining_ms`
safety: scheme, addresses, credentials    :func:`scheme_allowed`, :func:`address_block_reason`,
                                          :func:`redact_url`
========================================  ==================================================

:func:`decide_poll` composes them: ``(FeedState, FetchOutcome, now) -> PollVerdict``.
"""

from __future__ import annotations

import calendar
import functools
import html.entities
import ipaddress
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import xxhash

from newsflow.hashing import bytes_id, stable_id
from newsflow.timeutil import DAY_MS, dt_to_ms, ms_to_iso

# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------

HealthStatus = Literal[
    "ok",
    "not_modified",
    "empty",
    "all_undated",
    "partial_undated",
    "timeout",
    "http_error",
    "parse_error",
    "html_instead_of_feed",
    "rate_limited",
    "dead",
    "silent_zero",
    "blocked",
    "too_large",
]

#: statuses that count as a *successful* poll for the reliability score (000 Step 4:
#: successful_polls / total_polls). A rate-limited, blocked or HTML answer delivered no feed.
SUCCESS_STATUSES: frozenset[str] = frozenset(
    {"ok", "not_modified", "empty", "all_undated", "partial_undated", "silent_zero"}
)

#: 001 "Default polling schedule when no hints are available" (seconds). Where the seed gives a
#: range we take its low end: adaptive polling doubles the interval of a quiet feed anyway.
FEED_TYPE_INTERVALS_S: Mapping[str, float] = {
    "breaking": 15 * 60.0,  # Breaking news: 15 minutes
    "major": 30 * 60.0,  # Major news outlets: 30 minutes
    "blog": 2 * 3600.0,  # Blog / personal site: 2-4 hours
    "newsletter": 12 * 3600.0,  # Weekly newsletter: 12-24 hours
    "dormant": 24 * 3600.0,  # Dormant / low-activity: 24 hours
}


class FetchKind(StrEnum):
    """What the fetcher got: a response, or why it has none."""

    RESPONSE = "response"
    TIMEOUT = "timeout"
    CONNECT_ERROR = "connect_error"  # DNS, refused, reset, TLS
    PROTOCOL_ERROR = "protocol_error"  # broken HTTP, bad encoding, read error
    TOO_MANY_REDIRECTS = "too_many_redirects"
    BLOCKED = "blocked"  # scheme or address refused by the safety policy
    TOO_LARGE = "too_large"  # body or decoded body over the cap


@dataclass(frozen=True, slots=True)
class RedirectHop:
    """One redirect. The URLs are the real ones (a 301 target is adopted as is): redact them
    with :func:`redact_url` before logging or emitting."""

    status: int
    from_url: str
    to_url: str


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """Everything the fetcher observed for one poll (after its own transient retries).

    ``headers`` keys are lower-case. ``body`` is the *decoded* body (content-encoding removed).
    """

    kind: FetchKind
    url: str
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    final_url: str | None = None
    redirects: tuple[RedirectHop, ...] = ()
    elapsed_ms: float = 0.0
    attempts: int = 1
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """Every tunable of the polling rules, with the seeds' numbers as defaults."""

    #: absolute politeness floor between two polls of one feed (s)
    min_interval_s: float = 300.0
    #: 001: "double the interval (up to 24 hours max)"
    max_interval_s: float = 86_400.0
    #: feed type used when the registry gives neither interval nor feed_type
    default_feed_type: str = "major"
    #: 001: "If a feed hasn't changed in 5 consecutive polls, double the interval"
    unchanged_polls_to_double: int = 5
    #: 001: "If a feed has new content on every poll, halve the interval" -- "every poll" is
    #: read as this many consecutive polls with new items
    changed_polls_to_halve: int = 3
    #: next poll = interval * (1 + u * jitter_ratio), u in [0, 1) from a stable hash
    jitter_ratio: float = 0.1
    #: adopt a 301/308 target after this many consecutive polls redirected to the same target
    redirect_adopt_after: int = 3
    #: 001: "if persistent (3+ failures), flag feed as unhealthy"
    parse_failures_unhealthy: int = 3
    #: 001: "Timeout -- retry once after 60 seconds; mark as slow if persistent"
    timeout_retry_s: float = 60.0
    #: consecutive timeouts after which the feed is flagged slow
    timeouts_slow: int = 2
    #: a Retry-After further away than this is capped (s)
    max_retry_after_s: float = 86_400.0
    #: statuses retried immediately by the fetcher (002: 2 retries, 1 s / 2 s); 503 only
    #: without Retry-After, 429 never (Retry-After rules), timeouts never (000: retry after 60 s)
    transient_statuses: frozenset[int] = frozenset({500, 502, 503, 504})
    #: 000 Step 4: reliability = successful_polls / total_polls over the last 30 days
    reliability_window_days: int = 30
    #: silent zero: no new items for silent_zero_factor x the usual gap between new items ...
    silent_zero_factor: float = 4.0
    #: ... and at least this long (s) ...
    silent_zero_min_s: float = 86_400.0
    #: ... once at least this many polls with new items established a rhythm
    silent_zero_min_events: int = 3
    #: weight of the newest gap in the EWMA of gaps between polls with new items
    rhythm_alpha: float = 0.3
    #: per registrable domain: after this many consecutive server-side failures, back off ...
    domain_failure_threshold: int = 3
    #: ... for base * 2^(failures - threshold) seconds, at most max
    domain_backoff_base_s: float = 60.0
    domain_backoff_max_s: float = 3_600.0
    #: 429 without Retry-After: the domain pauses this long (the feed's interval doubles anyway)
    domain_rate_limit_default_s: float = 60.0
    #: 004: an item dated more than this after the fetch is treated as undated
    future_tolerance_s: float = 3_600.0
    #: at most this many item keys are remembered per feed (new-item detection)
    max_item_keys: int = 500


# --------------------------------------------------------------------------------------------
# Feed state
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeedState:
    """Everything the poller remembers about one feed between polls (survives restarts).

    Immutable; derive new states with :func:`evolve` (not ``dataclasses.replace``, which costs
    ~50 us on these 45 fields -- the poller derives a dozen states per poll).
    """

    feed_id: str
    url: str  # URL polled now (registry URL, or an adopted 301/308 target); never credentials
    registry_url: str  # registry URL without credentials; when it changes, the state starts over
    interval_s: float  # current adaptive interval
    registry_floor_s: float = 0.0  # an explicit registry interval is also a lower bound
    etag: str | None = None
    last_modified: str | None = None
    body_hash: str | None = None  # hash of the last body that was a parseable feed
    bad_body_hash: str | None = None  # hash of the last unparseable body already emitted
    item_keys: frozenset[int] = frozenset()
    has_baseline: bool = False  # item_keys come from a successful parse
    feed_hint_s: float | None = None  # <ttl>, sy:updatePeriod/Frequency of the last feed
    http_hint_s: float | None = None  # Cache-Control max-age / Expires of the last response
    next_poll_ms: int | None = 0  # None: never (dead)
    poll_no: int = 0
    # streaks
    consecutive_unchanged: int = 0
    consecutive_changed: int = 0
    consecutive_errors: int = 0
    consecutive_parse_failures: int = 0
    consecutive_timeouts: int = 0
    redirect_target: str | None = None
    redirect_count: int = 0
    # flags
    dead: bool = False
    unhealthy: bool = False
    slow: bool = False
    silent: bool = False
    # counters (lifetime)
    total_polls: int = 0
    ok_polls: int = 0
    failed_polls: int = 0
    not_modified_polls: int = 0
    http_errors: int = 0
    timeouts: int = 0
    parse_failures: int = 0
    rate_limited: int = 0
    response_ms_total: float = 0.0
    response_count: int = 0
    last_poll_ms: int | None = None
    last_success_ms: int | None = None
    last_status: str | None = None
    # publication rhythm (silent zero, new items per poll)
    last_new_items_ms: int | None = None
    new_item_events: int = 0
    new_items_gap_ms: float | None = None
    new_items_per_poll: float = 0.0
    #: (day number, successful polls, total polls), at most reliability_window_days entries
    daily: tuple[tuple[int, int, int], ...] = ()


def evolve(state: FeedState, **changes: Any) -> FeedState:
    """A copy of ``state`` with ``changes`` (field names are checked)."""
    unknown = changes.keys() - state.__dict__.keys()
    if unknown:
        msg = f"unknown FeedState fields: {sorted(unknown)}"
        raise TypeError(msg)
    new = object.__new__(FeedState)
    d = new.__dict__
    d.update(state.__dict__)
    d.update(changes)
    return new


def default_interval_s(feed_type: str | None, policy: PollPolicy | None = None) -> float:
    """001's default interval table; unknown/missing type -> the policy's default type."""
    p = policy or PollPolicy()
    if feed_type in FEED_TYPE_INTERVALS_S:
        return FEED_TYPE_INTERVALS_S[feed_type]  # type: ignore[index]
    return FEED_TYPE_INTERVALS_S[p.default_feed_type]


def initial_state(
    feed_id: str,
    url: str,
    *,
    interval_s: float | None = None,
    feed_type: str | None = None,
    policy: PollPolicy | None = None,
    now_ms: int = 0,
) -> FeedState:
    """State of a feed never polled: due at ``now_ms``, interval from the registry or 001's table.

    An explicit registry ``interval`` is both the start value and a lower bound ("poll no more
    often than this"); adaptation may still lengthen it.
    """
    p = policy or PollPolicy()
    start = interval_s if interval_s else default_interval_s(feed_type, p)
    start = min(max(start, p.min_interval_s), p.max_interval_s)
    url = strip_userinfo(url)  # state is persisted: no credentials in it
    return FeedState(
        feed_id=feed_id,
        url=url,
        registry_url=url,
        interval_s=start,
        registry_floor_s=min(interval_s or 0.0, p.max_interval_s),
        next_poll_ms=now_ms,
    )


def reconcile_state(
    state: FeedState | None,
    feed_id: str,
    url: str,
    *,
    interval_s: float | None = None,
    feed_type: str | None = None,
    policy: PollPolicy | None = None,
    now_ms: int = 0,
) -> FeedState:
    """Resume a saved state against the current registry entry.

    A changed registry URL starts the feed over (new source; also revives a dead feed whose URL
    the user fixed); changed credentials alone do not. A changed explicit interval is applied;
    everything else is kept.
    """
    p = policy or PollPolicy()
    if state is None or state.registry_url != strip_userinfo(url) or state.feed_id != feed_id:
        return initial_state(feed_id, url, interval_s=interval_s, feed_type=feed_type, policy=p,
                             now_ms=now_ms)
    floor = min(interval_s or 0.0, p.max_interval_s)
    if floor != state.registry_floor_s:
        start = interval_s if interval_s else default_interval_s(feed_type, p)
        return evolve(state, registry_floor_s=floor,
                       interval_s=min(max(start, p.min_interval_s, floor), p.max_interval_s))
    return state


# --------------------------------------------------------------------------------------------
# Request side
# --------------------------------------------------------------------------------------------


def conditional_headers(state: FeedState) -> dict[str, str]:
    """``If-None-Match`` / ``If-Modified-Since`` from the previous poll (000 Step 1)."""
    h: dict[str, str] = {}
    if state.etag:
        h["If-None-Match"] = state.etag
    if state.last_modified:
        h["If-Modified-Since"] = state.last_modified
    return h


def is_transient_failure(
    kind: FetchKind, status: int | None, headers: Mapping[str, str], policy: PollPolicy | None = None
) -> bool:
    """Should the fetcher retry at once (002: 2 retries, 1 s / 2 s backoff)?

    Connection and protocol errors, and 500/502/504 (503 only without ``Retry-After``). Not 429
    and not 503 with Retry-After (the server said when), not a timeout (000/001: "retry once after
    60 seconds", scheduled by :func:`handle_timeout`), not other 4xx (retrying cannot help).
    """
    p = policy or PollPolicy()
    if kind in (FetchKind.CONNECT_ERROR, FetchKind.PROTOCOL_ERROR):
        return True
    if kind is not FetchKind.RESPONSE or status is None:
        return False
    if status == 503 and headers.get("retry-after"):
        return False
    return status in p.transient_statuses


# --------------------------------------------------------------------------------------------
# Safety helpers (pure; the fetcher enforces them)
# --------------------------------------------------------------------------------------------

ALLOWED_SCHEMES: frozenset[str] = frozenset({"http", "https"})

#: query parameters whose values are secrets: redacted in everything logged or emitted
SECRET_QUERY_PARAMS: frozenset[str] = frozenset(
    {"token", "access_token", "auth", "api_key", "apikey", "key", "password", "passwd", "pass",
     "secret", "sig", "signature", "client_secret", "private_token"}
)


def scheme_allowed(url: str) -> bool:
    """Only ``http`` and ``https`` URLs are fetched (no file:, ftp:, gopher:, data: ...)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ALLOWED_SCHEMES and bool(parts.hostname)


def strip_userinfo(url: str) -> str:
    """URL without ``user:password@`` (what the poller stores; credentials stay in the registry)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query,
                       parts.fragment))


def redact_url(url: str) -> str:
    """URL without credentials: userinfo dropped, secret query values replaced by ``REDACTED``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_QUERY_PARAMS for k, _ in pairs):
            query = urlencode([(k, "REDACTED" if k.lower() in SECRET_QUERY_PARAMS else v)
                               for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


#: CGNAT (100.64/10) is not flagged ``is_private`` by every Python version
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def address_block_reason(
    address: str,
    *,
    allow_private: bool = False,
    allowed_networks: Iterable[str] = (),
) -> str | None:
    """Why connecting to this IP is refused, or ``None`` if it is allowed.

    Refused unless listed in ``allowed_networks``: loopback, private (RFC 1918, ULA, CGNAT),
    link-local (incl. 169.254.169.254 cloud metadata), multicast, reserved, unspecified.
    ``allow_private`` allows private and loopback, never link-local/multicast/unspecified.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for net in allowed_networks:
        try:
            if ip in ipaddress.ip_network(net, strict=False):
                return None
        except ValueError:
            continue
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_multicast:
        return "multicast address"
    if ip.is_loopback:
        return None if allow_private else "loopback address"
    if ip.is_private or (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT):
        return None if allow_private else "private address"
    if ip.is_reserved:
        return "reserved address"
    return None


# --------------------------------------------------------------------------------------------
# Response classification helpers
# --------------------------------------------------------------------------------------------


def body_hash(body: bytes) -> str:
    """Stable hash of a body (blake2b-128)."""
    return bytes_id(body, 16)


def is_unchanged_body(state: FeedState, body: bytes) -> bool:
    """A 200 whose body hash equals the last feed body: treated as not modified."""
    return state.body_hash is not None and body_hash(body) == state.body_hash


_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_FEED_ROOTS = frozenset({"rss", "feed", "rdf:rdf", "rdf", "channel"})


def _first_tag(body: bytes, limit: int = 4096) -> str | None:
    """Name of the first element (or ``!doctype x``) after BOM, XML declaration, comments, PIs."""
    head = body[:limit]
    for bom in _BOMS:
        if head.startswith(bom):
            head = head[len(bom):]
            break
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) > 1 and head[1:2] == b"\x00"):
        try:
            head = head.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            return None
    i = 0
    n = len(head)
    while i < n:
        while i < n and head[i:i + 1] in (b" ", b"\t", b"\r", b"\n", b"\x0c"):
            i += 1
        if i >= n or head[i:i + 1] != b"<":
            return None
        if head.startswith(b"<?", i):
            j = head.find(b"?>", i)
            if j < 0:
                return None
            i = j + 2
            continue
        if head.startswith(b"<!--", i):
            j = head.find(b"-->", i)
            if j < 0:
                return None
            i = j + 3
            continue
        m = re.match(rb"<(!doctype\s+)?([A-Za-z_][\w.:-]*)", head[i:], re.IGNORECASE)
        if not m:
            return None
        name = m.group(2).decode("ascii", "replace").lower()
        return f"!doctype {name}" if m.group(1) else name
    return None


_HTML_ELEMENTS = frozenset({"html", "head", "body", "title", "meta", "p", "div", "h1", "h2",
                            "center", "table", "script", "style", "br", "span", "pre", "link"})


def looks_like_html(body: bytes, content_type: str | None) -> bool:
    """The body is an HTML page (Cloudflare challenge, error page, paywall) rather than a feed.

    Decided by the first element: ``<rss>``, ``<feed>``, ``<rdf:RDF>`` are feeds whatever the
    Content-Type says (many servers send feeds as text/html); an HTML doctype or an HTML element
    (``<html>``, ``<p>``, ...) is HTML. Otherwise a ``text/html`` Content-Type decides.
    """
    tag = _first_tag(body)
    if tag is not None:
        if tag.startswith("!doctype "):
            return tag == "!doctype html"
        local = tag.split(":", 1)[-1] if tag != "rdf:rdf" else tag
        if tag in _FEED_ROOTS or local in _FEED_ROOTS:
            return False
        if local in _HTML_ELEMENTS:
            return True
    ct = (content_type or "").lower()
    return "html" in ct and "xml" not in ct


def is_rate_limited(status: int | None, headers: Mapping[str, str], now_ms: int = 0) -> bool:
    """429, or 503 carrying a usable ``Retry-After`` (000/001 rate-limit rules)."""
    if status == 429:
        return True
    return status == 503 and parse_retry_after(headers.get("retry-after"), now_ms) is not None


def _parse_http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        dt = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:  # "-0000" or no zone: RFC 9110 dates are GMT
        dt = dt.replace(tzinfo=UTC)
    return dt


def parse_retry_after(value: str | None, now_ms: int) -> float | None:
    """``Retry-After`` in seconds from ``now_ms``: delay-seconds or an HTTP-date (RFC 9110 10.2.3).

    A date in the past gives 0; garbage gives ``None``.
    """
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    if v.isdigit():
        return float(int(v))
    dt = _parse_http_date(v)
    if dt is None:
        return None
    return max(0.0, (dt_to_ms(dt) - now_ms) / 1000.0)


# --------------------------------------------------------------------------------------------
# Feed scanning (format, items, dates, hints) with lenient recovery
# --------------------------------------------------------------------------------------------

NS_ATOM = "http://www.w3.org/2005/Atom"
NS_ATOM03 = "http://purl.org/atom/ns#"
NS_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
NS_RSS10 = "http://purl.org/rss/1.0/"
NS_RSS090 = "http://my.netscape.com/rdf/simple/0.9/"
NS_SY = "http://purl.org/rss/1.0/modules/syndication/"
NS_DC = "http://purl.org/dc/elements/1.1/"

#: sy:updatePeriod -> seconds
SY_PERIODS_S: Mapping[str, float] = {
    "hourly": 3600.0,
    "daily": 86_400.0,
    "weekly": 7 * 86_400.0,
    "monthly": 30 * 86_400.0,
    "yearly": 365 * 86_400.0,
}


@dataclass(frozen=True, slots=True)
class FeedScan:
    """What the poller needs from a feed body (the dataflow does the full normalization)."""

    ok: bool
    feed_format: str | None = None  # rss20 | rss10 | rss090 | atom10 | atom03 | feedparser:<v>
    items: int = 0
    undated: int = 0
    item_keys: frozenset[int] = frozenset()
    ttl_s: float | None = None
    sy_interval_s: float | None = None
    recovered: str | None = None  # None | "repaired_xml" | "lenient_parser"
    error: str | None = None


def sy_update_interval_s(period: str | None, frequency: str | int | None) -> float | None:
    """``sy:updatePeriod`` / ``sy:updateFrequency``: e.g. hourly x 2 -> every 1800 s."""
    if not period:
        return None
    base = SY_PERIODS_S.get(str(period).strip().lower())
    if base is None:
        return None
    try:
        freq = int(str(frequency).strip()) if frequency is not None and str(frequency).strip() else 1
    except ValueError:
        freq = 1
    return base / max(freq, 1)


def _ttl_s(value: str | None) -> float | None:
    """RSS ``<ttl>`` is minutes."""
    if value is None:
        return None
    v = value.strip()
    if not v.isdigit():
        return None
    minutes = int(v)
    return minutes * 60.0 if minutes > 0 else None


_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_RFC822 = re.compile(
    r"^\s*(?:[A-Za-z]{3,9},?\s*)?(\d{1,2})\s+([A-Za-z]{3})[A-Za-z]*\.?\s+(\d{2,4})\s+"
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:(GMT|UTC|UT|Z)|([+-])(\d{2}):?(\d{2}))?\s*$",
    re.IGNORECASE)


def _date_ms(value: str | None) -> int | None:
    """Epoch ms of an item date: RFC 822 (RSS ``pubDate``) or W3C-DTF/RFC 3339 (Atom,
    ``dc:date``). Fast paths for the common shapes, ``email.utils`` for the rest."""
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    if v[0].isdigit() and len(v) >= 10 and v[4:5] == "-":
        iso = v[:-1] + "+00:00" if v[-1] in "Zz" else v
        try:
            dt = datetime.fromisoformat(iso)
        except ValueError:
            return None
        return dt_to_ms(dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC))
    m = _RFC822.match(v)
    if m is not None:
        day, mon, year, hh, mm, ss, _z, sign, oh, om = m.groups()
        month = _MONTHS.get(mon.lower())
        y = int(year)
        if y < 100:
            y += 2000 if y < 50 else 1900
        if month is not None:
            try:
                secs = calendar.timegm((y, month, int(day), int(hh), int(mm), int(ss or 0)))
            except (ValueError, OverflowError):
                secs = None
            if secs is not None and 1 <= int(day) <= 31 and int(hh) < 25 and int(mm) < 60:
                if sign:
                    off = int(oh) * 3600 + int(om) * 60
                    secs -= off if sign == "+" else -off
                return secs * 1000
    dt = _parse_http_date(v)  # odd RFC 2822 shapes, named zones (EST, PDT, ...)
    return dt_to_ms(dt) if dt is not None else None


def _item_key(*candidates: str | None) -> int:
    for c in candidates:
        if c and c.strip():
            return xxhash.xxh3_64_intdigest(c.strip().encode("utf-8", "surrogatepass"))
    return 0


def _text(el: ET.Element | None) -> str | None:
    if el is None:
        return None
    return "".join(el.itertext())


def _local(tag: str) -> tuple[str, str]:
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return "", tag


def _is_dated(value: str | None, now_ms: int, future_tolerance_s: float) -> bool:
    ms = _date_ms(value)
    return ms is not None and ms <= now_ms + future_tolerance_s * 1000


def _scan_tree(root: ET.Element, now_ms: int, policy: PollPolicy) -> FeedScan:
    ns, name = _local(root.tag)
    tol = policy.future_tolerance_s
    keys: list[int] = []
    undated = 0
    ttl_s: float | None = None
    sy_period: str | None = None
    sy_freq: str | None = None
    if name == "rss" and ns == "":
        fmt = "rss20"
        channel = root.find("channel")
        items = channel.findall("item") if channel is not None else []
        if channel is not None:
            ttl_s = _ttl_s(_text(channel.find("ttl")))
            sy_period = _text(channel.find(f"{{{NS_SY}}}updatePeriod"))
            sy_freq = _text(channel.find(f"{{{NS_SY}}}updateFrequency"))
        for it in items:
            guid, link, title = _text(it.find("guid")), _text(it.find("link")), _text(it.find("title"))
            date = _text(it.find("pubDate")) or _text(it.find(f"{{{NS_DC}}}date"))
            keys.append(_item_key(guid, link, (title or "") + "\x00" + (date or "")))
            undated += not _is_dated(date, now_ms, tol)
    elif name == "RDF" and ns == NS_RDF:
        item_ns = NS_RSS10 if root.find(f"{{{NS_RSS10}}}channel") is not None or root.find(
            f"{{{NS_RSS10}}}item") is not None else NS_RSS090
        fmt = "rss10" if item_ns == NS_RSS10 else "rss090"
        channel = root.find(f"{{{item_ns}}}channel")
        if channel is not None:
            sy_period = _text(channel.find(f"{{{NS_SY}}}updatePeriod"))
            sy_freq = _text(channel.find(f"{{{NS_SY}}}updateFrequency"))
        items = root.findall(f"{{{item_ns}}}item")
        for it in items:
            about = it.get(f"{{{NS_RDF}}}about")
            link, title = _text(it.find(f"{{{item_ns}}}link")), _text(it.find(f"{{{item_ns}}}title"))
            date = _text(it.find(f"{{{NS_DC}}}date"))
            keys.append(_item_key(about, link, title))
            undated += not _is_dated(date, now_ms, tol)
    elif name == "feed" and ns in (NS_ATOM, NS_ATOM03):
        fmt = "atom10" if ns == NS_ATOM else "atom03"
        sy_period = _text(root.find(f"{{{NS_SY}}}updatePeriod"))
        sy_freq = _text(root.find(f"{{{NS_SY}}}updateFrequency"))
        items = root.findall(f"{{{ns}}}entry")
        for it in items:
            eid = _text(it.find(f"{{{ns}}}id"))
            link_el = it.find(f"{{{ns}}}link")
            href = link_el.get("href") if link_el is not None else None
            title = _text(it.find(f"{{{ns}}}title"))
            dates = [_text(it.find(f"{{{ns}}}{t}")) for t in ("published", "updated", "issued",
                                                               "modified")]
            dates.append(_text(it.find(f"{{{NS_DC}}}date")))
            keys.append(_item_key(eid, href, title))
            undated += not any(_is_dated(d, now_ms, tol) for d in dates if d)
    else:
        return FeedScan(ok=False, error=f"unknown root element {name!r}")
    return FeedScan(
        ok=True,
        feed_format=fmt,
        items=len(keys),
        undated=undated,
        item_keys=frozenset(keys[: policy.max_item_keys]),
        ttl_s=ttl_s,
        sy_interval_s=sy_update_interval_s(sy_period, sy_freq),
    )


_BARE_AMP = re.compile(rb"&(?!(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);)")
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_NAMED_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
_XML_DECL = re.compile(rb"^\s*<\?xml[^>]*\?>")
_DECL_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*encoding=["']([A-Za-z0-9._-]+)["']""")
_XML_ENTITIES = frozenset({"amp", "lt", "gt", "quot", "apos"})


def repair_xml(body: bytes) -> bytes:
    """000 Step 1 lenient recovery, step 1: fix common XML problems.

    Decodes with the declared encoding (or UTF-8, replacing bad bytes), drops characters XML
    forbids, escapes bare ``&``, turns HTML named entities (``&nbsp;``) into numeric references,
    and re-encodes as UTF-8 without the old encoding declaration.
    """
    raw = body
    for bom in _BOMS:
        if raw.startswith(bom):
            enc_bom = {b"\xef\xbb\xbf": "utf-8", b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}[bom]
            text = raw[len(bom):].decode(enc_bom, "replace")
            break
    else:
        m = _DECL_ENCODING.match(raw[:200])
        enc = m.group(1).decode("ascii") if m else "utf-8"
        try:
            text = raw.decode(enc, "replace")
        except LookupError:
            text = raw.decode("utf-8", "replace")
    text = _BAD_XML_CHARS.sub("", text)

    def _entity(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in _XML_ENTITIES:
            return m.group(0)
        cp = html.entities.name2codepoint.get(name)
        return f"&#{cp};" if cp is not None else f"&amp;{name};"

    text = _NAMED_ENTITY.sub(_entity, text)
    out = _XML_DECL.sub(b"", text.encode("utf-8"), count=1)
    return _BARE_AMP.sub(b"&amp;", out)


def _scan_with_feedparser(body: bytes, now_ms: int, policy: PollPolicy) -> FeedScan:
    """000 Step 1 lenient recovery, step 2: feedparser's HTML-tolerant parser (bytes only:
    a ``str`` argument could be taken for a URL and fetched)."""
    import feedparser  # local import: slow to import, rarely needed

    d: Any = feedparser.parse(bytes(body), sanitize_html=False, resolve_relative_uris=False)
    version = d.get("version") or ""
    entries = d.get("entries") or []
    if not version and not entries:
        bozo = d.get("bozo_exception")
        return FeedScan(ok=False, error=f"not a feed ({bozo})" if bozo else "not a feed")
    keys: list[int] = []
    undated = 0
    for e in entries:
        keys.append(_item_key(e.get("id"), e.get("link"), e.get("title")))
        parsed = e.get("published_parsed") or e.get("updated_parsed")
        if parsed is None:
            undated += 1
        else:
            ts = datetime(*parsed[:6], tzinfo=UTC)
            undated += dt_to_ms(ts) > now_ms + policy.future_tolerance_s * 1000
    feed = d.get("feed") or {}
    return FeedScan(
        ok=True,
        feed_format=f"feedparser:{version or 'unknown'}",
        items=len(keys),
        undated=undated,
        item_keys=frozenset(keys[: policy.max_item_keys]),
        ttl_s=_ttl_s(feed.get("ttl")),
        sy_interval_s=sy_update_interval_s(feed.get("sy_updateperiod"), feed.get("sy_updatefrequency")),
        recovered="lenient_parser",
    )


def scan_feed(body: bytes, now_ms: int, policy: PollPolicy | None = None) -> FeedScan:
    """Format, item keys, undated count and update hints of a feed body.

    Namespace-aware XML first; on failure 000's lenient recovery: (1) :func:`repair_xml` and
    retry, (2) feedparser's HTML-tolerant parser, (3) give up -> ``ok=False`` (a parse failure;
    :func:`track_parse_failures` flags the feed unhealthy after 3 in a row). DTDs and external
    entities are never fetched (ElementTree/expat do not resolve them).
    """
    p = policy or PollPolicy()
    first_error: str | None = None
    try:
        return _scan_tree(ET.fromstring(body), now_ms, p)
    except ET.ParseError as e:
        first_error = f"xml: {e}"
    except (ValueError, LookupError) as e:  # e.g. encoding unknown to expat
        first_error = f"xml: {e}"
    try:
        scan = _scan_tree(ET.fromstring(repair_xml(body)), now_ms, p)
        if scan.ok:
            return replace(scan, recovered="repaired_xml")
    except (ET.ParseError, ValueError, LookupError):
        pass
    scan = _scan_with_feedparser(body, now_ms, p)
    if scan.ok:
        return scan
    return replace(scan, error=f"{first_error}; {scan.error}")


def undated_status(scan: FeedScan) -> HealthStatus:
    """004's date statuses: ``empty`` (no items), ``all_undated``, ``partial_undated`` or ``ok``."""
    if scan.items == 0:
        return "empty"
    if scan.undated >= scan.items:
        return "all_undated"
    if scan.undated > 0:
        return "partial_undated"
    return "ok"


# --------------------------------------------------------------------------------------------
# Interval hints and adaptation
# --------------------------------------------------------------------------------------------


def feed_hint_s(scan: FeedScan) -> float | None:
    """The publisher's own update hint in the feed: max of ``<ttl>`` and ``sy:update*``."""
    hints = [h for h in (scan.ttl_s, scan.sy_interval_s) if h]
    return max(hints) if hints else None


def cache_control_max_age_s(value: str | None) -> float | None:
    """``Cache-Control: max-age=N`` -> N seconds (``no-store``/``no-cache``: no hint)."""
    if not value:
        return None
    max_age: float | None = None
    for part in value.split(","):
        k, _, v = part.strip().partition("=")
        k = k.strip().lower()
        if k in ("no-store", "no-cache"):
            return None
        if k == "max-age":
            try:
                max_age = float(int(v.strip().strip('"')))
            except ValueError:
                return None
    return max_age if max_age and max_age > 0 else None


def expires_hint_s(expires: str | None, date: str | None, now_ms: int) -> float | None:
    """``Expires`` minus the response ``Date`` (or ``now``): how long the response is fresh."""
    exp = _parse_http_date(expires)
    if exp is None:
        return None
    base = _parse_http_date(date)
    base_ms = dt_to_ms(base) if base is not None else now_ms
    delta = (dt_to_ms(exp) - base_ms) / 1000.0
    return delta if delta > 0 else None


def http_cache_hint_s(headers: Mapping[str, str], now_ms: int) -> float | None:
    """HTTP freshness as a lower bound: ``max-age`` wins over ``Expires`` (RFC 9111 4.2.1)."""
    cc = headers.get("cache-control")
    if cc and any(t.strip().lower() in ("no-store", "no-cache") for t in cc.split(",")):
        return None
    ma = cache_control_max_age_s(cc)
    if ma is not None:
        return ma
    return expires_hint_s(headers.get("expires"), headers.get("date"), now_ms)


def hint_floor_s(state: FeedState, policy: PollPolicy) -> float:
    """Lowest allowed interval: the politeness floor, the registry interval, ``<ttl>``,
    ``sy:*``, ``Cache-Control``/``Expires`` -- all lower bounds (001) -- capped at 24 h."""
    floor = max(policy.min_interval_s, state.registry_floor_s, state.feed_hint_s or 0.0,
                state.http_hint_s or 0.0)
    return min(floor, policy.max_interval_s)


def adapt_interval(state: FeedState, changed: bool | None, policy: PollPolicy) -> FeedState:
    """001 adaptive polling.

    5 consecutive polls without new items -> double (max 24 h); new items on
    ``changed_polls_to_halve`` consecutive polls -> halve (down to :func:`hint_floor_s`).
    ``changed=None`` (first poll, nothing to compare) only re-applies the bounds.
    """
    floor = hint_floor_s(state, policy)
    interval = state.interval_s
    unchanged_n, changed_n = state.consecutive_unchanged, state.consecutive_changed
    if changed is True:
        changed_n, unchanged_n = changed_n + 1, 0
        if changed_n >= policy.changed_polls_to_halve:
            interval, changed_n = interval / 2, 0
    elif changed is False:
        unchanged_n, changed_n = unchanged_n + 1, 0
        if unchanged_n >= policy.unchanged_polls_to_double:
            interval, unchanged_n = interval * 2, 0
    interval = min(max(interval, floor), policy.max_interval_s)
    return evolve(state, interval_s=interval, consecutive_unchanged=unchanged_n,
                   consecutive_changed=changed_n)


def jitter_unit(feed_id: str, poll_no: int) -> float:
    """A number in [0, 1) from a stable hash of feed id and poll number (same on every run)."""
    return int(stable_id(feed_id, str(poll_no)), 16) / float(1 << 64)


def jittered_delay_s(interval_s: float, feed_id: str, poll_no: int, ratio: float) -> float:
    """Delay until the next poll: the interval stretched by up to ``ratio`` so feeds started
    together drift apart. Only ever longer, so lower bounds hold."""
    return interval_s * (1.0 + ratio * jitter_unit(feed_id, poll_no))


def error_backoff_s(interval_s: float, consecutive_errors: int, max_s: float) -> float:
    """Per-feed backoff after errors: the interval, doubled per further consecutive error."""
    n = max(0, consecutive_errors - 1)
    return min(max_s, interval_s * (2 ** min(n, 20)))


# --------------------------------------------------------------------------------------------
# Error rules
# --------------------------------------------------------------------------------------------


def permanent_redirect_target(redirects: Iterable[RedirectHop]) -> str | None:
    """Where the leading run of permanent redirects (301/308) points.

    ``301 -> 302 -> X`` gives the 301's target (the 302 is temporary); a chain that starts with
    302/303/307 gives ``None`` (000: "302/307 -> follow, keep URL").
    """
    target: str | None = None
    for hop in redirects:
        if hop.status not in (301, 308):
            break
        target = hop.to_url
    return target


def track_permanent_redirect(
    state: FeedState, target: str | None, success: bool, policy: PollPolicy
) -> tuple[FeedState, str | None]:
    """Adopt a 301/308 target only after ``redirect_adopt_after`` consecutive successful polls
    redirected to that same target, so a one-off redirect to a maintenance page doesn't move
    the feed. Returns ``(state, adopted_url or None)``."""
    if target is None or not success or target == state.url:
        return evolve(state, redirect_target=None, redirect_count=0), None
    count = state.redirect_count + 1 if target == state.redirect_target else 1
    if count >= policy.redirect_adopt_after:
        return evolve(state, url=target, redirect_target=None, redirect_count=0), target
    return evolve(state, redirect_target=target, redirect_count=count), None


def mark_dead_on_gone(state: FeedState) -> FeedState:
    """410 Gone: the feed is dead and removed from polling (``next_poll_ms=None``)."""
    return evolve(state, dead=True, next_poll_ms=None)


def apply_rate_limit(
    state: FeedState, retry_after_s: float | None, now_ms: int, policy: PollPolicy
) -> FeedState:
    """429 / 503+Retry-After: retry when the server says (capped), and double the feed's
    interval for the polls after that (000 Step 1, 001)."""
    interval = min(state.interval_s * 2, policy.max_interval_s)
    if retry_after_s is not None:
        delay = min(retry_after_s, policy.max_retry_after_s)
    else:
        delay = jittered_delay_s(interval, state.feed_id, state.poll_no, policy.jitter_ratio)
    return evolve(state, interval_s=interval, next_poll_ms=now_ms + int(delay * 1000),
                   consecutive_unchanged=0, consecutive_changed=0)


def track_parse_failures(state: FeedState, failed: bool, policy: PollPolicy) -> tuple[FeedState, bool]:
    """001: parse failures that persist (3+ in a row) flag the feed unhealthy.

    Returns ``(state, became_unhealthy)``; a successful parse clears the flag.
    """
    if not failed:
        return evolve(state, consecutive_parse_failures=0, unhealthy=False), False
    n = state.consecutive_parse_failures + 1
    unhealthy = n >= policy.parse_failures_unhealthy
    return (evolve(state, consecutive_parse_failures=n, unhealthy=unhealthy),
            unhealthy and not state.unhealthy)


def handle_timeout(state: FeedState, now_ms: int, policy: PollPolicy) -> tuple[FeedState, bool]:
    """001: a timeout is retried once after 60 s; if the retry times out too the feed is flagged
    slow and follows the error backoff. Returns ``(state, became_slow)``."""
    n = state.consecutive_timeouts + 1
    if n < policy.timeouts_slow:
        return evolve(state, consecutive_timeouts=n,
                       next_poll_ms=now_ms + int(policy.timeout_retry_s * 1000)), False
    errors = state.consecutive_errors + 1
    delay = error_backoff_s(state.interval_s, errors, policy.max_interval_s)
    st = evolve(state, consecutive_timeouts=n, consecutive_errors=errors, slow=True,
                 next_poll_ms=now_ms + int(delay * 1000))
    return st, not state.slow


# --------------------------------------------------------------------------------------------
# Health: reliability and silent zero
# --------------------------------------------------------------------------------------------


def record_daily_outcome(
    daily: tuple[tuple[int, int, int], ...], now_ms: int, success: bool, window_days: int = 30
) -> tuple[tuple[int, int, int], ...]:
    """Add one poll to the per-day (day, ok, total) buckets, dropping days out of the window."""
    day = now_ms // DAY_MS
    kept = [b for b in daily if b[0] > day - window_days]
    if kept and kept[-1][0] == day:
        d, ok, total = kept[-1]
        kept[-1] = (d, ok + int(success), total + 1)
    else:
        kept.append((day, int(success), 1))
    return tuple(kept)


def reliability_score(
    daily: tuple[tuple[int, int, int], ...], now_ms: int, window_days: int = 30
) -> float | None:
    """000 Step 4: successful_polls / total_polls over the last 30 days (``None``: no polls)."""
    day = now_ms // DAY_MS
    ok = total = 0
    for d, o, t in daily:
        if day - window_days < d <= day:
            ok += o
            total += t
    return ok / total if total else None


def update_publication_rhythm(
    state: FeedState, new_items: int | None, now_ms: int, policy: PollPolicy
) -> FeedState:
    """Track when a feed brings new items: EWMA of the gap between such polls and of new items
    per poll (001: "Track the average number of new items per poll")."""
    if new_items is None:
        return state
    per_poll = (1 - policy.rhythm_alpha) * state.new_items_per_poll + policy.rhythm_alpha * new_items
    if new_items <= 0:
        return evolve(state, new_items_per_poll=per_poll)
    gap = state.new_items_gap_ms
    if state.last_new_items_ms is not None:
        g = float(now_ms - state.last_new_items_ms)
        gap = g if gap is None else (1 - policy.rhythm_alpha) * gap + policy.rhythm_alpha * g
    return evolve(state, last_new_items_ms=now_ms, new_item_events=state.new_item_events + 1,
                   new_items_gap_ms=gap, new_items_per_poll=per_poll, silent=False)


def is_silent_zero(state: FeedState, now_ms: int, policy: PollPolicy) -> bool:
    """A feed with an established rhythm (e.g. daily) that keeps answering successfully without
    new items for far longer than usual: ``silent_zero_factor`` x its usual gap, and at least
    ``silent_zero_min_s``."""
    if (state.new_item_events < policy.silent_zero_min_events or state.new_items_gap_ms is None
            or state.last_new_items_ms is None):
        return False
    silence = now_ms - state.last_new_items_ms
    return silence >= max(policy.silent_zero_factor * state.new_items_gap_ms,
                          policy.silent_zero_min_s * 1000)


# --------------------------------------------------------------------------------------------
# Per registrable domain (eTLD+1) shared backoff
# --------------------------------------------------------------------------------------------


@functools.cache
def _tld_extractor() -> Any:
    import tldextract

    # bundled Public Suffix List snapshot only: no network, no cache directory
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


@functools.lru_cache(maxsize=65_536)
def _registrable_host(host: str) -> str:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host.strip("[]")
    except ValueError:
        pass
    ext = _tld_extractor()(host)
    if hasattr(ext, "top_domain_under_public_suffix"):
        rd = ext.top_domain_under_public_suffix
    else:  # tldextract < 5.3
        rd = ext.registered_domain
    if rd:
        return str(rd)
    # suffix not in the list (e.g. ".example", ".internal"): the last two labels
    labels = [x for x in host.split(".") if x]
    return ".".join(labels[-2:]) if labels else host


def registrable_domain(url: str) -> str:
    """eTLD+1 of a URL's host (``a.b.tumblr.com`` -> ``tumblr.com``, ``x.bbc.co.uk`` ->
    ``bbc.co.uk``); IP literals and single-label hosts stand for themselves."""
    try:
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""
    return _registrable_host(host) if host else ""


@dataclass(frozen=True, slots=True)
class DomainState:
    """Shared politeness state of all feeds under one registrable domain."""

    domain: str
    backoff_until_ms: int = 0
    consecutive_failures: int = 0
    last_reason: str | None = None


def domain_backoff_remaining_ms(dstate: DomainState | None, now_ms: int) -> int:
    """How long feeds of this domain must still wait (0: go)."""
    if dstate is None:
        return 0
    return max(0, dstate.backoff_until_ms - now_ms)


def update_domain_backoff(
    dstate: DomainState,
    *,
    rate_limited: bool,
    retry_after_s: float | None,
    server_trouble: bool,
    success: bool,
    now_ms: int,
    policy: PollPolicy,
) -> DomainState:
    """Per-domain backoff on top of the per-feed one.

    - 429 / 503+Retry-After from any feed pauses the whole domain until Retry-After (or
      ``domain_rate_limit_default_s``);
    - ``domain_failure_threshold`` consecutive server-side failures (timeouts, connection errors,
      5xx, challenge pages) pause it for base x 2^(n - threshold), capped;
    - a successful poll resets the failure streak. Client-side errors (404, parse) are neutral.
    """
    if rate_limited:
        delay = min(retry_after_s if retry_after_s is not None else policy.domain_rate_limit_default_s,
                    policy.max_retry_after_s)
        until = max(dstate.backoff_until_ms, now_ms + int(delay * 1000))
        return replace(dstate, backoff_until_ms=until,
                       consecutive_failures=dstate.consecutive_failures + 1,
                       last_reason="rate_limited")
    if server_trouble:
        n = dstate.consecutive_failures + 1
        until = dstate.backoff_until_ms
        if n >= policy.domain_failure_threshold:
            delay = min(policy.domain_backoff_base_s * 2 ** min(n - policy.domain_failure_threshold, 20),
                        policy.domain_backoff_max_s)
            until = max(until, now_ms + int(delay * 1000))
        return replace(dstate, consecutive_failures=n, backoff_until_ms=until,
                       last_reason="server_trouble")
    if success:
        return replace(dstate, consecutive_failures=0, last_reason=None)
    return dstate


# --------------------------------------------------------------------------------------------
# The decision
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PollVerdict:
    """The outcome of one poll: new state and what to report/emit."""

    state: FeedState
    status: HealthStatus
    success: bool  # counts as successful for reliability
    emit_body: bool  # produce the body to feeds.raw
    changed: bool | None  # new items? (None: unknown / first poll)
    new_items: int | None
    scan: FeedScan | None
    retry_after_s: float | None
    rate_limited: bool
    server_trouble: bool  # counts against the domain (timeouts, connection errors, 5xx, HTML)
    alerts: tuple[str, ...]
    message: str | None
    adopted_url: str | None = None


def _schedule(state: FeedState, now_ms: int, policy: PollPolicy) -> FeedState:
    delay = jittered_delay_s(state.interval_s, state.feed_id, state.poll_no, policy.jitter_ratio)
    return evolve(state, next_poll_ms=now_ms + int(delay * 1000))


def _error_schedule(state: FeedState, now_ms: int, policy: PollPolicy) -> FeedState:
    delay = error_backoff_s(state.interval_s, state.consecutive_errors, policy.max_interval_s)
    delay = max(delay, hint_floor_s(state, policy))
    return evolve(state, next_poll_ms=now_ms + int(delay * 1000))


def decide_poll(
    state: FeedState, outcome: FetchOutcome, now_ms: int, policy: PollPolicy | None = None
) -> PollVerdict:
    """Apply every rule to one poll's outcome. ``now_ms`` is the poll time (injected clock)."""
    p = policy or PollPolicy()
    st = evolve(state, poll_no=state.poll_no + 1, total_polls=state.total_polls + 1,
                 last_poll_ms=now_ms)
    if outcome.kind is FetchKind.RESPONSE:
        st = evolve(st, response_ms_total=st.response_ms_total + outcome.elapsed_ms,
                     response_count=st.response_count + 1)
    alerts: list[str] = []
    message = outcome.error
    status: HealthStatus
    success = False
    emit = False
    changed: bool | None = None
    new_items: int | None = None
    scan: FeedScan | None = None
    retry_after: float | None = None
    rate_limited = False
    server_trouble = False
    adopted: str | None = None
    headers = outcome.headers
    code = outcome.status

    if outcome.kind is FetchKind.TIMEOUT:
        status = "timeout"
        server_trouble = True
        st, became_slow = handle_timeout(evolve(st, timeouts=st.timeouts + 1), now_ms, p)
        if became_slow:
            alerts.append(f"slow: {st.consecutive_timeouts} consecutive timeouts")
    elif outcome.kind is FetchKind.RESPONSE and code == 410:
        status = "dead"
        st = mark_dead_on_gone(st)
        alerts.append("dead: 410 Gone, removed from polling")
    elif outcome.kind is FetchKind.RESPONSE and code is not None and is_rate_limited(code, headers, now_ms):
        status = "rate_limited"
        rate_limited = True
        retry_after = parse_retry_after(headers.get("retry-after"), now_ms)
        st = apply_rate_limit(evolve(st, rate_limited=st.rate_limited + 1), retry_after, now_ms, p)
        message = message or f"HTTP {code}, Retry-After {headers.get('retry-after')!r}"
    elif outcome.kind is FetchKind.RESPONSE and code == 304:
        status = "not_modified"
        success = True
        changed = False if st.has_baseline else None
        st = evolve(st, etag=headers.get("etag") or st.etag,
                     last_modified=headers.get("last-modified") or st.last_modified,
                     not_modified_polls=st.not_modified_polls + 1)
    elif outcome.kind is FetchKind.RESPONSE and code is not None and 200 <= code < 300:
        body = outcome.body or b""
        validators = {"etag": headers.get("etag"), "last_modified": headers.get("last-modified")}
        if is_unchanged_body(st, body):
            status = "not_modified"
            success = True
            changed = False
            st = evolve(st, not_modified_polls=st.not_modified_polls + 1, **validators)
            message = "body unchanged (same hash)"
        elif looks_like_html(body, headers.get("content-type")):
            status = "html_instead_of_feed"
            server_trouble = True
            message = "body is an HTML page, not a feed"
        else:
            scan = scan_feed(body, now_ms, p)
            st, became_unhealthy = track_parse_failures(st, not scan.ok, p)
            if not scan.ok:
                status = "parse_error"
                message = scan.error
                st = evolve(st, parse_failures=st.parse_failures + 1)
                bh = body_hash(body)
                emit = bh != st.bad_body_hash  # let the flow dead-letter it, once per body
                st = evolve(st, bad_body_hash=bh)
                if became_unhealthy:
                    alerts.append(f"unhealthy: {st.consecutive_parse_failures} consecutive parse failures")
            else:
                success = True
                emit = True
                status = undated_status(scan)
                if st.has_baseline:
                    new_items = len(scan.item_keys - st.item_keys)
                    changed = new_items > 0
                st = evolve(st, body_hash=body_hash(body), bad_body_hash=None,
                             item_keys=scan.item_keys, has_baseline=True,
                             feed_hint_s=feed_hint_s(scan), **validators)
                if scan.recovered:
                    message = f"recovered with {scan.recovered}"
    elif outcome.kind is FetchKind.BLOCKED:
        status = "blocked"
    elif outcome.kind is FetchKind.TOO_LARGE:
        status = "too_large"
    else:  # other 4xx/5xx, 3xx without Location, connection/protocol errors, redirect loops
        status = "http_error"
        server_trouble = outcome.kind in (FetchKind.CONNECT_ERROR, FetchKind.PROTOCOL_ERROR) or (
            code is not None and code >= 500)
        if message is None:
            message = f"HTTP {code}" if code is not None else outcome.kind.value
        st = evolve(st, http_errors=st.http_errors + 1)

    if outcome.kind is FetchKind.RESPONSE:
        st = evolve(st, http_hint_s=http_cache_hint_s(headers, now_ms))

    # --- outcome bookkeeping shared by all branches -------------------------------------
    if success:
        st = evolve(st, ok_polls=st.ok_polls + 1, last_success_ms=now_ms, consecutive_errors=0,
                     consecutive_timeouts=0, slow=False)
        if status == "not_modified":
            new_items = 0 if st.has_baseline else None
        st = update_publication_rhythm(st, new_items, now_ms, p)
        st, adopted = track_permanent_redirect(st, permanent_redirect_target(outcome.redirects),
                                               True, p)
        if adopted:
            alerts.append(f"url_changed: adopted permanent redirect to {redact_url(adopted)}")
        if not new_items and is_silent_zero(st, now_ms, p):
            if not st.silent:
                alerts.append("silent_zero: no new items for far longer than usual")
            st = evolve(st, silent=True)
            status = "silent_zero"
        st = adapt_interval(st, changed, p)
        st = _schedule(st, now_ms, p)
    else:
        st = evolve(st, failed_polls=st.failed_polls + 1)
        st, _ = track_permanent_redirect(st, None, False, p)
        if status not in ("timeout", "dead", "rate_limited"):
            if status != "parse_error":
                st = evolve(st, consecutive_errors=st.consecutive_errors + 1)
            st = _error_schedule(st, now_ms, p) if status != "parse_error" else _schedule(st, now_ms, p)
        if status != "timeout":
            st = evolve(st, consecutive_timeouts=0)
    if st.dead:
        st = evolve(st, next_poll_ms=None)
    st = evolve(st, last_status=status,
                 daily=record_daily_outcome(st.daily, now_ms, success, p.reliability_window_days))
    return PollVerdict(
        state=st, status=status, success=success, emit_body=emit, changed=changed,
        new_items=new_items, scan=scan, retry_after_s=retry_after, rate_limited=rate_limited,
        server_trouble=server_trouble, alerts=tuple(alerts), message=message, adopted_url=adopted,
    )


# --------------------------------------------------------------------------------------------
# feed-health record
# --------------------------------------------------------------------------------------------


def health_counters(state: FeedState) -> dict[str, Any]:
    """The per-feed counters of a health record (001/000: success/failure counts, average
    response time, last success, 304 ratio)."""
    avg = state.response_ms_total / state.response_count if state.response_count else None
    return {
        "total_polls": state.total_polls,
        "successful_polls": state.ok_polls,
        "failed_polls": state.failed_polls,
        "not_modified_polls": state.not_modified_polls,
        "not_modified_ratio": (state.not_modified_polls / state.ok_polls) if state.ok_polls else None,
        "http_errors": state.http_errors,
        "timeouts": state.timeouts,
        "parse_failures": state.parse_failures,
        "rate_limited": state.rate_limited,
        "consecutive_errors": state.consecutive_errors,
        "consecutive_parse_failures": state.consecutive_parse_failures,
        "consecutive_timeouts": state.consecutive_timeouts,
        "consecutive_unchanged": state.consecutive_unchanged,
        "avg_response_ms": round(avg, 1) if avg is not None else None,
        "last_success_at": ms_to_iso(state.last_success_ms) if state.last_success_ms is not None else None,
        "new_items_per_poll": round(state.new_items_per_poll, 3),
    }


def health_record(
    verdict: PollVerdict,
    outcome: FetchOutcome,
    now_ms: int,
    policy: PollPolicy | None = None,
    *,
    domain: str | None = None,
) -> dict[str, Any]:
    """The ``feed-health`` record (schema ``feed-health.v1``, source ``poller``) of one poll."""
    p = policy or PollPolicy()
    st = verdict.state
    scan = verdict.scan
    flags = [f for f, on in (("dead", st.dead), ("unhealthy", st.unhealthy), ("slow", st.slow),
                             ("silent", st.silent)) if on]
    return {
        "schema": "feed-health",
        "schema_version": 1,
        "record_id": f"poller:{st.feed_id}@{now_ms}",
        "poll_id": f"{st.feed_id}@{now_ms}",
        "feed_id": st.feed_id,
        "source": "poller",
        "at": ms_to_iso(now_ms),
        "status": verdict.status,
        "url": redact_url(outcome.url),
        "final_url": redact_url(outcome.final_url) if outcome.final_url else None,
        "http_status": outcome.status,
        "response_ms": round(outcome.elapsed_ms, 1) if outcome.kind is FetchKind.RESPONSE else None,
        "attempts": outcome.attempts,
        "items": scan.items if scan is not None and scan.ok else None,
        "new_items": verdict.new_items,
        "undated": scan.undated if scan is not None and scan.ok else None,
        "feed_format": scan.feed_format if scan is not None else None,
        "counters": health_counters(st),
        "reliability": reliability_score(st.daily, now_ms, p.reliability_window_days),
        "interval_s": round(st.interval_s, 1),
        "next_poll_at": ms_to_iso(st.next_poll_ms) if st.next_poll_ms is not None else None,
        "retry_after_s": verdict.retry_after_s,
        "flags": flags,
        "domain": domain,
        "alert": "; ".join(verdict.alerts) if verdict.alerts else None,
        "message": redact_message(verdict.message),
    }


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_message(message: str | None) -> str | None:
    """Messages may quote URLs (exception texts): strip credentials from every URL in them."""
    if message is None:
        return None
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), message)[:500]


__all__ = [
    "ALLOWED_SCHEMES",
    "FEED_TYPE_INTERVALS_S",
    "SUCCESS_STATUSES",
    "DomainState",
    "FeedScan",
    "FeedState",
    "FetchKind",
    "FetchOutcome",
    "HealthStatus",
    "PollPolicy",
    "PollVerdict",
    "RedirectHop",
    "adapt_interval",
    "address_block_reason",
    "apply_rate_limit",
    "body_hash",
    "cache_control_max_age_s",
    "conditional_headers",
    "decide_poll",
    "default_interval_s",
    "domain_backoff_remaining_ms",
    "error_backoff_s",
    "evolve",
    "expires_hint_s",
    "feed_hint_s",
    "handle_timeout",
    "health_record",
    "hint_floor_s",
    "http_cache_hint_s",
    "initial_state",
    "is_rate_limited",
    "is_silent_zero",
    "is_transient_failure",
    "is_unchanged_body",
    "jittered_delay_s",
    "looks_like_html",
    "mark_dead_on_gone",
    "parse_retry_after",
    "permanent_redirect_target",
    "reconcile_state",
    "record_daily_outcome",
    "redact_url",
    "registrable_domain",
    "reliability_score",
    "repair_xml",
    "scan_feed",
    "scheme_allowed",
    "strip_userinfo",
    "sy_update_interval_s",
    "track_parse_failures",
    "track_permanent_redirect",
    "undated_status",
    "update_domain_backoff",
    "update_publication_rhythm",
]
