"""A window's articles re-scored as of its end (pure): each story's publishers and tiers and each
feed's reliability as of then, on columns, the same floats as
:func:`newsflow.scoring.importance.rescore`; the selection above the importance floor."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, overload

import numpy as np

from newsflow.digest.config import DigestConfig
from newsflow.digest.coverage import StoryCoverage
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
    rescore,
    story_counts,
)


class Selected(Sequence[Mapping[str, Any]]):
    """The window's selected articles (sorted by id), each as assembly reads it: the record
    re-scored as of the window's end (:func:`_rescorer`'s copy: new importance, components
    dropped, the story's publishers and tiers as of the end). Columns (``aids``, ``scores``,
    ``cols``, ``base``: the records before re-scoring, same ids, stories, tiers and texts)
    serve the passes over every article; a copy is made only for an article read one by one
    (leads, related items, labels), when first read."""

    __slots__ = ("_cov", "_made", "aids", "base", "cols", "scores")

    def __init__(self, w: WindowRecords, scores: list[float],
                 cov: list[tuple[list[str], list[str]] | None]) -> None:
        self.base = w.arts
        self.aids = w.aids
        self.cols = w.cols
        self.scores = scores
        self._cov = cov  # per article: its story's (publishers, tiers); None: not re-scored
        self._made: dict[int, Mapping[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.base)

    @overload
    def __getitem__(self, i: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Mapping[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
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
                r = {**b, "importance": self.scores[i], "importance_components": None,
                     "story_publishers": pubs or b.get("story_publishers"),
                     "story_tiers": tiers or b.get("story_tiers")}
            self._made[i] = r
        return r

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return (self[i] for i in range(len(self.base)))

    def coverage_of(self, i: int) -> tuple[list[str], list[str]] | None:
        """Article ``i``'s story's (publishers, tiers) as of the window's end; None when the
        article is not re-scored (no components)."""
        return self._cov[i]


def select_rescored(
    w: WindowRecords,
    coverage: StoryCoverage,
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

    def __init__(self, coverage: StoryCoverage, end_ms: int, cfg: ScoreConfig) -> None:
        self.coverage, self.end_ms, self.cfg = coverage, end_ms, cfg
        self.stories: dict[Any, tuple[list[str], list[str]]] = {}
        self.feeds: dict[Any, float | None] = {}
        self.auth: dict[tuple[Any, float | None], float] = {}

    def story(self, sid: Any, sc: tuple[int, int]) -> tuple[float, list[str], list[str]]:
        cov = self.stories.get(sid)
        if cov is None:
            cov = self.stories[sid] = self.coverage.as_of(sid, self.end_ms)
        pubs, tiers = cov
        w2 = self.cfg.weights[2]
        return w2 * corroboration_score(max(len(pubs), sc[0]), max(len(tiers), sc[1])), pubs, tiers

    def feed(self, fid: Any, tier: Any) -> float:
        if fid not in self.feeds:
            self.feeds[fid] = self.coverage.reliability_of(fid, self.end_ms)
        rel = self.feeds[fid]
        a = self.auth.get((tier, rel))
        if a is None:
            cfg = self.cfg
            a = self.auth[(tier, rel)] = authority_score(
                tier, rel, tier_scores=cfg.tier_scores, unknown_tier_score=cfg.unknown_tier_score)
        return float(self.cfg.weights[0] * a)


def _rescorer(coverage: StoryCoverage, end_ms: int, cfg: ScoreConfig = DEFAULT_SCORE_CONFIG) -> Any:
    """:func:`rescore_as_of` for the many records of one window, the same score (same float
    operations in the same order as :func:`newsflow.scoring.importance.rescore`) at a fraction
    of the cost: each story's coverage, each feed's reliability and each (tier, reliability)
    authority looked up once; the record's components are not re-emitted (assembly reads the
    score only), so the returned copy drops them rather than keep stale ones."""
    _, w1, _, w3, w4 = cfg.weights
    nd = cfg.ndigits
    assert COMPONENTS == ("authority", "recency", "corroboration", "relevance", "depth")
    part = _RescorerParts(coverage, end_ms, cfg)
    by_story: dict[Any, tuple[float, list[str], list[str]]] = {}
    by_feed: dict[Any, float] = {}

    def adjust(rec: Mapping[str, Any]) -> Mapping[str, Any]:
        comps = rec.get("importance_components")
        if (type(comps) is not dict and not isinstance(comps, Mapping)) or not (
                "authority" in comps and "recency" in comps and "corroboration" in comps
                and "relevance" in comps and "depth" in comps):
            return rec
        sid, fid, tier, sc = rec.get("story_id"), rec.get("feed_id"), rec.get("tier"), rec.get("_sc")
        if sc is None:
            sc = story_counts(rec)
        got = by_story.get((sid, sc))
        if got is None:
            got = by_story[(sid, sc)] = part.story(sid, sc)
        wc, pubs, tiers = got
        wa = by_feed.get((fid, tier))
        if wa is None:
            wa = by_feed[(fid, tier)] = part.feed(fid, tier)
        # the same sum() as weighted_importance (3.12's sum() of floats is compensated)
        x = sum((wa, w1 * comps["recency"], wc, w3 * comps["relevance"], w4 * comps["depth"]))
        return {**rec, "importance": round(min(100.0, max(0.0, x)), nd), "importance_components": None,
                "story_publishers": pubs or rec.get("story_publishers"),
                "story_tiers": tiers or rec.get("story_tiers")}

    return adjust


def _rescore_columns(
    w: WindowRecords, coverage: StoryCoverage, end_ms: int,
    cfg: ScoreConfig = DEFAULT_SCORE_CONFIG,
) -> tuple[list[float], list[tuple[list[str], list[str]] | None]]:
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
    cov: list[tuple[list[str], list[str]] | None] = []
    stories: dict[Any, tuple[list[str], list[str]]] = {}
    for r in w.arts:
        a = adjust(r)
        scores.append(importance_of(a))
        if a is r:
            cov.append(None)
        else:
            sid = r.get("story_id")
            got = stories.get(sid)
            if got is None:
                got = stories[sid] = coverage.as_of(sid, end_ms)
            cov.append(got)
    return scores, cov


_USED = itemgetter("recency", "relevance", "depth")


def _rescore_fast(
    w: WindowRecords, coverage: StoryCoverage, end_ms: int, cfg: ScoreConfig,
) -> tuple[list[float], list[tuple[list[str], list[str]] | None]] | None:
    """:func:`_rescore_columns` when every article has all components (dicts of floats or
    ints) and story counts (else None)."""
    cols = w.cols
    comps = cols["importance_components"]
    if set(map(type, comps)) != {dict}:
        return None
    if any(not set(COMPONENTS) <= set(keys) for keys in set(map(tuple, comps))):
        return None
    rec, rel, dep = arrs = [np.array(v) for v in zip(*map(_USED, comps), strict=True)]
    # floats, ints, or both (converted as the builtin float * int does); anything else (bool,
    # str, Decimal, None, ints beyond int64) gives another dtype: one by one
    if any(a.dtype.kind not in "fi" or a.dtype.itemsize != 8 for a in arrs):
        return None
    rec, rel, dep = (a.astype(np.float64, copy=False) for a in arrs)
    try:  # per article: its (story, counts) and (feed, tier) as codes
        gs, ustories = _codes(cols["story_id"], cols["_sc"])
        gf, ufeeds = _codes(cols["feed_id"], cols["tier"])
    except TypeError:  # unhashable
        return None
    if any(sc is None for _, sc in ustories):
        return None
    part = _RescorerParts(coverage, end_ms, cfg)
    wc = np.empty(len(ustories))
    story_cov: list[tuple[list[str], list[str]]] = []
    for j, (sid, sc) in enumerate(ustories):
        wc[j], pubs, tiers = part.story(sid, sc)
        story_cov.append((pubs, tiers))
    wa = np.fromiter((part.feed(fid, tier) for fid, tier in ufeeds), np.float64, len(ufeeds))
    _, w1, _, w3, w4 = cfg.weights
    x = _builtin_sum((wa[gf], w1 * rec, wc[gs], w3 * rel, w4 * dep))
    x = np.where(x > 0.0, x, 0.0)  # max(0.0, x), NaN -> 0.0 as max() does
    x = np.where(x < 100.0, x, 100.0)  # min(100.0, x)
    scores = py_round(x, cfg.ndigits)
    cov: list[tuple[list[str], list[str]] | None] = list(map(story_cov.__getitem__, gs.tolist()))
    return scores, cov


def _codes(a: list[Any], b: list[Any]) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """(a code per pair ``(a[i], b[i])``, the distinct pairs by code): equal pairs (as tuples
    compare) share a code."""
    n = len(a)
    ca: dict[Any, int] = {}
    cb: dict[Any, int] = {}
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


def rescore_as_of(rec: Mapping[str, Any], coverage: StoryCoverage, end_ms: int,
                  config: ScoreConfig = DEFAULT_SCORE_CONFIG) -> Mapping[str, Any]:
    """The record with its importance recomputed from its story as of ``end_ms`` (distinct
    publishers and tiers by then, the feed's reliability by then); unchanged when the record
    carries no components. The new components replace the old in the returned copy."""
    pubs, tiers = coverage.as_of(rec.get("story_id"), end_ms)
    imp = rescore(rec, publishers=len(pubs), tiers=len(tiers),
                  reliability=coverage.reliability_of(rec.get("feed_id"), end_ms), config=config)
    if imp is None:
        return rec
    return {**rec, "importance": imp.score, "importance_components": dict(imp.components),
            "story_publishers": pubs or rec.get("story_publishers"), "story_tiers": tiers or rec.get("story_tiers")}
