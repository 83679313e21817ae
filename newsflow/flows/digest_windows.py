"""Digests assembled per window: the messages between the four digest steps, the story shards'
outputs as the digests read them (:func:`digest_inputs`) and what the steps share about windows.
No digest key sees every article (a key per digest type would keep every entry of its longest
window and assemble its windows one after the other). Four steps (each in
:mod:`newsflow.flows.steps`; wired in :mod:`newsflow.flows.pipeline`):

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from newsflow.config import Settings
from newsflow.core.timeutil import HOUR_MS
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.entries import DigestEntry, digest_entries
from newsflow.digest.health import report_view
from newsflow.digest.record import FeedHealth
from newsflow.digest.schedule import DigestSchedule, DigestWindow
from newsflow.digest.trends import DigestDraft
from newsflow.model.messages import (
    FromShard,
    HealthReport,
    JsonRecord,
    MergedArticle,
    ProfileAt,
    ScoredArticle,
    StoryOutput,
    StoryUpdate,
)
from newsflow.runtime.pickling import fast_pickle

STEP_FEEDER, STEP_CLOCK, STEP_WINDOW, STEP_TREND = "digest_feeder", "digest_clock", "digest_window", "digest_trend"


@dataclass(frozen=True, slots=True)
class CoverageAt:
    """What a window's re-scoring reads of the story coverage, as of the window's end: each of
    its stories' publishers and tiers, each of its feeds' reliability (from the story shards'
    seals: each shard keeps its stories' coverage)."""

    end_ms: int
    stories: Mapping[str, tuple[list[str], list[str]]]
    feeds: Mapping[str, float | None]

    def as_of(self, story_id: str | None, end_ms: int) -> tuple[list[str], list[str]]:
        if not story_id:
            return [], []
        assert end_ms == self.end_ms
        pubs, tiers = self.stories[story_id]
        return list(pubs), list(tiers)

    def reliability_of(self, feed_id: str | None, end_ms: int) -> float | None:
        assert end_ms == self.end_ms
        return self.feeds[feed_id] if feed_id else None


@dataclass(frozen=True, slots=True)
class WindowEntry:
    """An article's digest entry for one window."""

    entry: DigestEntry


@dataclass(frozen=True, slots=True)
class WindowClose:
    """The clock closed ``window``: the story shards whose seals it reads, its feed health, and
    the profiles whose own digest of it will follow (each a :class:`ProfileClose`)."""

    window: DigestWindow
    sealers: tuple[str, ...]
    feed_health: FeedHealth
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
def windows_touching_hour(schedule: DigestSchedule, hour: int, types: tuple[str, ...] | frozenset[str]) -> tuple[DigestWindow, ...]:
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


@fast_pickle  # (recovery pickles every feeder each epoch, thousands of these: 1.6x faster)
@dataclass(slots=True)
class SlimEntry:
    article_id: str
    story_id: str | None
    feed_id: str | None
    #: the entry's time on the digests' basis (None: it has none)
    at_ms: int | None
    exact: bool


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


def digest_inputs(settings: Settings, profile_terms: bool = False
                 ) -> Callable[[list[tuple[str, StoryOutput]]], list[tuple[str, FromShard]]]:
    """Story-shard outputs as the digests read them, each with its shard's key: an article's
    digest entry and publisher families are built here, once, where the story shard runs (not
    once per digest step or window), for a whole batch of records in one call (the text analysis
    is vectorized per call: ~2x cheaper than one call per record)."""
    cfg = settings.digests.to_config()
    family = settings.normalize.families().family

    def convert(batch: list[tuple[str, StoryOutput]]) -> list[tuple[str, FromShard]]:
        kept = [(k, m) for k, m in batch if not isinstance(m, StoryUpdate | MergedArticle)]
        # (without its feed's boilerplate: a channel's description under every video is not
        # what the video is about, for the topic clustering and the summary)
        arts = [m.record if m.story_text is None else {**m.record, "body_text": m.story_text}
                for _, m in kept if isinstance(m, ScoredArticle)]
        entries = iter(digest_entries(arts, title_weight=cfg.title_weight, body_words=cfg.body_words,
                                      profile_terms=profile_terms) if arts else ())
        return [(k, FromShard(k, ScoredArticle(digest_view(m.record, family), next(entries))
                              if isinstance(m, ScoredArticle) else
                              slim_health(m) if isinstance(m, HealthReport) else m)) for k, m in kept]

    return convert


def slim_health(m: HealthReport) -> HealthReport:
    """A health report as the digest steps read it (:func:`~newsflow.digest.health.report_view`)."""
    return HealthReport(m.seq, report_view(m.record), m.report, m.epoch)


#: what a digest step reads of an article record besides its entry (event time, story coverage)
_DIGEST_RECORD_FIELDS = ("story_id", "fetched_at", "publisher", "feed_id", "tier", "seen_in")


def digest_view(rec: JsonRecord, family: Callable[[str | None, str | None], str]) -> JsonRecord:
    """The record fields a digest step reads beside the entry: the 5 digest steps may run in
    other processes, where each gets its own pickled copy (not the body text ×5). With the
    publisher families of the record and of its sightings (:meth:`StoryCoverage.add`'s
    ``family`` / ``seen_families``), looked up here once, not by each digest step."""
    view = {k: rec[k] for k in _DIGEST_RECORD_FIELDS if k in rec}
    fams = StoryCoverage.families_of(rec, family)
    view["family"], view["seen_families"] = fams
    return view
