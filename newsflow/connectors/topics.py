"""Small Kafka helpers for commands and tests: create topics, produce values."""

from __future__ import annotations

from collections.abc import Iterable

from newsflow.config import Settings


def ensure_topics(brokers: list[str], settings: Settings, partitions: int = 1) -> None:
    """Create the pipeline's topics if missing (idempotent); ``stories`` is compacted (the
    latest record per story id is the story's state)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": ",".join(brokers)})
    t = settings.topics
    existing = set(admin.list_topics(timeout=30).topics)
    new = [NewTopic(n, num_partitions=partitions, replication_factor=1,
                    config={"cleanup.policy": "compact"} if n == t.stories else {})
           for n in (t.raw, t.articles, t.digests, t.feed_health, t.deadletter, t.interactions, t.stories)
           if n not in existing]
    if not new:
        return
    for fut in admin.create_topics(new).values():
        try:
            fut.result(30)
        except Exception as e:  # TOPIC_ALREADY_EXISTS from a concurrent creator is fine
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


def produce_values(brokers: list[str], topic: str, values: Iterable[bytes], key_field: bool = True) -> int:
    """Produce raw envelopes; the key is the envelope's feed_id so a feed stays in one partition."""
    import orjson
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": ",".join(brokers), "linger.ms": 20, "compression.type": "lz4",
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000})
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
