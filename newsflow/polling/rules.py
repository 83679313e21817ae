"""Pure polling rules: what one HTTP poll means for a feed, and when to poll next.

No I/O and no wall clock: every function takes ``now_ms`` and returns new immutable values.
:func:`decide_poll` composes the rules: ``(FeedState, FetchOutcome, now) -> PollVerdict``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from newsflow.core.hashing import bytes_id, stable_id
from newsflow.core.timeutil import DAY_MS, dt_to_ms
from newsflow.model.vocab import HealthStatus
from newsflow.polling.safety import redact_url
from newsflow.polling.scan import (
    FeedScan,
    _parse_http_date,
    feed_hint_s,
    looks_like_html,
    scan_feed,
    undated_status,
)
from newsflow.polling.state import (
    DomainState,
    FeedState,
    FetchKind,
    FetchOutcome,
    PollPolicy,
    RedirectHop,
    evolve,
)

# --------------------------------------------------------------------------------------------
# Request side
# --------------------------------------------------------------------------------------------


def conditional_headers(state: FeedState) -> dict[str, str]:
    """``If-None-Match`` / ``If-Modified-Since`` from the previous poll (docs/rules.md#requests)."""
    h: dict[str, str] = {}
    if state.etag:
        h["If-None-Match"] = state.etag
    if state.last_modified:
        h["If-Modified-Since"] = state.last_modified
    return h


def is_transient_failure(
    kind: FetchKind, status: int | None, headers: Mapping[str, str], policy: PollPolicy | None = None
) -> bool:
    """Should the fetcher retry at once (2 retries, 1 s / 2 s backoff:
    docs/rules.md#retries-and-backoff)?

    Connection and protocol errors, and 500/502/504 (503 only without ``Retry-After``). Not 429
    and not 503 with Retry-After (the server said when), not a timeout (retried once after 60 s,
    scheduled by :func:`handle_timeout`), not other 4xx (retrying cannot help).
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
# Response classification helpers
# --------------------------------------------------------------------------------------------


def body_hash(body: bytes) -> str:
    """Stable hash of a body (blake2b-128)."""
    return bytes_id(body, 16)


def is_unchanged_body(state: FeedState, body: bytes) -> bool:
    """A 200 whose body hash equals the last feed body: treated as not modified."""
    return state.body_hash is not None and body_hash(body) == state.body_hash


def is_rate_limited(status: int | None, headers: Mapping[str, str], now_ms: int = 0) -> bool:
    """429, or 503 carrying a usable ``Retry-After`` (docs/rules.md#retries-and-backoff)."""
    if status == 429:
        return True
    return status == 503 and parse_retry_after(headers.get("retry-after"), now_ms) is not None


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
    ``sy:*``, ``Cache-Control``/``Expires`` -- all lower bounds -- capped at 24 h
    (docs/rules.md#poll-interval)."""
    floor = max(policy.min_interval_s, state.registry_floor_s, state.feed_hint_s or 0.0,
                state.http_hint_s or 0.0)
    return min(floor, policy.max_interval_s)


def min_interval_floor_s(state: FeedState, policy: PollPolicy) -> float:
    """The least time between two polls of one feed: the politeness floor or the registry interval."""
    return min(max(policy.min_interval_s, state.registry_floor_s), policy.max_interval_s)


def adapt_interval(state: FeedState, changed: bool | None, policy: PollPolicy) -> FeedState:
    """Adaptive polling (docs/rules.md#poll-interval).

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
    return min(max_s, interval_s * (1 << min(n, 20)))


# --------------------------------------------------------------------------------------------
# Error rules
# --------------------------------------------------------------------------------------------


def permanent_redirect_target(redirects: Iterable[RedirectHop]) -> str | None:
    """Where the leading run of permanent redirects (301/308) points.

    ``301 -> 302 -> X`` gives the 301's target (the 302 is temporary); a chain that starts with
    302/303/307 gives ``None`` (followed, the feed keeps its URL: docs/rules.md#responses).
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
    """429 / 503+Retry-After: retry when the server says (capped, and never sooner than the
    feed's minimum interval: ``Retry-After: 0`` or a past date must not make a tight loop), and
    double the feed's interval for the polls after that (docs/rules.md#retries-and-backoff)."""
    interval = min(state.interval_s * 2, policy.max_interval_s)
    if retry_after_s is not None:
        delay = max(min(retry_after_s, policy.max_retry_after_s), min_interval_floor_s(state, policy))
    else:
        delay = jittered_delay_s(interval, state.feed_id, state.poll_no, policy.jitter_ratio)
    return evolve(state, interval_s=interval, next_poll_ms=now_ms + int(delay * 1000),
                   consecutive_unchanged=0, consecutive_changed=0)


def track_parse_failures(state: FeedState, failed: bool, policy: PollPolicy) -> tuple[FeedState, bool]:
    """Parse failures that persist (3+ in a row) flag the feed unhealthy
    (docs/rules.md#feed-health).

    Returns ``(state, became_unhealthy)``; a successful parse clears the flag.
    """
    if not failed:
        return evolve(state, consecutive_parse_failures=0, unhealthy=False), False
    n = state.consecutive_parse_failures + 1
    unhealthy = state.unhealthy or n >= policy.parse_failures_unhealthy  # only a success clears it
    return (evolve(state, consecutive_parse_failures=n, unhealthy=unhealthy),
            unhealthy and not state.unhealthy)


def track_bad_responses(state: FeedState, policy: PollPolicy) -> tuple[FeedState, bool]:
    """One more poll answered with an HTML page or a 4xx; ``bad_responses_unhealthy`` in a row
    flag the feed unhealthy. Returns ``(state, became_unhealthy)``."""
    n = state.consecutive_bad_responses + 1
    if n >= policy.bad_responses_unhealthy and not state.unhealthy:
        return evolve(state, consecutive_bad_responses=n, unhealthy=True), True
    return evolve(state, consecutive_bad_responses=n), False


def handle_timeout(state: FeedState, now_ms: int, policy: PollPolicy) -> tuple[FeedState, bool]:
    """A timeout is retried once after 60 s; if the retry times out too the feed is flagged slow
    and follows the error backoff (docs/rules.md#retries-and-backoff). Returns
    ``(state, became_slow)``."""
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
    """Reliability (docs/rules.md#feed-health): successful_polls / total_polls over the last 30
    days (``None``: no polls)."""
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
    per poll (docs/rules.md#poll-interval)."""
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
    if rate_limited:  # a Retry-After of 0 or in the past still pauses the domain a little
        delay = min(max(retry_after_s or 0.0, policy.domain_rate_limit_default_s), policy.max_retry_after_s)
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
        status = HealthStatus.TIMEOUT
        server_trouble = True
        st, became_slow = handle_timeout(evolve(st, timeouts=st.timeouts + 1), now_ms, p)
        if became_slow:
            alerts.append(f"slow: {st.consecutive_timeouts} consecutive timeouts")
    elif outcome.kind is FetchKind.RESPONSE and code == 410:
        status = HealthStatus.DEAD
        st = mark_dead_on_gone(st)
        alerts.append("dead: 410 Gone, removed from polling")
    elif outcome.kind is FetchKind.RESPONSE and code is not None and is_rate_limited(code, headers, now_ms):
        status = HealthStatus.RATE_LIMITED
        rate_limited = True
        retry_after = parse_retry_after(headers.get("retry-after"), now_ms)
        st = apply_rate_limit(evolve(st, rate_limited=st.rate_limited + 1), retry_after, now_ms, p)
        message = message or f"HTTP {code}, Retry-After {headers.get('retry-after')!r}"
    elif outcome.kind is FetchKind.RESPONSE and code == 304:
        status = HealthStatus.NOT_MODIFIED
        success = True
        changed = False if st.has_baseline else None
        st = evolve(st, etag=headers.get("etag") or st.etag,
                     last_modified=headers.get("last-modified") or st.last_modified,
                     not_modified_polls=st.not_modified_polls + 1)
    elif outcome.kind is FetchKind.RESPONSE and code is not None and 200 <= code < 300:
        body = outcome.body or b""
        validators = {"etag": headers.get("etag"), "last_modified": headers.get("last-modified")}
        if is_unchanged_body(st, body):
            status = HealthStatus.NOT_MODIFIED
            success = True
            changed = False
            st = evolve(st, not_modified_polls=st.not_modified_polls + 1, **validators)
            message = "body unchanged (same hash)"
        elif looks_like_html(body, headers.get("content-type")):
            status = HealthStatus.HTML_INSTEAD_OF_FEED
            server_trouble = True
            message = "body is an HTML page, not a feed"
        else:
            scan = scan_feed(body, now_ms, p)
            st, became_unhealthy = track_parse_failures(st, not scan.ok, p)
            if not scan.ok:
                status = HealthStatus.PARSE_ERROR
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
        status = HealthStatus.BLOCKED
    elif outcome.kind is FetchKind.TOO_LARGE:
        status = HealthStatus.TOO_LARGE
    else:  # other 4xx/5xx, 3xx without Location, connection/protocol errors, redirect loops
        status = HealthStatus.HTTP_ERROR
        server_trouble = outcome.kind in (FetchKind.CONNECT_ERROR, FetchKind.PROTOCOL_ERROR) or (
            code is not None and code >= 500)
        if message is None:
            message = f"HTTP {code}" if code is not None else outcome.kind.value
        st = evolve(st, http_errors=st.http_errors + 1)

    if outcome.kind is FetchKind.RESPONSE:
        st = evolve(st, http_hint_s=http_cache_hint_s(headers, now_ms))

    # --- outcome bookkeeping shared by all branches -------------------------------------
    if status == HealthStatus.HTML_INSTEAD_OF_FEED or (
            status == HealthStatus.HTTP_ERROR and code is not None and 400 <= code < 500):
        st, became_unhealthy = track_bad_responses(st, p)
        if became_unhealthy:
            alerts.append(f"unhealthy: {st.consecutive_bad_responses} consecutive polls answered with "
                          f"{'an HTML page' if status == HealthStatus.HTML_INSTEAD_OF_FEED else f'HTTP {code}'}")
    if success:
        st = evolve(st, ok_polls=st.ok_polls + 1, last_success_ms=now_ms, consecutive_errors=0,
                     consecutive_timeouts=0, slow=False, consecutive_bad_responses=0, unhealthy=False)
        if status == HealthStatus.NOT_MODIFIED:
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
            status = HealthStatus.SILENT_ZERO
        st = adapt_interval(st, changed, p)
        st = _schedule(st, now_ms, p)
    else:
        st = evolve(st, failed_polls=st.failed_polls + 1)
        st, _ = track_permanent_redirect(st, None, False, p)
        if status not in (HealthStatus.TIMEOUT, HealthStatus.DEAD, HealthStatus.RATE_LIMITED):
            if status != HealthStatus.PARSE_ERROR:
                st = evolve(st, consecutive_errors=st.consecutive_errors + 1)
            st = _error_schedule(st, now_ms, p) if status != HealthStatus.PARSE_ERROR else _schedule(st, now_ms, p)
        if status != HealthStatus.TIMEOUT:
            st = evolve(st, consecutive_timeouts=0)
    if st.dead:
        st = evolve(st, next_poll_ms=None)
    st = evolve(st, last_status=status.value,
                 daily=record_daily_outcome(st.daily, now_ms, success, p.reliability_window_days))
    return PollVerdict(
        state=st, status=status, success=success, emit_body=emit, changed=changed,
        new_items=new_items, scan=scan, retry_after_s=retry_after, rate_limited=rate_limited,
        server_trouble=server_trouble, alerts=tuple(alerts), message=message, adopted_url=adopted,
    )
