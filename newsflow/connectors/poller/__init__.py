"""The feed poller: schedules polls, fetches (``connectors.http_fetch``), applies the polling
rules (``newsflow.polling``) and turns every poll into Kafka records: the raw-payload envelope
on ``feeds.raw`` (key ``feed_id``; every poll: with its new body, or without one and the poll's
status) and one ``feed-health`` record (key ``poller:<feed_id>``) per poll, plus heartbeat ticks
to every partition of ``feeds.raw``.

Design: state across restarts
-----------------------------
The poller runs as a Bytewax dataflow (``flows/poller.py``) whose input is
:class:`~newsflow.connectors.poller.sources.PollerSource`, a ``FixedPartitionedSource``. Feeds
are spread over a fixed number of source partitions by a stable hash (xxh3) of their
*registrable domain*, so all feeds of one domain live in one partition: the per-domain
politeness state (shared backoff, concurrency) is local to that partition and needs no
coordination between workers. Each partition snapshots ``{"v": 1, "feeds": {feed_id: FeedState
fields}, "domains": {...}}`` -- ETag, Last-Modified, current URL, adaptive interval, next poll
time, streaks, counters, 30-day buckets -- through Bytewax recovery (SQLite files in the state
directory, written at every epoch end). On restart ``build_part`` gets the last snapshot back
and reconciles it with the registry (new feeds start fresh, removed feeds are dropped, a feed
whose registry URL changed starts over).

The snapshot only ever contains the state of polls whose records were already handed to the
dataflow (states of polls finished but not yet emitted are held back), so after a crash a poll
is either repeated or its records are in Kafka: at-least-once, like the rest of the pipeline.
Snapshots are plain dicts of plain values (not pickled classes), so adding a field to
:class:`~newsflow.polling.FeedState` does not break old state. Changing the number of source
partitions re-shards the feeds and therefore starts their state over (like changing a Kafka
topic's partition count); the default (4) allows up to 4 workers.

Broker outages: the sink (:class:`~newsflow.connectors.poller.sink.KafkaRecordSink`) returns a
batch only once Kafka acknowledged all of it, producing again what times out in the producer;
the poller's one worker waits with it, so no poll starts and no snapshot is taken until the
broker is back, however long that takes (``/healthz`` is 503 meanwhile,
:data:`~newsflow.connectors.poller.sink.DELIVERY`). A stop while it waits ends the process
without a snapshot, so those polls are repeated.

Why not a JSON/SQLite state file of our own? Bytewax already gives atomic epoch snapshots that
are consistent with what the sink flushed; a separate file would need its own two-phase commit
with Kafka to get the same guarantee.

Concurrency: each Bytewax worker runs one asyncio loop shared by its partitions, in short slices
inside ``next_batch`` (never blocking the worker for long); a global semaphore caps concurrent
fetches per worker and a per-domain semaphore caps them per registrable domain.

Time: every timestamp (``fetched_at``, scheduling, Retry-After dates) comes from an injectable
``clock`` returning epoch milliseconds, so tests and replays are deterministic.
"""
