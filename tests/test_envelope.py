"""Every ``feeds.raw`` field is type- and range-checked at the edge."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import ValidationError

from newsflow.wire.codec import EnvelopeError, decode_raw
from newsflow.wire.contracts import validate

GOOD: dict[str, Any] = {
    "schema": "feeds.raw", "schema_version": 1, "poll_id": "f@1", "feed_id": "f", "url": "http://x/",
    "final_url": None, "fetched_at": "2026-03-02T06:00:00Z", "status": 200, "etag": None,
    "last_modified": None, "content_type": None, "publisher": "P", "tier": "T2", "category": "world",
    "language": "en", "body_b64": None, "body_ref": None, "reliability": 0.9,
}

#: (field, bad value, expected reason): every mistyped field the issue found crashing the flow
BAD = [
    ("fetched_at", 1394495999000, "bad_fetched_at"),
    ("fetched_at", ["2026-03-02T06:00:00Z"], "bad_fetched_at"),
    ("fetched_at", "9999-12-31T23:59:59Z", "impossible_fetched_at"),
    ("fetched_at", "2100-01-01T00:00:00Z", "impossible_fetched_at"),
    ("fetched_at", "1970-01-01T00:00:00Z", "impossible_fetched_at"),
    ("fetched_at", "yesterday", "bad_fetched_at"),
    ("category", {"a": 1}, "bad_envelope"),
    ("category", 3, "bad_envelope"),
    ("publisher", 7, "bad_envelope"),
    ("publisher", {"name": "x"}, "bad_envelope"),
    ("tier", ["T1"], "bad_envelope"),
    ("tier", 1, "bad_envelope"),
    ("tier", "T9", "bad_envelope"),
    ("reliability", "high", "bad_envelope"),
    ("reliability", 1.5, "bad_envelope"),
    ("reliability", True, "bad_envelope"),
    ("body_ref", 5, "bad_envelope"),
    ("language", 5, "bad_envelope"),
    ("final_url", 7, "bad_envelope"),
    ("etag", [1], "bad_envelope"),
    ("content_type", {}, "bad_envelope"),
    ("status", "200", "bad_envelope"),
    ("status", 1000, "bad_envelope"),
    ("status", True, "bad_envelope"),
    ("feed_id", 1, "bad_envelope"),
    ("feed_id", "", "bad_envelope"),
    ("url", None, "bad_envelope"),
    ("schema_version", 2, "bad_envelope"),
    ("body_b64", "@@not base64@@", "bad_envelope"),
    ("body_b64", 12, "bad_envelope"),
]


@pytest.mark.parametrize(("field", "value", "reason"), BAD, ids=[f"{f}={v!r}"[:40] for f, v, _ in BAD])
def test_mistyped_or_impossible_field_is_an_envelope_error(field: str, value: Any, reason: str) -> None:
    with pytest.raises(EnvelopeError) as ei:
        decode_raw(orjson.dumps({**GOOD, field: value}))
    assert ei.value.reason == reason
    assert field in str(ei.value) or reason != "bad_envelope" or field in ("body_b64", "schema_version")


@pytest.mark.parametrize(("field", "value", "reason"), [b for b in BAD if b[0] != "body_b64"])
def test_the_schema_rejects_what_the_edge_rejects(field: str, value: Any, reason: str) -> None:
    with pytest.raises(ValidationError):
        validate("feeds.raw", {**GOOD, field: value})


def test_the_issue_repro_and_oversized_envelopes() -> None:
    with pytest.raises(EnvelopeError) as ei:
        decode_raw(b'{"feed_id":"f","url":"http://x/","fetched_at":1394495999000}')
    assert ei.value.reason == "bad_fetched_at"
    with pytest.raises(EnvelopeError) as ei:
        decode_raw(orjson.dumps(GOOD), max_bytes=100)
    assert ei.value.reason == "envelope_too_large"


def test_good_and_minimal_envelopes_pass() -> None:
    p = decode_raw(orjson.dumps(GOOD))
    assert (p.tier, p.reliability, p.fetched_at_ms) == ("T2", 0.9, 1_772_431_200_000)
    p = decode_raw(b'{"feed_id":"f","url":"http://x/","fetched_at":"2026-03-02T07:00:00+01:00"}')
    assert p.status == 200 and p.fetched_at_ms == 1_772_431_200_000


def test_every_real_archive_envelope_passes(shared_dir: Path) -> None:
    n = 0
    for f in sorted((shared_dir / "data" / "real-feeds").glob("*.feeds.raw.jsonl.gz")):
        with gzip.open(f, "rb") as fh:
            for line in fh:
                decode_raw(line)
                n += 1
    assert n > 1000
