"""A window's articles re-scored as of its end (pure): each story's publishers and tiers and each
feed's reliability as of then, on columns, the same floats as
:func:`newsflow.scoring.importance.rescore`; the selection above the importance floor."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import TypeVar, cast, overload

import numpy as np

from newsflow.digest.config import DigestConfig
from newsflow.digest.coverage import CoverageAsOf
from newsflow.digest.entries import DigestEntry
from newsflow.digest.selection import (
    WindowRecords,
    importance_of,
)
from newsflow.scoring.importance import (
    COMPONENTS,
    DEFAULT_SCORE_CONFIG,
    ScoreConfig,
    authority_score,
    corroboration_score,
    rescore_components,
)

_A = TypeVar("_A", bound=Hashable)
_B = TypeVar("_B", bound=Hashable)

#: a story's (publishers, tiers) as of a window's end
Coverage = tuple[list[str], list[str]]


class Selected(Sequence[DigestEntry]):
    """The window's selected articles (sorted by id), each as assembly reads it: the record
    re-scored as of the window's end (:func:`_rescorer`'s copy: new importance, components
    dropped, the story's publishers and tiers as of the end). Columns (``aids``, ``scores``,
    ``cols``, ``base``: the records before re-scoring, same ids, stories, tiers and texts)
    serve the passes over every article; a copy is made only for an article read one by one
    (leads, related items, labels), when first read."""

    __slots__ = ("_cov", "_made", "aids", "base", "cols", "scores")

    def __init__(self, w: WindowRecords, scores: list[float],
                 cov: list[Coverage | None]) -> None:
        self.base = w.arts
        self.aids = w.aids
        self.cols = w.cols
        self.scores = scores
        self._cov = cov  # per article: its story's (publishers, tiers); None: not re-scored
        self._made: dict[int, DigestEntry] = {}

    def __len__(self) -> int:
        return len(self.base)

    @overload
    def __getitem__(self, i: int) -> DigestEntry: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[DigestEntry]: ...
    def __getitem__(self, i: int | slice) -> DigestEntry | Sequence[DigestEntry]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        r = self._made.get(i)
        if r is None:
            b = self.base[i]
            cov = self._cov[i]
            if cov is None:
                r = b
            else:
                pubs, tiers = cov
                r = replace(b, importance=self.scores[i], importance_components=None,
                            story_publishers=pubs or b.story_publishers, story_tiers=tiers or b.story_tiers)
            self._made[i] = r
        return r

    def __iter__(self) -> Iterator[DigestEntry]:
        return (self[i] for i in range(len(self.base)))

    def coverage_of(self, i: int) -> Coverage | None:
        """Article ``i``'s story's (publishers, tiers) as of the window's end; None when the
        article is not re-scored (no components)."""
        return self._cov[i]


def select_rescored(
    w: WindowRecords,
    coverage: CoverageAsOf,
    end_ms: int,
    config: DigestConfig,
    score_config: ScoreConfig,
) -> Selected:
    """:func:`~newsflow.digest.selection.select_records` with :func:`_rescorer` as ``adjust``, on columns: the same
    scores (:func:`_rescore_columns`), no record copied."""
    scores, cov = _rescore_columns(w, coverage, end_ms, score_config)
    lo = config.min_importance
    keep = np.flatnonzero(np.array(scores, dtype=np.float64) >= lo).tolist()
    if len(keep) == len(scores):
        return Selected(w, scores, cov)
    return Selected(w.take(keep), [scores[i] for i in keep], [cov[i] for i in keep])


class _RescorerParts:
    """What re-scoring needs beyond a record's components, looked up once per window: (story,
    its counts as scored) -> (weighted corroboration, publishers, tiers) as of the end; (feed,
    tier) -> weighted authority with the feed's reliability as of the end."""

    def __init__(self, coverage: CoverageAsOf, end_ms: int, cfg: ScoreConfig) -> None:
        self.coverage, self.end_ms, self.cfg = coverage, end_ms, cfg
        self.stories: dict[str | None, Coverage] = {}
        self.feeds: dict[str | None, float | None] = {}
        self.auth: dict[tuple[str | None, float | None], float] = {}

    def story(self, sid: str | None, sc: tuple[int, int]) -> tuple[float, list[str], list[str]]:
        cov = self.stories.get(sid)
        if cov is None:
            cov = self.stories[sid] = self.coverage.as_of(sid, self.end_ms)
        pubs, tiers = cov
        w2 = self.cfg.weights[2]
        return w2 * corroboration_score(max(len(pubs), sc[0]), max(len(tiers), sc[1])), pubs, tiers

    def feed(self, fid: str | None, tier: str | None) -> float:
        if fid not in self.feeds:
            self.feeds[fid] = self.coverage.reliability_of(fid, self.end_ms)
        rel = self.feeds[fid]
        a = self.auth.get((tier, rel))
        if a is None:
            cfg = self.cfg
            a = self.auth[(tier, rel)] = authority_score(
                tier, rel, tier_scores=cfg.tier_scores, unknown_tier_score=cfg.unknown_tier_score)
        return float(self.cfg.weights[0] * a)


def _rescorer(coverage: CoverageAsOf, end_ms: int,
              cfg: ScoreConfig = DEFAULT_SCORE_CONFIG) -> Callable[[DigestEntry], DigestEntry]:
    """:func:`rescore_as_of` for the many records of one window, the same score (same float
    operations in the same order as :func:`newsflow.scoring.importance.rescore`) at a fraction
    of the cost: each story's coverage, each feed's reliability and each (tier, reliability)
    authority looked up once; the record's components are not re-emitted (assembly reads the
    score only), so the returned copy drops them rather than keep stale ones."""
    _, w1, _, w3, w4 = cfg.weights
    nd = cfg.ndigits
    assert COMPONENTS == ("authority", "recency", "corroboration", "relevance", "depth")
    part = _RescorerParts(coverage, end_ms, cfg)
    by_story: dict[tuple[str | None, tuple[int, int]], tuple[float, list[str], list[str]]] = {}
    by_feed: dict[tuple[str | None, str | None], float] = {}

    def adjust(rec: DigestEntry) -> DigestEntry:
        comps = rec.importance_components
        if not isinstance(comps, dict) or not (
                "authority" in comps and "recency" in comps and "corroboration" in comps
                and "relevance" in comps and "depth" in comps):
            return rec
        sid, fid, tier, sc = rec.story_id, rec.feed_id, rec.tier, rec.story_counts
        got = by_story.get((sid, sc))
        if got is None:
            got = by_story[(sid, sc)] = part.story(sid, sc)
        wc, pubs, tiers = got
        wa = by_feed.get((fid, tier))
        if wa is None:
            wa = by_feed[(fid, tier)] = part.feed(fid, tier)
        # the same sum() as weighted_importance (3.12's sum() of floats is compensated)
        x = sum((wa, w1 * comps["recency"], wc, w3 * comps["relevance"], w4 * comps["depth"]))
        return replace(rec, importance=round(min(100.0, max(0.0, x)), nd), importance_components=None,
                       story_publishers=pubs or rec.story_publishers, story_tiers=tiers or rec.story_tiers)

    return adjust


def _rescore_columns(
    w: WindowRecords, coverage: CoverageAsOf, end_ms: int,
    cfg: ScoreConfig = DEFAULT_SCORE_CONFIG,
) -> tuple[list[float], list[Coverage | None]]:
    """Per article: (its score as of ``end_ms``, its story's (publishers, tiers) as of then, or
    None when it is not re-scored), the very floats of :func:`_rescorer` (its importance or,
    without components, :func:`~newsflow.digest.selection.importance_of`), computed on columns: per story and per feed once,
    per article a few numpy operations (the same float operations, in the same order, as
    :func:`~newsflow.scoring.importance.weighted_importance`'s ``sum()`` and ``round()``).
    Anything unusual (a record without all components or story counts, a component that is
    not a float or an int) takes :func:`_rescorer` itself, record by record."""
    n = len(w.arts)
    if n == 0:
        return [], []
    fast = _rescore_fast(w, coverage, end_ms, cfg)
    if fast is not None:
        return fast
    adjust = _rescorer(coverage, end_ms, cfg)
    scores: list[float] = []
    cov: list[Coverage | None] = []
    stories: dict[str | None, Coverage] = {}
    for r in w.arts:
        a = adjust(r)
        scores.append(importance_of(a))
        if a is r:
            cov.append(None)
        else:
            sid = r.story_id
            got = stories.get(sid)
            if got is None:
                got = stories[sid] = coverage.as_of(sid, end_ms)
            cov.append(got)
    return scores, cov


_USED = itemgetter("recency", "relevance", "depth")


def _rescore_fast(
    w: WindowRecords, coverage: CoverageAsOf, end_ms: int, cfg: ScoreConfig,
) -> tuple[list[float], list[Coverage | None]] | None:
    """:func:`_rescore_columns` when every article has all components (dicts of floats or
    ints) and story counts (else None)."""
    cols = w.cols
    if set(map(type, cols.importance_components)) != {dict}:
        return None
    comps = cast(list[dict[str, float]], cols.importance_components)
    if any(not set(COMPONENTS) <= set(keys) for keys in set(map(tuple, comps))):
        return None
    rec, rel, dep = arrs = [np.array(v) for v in zip(*map(_USED, comps), strict=True)]
    # floats, ints, or both (converted as the builtin float * int does); anything else (bool,
    # str, Decimal, None, ints beyond int64) gives another dtype: one by one
    if any(a.dtype.kind not in "fi" or a.dtype.itemsize != 8 for a in arrs):
        return None
    rec, rel, dep = (a.astype(np.float64, copy=False) for a in arrs)
    try:  # per article: its (story, counts) and (feed, tier) as codes
        gs, ustories = _codes(cols.story_id, cols.story_counts)
        gf, ufeeds = _codes(cols.feed_id, cols.tier)
    except TypeError:  # unhashable
        return None
    if any(sc is None for _, sc in ustories):
        return None
    part = _RescorerParts(coverage, end_ms, cfg)
    wc = np.empty(len(ustories))
    story_cov: list[Coverage] = []
    for j, (sid, sc) in enumerate(ustories):
        wc[j], pubs, tiers = part.story(sid, sc)
        story_cov.append((pubs, tiers))
    wa = np.fromiter((part.feed(fid, tier) for fid, tier in ufeeds), np.float64, len(ufeeds))
    _, w1, _, w3, w4 = cfg.weights
    x = _builtin_sum((wa[gf], w1 * rec, wc[gs], w3 * rel, w4 * dep))
    x = np.where(x > 0.0, x, 0.0)  # max(0.0, x), NaN -> 0.0 as max() does
    x = np.where(x < 100.0, x, 100.0)  # min(100.0, x)
    scores = py_round(x, cfg.ndigits)
    cov: list[Coverage | None] = list(map(story_cov.__getitem__, gs.tolist()))
    return scores, cov


def _codes(a: list[_A], b: list[_B]) -> tuple[np.ndarray, list[tuple[_A, _B]]]:
    """(a code per pair ``(a[i], b[i])``, the distinct pairs by code): equal pairs (as tuples
    compare) share a code."""
    n = len(a)
    ca: dict[_A, int] = {}
    cb: dict[_B, int] = {}
    # a value's code is the position it first appeared at (setdefault: the first one stays)
    ia = np.fromiter(map(ca.setdefault, a, itertools.count()), np.int64, n)
    ib = np.fromiter(map(cb.setdefault, b, itertools.count()), np.int64, n)
    uniq, code = np.unique(ia * n + ib, return_inverse=True)
    pairs = [(a[i], b[j]) for i, j in zip((uniq // n).tolist(), (uniq % n).tolist(), strict=True)]
    return code.ravel().astype(np.int64, copy=False), pairs


def _builtin_sum(cols: Sequence[np.ndarray]) -> np.ndarray:
    """Elementwise ``sum((c0[i], c1[i], ...))`` of float columns, the same float as the builtin:
    left to right from 0 (Python 3.11); with Neumaier's compensation from 3.12 on."""
    with np.errstate(over="ignore", invalid="ignore"):  # inf and nan as the builtin's
        f: np.ndarray = np.add(0.0, cols[0])
        if sys.version_info < (3, 12):
            for c in cols[1:]:
                f = f + c
            return f
        comp = np.zeros_like(f)
        for x in cols[1:]:
            t = f + x
            comp += np.where(np.abs(f) >= np.abs(x), (f - t) + x, (x - t) + f)
            f = t
        out: np.ndarray = np.where((comp != 0.0) & np.isfinite(comp), f + comp, f)
    return out


def py_round(x: np.ndarray, nd: int) -> list[float]:
    """``[round(v, nd) for v in x]`` (Python's correctly rounded decimal rounding, half to
    even on the exact binary value), vectorized: ``rint(v * 10**nd) / 10**nd`` is that float
    unless ``v * 10**nd`` lies within its own rounding error of a half-integer (or is too big
    or not finite): those few take ``round()``."""
    if not 0 <= nd <= 15:
        return [round(v, nd) for v in x.tolist()]
    p = float(10**nd)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x * p
        k = np.rint(y)
        out = k / p
        ay = np.abs(y)
        bad = ~(ay < 2.0**50) | (np.abs(np.abs(y - np.trunc(y)) - 0.5) <= ay * 2.0**-50 + 2.0**-1000)
    res: list[float] = out.tolist()
    for i in np.flatnonzero(bad).tolist():
        res[i] = round(float(x[i]), nd)
    return res


def rescore_as_of(rec: DigestEntry, coverage: CoverageAsOf, end_ms: int,
                  config: ScoreConfig = DEFAULT_SCORE_CONFIG) -> DigestEntry:
    """The record with its importance recomputed from its story as of ``end_ms`` (distinct
    publishers and tiers by then, the feed's reliability by then); unchanged when the record
    carries no components. The new components replace the old in the returned copy."""
    comps = rec.importance_components
    if not isinstance(comps, dict) or not all(c in comps for c in COMPONENTS):
        return rec
    pubs, tiers = coverage.as_of(rec.story_id, end_ms)
    imp = rescore_components(comps, rec.tier, rec.story_counts, publishers=len(pubs), tiers=len(tiers),
                             reliability=coverage.reliability_of(rec.feed_id, end_ms), config=config)
    return replace(rec, importance=imp.score, importance_components=dict(imp.components),
                   story_publishers=pubs or rec.story_publishers, story_tiers=tiers or rec.story_tiers)
