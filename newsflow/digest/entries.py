"""What the digest keeps of one ``articles`` record, analyzed once when it arrives (pure).

A digest window used to re-analyze the text of every article it contained (title x2 + 200 body
words, stems, hashes) each time a window closed: five digest types meant five analyses per
article, and a weekly window of 100k articles spent most of its 37 s there. A
:class:`DigestEntry` (frozen, slotted, built once by :func:`digest_entries` where the story
step emits, read by every digest step) carries instead:

* the record fields assembly reads, strings interned so a snapshot pickles each publisher /
  feed / tier name once (not ``canonical_url``: a digest item links ``url``, and the story
  coverage's publisher families come with the record's digest view);
* ``term_hashes`` / ``term_counts``: the article's term vector, cut to its :data:`TERMS_KEPT`
  most frequent stem hashes (title terms count twice, so they come first) as ``uint64`` /
  ``uint8`` bytes; TF-IDF rows of a window are built from these in a few vectorized numpy calls
  (:func:`newsflow.clustering.window.tfidf_from_counts`);
* ``profile_hashes`` / ``profile_counts`` (only in a flow with profile digests): the article's
  profile features, so profile relevance needs no text
  (:func:`newsflow.profiles.vectors.packed_features`, :func:`entry_relevance`);
* ``story_counts``: the story's (publishers, tiers) counts as the article was scored
  (:func:`newsflow.scoring.importance.story_counts`), read by every window's re-scoring;
* ``body_z``: the first :data:`BODY_WORDS_KEPT` body words, zlib-compressed (only a shown
  lead's summary and a label's stem spellings read it back: :func:`body_text`).

Pickled as a tuple of its fields (``fast_pickle``).
"""

from __future__ import annotations

import itertools
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypedDict, cast

import numpy as np

from newsflow.core.timeutil import iso_to_ms
from newsflow.profiles.vectors import article_features, packed_features, unpacked_features
from newsflow.runtime.pickling import fast_pickle
from newsflow.scoring.importance import (
    COMPONENTS,
    DEFAULT_SCORE_CONFIG,
    InterestProfile,
    relevance_score,
    story_counts,
    weighted_importance,
)
from newsflow.text.tokenize import features_batch

#: most frequent stems kept per article (title stems count title_weight times: kept first)
TERMS_KEPT = 20
#: body words kept for summaries (a weekly summary is 100-150 words: here 100-120)
BODY_WORDS_KEPT = 120


def term_counts(
    docs: Sequence[tuple[str, str]], *, title_weight: int = 2, body_words: int = 200,
    keep: int = TERMS_KEPT,
) -> list[tuple[bytes, bytes]]:
    """Per ``(title, body)``: its ``keep`` most frequent stem hashes (ties: smaller hash) as
    (sorted ``uint64`` hashes, ``uint8`` counts) bytes. The whole batch is counted and cut in
    a few numpy calls (one ``np.unique`` per document cost more than its tokenizing)."""
    feats = features_batch(docs, title_weight=title_weight, body_words=body_words)
    n = len(feats)
    if n < _BATCHED:
        return [_top_terms(*f.unique_counts(), keep) for f in feats]
    lens = np.fromiter((len(f.hashes) for f in feats), dtype=np.int64, count=n)
    allh = np.concatenate([f.hashes for f in feats]).astype(np.uint64, copy=False)
    doc = np.repeat(np.arange(n, dtype=np.int64), lens)
    order = np.lexsort((allh, doc))  # by document, then hash
    sh, sd = allh[order], doc[order]
    first = np.ones(len(sh), dtype=bool)  # the first occurrence of each (document, hash)
    if len(sh) > 1:
        np.not_equal(sh[1:], sh[:-1], out=first[1:])
        first[1:] |= sd[1:] != sd[:-1]
    starts = np.flatnonzero(first)
    uh, ud = sh[starts], sd[starts]  # each document's distinct hashes, sorted
    cnt = np.diff(np.append(starts, len(sh)))
    # each document's ``keep`` most frequent (ties: the smaller hash), back in hash order
    by_count = np.lexsort((uh, -cnt, ud))
    doc_start = np.searchsorted(ud, np.arange(n + 1, dtype=np.int64))
    rank = np.arange(len(by_count)) - doc_start[ud[by_count]]
    kept = np.sort(by_count[rank < keep])
    kh, kc = uh[kept], np.minimum(cnt[kept], 255).astype(np.uint8)
    bounds = np.searchsorted(ud[kept], np.arange(n + 1, dtype=np.int64)).tolist()
    return [(kh[a:b].tobytes(), kc[a:b].tobytes()) for a, b in itertools.pairwise(bounds)]


#: from this many documents, :func:`term_counts` counts them together (fewer: one by one)
_BATCHED = 4


def _top_terms(h: np.ndarray, c: np.ndarray, keep: int) -> tuple[bytes, bytes]:
    if len(h) > keep:
        top = np.lexsort((h, -c))[:keep]
        top.sort()
        h, c = h[top], c[top]
    return h.astype(np.uint64).tobytes(), np.minimum(c, 255).astype(np.uint8).tobytes()


def _ms(v: object) -> int | None:
    if isinstance(v, int):
        return v
    try:
        return iso_to_ms(v) if isinstance(v, str) and v else None
    except ValueError:
        return None


@fast_pickle  # (a window key's snapshots and every crossing pickle thousands of entries)
@dataclass(frozen=True, slots=True)
class DigestEntry:
    """What the digest keeps of one ``articles`` record (see the module doc): built once, by
    :func:`digest_entries`, read by every digest step."""

    key: str | None
    article_id: str
    feed_id: str | None
    publisher: str | None
    tier: str | None
    url: str | None
    title: str | None
    disposition: str | None
    revision_no: int | None
    story_id: str | None
    #: the story's publishers: their count as the article was scored; a re-scored copy
    #: (``newsflow.digest.rescore``) holds their names as of the window's end
    story_publishers: int | list[str] | None
    importance: float | None
    topic_id: str | None
    date_uncertain: bool | None
    preferred: bool | None
    duplicate_of: str | None
    word_count: int | None
    story_tiers: list[str] | None
    #: the importance components (None: not scored, or a re-scored copy's)
    importance_components: dict[str, float] | None
    category: str | None
    fetched_ms: int | None
    published_ms: int | None
    #: the first :data:`BODY_WORDS_KEPT` body words, zlib-compressed (:func:`body_text`)
    body_z: bytes
    #: the :data:`TERMS_KEPT` most frequent stem hashes (``uint64``) and their counts (``uint8``)
    term_hashes: bytes
    term_counts: bytes
    #: the story's (publishers, tiers) counts as the article was scored
    #: (:func:`newsflow.scoring.importance.story_counts`)
    story_counts: tuple[int, int]
    #: the profile features (:func:`newsflow.profiles.vectors.packed_features`), in a flow
    #: with profile digests
    profile_hashes: bytes | None = None
    profile_counts: bytes | None = None

    def coverage_record(self) -> dict[str, object]:
        """What :meth:`newsflow.digest.coverage.StoryCoverage.add` reads of the entry."""
        return {"story_id": self.story_id, "fetched_ms": self.fetched_ms, "publisher": self.publisher,
                "feed_id": self.feed_id, "tier": self.tier, "url": self.url}


class ArticleFields(TypedDict, total=False):
    """The fields of an ``articles`` record (``schemas/articles.v1.json``) an entry is built
    from, with their schema types: the flow's sink writes only records of that schema."""

    key: str
    article_id: str | None
    feed_id: str | None
    publisher: str | None
    tier: str | None
    url: str | None
    title: str | None
    body_text: str | None
    disposition: str | None
    revision_no: int | None
    story_id: str | None
    story_publishers: int | list[str] | None
    story_tiers: list[str] | None
    importance: float | None
    importance_components: dict[str, float] | None
    topic_id: str | None
    date_uncertain: bool | None
    preferred: bool | None
    duplicate_of: str | None
    word_count: int | None
    category: str | None
    fetched_ms: int | None
    published_ms: int | None
    fetched_at: str | None
    published_at: str | None


#: an ``articles`` record (JSON fields) or its digest entry: what the digest functions take
DigestInput = Mapping[str, object] | DigestEntry


def _interned(v: object) -> str | None:
    if type(v) is str:  # (a vocabulary member, such as a Disposition, is one object already)
        return sys.intern(v)
    return v  # type: ignore[return-value]


def digest_entries(
    recs: Iterable[DigestInput], *, title_weight: int = 2, body_words: int = 200,
    profile_terms: bool = False,
) -> list[DigestEntry]:
    """The digest's entries of ``articles`` records (see the module doc). Idempotent: an entry
    given again is returned as it is. ``profile_terms`` (a flow with profile digests): the entry
    also keeps the article's profile features (:func:`newsflow.profiles.vectors.packed_features`),
    so a profile's relevance of the entry is the relevance of the full record (title x2 + 200
    body words + category/publisher terms), not of the kept 120 words."""
    recs = list(recs)
    todo = [i for i, r in enumerate(recs) if not isinstance(r, DigestEntry)]
    if not todo:  # entries already (the flow's)
        return recs  # type: ignore[return-value]
    raw = [cast(ArticleFields, recs[i]) for i in todo]
    tv = term_counts([(r.get("title") or "", r.get("body_text") or "") for r in raw],
                     title_weight=title_weight, body_words=body_words)
    out: list[DigestEntry] = [r if isinstance(r, DigestEntry) else None for r in recs]  # type: ignore[misc]
    for i, r, (th, tc) in zip(todo, raw, tv, strict=True):
        tiers = r.get("story_tiers")
        pubs = r.get("story_publishers")
        key = r.get("key")
        aid = r.get("article_id")
        if aid is None:  # (an entry without an id is in no window)
            aid = ""
        if aid == key:  # (one string object: pickled once, kept once)
            aid = key
        # only the count of the story's publishers is kept (as of the story's coverage)
        n_pubs = len(pubs) if isinstance(pubs, list) else pubs
        tiers = [sys.intern(t) for t in tiers] if tiers else tiers
        fetched, published = r.get("fetched_ms"), r.get("published_ms")
        body = r.get("body_text") or ""
        w = body.split(None, BODY_WORDS_KEPT)
        ph, pc = packed_features(r) if profile_terms else (None, None)
        out[i] = DigestEntry(
            key, aid, _interned(r.get("feed_id")), _interned(r.get("publisher")), _interned(r.get("tier")),
            r.get("url"), r.get("title"), _interned(r.get("disposition")), r.get("revision_no"),
            _interned(r.get("story_id")), n_pubs,
            r.get("importance"), _interned(r.get("topic_id")), r.get("date_uncertain"), r.get("preferred"),
            r.get("duplicate_of"), r.get("word_count"),
            tiers, r.get("importance_components"), _interned(r.get("category")),
            fetched if isinstance(fetched, int) else _ms(r.get("fetched_at")),
            published if isinstance(published, int) else _ms(r.get("published_at")),
            zlib.compress(" ".join(w[:BODY_WORDS_KEPT]).encode(), 6) if w else b"",
            th, tc, story_counts({"story_publishers": n_pubs, "story_tiers": tiers, "tier": r.get("tier")}),
            ph, pc)
    return out


def unzip_body(z: bytes) -> str:
    """The body words of :attr:`DigestEntry.body_z`."""
    return zlib.decompress(z).decode() if z else ""


def body_text(e: DigestEntry) -> str:
    """The entry's kept body words."""
    return unzip_body(e.body_z)


def entry_relevance(e: DigestEntry, profile: InterestProfile | None, default: float = 50.0) -> float:
    """:func:`newsflow.profiles.vectors.relevance` of the entry's article: from its profile
    features when it keeps them, else from its title and meta terms."""
    if profile is None:
        return default
    if e.profile_hashes is not None and e.profile_counts is not None:
        feats = unpacked_features(e.profile_hashes, e.profile_counts)
    else:
        feats = article_features({"title": e.title, "category": e.category, "publisher": e.publisher})
    return round(relevance_score(feats, profile, default=default), 2)


def with_relevance(e: DigestEntry, profile: InterestProfile | None) -> DigestEntry:
    """:func:`newsflow.profiles.rank.with_relevance` of an entry: its relevance component from
    ``profile`` and its importance re-weighted (an entry keeps no weights of its own: the
    seed's); an entry without components (not scored) is returned as it is."""
    comps = e.importance_components
    if not isinstance(comps, dict) or not all(c in comps for c in COMPONENTS):
        return e
    new = dict(comps)
    new["relevance"] = entry_relevance(e, profile)
    return replace(e, importance_components=new,
                   importance=round(weighted_importance(new, DEFAULT_SCORE_CONFIG.weights), 2))
