"""The digest clock's logic (:mod:`newsflow.flows.digest_windows`): which windows close, from the
feeders' ticks and the health reports; never an article.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.core.alignment import slowest_watermark
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.core.timeutil import HOUR_MS, iso_to_ms
from newsflow.digest.assemble import draft_digest
from newsflow.digest.health import window_health
from newsflow.digest.schedule import DigestWindow
from newsflow.flows.digest_windows import (
    STEP_CLOCK,
    CoverageAt,
    FeederTick,
    ProfileClose,
    WindowClose,
    WindowDraft,
    WindowOrder,
    WindowSkip,
)
from newsflow.flows.keys import (
    window_key,
)
from newsflow.model.messages import (
    FromShard,
    HealthReport,
    JsonRecord,
    ProfileAt,
    ProfileClock,
)


class DigestClockLogic(StatefulLogic[Any, tuple[str, Any], Snapshot]):
    """The digests' clock (see the module doc): the story shards' watermarks, the hours they
    have data in and the health reports; never an article."""

    def __init__(self, settings: Settings, resume: Snapshot | None, tkeys: Mapping[str, str], recovery: bool = False,
                 profile_types: Mapping[str, frozenset[str]] | None = None, live_relevance: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.tkeys = tkeys
        self.live_relevance = live_relevance
        self.schedule = settings.digests.schedule()
        self.configs = (self.schedule, settings.digests.to_config(), settings.scoring.to_config())
        #: per profile with digests: its digest types
        self.profile_types = dict(profile_types or {})
        st = restore(STEP_CLOCK, resume) if resume is not None else {}
        #: per profile: its weights at window ends (None: latest), the closed windows waiting for them
        self.profile_at: dict[str, dict[int | None, ProfileAt]] = st.get("profile_at", {})
        self.profile_pending: dict[str, list[DigestWindow]] = st.get("profile_pending", {})
        self.health: dict[int, list[JsonRecord]] = st.get("health", {})
        self.hours: dict[int, None] = st.get("hours", {})
        self.sealers: dict[DigestWindow, list[str]] = st.get("sealers", {})
        self.wm: int | None = st.get("watermark")
        self.source_wm: dict[str, int] = st.get("source_watermarks", {})

    def on_item(self, value: FromShard | FeederTick | ProfileAt | ProfileClock) -> tuple[Iterable[tuple[str, Any]], bool]:
        if isinstance(value, ProfileClock):
            return (), StatefulLogic.RETAIN
        if isinstance(value, ProfileAt):
            if value.profile not in self.profile_types:
                return (), StatefulLogic.RETAIN
            self.profile_at.setdefault(value.profile, {})[value.as_of] = value
            return self._profile_closes(), StatefulLogic.RETAIN
        if isinstance(value, FromShard):
            assert isinstance(value.message, HealthReport)  # what the feeders send besides ticks
            h = value.message.record
            self.health.setdefault(iso_to_ms(h["at"]) // HOUR_MS, []).append(h)
            return (), StatefulLogic.RETAIN
        for hr in value.hours:
            self.hours[hr] = None
        for w in value.sealed:
            self.sealers.setdefault(w, []).append(value.shard)
        wm = slowest_watermark(self.source_wm, value.shard, value.watermark, self.s.stories.shards, self.wm)
        if wm is None:
            return (), StatefulLogic.RETAIN
        closing, skipped = self.schedule.closing_over_gaps(self.wm, wm, (*self.hours, *self.health))
        out: list[tuple[str, Any]] = []
        if skipped is not None:  # windows skipped over a quiet stretch: what was sent to them is not read
            out.extend((window_key(w), WindowSkip(tuple(sorted(self.sealers.pop(w)))))
                       for w in [w for w in self.sealers if skipped[0] < w.end_ms <= skipped[1]])
        for w in closing:
            out.extend(self._close(w, final=True))
            for name, types in sorted(self.profile_types.items()):
                if w.digest_type in types:
                    self.profile_pending.setdefault(name, []).append(w)
        self.wm = wm
        out.extend(self._profile_closes())
        self._expire()
        return out, StatefulLogic.RETAIN

    def _profile_closes(self, *, at_end: bool = False) -> list[tuple[str, Any]]:
        """Each profile's closed windows, in order, as soon as its weights at their end are known
        (at the end of the input: its latest weights)."""
        out: list[tuple[str, Any]] = []
        for name, pending in sorted(self.profile_pending.items()):
            known = self.profile_at.get(name, {})
            while pending:
                w = pending[0]
                p = known.get(w.end_ms) or (known.get(None) if at_end else None)
                if p is None:
                    break
                pending.pop(0)
                out += [(window_key(w), ProfileClose(w, p, True, None)),
                        (self.tkeys[w.digest_type], WindowOrder(w, True, name))]
                if p.as_of is not None:
                    del known[p.as_of]
        return out

    def _close(self, w: DigestWindow, *, final: bool) -> list[tuple[str, Any]]:
        profiles = tuple(sorted(n for n, types in self.profile_types.items() if w.digest_type in types
                                and (final or None in self.profile_at.get(n, {}))))
        close = WindowClose(w, tuple(sorted(self.sealers.pop(w, ()))), window_health(self.health, w.start_ms, w.end_ms), final,
                            None if final else self.wm, profiles)
        order = (self.tkeys[w.digest_type], WindowOrder(w, final))
        if not close.sealers and not profiles:  # no shard had data in its hours: an empty digest,
            # drafted here (most hourly windows of a few feeds: no key, no entries to wait for)
            sched, cfg, score_cfg = self.configs
            d = draft_digest([], w, schedule=sched, feed_health=close.feed_health, config=cfg, final=final,
                             coverage=CoverageAt(w.end_ms, {}, {}), score_config=score_cfg,
                             as_of_ms=close.as_of_ms)
            return [order, (self.tkeys[w.digest_type], WindowDraft(w, final, d, {} if self.live_relevance else None))]
        out: list[tuple[str, Any]] = [(window_key(w), close), order]
        if not final:  # a profile's digest of the open window, with its latest weights
            for n in profiles:
                out += [(window_key(w), ProfileClose(w, self.profile_at[n][None], False, self.wm)),
                        (self.tkeys[w.digest_type], WindowOrder(w, False, n))]
        return out

    def on_eof(self) -> tuple[Iterable[tuple[str, Any]], bool]:
        """The end of a finite input: each type's latest window drafted in progress. Not with
        recovery: a rerun resumes the input, and a window drafted now would lose its entries
        (its key ends once drafted) and hold up every later digest of its type."""
        if self.wm is None or self.recovery:
            return (), StatefulLogic.RETAIN
        latest: dict[str, DigestWindow] = {}
        for w in self.schedule.windows_containing(self.wm):
            if w.digest_type not in latest or w.start_ms > latest[w.digest_type].start_ms:
                latest[w.digest_type] = w
        out = [m for w in latest.values() if self.sealers.get(w) for m in self._close(w, final=False)]
        done = self._profile_closes(at_end=True)
        return done + out, StatefulLogic.RETAIN

    def _expire(self) -> None:
        assert self.wm is not None
        horizon = min((w.start_ms for w in self.schedule.windows_containing(self.wm)), default=self.wm) // HOUR_MS
        for h in [h for h in self.health if h < horizon]:
            del self.health[h]
        for h in [h for h in self.hours if h * HOUR_MS <= self.wm]:
            del self.hours[h]
        for name, known in self.profile_at.items():  # weights at ends no waiting window has
            ends = {w.end_ms for w in self.profile_pending.get(name, ())}
            for t in [t for t in known if t is not None and t <= self.wm and t not in ends]:
                del known[t]

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_CLOCK, {
            "health": self.health, "hours": self.hours, "sealers": self.sealers, "watermark": self.wm,
            "source_watermarks": self.source_wm, "profile_at": self.profile_at,
            "profile_pending": self.profile_pending}, freeze=self.recovery)
