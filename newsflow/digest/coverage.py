"""Story coverage as of a time, for scores that follow the story (docs/rules.md#sections: the
importance re-scored as of the window's end).

An article record is scored once, when first seen; its corroboration then never grows as other
publishers join the story. The digest step keeps, per story, when each publisher (and tier)
first carried it, so a digest can recompute corroboration "as of the window's end", and the
latest 30-day reliability of every feed (from feed-health), so authority uses it for every feed.

Pure and event-time only: :meth:`StoryCoverage.add` takes records, :meth:`expire` a horizon
in epoch ms; nothing reads a clock. Snapshots are plain dicts (picklable, compact).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from newsflow.core.timeutil import HOUR_MS, iso_to_ms
from newsflow.feeds.tiers import BUILTIN_TIERS


def _opt_str(v: object) -> str | None:
    """A field that is a string or absent (JSON null: None)."""
    return v if isinstance(v, str) else None


def _seq(v: object) -> list[object] | tuple[object, ...]:
    """A field that is a JSON array (absent or null: empty)."""
    return v if isinstance(v, list | tuple) else ()


def _ms(v: object) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v:
        try:
            return iso_to_ms(v)
        except ValueError:
            return None
    return None


class CoverageAsOf(Protocol):
    """What a window's re-scoring reads of the story coverage: a story's publishers and tiers,
    a feed's reliability, as of the window's end (:class:`StoryCoverage`, or the part of it a
    window's key is sent)."""

    def as_of(self, story_id: str | None, end_ms: int) -> tuple[list[str], list[str]]: ...

    def reliability_of(self, feed_id: str | None, end_ms: int) -> float | None: ...


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
    #: late merges: story -> [(time, merged-away story)] (its coverage counts from that time)
    merged: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    #: merged-away story -> (time, story it joined): built from ``merged`` when first asked
    _into: dict[str, tuple[int, str]] | None = field(default=None, repr=False, compare=False)
    #: :meth:`expire`'s last sweep: its horizon, a lower bound of the stories' ``last_ms`` since
    #: (exact after a sweep, lowered by new stories), and whether a merge came since
    _horizon: int | None = field(default=None, repr=False, compare=False)
    _low: int = field(default=-(1 << 62), repr=False, compare=False)
    _dirty: bool = field(default=True, repr=False, compare=False)
    #: hour of ``last_ms`` -> the stories whose ``last_ms`` moved into that hour (a story is in
    #: the bucket of its current hour, and maybe stale in earlier ones): :meth:`expire` reads
    #: only the buckets below its horizon, not every story
    _hours: dict[int, list[str]] = field(default_factory=dict, repr=False, compare=False)

    def merge(self, gone: str, into: str, at_ms: int) -> None:
        """Story ``gone`` joined ``into`` at ``at_ms``: as of any later time, ``into``'s
        publishers and tiers include ``gone``'s (each from when it carried ``gone``, at the
        earliest ``at_ms``)."""
        if gone != into:
            self.merged.setdefault(into, []).append((at_ms, gone))
            self._into = None
            self._dirty = True

    def alias(self, story_id: str, end_ms: int) -> str:
        """The story that ``story_id``'s articles belong to as of ``end_ms`` (merges before it,
        followed through chains)."""
        seen = {story_id}
        cur = story_id
        while True:
            nxt = self._into_before(cur, end_ms)
            if nxt is None or nxt in seen:
                return cur
            seen.add(nxt)
            cur = nxt

    def add(self, rec: Mapping[str, object], family: Callable[[str | None, str | None], str] | None = None) -> None:
        """One ``articles`` record (any disposition: a syndicated copy is coverage too, and
        every sighting in ``seen_in`` counts from its own fetch time). ``family`` maps
        (publisher, url) to the publisher family that counts (default: the built-in table's,
        :meth:`~newsflow.feeds.tiers.SourceTiers.family`): organisations, not feeds."""
        sid = _opt_str(rec.get("story_id"))
        t = _ms(rec.get("fetched_ms")) or _ms(rec.get("fetched_at"))
        if not sid or t is None:
            return
        st = self.stories.get(sid)
        if st is None:
            st = self.stories[sid] = _Story(last_ms=t)
            self._hours.setdefault(t // HOUR_MS, []).append(sid)
            if t < self._low:
                self._low = t
        elif t > st.last_ms:
            if t // HOUR_MS != st.last_ms // HOUR_MS:
                self._hours.setdefault(t // HOUR_MS, []).append(sid)
            st.last_ms = t
        fams: list[str | None] | list[object] | tuple[object, ...]
        if "seen_families" in rec:  # looked up once upstream (the flow's digest view)
            pub, fams = _opt_str(rec.get("family")), _seq(rec["seen_families"])
        else:
            pub, fams = self.families_of(rec, family or BUILTIN_TIERS.family)
        if pub and t < st.publishers.get(pub, 1 << 62):
            st.publishers[pub] = t
        tier = _opt_str(rec.get("tier"))
        if tier and t < st.tiers.get(tier, 1 << 62):
            st.tiers[tier] = t
        for s, p in zip(_seq(rec.get("seen_in")), fams, strict=True):
            ts = _ms(s.get("fetched_at")) if isinstance(s, Mapping) else None
            if isinstance(p, str) and p and ts is not None and ts < st.publishers.get(p, 1 << 62):
                st.publishers[p] = ts

    @staticmethod
    def families_of(rec: Mapping[str, object], family: Callable[[str | None, str | None], str]
                    ) -> tuple[str | None, list[str | None]]:
        """(the record's publisher family, that of each ``seen_in`` sighting: None where it names
        no publisher), as :meth:`add` counts them."""
        pub = str(rec.get("publisher") or rec.get("feed_id") or "")
        fams = [family(_opt_str(s["publisher"]), _opt_str(s.get("url")))
                if isinstance(s, Mapping) and s.get("publisher") else None
                for s in _seq(rec.get("seen_in"))]
        return (family(pub, _opt_str(rec.get("canonical_url") or rec.get("url"))) if pub else None), fams

    def add_health(self, h: Mapping[str, object]) -> None:
        """A ``feed-health`` record: its ``reliability`` (when the poller sent one) as of ``at``."""
        r, t, fid = h.get("reliability"), _ms(h.get("at")), _opt_str(h.get("feed_id"))
        if isinstance(r, int | float) and t is not None and fid:
            hist = self.reliability.setdefault(fid, [])
            hist.append((t, float(r)))
            if len(hist) > 1 and hist[-2][0] > t:
                hist.sort()

    def extend(self, recs: Iterable[Mapping[str, object]],
               family: Callable[[str | None, str | None], str] | None = None) -> StoryCoverage:
        for r in recs:
            self.add(r, family)
        return self

    def as_of(self, story_id: str | None, end_ms: int) -> tuple[list[str], list[str]]:
        """(publishers, tiers) of a story that had carried it before ``end_ms``, sorted; with
        the stories merged into it before then."""
        if not story_id:
            return [], []
        pubs: set[str] = set()
        tiers: set[str] = set()
        todo, seen = [(story_id, -(1 << 62))], {story_id}
        while todo:
            sid, since = todo.pop()
            st = self.stories.get(sid)
            if st is not None:
                pubs.update(p for p, t in st.publishers.items() if max(t, since) < end_ms)
                tiers.update(x for x, t in st.tiers.items() if max(t, since) < end_ms)
            for at, gone in self.merged.get(sid, ()):
                if at < end_ms and gone not in seen:
                    seen.add(gone)
                    todo.append((gone, max(at, since)))
        return sorted(pubs), sorted(tiers)

    def reliability_of(self, feed_id: str | None, end_ms: int) -> float | None:
        """The feed's latest reliability reported before ``end_ms`` (None: never reported)."""
        best = None
        for t, r in self.reliability.get(feed_id, ()) if feed_id else ():
            if t >= end_ms:
                break
            best = r
        return best

    def aliased(self, records: list[dict[str, object]], end_ms: int) -> list[dict[str, object]]:
        """The records with each story id followed through the merges before ``end_ms`` (a
        changed record is a copy: digest entries are shared and never modified)."""
        if not self.merged:
            return records
        out: list[dict[str, object]] = []
        for r in records:
            sid = _opt_str(r.get("story_id"))
            to = self.alias(sid, end_ms) if sid else sid
            out.append(r if to == sid else {**r, "story_id": to})
        return out

    def _into_before(self, story_id: str, end_ms: int) -> str | None:
        into = self._into.get(story_id) if self._into is not None else None
        if into is None and self._into is None:
            self._into = {g: (at, i) for i, lst in self.merged.items() for at, g in lst}
            into = self._into.get(story_id)
        return into[1] if into is not None and into[0] < end_ms else None

    def expire(self, horizon_ms: int) -> int:
        """Drop stories last carried before ``horizon_ms`` (event time); returns how many.

        A call with the horizon of the previous sweep changes nothing when no story may have
        fallen below it since (a story's ``last_ms`` only grows; a new one lowers ``_low``) and
        no merge came: it returns at once (the flow calls this on every tick of every digest
        step, the horizon moves once an hour)."""
        if horizon_ms == self._horizon and self._low >= horizon_ms and not self._dirty:
            return 0
        self._horizon, self._dirty = horizon_ms, False
        dead = 0
        top = horizon_ms // HOUR_MS  # buckets below it lie wholly before the horizon, its own partly
        for h in sorted(h for h in self._hours if h <= top):
            keep = []
            for sid in self._hours.pop(h):
                st = self.stories.get(sid)
                if st is None or st.last_ms // HOUR_MS != h:
                    continue  # gone, or moved on to a later hour's bucket
                if st.last_ms < horizon_ms:
                    del self.stories[sid]
                    dead += 1
                else:
                    keep.append(sid)
            if keep:
                self._hours[h] = keep
        for k in [k for k, lst in self.merged.items() if all(at < horizon_ms for at, _ in lst)
                  and k not in self.stories]:
            del self.merged[k]
        self._into = None
        for hist in self.reliability.values():  # keep the last value before the horizon
            old = sum(1 for t, _ in hist if t < horizon_ms)
            if old > 1:
                del hist[: old - 1]
        self._low = min(self._hours) * HOUR_MS if self._hours else 1 << 62  # a lower bound
        return dead

    def __len__(self) -> int:
        return len(self.stories)
