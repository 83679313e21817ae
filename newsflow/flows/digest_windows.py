"""Digests assembled per window: no digest key sees every article (a key per digest type would
keep every entry of its longest window and assemble its windows one after the other). Four steps:

* a **feeder** per story shard (:class:`FeederLogic`, keyed like the shard, so on its worker)
  sends each article's digest entry to the keys of the windows that read it, keeps the coverage
  of the shard's stories (publishers and tiers over time, merges, feeds' reliability) and, when
  the shard's watermark passes a window's end, *seals* its part of the window: the ids of the
  entries it sent, in its order, each story's successor and coverage as of the end
  (:class:`WindowSeal`). Its ticks to the clock carry the hours it had data in and the windows
  it sealed;
* the **clock** (:class:`DigestClockLogic`, one key) reads the feeders' ticks and the health
  reports, never an article. It decides, by the single key's rules (the slowest shard's
  watermark; no empty windows across a quiet stretch), which windows close, and sends each a
  :class:`WindowClose` (the shards whose seals it reads, its feed-health summary) and its
  type's trend key a :class:`WindowOrder` (a window no shard had data in, most hourly windows
  of a few feeds, it drafts itself: an empty digest needs no key);
* a key **per window** (``dw:type:start``, :class:`WindowLogic`) drafts the window's digest
  (:func:`~newsflow.digest.assemble.draft_digest`) once it has the close, those seals and every
  entry they name, in whatever order they came, sends the draft to the trend key and ends:
  windows of every type are assembled on every worker, each key's state lives as long as its
  window;
* a **trend** key per type (:class:`TrendLogic`) applies the trends
  (:func:`~newsflow.digest.trends.apply_trends`) to the drafts in window order and emits the
  digests.

The same digests, byte for byte, for any number of workers and processes (tested). A profile with digests gets its own digest of each window of its types: the clock
holds the window's :class:`ProfileClose` until the profile's weights as of the window's end come
(at the end of the input: its latest), the window's key keeps its entries until then and drafts
it, ranked by that relevance, and the trend key chains each profile's digests on their own. The
one key that still sees every article of a deployment is the story shard of feeds without a
category, and its feeder (the same key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from bytewax.operators import StatefulLogic

from newsflow.core.alignment import slowest_watermark
from newsflow.core.exactbytes import exact_size
from newsflow.core.pickling import Shared, fast_pickle
from newsflow.core.placement import placed_key
from newsflow.core.snapshot import Snapshot, frozen, make_snapshot, restore, thaw
from newsflow.core.timeutil import HOUR_MS, iso_to_ms
from newsflow.digest.assemble import draft_digest
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.health import window_health
from newsflow.digest.schedule import DigestWindow
from newsflow.digest.trends import DigestDraft, apply_trends, next_memory
from newsflow.flows import metrics
from newsflow.model.messages import (
    FromShard,
    HealthReport,
    Output,
    ProfileAt,
    ProfileClock,
    ScoredArticle,
    StoryMerge,
)
from newsflow.model.vocab import Disposition
from newsflow.profiles.rank import personalize, with_item_relevance, with_relevance
from newsflow.profiles.vectors import interest_profile
from newsflow.wire.codec import dumps

JsonRecord = dict[str, Any]
STEP_FEEDER, STEP_CLOCK, STEP_WINDOW, STEP_TREND = "digest_feeder", "digest_clock", "digest_window", "digest_trend"


@dataclass(frozen=True, slots=True)
class CoverageAt:
    """What a window's re-scoring reads of the story coverage, as of the window's end: each of
    its stories' publishers and tiers, each of its feeds' reliability (from the story shards'
    seals: each shard keeps its stories' coverage)."""

    end_ms: int
    stories: Mapping[str, tuple[list[str], list[str]]]
    feeds: Mapping[str, float | None]

    def as_of(self, story_id: Any, end_ms: int) -> tuple[list[str], list[str]]:
        if not story_id:
            return [], []
        assert end_ms == self.end_ms
        pubs, tiers = self.stories[story_id]
        return list(pubs), list(tiers)

    def reliability_of(self, feed_id: Any, end_ms: int) -> float | None:
        assert end_ms == self.end_ms
        return self.feeds[feed_id] if feed_id else None


@dataclass(frozen=True, slots=True)
class WindowEntry:
    """An article's digest entry for one window."""

    entry: JsonRecord


@dataclass(frozen=True, slots=True)
class WindowClose:
    """The clock closed ``window``: the story shards whose seals it reads, its feed health, and
    the profiles whose own digest of it will follow (each a :class:`ProfileClose`)."""

    window: DigestWindow
    sealers: tuple[str, ...]
    feed_health: Mapping[str, Any]
    final: bool
    as_of_ms: int | None
    profiles: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProfileClose:
    """A profile's weights as of a closed window's end (or its latest, at the end of the input):
    the window's key drafts the profile's digest of it, ranked by that relevance."""

    window: DigestWindow
    at: ProfileAt
    final: bool
    as_of_ms: int | None


@dataclass(frozen=True, slots=True)
class WindowOrder:
    """The next window of the type (of a profile's digests of it: ``profile``), in order, whose
    draft the trend key applies."""

    window: DigestWindow
    final: bool
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class WindowDraft:
    window: DigestWindow
    final: bool
    draft: DigestDraft
    #: with live relevance or a profile's: each article's (the items carry their lead's)
    relevance: Mapping[str, float] | None = None
    #: a profile's digest: the profile and its top terms
    profile: ProfileAt | None = None


@lru_cache(maxsize=4096)
def windows_touching_hour(schedule: Any, hour: int, types: tuple[str, ...] | frozenset[str]) -> tuple[DigestWindow, ...]:
    """The windows of ``types`` whose hour range (``start // HOUR ..= end // HOUR``, what a
    window's assembly reads) contains ``hour``: where an article fetched in that hour goes."""
    lo, hi = hour * HOUR_MS, (hour + 1) * HOUR_MS
    out: list[DigestWindow] = []
    for name in types:
        dt = schedule.type(name)
        if dt.kind == "rolling":
            every, length = dt.every_minutes * 60_000, dt.rolling_length_ms
            e = -(-lo // every) * every
            while e - length < hi:
                out.append(DigestWindow(name, e - length, e))
                e += every
            continue
        seen: set[int] = set()
        for t in (lo - 1, lo, hi - 1):
            for w in schedule.windows_containing(t, (name,)):
                if w.start_ms not in seen and w.start_ms < hi and w.end_ms >= lo:
                    seen.add(w.start_ms)
                    out.append(w)
    return tuple(out)


@lru_cache(maxsize=4096)
def window_key(w: DigestWindow) -> str:
    return f"dw:{w.digest_type}:{w.start_ms}"


def trend_key(dtype: str, slot: int) -> str:
    return placed_key(f"dt:{dtype}", slot)


def trend_keys(settings: Any) -> dict[str, str]:
    """Digest type -> its trend key: the types in name order take the workers 0, 1, ..."""
    types = sorted(t.name for t in settings.digests.schedule().types)
    return {t: trend_key(t, j) for j, t in enumerate(types)}


@fast_pickle  # (recovery pickles every feeder each epoch, thousands of these: 1.6x faster)
@dataclass(slots=True)
class _Slim:
    article_id: str
    story_id: str | None
    feed_id: str | None
    #: the entry's time on the digests' basis (None: it has none)
    at_ms: int | None
    exact: bool


def entry_time(e: Mapping[str, Any], basis: str) -> int | None:
    t = e.get("fetched_ms" if basis == "fetched" else "published_ms")
    return t if isinstance(t, int) else None


def window_reads(w: DigestWindow, at_ms: int | None, exact: bool) -> bool:
    """Whether a window's assembly reads an entry of one of its hours: the entries in the window
    (on the digests' time basis) and exact duplicates (their preferred copy, whatever its time)."""
    return exact or (at_ms is not None and w.start_ms <= at_ms < w.end_ms)


@dataclass(frozen=True, slots=True)
class WindowSeal:
    """A story shard's part of a window, sent when the shard's watermark passed its end (or at
    the end of the input): the ids of the entries it sent (in its order), each story's
    successor as of the end, the coverage the window's re-scoring reads."""

    window: DigestWindow
    shard: str
    ids: tuple[str, ...]
    aliases: Mapping[str, str]
    stories: Mapping[str, tuple[list[str], list[str]]]
    feeds: Mapping[str, float | None]


@dataclass(frozen=True, slots=True)
class FeederTick:
    """A story shard's watermark for the digest clock, with the hours it first had records in
    since its last tick and the windows it sealed."""

    shard: str
    watermark: int
    hours: tuple[int, ...]
    sealed: tuple[DigestWindow, ...]


@dataclass(frozen=True, slots=True)
class WindowSkip:
    """A window the clock skipped (a quiet stretch): what was sent to it is not read (once the
    seals of ``sealers`` are in, everything sent to it is)."""

    sealers: tuple[str, ...]


class FeederLogic(StatefulLogic[Any, tuple[str, Any], Snapshot]):
    """One story shard's side of the digests (same key as the shard): sends each article's
    entry to the windows that read it, keeps the coverage of the shard's stories and seals its
    part of each window when its watermark passes the window's end; the clock gets its ticks
    and health reports, never an article."""

    def __init__(self, settings: Any, resume: Snapshot | None, clock_key: str, recovery: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.clock_key = clock_key
        self.schedule = settings.digests.schedule()
        self.types = tuple(t.name for t in self.schedule.types)
        self.basis = settings.digests.to_config().time_basis
        self.family = settings.normalize.families().family
        st = restore(STEP_FEEDER, resume) if resume is not None else {}
        self.buckets: dict[int, list[_Slim]] = st.get("buckets", {})
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
            fetched = e["fetched_ms"]
            h = fetched // HOUR_MS
            slim = _Slim(e["article_id"], e.get("story_id"), e.get("feed_id"), entry_time(e, self.basis),
                         e.get("disposition") == Disposition.EXACT_DUPLICATE)
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


class DigestClockLogic(StatefulLogic[Any, tuple[str, Any], Snapshot]):
    """The digests' clock (see the module doc): the story shards' watermarks, the hours they
    have data in and the health reports; never an article."""

    def __init__(self, settings: Any, resume: Snapshot | None, tkeys: Mapping[str, str], recovery: bool = False,
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
                             coverage=CoverageAt(w.end_ms, {}, {}), score_config=score_cfg,  # type: ignore[arg-type]
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


@dataclass(slots=True)
class _WindowState:
    entries: dict[str, list[JsonRecord]] = field(default_factory=dict)
    seals: dict[str, WindowSeal] = field(default_factory=dict)
    end: WindowClose | WindowSkip | None = None
    #: how many entries of each id the seals name, and how many of those have not arrived
    need: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    #: the window's own digest is drafted; the profiles' closes not drafted yet
    drafted: bool = False
    profile_closes: list[ProfileClose] = field(default_factory=list)
    due: set[str] = field(default_factory=set)


#: a window key's snapshots freeze its entries in chunks of at least this many (see
#: ``WindowLogic.snapshot``): ~0.5 MB pickled, a few ms to re-freeze with a live epoch's entries
CHUNK_ENTRIES = 512


class WindowLogic(StatefulLogic[Any, Any, Snapshot]):
    """One window's key: the story shards' entries and seals, the clock's close; the draft once
    it has them all (then each profile's, as their weights come), then the key ends."""

    def __init__(self, settings: Any, resume: Snapshot | None, tkeys: Mapping[str, str],
                 configs: tuple[Any, Any, Any], recovery: bool = False, live_relevance: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.live_relevance = live_relevance
        self.tkeys = tkeys
        self.schedule, self.config, self.score_config = configs
        st = restore(STEP_WINDOW, resume) if resume is not None else {}
        self.st: _WindowState = st.get("state") or _WindowState()
        #: with recovery, the entries as snapshots carry them: frozen (pickled + zstd) in chunks
        #: of at least CHUNK_ENTRIES, each frozen once it is full (a weekly window of 50k
        #: entries was pickled and compressed whole every epoch: 0.5 s); the entries of each
        #: chunk (the same dicts), and the arrivals since the last snapshot
        self.chunks: list[bytes] = st.get("entry_chunks", [])
        self.chunk_entries: list[list[JsonRecord]] = []
        self.fresh: list[JsonRecord] = []
        if self.chunks:
            for chunk in self.chunks:
                got = thaw(chunk)
                self.chunk_entries.append(got)
                for e in got:
                    self.st.entries.setdefault(e["article_id"], []).append(e)
        elif self.st.entries and recovery:  # a snapshot of before the chunks: its entries in one
            self.chunk_entries = [[e for got in self.st.entries.values() for e in got]]
            self.chunks = [frozen(self.chunk_entries[0])]

    def on_item(self, value: Any) -> tuple[Iterable[Any], bool]:
        st = self.st
        if isinstance(value, Shared):
            value = value.obj
        if isinstance(value, WindowEntry):
            aid = value.entry["article_id"]
            got = st.entries.setdefault(aid, [])
            got.append(value.entry)
            if self.recovery:
                self.fresh.append(value.entry)
            if len(got) <= st.need.get(aid, 0):
                st.missing -= 1
        elif isinstance(value, WindowSeal):
            st.seals[value.shard] = value
            for aid in value.ids:
                n = st.need[aid] = st.need.get(aid, 0) + 1
                if len(st.entries.get(aid, ())) < n:
                    st.missing += 1
        elif isinstance(value, ProfileClose):
            st.profile_closes.append(value)
        else:
            assert isinstance(value, WindowClose | WindowSkip)
            st.end = value
            if isinstance(value, WindowClose):
                st.due = set(value.profiles)
        end = st.end
        if end is None or st.missing or any(k not in st.seals for k in end.sealers):
            return (), StatefulLogic.RETAIN
        if isinstance(end, WindowSkip):
            return (), StatefulLogic.DISCARD
        recs, coverage = self._records(end)
        out: list[Any] = []
        if not st.drafted:
            st.drafted = True
            out.append(self._draft(end, recs, coverage))
        for pc in st.profile_closes:
            st.due.discard(pc.at.profile)
            ip = interest_profile(dict(pc.at.weights))
            out.append(self._draft(end, [dict(with_relevance(r, ip)) for r in recs], coverage, pc))
        st.profile_closes = []
        return out, StatefulLogic.RETAIN if st.due else StatefulLogic.DISCARD

    def _records(self, c: WindowClose) -> tuple[list[JsonRecord], CoverageAt]:
        """The window's entries in the seals' order (each story followed through its merges
        before the end) and their coverage as of the end."""
        st = self.st
        taken: dict[str, int] = {}
        recs: list[JsonRecord] = []
        stories: dict[str, tuple[list[str], list[str]]] = {}
        feeds: dict[str, float | None] = {}
        for k in c.sealers:
            seal = st.seals[k]
            stories.update(seal.stories)
            feeds.update(seal.feeds)
            for aid in seal.ids:
                i = taken.get(aid, 0)
                taken[aid] = i + 1
                r = st.entries[aid][i]
                sid = r.get("story_id")
                to = seal.aliases.get(sid) if sid else None
                recs.append(r if to is None else {**r, "story_id": to})
        return recs, CoverageAt(c.window.end_ms, stories, feeds)

    def _draft(self, c: WindowClose, recs: list[JsonRecord], coverage: CoverageAt,
               pc: ProfileClose | None = None) -> tuple[str, WindowDraft]:
        final, as_of = (c.final, c.as_of_ms) if pc is None else (pc.final, pc.as_of_ms)
        d = draft_digest(recs, c.window, schedule=self.schedule, feed_health=c.feed_health,
                         config=self.config, final=final, coverage=coverage,  # type: ignore[arg-type]
                         score_config=self.score_config, as_of_ms=as_of)
        rel = {r["article_id"]: r["importance_components"]["relevance"] for r in recs
               if isinstance(r.get("importance_components"), dict)} if self.live_relevance or pc else None
        return self.tkeys[c.window.digest_type], WindowDraft(c.window, final, d, rel, pc.at if pc else None)

    def snapshot(self) -> Snapshot:
        if not self.recovery:
            return make_snapshot(STEP_WINDOW, {"state": self.st}, freeze=False)
        if self.fresh:
            # a live epoch brings an entry or two: they join the last chunk until it holds
            # CHUNK_ENTRIES (re-frozen with them), so chunks stay few and compress as well as
            # a whole window does; a replay's epoch brings thousands, one chunk of their own
            if self.chunk_entries and len(self.chunk_entries[-1]) < CHUNK_ENTRIES:
                self.chunk_entries[-1] = self.chunk_entries[-1] + self.fresh
                self.chunks[-1] = frozen(self.chunk_entries[-1])
            else:
                self.chunk_entries.append(self.fresh)
                self.chunks.append(frozen(self.fresh))
            self.fresh = []
        return make_snapshot(STEP_WINDOW, {"state": replace(self.st, entries={}), "entry_chunks": self.chunks},
                             freeze=True)


class TrendLogic(StatefulLogic[Any, Output, Snapshot]):
    """One digest type's trends: drafts applied in window order (each profile's digests in
    theirs), the digests emitted."""

    def __init__(self, settings: Any, resume: Snapshot | None, recovery: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.config = settings.digests.to_config()
        st = restore(STEP_TREND, resume) if resume is not None else {}
        #: per chain (None: the type's own digests; else a profile's): the previous window's
        #: memory, the windows in order, the drafts that came
        self.previous: dict[str | None, JsonRecord] = st.get("previous", {})
        self.order: dict[str | None, list[WindowOrder]] = st.get("order", {})
        self.drafts: dict[tuple[str | None, int, bool], WindowDraft] = st.get("drafts", {})

    def on_item(self, value: WindowOrder | WindowDraft) -> tuple[Iterable[Output], bool]:
        if isinstance(value, WindowOrder):
            chain = value.profile
            self.order.setdefault(chain, []).append(value)
        else:
            chain = value.profile.profile if value.profile is not None else None
            self.drafts[(chain, value.window.start_ms, value.final)] = value
        out: list[Output] = []
        order = self.order.get(chain, [])
        while order:
            o = order[0]
            dr = self.drafts.pop((chain, o.window.start_ms, o.final), None)
            if dr is None:
                break
            order.pop(0)
            prev = self.previous.get(chain)
            d = apply_trends(dr.draft, prev, self.config)
            if dr.profile is not None:  # a profile's digest: its key, top terms, relevance
                d = personalize(d, dr.profile.profile, dr.profile.top_terms, dr.relevance or {})
            elif dr.relevance is not None:  # the items carry the live relevance
                d = with_item_relevance(d, dr.relevance)
            if o.final and (nxt := next_memory(prev, d)) is not None:
                self.previous[chain] = dict(nxt)
            metrics.DIGESTS.labels(o.window.digest_type).inc()
            out.append(Output(self.s.kafka.topics.digests, d["digest_id"].encode(), exact_size(dumps(d))))
        return out, StatefulLogic.RETAIN

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_TREND, {"previous": self.previous, "order": self.order,
                                          "drafts": self.drafts}, freeze=self.recovery)
