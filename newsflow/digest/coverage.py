"""Story coverage as of a time, for scores that follow the story (000 Step 4 at digest time).

An article record is scored once, when first seen; its corroboration then never grows as other
publishers join the story. The digest step keeps, per story, when each publisher (and tier)
first carried it, so a digest can recompute corroboration "as of the window's end", and the
latest 30-day reliability of every feed (from feed-health), so authority uses it for every feed.

Pure and event-time only: :meth:`StoryCoverage.add` takes records, :meth:`expire` a horizon
in epoch ms; nothing reads a clock. Snapshots are plain dicts (picklable, compact).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from newsflow.core.timeutil import iso_to_ms


def _ms(v: Any) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v:
        try:
            return iso_to_ms(v)
        except ValueError:
            return None
    return None


@dataclass(slots=True)
class _Story:
    #: publisher -> first time (fetch time, epoch ms) it carried the story
    publishers: dict[str, int] = field(default_factory=dict)
    #: tier -> first time a source of that tier carried it
    tiers: dict[str, int] = field(default_factory=dict)
    last_ms: int = 0


@dataclass(slots=True)
class StoryCoverage:
    """Per story: distinct publishers and tiers with the time each joined; per feed: the
    latest reliability (``successful / total polls`` over 30 days) with its time."""

    stories: dict[str, _Story] = field(default_factory=dict)
    #: feed -> [(time, reliability)] in time order (the latest before each window end counts)
    reliability: dict[str, list[tuple[int, float]]] = field(default_factory=dict)

    def add(self, rec: Mapping[str, Any]) -> None:
        """One ``articles`` record (any disposition: a syndicated copy is coverage too, and
        every sighting in ``seen_in`` counts from its own fetch time)."""
        sid = rec.get("story_id")
        t = _ms(rec.get("fetched_ms")) or _ms(rec.get("fetched_at"))
        if not sid or t is None:
            return
        st = self.stories.get(sid)
        if st is None:
            st = self.stories[sid] = _Story()
        st.last_ms = max(st.last_ms, t)
        pub = str(rec.get("publisher") or rec.get("feed_id") or "")
        if pub and t < st.publishers.get(pub, 1 << 62):
            st.publishers[pub] = t
        tier = rec.get("tier")
        if tier and t < st.tiers.get(tier, 1 << 62):
            st.tiers[tier] = t
        for s in rec.get("seen_in") or ():
            p = s.get("publisher") if isinstance(s, Mapping) else None
            ts = _ms(s.get("fetched_at")) if isinstance(s, Mapping) else None
            if p and ts is not None and ts < st.publishers.get(p, 1 << 62):
                st.publishers[p] = ts

    def add_health(self, h: Mapping[str, Any]) -> None:
        """A ``feed-health`` record: its ``reliability`` (when the poller sent one) as of ``at``."""
        r, t, fid = h.get("reliability"), _ms(h.get("at")), h.get("feed_id")
        if isinstance(r, int | float) and t is not None and fid:
            hist = self.reliability.setdefault(fid, [])
            hist.append((t, float(r)))
            if len(hist) > 1 and hist[-2][0] > t:
                hist.sort()

    def extend(self, recs: Iterable[Mapping[str, Any]]) -> StoryCoverage:
        for r in recs:
            self.add(r)
        return self

    def as_of(self, story_id: Any, end_ms: int) -> tuple[list[str], list[str]]:
        """(publishers, tiers) of a story that had carried it before ``end_ms``, sorted."""
        st = self.stories.get(story_id) if story_id else None
        if st is None:
            return [], []
        return (sorted(p for p, t in st.publishers.items() if t < end_ms),
                sorted(x for x, t in st.tiers.items() if t < end_ms))

    def reliability_of(self, feed_id: Any, end_ms: int) -> float | None:
        """The feed's latest reliability reported before ``end_ms`` (None: never reported)."""
        best = None
        for t, r in self.reliability.get(feed_id, ()) if feed_id else ():
            if t >= end_ms:
                break
            best = r
        return best

    def expire(self, horizon_ms: int) -> int:
        """Drop stories last carried before ``horizon_ms`` (event time); returns how many."""
        dead = [k for k, st in self.stories.items() if st.last_ms < horizon_ms]
        for k in dead:
            del self.stories[k]
        for hist in self.reliability.values():  # keep the last value before the horizon
            old = sum(1 for t, _ in hist if t < horizon_ms)
            if old > 1:
                del hist[: old - 1]
        return len(dead)

    def __len__(self) -> int:
        return len(self.stories)
