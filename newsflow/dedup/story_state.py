"""The current state of each story, for the ``stories`` topic: pure domain code.

A story shard feeds every scored article record to :meth:`StoryTracker.observe`; once per
released batch (a tick) :meth:`StoryTracker.flush` returns the stories that changed since the
last flush — coalesced, at most one view per story per tick — and the stories that expired.

Event time only: the tracker's clock is the latest publication time it has seen (the story
clock of :class:`~newsflow.dedup.story_assigner.StoryAssigner`); a story expires ``window_ms``
after its last member, as the assigner's story state does. Deterministic: views come out in
story-id order, so a replay gives the same records for any number of workers.

:class:`MemberRecords` keeps the ``articles`` records of the live stories, so that a late merge
emits them again (same keys) under the story they joined.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import orjson

from newsflow.core.exactbytes import exact_size
from newsflow.core.timeutil import iso_to_ms
from newsflow.feeds.tiers import BUILTIN_TIERS, SourceTiers
from newsflow.runtime.pickling import fast_pickle
from newsflow.scoring.importance import story_phase
from newsflow.text.entities import extract_entities, with_of_phrase
from newsflow.text.titles import short_headline

__all__ = ["MemberRecords", "StoryLead", "StoryTracker", "StoryView", "publisher_family", "story_entity"]

HOUR_MS = 3_600_000
#: member ids kept in a story view (the count is always exact)
MAX_MEMBERS = 500
#: recent member titles kept for the label
LABEL_MEMBERS = 8
LABEL_WORDS = 10


def publisher_family(publisher: str | None, url: str | None, table: SourceTiers | None = None) -> str:
    """A publisher family (:meth:`~newsflow.feeds.tiers.SourceTiers.family`): the registrable
    domain of the article's URL ("NYT U.S." and "NYT World" are both ``nytimes.com``) or the
    family it belongs to in ``table``'s ``[families]`` (default: the built-in table); on a shared
    platform (YouTube, Medium, …: :data:`~newsflow.feeds.urls.SHARED_PLATFORMS`) the family of
    the publisher's name, else the name lower-cased, so that the YouTube channels of CNN and Al
    Jazeera are two publishers (not one ``youtube.com``) and a CNN video and a CNN article one."""
    return (BUILTIN_TIERS if table is None else table).family(publisher, url)


@fast_pickle
@dataclass(frozen=True, slots=True)
class StoryLead:
    """The story's lead article: the member with the highest importance (ties: the earlier)."""

    article_id: str
    title: str
    canonical_url: str | None
    publisher: str
    importance: float


@dataclass(frozen=True, slots=True)
class StoryView:
    """One story as the ``stories`` topic carries it (built into a record by ``wire.codec``)."""

    story_id: str
    status: str  # active | expired (also the last record of a story merged into another)
    updated_ms: int  # the tracker's clock when the view was taken
    first_ms: int
    last_ms: int
    member_count: int
    members: tuple[str, ...]
    publishers: tuple[str, ...]  # distinct families, sorted
    tiers: tuple[str, ...]
    phase: str
    lead: StoryLead
    label: str
    importance: float
    peak_importance: float
    merged_into: str | None = None  # set on the last record of a story merged into another


@fast_pickle
@dataclass(slots=True)
class _Story:
    first_ms: int
    last_ms: int
    count: int = 0
    members: list[str] = field(default_factory=list)
    families: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)  # publisher names, lower-case (label stop list)
    tiers: set[str] = field(default_factory=set)
    lead: StoryLead | None = None
    lead_ms: int = 0
    peak: float = 0.0
    seen: set[str] = field(default_factory=set)  # every member id (members keeps the first ones)
    recent: list[str] = field(default_factory=list)  # recent member titles, for the label


@lru_cache(maxsize=1 << 14)
def _title_grams(title: str) -> tuple[str, ...]:
    """The distinct 1-3 word runs of a title's entity phrases, longest first per phrase
    (memoized: a story's recent titles are read again at every flush of the story)."""
    grams: dict[str, None] = {}
    for phrase in extract_entities(title):
        w = phrase.split()
        for n in (3, 2, 1):
            for i in range(len(w) - n + 1):
                grams[" ".join(w[i:i + n])] = None
    return tuple(grams)


def story_entity(titles: list[str], skip: set[str] | frozenset[str] = frozenset()) -> str | None:
    """The entity named in most of the titles (at least two): the 1-3 word runs of their
    capitalized phrases (``text.entities``), most titles first, then the longer; as the first
    title containing it writes it. Runs found in a member's publisher name (``skip``,
    lower-case names) are not entities of the story. None when no entity recurs."""
    counts: dict[str, int] = {}
    # "g is in one of the names" as one substring test (a gram never holds the separator; one
    # that would is tested name by name): same result, not O(grams x publishers)
    joined = "\x00".join(skip)
    for t in titles:
        for g in _title_grams(t):
            if g in joined if "\x00" not in g else any(g in p for p in skip):
                continue
            counts[g] = counts.get(g, 0) + 1
    best = sorted(counts.items(), key=lambda kv: (-kv[1], -len(kv[0].split())))
    if not best or best[0][1] < 2:
        return None
    key = best[0][0]
    for t in titles:  # as a title writes it ("Isle of Wight", not the scanner's "Isle")
        i = t.lower().find(key)
        if i >= 0:
            return with_of_phrase(t[i:i + len(key)], titles)
    return key


@lru_cache(maxsize=1 << 14)
def _short(title: str, words: int = LABEL_WORDS) -> str:
    """:func:`short_headline`, memoized: a story's view is built again at every change of the
    story, most often with the same lead."""
    return short_headline(title, max_words=words)


class StoryTracker:
    """Keyed state of one story shard: story id -> current state, and the ids changed since the
    last :meth:`flush`."""

    def __init__(self, window_ms: int = 72 * HOUR_MS) -> None:
        self.window_ms = window_ms
        self.stories: dict[str, _Story] = {}
        self.dirty: set[str] = set()
        #: last views of stories merged into others, emitted by the next flush
        self.merged_out: list[StoryView] = []
        self.now_ms = -(1 << 62)
        self._swept_hour = -(1 << 62)

    def observe(self, rec: Mapping[str, Any], families: SourceTiers | None = None) -> None:
        """One scored ``articles`` record (any disposition): update its story."""
        sid = rec["story_id"]
        t = iso_to_ms(rec["published_at"])
        if t > self.now_ms:
            self.now_ms = t
        st = self.stories.get(sid)
        if st is None:
            st = self.stories[sid] = _Story(t, t)
        st.first_ms = min(st.first_ms, t)
        st.last_ms = max(st.last_ms, t)
        aid = rec["article_id"]
        if aid not in st.seen:  # a revision or a sighting of a member is not a new member
            st.seen.add(aid)
            st.count += 1
            if len(st.members) < MAX_MEMBERS:
                st.members.append(aid)
            st.recent.append(rec.get("title") or "")
            del st.recent[:-LABEL_MEMBERS]
        st.names.add((rec.get("publisher") or "").lower())
        st.families.add(publisher_family(rec.get("publisher"), rec.get("canonical_url") or rec.get("url"), families))
        if rec.get("tier"):
            st.tiers.add(rec["tier"])
        imp = float(rec.get("importance") or 0.0)
        st.peak = max(st.peak, imp)
        lead = st.lead
        if lead is None or imp > lead.importance or (
                imp == lead.importance and (t, aid) < (st.lead_ms, lead.article_id)):
            st.lead = StoryLead(aid, rec.get("title") or "", rec.get("canonical_url") or rec.get("url"),
                                rec.get("publisher") or "", imp)
            st.lead_ms = t
        self.dirty.add(sid)

    def merge(self, sid: str, into: str) -> None:
        """Story ``sid`` was merged into ``into`` (the assigner's late merge): ``into`` takes its
        members, publishers, tiers, times and lead; ``sid`` leaves with a last record naming
        ``into`` (``merged_into``) at the next flush."""
        st = self.stories.pop(sid, None)
        if st is None or st.lead is None:
            return
        self.dirty.discard(sid)
        self.merged_out.append(replace(self._view(sid, st, "expired"), merged_into=into))
        dst = self.stories.get(into)
        if dst is None:
            dst = self.stories[into] = _Story(st.first_ms, st.last_ms)
        dst.first_ms, dst.last_ms = min(dst.first_ms, st.first_ms), max(dst.last_ms, st.last_ms)
        for aid in st.members:
            if aid not in dst.seen and len(dst.members) < MAX_MEMBERS:
                dst.members.append(aid)
        new = st.seen - dst.seen
        dst.count += len(new)
        dst.seen |= new
        dst.families |= st.families
        dst.names |= st.names
        dst.tiers |= st.tiers
        dst.recent = (dst.recent + st.recent)[-LABEL_MEMBERS:]
        dst.peak = max(dst.peak, st.peak)
        lead = st.lead
        if dst.lead is None or lead.importance > dst.lead.importance or (
                lead.importance == dst.lead.importance and (st.lead_ms, lead.article_id)
                < (dst.lead_ms, dst.lead.article_id)):
            dst.lead, dst.lead_ms = lead, st.lead_ms
        self.dirty.add(into)

    def _view(self, sid: str, st: _Story, status: str) -> StoryView:
        assert st.lead is not None
        now = max(self.now_ms, st.last_ms)
        entity = story_entity(st.recent, st.names)
        label = f"{entity}: {_short(st.lead.title, 8)}" if entity and entity.lower() not in \
            st.lead.title.lower() else _short(st.lead.title)
        phase = story_phase(st.count, st.first_ms, now, last_seen=st.last_ms,
                            current_score=st.lead.importance, peak_score=st.peak)
        return StoryView(
            story_id=sid, status=status, updated_ms=now, first_ms=st.first_ms, last_ms=st.last_ms,
            member_count=st.count, members=tuple(st.members), publishers=tuple(sorted(st.families)),
            tiers=tuple(sorted(st.tiers)), phase=phase, lead=st.lead, label=label,
            importance=st.lead.importance, peak_importance=st.peak,
        )

    def flush(self) -> list[StoryView]:
        """Views of the stories changed since the last flush, then of the stories that expired
        (their last member is ``window_ms`` older than the clock; they leave the state), each
        group in story-id order."""
        out, self.merged_out = self.merged_out, []
        out += [self._view(sid, self.stories[sid], "active") for sid in sorted(self.dirty)]
        self.dirty.clear()
        if self.now_ms // HOUR_MS <= self._swept_hour:  # expiry is swept once per hour of clock
            return out
        self._swept_hour = self.now_ms // HOUR_MS
        cutoff = self.now_ms - self.window_ms
        gone = sorted(sid for sid, st in self.stories.items() if st.last_ms < cutoff)
        for sid in gone:
            out.append(self._view(sid, self.stories.pop(sid), "expired"))
        return out

    def __len__(self) -> int:
        return len(self.stories)


def _packed(rec: Mapping[str, Any]) -> bytes:
    """The record's JSON as an exact-size copy (orjson's bytes keep their output buffer)."""
    return exact_size(orjson.dumps(rec))


#: records per compressed block of :class:`MemberRecords` (a merge decompresses the blocks its
#: story's records are in; 64 UCI records: ~110 KB of JSON, ~17 KB compressed)
BLOCK_RECORDS = 64
#: zlib level of the blocks (1: 6.5x on UCI records in blocks of 32-64, half the CPU of level 6)
BLOCK_LEVEL = 1

#: a kept record: (publication ms, its JSON bytes) until the next :meth:`MemberRecords.pack`,
#: then (publication ms, block, line): line ``line`` of the zlib-compressed block (JSON lines)
_Kept = tuple[int, bytes] | tuple[int, bytes, int]


class MemberRecords:
    """Story id -> the ``articles`` records emitted for it in the last ``window_ms`` of event
    time (publication time, the story clock; compact JSON bytes, one per record key, in emission
    order), so that a late merge can emit them again under the story they joined: the
    ``articles`` topic is compacted by ``key``, so its latest record of each of those articles
    then names the article's current story. An older member keeps its record (the ``stories``
    topic's ``merged_into`` still says where its story went): like all state, this expires on
    event time, so a story that lives for weeks does not keep every record it ever had.

    Memory: the records added since the last :meth:`pack` (called by :meth:`expire`, once per
    batch of the story shard) are compressed together, sorted by story, in zlib blocks of
    :data:`BLOCK_RECORDS` JSON lines (UCI records: 6.5x smaller; the 100k UCI replay's store,
    entries included: 50 MB -> 10 MB at its largest). A block is shared by its records' entries and freed with the last of
    them; a merge decompresses the blocks of the merged-away story, and gives back the same
    bytes that were added.

    Pure and keyed like the story shard."""

    def __init__(self, window_ms: int = 72 * HOUR_MS) -> None:
        self.window_ms = window_ms
        self.by_story: dict[str, dict[str, _Kept]] = {}
        self.now_ms = -(1 << 62)
        self._swept_hour = -(1 << 62)
        #: (story id, key) of the records added since the last pack, in order
        self._fresh: list[tuple[str, str]] = []

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Snapshots of before the blocks hold every record as JSON bytes: packed at the next batch."""
        self.__dict__.update(state)
        if "_fresh" not in state:
            self._fresh = [(sid, k) for sid, recs in self.by_story.items() for k, e in recs.items() if len(e) == 2]

    def add(self, rec: Mapping[str, Any]) -> None:
        """One emitted record (any disposition); a re-emit of the same key replaces it."""
        t = iso_to_ms(rec["published_at"])
        if t > self.now_ms:
            self.now_ms = t
        sid, key = rec["story_id"], rec["key"]
        self.by_story.setdefault(sid, {})[key] = (t, _packed(rec))
        self._fresh.append((sid, key))

    def pack(self) -> int:
        """Compress the records added since the last pack into blocks (a story's records
        together, in emission order); returns how many."""
        fresh, self._fresh = self._fresh, []
        todo: list[tuple[str, str, int, bytes]] = []
        for sid, key in fresh:
            e = self.by_story.get(sid, {}).get(key)
            if e is not None and len(e) == 2:  # not replaced by a packed one, merged away or gone
                todo.append((sid, key, e[0], e[1]))
                self.by_story[sid][key] = (e[0], b"", -1)  # (a key added twice is packed once)
        todo.sort(key=lambda x: x[0])  # stable: a story's records together, in emission order
        for i in range(0, len(todo), BLOCK_RECORDS):
            chunk = todo[i:i + BLOCK_RECORDS]
            block = zlib.compress(b"\n".join(x[3] for x in chunk), BLOCK_LEVEL)
            for j, (sid, key, t, _) in enumerate(chunk):
                self.by_story[sid][key] = (t, block, j)
        return len(todo)

    @staticmethod
    def _json(e: _Kept, lines: dict[int, list[bytes]]) -> bytes:
        """A kept record's JSON bytes (``lines``: blocks decompressed so far, by ``id``)."""
        if len(e) == 2:
            return e[1]
        block, j = e[1], e[2]
        got = lines.get(id(block))
        if got is None:
            got = lines[id(block)] = zlib.decompress(block).split(b"\n")
        return got[j]

    def merge(self, gone: str, into: str) -> list[dict[str, Any]]:
        """Story ``gone`` joined ``into``: its records kept, each with ``story_id`` = ``into``,
        in the order they were first emitted (they now count as ``into``'s members)."""
        if gone == into:
            return []
        recs = self.by_story.pop(gone, None)
        if not recs:
            return []
        dst = self.by_story.setdefault(into, {})
        out: list[dict[str, Any]] = []
        lines: dict[int, list[bytes]] = {}
        for key, e in recs.items():
            r = orjson.loads(self._json(e, lines))
            r["story_id"] = into
            dst[key] = (e[0], _packed(r))
            self._fresh.append((into, key))
            out.append(r)
        return out

    def records(self, sid: str) -> list[bytes]:
        """The JSON bytes of story ``sid``'s kept records, in emission order (tests, tools)."""
        lines: dict[int, list[bytes]] = {}
        return [self._json(e, lines) for e in self.by_story.get(sid, {}).values()]

    def expire(self) -> int:
        """Pack the records added since the last call, then drop the records published
        ``window_ms`` before the clock (swept once per hour of clock); returns how many were
        dropped. The story shard calls it once per batch."""
        self.pack()
        if self.now_ms // HOUR_MS <= self._swept_hour:
            return 0
        self._swept_hour = self.now_ms // HOUR_MS
        cutoff = self.now_ms - self.window_ms
        n = 0
        for sid in list(self.by_story):
            recs = self.by_story[sid]
            old = [k for k, e in recs.items() if e[0] < cutoff]
            for k in old:
                del recs[k]
            n += len(old)
            if not recs:
                del self.by_story[sid]
        return n

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_story.values())
