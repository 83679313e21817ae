"""The topic contracts: load the JSON Schemas of ``schemas/`` and validate messages against them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator

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
