"""A window's topics (pure): the clusters of its selected articles, each with its lead
candidates (closest to the centroid first), score, top terms, stories and key."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import scipy.sparse as sp

from newsflow.digest.coverage import CoverageAsOf
from newsflow.digest.entries import DigestEntry
from newsflow.digest.rescore import Selected, py_round
from newsflow.scoring.importance import (
    TIER_RANK,
    ScoreConfig,
    corroboration_score,
    rescore_components,
)


@dataclass(slots=True)
class Cluster:
    members: list[int]  # indices into the sorted article list
    score: float = 0.0
    lead: int = -1
    terms: list[str] = field(default_factory=list)  # top stems
    label: tuple[str, str | None, list[str]] | None = None  # computed once (topic_label)
    term_hashes: list[int] = field(default_factory=list)
    stories: list[str] = field(default_factory=list)
    key: str = ""
    ranked: list[int] = field(default_factory=list)  # lead candidates, best first
    #: the stories' duplicate copies from other publishers than the lead's: (publisher, tier),
    #: one per distinct article
    copies: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Distinct articles of the topic: scored members + other outlets' copies (the one
        count behind trend sizes and "N more")."""
        return len(self.members) + len(self.copies)


def _row_centroid_dots(X: sp.csr_matrix, C: sp.csr_matrix, cid: np.ndarray) -> np.ndarray:
    """``X[i] . C[cid[i]]`` for every row, vectorized: each nonzero (i, t) of X looks up
    C[cid[i], t] (products summed in X's order, as before). When C is the sum of its rows'
    X rows (every (cid[i], t) is one of C's entries, in C's sorted order), one integer sort of
    the (cluster, term) keys, tagged with their place, gives every entry's position; else a
    binary search per nonzero."""
    V = np.int64(X.shape[1])
    c_rows = np.repeat(np.arange(C.shape[0], dtype=np.int64), np.diff(C.indptr))
    c_keys = c_rows * V + C.indices.astype(np.int64)  # sorted: CSR rows, sorted indices
    x_rows = np.repeat(np.arange(X.shape[0], dtype=np.int64), np.diff(X.indptr))
    q = cid.astype(np.int64)[x_rows] * V + X.indices.astype(np.int64)
    nnz = len(q)
    bits = max(1, int(nnz - 1).bit_length())
    if nnz and len(c_keys) and int(q.max()) < (1 << (62 - bits)):
        tagged = np.sort((q << bits) | np.arange(nnz, dtype=np.int64))
        sq = tagged >> bits
        new = np.empty(nnz, dtype=bool)
        new[0] = True
        np.not_equal(sq[1:], sq[:-1], out=new[1:])
        if int(new.sum()) == len(c_keys) and np.array_equal(sq[new], c_keys):
            pos = np.empty(nnz, dtype=np.int64)
            pos[tagged & ((1 << bits) - 1)] = np.cumsum(new) - 1
            return np.bincount(x_rows, weights=X.data * C.data[pos], minlength=X.shape[0])
    pos = np.searchsorted(c_keys, q)
    pos[pos >= len(c_keys)] = 0
    hit = c_keys[pos] == q if len(c_keys) else np.zeros(len(q), dtype=bool)
    prod = np.where(hit, X.data * C.data[pos] if len(c_keys) else 0.0, 0.0)
    return np.bincount(x_rows, weights=prod, minlength=X.shape[0])


def build_clusters(
    sel: Selected, X: sp.csr_matrix, vocab: np.ndarray, labels: np.ndarray
) -> list[Cluster]:
    n = len(sel)
    lab = np.asarray(labels, dtype=np.int64).copy()
    noise = np.flatnonzero(lab < 0)
    base = int(lab.max()) + 1 if n and lab.max() >= 0 else 0
    lab[noise] = base + np.arange(len(noise))
    # renumber clusters by their first article (sorted ids -> deterministic)
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    cid = rank[inv.ravel()]
    m = len(order)
    M = sp.csr_matrix((np.ones(n), (cid, np.arange(n))), shape=(m, n))
    C = sp.csr_matrix(M @ X)  # centroid directions (sums)
    C.sort_indices()
    cn = np.sqrt(np.asarray(C.multiply(C).sum(axis=1)).ravel())
    cn[cn == 0.0] = 1.0
    sims = _row_centroid_dots(X, C, cid) / cn[cid]
    score_l = sel.scores
    scores = np.array(score_l, dtype=np.float64)
    # lead: closest to the centroid, then importance, then tier, then id (``sel`` is sorted by
    # id: the index is the id's rank); one stable lexsort for all clusters
    near = np.array(py_round(sims, 9))
    tiers = np.fromiter(map(TIER_RANK.get, sel.cols.tier, itertools.repeat(6)), np.int64, n)
    order = np.lexsort((np.arange(n), tiers, -scores, -near, cid))
    bounds = np.searchsorted(cid[order], np.arange(m + 1))
    order_l, bounds_l = order.tolist(), bounds.tolist()
    # members in id order: one stable sort by cluster
    by_id = np.argsort(cid, kind="stable")
    by_id_l = by_id.tolist()
    cmax = _cluster_max(scores, score_l, bounds_l, by_id_l)
    stories = _cluster_stories(sel.cols.story_id, cid, m)
    aids = sel.aids
    out = []
    for c in range(m):
        b0, b1 = bounds_l[c], bounds_l[c + 1]
        ranked = order_l[b0:b1]
        mem = by_id_l[b0:b1]
        cl = Cluster(mem)
        cl.ranked = ranked
        cl.lead = ranked[0]
        cl.score = round(cmax[c], 2)
        s0, s1 = C.indptr[c], C.indptr[c + 1]
        idx, val = C.indices[s0:s1], C.data[s0:s1]
        top = idx[np.lexsort((vocab[idx], -val))[:8]]
        cl.term_hashes = [int(h) for h in vocab[top]]
        cl.stories = stories[c]
        # stable_id(*sorted member ids): members in id order are sorted (ids are strings)
        cl.key = _joined_id([aids[i] for i in mem])
        out.append(cl)
    return out


def topic_corroboration(clusters: list[Cluster], sel: Selected, coverage: CoverageAsOf, end_ms: int,
                         cfg: ScoreConfig) -> None:
    """A topic that joins several stories (DBSCAN over story centroids) is corroborated by all
    of their publishers: its score is its best member's re-scored with the topic's distinct
    publishers and tiers as of the window's end (:func:`~newsflow.scoring.importance.rescore`),
    where that beats the member's own story. Two reports of one event that the story step kept
    apart, shown as one item, rank as the item the reader sees: "4 publishers", not 2 and 2."""
    for c in clusters:
        if len(c.stories) < 2:
            continue
        covs = [(i, cov) for i in c.members if (cov := sel.coverage_of(i)) is not None]
        # a story's members share one coverage object: each story's publishers read once
        distinct = {id(cov): cov for _, cov in covs}
        pubs = {p for cov in distinct.values() for p in cov[0]}
        tiers = {t for cov in distinct.values() for t in cov[1]}
        topic = corroboration_score(len(pubs), len(tiers))
        best = c.score
        beaten = {k: topic <= corroboration_score(len(cov[0]), len(cov[1])) for k, cov in distinct.items()}
        for i, cov in covs:
            if beaten[id(cov)]:
                continue
            rec = sel.base[i]
            comps = rec.importance_components
            assert comps is not None  # (a re-scored article: every component)
            imp = rescore_components(comps, rec.tier, rec.story_counts, publishers=len(pubs), tiers=len(tiers),
                                     reliability=coverage.reliability_of(rec.feed_id, end_ms), config=cfg)
            if imp.score > best:
                best = imp.score
        c.score = round(best, 2)


def _joined_id(parts: list[str]) -> str:
    """:func:`~newsflow.core.hashing.stable_id` of ``parts`` (NUL-separated, blake2b, 8 bytes)
    from one joined string: the same bytes, one hash update."""
    return hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _cluster_max(
    scores: np.ndarray, score_l: list[float], bounds: list[int], by_id: list[int]
) -> list[float]:
    """Per cluster, ``float(max(member scores))`` (members in id order)."""
    m = len(bounds) - 1
    if m == 0:
        return []
    if np.isfinite(scores).all() and (scores > 0.0).all():  # max() of positive floats: the largest
        top: list[float] = np.maximum.reduceat(scores[np.asarray(by_id)], np.asarray(bounds[:-1])).tolist()
        return top
    return [float(max([score_l[i] for i in by_id[bounds[c]:bounds[c + 1]]])) for c in range(m)]


def _cluster_stories(sids: Sequence[str | None], cid: np.ndarray, m: int) -> list[list[str]]:
    """Per cluster, the sorted distinct story ids (as strings) of its members."""
    out: list[list[str]] = [[] for _ in range(m)]
    if set(map(type, sids)) == {str} and all(sids):  # the usual case: every article has a story
        every = cast(Sequence[str], sids)
        names = sorted(set(every))
        code = {k: j for j, k in enumerate(names)}  # codes in string order
        codes = np.fromiter(map(code.__getitem__, every), np.int64, len(every))
        ccid = cid
    else:
        has = [i for i, x in enumerate(sids) if x]
        if not has:
            return out
        strs = [str(sids[i]) for i in has]
        names = sorted(set(strs))
        code = {k: j for j, k in enumerate(names)}
        codes = np.fromiter(map(code.__getitem__, strs), np.int64, len(strs))
        ccid = cid[np.asarray(has, dtype=np.int64)]
    pairs = np.unique(ccid * len(names) + codes)
    for c, j in zip((pairs // len(names)).tolist(), (pairs % len(names)).tolist(), strict=True):
        out[c].append(names[j])
    return out


def cluster_copies(
    c: Cluster, sel: Sequence[DigestEntry], copies: Mapping[str, Sequence[tuple[str, str | None]]]
) -> list[tuple[str, str | None]]:
    # the stories' duplicate copies (syndication, near-duplicates) are related coverage too
    # (copies from the lead's own publisher add no coverage: left out)
    lead = sel[c.lead]
    lead_pub = str(lead.publisher or lead.feed_id or "")
    return [pt for sid in c.stories for pt in copies.get(sid, ()) if pt[0] != lead_pub]
