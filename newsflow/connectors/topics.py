"""Kafka client helpers for commands, tests and the dev broker: the one producer configuration,
topic creation, producing a raw archive."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from newsflow.config import Settings

#: Producer settings of every producer in the project (flow sinks, poller sink, ``produce``):
#: a big local queue (Bytewax bug #522: a full queue raises BufferError), batching for
#: throughput, an idempotent producer so retries never duplicate. Strings: librdkafka parses
#: them, and Bytewax's ``add_config`` is ``dict[str, str]``.
_PRODUCER_DEFAULTS: Mapping[str, str] = {
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": "1048576",
    "linger.ms": "20",
    "enable.idempotence": "true",
    "compression.type": "lz4",
}


def producer_config(
    brokers: Sequence[str] | str | None = None, add_config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The producer configuration: defaults, then ``add_config``, then ``bootstrap.servers``
    (omitted when ``brokers`` is None: Bytewax's Kafka sink sets it itself).

    >>> producer_config(["127.0.0.1:9092"], {"linger.ms": "5"})["linger.ms"]
    '5'
    >>> producer_config("a:1,b:2")["bootstrap.servers"]
    'a:1,b:2'
    """
    cfg: dict[str, Any] = {**_PRODUCER_DEFAULTS, **(add_config or {})}
    if brokers is not None:
        cfg["bootstrap.servers"] = brokers if isinstance(brokers, str) else ",".join(brokers)
    return cfg


def create_topics(
    bootstrap: str,
    names: Iterable[str],
    partitions: int = 1,
    *,
    replication_factor: int = 1,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    admin_config: Mapping[str, Any] | None = None,
) -> None:
    """Create topics, ignoring ones that already exist (also when a concurrent creator wins the
    race: error code ``TOPIC_ALREADY_EXISTS``); return once every topic has partition leaders."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    names = list(dict.fromkeys(names))
    if not names:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, **(admin_config or {})})
    new = [
        NewTopic(n, num_partitions=partitions, replication_factor=replication_factor,
                 config=dict(config or {}))
        for n in names
    ]
    futures = admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
    for name, fut in futures.items():
        try:
            fut.result(timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            msg = f"creating topic {name!r} failed: {exc}"
            raise RuntimeError(msg) from exc

    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        md = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
        for name in list(pending):
            t = md.topics.get(name)
            if (
                t is not None
                and t.error is None
                and t.partitions
                and all(p.leader >= 0 for p in t.partitions.values())
            ):
                pending.discard(name)
        if pending:
            if time.monotonic() > deadline:
                msg = f"topics without leaders after {timeout:.0f} s: {sorted(pending)}"
                raise RuntimeError(msg)
            time.sleep(0.1)


def ensure_topics(brokers: list[str], settings: Settings, partitions: int = 1) -> None:
    """Create the pipeline's topics if missing (idempotent); ``stories`` is compacted (the
    latest record per story id is the story's state)."""
    t = settings.topics
    bootstrap = ",".join(brokers)
    create_topics(bootstrap, [t.raw, t.articles, t.digests, t.feed_health, t.deadletter, t.interactions],
                  partitions)
    create_topics(bootstrap, [t.stories], partitions, config={"cleanup.policy": "compact"})


def produce_values(brokers: list[str], topic: str, values: Iterable[bytes], key_field: bool = True) -> int:
    """Produce raw envelopes; the key is the envelope's feed_id so a feed stays in one partition."""
    import orjson
    from confluent_kafka import Producer

    p = Producer(producer_config(brokers))
    n = 0
    for v in values:
        key = None
        if key_field:
            try:
                key = str(orjson.loads(v).get("feed_id", "")).encode()
            except (orjson.JSONDecodeError, AttributeError):
                key = None
        while True:
            try:
                p.produce(topic, v, key)
                break
            except BufferError:
                p.poll(0.5)
        p.poll(0)
        n += 1
    p.flush(60)
    return n
