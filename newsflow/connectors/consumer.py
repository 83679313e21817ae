"""Reading a topic as a plain Kafka subscriber (``newsflow tail``): confluent-kafka consumer.

The consumer ``assign()``s every partition of the topic at a concrete offset (the beginning, or
the current end resolved before the first read, so nothing produced after :func:`open_topic`
returns is missed) and commits nothing: tailing never moves anybody's consumer group.
An unreachable broker or a missing topic is a :class:`TopicError` after ``timeout_s`` with one
line of explanation, and librdkafka's own log lines are silenced (they repeat every retry).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


class TopicError(RuntimeError):
    """The broker or the topic can't be read (one line, for the user)."""


@dataclass(frozen=True, slots=True)
class TopicMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def _quiet(_err: Any) -> None:
    """librdkafka reports transient errors (connection refused, ...) here; they are retried, and
    a broker that never answers surfaces as the metadata timeout."""


def open_topic(brokers: Sequence[str], topic: str, *, from_beginning: bool = False,
               timeout_s: float = 10.0) -> Any:
    """A consumer assigned to every partition of ``topic`` (``confluent_kafka.Consumer``)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({
        "bootstrap.servers": ",".join(brokers),
        "group.id": f"newsflow-tail-{uuid.uuid4().hex}",  # required by the client; never committed
        "enable.auto.commit": False,
        "allow.auto.create.topics": False,
        "log_level": 0,
        "error_cb": _quiet,
    })
    where = ",".join(brokers)
    try:
        try:
            md = c.list_topics(topic, timeout=timeout_s)
        except KafkaException as e:
            msg = f"Kafka at {where} did not answer within {timeout_s:g} s ({e.args[0].str() if e.args else e})"
            raise TopicError(msg) from None
        t = md.topics.get(topic)
        if t is None or t.error is not None or not t.partitions:
            known = sorted(n for n in md.topics if not n.startswith("__"))
            msg = f"no topic {topic!r} at {where}" + (f" (topics: {', '.join(known[:12])})" if known else "")
            raise TopicError(msg)
        tps = []
        for p in sorted(t.partitions):
            try:
                lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            except KafkaException as e:
                msg = f"{topic}[{p}]: offsets unavailable from {where} ({e})"
                raise TopicError(msg) from None
            tps.append(TopicPartition(topic, p, lo if from_beginning else hi))
        c.assign(tps)
    except BaseException:
        c.close()
        raise
    return c


def read_messages(consumer: Any, *, idle_timeout_s: float | None = None,
                  poll_s: float = 0.5) -> Iterator[TopicMessage]:
    """Messages as they arrive; ends after ``idle_timeout_s`` without a message (None: never)."""
    from confluent_kafka import KafkaError

    last = time.monotonic()
    while True:
        m = consumer.poll(poll_s)
        if m is None:
            if idle_timeout_s is not None and time.monotonic() - last >= idle_timeout_s:
                return
            continue
        err = m.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                continue
            if err.fatal() or not err.retriable():
                msg = f"{m.topic()}: {err.str()}"
                raise TopicError(msg)
            continue
        last = time.monotonic()
        yield TopicMessage(m.topic(), m.partition(), m.offset(), m.key(), m.value())
