"""Digest types and windows on event time.

:class:`DigestSchedule` — morning brief / midday update / evening recap (24 h windows delivered
at local times), weekly roundup, rolling every N minutes; :meth:`DigestSchedule.closing` says
which windows close when the event-time watermark moves from ``prev`` to ``cur``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from zoneinfo import ZoneInfo

from newsflow.core.timeutil import HOUR_MS, ms_to_iso

MINUTE_MS = 60_000
DAY_MS = 86_400_000
TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED, FEED_HEALTH = (
    "Top Stories",
    "Noteworthy",
    "Also Mentioned",
    "Feed Health Report",
)

# --------------------------------------------------------------------------------------
# Digest types and the event-time schedule
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SectionLimits:
    top: int
    noteworthy: int
    also: int


@dataclass(frozen=True, slots=True)
class DigestType:
    """One kind of digest. ``kind``: ``daily`` (delivered every day at ``local_time``),
    ``weekly`` (``weekday`` 0=Monday at ``local_time``) or ``rolling`` (every
    ``every_minutes``, UTC-aligned, covering the last ``length_minutes``)."""

    name: str
    title: str
    kind: str
    limits: SectionLimits
    summary_words: tuple[int, int] = (50, 75)
    local_time: dtime = dtime(7, 0)
    weekday: int = 6
    every_minutes: int = 60
    length_minutes: int | None = None  # rolling: default = every_minutes (tumbling)

    @property
    def rolling_length_ms(self) -> int:
        return (self.length_minutes or self.every_minutes) * MINUTE_MS


MORNING = DigestType(
    "morning_brief", "Morning Brief", "daily", SectionLimits(15, 10, 10), (50, 75), dtime(7, 0)
)
MIDDAY = DigestType(
    "midday_update", "Midday Update", "daily", SectionLimits(10, 5, 5), (30, 50), dtime(12, 0)
)
EVENING = DigestType(
    "evening_recap", "Evening Recap", "daily", SectionLimits(15, 10, 10), (50, 75), dtime(18, 0)
)
WEEKLY = DigestType(
    "weekly_roundup",
    "Weekly Roundup",
    "weekly",
    SectionLimits(30, 15, 15),
    (100, 150),
    dtime(8, 0),
    weekday=6,
)
ROLLING = DigestType(
    "rolling", "Rolling Digest", "rolling", SectionLimits(15, 10, 10), (50, 75), every_minutes=60
)
DEFAULT_TYPES: tuple[DigestType, ...] = (MORNING, MIDDAY, EVENING, WEEKLY, ROLLING)


@dataclass(frozen=True, slots=True)
class DigestWindow:
    digest_type: str
    start_ms: int
    end_ms: int

    @property
    def digest_id(self) -> str:
        return f"{self.digest_type}:{ms_to_iso(self.start_ms)}"

    def contains(self, t_ms: int) -> bool:
        return self.start_ms <= t_ms < self.end_ms


@dataclass(frozen=True, slots=True)
class DigestSchedule:
    """Digest types + the users' time zone (delivery times are local, via zoneinfo)."""

    tz: str = "UTC"
    types: tuple[DigestType, ...] = DEFAULT_TYPES

    def type(self, name: str) -> DigestType:
        for t in self.types:
            if t.name == name:
                return t
        msg = f"unknown digest type {name!r}"
        raise KeyError(msg)

    # ---- delivery instants ----
    def _at(self, d: date, t: dtime) -> int:
        """Epoch ms of local date ``d`` at local time ``t`` (DST gaps/folds: fold=0)."""
        local = datetime(d.year, d.month, d.day, t.hour, t.minute, t.second, tzinfo=self._zone())
        return int(local.astimezone(UTC).timestamp() * 1000)

    def _zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def _local_date(self, ms: int) -> date:
        return datetime.fromtimestamp(ms / 1000, tz=self._zone()).date()

    def _step_days(self, dt: DigestType) -> int:
        return 7 if dt.kind == "weekly" else 1

    def _delivery_dates(self, dt: DigestType, d0: date, d1: date) -> Iterable[date]:
        d = d0
        while d <= d1:
            if dt.kind == "daily" or d.weekday() == dt.weekday:
                yield d
            d += timedelta(days=1)

    def window_ending(self, dt: DigestType, d: date) -> DigestWindow:
        """The window of ``dt`` delivered on local date ``d`` (start = previous delivery, so
        a DST day has a 23 h or 25 h window and windows never overlap or leave gaps)."""
        end = self._at(d, dt.local_time)
        start = self._at(d - timedelta(days=self._step_days(dt)), dt.local_time)
        return DigestWindow(dt.name, start, end)

    def closing(
        self, prev_watermark_ms: int | None, watermark_ms: int, *, limit: int | None = None
    ) -> list[DigestWindow]:
        """Windows whose end is in ``(prev, cur]`` — they close now. Ordered by end, then type
        order. ``prev=None`` (nothing seen yet) closes nothing. ``limit`` keeps the last N."""
        if prev_watermark_ms is None or watermark_ms <= prev_watermark_ms:
            return []
        out: list[tuple[int, int, DigestWindow]] = []
        for ti, dt in enumerate(self.types):
            if dt.kind == "rolling":
                every = dt.every_minutes * MINUTE_MS
                e = (prev_watermark_ms // every + 1) * every
                while e <= watermark_ms:
                    out.append((e, ti, DigestWindow(dt.name, e - dt.rolling_length_ms, e)))
                    e += every
                continue
            d0 = self._local_date(prev_watermark_ms) - timedelta(days=1)
            d1 = self._local_date(watermark_ms) + timedelta(days=1)
            for d in self._delivery_dates(dt, d0, d1):
                w = self.window_ending(dt, d)
                if prev_watermark_ms < w.end_ms <= watermark_ms:
                    out.append((w.end_ms, ti, w))
        out.sort(key=lambda x: (x[0], x[1]))
        wins = [w for _, _, w in out]
        return wins[-limit:] if limit is not None else wins

    def closing_over_gaps(self, prev_watermark_ms: int | None, watermark_ms: int, data_hours: Iterable[int]
                          ) -> tuple[list[DigestWindow], tuple[int, int] | None]:
        """:meth:`closing`, only where event time has data: after a jump over a quiet stretch,
        the windows that end after the old data's longest window and before the first new data
        (the first of ``data_hours``, hours as ``ms // HOUR``, after ``prev``) are empty and
        skipped (a year's jump made 850,717 empty digests). Returns the closing windows and the
        range ``(after, upto]`` of the skipped windows' ends (None: nothing skipped)."""
        if prev_watermark_ms is None:
            return [], None
        reach = prev_watermark_ms + self.retention_ms()
        if watermark_ms <= reach:
            return self.closing(prev_watermark_ms, watermark_ms), None
        new = [h for h in data_hours if h * HOUR_MS > prev_watermark_ms]
        resume = max(reach, min(min(new) * HOUR_MS, watermark_ms) if new else watermark_ms)
        return self.closing(prev_watermark_ms, reach) + self.closing(resume, watermark_ms), (reach, resume)

    def windows_containing(self, t_ms: int, types: Collection[str] | None = None) -> list[DigestWindow]:
        """Every window (one per type; several for sliding rolling windows) containing ``t``, of
        the named ``types`` (None: all)."""
        out = []
        for dt in self.types:
            if types is not None and dt.name not in types:
                continue
            if dt.kind == "rolling":
                every = dt.every_minutes * MINUTE_MS
                e = (t_ms // every + 1) * every
                while e - dt.rolling_length_ms <= t_ms:
                    out.append(DigestWindow(dt.name, e - dt.rolling_length_ms, e))
                    e += every
                continue
            d = self._local_date(t_ms) - timedelta(days=1)
            for dd in self._delivery_dates(dt, d, d + timedelta(days=9)):
                w = self.window_ending(dt, dd)
                if w.contains(t_ms):
                    out.append(w)
                    break
        return out

    def next_close_ms(self, after_ms: int) -> int:
        """The first window end strictly after ``after_ms`` (to schedule the next tick)."""
        ends = [w.end_ms for w in self.closing(after_ms, after_ms + 8 * DAY_MS)]
        return min(ends) if ends else after_ms + DAY_MS

    def retention_ms(self, types: Collection[str] | None = None) -> int:
        """How long records must be kept for the longest window (+1 day for DST), of every type
        or of the named ``types``."""
        longest = max(
            (
                dt.rolling_length_ms
                if dt.kind == "rolling"
                else self._step_days(dt) * DAY_MS + DAY_MS
                for dt in self.types
                if types is None or dt.name in types
            ),
            default=DAY_MS,
        )
        return longest
