"""Steps 5-6: topic clustering and digest assembly for one event-time window (pure).

* :class:`DigestSchedule` — digest types (morning brief / midday update / evening recap: 24 h
  windows delivered at local times; weekly roundup; rolling every N minutes) and
  :meth:`DigestSchedule.closing`, which says which windows close when the event-time watermark
  moves from ``prev`` to ``cur`` (ticks advance the watermark, so windows also close on a
  quiet stream, the same way live and in replay).
* :func:`assemble_digest` — records of a window -> a ``digests.v1`` dict: importance >= 15;
  TF-IDF (title x2 + first 200 words, stop words removed, Porter stems); DBSCAN (cosine,
  eps 0.4, min_samples 2; noise points are standalone topics) or Ward with ``n_topics``;
  labels "[Entity]: top 3 terms"; lead = closest to the centroid, then importance, then tier;
  trends vs the previous window (EMERGING / TRENDING / FADING); Top Stories (>= 70),
  Noteworthy (40-69), Also Mentioned (15-39), Feed Health Report; sizing limits per type;
  extractive summaries; the Step 6 self-checks applied (re-rank, re-label, trim).

Deterministic: the records are de-duplicated and sorted by a stable key first, so the same
input in any order gives byte-identical ``orjson.dumps`` output.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import scipy.sparse as sp

from newsflow.hashing import stable_id
from newsflow.score import (
    SCORED_DISPOSITIONS,
    STOP_WORDS,
    TIER_RANK,
    TextFeatures,
    _analyze_word,
    features_batch,
    words,
)
from newsflow.timeutil import iso_to_ms, ms_to_iso

DIGEST_SCHEMA_VERSION = 1
MINUTE_MS = 60_000
DAY_MS = 86_400_000
DUPLICATE_DISPOSITIONS = frozenset({"exact_duplicate", "near_duplicate"})
TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED, FEED_HEALTH = (
    "Top Stories",
    "Noteworthy",
    "Also Mentioned",
    "Feed Health Report",
)

# --------------------------------------------------------------------------------------
# Digest types and the event-time schedule
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SectionLimits:
    top: int
    noteworthy: int
    also: int


@dataclass(frozen=True, slots=True)
class DigestType:
    """One kind of digest. ``kind``: ``daily`` (delivered every day at ``local_time``),
    ``weekly`` (``weekday`` 0=Monday at ``local_time``) or ``rolling`` (every
    ``every_minutes``, UTC-aligned, covering the last ``length_minutes``)."""

    name: str
    title: str
    kind: str
    limits: SectionLimits
    summary_words: tuple[int, int] = (50, 75)
    local_time: dtime = dtime(7, 0)
    weekday: int = 6
    every_minutes: int = 60
    length_minutes: int | None = None  # rolling: default = every_minutes (tumbling)

    @property
    def rolling_length_ms(self) -> int:
        return (self.length_minutes or self.every_minutes) * MINUTE_MS


MORNING = DigestType(
    "morning_brief", "Morning Brief", "daily", SectionLimits(15, 10, 10), (50, 75), dtime(7, 0)
)
MIDDAY = DigestType(
    "midday_update", "Midday Update", "daily", SectionLimits(10, 5, 5), (30, 50), dtime(12, 0)
)
EVENING = DigestType(
    "evening_recap", "Evening Recap", "daily", SectionLimits(15, 10, 10), (50, 75), dtime(18, 0)
)
WEEKLY = DigestType(
    "weekly_roundup",
    "Weekly Roundup",
    "weekly",
    SectionLimits(30, 15, 15),
    (100, 150),
    dtime(8, 0),
    weekday=6,
)
ROLLING = DigestType(
    "rolling", "Rolling Digest", "rolling", SectionLimits(15, 10, 10), (50, 75), every_minutes=60
)
DEFAULT_TYPES: tuple[DigestType, ...] = (MORNING, MIDDAY, EVENING, WEEKLY, ROLLING)


@dataclass(frozen=True, slots=True)
class DigestWindow:
    digest_type: str
    start_ms: int
    end_ms: int

    @property
    def digest_id(self) -> str:
        return f"{self.digest_type}:{ms_to_iso(self.start_ms)}"

    def contains(self, t_ms: int) -> bool:
        return self.start_ms <= t_ms < self.end_ms


@dataclass(frozen=True, slots=True)
class DigestSchedule:
    """Digest types + the users' time zone (delivery times are local, via zoneinfo)."""

    tz: str = "UTC"
    types: tuple[DigestType, ...] = DEFAULT_TYPES

    def type(self, name: str) -> DigestType:
        for t in self.types:
            if t.name == name:
                return t
        msg = f"unknown digest type {name!r}"
        raise KeyError(msg)

    # ---- delivery instants ----
    def _at(self, d: date, t: dtime) -> int:
        """Epoch ms of local date ``d`` at local time ``t`` (DST gaps/folds: fold=0)."""
        local = datetime(d.year, d.month, d.day, t.hour, t.minute, t.second, tzinfo=self._zone())
        return int(local.astimezone(UTC).timestamp() * 1000)

    def _zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def _local_date(self, ms: int) -> date:
        return datetime.fromtimestamp(ms / 1000, tz=self._zone()).date()

    def _step_days(self, dt: DigestType) -> int:
        return 7 if dt.kind == "weekly" else 1

    def _delivery_dates(self, dt: DigestType, d0: date, d1: date) -> Iterable[date]:
        d = d0
        while d <= d1:
            if dt.kind == "daily" or d.weekday() == dt.weekday:
                yield d
            d += timedelta(days=1)

    def window_ending(self, dt: DigestType, d: date) -> DigestWindow:
        """The window of ``dt`` delivered on local date ``d`` (start = previous delivery, so
        a DST day has a 23 h or 25 h window and windows never overlap or leave gaps)."""
        end = self._at(d, dt.local_time)
        start = self._at(d - timedelta(days=self._step_days(dt)), dt.local_time)
        return DigestWindow(dt.name, start, end)

    def closing(
        self, prev_watermark_ms: int | None, watermark_ms: int, *, limit: int | None = None
    ) -> list[DigestWindow]:
        """Windows whose end is in ``(prev, cur]`` — they close now. Ordered by end, then type
        order. ``prev=None`` (nothing seen yet) closes nothing. ``limit`` keeps the last N."""
        if prev_watermark_ms is None or watermark_ms <= prev_watermark_ms:
            return []
        out: list[tuple[int, int, DigestWindow]] = []
        for ti, dt in enumerate(self.types):
            if dt.kind == "rolling":
                every = dt.every_minutes * MINUTE_MS
                e = (prev_watermark_ms // every + 1) * every
                while e <= watermark_ms:
                    out.append((e, ti, DigestWindow(dt.name, e - dt.rolling_length_ms, e)))
                    e += every
                continue
            d0 = self._local_date(prev_watermark_ms) - timedelta(days=1)
            d1 = self._local_date(watermark_ms) + timedelta(days=1)
            for d in self._delivery_dates(dt, d0, d1):
                w = self.window_ending(dt, d)
                if prev_watermark_ms < w.end_ms <= watermark_ms:
                    out.append((w.end_ms, ti, w))
        out.sort(key=lambda x: (x[0], x[1]))
        wins = [w for _, _, w in out]
        return wins[-limit:] if limit is not None else wins

    def windows_containing(self, t_ms: int) -> list[DigestWindow]:
        """Every window (one per type; several for sliding rolling windows) containing ``t``."""
        out = []
        for dt in self.types:
            if dt.kind == "rolling":
                every = dt.every_minutes * MINUTE_MS
                e = (t_ms // every + 1) * every
                while e - dt.rolling_length_ms <= t_ms:
                    out.append(DigestWindow(dt.name, e - dt.rolling_length_ms, e))
                    e += every
                continue
            d = self._local_date(t_ms) - timedelta(days=1)
            for dd in self._delivery_dates(dt, d, d + timedelta(days=9)):
                w = self.window_ending(dt, dd)
                if w.contains(t_ms):
                    out.append(w)
                    break
        return out

    def next_close_ms(self, after_ms: int) -> int:
        """The first window end strictly after ``after_ms`` (to schedule the next tick)."""
        ends = [w.end_ms for w in self.closing(after_ms, after_ms + 8 * DAY_MS)]
        return min(ends) if ends else after_ms + DAY_MS

    def retention_ms(self) -> int:
        """How long records must be kept for the longest window (+1 day for DST)."""
        longest = max(
            (
                dt.rolling_length_ms
                if dt.kind == "rolling"
                else self._step_days(dt) * DAY_MS + DAY_MS
                for dt in self.types
            ),
            default=DAY_MS,
        )
        return longest


# --------------------------------------------------------------------------------------
# Feed health summary
# --------------------------------------------------------------------------------------

OK_STATUSES = frozenset({"ok", "not_modified", "redirected", "empty", "partial_undated"})
ERROR_STATUSES = frozenset(
    {
        "timeout",
        "http_error",
        "parse_error",
        "html_instead_of_feed",
        "rate_limited",
        "dead",
        "blocked",
        "too_large",
        "all_undated",
        "silent_zero",
    }
)


@dataclass(slots=True)
class _FeedStat:
    polls: int = 0
    ok: int = 0
    errors: int = 0
    last_at: str = ""
    last_status: str = ""
    reliability: float | None = None
    alert: str | None = None


class FeedHealthAccumulator:
    """Folds ``feed-health`` records (poller polls) of a window into the digest's report."""

    def __init__(self) -> None:
        self._feeds: dict[str, _FeedStat] = {}
        self._seen: set[str] = set()

    def add(self, rec: Mapping[str, Any]) -> None:
        rid = rec.get("record_id") or ""
        if rid:
            if rid in self._seen:  # at-least-once re-emits
                return
            self._seen.add(rid)
        fid = str(rec.get("feed_id") or "")
        if not fid:
            return
        st = self._feeds.setdefault(fid, _FeedStat())
        status = str(rec.get("status") or "")
        # a poll seen by the poller, or a fetched payload seen by the flow (the flow only
        # gets the poller's successful fetches, so a record of either kind is one poll)
        if rec.get("source", "poller") in ("poller", "flow"):
            st.polls += 1
            if status in ERROR_STATUSES:
                st.errors += 1
            else:
                st.ok += 1
        at = str(rec.get("at") or "")
        if (at, status) >= (st.last_at, st.last_status):
            st.last_at, st.last_status = at, status
            if rec.get("reliability") is not None:
                st.reliability = float(rec["reliability"])
            st.alert = rec.get("alert")

    def summary(self, max_rows: int = 50) -> dict[str, Any]:
        polls = sum(s.polls for s in self._feeds.values())
        ok = sum(s.ok for s in self._feeds.values())
        errors = sum(s.errors for s in self._feeds.values())
        rows = []
        for fid, s in sorted(self._feeds.items()):
            rate = s.ok / s.polls if s.polls else None
            unhealthy = (
                s.last_status in ERROR_STATUSES
                or bool(s.alert)
                or (s.reliability is not None and s.reliability < 0.5)
                or (rate is not None and s.polls >= 3 and rate < 0.5)
            )
            rows.append(
                {
                    "feed_id": fid,
                    "polls": s.polls,
                    "successful": s.ok,
                    "errors": s.errors,
                    "success_rate": round(rate, 4) if rate is not None else None,
                    "last_status": s.last_status or None,
                    "reliability": s.reliability,
                    "alert": s.alert,
                    "unhealthy": unhealthy,
                }
            )
        rows.sort(
            key=lambda r: (
                not r["unhealthy"],
                r["success_rate"] if r["success_rate"] is not None else 2.0,
                r["feed_id"],
            )
        )
        return {
            "feeds_polled": sum(1 for s in self._feeds.values() if s.polls),
            "feeds_seen": len(self._feeds),
            "polls": polls,
            "successful": ok,
            "errors": errors,
            "success_rate": round(ok / polls, 4) if polls else None,
            "unhealthy_feeds": [r["feed_id"] for r in rows if r["unhealthy"]],
            "feeds": rows[:max_rows],
        }


def summarize_feed_health(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    acc = FeedHealthAccumulator()
    for r in records:
        acc.add(r)
    return acc.summary()


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DigestConfig:
    min_importance: float = 15.0
    top_threshold: float = 70.0
    noteworthy_threshold: float = 40.0
    eps: float = 0.4  # DBSCAN cosine distance
    min_samples: int = 2
    n_topics: int | None = None  # fixed number of topics -> Agglomerative Ward
    title_weight: int = 2
    body_words: int = 200
    time_basis: str = "published"  # window membership by "published" or "fetched" time
    limits: SectionLimits | None = None  # None: the digest type's limits
    summary_words: tuple[int, int] | None = None  # None: the digest type's
    emerging_min: int = 3
    trend_change: float = 0.5
    topic_index_size: int = 200
    ward_max_points: int = 1000
    group_by_story: bool = True
    exact_max: int = 12_000  # exact DBSCAN neighbourhoods up to this many points
    block_size: int = 3000  # above exact_max: exact inside k-means blocks of this size
    svd_dims: int = 100
    related_max: int = 5
    article_ids_max: int = 50


DEFAULT_DIGEST_CONFIG = DigestConfig()


# --------------------------------------------------------------------------------------
# Text features: TF-IDF over the window, built from stable token hashes
# --------------------------------------------------------------------------------------


def tfidf_matrix(feats: Sequence[TextFeatures]) -> tuple[sp.csr_matrix, np.ndarray]:
    """L2-normalized TF-IDF rows (smooth IDF ``ln((1+n)/(1+df)) + 1``, as scikit-learn) of the
    window's documents; columns are the sorted unique stem hashes (returned)."""
    n = len(feats)
    lens = np.fromiter((len(f.hashes) for f in feats), dtype=np.int64, count=n)
    allh = np.concatenate([f.hashes for f in feats]) if lens.sum() else np.zeros(0, np.uint64)
    vocab, cols = np.unique(allh, return_inverse=True)
    rows = np.repeat(np.arange(n, dtype=np.int64), lens)
    X = sp.csr_matrix(
        (np.ones(len(cols), dtype=np.float64), (rows, cols.ravel())), shape=(n, len(vocab))
    )
    X.sum_duplicates()
    X.sort_indices()
    df = np.bincount(X.indices, minlength=len(vocab))
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    X.data *= idf[X.indices]
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0.0] = 1.0
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    X.sort_indices()
    return X, vocab


_DMIN = 1e-12  # stored instead of a 0 distance (sparse graphs drop explicit zeros)


def radius_graph(X: sp.csr_matrix, eps: float, chunk: int = 512) -> sp.csr_matrix:
    """Exact sparse cosine-distance graph of all pairs ``i != j`` with distance <= ``eps``
    (rows of ``X`` L2-normalized): the neighbourhoods DBSCAN(metric="cosine") uses, from
    chunked sparse products instead of a dense n x n matrix. O(n^2) pairs: for n up to
    ``DigestConfig.exact_max``."""
    n = X.shape[0]
    XT = X.T.tocsr()
    thr = 1.0 - eps - 1e-9
    rs, cs, vs = [], [], []
    for s in range(0, n, chunk):
        S = (X[s : s + chunk] @ XT).tocoo()
        r = S.row.astype(np.int64) + s
        keep = (S.data >= thr) & (r != S.col)
        rs.append(r[keep])
        cs.append(S.col[keep].astype(np.int64))
        vs.append(np.maximum(1.0 - S.data[keep], _DMIN))
    return _graph(n, rs, cs, vs)


def _lloyd(Z: np.ndarray, k: int, seed: int, iters: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """A small seeded Lloyd's k-means (init: k rows from a seeded permutation; empty clusters
    keep their centre): (squared distances to the centres, centres). Deterministic, BLAS."""
    rng = np.random.default_rng(seed)
    C = Z[rng.permutation(len(Z))[:k]].copy()
    zz = np.einsum("ij,ij->i", Z, Z)[:, None]
    for _ in range(iters):
        d = zz - 2.0 * (Z @ C.T) + np.einsum("ij,ij->i", C, C)[None, :]
        lab = d.argmin(axis=1)
        cnt = np.bincount(lab, minlength=k).astype(np.float64)
        S = np.zeros_like(C)
        np.add.at(S, lab, Z)
        nz = cnt > 0
        C[nz] = S[nz] / cnt[nz, None]
    return zz - 2.0 * (Z @ C.T) + np.einsum("ij,ij->i", C, C)[None, :], C


def _kmeans_distances(Z: np.ndarray, k: int, seed: int, iters: int = 12) -> np.ndarray:
    return _lloyd(Z, k, seed, iters)[0]


def blocked_radius_graph(
    X: sp.csr_matrix, eps: float, block_size: int = 3000, seed: int = 0, overlap: int = 2
) -> sp.csr_matrix:
    """Approximate :func:`radius_graph` for large n: seeded k-means on a 64-d random
    projection of the TF-IDF cuts the rows into ~``block_size`` blocks; every row joins the
    blocks of its ``overlap`` nearest centres, and neighbourhoods are computed exactly inside
    each block (blocks still too big are split again without overlap). Near neighbours that
    never share a block are missed (measured pair recall: bench/README-digest.md).
    Deterministic: fixed seeds."""
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    Z = np.asarray(X @ rng.standard_normal((X.shape[1], 64)))
    Z /= np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-12)
    rs, cs, vs = [], [], []
    todo: list[tuple[np.ndarray, int]] = [(np.arange(n), overlap)]
    while todo:
        idx, ov = todo.pop()
        if len(idx) <= block_size:
            G = radius_graph(X[idx], eps).tocoo()
            rs.append(idx[G.row])
            cs.append(idx[G.col])
            vs.append(G.data)
            continue
        k = max(2, int(np.ceil(len(idx) / block_size)))
        d = _kmeans_distances(Z[idx], k, seed)
        near = np.argsort(d, axis=1, kind="stable")[:, : max(1, min(ov, k))]
        parts = [idx[(near == j).any(axis=1)] for j in range(k)]
        parts = [p for p in parts if len(p)]
        if max(len(p) for p in parts) >= len(idx):  # cannot split: cut in order
            parts = [idx[i : i + block_size] for i in range(0, len(idx), block_size)]
        todo.extend((p, 1) for p in parts)
    r = np.concatenate(rs) if rs else np.zeros(0, np.int64)
    c = np.concatenate(cs) if cs else np.zeros(0, np.int64)
    v = np.concatenate(vs) if vs else np.zeros(0)
    _, first = np.unique(r.astype(np.int64) * n + c, return_index=True)  # pairs found twice
    return _graph(n, [r[first]], [c[first]], [v[first]])


def _graph(n: int, rs: list[Any], cs: list[Any], vs: list[Any]) -> sp.csr_matrix:
    r = np.concatenate(rs) if rs else np.zeros(0, np.int64)
    c = np.concatenate(cs) if cs else np.zeros(0, np.int64)
    v = np.concatenate(vs) if vs else np.zeros(0)
    G = sp.csr_matrix((v, (r, c)), shape=(n, n))
    G.sort_indices()
    return G


def dbscan_labels(
    X: sp.csr_matrix,
    eps: float = 0.4,
    min_samples: int = 2,
    *,
    sample_weight: np.ndarray | None = None,
    exact_max: int = 12_000,
    block_size: int = 3000,
) -> np.ndarray:
    """DBSCAN labels (cosine distance, -1 = noise); exact neighbourhoods up to ``exact_max``
    rows, blocked above (see :func:`blocked_radius_graph`)."""
    from sklearn.cluster import DBSCAN

    n = X.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    G = radius_graph(X, eps) if n <= exact_max else blocked_radius_graph(X, eps, block_size)
    db = DBSCAN(eps=eps, min_samples=min_samples, metric="precomputed")
    return db.fit_predict(G, sample_weight=sample_weight)


def story_groups(sel: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, int]:
    """Group index of each article: articles of one story (``story_id``) form one group, an
    article without a story is its own group. Groups are numbered by first appearance."""
    gid: dict[str, int] = {}
    out = np.empty(len(sel), dtype=np.int64)
    for i, r in enumerate(sel):
        sid = r.get("story_id")
        key = f"s:{sid}" if sid else f"a:{r.get('article_id')}"
        g = gid.get(key)
        if g is None:
            g = gid[key] = len(gid)
        out[i] = g
    return out, len(gid)


def group_rows(X: sp.csr_matrix, group: np.ndarray, n_groups: int) -> sp.csr_matrix:
    """L2-normalized sum (= direction of the mean) of each group's rows."""
    n = X.shape[0]
    M = sp.csr_matrix((np.ones(n), (group, np.arange(n))), shape=(n_groups, n))
    G = sp.csr_matrix(M @ X)
    norms = np.sqrt(np.asarray(G.multiply(G).sum(axis=1)).ravel())
    norms[norms == 0.0] = 1.0
    G = sp.csr_matrix(sp.diags(1.0 / norms) @ G)
    G.sort_indices()
    return G


def cluster_articles(
    X: sp.csr_matrix, sel: Sequence[Mapping[str, Any]], config: DigestConfig
) -> np.ndarray:
    """Topic labels of the window's articles (-1 = standalone).

    DBSCAN (cosine, ``eps``, ``min_samples``) runs on *story* rows when ``group_by_story``:
    each story's articles (already matched as duplicates/same event upstream) are one point,
    its centroid, weighted by its article count, so a story is never split and DBSCAN sees
    far fewer points. ``n_topics`` switches to Agglomerative Ward.
    """
    if config.n_topics:
        if config.group_by_story:
            group, ng = story_groups(sel)
            if ng < len(sel):
                return ward_labels(group_rows(X, group, ng), config.n_topics, config)[group]
        return ward_labels(X, config.n_topics, config)
    if config.group_by_story:
        group, ng = story_groups(sel)
        if ng < len(sel):
            G = group_rows(X, group, ng)
            w = np.bincount(group, minlength=ng).astype(np.float64)
            lab = dbscan_labels(
                G,
                config.eps,
                config.min_samples,
                sample_weight=w,
                exact_max=config.exact_max,
                block_size=config.block_size,
            )
            # a multi-article story that DBSCAN left as noise is still one topic
            nxt = int(lab.max()) + 1 if len(lab) else 0
            for g in np.flatnonzero((lab < 0) & (w >= 2)):
                lab[g] = nxt
                nxt += 1
            return lab[group]
    return dbscan_labels(
        X,
        config.eps,
        config.min_samples,
        exact_max=config.exact_max,
        block_size=config.block_size,
    )


def ward_labels(X: sp.csr_matrix, k: int, config: DigestConfig) -> np.ndarray:
    """Agglomerative clustering (Ward) into ``k`` topics on an SVD reduction of the TF-IDF
    (rows: articles, or story centroids); above ``ward_max_points`` rows, a seeded k-means
    first reduces them to that many micro-clusters, which Ward then merges."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.decomposition import TruncatedSVD

    n = X.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    k = max(1, min(k, n))
    if k == n:
        return np.arange(n)
    dims = min(config.svd_dims, X.shape[1] - 1, n - 1)
    Z = (
        TruncatedSVD(n_components=dims, random_state=0).fit_transform(X)
        if dims >= 2
        else X.toarray()
    )
    if n <= config.ward_max_points:
        return AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(Z)
    m = max(k, config.ward_max_points)
    d, C = _lloyd(Z, m, 0, iters=8)
    micro = d.argmin(axis=1)
    used = np.unique(micro)
    if len(used) <= k:
        return np.searchsorted(used, micro)
    top = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(C[used])
    return top[np.searchsorted(used, micro)]


# --------------------------------------------------------------------------------------
# Entities, labels, summaries
# --------------------------------------------------------------------------------------

_GENERIC_TEXT = (
    "breaking update updated exclusive watch video live report reports analysis opinion "
    "review photos photo pictures new news today monday tuesday wednesday thursday friday "
    "saturday sunday january february march april may june july august september october "
    "november december mr mrs ms dr it this that these those here there what why how when "
    "where who first last"
)
_GENERIC_CAPS = frozenset(_GENERIC_TEXT.split())
_CAP_TOKEN = re.compile(r"[^\W\d_][\w&'’.-]*|\d[\w.,]*|[.!?:;,\"“”()\[\]|—–-]")


def _is_title_case(title: str) -> bool:
    long = [w for w in title.split() if len(w) > 3 and w[0].isalpha()]
    return len(long) >= 2 and sum(w[0].isupper() for w in long) >= 0.75 * len(long)


def capitalized_phrases(text: str, *, skip_initial: bool = True) -> list[str]:
    """Runs of capitalized words ("Barack Obama", "European Central Bank"), original case,
    minus stop/generic words; sentence-initial single words are skipped (undecidable)."""
    out: list[str] = []
    run: list[str] = []
    initial = True
    run_initial = False

    def close() -> None:
        if run:
            # long runs are Title Case headline fragments, not names
            lone_initial = skip_initial and run_initial and len(run) == 1 and not run[0].isupper()
            if not lone_initial and len(run) <= 4:
                out.append(" ".join(run))
            run.clear()

    for tok in _CAP_TOKEN.findall(text):
        if tok in '.!?:;|—–-"“”()[]':
            close()
            initial = tok in ".!?:;|"
            continue
        if tok == ",":
            close()
            continue
        w = re.sub(r"['’]s$", "", tok).strip(".-'’")
        low = w.lower()
        if (
            w
            and w[0].isupper()
            and low not in STOP_WORDS
            and low not in _GENERIC_CAPS
            and (len(w) > 1)
        ):
            if not run:
                run_initial = initial
            run.append(w)
        else:
            close()
        initial = False
        if tok[-1] in ".!?" and not re.fullmatch(r"(?:[A-Za-z]\.)+", tok):
            # "... data. Aftershocks of ..." -- the period came attached to the word
            close()
            initial = True
    close()
    return out


def _entities_of(rec: Mapping[str, Any]) -> dict[str, int]:
    """Entity phrases of one article -> weight (2 when in the title, 1 when only in the first
    80 body words). A headline's sentence-initial word counts when the body also capitalizes
    it mid-sentence ("Apple unveils ..." + "... Apple said")."""
    title = rec.get("title") or ""
    body = " ".join((rec.get("body_text") or "").split()[:80])
    body_ents = capitalized_phrases(body)
    out: dict[str, int] = dict.fromkeys(body_ents, 1)
    if title and not _is_title_case(title):
        confirmed = {e.lower() for e in body_ents}
        for e in capitalized_phrases(title, skip_initial=False):
            if e.lower() in confirmed or e in capitalized_phrases(title):
                out[e] = 2
    return out


def cluster_entity(members: Sequence[Mapping[str, Any]]) -> str | None:
    """The most frequent capitalized phrase across the cluster's articles (each article counts
    once, a title mention twice); for 2+ articles it must appear in at least 2 of them."""
    c: Counter[str] = Counter()
    arts: Counter[str] = Counter()
    case: dict[str, Counter[str]] = {}
    for r in members:
        seen: dict[str, int] = {}
        for e, w in _entities_of(r).items():
            k = e.lower()
            seen[k] = max(seen.get(k, 0), w)
            case.setdefault(k, Counter())[e] += 1
        for k, w in seen.items():
            c[k] += w
            arts[k] += 1
    if not c:
        return None
    need = 2 if len(members) >= 2 else 1
    best = sorted(c.items(), key=lambda kv: (-kv[1], -len(kv[0].split()), kv[0]))
    for k, _ in best:
        if arts[k] >= need:
            forms = case[k]
            return sorted(forms.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    return None


_WORD_CASED = re.compile(r"[^\W_]+", re.UNICODE)
_SENT_SPLIT = re.compile(r"(?<=[.!?])[\"”’)]*\s+(?=[\"“‘(]?[A-Z0-9])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT_SPLIT.split(" ".join(text.split())) if s.strip()]


def extractive_summary(
    rec: Mapping[str, Any],
    key_stems: Sequence[str] = (),
    words_range: tuple[int, int] = (50, 75),
    max_sentences: int = 12,
) -> str:
    """50-75 words (by default) taken from the lead article's own sentences: the first
    sentences, plus the ones that best cover the topic's key terms, in their original order;
    cut (with "…") at the maximum. Falls back to the title when there is no body."""
    lo, hi = words_range
    body = rec.get("body_text") or ""
    title = rec.get("title") or ""
    sents = sentences(body)[:max_sentences]
    tnorm = " ".join(words(title))
    sents = [s for s in sents if len(s.split()) >= 4 and " ".join(words(s)) != tnorm]
    if not sents:
        text = " ".join(body.split()) or title
        toks = text.split()
        return " ".join(toks[:hi]) + (" …" if len(toks) > hi else "")
    keys = set(key_stems)
    scored = []
    for i, s in enumerate(sents):
        stems = {a[0] for w in words(s) if (a := _analyze_word(w)) is not None}
        scored.append((-(len(stems & keys) + (2.0 if i == 0 else 1.0 / (1 + i))), i))
    chosen: list[int] = []
    n = 0
    for _, i in sorted(scored):
        if n >= lo:
            break
        chosen.append(i)
        n += len(sents[i].split())
    toks = " ".join(sents[i] for i in sorted(chosen)).split()
    if len(toks) > hi:
        return " ".join(toks[:hi]).rstrip(",;:") + " …"
    return " ".join(toks)


# --------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------


def article_time_ms(rec: Mapping[str, Any], basis: str = "published") -> int:
    key = "fetched" if basis == "fetched" else "published"
    ms = rec.get(f"{key}_ms")
    if isinstance(ms, int):
        return ms
    return iso_to_ms(rec[f"{key}_at"])


def _record_key(rec: Mapping[str, Any]) -> tuple[str, int, str, str]:
    return (
        str(rec.get("article_id") or ""),
        int(rec.get("revision_no") or 0),
        str(rec.get("key") or ""),
        str(rec.get("seq") or ""),
    )


def _tier_rank(t: Any) -> int:
    return TIER_RANK.get(t, 6)


def _score(rec: Mapping[str, Any]) -> float:
    v = rec.get("importance")
    return float(v) if isinstance(v, int | float) else 0.0


@dataclass(slots=True)
class _Cluster:
    members: list[int]  # indices into the sorted article list
    score: float = 0.0
    lead: int = -1
    terms: list[str] = field(default_factory=list)  # top stems
    term_hashes: list[int] = field(default_factory=list)
    stories: list[str] = field(default_factory=list)
    key: str = ""
    ranked: list[int] = field(default_factory=list)  # lead candidates, best first


def select_records(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
) -> tuple[list[Mapping[str, Any]], int, int]:
    """(articles >= min importance, sorted by id; article count; duplicates removed).

    One record per ``article_id`` (its latest revision); re-emitted keys count once;
    ``exact_duplicate``/``near_duplicate`` records are the duplicates removed.
    """
    latest: dict[str, Mapping[str, Any]] = {}
    dup_keys: set[str] = set()
    for r in records:
        try:
            t = article_time_ms(r, config.time_basis)
        except (KeyError, TypeError, ValueError):
            continue
        if not window.contains(t):
            continue
        disp = r.get("disposition")
        if disp in DUPLICATE_DISPOSITIONS:
            dup_keys.add(str(r.get("key") or r.get("article_id") or ""))
            continue
        if disp not in SCORED_DISPOSITIONS:
            continue
        aid = str(r.get("article_id") or "")
        if not aid:
            continue
        cur = latest.get(aid)
        if cur is None or _record_key(r) > _record_key(cur):
            latest[aid] = r
    arts = [latest[a] for a in sorted(latest)]
    sel = [r for r in arts if _score(r) >= config.min_importance]
    return sel, len(arts), len(dup_keys)


def story_copies(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
) -> dict[str, list[tuple[str, Any]]]:
    """story id -> (publisher, tier) of the window's duplicate copies (exact and near), so a
    digest item can credit every outlet that carried the story, not only the scored ones."""
    seen: set[str] = set()
    out: dict[str, list[tuple[str, Any]]] = {}
    for r in records:
        if r.get("disposition") not in DUPLICATE_DISPOSITIONS or not r.get("story_id"):
            continue
        key = str(r.get("key") or r.get("article_id") or "")
        if key in seen:
            continue
        try:
            if not window.contains(article_time_ms(r, config.time_basis)):
                continue
        except (KeyError, TypeError, ValueError):
            continue
        seen.add(key)
        pub = str(r.get("publisher") or r.get("feed_id") or "")
        out.setdefault(str(r["story_id"]), []).append((pub, r.get("tier")))
    return out


def assemble_digest(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    *,
    schedule: DigestSchedule | None = None,
    previous: Mapping[str, Any] | None = None,
    feed_health: FeedHealthAccumulator
    | Mapping[str, Any]
    | Iterable[Mapping[str, Any]]
    | None = None,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    final: bool = True,
) -> dict[str, Any]:
    """The digest of one window (a ``digests.v1`` dict). See the module doc.

    ``previous``: the previous digest of the same type (or :func:`digest_memory` of it) for
    trend flags; ``feed_health``: a :class:`FeedHealthAccumulator` (or its summary) or the
    window's ``feed-health`` records.
    """
    sched = schedule or DigestSchedule()
    dtype = (
        sched.type(window.digest_type)
        if _known(sched, window.digest_type)
        else _fallback_type(window.digest_type)
    )
    limits = config.limits or dtype.limits
    wr = config.summary_words or dtype.summary_words
    records = records if isinstance(records, list) else list(records)
    sel, article_count, dups = select_records(records, window, config)
    copies = story_copies(records, window, config)

    clusters: list[_Cluster] = []
    X = None
    vocab = np.zeros(0, np.uint64)
    if sel:
        feats: list[TextFeatures] = []
        for s0 in range(0, len(sel), 5000):
            feats += features_batch(
                [(r.get("title") or "", r.get("body_text") or "") for r in sel[s0 : s0 + 5000]],
                title_weight=config.title_weight,
                body_words=config.body_words,
            )
        X, vocab = tfidf_matrix(feats)
        labels = cluster_articles(X, sel, config)
        clusters = _build_clusters(sel, X, vocab, labels)

    checks: list[dict[str, Any]] = []
    prev_index = list((previous or {}).get("topic_index") or [])
    has_prev = previous is not None
    # rank: best score, then size, then the lead's id
    clusters.sort(key=lambda c: (-c.score, -len(c.members), sel[c.lead]["article_id"]))
    trends: dict[str, str | None] = {}
    if not has_prev:
        checks.append(
            {"check": "trends", "ok": True, "action": "no previous window: no trend flags"}
        )

    sections_items: dict[str, list[_Cluster]] = {
        TOP_STORIES: [],
        NOTEWORTHY: [],
        ALSO_MENTIONED: [],
    }
    for c in clusters:
        if c.score >= config.top_threshold:
            sections_items[TOP_STORIES].append(c)
        elif c.score >= config.noteworthy_threshold:
            sections_items[NOTEWORTHY].append(c)
        elif c.score >= config.min_importance:
            sections_items[ALSO_MENTIONED].append(c)

    if has_prev:
        # a singleton can only be FADING and only matters when shown: trends for multi-article
        # topics (index, emerging list) and for everything that can be displayed
        shown = {c.key for items in sections_items.values() for c in items[: _cap(limits)]}
        trends = _trends(
            [c for c in clusters if len(c.members) >= 2 or c.key in shown], prev_index, config
        )
    # self-check: a T5 source should not lead the digest unless corroborated
    _check_t5_top(sections_items, sel, checks)
    # self-check: sizing limits -> trim
    caps = {TOP_STORIES: limits.top, NOTEWORTHY: limits.noteworthy, ALSO_MENTIONED: limits.also}
    for name, items in sections_items.items():
        if len(items) > caps[name]:
            checks.append(
                {
                    "check": "limits",
                    "ok": False,
                    "action": f"trimmed {name} from {len(items)} to {caps[name]}",
                }
            )
            del items[caps[name] :]
    if not any(c["check"] == "limits" for c in checks):
        checks.append({"check": "limits", "ok": True, "action": None})

    # items
    sections = []
    used_labels: dict[str, int] = {}
    attribution_fixes = 0
    missing_attr = 0
    for name in (TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED):
        items = []
        for c in sections_items[name]:
            fixed, missing = _ensure_attribution(c, sel)
            attribution_fixes += fixed
            missing_attr += missing
            item = _item(c, sel, trends.get(c.key), wr, config, copies)
            label = item["label"]
            n = used_labels.get(label.lower(), 0)
            used_labels[label.lower()] = n + 1
            if n:  # re-label duplicates with the lead's publisher
                item["label"] = f"{label} ({item['lead']['publisher']})"
            items.append(item)
        sections.append({"name": name, "items": items})
    checks.append(
        {
            "check": "attribution",
            "ok": missing_attr == 0,
            "action": (
                f"re-ranked {attribution_fixes} lead(s) to a source with a URL"
                if attribution_fixes
                else None
            )
            if missing_attr == 0
            else f"{missing_attr} lead(s) without URL",
        }
    )
    checks.append(
        {
            "check": "labels",
            "ok": all(n == 1 for n in used_labels.values()),
            "action": "duplicate labels suffixed with the publisher"
            if any(n > 1 for n in used_labels.values())
            else None,
        }
    )
    checks.append({"check": "order", "ok": _sections_sorted(sections), "action": None})

    index = _topic_index(clusters, sel, trends, config)
    emerging = [t for t in index if t.get("trend") == "EMERGING"]
    fading = _declining(prev_index, clusters, trends, config) if has_prev else []
    health = _health_block(feed_health)
    health.update(
        {
            "new_articles": article_count,
            "duplicates_removed": dups,
            "emerging_topics": [t["label"] for t in emerging][:10],
            "declining_topics": fading[:10],
        }
    )
    return {
        "schema": "digests",
        "schema_version": DIGEST_SCHEMA_VERSION,
        "digest_id": window.digest_id,
        "digest_type": window.digest_type,
        "title": dtype.title,
        "window_start": ms_to_iso(window.start_ms),
        "window_end": ms_to_iso(window.end_ms),
        "generated_at": ms_to_iso(window.end_ms),
        "final": final,
        "timezone": sched.tz,
        "article_count": article_count,
        "duplicates_removed": dups,
        "selected_count": len(sel),
        "cluster_count": len(clusters),
        "clustering": "ward" if config.n_topics else "dbscan",
        "sections": sections,
        "feed_health": health,
        "topic_index": index,
        "self_checks": checks,
    }


def _cap(limits: SectionLimits) -> int:
    return max(limits.top, limits.noteworthy, limits.also) + 1  # +1: the T5 re-rank


def _known(schedule: DigestSchedule, name: str) -> bool:
    return any(t.name == name for t in schedule.types)


def _fallback_type(name: str) -> DigestType:
    return DigestType(name, name.replace("_", " ").title(), "rolling", MORNING.limits)


def _row_centroid_dots(X: sp.csr_matrix, C: sp.csr_matrix, cid: np.ndarray) -> np.ndarray:
    """``X[i] . C[cid[i]]`` for every row, vectorized: each nonzero (i, t) of X looks up
    C[cid[i], t] by binary search over C's sorted (row, term) keys."""
    V = np.int64(X.shape[1])
    c_rows = np.repeat(np.arange(C.shape[0], dtype=np.int64), np.diff(C.indptr))
    c_keys = c_rows * V + C.indices.astype(np.int64)  # sorted: CSR rows, sorted indices
    x_rows = np.repeat(np.arange(X.shape[0], dtype=np.int64), np.diff(X.indptr))
    q = cid.astype(np.int64)[x_rows] * V + X.indices.astype(np.int64)
    pos = np.searchsorted(c_keys, q)
    pos[pos >= len(c_keys)] = 0
    hit = c_keys[pos] == q if len(c_keys) else np.zeros(len(q), dtype=bool)
    prod = np.where(hit, X.data * C.data[pos] if len(c_keys) else 0.0, 0.0)
    return np.bincount(x_rows, weights=prod, minlength=X.shape[0])


def _build_clusters(
    sel: Sequence[Mapping[str, Any]], X: sp.csr_matrix, vocab: np.ndarray, labels: np.ndarray
) -> list[_Cluster]:
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
    scores = np.array([_score(r) for r in sel])
    members: list[list[int]] = [[] for _ in range(m)]
    for i, c in enumerate(cid.tolist()):
        members[c].append(i)
    out = []
    for c in range(m):
        mem = members[c]
        cl = _Cluster(mem)
        if len(mem) == 1:
            cl.ranked = mem
        else:
            # lead: closest to the centroid, then importance, then tier, then id
            cl.ranked = sorted(
                mem,
                key=lambda i: (
                    -round(float(sims[i]), 9),
                    -scores[i],
                    _tier_rank(sel[i].get("tier")),
                    sel[i]["article_id"],
                ),
            )
        cl.lead = cl.ranked[0]
        cl.score = round(float(max(scores[i] for i in mem)), 2)
        s0, s1 = C.indptr[c], C.indptr[c + 1]
        idx, val = C.indices[s0:s1], C.data[s0:s1]
        top = idx[np.lexsort((vocab[idx], -val))[:8]]
        cl.term_hashes = [int(h) for h in vocab[top]]
        cl.stories = sorted({str(sel[i].get("story_id")) for i in mem if sel[i].get("story_id")})
        cl.key = stable_id(*sorted(sel[i]["article_id"] for i in mem))
        out.append(cl)
    return out


def _stem_surface(members: Sequence[Mapping[str, Any]]) -> tuple[dict[int, str], dict[str, str]]:
    """hash -> stem and stem -> most frequent surface word, from the members' titles and
    first words (local: does not depend on any global cache state)."""
    stem_of: dict[int, str] = {}
    surf: dict[str, Counter[str]] = {}
    for r in members:
        text = (r.get("title") or "") + " " + " ".join((r.get("body_text") or "").split()[:100])
        for w in _WORD_CASED.findall(text):
            a = _analyze_word(w.lower())
            if a is None:
                continue
            stem_of[a[1]] = a[0]
            surf.setdefault(a[0], Counter())[w] += 1
    best = {}
    for st, c in surf.items():
        # most frequent lower-cased word, shown in its most frequent spelling ("iPhone")
        low: Counter[str] = Counter()
        for w, n in c.items():
            low[w.lower()] += n
        word = sorted(low.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        forms = sorted(
            ((w, n) for w, n in c.items() if w.lower() == word),
            key=lambda kv: (-kv[1], kv[0].istitle(), kv[0]),
        )
        best[st] = forms[0][0]
    return stem_of, best


def _label(c: _Cluster, sel: Sequence[Mapping[str, Any]]) -> tuple[str, str | None, list[str]]:
    # the lead and the members closest to the centroid speak for the topic
    members = [sel[i] for i in c.ranked[:20]]
    stem_of, surface = _stem_surface(members)
    ent = cluster_entity(members)
    ent_stems = {a[0] for w in words(ent or "") if (a := _analyze_word(w)) is not None}
    terms: list[str] = []
    for h in c.term_hashes:
        s = stem_of.get(h)
        if s is None or s in ent_stems or s.isdigit():
            continue
        terms.append(surface.get(s, s))
        if len(terms) == 3:
            break
    c.terms = [stem_of[h] for h in c.term_hashes if h in stem_of][:5]
    if ent and terms:
        label = f"{ent}: {' '.join(terms)}"
    elif terms:
        label = " ".join(terms)
    else:
        label = ent or ""
    if len(label.strip()) < 3:  # self-check: labels clear -> re-label with the lead title
        label = " ".join((sel[c.lead].get("title") or "Untitled").split()[:8])
    return label, ent, terms


def _item(
    c: _Cluster,
    sel: Sequence[Mapping[str, Any]],
    trend: str | None,
    wr: tuple[int, int],
    config: DigestConfig,
    copies: Mapping[str, Sequence[tuple[str, Any]]] | None = None,
) -> dict[str, Any]:
    lead = sel[c.lead]
    label, ent, terms = _label(c, sel)
    others = [i for i in c.members if i != c.lead]
    others.sort(
        key=lambda i: (-_score(sel[i]), _tier_rank(sel[i].get("tier")), sel[i]["article_id"])
    )
    pubs: dict[str, int] = {}
    for i in others:
        p = str(sel[i].get("publisher") or sel[i].get("feed_id") or "")
        if p:
            pubs[p] = min(pubs.get(p, 9), _tier_rank(sel[i].get("tier")))
    # the story's duplicate copies (syndication, near-duplicates) are related coverage too
    # (copies from the lead's own publisher add no coverage: left out)
    lead_pub = str(lead.get("publisher") or lead.get("feed_id") or "")
    extra = [pt for sid in c.stories for pt in (copies or {}).get(sid, ()) if pt[0] != lead_pub]
    for p, tier in extra:
        if p:
            pubs[p] = min(pubs.get(p, 9), _tier_rank(tier))
    related_sources = [p for p, _ in sorted(pubs.items(), key=lambda kv: (kv[1], kv[0]))]
    summary = extractive_summary(lead, c.terms, wr)
    return {
        "label": label,
        "trend": trend,
        "score": c.score,
        "entity": ent,
        "terms": terms,
        "lead": _lead(lead),
        "summary": summary,
        "summary_words": len(summary.replace(" …", "").split()),
        "related_count": len(others) + len(extra),
        "related_sources": related_sources,
        "related": [
            {
                "article_id": sel[i]["article_id"],
                "title": sel[i].get("title") or "",
                "publisher": str(sel[i].get("publisher") or sel[i].get("feed_id") or ""),
                "url": sel[i].get("url"),
                "score": _score(sel[i]),
            }
            for i in others[: config.related_max]
        ],
        "article_ids": [lead["article_id"], *(sel[i]["article_id"] for i in others)][
            : config.article_ids_max
        ],
        "story_ids": c.stories[:20],
        "size": len(c.members),
        "topic_key": c.key,
    }


def _lead(r: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "article_id": r["article_id"],
        "title": r.get("title") or "",
        "url": r.get("url"),
        "publisher": str(r.get("publisher") or r.get("feed_id") or "unknown"),
        "feed_id": str(r.get("feed_id") or ""),
        "tier": r.get("tier"),
        "published_at": ms_to_iso(article_time_ms(r, "published")),
        "score": _score(r),
    }


def _ensure_attribution(c: _Cluster, sel: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """Self-check: the lead needs a source name and URL; else re-rank to the best-ranked
    member that has both. Returns (re-ranked, still missing)."""

    def ok(i: int) -> bool:
        r = sel[i]
        return bool(r.get("url")) and bool(r.get("publisher") or r.get("feed_id"))

    if ok(c.lead):
        return 0, 0
    for i in c.ranked:
        if ok(i):
            c.lead = i
            return 1, 0
    return 0, 1


def _check_t5_top(
    sections: dict[str, list[_Cluster]],
    sel: Sequence[Mapping[str, Any]],
    checks: list[dict[str, Any]],
) -> None:
    """000 Step 4 self-check: IF the highest-scoring article is from a T5 source, review its
    corroboration: a T5 lead without any T1-T4 coverage in its cluster or story is moved
    below the first item that is not such a case."""
    for name in (TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED):
        items = sections[name]
        if not items:
            continue
        first = items[0]
        lead = sel[first.lead]
        if lead.get("tier") != "T5":
            checks.append({"check": "t5_top", "ok": True, "action": None})
            return
        tiers = {sel[i].get("tier") for i in first.members} | set(lead.get("story_tiers") or ())
        if tiers & {"T1", "T2", "T3", "T4"}:
            checks.append(
                {"check": "t5_top", "ok": True, "action": "T5 lead corroborated by T1-T4"}
            )
            return
        j = next((k for k, c in enumerate(items) if sel[c.lead].get("tier") != "T5"), None)
        if j is None:
            checks.append({"check": "t5_top", "ok": False, "action": "only T5 sources"})
            return
        items.insert(j, items.pop(0))
        checks.append(
            {"check": "t5_top", "ok": False, "action": "re-ranked an uncorroborated T5 lead"}
        )
        return
    checks.append({"check": "t5_top", "ok": True, "action": None})


def _sections_sorted(sections: list[dict[str, Any]]) -> bool:
    for s in sections:
        sc = [it["score"] for it in s["items"]]
        # one re-rank (T5 self-check) may move a single item down
        bad = sum(1 for a, b in itertools.pairwise(sc) if a < b)
        if bad > 1:
            return False
    return True


# ---- trends --------------------------------------------------------------------------


class _PrevTopics:
    """The previous window's topic index, parsed once, with inverted indexes by story id and
    top-term hash (so matching a cluster looks only at topics sharing something with it)."""

    def __init__(self, prev_index: Sequence[Mapping[str, Any]]) -> None:
        self.items = list(prev_index)
        self.stories = [set(p.get("story_ids") or ()) for p in self.items]
        self.terms = [{int(x) for x in (p.get("term_hashes") or ())[:5]} for p in self.items]
        self.by_story: dict[str, list[int]] = {}
        self.by_term: dict[int, list[int]] = {}
        for i in range(len(self.items)):
            for sid in self.stories[i]:
                self.by_story.setdefault(sid, []).append(i)
            for t in self.terms[i]:
                self.by_term.setdefault(t, []).append(i)


def _match_prev(
    c: _Cluster, terms: Sequence[int], prev: _PrevTopics | Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The previous window's topic this cluster continues: shared story ids first, then the
    largest overlap of top terms (Jaccard >= 0.4 over the top-5 term hashes)."""
    if not isinstance(prev, _PrevTopics):
        prev = _PrevTopics(prev)
    stories = set(c.stories)
    t5 = set(terms[:5])
    cand: set[int] = set()
    for sid in stories:
        cand.update(prev.by_story.get(sid, ()))
    for t in t5:
        cand.update(prev.by_term.get(t, ()))
    best: tuple[tuple[float, float, int, str], Mapping[str, Any]] | None = None
    for i in sorted(cand):
        p = prev.items[i]
        shared = len(stories & prev.stories[i])
        pt = prev.terms[i]
        jac = len(t5 & pt) / len(t5 | pt) if (t5 or pt) else 0.0
        if shared == 0 and jac < 0.4:
            continue
        k = (float(shared), jac, int(p.get("size") or 0), str(p.get("key") or ""))
        if best is None or k > best[0]:
            best = (k, p)
    return best[1] if best else None


def _trend_of(size: int, prev: Mapping[str, Any] | None, config: DigestConfig) -> str | None:
    if prev is None:
        return "EMERGING" if size >= config.emerging_min else None
    ps = int(prev.get("size") or 0)
    if ps <= 0:
        return "EMERGING" if size >= config.emerging_min else None
    if size >= ps * (1 + config.trend_change) and size >= 2:
        return "TRENDING"
    if ps >= 2 and size <= ps * (1 - config.trend_change):
        return "FADING"
    return None


def _trends(
    clusters: Sequence[_Cluster], prev_index: Sequence[Mapping[str, Any]], config: DigestConfig
) -> dict[str, str | None]:
    prev = _PrevTopics(prev_index)
    return {
        c.key: _trend_of(len(c.members), _match_prev(c, c.term_hashes, prev), config)
        for c in clusters
    }


def _index_order(clusters: Sequence[_Cluster]) -> list[_Cluster]:
    multi = [c for c in clusters if len(c.members) >= 2]
    return sorted(multi, key=lambda c: (-len(c.members), -c.score, c.key))


def _topic_index(
    clusters: Sequence[_Cluster],
    sel: Sequence[Mapping[str, Any]],
    trends: Mapping[str, str | None],
    config: DigestConfig,
) -> list[dict[str, Any]]:
    """Compact description of the window's multi-article topics, for the next window's trend
    flags (matching by story ids and top terms)."""
    out = []
    for c in _index_order(clusters)[: config.topic_index_size]:
        lead = sel[c.lead]
        out.append(
            {
                "key": c.key,
                "label": " ".join((lead.get("title") or "").split()[:10]),
                "size": len(c.members),
                "score": c.score,
                "trend": trends.get(c.key),
                "term_hashes": [str(h) for h in c.term_hashes[:5]],
                "story_ids": c.stories[:20],
            }
        )
    return out


def _declining(
    prev_index: Sequence[Mapping[str, Any]],
    clusters: Sequence[_Cluster],
    trends: Mapping[str, str | None],
    config: DigestConfig,
) -> list[str]:
    """Labels of previous topics that shrank by 50 %+ (or disappeared)."""
    cur_by_prev: dict[str, int] = {}
    prev = _PrevTopics(prev_index)
    for c in clusters:
        if len(c.members) < 2:  # 1 article is a 50 %+ drop from any previous topic (>= 2)
            continue
        p = _match_prev(c, c.term_hashes, prev)
        if p is not None:
            k = str(p.get("key"))
            cur_by_prev[k] = cur_by_prev.get(k, 0) + len(c.members)
    out = []
    for p in sorted(prev_index, key=lambda p: (-int(p.get("size") or 0), str(p.get("key")))):
        ps = int(p.get("size") or 0)
        if ps >= 2 and cur_by_prev.get(str(p.get("key")), 0) <= ps * (1 - config.trend_change):
            out.append(str(p.get("label") or p.get("key")))
    return out


def _health_block(
    fh: FeedHealthAccumulator | Mapping[str, Any] | Iterable[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    if fh is None:
        return FeedHealthAccumulator().summary()
    if isinstance(fh, FeedHealthAccumulator):
        return fh.summary()
    if isinstance(fh, Mapping):
        return dict(fh)
    return summarize_feed_health(fh)


def digest_memory(d: Mapping[str, Any]) -> dict[str, Any]:
    """What to keep of a digest as ``previous`` for the next window of its type (small)."""
    return {
        "digest_id": d.get("digest_id"),
        "window_end": d.get("window_end"),
        "topic_index": list(d.get("topic_index") or []),
    }


def digest_key(d: Mapping[str, Any]) -> bytes:
    """Kafka key of a digest: ``digest_type:window_start`` (re-emits are idempotent)."""
    return str(d["digest_id"]).encode()
