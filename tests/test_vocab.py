"""The shared vocabularies (``newsflow.model.vocab``) agree with the topic schemas and serialise
as their plain strings."""

from __future__ import annotations

import json

import orjson

from newsflow.core.hashing import stable_id
from newsflow.model.vocab import (
    FAILED_POLL_STATUSES,
    SUCCESS_STATUSES,
    UNHEALTHY_STATUSES,
    Disposition,
    HealthStatus,
    StoryPhase,
    Trend,
)
from newsflow.wire.codec import health_record
from newsflow.wire.contracts import SCHEMA_DIR


def test_health_status_is_the_schema_enum() -> None:
    schema = json.loads((SCHEMA_DIR / "feed-health.v1.json").read_text())
    assert {s.value for s in HealthStatus} == set(schema["properties"]["status"]["enum"])


def test_disposition_is_the_schema_enum() -> None:
    schema = json.loads((SCHEMA_DIR / "articles.v1.json").read_text())
    assert [d.value for d in Disposition] == schema["properties"]["disposition"]["enum"]
    assert orjson.dumps({"disposition": Disposition.SAME_EVENT}) == b'{"disposition":"same_event"}'


def test_story_phase_is_the_schema_enum() -> None:
    schema = json.loads((SCHEMA_DIR / "stories.v1.json").read_text())
    assert [p.value for p in StoryPhase] == schema["properties"]["phase"]["enum"]
    assert orjson.dumps({"phase": StoryPhase.DEVELOPING}) == b'{"phase":"developing"}'


def test_trend_is_the_schema_enum() -> None:
    """The trend of a section item and of a topic_index topic: the members, or null."""
    schema = json.loads((SCHEMA_DIR / "digests.v1.json").read_text())
    props = schema["properties"]
    item = props["sections"]["items"]["properties"]["items"]["items"]["properties"]
    topic = props["topic_index"]["items"]["properties"]
    for enum in (item["trend"]["enum"], topic["trend"]["enum"]):
        assert [t.value for t in Trend] + [None] == enum
    assert orjson.dumps({"trend": Trend.EMERGING}) == b'{"trend":"EMERGING"}'


def test_status_sets_partition_the_emitted_statuses() -> None:
    assert not SUCCESS_STATUSES & FAILED_POLL_STATUSES
    assert set(HealthStatus) - {HealthStatus.REDIRECTED} == SUCCESS_STATUSES | FAILED_POLL_STATUSES
    assert {HealthStatus.ALL_UNDATED, HealthStatus.SILENT_ZERO} == UNHEALTHY_STATUSES - FAILED_POLL_STATUSES


def test_members_serialise_and_hash_as_their_strings() -> None:
    for s in (*HealthStatus, *StoryPhase, *Trend):
        assert orjson.dumps(s) == orjson.dumps(s.value)
        assert stable_id("flow", "f", "1", s) == stable_id("flow", "f", "1", s.value)
        assert f"{s}" == s.value and str(s) == s.value
    rec = health_record("f", 0, HealthStatus.NOT_MODIFIED, items=0)
    assert orjson.dumps(rec) == orjson.dumps(health_record("f", 0, "not_modified", items=0))
