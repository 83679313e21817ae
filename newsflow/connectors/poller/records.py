"""What the poller produces: :class:`KafkaRecord` (one message) and :class:`PollEvent` (one poll
or heartbeat tick)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from newsflow.config import Topics
from newsflow.model.records import RawPayload
from newsflow.wire.codec import encode_raw, interaction_heartbeat
from newsflow.wire.contracts import headers_for

TICK_FEED_ID = "__tick__"


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One message to produce. ``all_partitions``: one copy to every partition (heartbeat)."""

    topic: str
    key: bytes
    value: bytes
    timestamp_ms: int
    partition: int | None = None
    all_partitions: bool = False
    #: schema headers (``newsflow.wire.contracts.headers_for``)
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class PollEvent:
    """What one poll (or tick) produced; ``status`` is the health status, ``"tick"`` or
    ``"deferred"`` (held back by its domain's backoff: nothing polled, nothing emitted)."""

    feed_id: str
    status: str
    records: tuple[KafkaRecord, ...]
    at_ms: int
    alert: str | None = None
    http_status: int | None = None
    response_ms: float | None = None


def tick_event(now_ms: int, topics: Topics, *, interactions: bool = False) -> PollEvent:
    """Heartbeat: ``RawPayload("__tick__", "", status=0, body=None)`` to every partition of
    feeds.raw, so the dataflow's event-time clock advances on quiet streams; with
    ``interactions``, an ``interactions`` heartbeat to every partition of that topic too."""
    key, value = encode_raw(RawPayload(feed_id=TICK_FEED_ID, url="", status=0, body=None,
                                       fetched_at_ms=now_ms))
    recs = [KafkaRecord(topics.raw, key, value, now_ms, all_partitions=True, headers=headers_for("raw"))]
    if interactions:
        recs.append(KafkaRecord(topics.interactions, TICK_FEED_ID.encode(), orjson.dumps(interaction_heartbeat(now_ms)),
                                now_ms, all_partitions=True, headers=headers_for("interactions")))
    return PollEvent(TICK_FEED_ID, "tick", tuple(recs), now_ms)


__all__ = ["TICK_FEED_ID", "KafkaRecord", "PollEvent", "tick_event"]
