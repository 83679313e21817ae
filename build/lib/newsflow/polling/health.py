"""The poller's ``feed-health`` record of one poll.
"""

from __future__ import annotations

from typing import Any

from newsflow.core.timeutil import ms_to_iso
from newsflow.polling.rules import PollVerdict, reliability_score
from newsflow.polling.safety import redact_message, redact_url
from newsflow.polling.state import FeedState, FetchKind, FetchOutcome, PollPolicy

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
