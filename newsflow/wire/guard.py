"""The last check before a sink: every record fits in a Kafka
message and (when enabled) validates against its topic schema; otherwise it is cut (articles:
long text fields, flagged ``truncated``) or refused with a reason for a dead letter. Pure."""

from __future__ import annotations

from typing import NamedTuple

import orjson
from jsonschema import ValidationError

from newsflow.wire.contracts import validate

#: article fields that may be cut to fit a record under the size limit (longest first)
CUTTABLE = ("body_html", "body_text")


class Checked(NamedTuple):
    value: bytes | None  # the record to write (maybe cut), None when refused
    reason: str | None  # record_too_large | schema_violation when refused
    detail: str


def fit_article(value: bytes, max_bytes: int) -> bytes | None:
    """An ``articles`` record cut to ``max_bytes``: body fields shortened, ``truncated`` set."""
    rec = orjson.loads(value)
    for _ in range(4):
        over = len(value) - max_bytes
        if over <= 0:
            return value
        for f in CUTTABLE:
            s = rec.get(f) or ""
            if s and over > 0:
                keep = max(0, len(s) - over - 64)
                over -= len(s.encode()) - len(s[:keep].encode())
                rec[f] = s[:keep]
        rec["truncated"] = True
        value = orjson.dumps(rec)
    return value if len(value) <= max_bytes else None


def check_record(schema: str, value: bytes, *, max_bytes: int, validate_schema: bool) -> Checked:
    if len(value) > max_bytes:
        cut = fit_article(value, max_bytes) if schema == "articles" else None
        if cut is None:
            return Checked(None, "record_too_large", f"{schema} record of {len(value)} bytes > {max_bytes}")
        value = cut
    if validate_schema:
        try:
            validate(schema, value)
        except ValidationError as e:
            path = "/".join(str(p) for p in e.absolute_path)
            return Checked(None, "schema_violation", f"{schema} record at '{path}': {e.message}"[:1000])
    return Checked(value, None, "")
