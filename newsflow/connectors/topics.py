"""Kafka client helpers for commands, tests and the dev broker: the one producer configuration,
topic creation, producing a raw archive."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from newsflow.config import Settings


class KafkaDeliveryFailed(RuntimeError):
    """Records of this epoch were not acknowledged by Kafka; the epoch must not be committed."""

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
    """The producer configuration: defaults (librdkafka's log lines to :func:`kafka_logger`,
    throttled), then ``add_config``, then ``bootstrap.servers`` (omitted when ``brokers`` is
    None: Bytewax's Kafka sink sets it itself).

    >>> producer_config(["127.0.0.1:9092"], {"linger.ms": "5"})["linger.ms"]
    '5'
    >>> producer_config("a:1,b:2")["bootstrap.servers"]
    'a:1,b:2'
    """
    cfg: dict[str, Any] = {**_PRODUCER_DEFAULTS, "logger": kafka_logger(), **(add_config or {})}
    if brokers is not None:
        cfg["bootstrap.servers"] = brokers if isinstance(brokers, str) else ",".join(brokers)
    return cfg


def settings_config(settings: Settings, add_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The librdkafka properties the configuration sets (``kafka.message_timeout_ms``), then
    ``add_config``; consumers drop the producer-only ones."""
    return {"message.timeout.ms": str(settings.kafka.message_timeout_ms), **(add_config or {})}


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


#: the topic contracts' clean-up policy per topic role. Keyed records (articles by
#: article_id/#rN, digests by window, feed-health by feed, stories by story id) are compacted: the latest record per
#: key survives, and ``delete`` still drops everything older than the retention
#: (``[kafka.retention_hours]``). The inputs (raw polls, reader interactions) and the dead
#: letters are logs: delete only.
CLEANUP_POLICY = {
    "raw": "delete",
    "articles": "compact,delete",
    "digests": "compact,delete",
    "feed_health": "compact,delete",
    "deadletter": "delete",
    "interactions": "delete",  # an input log, like feeds.raw
    "stories": "compact,delete",  # the latest record per story id is the story's state
}


class BrokerUnreachableError(ConnectionError):
    """No Kafka broker answered within the configured timeout."""


#: the parts of a librdkafka line that change from one repeat to the next: ``(after 0ms in state
#: CONNECT, 4 identical error(s) suppressed)`` of a connection error
_VARYING = re.compile(r" ?\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)")


class _OncePerMinute(logging.Filter):
    """librdkafka repeats each connection error while a broker is away: keep one per minute of
    each distinct line (the same line but for its repeat counters counts as the same).

    >>> f = _OncePerMinute()
    >>> line = "FAIL [rdkafka#producer-1] a:1/bootstrap: Connect to a:1 failed: refused (after {}ms in state CONNECT{})"
    >>> [f.filter(logging.makeLogRecord({"msg": line.format(ms, n)})) for ms, n in ((0, ""), (3, ", 9 identical error(s) suppressed"))]
    [True, False]
    """

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = _VARYING.sub("", record.getMessage())
        now = time.monotonic()
        if now - self.last.get(key, -1e9) < 60.0:
            return False
        self.last[key] = now
        return True


def kafka_logger() -> logging.Logger:
    """The Python logger librdkafka's messages go to (``"logger"`` in a client config) instead
    of raw stderr: warnings and errors only, each distinct line at most once a minute."""
    log = logging.getLogger("newsflow.kafka")
    if not any(isinstance(f, _OncePerMinute) for f in log.filters):
        log.addFilter(_OncePerMinute())
        log.setLevel(logging.WARNING)
    return log


def silent_logger() -> logging.Logger:
    """A logger for librdkafka's lines of a client whose failure is reported as one line of its
    own (the broker check, ``newsflow produce``): its retries are not the user's concern."""
    log = logging.getLogger("newsflow.kafka.silent")
    if not log.handlers:
        log.propagate = False
        log.addHandler(logging.NullHandler())
    return log


def admin_config(brokers: list[str], timeout_s: float) -> dict[str, Any]:
    return {"bootstrap.servers": ",".join(brokers), "logger": kafka_logger(),
            "socket.connection.setup.timeout.ms": max(1000, int(timeout_s * 1000))}


def check_brokers(brokers: list[str], timeout_s: float) -> None:
    """Raise :class:`BrokerUnreachableError` (one line) unless a broker answers within ``timeout_s``."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {**admin_config(brokers, timeout_s), "logger": silent_logger()}
    admin = AdminClient(conf)
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as e:
        err = e.args[0] if e.args else e
        detail = err.str() if hasattr(err, "str") else str(err)
        msg = f"Kafka broker {','.join(brokers)} unreachable after {timeout_s:g} s ({detail})"
        raise BrokerUnreachableError(msg) from None


def topic_configs(settings: Settings) -> dict[str, dict[str, str]]:
    """topic name -> the configs it is created with (clean-up policy, retention)."""
    k = settings.kafka
    return {getattr(k.topics, role): {
        "cleanup.policy": CLEANUP_POLICY[role],
        "retention.ms": str(round(getattr(k.retention_hours, role) * 3_600_000)),
    } for role in CLEANUP_POLICY}


def ensure_topics(brokers: list[str], settings: Settings, partitions: int | None = None) -> list[str]:
    """Create the pipeline's missing topics (idempotent) with ``partitions`` (default
    ``kafka.partitions``), the replication factor, clean-up policy and retention of the
    configuration; existing topics are left as they are. Returns the names created."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    k = settings.kafka
    admin = AdminClient(admin_config(brokers, k.timeout_s))
    try:
        existing = set(admin.list_topics(timeout=k.timeout_s).topics)
    except KafkaException as e:
        msg = f"Kafka broker {','.join(brokers)} unreachable after {k.timeout_s:g} s ({e})"
        raise BrokerUnreachableError(msg) from None
    created = []
    for name, cfg in topic_configs(settings).items():
        if name not in existing:
            create_topics(",".join(brokers), [name], partitions or k.partitions,
                          replication_factor=k.replication_factor, config=cfg,
                          timeout=max(30.0, k.timeout_s), admin_config={"logger": kafka_logger()})
            created.append(name)
    return created




def produce_values(brokers: list[str], topic: str, values: Iterable[bytes], key_field: bool = True,
                   add_config: Mapping[str, Any] | None = None) -> int:
    """Produce raw envelopes and wait for every delivery report; returns the count delivered.
    The key is the envelope's feed_id so a feed stays in one partition.

    Every record ends delivered or failed within ``message.timeout.ms`` (``add_config``, or
    ``kafka.message_timeout_ms`` through the caller); when any failed, raises
    ``KafkaDeliveryFailed`` with the count that did not reach the topic."""
    import orjson
    from confluent_kafka import Producer

    from newsflow.wire.contracts import headers_for

    headers: list[tuple[str, str | bytes | None]] = list(headers_for("raw"))
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err.str())

    p = Producer(producer_config(brokers, add_config))
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
                p.produce(topic, v, key, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.5)
        p.poll(0)
        n += 1
    while p.flush(1.0) > 0:  # (short slices: Ctrl-C is still handled while a broker is away)
        pass
    if failed:
        msg = (f"Kafka did not acknowledge {len(failed)} of {n} records produced to {topic} "
               f"({failed[0]}); {n - len(failed)} were delivered; the rest are not on the topic but "
               "for those in flight when the broker stopped answering, which it may have written")
        raise KafkaDeliveryFailed(msg)
    return n
