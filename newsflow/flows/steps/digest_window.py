"""A digest window key's logic (:mod:`newsflow.flows.digest_windows`): the window's entries and
seals, its draft once it has them all (and each profile's), then the key ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.core.snapshot import Snapshot, frozen, make_snapshot, restore, thaw
from newsflow.digest.assemble import draft_digest
from newsflow.digest.entries import DigestEntry, with_relevance
from newsflow.flows.digest_windows import (
    STEP_WINDOW,
    CoverageAt,
    ProfileClose,
    WindowClose,
    WindowDraft,
    WindowEntry,
    WindowSeal,
    WindowSkip,
)
from newsflow.profiles.vectors import interest_profile
from newsflow.runtime.pickling import Shared


@dataclass(slots=True)
class _WindowState:
    entries: dict[str, list[DigestEntry]] = field(default_factory=dict)
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

    def __init__(self, settings: Settings, resume: Snapshot | None, tkeys: Mapping[str, str],
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
        self.chunk_entries: list[list[DigestEntry]] = []
        self.fresh: list[DigestEntry] = []
        if self.chunks:
            for chunk in self.chunks:
                got = thaw(chunk)
                self.chunk_entries.append(got)
                for e in got:
                    self.st.entries.setdefault(e.article_id, []).append(e)

    def on_item(self, value: Any) -> tuple[Iterable[Any], bool]:
        st = self.st
        if isinstance(value, Shared):
            value = value.obj
        if isinstance(value, WindowEntry):
            aid = value.entry.article_id
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
            out.append(self._draft(end, [with_relevance(r, ip) for r in recs], coverage, pc))
        st.profile_closes = []
        return out, StatefulLogic.RETAIN if st.due else StatefulLogic.DISCARD

    def _records(self, c: WindowClose) -> tuple[list[DigestEntry], CoverageAt]:
        """The window's entries in the seals' order (each story followed through its merges
        before the end) and their coverage as of the end."""
        st = self.st
        taken: dict[str, int] = {}
        recs: list[DigestEntry] = []
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
                sid = r.story_id
                to = seal.aliases.get(sid) if sid else None
                recs.append(r if to is None else replace(r, story_id=to))
        return recs, CoverageAt(c.window.end_ms, stories, feeds)

    def _draft(self, c: WindowClose, recs: list[DigestEntry], coverage: CoverageAt,
               pc: ProfileClose | None = None) -> tuple[str, WindowDraft]:
        final, as_of = (c.final, c.as_of_ms) if pc is None else (pc.final, pc.as_of_ms)
        d = draft_digest(recs, c.window, schedule=self.schedule, feed_health=c.feed_health,
                         config=self.config, final=final, coverage=coverage,
                         score_config=self.score_config, as_of_ms=as_of)
        rel = {r.article_id: comps["relevance"] for r in recs
               if (comps := r.importance_components) is not None} if self.live_relevance or pc else None
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
