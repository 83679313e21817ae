"""A broker or cluster change is noticed, on real brokers: the flow's recovery state remembers the
cluster id and offsets it read; a fresh cluster, a recreated topic or a log whose start moved past
the stored offset fails with one clear line instead of silently reading nothing, and a broker that
does not answer fails within ``kafka.timeout_s``."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import run_main
from kafka_local import KafkaBroker

from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.kafka import (
    KafkaClusterChanged,
    KafkaUnavailable,
    check_resume,
    kafka_error_line,
)
from newsflow.connectors.topics import create_topics, ensure_topics, produce_values
from newsflow.flows.pipeline import kafka_flow
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from tests.kafka_fixture import consume_all

pytestmark = pytest.mark.kafka


def _settings(timeout_s: float = 20.0) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    return Settings(kafka=KafkaSettings(topics=topics, timeout_s=timeout_s))


def _run(bootstrap: str, settings: Settings, rec: Path) -> None:
    run_main(kafka_flow([bootstrap], settings, tail=False, recovery=True), recovery_config=RecoveryConfig(str(rec)))


def _fails_with(bootstrap: str, settings: Settings, rec: Path) -> str:
    with pytest.raises(Exception) as ei:  # Bytewax wraps it; ours is in the cause chain
        _run(bootstrap, settings, rec)
    line = kafka_error_line(ei.value)
    assert line is not None, repr(ei.value)
    assert "\n" not in line
    return line


@pytest.fixture
def values() -> list[bytes]:
    return [encode_raw(p)[1] for p in demo_payloads()]


def test_resume_on_a_fresh_cluster_fails_clearly(kafka_bootstrap: str, tmp_path: Path, values: list[bytes]) -> None:
    settings = _settings()
    ensure_topics([kafka_bootstrap], settings)
    produce_values([kafka_bootstrap], settings.kafka.topics.raw, values[:10])
    rec = tmp_path / "rec"
    rec.mkdir()
    init_db_dir(rec, 1)
    _run(kafka_bootstrap, settings, rec)

    # a fresh cluster with the same topic names and *more* data: offsets alone look plausible
    with KafkaBroker(data_dir=tmp_path / "fresh") as fresh:
        ensure_topics([fresh.bootstrap], settings)
        produce_values([fresh.bootstrap], settings.kafka.topics.raw, values[:30])
        line = _fails_with(fresh.bootstrap, settings, rec)
        assert line.startswith("KafkaClusterChanged: Kafka cluster changed"), line
        assert fresh.cluster_id in line
        # nothing was read or written on the fresh cluster
        assert consume_all(fresh.bootstrap, settings.kafka.topics.articles) == []


def test_recreated_topic_and_deleted_records_fail_clearly(kafka_bootstrap: str, tmp_path: Path,
                                                          values: list[bytes]) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    settings = _settings()
    raw = settings.kafka.topics.raw
    ensure_topics([kafka_bootstrap], settings)
    produce_values([kafka_bootstrap], raw, values[:10])
    rec = tmp_path / "rec"
    rec.mkdir()
    init_db_dir(rec, 1)
    _run(kafka_bootstrap, settings, rec)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})

    # records the flow never read were deleted (retention): the log now starts past the stored offset
    produce_values([kafka_bootstrap], raw, values[10:20])
    for fut in admin.delete_records([TopicPartition(raw, 0, 15)]).values():
        fut.result(30)
    line = _fails_with(kafka_bootstrap, settings, rec)
    assert "starts at offset 15 but the recovery state resumes at 10" in line, line

    # the topic was deleted and recreated: the log ends before the stored offset
    for fut in admin.delete_topics([raw], operation_timeout=30).values():
        fut.result(30)
    deadline = time.monotonic() + 30
    while True:  # deletion completes asynchronously
        try:
            create_topics(kafka_bootstrap, [raw])
            break
        except RuntimeError:
            assert time.monotonic() < deadline
            time.sleep(0.5)
    produce_values([kafka_bootstrap], raw, values[:3])
    line = _fails_with(kafka_bootstrap, settings, rec)
    assert "ends at offset 3 but the recovery state resumes at 10" in line, line


def test_unreachable_broker_fails_within_the_timeout(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = _settings(timeout_s=2.0)
    t0 = time.monotonic()
    with pytest.raises(Exception) as ei:
        run_main(kafka_flow([f"127.0.0.1:{port}"], settings, tail=False))
    took = time.monotonic() - t0
    line = kafka_error_line(ei.value)
    assert line == (f"KafkaUnavailable: Kafka at 127.0.0.1:{port} did not answer within 2 s (kafka.timeout_s): "
                    "Failed to get metadata: Local: Broker transport failure"), line
    assert took < 8, took


def test_check_resume_rules() -> None:
    check_resume("t", 0, None, 5, "A", (0, 9))  # old snapshot without a cluster id: offsets only
    check_resume("t", 0, "A", -2, "A", (3, 9))  # nothing read yet
    check_resume("t", 0, "A", 9, "A", (3, 9))  # at the end: waits for new records
    for stored, off, marks, text in (("B", 5, (0, 9), "cluster changed"), ("A", 10, (0, 9), "ends at offset 9"),
                                     ("A", 2, (3, 9), "starts at offset 3")):
        with pytest.raises(KafkaClusterChanged, match=text):
            check_resume("t", 0, stored, off, "A", marks)
    assert kafka_error_line(RuntimeError("x")) is None
    try:
        try:
            raise KafkaUnavailable("gone")
        except KafkaUnavailable as e:
            raise RuntimeError("wrapper") from e
    except RuntimeError as w:
        assert kafka_error_line(w) == "KafkaUnavailable: gone"
