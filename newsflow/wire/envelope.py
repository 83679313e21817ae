"""Type and range checks of a ``feeds.raw`` envelope at the edge of the flow.

``schemas/feeds.raw.v1.json`` is the contract; this is the same contract as plain Python
checks (jsonschema costs ~48x more per message, see ``bench/bench_envelope.py``), lenient in
two documented ways: ``schema``/``schema_version``/``poll_id``/``status``/``body_b64`` may be
absent (hand-written archives), and a ``fetched_at`` with an offset instead of ``Z`` is accepted.
Everything else a step downstream relies on is checked here, so no step ever sees a mistyped
field: a bad envelope raises :class:`EnvelopeError` with a machine-readable ``reason``.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

from newsflow.core.timeutil import iso_to_ms
from newsflow.model.vocab import HealthStatus

#: fetch times outside [1995-01-01, 2100-01-01) are impossible (feeds did not exist / too far)
MIN_FETCHED_MS = 788_918_400_000
MAX_FETCHED_MS = 4_102_444_800_000
#: longest accepted id / URL / header / registry string (chars); longer is not a real value
MAX_SHORT_CHARS = 8_192
TIERS = frozenset({"T1", "T2", "T3", "T4", "T5"})
#: the values of ``poll_status`` (``newsflow.model.vocab.HealthStatus``)
POLL_STATUSES = frozenset(s.value for s in HealthStatus)
_OPTIONAL_STR = ("poll_id", "final_url", "etag", "last_modified", "content_type", "publisher",
                 "category", "language", "body_b64", "body_ref", "error")


class EnvelopeError(ValueError):
    """A ``feeds.raw`` message that is not a valid envelope; ``reason`` is the dead-letter code."""

    def __init__(self, msg: str, reason: str = "bad_envelope") -> None:
        super().__init__(msg)
        self.reason = reason


def _bad(msg: str, reason: str = "bad_envelope") -> NoReturn:
    raise EnvelopeError(msg[:300], reason)


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def check_envelope(d: dict[str, Any], *, min_ms: int = MIN_FETCHED_MS, max_ms: int = MAX_FETCHED_MS) -> int:
    """Check every field's type and range; returns ``fetched_at`` as epoch ms."""
    if d.get("schema", "feeds.raw") != "feeds.raw":
        _bad(f"schema is {d.get('schema')!r}, not 'feeds.raw'")
    sv = d.get("schema_version", 1)
    if type(sv) is not int or sv != 1:
        _bad(f"unsupported schema_version {sv!r}")
    for name in ("feed_id", "url"):  # a heartbeat tick has url ""
        v = d.get(name)
        if not isinstance(v, str) or (name == "feed_id" and not v) or len(v) > MAX_SHORT_CHARS:
            _bad(f"{name} must be a {'non-empty ' if name == 'feed_id' else ''}string of at most "
                 f"{MAX_SHORT_CHARS} chars, got {_kind(v)}")
    for name in _OPTIONAL_STR:
        v = d.get(name)
        if v is not None and not isinstance(v, str):
            _bad(f"{name} must be a string or null, got {_kind(v)}")
        if v is not None and name != "body_b64" and len(v) > MAX_SHORT_CHARS:
            _bad(f"{name} is longer than {MAX_SHORT_CHARS} chars")
    status = d.get("status", 200)
    if type(status) is not int or not 0 <= status <= 599:
        _bad(f"status must be an integer 0-599, got {status!r}")
    ps = d.get("poll_status")
    if ps is not None and ps not in POLL_STATUSES:
        _bad(f"poll_status must be a feed-health status or null, got {str(ps)[:40]!r}")
    tier = d.get("tier")
    if tier is not None and (not isinstance(tier, str) or tier not in TIERS):
        _bad(f"tier must be T1-T5 or null, got {tier!r}")
    rel = d.get("reliability")
    if rel is not None and (type(rel) not in (int, float) or not math.isfinite(rel) or not 0 <= rel <= 1):
        _bad(f"reliability must be a number in [0, 1] or null, got {rel!r}")
    fa = d.get("fetched_at")
    if not isinstance(fa, str):
        _bad(f"fetched_at must be an ISO 8601 string, got {_kind(fa)}", "bad_fetched_at")
    try:
        ms = iso_to_ms(fa[:64])
    except (ValueError, OverflowError) as e:
        _bad(f"fetched_at {fa[:64]!r} is not an ISO 8601 time: {e}", "bad_fetched_at")
    if not min_ms <= ms < max_ms:
        _bad(f"fetched_at {fa[:64]!r} is outside the possible range [1995, 2100)", "impossible_fetched_at")
    return ms
