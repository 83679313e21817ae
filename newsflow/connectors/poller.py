"""The feed poller: schedules polls, fetches (``connectors.http_fetch``), applies the polling
rules (``newsflow.polling``) and turns every poll into Kafka records: the raw-payload envelope
on ``feeds.raw`` (key ``feed_id``; every poll: with its new body, or without one and the poll's
status) and one ``feed-health`` record (key ``poller:<feed_id>``) per poll, plus heartbeat ticks
to every partition of ``feeds.raw``.

Design: state across restarts
-----------------------------
The poller runs as a Bytewax dataflow (``flows/poller_flow.py``) whose input is
:class:`PollerSource`, a ``FixedPartitionedSource``. Feeds are spread over a fixed number of
source partitions by a stable hash (xxh3) of their *registrable domain*, so all feeds of one
domain live in one partition: the per-domain politeness state (shared backoff, concurrency) is
local to that partition and needs no coordination between workers. Each partition snapshots
``{"v": 1, "feeds": {feed_id: FeedState fields}, "domains": {...}}`` -- ETag, Last-Modified,
current URL, adaptive interval, next poll time, streaks, counters, 30-day buckets -- through
Bytewax recovery (SQLite files in the state directory, written at every epoch end). On restart
``build_part`` gets the last snapshot back and reconciles it with the registry (new feeds start
fresh, removed feeds are dropped, a feed whose registry URL changed starts over).

The snapshot only ever contains the state of polls whose records were already handed to the
dataflow (states of polls finished but not yet emitted are held back), so after a crash a poll
is either repeated or its records are in Kafka: at-least-once, like the rest of the pipeline.
Snapshots are plain dicts of plain values (not pickled classes), so adding a field to
:class:`~newsflow.polling.FeedState` does not break old state. Changing the number of source
partitions re-shards the feeds and therefore starts their state over (like changing a Kafka
topic's partition count); the default (4) allows up to 4 workers.

Broker outages: the sink (:class:`KafkaRecordSink`) returns a batch only once Kafka acknowledged
all of it, producing again what times out in the producer; the poller's one worker waits with
it, so no poll starts and no snapshot is taken until the broker is back, however long that
takes (``/healthz`` is 503 meanwhile, :data:`DELIVERY`). A stop while it waits ends the process
without a snapshot, so those polls are repeated.

Why not a JSON/SQLite state file of our own? Bytewax already gives atomic epoch snapshots that
are consistent with what the sink flushed; a separate file would need its own two-phase
commit with Kafka to get the same guarantee.

Concurrency: each Bytewax worker runs one asyncio loop shared by its partitions, in short slices
inside ``next_batch`` (never blocking the worker for long); a global semaphore caps concurrent
fetches per worker and a per-domain semaphore caps them per registrable domain.

Time: every timestamp (``fetched_at``, scheduling, Retry-After dates) comes from an injectable
``clock`` returning epoch milliseconds, so tests and replays are deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import orjson
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from newsflow.config import Settings, Topics
from newsflow.connectors.http_fetch import FetchConfig, HttpFetcher
from newsflow.connectors.topics import KafkaDeliveryFailed, producer_config
from newsflow.core.hashing import bytes_id, shard_of
from newsflow.feeds.urls import registrable_domain
from newsflow.model.records import RawPayload
from newsflow.polling.registry import FeedSpec
from newsflow.polling.rules import (
    conditional_headers,
    decide_poll,
    domain_backoff_remaining_ms,
    reliability_score,
    update_domain_backoff,
)
from newsflow.polling.safety import redact_message, redact_url
from newsflow.polling.state import (
    DomainState,
    FeedState,
    FetchKind,
    FetchOutcome,
    PollPolicy,
    evolve,
    reconcile_state,
)
from newsflow.wire.codec import encode_raw, health_key, interaction_heartbeat, poll_health_record
from newsflow.wire.contracts import headers_for

log = logging.getLogger("newsflow.poller")

Clock = Callable[[], int]
TICK_FEED_ID = "__tick__"
SNAPSHOT_VERSION = 1


def system_clock_ms() -> int:
    """Wall clock in epoch milliseconds (the default poller clock)."""
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PollerConfig:
    """Poller settings; built from the ``[poller]`` section of the configuration tree
    (:func:`poller_config`)."""

    topics: Topics = field(default_factory=Topics)
    #: concurrent fetches per worker
    concurrency: int = 50
    #: concurrent fetches per registrable domain
    per_domain_concurrency: int = 2
    #: Bytewax source partitions (feeds sharded by registrable domain); keep it stable
    partitions: int = 4
    #: heartbeat tick to every feeds.raw partition every N seconds (0: off)
    heartbeat_s: float = 1.0
    #: the heartbeat also goes to every ``interactions`` partition (profiles configured), so a
    #: quiet interactions topic does not hold the profiles' clock back
    interactions_heartbeat: bool = False
    #: bodies larger than this go to ``blob_dir`` (``body_ref``) instead of inline base64;
    #: 700 kB -> ~933 kB of base64, under Kafka's default 1 MB message limit
    max_inline_body_bytes: int = 700_000
    #: where bodies over the inline limit are stored; None: they are reported ``too_large``
    blob_dir: str | None = None
    #: a stored body expires this long after its last poll (poller clock; the flow must have read
    #: its feeds.raw record by then); expired files are swept at most once per blob_sweep_s
    blob_ttl_s: float = 7 * 86_400.0
    blob_sweep_s: float = 3_600.0
    #: longest a partition runs the shared event loop inside one ``next_batch`` (s)
    loop_slice_s: float = 0.05
    #: longest an idle partition sleeps before re-checking its schedule (s)
    idle_wakeup_s: float = 5.0
    fetch: FetchConfig = field(default_factory=FetchConfig)
    policy: PollPolicy = field(default_factory=PollPolicy)
    #: where ``newsflow poll --now FEED_ID`` leaves its requests (``<state dir>/requests``)
    requests_dir: str | None = None


def poller_config(settings: Settings) -> PollerConfig:
    """The poller's configuration from the ``[poller]`` section, with the configured topic names
    (and, with profiles configured, heartbeats to the ``interactions`` topic too)."""
    p = settings.poller
    d = p.model_dump(exclude={"fetch", "policy"})
    fetch: Any = p.fetch  # sections generated from the dataclasses (``newsflow.config.base.section_from``)
    policy: Any = p.policy
    return PollerConfig(topics=settings.kafka.topics, fetch=FetchConfig(**fetch.model_dump()),
                        policy=PollPolicy(**policy.model_dump()),
                        interactions_heartbeat=settings.profiles.configured, **d)


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# State (de)serialization: plain dicts, tolerant to added/removed fields
# --------------------------------------------------------------------------------------------

_FEED_FIELDS = tuple(f.name for f in fields(FeedState))
_DOMAIN_FIELDS = tuple(f.name for f in fields(DomainState))


def state_to_dict(s: FeedState) -> dict[str, Any]:
    return {n: getattr(s, n) for n in _FEED_FIELDS}


def state_from_dict(d: Mapping[str, Any]) -> FeedState | None:
    try:
        kw = {k: v for k, v in d.items() if k in _FEED_FIELDS}
        if "item_keys" in kw:
            kw["item_keys"] = frozenset(kw["item_keys"])
        if "daily" in kw:
            kw["daily"] = tuple(tuple(b) for b in kw["daily"])
        return FeedState(**kw)
    except TypeError:  # missing required fields: unusable, start over
        return None


def domain_to_dict(s: DomainState) -> dict[str, Any]:
    return {n: getattr(s, n) for n in _DOMAIN_FIELDS}


def domain_from_dict(d: Mapping[str, Any]) -> DomainState | None:
    try:
        return DomainState(**{k: v for k, v in d.items() if k in _DOMAIN_FIELDS})
    except TypeError:
        return None


def restore_snapshot(snap: Any) -> tuple[dict[str, FeedState], dict[str, DomainState]]:
    """Feed and domain states from a partition snapshot (unknown versions -> empty)."""
    if not isinstance(snap, dict) or snap.get("v") != SNAPSHOT_VERSION:
        return {}, {}
    feeds = {fid: st for fid, d in (snap.get("feeds") or {}).items()
             if (st := state_from_dict(d)) is not None}
    domains = {dom: ds for dom, d in (snap.get("domains") or {}).items()
               if (ds := domain_from_dict(d)) is not None}
    return feeds, domains


# --------------------------------------------------------------------------------------------
# One poller per state directory; "poll this feed now" requests
# --------------------------------------------------------------------------------------------

LOCK_FILE = "poller.lock"
REQUESTS_DIR = "requests"


class StateDirLocked(RuntimeError):
    """Another poller holds the state directory's lock."""

    def __init__(self, state_dir: str | Path, pid: int | str) -> None:
        super().__init__(f"another poller (pid {pid}) is using the state directory {state_dir}; stop it "
                         "first, or give this one its own --state-dir")


def state_dir_owner(state_dir: str | Path) -> int | None:
    """The pid of the poller holding ``state_dir``'s lock (0 if it wrote none yet); None: free."""
    import fcntl

    path = Path(state_dir) / LOCK_FILE
    if not path.exists():
        return None
    with path.open("a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            text = f.read().strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(f, fcntl.LOCK_UN)
        return None


@contextlib.contextmanager
def locked_state_dir(state_dir: str | Path) -> Iterator[None]:
    """Hold ``state_dir``'s lock (``flock`` on ``poller.lock``, released by the kernel when the
    process ends, however it ends): two pollers on one state directory would each snapshot
    their own epochs into the same recovery files and leave them unusable."""
    import fcntl

    d = Path(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    f = (d / LOCK_FILE).open("a+")
    try:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            raise StateDirLocked(d, f.read().strip() or "?") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        yield
    finally:
        f.close()


def request_poll_now(state_dir: str | Path, feed_id: str) -> Path:
    """Ask the poller running on ``state_dir`` to poll ``feed_id`` now (a request file it picks
    up within a second); returns the file."""
    d = Path(state_dir) / REQUESTS_DIR
    d.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns()}-{os.getpid()}"
    tmp = d / f".{name}.tmp"
    tmp.write_text(feed_id, encoding="utf-8")
    final = d / f"{name}.now"
    tmp.replace(final)  # atomic: the poller never reads half a request
    return final


class NowRequests:
    """The ``--now`` requests of one requests directory, read at most every ``every_s``;
    each partition takes the ones for its own feeds (a process-wide instance per directory)."""

    _by_dir: ClassVar[dict[str, NowRequests]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, directory: str, every_s: float = 0.5) -> None:
        self.directory = Path(directory)
        self.every_s = every_s
        self.pending: set[str] = set()
        self._next = 0.0

    @classmethod
    def of(cls, directory: str) -> NowRequests:
        with cls._lock:
            inst = cls._by_dir.get(directory)
            if inst is None:
                inst = cls._by_dir[directory] = cls(directory)
            return inst

    def take(self, feed_ids: Mapping[str, Any]) -> list[str]:
        """The requested feeds among ``feed_ids`` (each handed out once)."""
        with self._lock:
            mono = time.monotonic()
            if mono >= self._next:
                self._next = mono + self.every_s
                for path in sorted(self.directory.glob("*.now")):
                    with contextlib.suppress(OSError):
                        self.pending.add(path.read_text(encoding="utf-8").strip())
                        path.unlink()
            mine = sorted(f for f in self.pending if f in feed_ids)
            self.pending.difference_update(mine)
            return mine


# --------------------------------------------------------------------------------------------
# The engine (asyncio; usable without Bytewax)
# --------------------------------------------------------------------------------------------


def feed_partition(feed: FeedSpec, partitions: int) -> int:
    """Source partition of a feed: stable hash of its registry URL's registrable domain."""
    return shard_of(registrable_domain(feed.url) or feed.id, max(partitions, 1))


class PollEngine:
    """Polls a set of feeds with per-feed state and per-domain politeness.

    ``poll_feed`` never raises for network trouble; ``states``/``domains`` always hold the
    latest state (the Bytewax partition decides what gets snapshotted).
    """

    def __init__(
        self,
        feeds: Iterable[FeedSpec],
        config: PollerConfig | None = None,
        *,
        clock: Clock = system_clock_ms,
        fetcher: HttpFetcher | None = None,
        states: Mapping[str, FeedState] | None = None,
        domains: Mapping[str, DomainState] | None = None,
        semaphore: asyncio.Semaphore | None = None,
    ) -> None:
        self.config = config or PollerConfig()
        self.policy = self.config.policy
        self.clock = clock
        self._own_fetcher = fetcher is None
        self.fetcher = fetcher or HttpFetcher(self.config.fetch, policy=self.policy)
        now = clock()
        saved = states or {}
        self.feeds: dict[str, FeedSpec] = {}
        self.states: dict[str, FeedState] = {}
        for f in feeds:
            self.feeds[f.id] = f
            self.states[f.id] = reconcile_state(saved.get(f.id), f.id, f.url, interval_s=f.interval_s,
                                                feed_type=f.feed_type, policy=self.policy, now_ms=now)
        self.domains: dict[str, DomainState] = dict(domains or {})
        self.in_flight: set[str] = set()
        self._sem = semaphore
        self._domain_sems: dict[str, asyncio.Semaphore] = {}
        self._last_blob_sweep_ms = -(2**62)

    # -- scheduling ------------------------------------------------------------------------
    def domain_of(self, feed_id: str) -> str:
        return registrable_domain(self.states[feed_id].url) or feed_id

    def due(self, now_ms: int, *, force: bool = False) -> list[FeedSpec]:
        """Feeds to poll now (``force``: ignore their schedule, not their domain's backoff)."""
        out: list[tuple[int, str]] = []
        for fid, st in self.states.items():
            if fid in self.in_flight or st.dead or st.next_poll_ms is None:
                continue
            if not force and st.next_poll_ms > now_ms:
                continue
            if domain_backoff_remaining_ms(self.domains.get(self.domain_of(fid)), now_ms) > 0:
                continue
            out.append((st.next_poll_ms, fid))
        out.sort()
        return [self.feeds[fid] for _, fid in out]

    def poll_now(self, feed_id: str, now_ms: int) -> bool:
        """Make ``feed_id`` due now (also a dead one: the operator asked); False if unknown or
        already being polled."""
        st = self.states.get(feed_id)
        if st is None or feed_id in self.in_flight:
            return False
        self.states[feed_id] = evolve(st, next_poll_ms=now_ms, dead=False)
        return True

    def next_wakeup_ms(self) -> int | None:
        """Earliest time a feed may become due (respecting domain backoff); None: never."""
        best: int | None = None
        for fid, st in self.states.items():
            if fid in self.in_flight or st.dead or st.next_poll_ms is None:
                continue
            d = self.domains.get(self.domain_of(fid))
            t = max(st.next_poll_ms, d.backoff_until_ms if d else 0)
            best = t if best is None else min(best, t)
        return best

    # -- polling ---------------------------------------------------------------------------
    def _global_sem(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.config.concurrency)
        return self._sem

    def _domain_sem(self, domain: str) -> asyncio.Semaphore:
        sem = self._domain_sems.get(domain)
        if sem is None:
            sem = self._domain_sems[domain] = asyncio.Semaphore(self.config.per_domain_concurrency)
        return sem

    async def poll_feed(self, feed: FeedSpec) -> PollEvent:
        fid = feed.id
        self.in_flight.add(fid)
        try:
            async with self._global_sem():
                dom = self.domain_of(fid)
                async with self._domain_sem(dom):
                    now = self.clock()
                    if domain_backoff_remaining_ms(self.domains.get(dom), now) > 0:
                        return PollEvent(fid, "deferred", (), now)
                    state = self.states[fid]
                    try:
                        outcome = await self.fetcher.fetch(state.url, conditional_headers(state),
                                                           auth_url=feed.url)
                    except Exception as e:  # the fetcher should not raise; never let one feed
                        log.exception("fetch of %s failed unexpectedly", fid)  # stop the others
                        outcome = FetchOutcome(FetchKind.PROTOCOL_ERROR, redact_url(state.url),
                                               error=f"unexpected {type(e).__name__}")
                    return self.apply(feed, state, outcome, self.clock(), dom)
        finally:
            self.in_flight.discard(fid)

    def _store_blob(self, body: bytes, now_ms: int) -> str:
        assert self.config.blob_dir is not None
        h = bytes_id(body, 16)
        path = Path(self.config.blob_dir) / h[:2] / h
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_bytes(body)
            tmp.replace(path)
        with contextlib.suppress(OSError):  # the mtime is the poll time: a re-served body stays
            os.utime(path, (now_ms / 1000, now_ms / 1000))
        return path.resolve().as_uri()

    def expire_blobs(self, now_ms: int) -> int:
        """Delete stored bodies (and leftover temp files) not polled for ``blob_ttl_s``."""
        if self.config.blob_dir is None:
            return 0
        self._last_blob_sweep_ms = now_ms
        horizon = now_ms / 1000 - self.config.blob_ttl_s
        removed = 0
        for path in Path(self.config.blob_dir).glob("*/*"):
            try:
                if path.is_file() and not path.is_symlink() and path.stat().st_mtime < horizon:
                    path.unlink()
                    removed += 1
            except OSError:  # another worker removed it first
                continue
        return removed

    def apply(self, feed: FeedSpec, state: FeedState, outcome: FetchOutcome, now_ms: int,
              domain: str) -> PollEvent:
        """Decide (pure rules), update state, build the records of one poll."""
        if (self.config.blob_dir is not None
                and now_ms - self._last_blob_sweep_ms >= self.config.blob_sweep_s * 1000):
            self.expire_blobs(now_ms)
        body_ref: str | None = None
        body = outcome.body
        limit = self.config.max_inline_body_bytes
        if body is not None and len(body) > limit and self.config.blob_dir is None:
            outcome = replace(outcome, kind=FetchKind.TOO_LARGE, body=None,
                              error=f"body of {len(body)} bytes over the inline limit of "
                                    f"{limit} and no blob_dir")
        verdict = decide_poll(state, outcome, now_ms, self.policy)
        self.states[feed.id] = verdict.state
        dstate = self.domains.get(domain) or DomainState(domain)
        self.domains[domain] = update_domain_backoff(
            dstate, rate_limited=verdict.rate_limited, retry_after_s=verdict.retry_after_s,
            server_trouble=verdict.server_trouble, success=verdict.success, now_ms=now_ms,
            policy=self.policy)
        records: list[KafkaRecord] = []
        topics = self.config.topics
        with_body = verdict.emit_body and outcome.body is not None
        inline: bytes | None = outcome.body if with_body else None
        if inline is not None and len(inline) > self.config.max_inline_body_bytes:
            body_ref, inline = self._store_blob(inline, now_ms), None
        h = outcome.headers
        # every poll reaches the flow: one without a body (failed, refused, unchanged) says
        # how it went in poll_status / error, so the flow's feed health counts it
        raw = RawPayload(
            feed_id=feed.id,
            url=redact_url(state.url),
            fetched_at_ms=now_ms,
            status=outcome.status or 0,
            body=inline,
            etag=h.get("etag"),
            last_modified=h.get("last-modified"),
            content_type=h.get("content-type"),
            final_url=outcome.final_url,
            publisher=feed.publisher,
            tier=feed.tier,
            category=feed.category,
            language=feed.language,
            body_ref=body_ref,
            # 30-day poll success ratio: the flow's authority score multiplies by it
            reliability=reliability_score(verdict.state.daily, now_ms,
                                          self.policy.reliability_window_days),
            poll_status=None if with_body else str(verdict.status),
            error=None if with_body else _poll_error(verdict.message or outcome.error, verdict.alerts, outcome.status),
        )
        key, value = encode_raw(raw)
        records.append(KafkaRecord(topics.raw, key, value, now_ms, headers=headers_for("raw")))
        health = poll_health_record(verdict, outcome, now_ms, self.policy, domain=domain)
        records.append(KafkaRecord(topics.feed_health, health_key("poller", feed.id), orjson.dumps(health), now_ms,
                                   headers=headers_for("feed_health")))
        if verdict.alerts:
            log.warning("feed %s: %s", feed.id, health["alert"])
        return PollEvent(feed.id, verdict.status, tuple(records), now_ms, alert=health["alert"],
                         http_status=outcome.status, response_ms=health["response_ms"])

    async def poll_round(self, *, force: bool = False) -> list[PollEvent]:
        """Poll every due feed once, concurrently (bounded); returns the events in feed order."""
        due = self.due(self.clock(), force=force)
        return list(await asyncio.gather(*(self.poll_feed(f) for f in due)))

    async def aclose(self) -> None:
        if self._own_fetcher:
            await self.fetcher.aclose()


def _poll_error(message: str | None, alerts: Sequence[str], status: int | None) -> str | None:
    """What went wrong with a poll sent without a body (redacted); None when nothing did."""
    text = message or "; ".join(alerts) or (f"HTTP {status}" if status is not None and status >= 400 else None)
    return redact_message(text)


# --------------------------------------------------------------------------------------------
# Bytewax source: per-worker event loop, partitions, heartbeat
# --------------------------------------------------------------------------------------------

FetcherFactory = Callable[[PollerConfig], HttpFetcher]
_worker_local = threading.local()


class _WorkerLoop:
    """One asyncio loop + fetcher + concurrency semaphore per Bytewax worker thread, shared by
    that worker's partitions (each runs the loop in short slices inside ``next_batch``)."""

    def __init__(self, config: PollerConfig, fetcher_factory: FetcherFactory | None) -> None:
        self.loop = asyncio.new_event_loop()
        self.fetcher = (fetcher_factory or (lambda c: HttpFetcher(c.fetch, policy=c.policy)))(config)
        self.semaphore = asyncio.Semaphore(config.concurrency)
        self.users = 0

    @classmethod
    def acquire(cls, config: PollerConfig, fetcher_factory: FetcherFactory | None) -> _WorkerLoop:
        wl: _WorkerLoop | None = getattr(_worker_local, "loop", None)
        if wl is None or wl.loop.is_closed():
            wl = cls(config, fetcher_factory)
            _worker_local.loop = wl
        wl.users += 1
        return wl

    def release(self) -> None:
        self.users -= 1
        if self.users <= 0:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(self.fetcher.aclose())
            self.loop.close()
            if getattr(_worker_local, "loop", None) is self:
                _worker_local.loop = None


#: with a stop event, an idle source looks at it this often (ms): Ctrl-C ends the poller this fast
STOP_CHECK_MS = 500


class _PollerPartition(StatefulSourcePartition[PollEvent, dict[str, Any]]):
    def __init__(
        self,
        feeds: Sequence[FeedSpec],
        resume_state: Any,
        config: PollerConfig,
        *,
        clock: Clock,
        once: bool,
        force: bool,
        final_tick: bool,
        fetcher_factory: FetcherFactory | None,
        stop: threading.Event | None = None,
    ) -> None:
        self._config = config
        self._stop = stop
        self._clock = clock
        self._once = once
        self._force = force
        self._final_tick = final_tick
        self._wl = _WorkerLoop.acquire(config, fetcher_factory)
        states, domains = restore_snapshot(resume_state)
        self._engine = PollEngine(feeds, config, clock=clock, fetcher=self._wl.fetcher,
                                  states=states, domains=domains, semaphore=self._wl.semaphore)
        # what the last snapshot may contain: states whose records were already emitted
        self._emitted: dict[str, dict[str, Any]] = {
            fid: state_to_dict(st) for fid, st in self._engine.states.items()}
        self._tasks: set[asyncio.Task[PollEvent]] = set()
        self._started = False
        self._done = False
        self._requests = NowRequests.of(config.requests_dir) if config.requests_dir and not once else None

    def _start(self, feeds: Iterable[FeedSpec]) -> None:
        for f in feeds:
            self._tasks.add(self._wl.loop.create_task(self._engine.poll_feed(f)))

    def next_batch(self) -> list[PollEvent]:
        if self._done:
            raise StopIteration
        if self._stop is not None and self._stop.is_set():
            # Ctrl-C / SIGTERM: end the source so Bytewax finishes the epoch and snapshots;
            # polls still in flight are not in the snapshot and are repeated after a restart
            self._cancel_tasks()
            self._done = True
            raise StopIteration
        now = self._clock()
        if self._once:
            if not self._started:
                self._start(self._engine.due(now, force=self._force))
        else:
            if self._requests is not None:
                for fid in self._requests.take(self._engine.states):
                    if self._engine.poll_now(fid, now):
                        log.info("polling %s now, as asked", fid)
            self._start(self._engine.due(now))
        self._started = True
        if self._tasks:
            self._wl.loop.run_until_complete(asyncio.wait(
                self._tasks, timeout=self._config.loop_slice_s, return_when=asyncio.FIRST_COMPLETED))
        events: list[PollEvent] = []
        for t in [t for t in self._tasks if t.done()]:
            self._tasks.discard(t)
            ev = t.result()
            st = self._engine.states.get(ev.feed_id)
            if st is not None:
                self._emitted[ev.feed_id] = state_to_dict(st)
            if ev.status != "deferred":
                events.append(ev)
        if self._once and not self._tasks:
            self._done = True
            if self._final_tick:
                events.append(tick_event(self._clock(), self._config.topics,
                                         interactions=self._config.interactions_heartbeat))
            if not events:
                raise StopIteration
        return events

    def next_awake(self) -> datetime | None:
        if self._done or self._tasks or self._once:
            return None
        nxt = self._engine.next_wakeup_ms()
        idle_ms = self._config.idle_wakeup_s * 1000
        delay_ms = idle_ms if nxt is None else min(max(0, nxt - self._clock()), idle_ms)
        if self._stop is not None:
            delay_ms = min(delay_ms, STOP_CHECK_MS)
        if self._requests is not None:  # a --now request is answered within a second
            delay_ms = min(delay_ms, self._requests.every_s * 1000)
        return datetime.now(UTC) + timedelta(milliseconds=delay_ms)

    def snapshot(self) -> dict[str, Any]:
        return {
            "v": SNAPSHOT_VERSION,
            "feeds": dict(self._emitted),
            "domains": {d: domain_to_dict(s) for d, s in self._engine.domains.items()},
        }

    def _cancel_tasks(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            with contextlib.suppress(Exception):
                self._wl.loop.run_until_complete(asyncio.wait(self._tasks, timeout=1.0))
        self._tasks.clear()

    def close(self) -> None:
        self._cancel_tasks()
        self._wl.release()


class PollerSource(FixedPartitionedSource[PollEvent, dict[str, Any]]):
    """Feeds sharded by registrable domain into ``config.partitions`` partitions.

    ``once``: poll every due feed (all of them with ``force``) once, then end; partition 0
    ends with a heartbeat tick. Otherwise poll forever on each feed's schedule.
    """

    def __init__(
        self,
        feeds: Sequence[FeedSpec],
        config: PollerConfig | None = None,
        *,
        clock: Clock = system_clock_ms,
        once: bool = False,
        force: bool = False,
        fetcher_factory: FetcherFactory | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.stop = stop
        self.feeds = list(feeds)
        self.config = config or PollerConfig()
        self.clock = clock
        self.once = once
        self.force = force
        self.fetcher_factory = fetcher_factory

    def list_parts(self) -> list[str]:
        return [f"feeds-{i}" for i in range(self.config.partitions)]

    def build_part(self, step_id: str, for_part: str, resume_state: Any) -> _PollerPartition:
        i = int(for_part.rsplit("-", 1)[1])
        mine = [f for f in self.feeds if feed_partition(f, self.config.partitions) == i]
        return _PollerPartition(mine, resume_state, self.config, clock=self.clock, once=self.once,
                                force=self.force,
                                final_tick=self.once and i == 0 and self.config.heartbeat_s > 0,
                                fetcher_factory=self.fetcher_factory, stop=self.stop)


class _HeartbeatPartition(StatefulSourcePartition[PollEvent, None]):
    def __init__(self, interval_s: float, clock: Clock, topics: Topics,
                 stop: threading.Event | None = None, interactions: bool = False) -> None:
        self._interval = interval_s
        self._clock = clock
        self._topics = topics
        self._interactions = interactions
        self._stop = stop
        self._next = time.monotonic()

    def next_batch(self) -> list[PollEvent]:
        if self._stop is not None and self._stop.is_set():
            raise StopIteration
        mono = time.monotonic()
        if mono < self._next:
            return []
        self._next = mono + self._interval
        return [tick_event(self._clock(), self._topics, interactions=self._interactions)]

    def next_awake(self) -> datetime | None:
        delay = max(0.0, self._next - time.monotonic())
        if self._stop is not None:
            delay = min(delay, STOP_CHECK_MS / 1000)
        return datetime.now(UTC) + timedelta(seconds=delay)

    def snapshot(self) -> None:
        return None


class HeartbeatSource(FixedPartitionedSource[PollEvent, None]):
    """One tick every ``interval_s`` (system time) stamped with the poller clock."""

    def __init__(self, interval_s: float, *, clock: Clock = system_clock_ms,
                 topics: Topics | None = None, stop: threading.Event | None = None,
                 interactions: bool = False) -> None:
        self.stop = stop
        self.interval_s = interval_s
        self.clock = clock
        self.topics = topics or Topics()
        self.interactions = interactions

    def list_parts(self) -> list[str]:
        return ["heartbeat"]

    def build_part(self, step_id: str, for_part: str, resume_state: Any) -> _HeartbeatPartition:
        return _HeartbeatPartition(self.interval_s, self.clock, self.topics, self.stop, self.interactions)


# --------------------------------------------------------------------------------------------
# Kafka sink (confluent_kafka): any topic, explicit partitions, fan-out for ticks
# --------------------------------------------------------------------------------------------

#: a batch not delivered after this long makes ``/healthz`` unhealthy (s)
DELIVERY_GRACE_S = 5.0
#: longest one ``flush`` waits before the sink looks at its state and the stop event again (s)
FLUSH_SLICE_S = 1.0


class DeliveryStatus:
    """Whether the poller's records reach Kafka, for ``/healthz`` (process-wide: one poller
    per process). Written by the sink's thread, read by the health server's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting = 0
        self.since: float | None = None  # monotonic time the oldest waiting batch was produced
        self.last_error: str | None = None
        self.outages = 0
        self.redelivered = 0

    def begin(self, n: int) -> None:
        with self._lock:
            self.waiting = n
            if self.since is None:
                self.since = time.monotonic()

    def left(self, n: int) -> None:
        with self._lock:
            self.waiting = n

    def error(self, text: str) -> None:
        with self._lock:
            self.last_error = text

    def delivered(self) -> float:
        """The batch is delivered; returns how long it waited (s)."""
        with self._lock:
            took = 0.0 if self.since is None else time.monotonic() - self.since
            self.waiting, self.since = 0, None
            if took >= DELIVERY_GRACE_S:
                self.outages += 1
            return took

    def blocked_s(self) -> float:
        with self._lock:
            return 0.0 if self.since is None else time.monotonic() - self.since

    def health(self) -> dict[str, Any]:
        """``kafka_delivery`` for ``/healthz``; ``unhealthy`` (the reason) while a batch has
        waited longer than :data:`DELIVERY_GRACE_S`."""
        with self._lock:
            blocked = 0.0 if self.since is None else time.monotonic() - self.since
            out: dict[str, Any] = {"kafka_delivery": {
                "waiting_records": self.waiting, "blocked_s": round(blocked, 1),
                "last_error": self.last_error, "outages": self.outages,
                "redelivered_records": self.redelivered}}
            if blocked >= DELIVERY_GRACE_S:
                out["unhealthy"] = (f"Kafka has not acknowledged {self.waiting} records for {blocked:.0f} s"
                                    f" ({self.last_error or 'no answer'}); polling is paused until it does")
            return out


DELIVERY = DeliveryStatus()


#: delivery errors that mean "not delivered yet" (broker away, leader moving, local timeout):
#: the record is produced again; any other error is a defect of the record or the set-up
_RETRY_CODES = frozenset({"_MSG_TIMED_OUT", "_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN",
                          "REQUEST_TIMED_OUT", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE",
                          "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "_PURGE_QUEUE",
                          "_PURGE_INFLIGHT", "NETWORK_EXCEPTION", "BROKER_NOT_AVAILABLE",
                          "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART"})


class _KafkaRecordPartition(StatelessSinkPartition[KafkaRecord]):
    """Produces each batch and returns only once Kafka acknowledged every record of it, for
    however long that takes: while it waits the poller's only worker waits with it, so no new
    poll starts and no snapshot is taken (the state of a poll is saved only after its records
    are in Kafka). Records that time out in the producer are produced again, in order."""

    def __init__(self, brokers: Sequence[str], add_config: Mapping[str, Any] | None,
                 stop: threading.Event | None = None, status: DeliveryStatus = DELIVERY) -> None:
        from confluent_kafka import Producer

        self._status = status
        self._stop = stop
        self._fatal: str | None = None
        user_error_cb = (add_config or {}).get("error_cb")

        def on_error(err: Any) -> None:
            status.error(err.str())
            if err.fatal():
                self._fatal = err.str()
            if user_error_cb is not None:
                user_error_cb(err)

        conf = {**producer_config(brokers, add_config), "error_cb": on_error}
        self._p = Producer(conf)
        self._parts: dict[str, tuple[float, int]] = {}

    def _partition_count(self, topic: str) -> int:
        from confluent_kafka import KafkaException

        cached = self._parts.get(topic)
        if cached and cached[0] > time.monotonic():
            return cached[1]
        while True:
            try:
                md = self._p.list_topics(topic, timeout=10)
                break
            except KafkaException as e:  # broker away: the last count known, or wait for one
                if cached:
                    return cached[1]
                self._status.begin(0)
                self._status.error(str(e.args[0]) if e.args else str(e))
                self._check_stop(0)
        t = md.topics.get(topic)
        n = len(t.partitions) if t is not None and t.error is None and t.partitions else 1
        self._parts[topic] = (time.monotonic() + 60.0, n)
        return n

    def _produce(self, i: int, r: KafkaRecord, partition: int | None, failed: list[tuple[int, Any]]) -> None:
        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append((i, err))

        kw: dict[str, Any] = {"key": r.key, "value": r.value, "timestamp": r.timestamp_ms,
                              "on_delivery": on_delivery}
        if partition is not None:
            kw["partition"] = partition
        if r.headers:
            kw["headers"] = list(r.headers)
        while True:
            try:
                self._p.produce(r.topic, **kw)
                return
            except BufferError:  # local queue full (Bytewax #522): let it drain
                self._p.poll(0.1)

    def _check_stop(self, waiting: int) -> None:
        """Ctrl-C / SIGTERM while Kafka has not acknowledged the batch: the process ends here,
        at once, with one line and exit 0. The epoch is not committed, so the saved state is
        the last snapshot's, without these polls: the next start polls those feeds again.
        (Raising instead would go through Bytewax as a panic and two tracebacks; letting the
        epoch end would save the state of polls whose records are not in Kafka.)"""
        if self._stop is not None and self._stop.is_set():
            from newsflow.connectors.observability import exit_now

            exit_now(f"stopped while Kafka had not acknowledged {waiting} records; their polls are not "
                     "in the saved state and are polled again on the next start")

    def write_batch(self, items: list[KafkaRecord]) -> None:
        todo: list[tuple[KafkaRecord, int | None]] = []
        for r in items:
            if r.all_partitions:
                todo.extend((r, part) for part in range(self._partition_count(r.topic)))
            else:
                todo.append((r, r.partition))
        self._deliver(todo)

    def _deliver(self, todo: list[tuple[KafkaRecord, int | None]]) -> None:
        status = self._status
        status.begin(len(todo))
        warned = False
        while todo:
            failed: list[tuple[int, Any]] = []
            for i, (r, part) in enumerate(todo):
                self._produce(i, r, part, failed)
                self._p.poll(0)
            while (left := self._p.flush(FLUSH_SLICE_S)) > 0:
                status.left(left)
                if self._fatal:
                    break
                if not warned and status.blocked_s() >= DELIVERY_GRACE_S:
                    warned = True
                    log.warning("Kafka has not acknowledged %d records for %.0f s; polling is paused "
                                "until it does", left, status.blocked_s())
                self._check_stop(left)
            if self._fatal:
                msg = f"Kafka producer failed: {self._fatal}"
                raise KafkaDeliveryFailed(msg)
            refused = [(i, err) for i, err in failed if err.name() not in _RETRY_CODES]
            if refused:
                i, err = refused[0]
                msg = f"Kafka refused {len(refused)} records ({todo[i][0].topic}: {err.str()})"
                raise KafkaDeliveryFailed(msg)
            if failed:  # timed out in the producer: produce them again, in their order
                failed.sort(key=lambda f: f[0])
                status.error(failed[0][1].str())
                status.redelivered += len(failed)
                status.left(len(failed))
                self._check_stop(len(failed))
            todo = [todo[i] for i, _ in failed]
        took = status.delivered()
        if warned:
            log.warning("Kafka acknowledged the waiting records after %.0f s; polling resumes", took)

    def close(self) -> None:
        self._p.flush(30)


class KafkaRecordSink(DynamicSink[KafkaRecord]):
    """Produces :class:`KafkaRecord` values with confluent_kafka; a batch is written only once
    Kafka acknowledged all of it (see :class:`_KafkaRecordPartition`); ``stop`` set while it
    waits ends the process without saving the waiting polls' state."""

    def __init__(self, brokers: Sequence[str], add_config: Mapping[str, Any] | None = None,
                 stop: threading.Event | None = None) -> None:
        self.brokers = list(brokers)
        self.add_config = dict(add_config or {})
        self.stop = stop

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _KafkaRecordPartition:
        return _KafkaRecordPartition(self.brokers, self.add_config, self.stop)


__all__ = [
    "DELIVERY",
    "TICK_FEED_ID",
    "Clock",
    "DeliveryStatus",
    "HeartbeatSource",
    "KafkaRecord",
    "KafkaRecordSink",
    "NowRequests",
    "PollEngine",
    "PollEvent",
    "PollerConfig",
    "PollerSource",
    "StateDirLocked",
    "feed_partition",
    "locked_state_dir",
    "request_poll_now",
    "restore_snapshot",
    "state_dir_owner",
    "state_from_dict",
    "state_to_dict",
    "system_clock_ms",
    "tick_event",
]
