"""Topics as contracts on the real broker: partitions, clean-up policy and retention at creation,
schema headers on every message."""

from __future__ import annotations

import uuid

import orjson
import pytest

from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.topics import CLEANUP_POLICY, ensure_topics, produce_values
from newsflow.wire.contracts import ROLE_SCHEMAS, headers_for
from tests.kafka_fixture import consume_all

pytestmark = pytest.mark.kafka


def unique_topics() -> Topics:
    suffix = uuid.uuid4().hex[:8]
    return Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})


def describe(bootstrap: str, names: list[str]) -> dict[str, tuple[int, dict[str, str]]]:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(timeout=30)
    res = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    out = {}
    for r, fut in admin.describe_configs(res).items():
        cfg = {k: v.value for k, v in fut.result(30).items()}
        out[r.name] = (len(md.topics[r.name].partitions), cfg)
    return out


def test_topics_are_created_with_partitions_policies_and_retention(kafka_bootstrap: str) -> None:
    topics = unique_topics()
    settings = Settings(kafka=KafkaSettings(topics=topics, partitions=2,
                                            retention_hours={"raw": 48, "digests": 24 * 365}))
    created = ensure_topics([kafka_bootstrap], settings, partitions=3)  # run --partitions 3
    assert sorted(created) == sorted(topics.roles().values())
    got = describe(kafka_bootstrap, list(topics.roles().values()))
    for role, name in topics.roles().items():
        parts, cfg = got[name]
        assert parts == 3, name
        assert cfg["cleanup.policy"] == CLEANUP_POLICY[role], name
    assert {got[topics.articles][1]["cleanup.policy"], got[topics.digests][1]["cleanup.policy"],
            got[topics.feed_health][1]["cleanup.policy"]} == {"compact,delete"}
    assert {got[topics.raw][1]["cleanup.policy"], got[topics.deadletter][1]["cleanup.policy"]} == {"delete"}
    assert got[topics.raw][1]["retention.ms"] == str(48 * 3_600_000)
    assert got[topics.digests][1]["retention.ms"] == str(365 * 24 * 3_600_000)
    assert got[topics.deadletter][1]["retention.ms"] == str(14 * 24 * 3_600_000)  # the default
    # idempotent; partitions default to kafka.partitions
    assert ensure_topics([kafka_bootstrap], settings) == []
    other = unique_topics()
    ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=other, partitions=2)))
    assert describe(kafka_bootstrap, [other.raw])[other.raw][0] == 2


def test_produced_raw_messages_carry_schema_headers(kafka_bootstrap: str) -> None:
    topics = unique_topics()
    ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
    produce_values([kafka_bootstrap], topics.raw, [b'{"feed_id": "f"}'])
    (msg,) = consume_all(kafka_bootstrap, topics.raw)
    assert dict(msg.headers()) == {"schema": b"feeds.raw", "schema_version": b"1",
                                   "content-type": b"application/json"}


def test_headers_match_each_schema_file() -> None:
    from newsflow.wire.contracts import SCHEMA_DIR, TOPIC_SCHEMAS

    for role, (name, version) in ROLE_SCHEMAS.items():
        assert TOPIC_SCHEMAS[name] == f"{name}.v{version}.json"
        schema = orjson.loads((SCHEMA_DIR / TOPIC_SCHEMAS[name]).read_bytes())
        assert schema["$id"].endswith(f"{name}.v{version}.json")
        assert dict(headers_for(role))["schema"] == name.encode()
        # one compatibility policy, stated in every schema
        assert "Compatibility:" in schema["description"], name
        assert "consumers ignore unknown fields" in schema["description"], name
