"""The digest feeder's logic (:mod:`newsflow.flows.digest_windows`): one story shard's side of the
digests, its entries sent to the windows that read them, its part of each window sealed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.core.timeutil import HOUR_MS
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.schedule import DigestWindow
from newsflow.digest.selection import entry_time_ms
from newsflow.flows import metrics
from newsflow.flows.digest_windows import (
    STEP_FEEDER,
    FeederTick,
    SlimEntry,
    WindowEntry,
    WindowSeal,
    window_reads,
    windows_touching_hour,
)
from newsflow.flows.keys import (
    window_key,
)
from newsflow.model.messages import (
    FromShard,
    HealthReport,
    ScoredArticle,
    StoryMerge,
)
from newsflow.model.vocab import Disposition
from newsflow.runtime.pickling import Shared


class FeederLogic(StatefulLogic[Any, tuple[str, Any], Snapshot]):
    """One story shard's side of the digests (same key as the shard): sends each article's
    entry to the windows that read it, keeps the coverage of the shard's stories and seals its
    part of each window when its watermark passes the window's end; the clock gets its ticks
    and health reports, never an article."""

    def __init__(self, settings: Settings, resume: Snapshot | None, clock_key: str, recovery: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.clock_key = clock_key
        self.schedule = settings.digests.schedule()
        self.types = tuple(t.name for t in self.schedule.types)
        self.basis = settings.digests.to_config().time_basis
        self.family = settings.normalize.families().family
        st = restore(STEP_FEEDER, resume) if resume is not None else {}
        self.buckets: dict[int, list[SlimEntry]] = st.get("buckets", {})
        self.wm: int = st.get("watermark", -(1 << 62))
        self.sent: dict[DigestWindow, None] = st.get("sent", {})
        self.hours: dict[int, None] = st.get("hours", {})
        self.reported: dict[int, None] = st.get("reported", {})
        self.coverage: StoryCoverage = st["coverage"] if "coverage" in st else StoryCoverage()
        self.shard: str | None = st.get("shard_key")

    def on_item(self, value: FromShard) -> tuple[Iterable[tuple[str, Any]], bool]:
        msg = value.message
        self.shard = value.shard
        if isinstance(msg, ScoredArticle):
            e = msg.entry
            assert e is not None
            fetched = e.fetched_ms
            assert fetched is not None  # (an articles record's fetch time is required)
            h = fetched // HOUR_MS
            slim = SlimEntry(e.article_id, e.story_id, e.feed_id, entry_time_ms(e, self.basis),
                             e.disposition == Disposition.EXACT_DUPLICATE)
            out: list[tuple[str, Any]] = []
            shared = None
            late: set[str] = set()
            for w in windows_touching_hour(self.schedule, h, self.types):
                if w.end_ms <= self.wm:  # sealed already: a late record for it
                    if w.contains(fetched):
                        late.add(w.digest_type)
                    continue
                self.sent[w] = None
                if window_reads(w, slim.at_ms, slim.exact):
                    shared = shared or Shared(WindowEntry(e))
                    out.append((window_key(w), shared))
            for _ in late:
                metrics.LATE.inc()
            self.buckets.setdefault(h, []).append(slim)
            if h not in self.reported:
                self.reported[h] = self.hours[h] = None
            self.coverage.add(msg.record, self.family)
            return out, StatefulLogic.RETAIN
        if isinstance(msg, HealthReport):
            self.coverage.add_health(msg.record)
            return ([(self.clock_key, value)] if msg.report else []), StatefulLogic.RETAIN
        if isinstance(msg, StoryMerge):
            self.coverage.merge(msg.gone, msg.into, msg.at_ms)
            return (), StatefulLogic.RETAIN
        if msg.watermark <= self.wm:
            return (), StatefulLogic.RETAIN
        self.wm = msg.watermark
        due = [w for w in self.sent if w.end_ms <= self.wm]
        out = [self._seal(w, value.shard) for w in due]
        out.append((self.clock_key, FeederTick(value.shard, self.wm, tuple(self.hours), tuple(due))))
        self.hours = {}
        self._expire()
        return out, StatefulLogic.RETAIN

    def _seal(self, w: DigestWindow, shard: str) -> tuple[str, WindowSeal]:
        del self.sent[w]
        slims = [s for h in range(w.start_ms // HOUR_MS, w.end_ms // HOUR_MS + 1) for s in self.buckets.get(h, ())
                 if window_reads(w, s.at_ms, s.exact)]
        cov = self.coverage
        aliases: dict[str, str] = {}
        stories: dict[str, tuple[list[str], list[str]]] = {}
        feeds: dict[str, float | None] = {}
        for s in slims:
            sid = s.story_id
            if sid:
                to = cov.alias(sid, w.end_ms) if cov.merged else sid
                if to != sid:
                    aliases[sid] = to
                if to not in stories:
                    stories[to] = cov.as_of(to, w.end_ms)
            if s.feed_id and s.feed_id not in feeds:
                feeds[s.feed_id] = cov.reliability_of(s.feed_id, w.end_ms)
        return window_key(w), WindowSeal(w, shard, tuple(s.article_id for s in slims), aliases, stories, feeds)

    def on_eof(self) -> tuple[Iterable[tuple[str, Any]], bool]:
        """The end of a finite input: the shard's part of every window it sent records to (the
        clock assembles the latest of each type, as of the end). With recovery the end is a
        pause, not the end of time: a rerun resumes the windows, so nothing is sealed early
        (sealing removes the window from what the shard still owes it)."""
        if self.shard is None or not self.sent or self.recovery:
            return (), StatefulLogic.RETAIN
        due = list(self.sent)
        out: list[tuple[str, Any]] = [self._seal(w, self.shard) for w in due]
        out.append((self.clock_key, FeederTick(self.shard, self.wm, tuple(self.hours), tuple(due))))
        self.hours = {}
        return out, StatefulLogic.RETAIN

    def _expire(self) -> None:
        low = min([self.wm, *(w.start_ms for w in self.sent)])
        horizon = min((w.start_ms for w in self.schedule.windows_containing(low)), default=low) // HOUR_MS
        for h in [h for h in self.buckets if h < horizon]:
            del self.buckets[h]
        for h in [h for h in self.reported if h < horizon]:
            del self.reported[h]
        self.coverage.expire((self.wm - self.schedule.retention_ms()) // HOUR_MS * HOUR_MS)

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_FEEDER, {
            "buckets": self.buckets, "watermark": self.wm, "sent": self.sent, "hours": self.hours,
            "reported": self.reported, "coverage": self.coverage, "shard_key": self.shard}, freeze=self.recovery)
