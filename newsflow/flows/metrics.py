"""Prometheus metrics of the flow and the poller (one definition each).

Served on ``--metrics-port`` by ``newsflow run`` (default 9400) and ``newsflow poll`` (default
9401) at ``/metrics``, with ``/healthz`` beside them (``newsflow.connectors.observability``);
they also appear at Bytewax's own ``/metrics`` when ``BYTEWAX_DATAFLOW_API_ENABLED=1``.

Gates and where their drops are counted: every dead letter (envelope, parse, normalization
gates: ``no_title_no_body``, ``html_instead_of_feed``, ...) in ``newsflow_deadletters_total
{stage,reason}``; re-polled unchanged items in ``newsflow_repolls_unchanged_total``; articles
first seen after their digest window closed in ``newsflow_late_for_digest_total``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from functools import lru_cache
from typing import Any

from prometheus_client import Counter, Gauge

PAYLOADS = Counter("newsflow_payloads", "raw payloads read", ["status"])
ARTICLES = Counter("newsflow_articles", "article records emitted", ["disposition"])
DEADLETTERS = Counter("newsflow_deadletters", "dead-letter records", ["stage", "reason"])
REPOLLS = Counter("newsflow_repolls_unchanged", "re-polled unchanged items (counted, not emitted)")
MALFORMED = Counter("newsflow_malformed_items", "items without title and body", ["feed_id"])
LATE = Counter("newsflow_late_for_digest", "articles first seen after their digest window closed")
DIGESTS = Counter("newsflow_digests", "digest windows assembled and emitted", ["digest_type"])

# ---- event time, input position and lag (newsflow run)
EVENT_TIME = Gauge("newsflow_event_time_seconds", "event-time watermark: latest fetched_at read",
                   ["partition"])
INPUT_OFFSET = Gauge("newsflow_input_offset", "next feeds.raw offset the flow will read", ["partition"])
HIGH_WATERMARK = Gauge("newsflow_input_high_watermark", "feeds.raw end offset (log end)", ["partition"])
CONSUMER_LAG = Gauge("newsflow_consumer_lag", "feeds.raw messages not yet read by the flow", ["partition"])
#: partition -> next offset to read (read by the lag monitor; set from the Kafka input)
INPUT_POSITIONS: dict[int, int] = {}


@lru_cache(maxsize=4096)
def labelled(metric: Any, *values: str) -> Any:
    """``metric.labels(*values)``, looked up once per label values: the child is the same
    object every time (nothing here removes one), and ``labels()`` checks and joins its
    arguments on every call (~2.7 us, once per article and per payload on the hot path)."""
    return metric.labels(*values)


def input_read(partition: int, offset: int) -> None:
    """The Kafka input handed message ``offset`` of ``partition`` to the flow."""
    INPUT_POSITIONS[partition] = offset + 1


def set_lag(high_watermarks: Mapping[int, int]) -> None:
    for p, high in high_watermarks.items():
        pos = INPUT_POSITIONS.get(p)
        label = str(p)
        HIGH_WATERMARK.labels(label).set(high)
        if pos is None:  # nothing read from it by this process yet: its start offset is unknown
            continue
        INPUT_OFFSET.labels(label).set(pos)
        CONSUMER_LAG.labels(label).set(max(0, high - pos))


# ---- the poller (newsflow poll); registered only in the poller's process (:func:`own_metrics`)
POLLS = Counter("newsflow_polls", "feed polls by health status", ["status"], registry=None)
BROKEN_FEEDS = Gauge("newsflow_broken_feeds", "feeds whose last poll did not deliver a feed", registry=None)
FEEDS_KNOWN = Gauge("newsflow_feeds_polled", "feeds polled at least once by this process", registry=None)
HEARTBEATS = Counter("newsflow_heartbeats", "heartbeat ticks sent to feeds.raw", registry=None)

FLOW_METRICS = (PAYLOADS, ARTICLES, DEADLETTERS, REPOLLS, MALFORMED, LATE, DIGESTS, EVENT_TIME, INPUT_OFFSET,
                HIGH_WATERMARK, CONSUMER_LAG)
POLLER_METRICS = (POLLS, BROKEN_FEEDS, FEEDS_KNOWN, HEARTBEATS)


def own_metrics(service: str) -> None:
    """Serve only ``service``'s metrics at this process's ``/metrics``: ``"poller"`` its
    poll metrics, anything else (the flow) the flow's. A metric another process owns would
    sit at 0 here and read as a fact."""
    from prometheus_client import REGISTRY

    mine, theirs = (POLLER_METRICS, FLOW_METRICS) if service == "poller" else (FLOW_METRICS, POLLER_METRICS)
    for m in theirs:
        with suppress(KeyError):  # not registered
            REGISTRY.unregister(m)
    for m in mine:
        with suppress(ValueError):  # already registered
            REGISTRY.register(m)


class PollMetrics:
    """Called with every poll event (``connectors.poller.records.PollEvent``): counts polls by
    status and keeps each feed's last status for the broken-feeds gauge."""

    def __init__(self, success: frozenset[str]) -> None:
        self.success = success
        self.last: dict[str, str] = {}

    def __call__(self, ev: object) -> None:
        status = str(getattr(ev, "status", ""))
        if status == "tick":
            HEARTBEATS.inc()
            return
        POLLS.labels(status).inc()
        self.last[str(getattr(ev, "feed_id", ""))] = status
        BROKEN_FEEDS.set(sum(1 for s in self.last.values() if s not in self.success))
        FEEDS_KNOWN.set(len(self.last))

    def broken(self, limit: int = 50) -> dict[str, Any]:
        """The feeds whose last poll failed, by name with their status (the first ``limit``)."""
        bad = sorted((f, s) for f, s in self.last.items() if s not in self.success)
        return {"broken_feed_ids": {f: s for f, s in bad[:limit]}}


# ---- reading the counters back (status lines, health, progress bars)
def total(metric: Counter | Gauge) -> float:
    """Sum over every label set of a counter or gauge, in this process."""
    return sum(s.value for m in metric.collect() for s in m.samples
               if not s.name.endswith("_created"))


def flow_status() -> dict[str, float | int]:
    return {"payloads": int(total(PAYLOADS)), "articles": int(total(ARTICLES)),
            "deadletters": int(total(DEADLETTERS)), "digests": int(total(DIGESTS)),
            "consumer_lag": int(total(CONSUMER_LAG))}


def poll_status() -> dict[str, float | int]:
    return {"polls": int(total(POLLS)), "feeds": int(total(FEEDS_KNOWN)),
            "broken_feeds": int(total(BROKEN_FEEDS)), "heartbeats": int(total(HEARTBEATS))}
