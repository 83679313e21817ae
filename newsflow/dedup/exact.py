"""Exact dedup, layers 1–2 (docs/rules.md#layer-1-guid-and-content-hash, docs/rules.md#layer-2-canonical-url), as the pure state of ONE shard.

The flow keys articles by ``dedup_shard_key`` (a stable hash of the registrable domain of the
article's URL, so GUID and URL matches of one publisher's article land in the same shard) and
keeps one :class:`DedupShard` per key. Nothing here reads the wall clock: ``advance(watermark)``
is driven by event-time ticks, and all state expires ``window_ms`` after it was last seen.

Layer 1 (GUID): same GUID + same content hash -> ``exact_duplicate`` (or, from the feed that
already served it, a re-poll: counted, not emitted); same GUID + changed content from the same
publisher -> ``revision`` (the record lists the changed fields); from another publisher (a
syndicated copy with edits) -> ``exact_duplicate`` listing what differs, so a syndicator can't
overwrite the original. Layer 2 (canonical URL): same URL, other GUID ->
``exact_duplicate``; the copy with more content becomes the stored (``preferred``) version.
Every decision links the copy into ``seen_in`` (feeds/publishers it was seen in), never hides it.

Expiry: an entry lives ``window_ms`` after its last sighting (fetch time) *and* until
``window_ms + story_margin_ms`` after its publication time. The story layers downstream keep an
article on the publication-time clock for up to their window + two slabs (:func:`story_margin_ms`
sets the margin from them); if dedup forgot it first, an unchanged item re-served later came back
as "unique" with the original's key and the story layer, which still knew the article, turned it
into a fake ``revision`` (``changed=[]``, ``duplicate_of`` itself) that overwrote the original
record -- with a 12 h dedup window, most re-served items of a real archive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import xxhash

from newsflow.core.hashing import shard_of, stable_id
from newsflow.feeds.urls import canonicalize_url, registrable_domain
from newsflow.model.records import Article, DedupInfo, Sighting
from newsflow.model.vocab import Disposition
from newsflow.runtime.pickling import fast_pickle, from_columns, set_slots, to_columns

#: how many earlier content hashes of a GUID are remembered (old versions re-served by a
#: lagging feed or mirror are duplicates, not new revisions: no flip-flopping)
KNOWN_HASHES = 4


def state_key(text: str) -> bytes:
    """The key a shard keeps a GUID or canonical URL under: its 16-byte xxh3-128 digest, not
    the string (real GUIDs and URLs are often 60-150 characters, kept twice per article; a
    collision needs ~2^64 keys in one shard's window)."""
    return xxhash.xxh3_128_digest(text.encode("utf-8", "surrogatepass"))


def story_margin_ms(window_ms: int, story_window_ms: int, story_slab_ms: int) -> int:
    """How much longer than ``window_ms`` after its publication an entry must live so that dedup
    never forgets an article the story layer still knows: the story state drops an article once
    its slab (``story_slab_ms``) is ``story_window_ms`` old, checked once per slab, so it may keep
    it up to ``story_window_ms + 2 * story_slab_ms`` after publication, whatever the dedup window."""
    return max(0, story_window_ms + 2 * story_slab_ms - window_ms)


def dedup_shard_key(article: Article, shards: int) -> str:
    """Routing key of the dedup state for an article (stable across processes and runs).

    The registrable domain of the GUID when the GUID is a URL (syndicated copies often keep
    the originating publisher's permalink as GUID), else of the canonical URL: so both a GUID
    match and a URL match of the same article normally meet in one shard.
    """
    g = article.guid
    basis = canonicalize_url(g) if g.startswith(("http://", "https://")) else None
    basis = basis or article.canonical_url or article.url
    dom = registrable_domain(basis) if basis else f"feed:{article.feed_id}"
    return f"dd{shard_of(dom, shards):03d}"


@fast_pickle
@dataclass(slots=True)
class Cluster:
    """A group of exact copies (layers 1–2): what the decisions read of its stored version
    (word count, times) and every sighting (each record's ``seen_in``)."""

    root_id: str
    published_ms: int
    first_ms: int
    last_ms: int
    word_count: int
    sightings: list[Sighting] = field(default_factory=list)
    revisions: int = 0

    def publishers(self) -> int:
        return len({s.publisher for s in self.sightings})

    def __setstate__(self, state: Any) -> None:
        """Snapshots name each slot; those of before also kept the stored version's title, URL,
        publisher, feed and tier, which nothing read: dropped."""
        set_slots(self, state)


#: the fields :func:`changed_fields` compares, in schema order; a :class:`GuidEntry` keeps an
#: 8-byte fingerprint of each (``fps``), not the values: a title, a URL and a body hash per
#: entry were most of the dedup state, and a revision only asks "did it change?"
COMPARED = ("title", "body", "url", "published_at", "author", "categories", "media")
_FP = 8


def _fp(value: Any) -> bytes:
    return xxhash.xxh3_64_digest(orjson.dumps(value))


def _fps(title: str, body_hash: str, url: str | None, published_at: str, author: str | None,
         categories: Sequence[str], media: Sequence[str]) -> bytes:
    """The fingerprints of :data:`COMPARED`; the body's is its ``stable_id`` (as the entries of
    earlier snapshots kept it)."""
    return b"".join((_fp(title), bytes.fromhex(body_hash)[:_FP].ljust(_FP, b"\0"), _fp(url), _fp(published_at),
                     _fp(author), _fp(list(categories)), _fp(list(media))))


def article_fps(a: Article) -> bytes:
    return _fps(a.title, stable_id(a.body_text), a.canonical_url, a.published_at, a.author, a.categories,
                [m.url for m in a.media])


@fast_pickle
@dataclass(slots=True)
class GuidEntry:
    article_id: str
    publisher: str
    content_hash: str
    known_hashes: tuple[str, ...]
    #: :func:`article_fps` of the stored version
    fps: bytes
    feeds: set[str]
    cluster: Cluster
    revision_no: int
    last_ms: int
    #: other publishers' copies of this GUID: publisher -> (their last content hash, version no)
    copies: dict[str, tuple[str, int]] = field(default_factory=dict)
    published_ms: int = 0

    def __setstate__(self, state: Any) -> None:
        """Snapshots name each slot; those of before kept the compared values themselves:
        fingerprinted here, so a resumed shard decides as it would have."""
        slots = state[1] if isinstance(state, tuple) else state
        if "title" in slots:
            slots = dict(slots)
            slots["fps"] = _fps(*(slots.pop(k) for k in ("title", "body_hash", "url", "published_at", "author",
                                                          "categories", "media")))
        set_slots(self, (None, slots))


def changed_fields(old: GuidEntry, a: Article | bytes) -> tuple[str, ...]:
    """Which fields a revision changed, in schema order (``a``: the article or its
    :func:`article_fps`)."""
    new = a if isinstance(a, bytes) else article_fps(a)
    return tuple(name for i, name in enumerate(COMPARED)
                 if old.fps[i * _FP:(i + 1) * _FP] != new[i * _FP:(i + 1) * _FP])


@dataclass(slots=True)
class DedupShard:
    """The layer 1–2 state of one shard. Call :meth:`process` per article (in seq order)."""

    window_ms: int
    emit_repolls: bool = False
    #: kept this much longer than ``window_ms`` after publication (:func:`story_margin_ms`)
    story_margin_ms: int = 24 * 3_600_000
    #: :func:`state_key` of the GUID / of the canonical URL -> its entry / cluster
    by_guid: dict[bytes, GuidEntry] = field(default_factory=dict)
    by_url: dict[bytes, Cluster] = field(default_factory=dict)
    watermark: int = 0
    last_sweep: int = 0
    counters: Counter[str] = field(default_factory=Counter)

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """The slots, with the GUID entries as columns (one list per field, in the table's
        order): every shard is pickled each epoch with recovery on, and one object at a time
        its entries took most of it. Clusters stay objects (entries and the URL table share
        them; pickle keeps one of each)."""
        slots = {k: getattr(self, k) for k in DedupShard.__slots__}
        slots["by_guid_columns"] = to_columns(slots.pop("by_guid"), GuidEntry)
        return None, slots

    def __setstate__(self, state: Any) -> None:
        """Snapshots of before kept the entries as objects, and before that keyed them by the
        GUID and URL strings: read and re-keyed here."""
        slots = dict(state[1] if isinstance(state, tuple) else state)
        cols = slots.pop("by_guid_columns", None)
        if cols is not None:
            slots["by_guid"] = from_columns(cols, GuidEntry)
        set_slots(self, (None, slots))
        for name in ("by_guid", "by_url"):
            d = getattr(self, name)
            if isinstance(next(iter(d), None), str):  # (a table's keys are all of one kind)
                setattr(self, name, {state_key(k) if isinstance(k, str) else k: v for k, v in d.items()})

    def _sighting(self, a: Article) -> Sighting:
        return Sighting(a.feed_id, a.publisher, a.url or a.guid, a.fetched_at, a.article_id)

    def _entry(self, a: Article, cluster: Cluster) -> GuidEntry:
        return GuidEntry(
            article_id=a.article_id, publisher=a.publisher, content_hash=a.content_hash, known_hashes=(a.content_hash,),
            fps=article_fps(a), feeds={a.feed_id}, cluster=cluster,
            revision_no=0, last_ms=a.fetched_ms, published_ms=a.published_ms,
        )

    def process(self, a: Article) -> DedupInfo | None:
        """Decide about one article; ``None`` = a re-poll of an unchanged item (counted only)."""
        now = a.fetched_ms
        if now > self.watermark:
            self.watermark = now
        gk = state_key(a.guid)
        g = self.by_guid.get(gk)
        if g is not None:
            c = g.cluster
            g.last_ms = c.last_ms = max(c.last_ms, now)
            if a.content_hash in g.known_hashes:
                if a.feed_id in g.feeds:
                    self.counters["repoll_unchanged"] += 1
                    if not self.emit_repolls:
                        return None
                    return DedupInfo(Disposition.EXACT_DUPLICATE, "guid", c.root_id, seen_in=tuple(c.sightings),
                                     revision_no=g.revision_no)
                g.feeds.add(a.feed_id)
                if a.publisher != g.publisher:
                    g.copies.setdefault(a.publisher, (a.content_hash, 0))
                c.sightings.append(self._sighting(a))
                self.counters["exact_duplicate_guid"] += 1
                return DedupInfo(Disposition.EXACT_DUPLICATE, "guid", c.root_id, seen_in=tuple(c.sightings))
            fps = article_fps(a)
            changed = changed_fields(g, fps)
            if a.publisher != g.publisher:
                # another publisher's copy of the GUID with edits (syndication): a duplicate
                # that says what differs; only the GUID's own publisher can revise the original.
                # The copy's own later edits are versions of the copy (key ...#rN).
                prev = g.copies.get(a.publisher)
                if prev is not None and prev[0] == a.content_hash:
                    self.counters["repoll_unchanged"] += 1
                    return None
                n = 0 if prev is None else prev[1] + 1
                g.copies[a.publisher] = (a.content_hash, n)
                g.feeds.add(a.feed_id)
                if prev is None:
                    c.sightings.append(self._sighting(a))
                self.counters["exact_duplicate_guid_edited"] += 1
                return DedupInfo(Disposition.EXACT_DUPLICATE, "guid", c.root_id, changed=changed,
                                 seen_in=tuple(c.sightings), revision_no=n)
            # same GUID, new content from its publisher: a revision; the stored version is this
            g.revision_no += 1
            g.content_hash = a.content_hash
            g.known_hashes = (a.content_hash, *g.known_hashes)[:KNOWN_HASHES]
            g.fps = fps
            g.published_ms = max(g.published_ms, a.published_ms)
            g.feeds.add(a.feed_id)
            if a.canonical_url and (rk := state_key(a.canonical_url)) not in self.by_url:
                self.by_url[rk] = c
            if c.root_id == g.article_id:
                c.word_count, c.published_ms = a.word_count, a.published_ms
            c.revisions += 1
            if not any(s.feed_id == a.feed_id and s.article_id == a.article_id for s in c.sightings):
                c.sightings.append(self._sighting(a))
            self.counters[Disposition.REVISION] += 1
            dup_of = c.root_id if c.root_id != a.article_id else None
            return DedupInfo(Disposition.REVISION, "guid", dup_of, changed=changed, seen_in=tuple(c.sightings),
                             revision_no=g.revision_no)
        uk = state_key(a.canonical_url) if a.canonical_url else None
        c2 = self.by_url.get(uk) if uk is not None else None
        if c2 is not None:
            c2.last_ms = max(c2.last_ms, now)
            self.by_guid[gk] = self._entry(a, c2)
            c2.sightings.append(self._sighting(a))
            preferred = a.word_count > c2.word_count
            if preferred:  # keep the version with more content (docs/rules.md#layer-2-canonical-url)
                c2.word_count = a.word_count
                self.counters["url_duplicate_preferred"] += 1
            self.counters["exact_duplicate_url"] += 1
            return DedupInfo(Disposition.EXACT_DUPLICATE, "url", c2.root_id, preferred=preferred,
                             seen_in=tuple(c2.sightings))
        c = Cluster(
            root_id=a.article_id, published_ms=a.published_ms, first_ms=now, last_ms=now,
            word_count=a.word_count, sightings=[self._sighting(a)],
        )
        self.by_guid[gk] = self._entry(a, c)
        if uk is not None:
            self.by_url[uk] = c
        self.counters[Disposition.UNIQUE] += 1
        return DedupInfo(Disposition.UNIQUE, None, None, seen_in=tuple(c.sightings))

    def advance(self, watermark: int) -> None:
        """Event time moved on: expire state not seen for ``window_ms``.

        Sweeps run when the watermark has moved by 1/24 of the window since the last one, so an
        entry lives between ``window_ms`` and ``window_ms * 25/24`` after its last sighting, and
        at least ``window_ms + story_margin_ms`` after its publication time (module doc).
        """
        if watermark > self.watermark:
            self.watermark = watermark
        if self.watermark - self.last_sweep < self.window_ms // 24:
            return
        self.last_sweep = self.watermark
        cutoff = self.watermark - self.window_ms
        pub_cutoff = cutoff - self.story_margin_ms
        dead = [k for k, g in self.by_guid.items() if g.last_ms < cutoff and g.published_ms < pub_cutoff]
        for k in dead:
            del self.by_guid[k]
        dead_urls = [k for k, c in self.by_url.items() if c.last_ms < cutoff and c.published_ms < pub_cutoff]
        for k in dead_urls:
            del self.by_url[k]
        self.counters["expired"] += len(dead) + len(dead_urls)

    def __len__(self) -> int:
        return len(self.by_guid)
