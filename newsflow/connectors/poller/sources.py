"""The poller's Bytewax sources: the feeds' partitions (one asyncio loop per worker) and the
heartbeat."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from newsflow.config import Topics
from newsflow.connectors.http_fetch import HttpFetcher
from newsflow.connectors.poller.config import Clock, PollerConfig, system_clock_ms
from newsflow.connectors.poller.engine import PollEngine, feed_partition
from newsflow.connectors.poller.records import PollEvent, tick_event
from newsflow.connectors.poller.snapshot import (
    SNAPSHOT_VERSION,
    domain_to_dict,
    restore_snapshot,
    state_to_dict,
)
from newsflow.connectors.poller.state_dir import NowRequests
from newsflow.polling.registry import FeedSpec

log = logging.getLogger("newsflow.poller")

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


__all__ = ["STOP_CHECK_MS", "FetcherFactory", "HeartbeatSource", "PollerSource"]
