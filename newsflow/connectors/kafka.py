"""Kafka I/O of the dataflow (values are the JSON bytes as-is).

Input: :class:`RawKafkaSource`, one Bytewax partition per Kafka partition, read with ``assign()``
(no consumer group). Its recovery snapshot is ``(cluster id, next offset)``: on resume it checks
that the broker is the same cluster and that the stored offset lies inside the partition's log,
and fails with one clear line (:class:`KafkaClusterChanged`) instead of silently reading nothing;
while running it asks for the cluster id every ``kafka.cluster_check_s`` and fails the same way
when a new cluster took the old one's address.
A broker that does not answer fails within ``kafka.timeout_s`` (:class:`KafkaUnavailable`).

Output: :class:`ReliableKafkaSink`, an idempotent producer whose ``write_batch`` waits for every
delivery report of the batch and raises :class:`KafkaDeliveryFailed` if any record was not
delivered. The sink runs before Bytewax commits the epoch, so a broker outage longer than
``message.timeout.ms`` stops the process (non-zero exit) instead of losing output, and a restart
from the recovery directory re-emits the epoch (Bytewax's own ``KafkaSink`` flushes without
looking at delivery reports). Re-emits are harmless: every record carries an idempotent key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import bytewax.operators as op
from bytewax.connectors.kafka import KafkaError as BwKafkaError
from bytewax.connectors.kafka import KafkaSourceMessage
from bytewax.dataflow import Dataflow, Stream, operator
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka import KafkaError as CKafkaError

from newsflow.config import Settings
from newsflow.connectors.topics import (
    KafkaDeliveryFailed,
    kafka_logger,
    producer_config,
    settings_config,
)
from newsflow.feeds.normalize import make_deadletter
from newsflow.flows import metrics
from newsflow.model.messages import Output
from newsflow.runtime.placement import input_keys
from newsflow.wire.codec import deadletter_to_dict, dumps
from newsflow.wire.contracts import headers_for

#: Kafka message headers as confluent-kafka takes them
Headers = list[tuple[str, str | bytes | None]]

#: librdkafka properties that only a producer understands (kept out of the consumer's config)
_PRODUCER_ONLY = ("message.timeout.ms", "delivery.timeout.ms", "linger.ms", "queue.buffering.",
                  "enable.idempotence", "compression.", "acks", "request.required.acks", "batch.",
                  "retries", "message.send.max.retries", "enable.gapless.guarantee", "transactional.")


class KafkaUnavailable(RuntimeError):
    """No broker answered within the configured time."""


class KafkaClusterChanged(RuntimeError):
    """The recovery state belongs to another cluster / another log than the broker now serves."""


KAFKA_ERRORS = (KafkaUnavailable, KafkaClusterChanged, KafkaDeliveryFailed)


def kafka_error_line(exc: BaseException) -> str | None:
    """The one-line message of a Kafka failure of ours anywhere in ``exc``'s cause chain (Bytewax
    wraps exceptions of sources and sinks in ``BytewaxRuntimeError``s), else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, KAFKA_ERRORS):
            return f"{type(cur).__name__}: {cur}"
        cur = cur.__cause__ or cur.__context__
    return None


#: librdkafka's own log lines of the short-lived probe clients ("Connect to ... failed" every
#: 50 ms while a broker is away) go here instead of stderr; the one-line error says it all
_probe_log = logging.getLogger("newsflow.kafka.probe")
_probe_log.addHandler(logging.NullHandler())
_probe_log.propagate = False


def _consumer_config(add_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """``add_config`` without the producer-only properties; librdkafka's log lines go to the
    throttled :func:`~newsflow.connectors.topics.kafka_logger` unless it names a logger."""
    return {"logger": kafka_logger(),
            **{k: v for k, v in (add_config or {}).items() if not k.startswith(_PRODUCER_ONLY)}}


# ---------------------------------------------------------------- input
def cluster_id_of(brokers: list[str], timeout_s: float, add_config: dict[str, str] | None = None) -> str:
    """The cluster id the brokers answer with; :class:`KafkaUnavailable` after ``timeout_s``."""
    c = Consumer({"bootstrap.servers": ",".join(brokers), "group.id": "newsflow-probe",
                  **_consumer_config(add_config), "logger": _probe_log})
    try:
        return _cluster_id(c, brokers, timeout_s)
    finally:
        c.close()


def _cluster_id(client: Any, brokers: list[str], timeout_s: float, topic: str | None = None) -> str:
    try:
        md = client.list_topics(topic, timeout=timeout_s)
    except KafkaException as e:
        msg = (f"Kafka at {','.join(brokers)} did not answer within {timeout_s:g} s "
               f"(kafka.timeout_s): {e.args[0].str() if e.args else e}")
        raise KafkaUnavailable(msg) from None
    if not md.brokers or not md.cluster_id:
        msg = f"Kafka at {','.join(brokers)} answered without brokers or cluster id"
        raise KafkaUnavailable(msg)
    return str(md.cluster_id)


def _unpack_resume(state: Any) -> tuple[str | None, int]:
    """Resume state: ``(cluster_id, offset)``; a bare int is Bytewax KafkaSource's old format."""
    if state is None:
        return None, OFFSET_BEGINNING
    if isinstance(state, int):
        return None, state
    cid, off = state
    return cid, int(off)


class _RawKafkaPartition(StatefulSourcePartition[Any, tuple[str, int]]):
    def __init__(self, consumer: Any, topic: str, part: int, offset: int, cluster_id: str,
                 batch_size: int, cluster_check_s: float, cluster_probe: Callable[[float], str]) -> None:
        self._consumer = consumer
        self._topic = topic
        self._part = part
        self._offset = offset
        self._cluster_id = cluster_id
        self._batch_size = batch_size
        self._eof = False
        self._check_s = cluster_check_s
        self._probe = cluster_probe
        self._next_check = time.monotonic() + cluster_check_s
        consumer.assign([TopicPartition(topic, part, offset)])

    def _check_cluster(self) -> None:
        """Stop with one line when the brokers now serve another cluster; a broker that does
        not answer is an outage (the consumer retries), not a change. (A new client asks: the
        reading one keeps the first cluster id it saw and only logs a CLUSTERID warning.)"""
        try:
            cid = self._probe(min(5.0, self._check_s))
        except KafkaUnavailable:
            return
        if cid and cid != self._cluster_id:
            msg = (f"Kafka cluster changed under the running flow: {self._topic}[{self._part}] was read "
                   f"from cluster {self._cluster_id} up to offset {self._offset}, the broker now serves "
                   f"cluster {cid}; start with an empty --recovery-dir to read the new cluster from the "
                   "beginning")
            raise KafkaClusterChanged(msg)

    def next_batch(self) -> list[Any]:
        if self._eof:
            raise StopIteration
        if time.monotonic() >= self._next_check:  # (kafka.cluster_check_s)
            self._check_cluster()
            self._next_check = time.monotonic() + self._check_s
        batch: list[Any] = []
        last = None
        for msg in self._consumer.consume(self._batch_size, 0.001):
            err = msg.error()
            if err is not None and err.code() == CKafkaError._PARTITION_EOF:
                self._eof = True
                break
            m = KafkaSourceMessage(key=msg.key(), value=msg.value(), topic=msg.topic(),
                                   headers=msg.headers() or [], offset=msg.offset(),
                                   partition=msg.partition(), timestamp=msg.timestamp())
            batch.append(m if err is None else BwKafkaError(err, m))
            if msg.offset() is not None and msg.offset() >= 0:
                last = msg.offset()
        if last is not None:
            self._offset = last + 1
        return batch

    def snapshot(self) -> tuple[str, int]:
        return (self._cluster_id, self._offset)

    def close(self) -> None:
        self._consumer.close()


class RawKafkaSource(FixedPartitionedSource[Any, tuple[str, int]]):
    """One topic as a partitioned source whose snapshots remember the cluster they came from.

    Items are Bytewax ``KafkaSourceMessage`` or ``KafkaError`` (consumer errors that are not
    fatal, e.g. a corrupt record: the flow dead-letters them).
    """

    def __init__(self, brokers: list[str], topic: str, *, tail: bool = True, timeout_s: float = 30.0,
                 add_config: dict[str, str] | None = None, batch_size: int = 1000,
                 cluster_check_s: float = 30.0) -> None:
        self.brokers = list(brokers)
        self.topic = topic
        self.tail = tail
        self.timeout_s = timeout_s
        self.cluster_check_s = cluster_check_s
        self.add_config = _consumer_config(add_config)
        self.batch_size = batch_size

    def _consumer(self, probe: bool = False) -> Any:
        return Consumer({
            "group.id": "newsflow-bytewax-assign",  # never joined: assign() only, no commits
            "enable.auto.commit": "false",
            "bootstrap.servers": ",".join(self.brokers),
            "enable.partition.eof": str(not self.tail).lower(),
            **self.add_config,
            **({"logger": _probe_log} if probe else {}),
        })

    def list_parts(self) -> list[str]:
        c = self._consumer(probe=True)
        try:
            _cluster_id(c, self.brokers, self.timeout_s)
            md = c.list_topics(self.topic, timeout=self.timeout_s)
        finally:
            c.close()
        t = md.topics.get(self.topic)
        if t is None or t.error is not None or not t.partitions:
            why = t.error.str() if t is not None and t.error is not None else "no partitions"
            msg = f"Kafka topic {self.topic!r} at {','.join(self.brokers)} is not readable: {why}"
            raise KafkaUnavailable(msg)
        return [f"{i}-{self.topic}" for i in sorted(t.partitions)]

    def build_part(self, step_id: str, for_part: str, resume_state: Any) -> _RawKafkaPartition:
        idx, topic = for_part.split("-", 1)
        part = int(idx)
        stored_cid, offset = _unpack_resume(resume_state)
        c = self._consumer()
        try:
            cid = _cluster_id(c, self.brokers, self.timeout_s, topic)
            check_resume(topic, part, stored_cid, offset, cid, self._watermarks(c, topic, part))
        except BaseException:
            c.close()
            raise
        return _RawKafkaPartition(c, topic, part, offset, cid, self.batch_size, self.cluster_check_s,
                                  lambda t: cluster_id_of(self.brokers, t, self.add_config))

    def _watermarks(self, c: Any, topic: str, part: int) -> tuple[int, int]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                low, high = c.get_watermark_offsets(TopicPartition(topic, part), timeout=self.timeout_s,
                                                    cached=False)
                return int(low), int(high)
            except KafkaException as e:
                if time.monotonic() >= deadline:
                    msg = (f"Kafka at {','.join(self.brokers)} gave no offsets for {topic}[{part}] "
                           f"within {self.timeout_s:g} s (kafka.timeout_s): {e}")
                    raise KafkaUnavailable(msg) from None
                time.sleep(0.2)


def check_resume(topic: str, part: int, stored_cid: str | None, offset: int, cid: str,
                 watermarks: tuple[int, int]) -> None:
    """Fail with one line when a stored position can't be continued on this cluster/log."""
    hint = "start with an empty --recovery-dir to read this cluster from the beginning"
    if stored_cid is not None and stored_cid != cid:
        msg = (f"Kafka cluster changed: the recovery state of {topic}[{part}] is from cluster "
               f"{stored_cid}, the broker now serves cluster {cid}; {hint}")
        raise KafkaClusterChanged(msg)
    if offset < 0:  # OFFSET_BEGINNING / OFFSET_END: nothing read yet
        return
    low, high = watermarks
    if offset > high:
        msg = (f"Kafka log of {topic}[{part}] ends at offset {high} but the recovery state resumes "
               f"at {offset} (topic recreated or a different cluster); {hint}")
        raise KafkaClusterChanged(msg)
    if offset < low:
        msg = (f"Kafka log of {topic}[{part}] starts at offset {low} but the recovery state resumes "
               f"at {offset}: records {offset}..{low - 1} were deleted before they were read "
               f"(retention) or the topic was recreated; {hint}")
        raise KafkaClusterChanged(msg)


@operator
def _raw_source(step_id: str, flow: Dataflow, source: RawKafkaSource) -> Stream[Any]:
    # the same step id Bytewax's kop.input used ("<flow>.kafka_raw_in.kafka_input"), so an older
    # recovery dir (bare int offsets) still resumes
    return op.input("kafka_input", flow, source)


def kafka_raw_input(
    flow: Dataflow, brokers: list[str], settings: Settings, *, tail: bool = True,
    add_config: dict[str, str] | None = None,
) -> tuple[Stream[tuple[str, tuple[str, bytes]]], list[str]]:
    """``feeds.raw`` -> ``(partition key, (seq, value))`` and every partition key (the flow
    merges them on event time: each partition needs traffic or the poller's heartbeat);
    consumer errors -> dead letters."""
    src = RawKafkaSource(brokers, settings.kafka.topics.raw, tail=tail, timeout_s=settings.kafka.timeout_s,
                         add_config=add_config, batch_size=settings.flow.read_batch,
                         cluster_check_s=settings.kafka.cluster_check_s)
    # the parse step of a partition runs on the worker that reads it (newsflow.runtime.placement)
    number = {p: int(p.split("-", 1)[0]) for p in src.list_parts()}  # "3-feeds.raw" -> 3
    pkeys = {number[p]: k for p, k in input_keys({p: f"p{n:04d}" for p, n in number.items()},
                                                     on=settings.flow.placement).items()}
    keys = list(pkeys.values())
    items = _raw_source("kafka_raw_in", flow, src)
    split = op.branch("kafka_raw_split", items, lambda m: isinstance(m, KafkaSourceMessage))

    def keyed(msg: Any) -> tuple[str, tuple[str, bytes]]:
        metrics.input_read(msg.partition, msg.offset)  # consumer lag (connectors.observability)
        return (pkeys[msg.partition], (f"{msg.partition:04d}:{msg.offset:012d}", msg.value or b""))

    errs = op.map("kafka_errs_to_dl", split.falses, lambda e: _error_deadletter(e, settings))
    op.output("kafka_errs_out", errs, ReliableKafkaSink(brokers, settings_config(settings, add_config),
                                                        headers=topic_headers(settings)))
    return op.map("key_by_partition", split.trues, keyed), keys


def kafka_interactions_input(
    flow: Dataflow, brokers: list[str], settings: Settings, *, tail: bool = True,
    add_config: dict[str, str] | None = None,
) -> tuple[Stream[tuple[str, tuple[str, bytes]]], int]:
    """``interactions`` -> ``(partition key, (seq, value))`` and the number of partitions (the
    profile step waits for every partition's clock); consumer errors -> dead letters."""
    src = RawKafkaSource(brokers, settings.kafka.topics.interactions, tail=tail, timeout_s=settings.kafka.timeout_s,
                         add_config=add_config, batch_size=1000, cluster_check_s=settings.kafka.cluster_check_s)
    n = len(src.list_parts())
    items = _raw_source("kafka_interactions_in", flow, src)
    split = op.branch("kafka_interactions_split", items, lambda m: isinstance(m, KafkaSourceMessage))
    errs = op.map("kafka_ix_errs_to_dl", split.falses, lambda e: _error_deadletter(e, settings))
    op.output("kafka_ix_errs_out", errs, ReliableKafkaSink(brokers, settings_config(settings, add_config),
                                                           headers=topic_headers(settings)))
    keyed = op.map("key_interactions", split.trues, lambda m: (
        f"ix{m.partition:04d}", (f"ix{m.partition:04d}:{m.offset:012d}", m.value or b"")))
    return keyed, n


def _error_deadletter(err: Any, settings: Settings) -> Output:
    msg = err.msg
    dl = make_deadletter("envelope", "kafka_error", str(err.err), msg.value or b"", feed_id=None,
                         fetched_ms=None, item_index=None)
    return Output(settings.kafka.topics.deadletter, dl.dl_id.encode(), dumps(deadletter_to_dict(dl)))


# ---------------------------------------------------------------- output
class _ReliableSinkPartition(StatelessSinkPartition[Output]):
    def __init__(self, config: dict[str, str], headers: Mapping[str, Headers]) -> None:
        self._headers = headers
        self._failed = 0
        self._first_error: str | None = None
        self._fatal: str | None = None
        self._producer = Producer({**config, "error_cb": self._on_error})

    def _on_error(self, err: Any) -> None:
        if err.fatal():
            self._fatal = err.str()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._failed += 1
            if self._first_error is None:
                self._first_error = f"{msg.topic()}: {err.str()}"

    def write_batch(self, items: list[Output]) -> None:
        p = self._producer
        for o in items:
            while True:
                try:
                    p.produce(o.topic, o.value, o.key, headers=self._headers.get(o.topic),
                              on_delivery=self._on_delivery)
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    p.poll(0.1)
            p.poll(0)
        self._settle(len(items))

    def _settle(self, n: int) -> None:
        # every message ends delivered or failed within message.timeout.ms; flush in short
        # slices so signals (Ctrl-C) are still handled while a broker is away
        while self._producer.flush(1.0) > 0:
            if self._fatal:
                break
        if self._fatal or self._failed:
            why = self._fatal or self._first_error
            failed = self._failed
            self._failed, self._first_error = 0, None
            msg = (f"Kafka did not acknowledge {failed or 'some'} of {n} records ({why}); the epoch is "
                   "not committed: restart from the recovery directory to re-emit it")
            raise KafkaDeliveryFailed(msg)

    def close(self) -> None:
        self._settle(0)


class ReliableKafkaSink(DynamicSink[Output]):
    """:class:`Output` records to Kafka; a batch returns only once every record of it is
    acknowledged, and raises :class:`KafkaDeliveryFailed` otherwise (one producer per worker)."""

    def __init__(self, brokers: list[str], config: dict[str, str] | None = None,
                 headers: Mapping[str, Headers] | None = None) -> None:
        self.config = producer_config(brokers, config)
        self.headers = dict(headers or {})

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _ReliableSinkPartition:
        return _ReliableSinkPartition(dict(self.config), self.headers)


def topic_headers(settings: Settings) -> dict[str, Headers]:
    """topic name -> the headers of its messages: ``schema``, ``schema_version``, ``content-type``."""
    return {name: list(headers_for(role)) for role, name in settings.kafka.topics.roles().items()}


def kafka_outputs(
    outs: Stream[Output], brokers: list[str], settings: Settings,
    add_config: dict[str, str] | None = None,
) -> None:
    """Every output record to its topic; the message key is the record's idempotent key, the
    headers name the value's schema (``schema``, ``schema_version``, ``content-type``)."""
    op.output("kafka_out", outs, ReliableKafkaSink(brokers, settings_config(settings, add_config),
                                                   headers=topic_headers(settings)))
