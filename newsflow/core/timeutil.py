"""Event-time helpers. All times inside the flow are integer epoch milliseconds (UTC).

Nothing here reads the wall clock: "now" is always passed in, taken from the data.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@lru_cache(maxsize=1 << 14)
def ms_to_iso(ms: int) -> str:
    """Epoch ms -> ISO 8601 UTC with a trailing ``Z`` and second precision (ms when non-zero).
    Memoized (pure): a payload's items share their fetch time, windows their bounds."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    if ms % 1000:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_to_ms(value: str) -> int:
    """ISO 8601 (``Z`` or offset; naive is taken as UTC) -> epoch ms. Memoized for strings
    (pure; the same fetch and publication times are read by every step and digest type)."""
    if type(value) is str:
        return _iso_to_ms_str(value)
    return _iso_to_ms(value)


@lru_cache(maxsize=1 << 14)
def _iso_to_ms_str(value: str) -> int:
    return _iso_to_ms(value)


def _iso_to_ms(value: str) -> int:
    v = value.strip()
    if v.endswith(("Z", "z")):
        v = v[:-1] + "+00:00"
    dt = datetime.fromisoformat(v)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return round((dt - _EPOCH).total_seconds() * 1000)


def dt_to_ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return round((dt - _EPOCH).total_seconds() * 1000)


HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
