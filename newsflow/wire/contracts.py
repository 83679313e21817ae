"""The topic contracts: load the JSON Schemas of ``schemas/`` and validate messages against them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator

from newsflow.model.records import (
    ARTICLE_SCHEMA_VERSION,
    DEADLETTER_SCHEMA_VERSION,
    DIGEST_SCHEMA_VERSION,
    FEED_HEALTH_SCHEMA_VERSION,
    RAW_SCHEMA_VERSION,
)

#: the topic contracts: the top-level ``schemas/`` directory, shipped inside the package
#: (``newsflow/wire/schemas`` is a link to it; wheels carry a copy)
SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
TOPIC_SCHEMAS = {
    "feeds.raw": "feeds.raw.v1.json",
    "articles": "articles.v1.json",
    "digests": "digests.v1.json",
    "feed-health": "feed-health.v1.json",
    "deadletter": "deadletter.v1.json",
    "interactions": "interactions.v1.json",
    "stories": "stories.v1.json",
}


#: topic role (a key of ``[kafka.topics]``) -> (schema name, schema version): what the
#: ``schema`` / ``schema_version`` headers of every produced message say
ROLE_SCHEMAS: dict[str, tuple[str, int]] = {
    "raw": ("feeds.raw", RAW_SCHEMA_VERSION),
    "articles": ("articles", ARTICLE_SCHEMA_VERSION),
    "digests": ("digests", DIGEST_SCHEMA_VERSION),
    "feed_health": ("feed-health", FEED_HEALTH_SCHEMA_VERSION),
    "deadletter": ("deadletter", DEADLETTER_SCHEMA_VERSION),
    "interactions": ("interactions", 1),  # produced by reader apps (newsflow.wire.codec)
    "stories": ("stories", 1),
}
CONTENT_TYPE = b"application/json"

#: topic role -> (key field, event-time field) of its records: the idempotent key a consumer
#: compacts on, and the time the records of a finished file replay are ordered by
#: (:func:`newsflow.connectors.files.canonical_order`)
ROLE_RECORD_FIELDS: dict[str, tuple[str, str]] = {
    "articles": ("key", "fetched_at"),
    "stories": ("story_id", "updated_at"),
    "digests": ("digest_id", "generated_at"),
    "feed_health": ("record_id", "at"),
    "deadletter": ("dl_id", "fetched_at"),
}


@functools.cache
def headers_for(role: str) -> tuple[tuple[str, bytes], ...]:
    """Kafka headers of a message of the topic role ``role``: ``schema``, ``schema_version``,
    ``content-type`` (consumers can route or skip without parsing the value)."""
    name, version = ROLE_SCHEMAS[role]
    return (("schema", name.encode()), ("schema_version", str(version).encode()),
            ("content-type", CONTENT_TYPE))


@functools.cache
def validator(schema_name: str) -> Draft202012Validator:
    schema = orjson.loads((SCHEMA_DIR / TOPIC_SCHEMAS[schema_name]).read_bytes())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def validate(schema_name: str, message: dict[str, Any] | bytes) -> None:
    """Raise ``jsonschema.ValidationError`` if ``message`` does not match the topic schema."""
    if isinstance(message, bytes | bytearray):
        message = orjson.loads(message)
    validator(schema_name).validate(message)
