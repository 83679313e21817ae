"""What the digest keeps of one ``articles`` record, analyzed once when it arrives (pure).

A digest window used to re-analyze the text of every article it contained (title x2 + 200 body
words, stems, hashes) each time a window closed: five digest types meant five analyses per
article, and a weekly window of 100k articles spent most of its 37 s there. An entry carries
instead:

* the record fields assembly reads (:data:`DIGEST_FIELDS`), strings interned so a snapshot
  pickles each publisher / feed / tier / field name once;
* ``_th`` / ``_tc``: the article's term vector, cut to its :data:`TERMS_KEPT` most frequent stem
  hashes (title terms count twice, so they come first) as ``uint64`` / ``uint8`` bytes; TF-IDF
  rows of a window are built from these in a few vectorized numpy calls
  (:func:`newsflow.clustering.window.tfidf_from_counts`);
* ``_ph`` / ``_pc`` (only in a flow with profile digests): the article's profile features,
  so profile relevance needs no text (:func:`newsflow.profiles.vectors.packed_features`);
* ``_sc``: the story's (publishers, tiers) counts as the article was scored
  (:func:`newsflow.scoring.importance.story_counts`), read by every window's re-scoring;
* ``_bz``: the first :data:`BODY_WORDS_KEPT` body words, zlib-compressed (only a shown lead's
  summary and a label's stem spellings read it back: :func:`body_text`).

Plain dicts (fast ``get`` in assembly, small pickles); about 1 KB per article pickled on
UCI with synthetic 250-word bodies of random words (real bodies compress better) (``bench/bench_digest.py`` prints it).
"""

from __future__ import annotations

import itertools
import operator
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from newsflow.core.timeutil import iso_to_ms
from newsflow.profiles.vectors import packed_features
from newsflow.scoring.importance import story_counts
from newsflow.text.tokenize import features_batch

#: record fields the digest needs (the body is kept apart, cut and compressed)
DIGEST_FIELDS = (
    "key", "article_id", "feed_id", "publisher", "tier", "url", "title", "published_at", "fetched_at",
    "disposition", "revision_no", "story_id", "story_publishers", "importance", "topic_id", "date_uncertain",
    "preferred", "duplicate_of", "word_count", "story_tiers", "importance_components", "category",
)
# (not ``canonical_url``: a digest item links ``url``, and the story coverage's publisher
# families come with the record's digest view, so nothing read it: ~90 bytes of an entry)
#: most frequent stems kept per article (title stems count title_weight times: kept first)
TERMS_KEPT = 20
#: body words kept for summaries (a weekly summary is 100-150 words: here 100-120)
BODY_WORDS_KEPT = 120
_INTERNED = ("feed_id", "publisher", "tier", "disposition", "story_id", "topic_id", "category")


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


def _ms(v: Any) -> int | None:
    if isinstance(v, int):
        return v
    try:
        return iso_to_ms(v) if isinstance(v, str) and v else None
    except ValueError:
        return None


def digest_entries(
    recs: Iterable[Mapping[str, Any]], *, title_weight: int = 2, body_words: int = 200,
    profile_terms: bool = False,
) -> list[dict[str, Any]]:
    """The digest's entries of ``articles`` records (see the module doc). Idempotent: an entry
    given again is returned as it is. ``profile_terms`` (a flow with profile digests): the entry
    also keeps the article's profile features (``_ph``/``_pc``,
    :func:`newsflow.profiles.vectors.packed_features`), so a profile's relevance of the entry is
    the relevance of the full record (title x2 + 200 body words + category/publisher terms),
    not of the kept 120 words."""
    recs = list(recs)
    if all(map(operator.contains, recs, itertools.repeat("_th"))):  # entries already (the flow's)
        return recs  # type: ignore[return-value]
    todo = [i for i, r in enumerate(recs) if "_th" not in r]
    tv = term_counts([(recs[i].get("title") or "", recs[i].get("body_text") or "") for i in todo],
                     title_weight=title_weight, body_words=body_words)
    out: list[dict[str, Any]] = [r if "_th" in r else {} for r in recs]  # type: ignore[misc]
    for i, (th, tc) in zip(todo, tv, strict=True):
        r = recs[i]
        d: dict[str, Any] = {k: r.get(k) for k in DIGEST_FIELDS}
        for k in _INTERNED:
            v = d[k]
            if type(v) is str:  # (a vocabulary member, such as a Disposition, is one object already)
                d[k] = sys.intern(v)
        d["story_tiers"] = [sys.intern(t) for t in d["story_tiers"]] if d["story_tiers"] else d["story_tiers"]
        if isinstance(d["story_publishers"], list):  # only the count is read (as of the story's coverage)
            d["story_publishers"] = len(d["story_publishers"])
        if d["article_id"] == d["key"]:  # (one string object: pickled once, kept once)
            d["article_id"] = d["key"]
        for k in ("fetched", "published"):
            ms = r.get(f"{k}_ms")
            d[f"{k}_ms"] = ms if isinstance(ms, int) else _ms(r.get(f"{k}_at"))
        del d["fetched_at"], d["published_at"]
        body = r.get("body_text") or ""
        w = body.split(None, BODY_WORDS_KEPT)
        d["_bz"] = zlib.compress(" ".join(w[:BODY_WORDS_KEPT]).encode(), 6) if w else b""
        d["_th"], d["_tc"] = th, tc
        d["_sc"] = story_counts(d)  # read by every window's re-scoring
        if profile_terms:
            d["_ph"], d["_pc"] = packed_features(r)
        out[i] = d
    return out


def body_text(rec: Mapping[str, Any]) -> str:
    """The record's body text: its own, or an entry's kept words."""
    b = rec.get("body_text")
    if b is not None:
        return str(b)
    z = rec.get("_bz")
    return zlib.decompress(z).decode() if z else ""
