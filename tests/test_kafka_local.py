"""The real local Kafka broker: round trip, topic helper, and the small pure helpers."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka_local import free_ports, random_cluster_id

from newsflow.connectors.topics import create_topics, producer_config
from tests.kafka_fixture import unique_topic_name

N = 100


@pytest.mark.kafka
def test_produce_then_consume_100_in_order(kafka_bootstrap: str, kafka_topic: str) -> None:
    producer = Producer(producer_config(kafka_bootstrap, {"linger.ms": "5"}))
    delivered: list[tuple[int, int]] = []

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))

    for i in range(N):
        producer.produce(
            kafka_topic,
            key=f"k{i}".encode(),
            value=f"message-{i:03d}".encode(),
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    assert delivered == [(0, i) for i in range(N)]

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": unique_topic_name("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: list[tuple[bytes | None, bytes | None, int]] = []
    try:
        consumer.subscribe([kafka_topic])
        deadline = time.monotonic() + 60
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value(), msg.offset()))
    finally:
        consumer.close()

    assert len(got) == N
    assert [v for _, v, _ in got] == [f"message-{i:03d}".encode() for i in range(N)]
    assert [k for k, _, _ in got] == [f"k{i}".encode() for i in range(N)]
    assert [o for _, _, o in got] == list(range(N))


@pytest.mark.kafka
def test_create_topics_is_idempotent(
    kafka_bootstrap: str, kafka_topic_factory: Callable[..., str]
) -> None:
    name = kafka_topic_factory("idem", partitions=3)
    create_topics(kafka_bootstrap, [name, name], partitions=3)  # exists already: no error
    md = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(name, timeout=10)
    assert sorted(md.topics[name].partitions) == [0, 1, 2]


def test_cluster_id_has_kafkas_uuid_format() -> None:
    ids = {random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) and not i.startswith("-") for i in ids)


def test_free_ports_are_distinct() -> None:
    ports = free_ports(4)
    assert len(set(ports)) == 4
    assert all(1024 < p < 65536 for p in ports)


def test_unique_topic_names_are_legal_and_distinct() -> None:
    a = unique_topic_name("raw", "test_x[param/1 ü]")
    b = unique_topic_name("raw", "test_x[param/1 ü]")
    assert a != b
    assert re.fullmatch(r"[A-Za-z0-9._-]+", a) and len(a) <= 249
