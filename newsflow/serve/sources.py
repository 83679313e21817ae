"""What feeds the desk's :class:`~newsflow.serve.store.Store`: a replay's output directory
(``newsflow demo --out DIR``, ``newsflow replay``) read once, or the topics of a running
deployment, read from their start (the compacted topics hold the current state) and followed on
a background thread.

The Kafka reader is a plain confluent-kafka consumer with a group id of its own that commits
nothing (like ``newsflow tail``): it ``assign``s every partition of the stories, articles,
digests and feed-health topics at their beginning, and assigns a topic that does not exist yet
as soon as it appears (the flow creates them when it starts).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from newsflow.serve.store import Store

#: the roles the desk reads, in the order a directory is loaded (articles before the stories
#: that list them); the values are the ``kafka.topics`` attributes
ROLES = {"articles": "articles", "stories": "stories", "digests": "digests", "feed-health": "feed_health"}


def topic_names(settings: Any) -> dict[str, str]:
    """Role -> topic name of the configuration (``kafka.topics``)."""
    t = settings.kafka.topics
    return {role: str(getattr(t, attr)) for role, attr in ROLES.items()}


def decode(value: bytes | None) -> dict[str, Any] | None:
    """A record's value as a dict; None for a tombstone or a value that is not a JSON object."""
    if value is None:
        return None
    try:
        rec = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return rec if isinstance(rec, dict) else None


def missing_files(out_dir: Path, settings: Any) -> list[str]:
    """The topic files a replay's output directory lacks (``<topic>.jsonl``)."""
    return [f"{n}.jsonl" for n in topic_names(settings).values() if not (out_dir / f"{n}.jsonl").is_file()]


def load_dir(store: Store, out_dir: Path, settings: Any) -> int:
    """Apply every record of a replay's output files to ``store``; returns the records read."""
    n = 0
    for role, name in topic_names(settings).items():
        path = out_dir / f"{name}.jsonl"
        if not path.is_file():
            continue
        with path.open("rb") as f:
            for line in f:
                line = line.strip()
                if line:
                    rec = decode(line)
                    if rec is not None:
                        store.apply(role, rec)
                        n += 1
    return n


class KafkaFeed:
    """A background thread applying the desk's topics to ``store`` as records arrive."""

    def __init__(self, store: Store, brokers: Sequence[str], settings: Any,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.brokers = list(brokers)
        self.roles = {name: role for role, name in topic_names(settings).items()}
        self.on_error = on_error
        self.stop_event = threading.Event()
        self.assigned: set[str] = set()
        self.lag_ms: float | None = None  # the last record's age when applied (record timestamp -> store)
        self.thread = threading.Thread(target=self._run, name="newsflow-serve-kafka", daemon=True)

    def start(self) -> KafkaFeed:
        self.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_event.set()
        self.thread.join(timeout)

    def _assign_new(self, consumer: Any) -> None:
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        try:
            md = consumer.list_topics(timeout=5.0)
        except KafkaException:
            return
        tps = []
        for name in self.roles:
            t = md.topics.get(name)
            if name in self.assigned or t is None or t.error is not None or not t.partitions:
                continue
            tps += [TopicPartition(name, p, OFFSET_BEGINNING) for p in sorted(t.partitions)]
            self.assigned.add(name)
        if tps:
            consumer.incremental_assign(tps)

    def _run(self) -> None:
        from confluent_kafka import Consumer, KafkaError

        consumer = Consumer({
            "bootstrap.servers": ",".join(self.brokers),
            "group.id": f"newsflow-serve-{uuid.uuid4().hex}",  # its own group; never committed
            "enable.auto.commit": False, "allow.auto.create.topics": False,
            "fetch.wait.max.ms": 50, "log_level": 0, "error_cb": lambda _e: None,
        })
        try:
            next_check = 0.0
            while not self.stop_event.is_set():
                if len(self.assigned) < len(self.roles) and time.monotonic() >= next_check:
                    self._assign_new(consumer)
                    next_check = time.monotonic() + 2.0
                if not self.assigned:
                    self.stop_event.wait(0.5)
                    continue
                m = consumer.poll(0.2)
                if m is None:
                    continue
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF and self.on_error is not None:
                        self.on_error(f"{m.topic()}: {err.str()}")
                    continue
                key, value = m.key(), m.value()
                rec = decode(value)
                if value is not None and rec is None:  # (not a JSON object: not a record)
                    continue
                self.store.apply(self.roles[str(m.topic())], rec,
                                 key.decode("utf-8", "replace") if key is not None else None)
                kind, ts = m.timestamp()
                if kind != 0:  # (TIMESTAMP_NOT_AVAILABLE)
                    self.lag_ms = time.time() * 1000 - ts
        finally:
            consumer.close()
