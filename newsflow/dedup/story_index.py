"""The story step's keyed indexes (pure domain code): :class:`BandIndex` (LSH bucket -> recent
articles, the candidates of layers 3-4) and :class:`StoryPostings` (term -> open stories, the
candidates of story matching), and how their keys are routed to shards.

Both keep their entries in event-time slabs or hours, so expiry drops whole groups (no
per-entry timers), and bound what one key holds, so a hot key cannot make a lookup slow.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import xxhash

from newsflow.dedup.story_config import HOUR_MS, SLAB_MS
from newsflow.runtime.pickling import set_slots

__all__ = ["PACKED_V1", "BandIndex", "StoryPostings", "key_shard", "term_key"]


def key_shard(key: int, shards: int) -> int:
    """Stable shard of a bucket key (the routing a keyed dataflow uses: ``str(shard)``)."""
    return key % shards if shards > 1 else 0


@lru_cache(maxsize=1 << 18)
def term_key(term: str) -> int:
    """Bucket key of a story-matching term in the story postings (stable xxh3)."""
    return xxhash.xxh3_64_intdigest(b"w\x00" + term.encode("utf-8", "surrogatepass"))


#: the layout tag of a state pickled by its own ``__getstate__`` (before: ``(None, slots)``)
PACKED_V1 = 1


def _narrow(a: array[int]) -> tuple[str, bytes]:
    """(typecode, bytes) of non-negative ints in the narrowest unsigned array that holds them."""
    top = max(a, default=0)
    code = "B" if top < 1 << 8 else "H" if top < 1 << 16 else "I" if top < 1 << 32 else "Q"
    return code, (a if a.typecode == code else array(code, a)).tobytes()


class BandIndex:
    """Keyed state of one band/bucket shard: bucket key -> recent (ref, event time).

    Entries live in event-time *slabs* of ``slab_ms``; :meth:`expire` drops every slab whose
    end is older than ``now_ms - window_ms`` (so an entry lives between ``window_ms`` and
    ``window_ms + slab_ms``) — O(1) per slab, no per-entry timers. Each bucket keeps at most
    ``max_bucket`` refs per slab (the most recent), so a hot key ("Obama", a generic headline)
    cannot make a lookup slow: the cost per article is flat however large the window.
    """

    __slots__ = ("_packs", "_slabs", "max_bucket", "slab_ms", "window_ms")

    def __init__(self, window_ms: int = 72 * HOUR_MS, slab_ms: int = SLAB_MS,
                 max_bucket: int = 32) -> None:
        self.window_ms = window_ms
        self.slab_ms = slab_ms
        self.max_bucket = max_bucket
        #: slab number -> {bucket key -> [(ref, time_ms), ...]}; a bucket of one entry holds the
        #: entry itself, not a list of one (most buckets: 64 bytes less each, ~30 MB on 100k UCI)
        self._slabs: dict[int, dict[int, list[tuple[Any, int]] | tuple[Any, int]]] = {}
        #: slab number -> its packed layout as last pickled, dropped when the slab changes: a
        #: recovery snapshot every epoch packs only the slabs written since (most inserts go to
        #: the latest of the window's six or seven slabs)
        self._packs: dict[int, tuple[Any, ...]] = {}

    def lookup(self, keys: Iterable[int], now_ms: int | None = None,
               since_ms: int | None = None) -> list[tuple[Any, int]]:
        """(ref, time) of every entry in the buckets of ``keys``: one item per shared key, so
        callers can count shared bands (order: by slab, then unspecified). Entries older than
        the window relative to ``now_ms`` (or older than ``since_ms`` when given) are
        skipped."""
        out: list[tuple[Any, int]] = []
        if since_ms is None and now_ms is not None:
            since_ms = now_ms - self.window_ms
        keyset = set(keys)
        first = None if since_ms is None else since_ms // self.slab_ms
        for s in sorted(self._slabs):
            if first is not None and s < first:
                continue
            slab = self._slabs[s]
            hit = slab.keys() & keyset
            if not hit:
                continue
            if since_ms is not None and s == first:  # the slab straddling the cutoff
                for k in hit:
                    v = slab[k]
                    if isinstance(v, list):
                        out.extend(e for e in v if e[1] >= since_ms)
                    elif v[1] >= since_ms:
                        out.append(v)
            else:
                for k in hit:
                    v = slab[k]
                    if isinstance(v, list):
                        out.extend(v)
                    else:
                        out.append(v)
        return out

    def insert(self, keys: Iterable[int], ref: Any, time_ms: int, unique: bool = False) -> None:
        """Add ``ref`` to the buckets of ``keys`` in the slab of ``time_ms``. ``unique``: skip
        a bucket that already holds ``ref`` in that slab (story postings)."""
        s = time_ms // self.slab_ms
        slab = self._slabs.setdefault(s, {})
        self._packs.pop(s, None)
        entry = (ref, time_ms)
        cap = self.max_bucket
        for k in keys:
            got = slab.get(k)
            if got is None:
                slab[k] = entry
                continue
            if isinstance(got, list):
                if unique and any(e[0] == ref for e in got):
                    continue
                lst = got
            else:  # one entry so far
                if unique and got[0] == ref:
                    continue
                lst = [got]
                slab[k] = lst
            lst.append(entry)
            if len(lst) > cap:
                del lst[0]

    def lookup_and_insert(self, keys: Sequence[int], ref: Any, time_ms: int,
                          now_ms: int | None = None) -> list[tuple[Any, int]]:
        """Candidates for ``ref`` (entries already present), then index ``ref`` itself."""
        found = self.lookup(keys, now_ms)
        self.insert(keys, ref, time_ms)
        return found

    def expire(self, now_ms: int) -> int:
        """Drop slabs that ended before ``now_ms - window_ms``; returns entries dropped."""
        cutoff = now_ms - self.window_ms
        dropped = 0
        for s in [s for s in self._slabs if (s + 1) * self.slab_ms <= cutoff]:
            dropped += sum(len(v) if isinstance(v, list) else 1 for v in self._slabs.pop(s).values())
            self._packs.pop(s, None)
        return dropped

    def __len__(self) -> int:
        return sum(len(v) if isinstance(v, list) else 1 for slab in self._slabs.values() for v in slab.values())

    def snapshot(self) -> tuple[Any, ...]:
        """Compact, immutable, picklable state (for Bytewax ``snapshot()``)."""
        return (self.window_ms, self.slab_ms, self.max_bucket,
                tuple((s, tuple((k, tuple(v) if isinstance(v, list) else (v,)) for k, v in slab.items()))
                      for s, slab in sorted(self._slabs.items())))

    @classmethod
    def restore(cls, snap: tuple[Any, ...]) -> BandIndex:
        window_ms, slab_ms, max_bucket, slabs = snap
        idx = cls(window_ms, slab_ms, max_bucket)
        idx._slabs = {s: {k: v[0] if len(v) == 1 else list(v) for k, v in items} for s, items in slabs}
        return idx

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled (recovery snapshots) as arrays per slab, not one int and one tuple per
        bucket entry: the bucket keys (``uint64``), each bucket's length (0: a bare entry), the
        indices of its entries, and the slab's distinct entries as refs and ``int64`` times
        (the 100k UCI replay's story step at its end: 3.37 -> 2.48 MB, 16 keys per article).
        Entries shared by several buckets stay shared; dict order is kept, so a restored index
        looks up as the live one. Keys outside ``uint64`` (never made by this module) keep the
        layout of before."""
        try:
            return self._packed()
        except (OverflowError, TypeError):
            return (None, {k: getattr(self, k) for k in BandIndex.__slots__ if k != "_packs"})

    def _packed(self) -> tuple[Any, ...]:
        slabs = []
        packs = self._packs
        for s, slab in self._slabs.items():
            p = packs.get(s)
            if p is None:
                p = packs[s] = self._pack_slab(s, slab)
            slabs.append(p)
        return (PACKED_V1, self.window_ms, self.slab_ms, self.max_bucket, slabs)

    @staticmethod
    def _pack_slab(s: int, slab: dict[int, list[tuple[Any, int]] | tuple[Any, int]]) -> tuple[Any, ...]:
        """One slab's packed layout (see :meth:`__getstate__`)."""
        at: dict[int, int] = {}
        ents: list[tuple[Any, int]] = []
        lens = array("I")
        idx = array("I")
        for v in slab.values():
            group = v if isinstance(v, list) else (v,)
            lens.append(len(v) if isinstance(v, list) else 0)
            for e in group:
                i = at.get(id(e))
                if i is None:
                    i = at[id(e)] = len(ents)
                    ents.append(e)
                idx.append(i)
        return (s, array("Q", slab).tobytes(), *_narrow(lens), *_narrow(idx), [e[0] for e in ents],
                array("q", [e[1] for e in ents]).tobytes())

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self._packs = {}
        if state[0] is None:  # pickled before __getstate__: (None, {slot: value})
            set_slots(self, state)
            return
        _, self.window_ms, self.slab_ms, self.max_bucket, packed = state
        self._slabs = {}
        self._packs = {p[0]: p for p in packed}  # each slab as it was packed, until it changes
        for s, kb, lt, lb, it, ib, refs, tb in packed:
            times, lens, idx = array("q"), array(lt), array(it)
            times.frombytes(tb)
            lens.frombytes(lb)
            idx.frombytes(ib)
            keys = array("Q")
            keys.frombytes(kb)
            ents = list(zip(refs, times, strict=True))
            slab: dict[int, list[tuple[Any, int]] | tuple[Any, int]] = {}
            j = 0
            for k, n in zip(keys, lens, strict=True):
                if n:
                    slab[k] = [ents[i] for i in idx[j:j + n]]
                    j += n
                else:
                    slab[k] = ents[idx[j]]
                    j += 1
            self._slabs[s] = slab


class StoryPostings:
    """Keyed state of one postings shard: term -> the open stories that contain it.

    ``term -> {story_id: event time of the story's last member with that term}``, insertion
    ordered so the least recently refreshed story is evicted first when a term holds more than
    ``max_stories`` (hot terms like "apple" cannot make a lookup slow). Only stories touched
    within ``idle_ms`` are returned; :meth:`expire` (once per slab of event time) sweeps out
    older entries, so the state holds only open stories. A sweep skips a term whose entries
    are all newer by a lower bound of their times (``_low``, not pickled: rebuilt on load), and
    reads only the terms whose bound lies in an hour the sweep reaches (``_due``): not every
    term of the shard each time.
    """

    __slots__ = ("_due", "_low", "_post", "idle_ms", "max_stories")

    def __init__(self, idle_ms: int = 12 * HOUR_MS, max_stories: int = 32) -> None:
        self.idle_ms = idle_ms
        self.max_stories = max_stories
        self._post: dict[str, dict[str, int]] = {}
        #: term -> at most the oldest time of its entries (a refresh only raises an entry's time)
        self._low: dict[str, int] = {}
        #: hour -> terms whose ``_low`` was set in that hour (every term is in the list of its
        #: bound's hour; a term whose bound moved since may still be listed in another)
        self._due: dict[int, list[str]] = {}

    def lookup(self, terms: Iterable[str], now_ms: int) -> dict[str, list[str]]:
        """Open stories per term (terms without any are left out)."""
        since = now_ms - self.idle_ms
        post = self._post
        out: dict[str, list[str]] = {}
        for t in terms:
            d = post.get(t)
            if d:
                sids = [sid for sid, ms in d.items() if ms > since]
                if sids:
                    out[t] = sids
        return out

    def add(self, terms: Iterable[str], story_id: str, time_ms: int) -> None:
        post = self._post
        low = self._low
        cap = self.max_stories
        due = None
        for t in terms:
            d = post.get(t)
            if d is None:
                post[t] = {story_id: time_ms}
                low[t] = time_ms
                if due is None:
                    due = self._due.setdefault(time_ms // HOUR_MS, [])
                due.append(t)
                continue
            if time_ms < low[t]:
                if low[t] // HOUR_MS != time_ms // HOUR_MS:
                    self._due.setdefault(time_ms // HOUR_MS, []).append(t)
                low[t] = time_ms
            old = d.pop(story_id, None)
            d[story_id] = time_ms if old is None or time_ms > old else old
            if len(d) > cap:
                del d[next(iter(d))]

    def expire(self, now_ms: int) -> int:
        """Drop entries of stories idle for ``idle_ms`` or more; returns entries dropped."""
        since = now_ms - self.idle_ms
        dropped = 0
        post = self._post
        low = self._low
        due = self._due
        top = since // HOUR_MS  # hours below it lie wholly before ``since``, its own partly
        for h in sorted(h for h in due if h <= top):
            for t in due.pop(h):
                b = low.get(t)
                if b is None or b // HOUR_MS != h:
                    continue  # gone, or listed again in its bound's hour
                if b > since:  # every entry is newer: nothing to drop (stays listed here)
                    due.setdefault(h, []).append(t)
                    continue
                d = post[t]
                if d:
                    oldest = min(d.values())
                    if oldest > since:  # nothing to drop: the dict (and its order) stays
                        low[t] = oldest
                        due.setdefault(oldest // HOUR_MS, []).append(t)
                        continue
                keep = {sid: ms for sid, ms in d.items() if ms > since}
                dropped += len(d) - len(keep)
                if keep:
                    post[t] = keep
                    low[t] = b = min(keep.values())
                    due.setdefault(b // HOUR_MS, []).append(t)
                else:
                    del post[t], low[t]
        return dropped

    def __len__(self) -> int:
        return sum(len(d) for d in self._post.values())

    def snapshot(self) -> tuple[Any, ...]:
        return (self.idle_ms, self.max_stories,
                tuple((t, tuple(d.items())) for t, d in self._post.items()))

    @classmethod
    def restore(cls, snap: tuple[Any, ...]) -> StoryPostings:
        idle_ms, cap, items = snap
        p = cls(idle_ms, cap)
        p._post = {t: dict(d) for t, d in items}
        p._reindex()
        return p

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled without ``_low`` (rebuilt on load)."""
        return (PACKED_V1, self.idle_ms, self.max_stories, self._post)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        if state[0] is None:  # pickled before __getstate__: (None, {slot: value})
            set_slots(self, state)
        else:
            _, self.idle_ms, self.max_stories, self._post = state
        self._reindex()

    def _reindex(self) -> None:
        # (a term without entries, as a state restored from before may hold, is swept out)
        self._low = {t: min(d.values(), default=_NO_TIME) for t, d in self._post.items()}
        self._due = {}
        for t, b in self._low.items():
            self._due.setdefault(b // HOUR_MS, []).append(t)


#: below any event time: a term with this bound is read by the next sweep
_NO_TIME = -(1 << 62)
