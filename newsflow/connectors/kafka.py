"""Kafka I/O of the dataflow (Bytewax's Kafka connector; values are the JSON bytes as-is).

Bytewax reads with ``assign()`` (no consumer group) and keeps offsets in its recovery snapshots;
sinks are at-least-once, which is harmless because every record carries an idempotent key.
"""

from __future__ import annotations

from typing import Any

import bytewax.operators as op
from bytewax.connectors.kafka import KafkaSinkMessage
from bytewax.connectors.kafka import operators as kop
from bytewax.dataflow import Dataflow, Stream

from newsflow.config import Settings
from newsflow.feeds.normalize import make_deadletter
from newsflow.flows import metrics
from newsflow.model.messages import Output
from newsflow.wire.codec import deadletter_to_dict, dumps

#: producer settings: big local queue (Bytewax bug #522: a full queue raises BufferError),
#: batching for throughput, idempotent producer so retries don't duplicate
PRODUCER_CONFIG = {
    "queue.buffering.max.messages": "1000000",
    "queue.buffering.max.kbytes": "1048576",
    "linger.ms": "20",
    "enable.idempotence": "true",
    "compression.type": "lz4",
}


def kafka_raw_input(
    flow: Dataflow, brokers: list[str], settings: Settings, *, tail: bool = True,
    add_config: dict[str, str] | None = None,
) -> Stream[tuple[str, tuple[str, bytes]]]:
    """``feeds.raw`` -> ``(partition key, (seq, value))``; consumer errors -> dead letters."""
    src = kop.input("kafka_raw_in", flow, brokers=brokers, topics=[settings.topics.raw], tail=tail,
                    add_config=add_config, batch_size=1000)

    def keyed(msg: Any) -> tuple[str, tuple[str, bytes]]:
        metrics.input_read(msg.partition, msg.offset)  # consumer lag (connectors.observability)
        return (f"p{msg.partition:04d}", (f"{msg.partition:04d}:{msg.offset:012d}", msg.value or b""))

    errs = op.map("kafka_errs_to_dl", src.errs, lambda e: _error_deadletter(e, settings))
    kop.output("kafka_errs_out", errs, brokers=brokers, topic=settings.topics.deadletter,
               add_config={**PRODUCER_CONFIG, **(add_config or {})})
    return op.map("key_by_partition", src.oks, keyed)


def _error_deadletter(err: Any, settings: Settings) -> KafkaSinkMessage[bytes, bytes]:
    msg = err.msg
    dl = make_deadletter("envelope", "kafka_error", str(err.err), msg.value or b"", feed_id=None,
                         fetched_ms=None, item_index=None)
    return KafkaSinkMessage(dl.dl_id.encode(), dumps(deadletter_to_dict(dl)))


def kafka_outputs(
    outs: Stream[Output], brokers: list[str], settings: Settings,
    add_config: dict[str, str] | None = None,
) -> None:
    """One Kafka sink per output topic; the message key is the record's idempotent key."""
    cfg = {**PRODUCER_CONFIG, **(add_config or {})}
    t = settings.topics
    for name in ("articles", "digests", "feed_health", "deadletter"):  # step ids can't contain "."
        topic = getattr(t, name)
        sel = op.filter_map(
            f"select_{name}", outs,
            lambda o, topic=topic: KafkaSinkMessage(o.key, o.value) if o.topic == topic else None,
        )
        kop.output(f"kafka_out_{name}", sel, brokers=brokers, topic=topic, add_config=cfg)
