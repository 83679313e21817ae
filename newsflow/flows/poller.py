"""The poller as a Bytewax dataflow: registry feeds -> polls -> ``feeds.raw`` + ``feed-health``.

::

    poll (PollerSource, partitioned by registrable domain, state in recovery snapshots)
      + heartbeat (HeartbeatSource, continuous mode only)
      -> progress (inspect, optional)
      -> records (flat_map: PollEvent -> KafkaRecords)
      -> kafka (KafkaRecordSink: feeds.raw key feed_id, feed-health key poller:<feed_id>, ticks to all
         partitions of feeds.raw)

Step ids are constants: recovery state is keyed by them (renaming ``poll`` orphans the state).
See ``connectors/poller/__init__.py`` for the state-across-restarts design.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.outputs import Sink

from newsflow.connectors.poller.config import Clock, PollerConfig, system_clock_ms
from newsflow.connectors.poller.records import KafkaRecord, PollEvent
from newsflow.connectors.poller.sink import KafkaRecordSink
from newsflow.connectors.poller.sources import FetcherFactory, HeartbeatSource, PollerSource
from newsflow.connectors.poller.state_dir import REQUESTS_DIR, locked_state_dir
from newsflow.polling.registry import FeedSpec

FLOW_ID = "newsflow-poller"
STEP_POLL = "poll"
STEP_HEARTBEAT = "heartbeat"
STEP_MERGE = "merge"
STEP_PROGRESS = "progress"
STEP_RECORDS = "records"
STEP_OUT = "kafka"


def _records(ev: PollEvent) -> Sequence[KafkaRecord]:
    return ev.records


def build_poller_flow(
    feeds: Sequence[FeedSpec],
    config: PollerConfig,
    sink: Sink[KafkaRecord],
    *,
    clock: Clock = system_clock_ms,
    once: bool = False,
    force: bool = False,
    progress: Callable[[PollEvent], None] | None = None,
    fetcher_factory: FetcherFactory | None = None,
    stop: threading.Event | None = None,
) -> Dataflow:
    """The poller dataflow; setting ``stop`` ends its sources, so the flow finishes cleanly."""
    flow = Dataflow(FLOW_ID)
    events = op.input(STEP_POLL, flow, PollerSource(feeds, config, clock=clock, once=once,
                                                      force=force, fetcher_factory=fetcher_factory,
                                                      stop=stop))
    if not once and config.heartbeat_s > 0:
        ticks = op.input(STEP_HEARTBEAT, flow, HeartbeatSource(config.heartbeat_s, clock=clock, topics=config.topics,
                                                               stop=stop, interactions=config.interactions_heartbeat))
        events = op.merge(STEP_MERGE, events, ticks)
    if progress is not None:
        cb = progress
        op.inspect(STEP_PROGRESS, events, lambda _step, ev: cb(ev))
    records = op.flat_map(STEP_RECORDS, events, _records)
    op.output(STEP_OUT, records, sink)
    return flow


def run_poller_flow(
    feeds: Sequence[FeedSpec],
    config: PollerConfig,
    brokers: Sequence[str],
    *,
    state_dir: str | Path | None,
    once: bool = False,
    force: bool = False,
    clock: Clock = system_clock_ms,
    progress: Callable[[PollEvent], None] | None = None,
    snapshot_s: float = 5.0,
    sink: Sink[KafkaRecord] | None = None,
    producer_config: dict[str, Any] | None = None,
    fetcher_factory: FetcherFactory | None = None,
) -> None:
    """Run the poller in this process (one worker) until done (``once``) or interrupted.

    With ``state_dir`` the per-feed state is recovered from and snapshotted to Bytewax recovery
    files there (created on first use), under a lock: a second poller on the same directory
    raises :class:`~newsflow.connectors.poller.state_dir.StateDirLocked` before it touches
    anything; the running one polls a feed at once when ``newsflow poll --now FEED_ID`` asks (a
    request file in ``<state_dir>/requests``). Without ``state_dir`` every run starts fresh.

    SIGINT/SIGTERM (in the main thread) end the sources instead of interrupting Bytewax (which
    prints a Rust panic and stops mid-epoch): the flow finishes its epoch, snapshots, and this
    function raises :class:`PollerInterrupted` once the state is saved.
    """
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.run import cli_main

    stop = threading.Event()
    with contextlib.ExitStack() as held:
        recovery = None
        if state_dir is not None:
            d = Path(state_dir)
            held.enter_context(locked_state_dir(d))  # one poller per state directory
            if not any(d.glob("part-*.sqlite3")):
                init_db_dir(d, 1)
            recovery = RecoveryConfig(str(d))
            config = replace(config, requests_dir=str(d / REQUESTS_DIR))
        flow = build_poller_flow(feeds, config, sink or KafkaRecordSink(brokers, producer_config, stop),
                                 clock=clock, once=once, force=force, progress=progress,
                                 fetcher_factory=fetcher_factory, stop=stop)
        with _stop_on_signals(stop):
            cli_main(flow, workers_per_process=1, epoch_interval=timedelta(seconds=snapshot_s),
                     recovery_config=recovery)
    if stop.is_set():
        raise PollerInterrupted


class PollerInterrupted(KeyboardInterrupt):
    """The poller was stopped by SIGINT/SIGTERM after finishing cleanly (state saved)."""


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.getsignal(s) for s in sigs}

    def handler(signum: int, _frame: object) -> None:
        if stop.is_set():  # a second Ctrl-C: the user insists
            raise KeyboardInterrupt
        stop.set()

    for s in sigs:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
