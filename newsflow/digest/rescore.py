"""A window's articles re-scored as of its end (pure): each story's publishers and tiers and each
feed's reliability as of then, on columns, the same floats as
:func:`newsflow.scoring.importance.rescore`; the selection above the importance floor."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import replace
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
)

_A = TypeVar("_A", bound=Hashable)
_B = TypeVar("_B", bound=Hashable)
_T = TypeVar("_T")

#: a story's (publishers, tiers) as of a window's end
Coverage = tuple[list[str], list[str]]


class Selected(Sequence[DigestEntry]):
    """The window's selected articles (sorted by id), each as assembly reads it: the record
    re-scored as of the window's end (a copy: new importance, components dropped, the story's publishers and tiers as of the end). Columns (``aids``, ``scores``,
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
    """The window's articles at or above the importance floor, each re-scored as of ``end_ms``
    (:func:`_rescore_columns`): :func:`~newsflow.digest.selection.select_records` with a
    re-scoring ``adjust``, on columns, no record copied."""
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


def _rescore_columns(
    w: WindowRecords, coverage: CoverageAsOf, end_ms: int,
    cfg: ScoreConfig = DEFAULT_SCORE_CONFIG,
) -> tuple[list[float], list[Coverage | None]]:
    """Per article: (its score as of ``end_ms``, its story's (publishers, tiers) as of then).
    An article without every component is not re-scored: its importance
    (:func:`~newsflow.digest.selection.importance_of`) and None. The others on columns: each
    (story, counts as scored) and each (feed, tier) looked up once, per article a few numpy
    operations giving the float of :func:`newsflow.scoring.importance.rescore_components`
    (see :func:`_builtin_sum` and :func:`py_round`)."""
    n = len(w.arts)
    cols = w.cols
    comps = cols.importance_components
    keep = [i for i, c in enumerate(comps) if isinstance(c, dict) and all(k in c for k in COMPONENTS)]
    cov: list[Coverage | None] = [None] * n
    scores = [importance_of(r) for r in w.arts] if len(keep) < n else [0.0] * n
    if not keep:
        return scores, cov

    def sub(xs: list[_T]) -> list[_T]:
        return xs if len(keep) == n else [xs[i] for i in keep]

    kept = cast(list[dict[str, float]], sub(comps))
    rec, rel, dep = (_floats([c[k] for c in kept]) for k in ("recency", "relevance", "depth"))
    # per article: its (story, counts) and (feed, tier) as codes
    gs, ustories = _codes(sub(cols.story_id), sub(cols.story_counts))
    gf, ufeeds = _codes(sub(cols.feed_id), sub(cols.tier))
    part = _RescorerParts(coverage, end_ms, cfg)
    wc = np.empty(len(ustories))
    story_cov: list[Coverage] = []
    for j, (sid, sc) in enumerate(ustories):
        wc[j], pubs, tiers = part.story(sid, sc)
        story_cov.append((pubs, tiers))
    wa = np.fromiter((part.feed(fid, tier) for fid, tier in ufeeds), np.float64, len(ufeeds))
    _, w1, _, w3, w4 = cfg.weights
    # the terms in COMPONENTS order, as weighted_importance sums them
    x = _builtin_sum((wa[gf], w1 * rec, wc[gs], w3 * rel, w4 * dep))
    x = np.where(x > 0.0, x, 0.0)  # max(0.0, x), NaN -> 0.0 as max() does
    x = np.where(x < 100.0, x, 100.0)  # min(100.0, x)
    got = py_round(x, cfg.ndigits)
    for k, (i, g) in enumerate(zip(keep, gs.tolist(), strict=True)):
        scores[i] = got[k]
        cov[i] = story_cov[g]
    return scores, cov


def _floats(values: list[float]) -> np.ndarray:
    """A component column as float64, each value the float the builtin ``float * value``
    multiplies by: floats, and ints (and bools) converted exactly as Python converts them; a
    value that is not a number raises TypeError, as the multiplication does."""
    a = np.array(values)
    if a.dtype.kind in "fi" and a.dtype.itemsize == 8:
        return a.astype(np.float64, copy=False)

    def num(v: object) -> float:
        if isinstance(v, int | float):
            return float(v)
        msg = f"importance component {v!r} is not a number"
        raise TypeError(msg)

    return np.fromiter(map(num, values), np.float64, len(values))


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
    left to right from 0 (Python 3.11); with Neumaier's compensation from 3.12 on.

    The order is the one of the article's own score: an article is scored once, when first
    seen, by :func:`newsflow.scoring.importance.weighted_importance` (``sum()`` of the weighted
    components in ``COMPONENTS`` order), and a digest re-scores it with its story and feed as of
    the window's end. Float addition is not associative: another order (numpy's pairwise
    ``sum``, a dot product) can differ in the last bit, and after rounding an article's
    importance, hence the digest's bytes, would depend on which step computed it."""
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
