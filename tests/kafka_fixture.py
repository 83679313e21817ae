"""Pytest fixtures for a real Kafka broker (loaded by tests/conftest.py via ``pytest_plugins``).

* ``kafka_bootstrap`` (session): ``"host:port"`` of ``$KAFKA_BOOTSTRAP`` if set (checked to
  answer), else of a broker started once for the session by ``scripts/kafka/kafka_local.py`` and stopped
  at the end. It never skips: a broker that can't start is an error of every test that needs it.
* ``kafka_topic_factory`` (function): ``make(prefix="t", partitions=1, create=True) -> name``,
  a topic name unique to the test (and created, with leaders, unless ``create=False``).
* ``kafka_topic``: one fresh single-partition topic.
* ``unique_topic_name(prefix, hint)``: the naming rule, usable outside fixtures.

The broker is a process-wide singleton, so importing these fixtures in more than one place
(``pytest_plugins`` and ``from tests.kafka_fixture import *``) still starts one broker.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka_local import KafkaBroker, metadata_ok

from newsflow.connectors.topics import create_topics

__all__ = ["consume_all", "kafka_bootstrap", "kafka_topic", "kafka_topic_factory", "unique_topic_name"]

_lock = threading.Lock()
_broker: KafkaBroker | None = None


def _session_broker(config: pytest.Config) -> str:
    global _broker
    with _lock:
        if _broker is None:
            broker = KafkaBroker(startup_timeout=float(os.environ.get("KAFKA_START_TIMEOUT", 90)))
            broker.start()  # raises KafkaStartError with the log tail: never a skip
            _broker = broker

            def _stop() -> None:
                global _broker
                with _lock:
                    if _broker is not None:
                        _broker.stop()
                        _broker = None

            config.add_cleanup(_stop)
        return _broker.bootstrap


@pytest.fixture(scope="session")
def kafka_bootstrap(pytestconfig: pytest.Config) -> str:
    """Bootstrap servers of a real broker: ``$KAFKA_BOOTSTRAP`` or one started for the session."""
    env = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if env:
        if not metadata_ok(env, timeout=10.0):
            msg = f"KAFKA_BOOTSTRAP={env} does not answer a metadata request"
            raise RuntimeError(msg)
        return env
    return _session_broker(pytestconfig)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def unique_topic_name(prefix: str = "t", hint: str = "") -> str:
    """``<prefix>-<hint>-<8 hex>``, only Kafka-legal characters, at most 200 chars."""
    parts = [_UNSAFE.sub("-", p).strip("-.") for p in (prefix, hint)]
    base = "-".join(p for p in parts if p)[:180] or "t"
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic_factory(
    kafka_bootstrap: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """Make per-test unique topics; they are deleted (best effort) after the test."""
    made: list[str] = []
    hint = request.node.name

    def make(prefix: str = "t", partitions: int = 1, create: bool = True) -> str:
        name = unique_topic_name(prefix, hint)
        if create:
            create_topics(kafka_bootstrap, [name], partitions=partitions)
        made.append(name)
        return name

    yield make

    if made:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        for fut in admin.delete_topics(made, operation_timeout=10).values():
            # already gone or never created: not the test's concern
            with contextlib.suppress(Exception):
                fut.result(timeout=15)


@pytest.fixture
def kafka_topic(kafka_topic_factory: Callable[..., str]) -> str:
    """One fresh single-partition topic."""
    return kafka_topic_factory()


def consume_all(bootstrap: str, topic: str) -> list[Any]:
    """Every message of every partition of ``topic`` (reads to the end, then stops)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                  "enable.partition.eof": True, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    md = c.list_topics(topic, timeout=30)
    parts = sorted(md.topics[topic].partitions)
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    out: list[Any] = []
    eof: set[int] = set()
    while len(eof) < len(parts):
        msg = c.poll(10)
        assert msg is not None, f"timed out reading {topic}"
        if msg.error():
            if msg.error().code() == msg.error()._PARTITION_EOF:
                eof.add(msg.partition())
                continue
            raise AssertionError(msg.error())
        out.append(msg)
    c.close()
    return out
