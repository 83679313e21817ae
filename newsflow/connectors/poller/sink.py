"""The poller's Kafka sink (confluent_kafka): any topic, explicit partitions, fan-out for ticks;
a batch is written only once Kafka acknowledged all of it, and :data:`DELIVERY` tells
``/healthz`` whether it is."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bytewax.outputs import DynamicSink, StatelessSinkPartition

from newsflow.connectors.poller.records import KafkaRecord
from newsflow.connectors.topics import KafkaDeliveryFailed, producer_config

log = logging.getLogger("newsflow.poller")

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


__all__ = ["DELIVERY", "DELIVERY_GRACE_S", "DeliveryStatus", "KafkaRecordSink"]
