"""The poller's vocabulary and per-feed state: fetch outcomes, the poll policy, ``FeedState``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from newsflow.polling.safety import strip_userinfo

# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------

#: Default interval by feed type when the registry gives none (seconds,
#: docs/rules.md#poll-interval). Where a range is usual (a blog: 2-4 hours) the low end is
#: taken: adaptive polling doubles the interval of a quiet feed anyway.
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
    """Every tunable of the polling rules, with the numbers of docs/rules.md#polling as defaults."""

    #: absolute politeness floor between two polls of one feed (s)
    min_interval_s: float = 300.0
    #: an interval doubles up to 24 hours at most (docs/rules.md#poll-interval)
    max_interval_s: float = 86_400.0
    #: feed type used when the registry gives neither interval nor feed_type
    default_feed_type: str = "major"
    #: a feed without new items in 5 consecutive polls: its interval doubles
    unchanged_polls_to_double: int = 5
    #: a feed with new items on every poll: its interval halves -- "every poll" is read as this
    #: many consecutive polls with new items
    changed_polls_to_halve: int = 3
    #: next poll = interval * (1 + u * jitter_ratio), u in [0, 1) from a stable hash
    jitter_ratio: float = 0.1
    #: adopt a 301/308 target after this many consecutive polls redirected to the same target
    redirect_adopt_after: int = 3
    #: parse failures that persist (3+ in a row) flag the feed unhealthy (docs/rules.md#feed-health)
    parse_failures_unhealthy: int = 3
    #: this many polls in a row answered with an HTML page or a 4xx (not 410/429) flag the feed
    #: unhealthy, with an alert (a successful poll clears the streak)
    bad_responses_unhealthy: int = 5
    #: a timeout is retried once after 60 seconds; the feed is flagged slow if it persists
    #: (docs/rules.md#retries-and-backoff)
    timeout_retry_s: float = 60.0
    #: consecutive timeouts after which the feed is flagged slow
    timeouts_slow: int = 2
    #: a Retry-After further away than this is capped (s)
    max_retry_after_s: float = 86_400.0
    #: statuses retried immediately by the fetcher (2 retries, 1 s / 2 s); 503 only without
    #: Retry-After, 429 never (Retry-After rules), timeouts never (retried after 60 s instead):
    #: docs/rules.md#retries-and-backoff
    transient_statuses: frozenset[int] = frozenset({500, 502, 503, 504})
    #: reliability = successful_polls / total_polls over the last 30 days
    #: (docs/rules.md#feed-health)
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
    #: an item dated more than this after the fetch is treated as undated (docs/rules.md#dates)
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
    consecutive_bad_responses: int = 0  # HTML instead of a feed, or 4xx (not 410/429)
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
    """The default interval table (docs/rules.md#poll-interval); unknown/missing type -> the
    policy's default type."""
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
    """State of a feed never polled: due at ``now_ms``, interval from the registry or the
    default table.

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
    a feed whose last poll the address policy refused is due at once (the operator may have
    fixed the policy or the feed since); everything else is kept.
    """
    p = policy or PollPolicy()
    if state is None or state.registry_url != strip_userinfo(url) or state.feed_id != feed_id:
        return initial_state(feed_id, url, interval_s=interval_s, feed_type=feed_type, policy=p,
                             now_ms=now_ms)
    if state.last_status == "blocked" and state.next_poll_ms is not None and state.next_poll_ms > now_ms:
        state = evolve(state, next_poll_ms=now_ms)
    floor = min(interval_s or 0.0, p.max_interval_s)
    if floor != state.registry_floor_s:
        start = interval_s if interval_s else default_interval_s(feed_type, p)
        return evolve(state, registry_floor_s=floor,
                       interval_s=min(max(start, p.min_interval_s, floor), p.max_interval_s))
    return state


@dataclass(frozen=True, slots=True)
class DomainState:
    """Shared politeness state of all feeds under one registrable domain."""

    domain: str
    backoff_until_ms: int = 0
    consecutive_failures: int = 0
    last_reason: str | None = None
