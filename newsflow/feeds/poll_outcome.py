"""Polls the poller sends without a body: what the flow's parse step makes of them.

The poller puts every poll on ``feeds.raw``. One that brought no feed body -- an HTTP error,
a timeout, an HTML page instead of the feed, an address refused by the safety policy, a body
over the size limit, an unchanged feed -- carries the poller's feed-health status in
``poll_status`` and what went wrong in ``error``. It is neither an article nor bad input: its
feed-health record says how the poll went, so the digests' feed-health report counts it and
names the broken feed.
"""

from __future__ import annotations

from typing import Any

from newsflow.feeds.normalize import NormalizeResult
from newsflow.model.records import RawPayload
from newsflow.model.vocab import HealthStatus


def bodiless_poll_result(payload: RawPayload) -> NormalizeResult | None:
    """The parse result of a poll sent without a body (its ``poll_status``: no articles, no
    dead letters); None for a payload to parse (a body, a body reference, or an envelope of
    an older poller without ``poll_status``).

    >>> p = RawPayload("f", "http://x/f", 1, 404, None, poll_status="http_error", error="HTTP 404")
    >>> bodiless_poll_result(p).status
    <HealthStatus.HTTP_ERROR: 'http_error'>
    >>> bodiless_poll_result(RawPayload("f", "http://x/f", 1, 200, b"<rss/>")) is None
    True
    """
    if payload.poll_status is None or payload.body is not None or payload.body_ref is not None:
        return None
    return NormalizeResult(status=HealthStatus(payload.poll_status))


def poll_error_fields(payload: RawPayload) -> dict[str, Any]:
    """Extra fields of the flow's feed-health record of a poll without a body: its error."""
    return {"message": payload.error} if payload.error is not None else {}
