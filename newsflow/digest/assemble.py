"""Step 6: one event-time window's records -> a ``digests.v1`` dict (pure).

:func:`assemble_digest`: importance >= 15; topics by DBSCAN (cosine, eps 0.4) or Ward
(:mod:`newsflow.clustering.window`); labels = the lead headline, after "[Entity]: " when it
does not name the story's entity (``entity`` and top ``terms`` as fields); lead = closest to
the centroid, then importance, then tier; trends vs the previous window (EMERGING / TRENDING /
FADING); Top Stories (>= 70), Noteworthy (40-69), Also Mentioned (15-39), Feed Health Report;
sizing limits per type; extractive summaries; the Step 6 self-checks (re-rank, re-label, trim).

Deterministic: records are de-duplicated and sorted by a stable key first, so the same input in
any order gives byte-identical ``orjson.dumps`` output.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import itertools
import struct
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter, methodcaller
from typing import Any, overload

import numpy as np
import scipy.sparse as sp
import xxhash

from newsflow.clustering.window import cluster_articles, story_groups_of, tfidf_from_counts
from newsflow.core.memo import BoundedMemo
from newsflow.core.timeutil import iso_to_ms, ms_to_iso
from newsflow.digest.config import DEFAULT_DIGEST_CONFIG, DigestConfig
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.entries import digest_entries
from newsflow.digest.health import FeedHealthAccumulator, summarize_feed_health
from newsflow.digest.labels import (
    _WORD_CASED,
    body_key,
    body_of_key,
    extractive_summary,
    title_entities,
    title_entity,
)
from newsflow.digest.schedule import (
    ALSO_MENTIONED,
    MORNING,
    NOTEWORTHY,
    TOP_STORIES,
    DigestSchedule,
    DigestType,
    DigestWindow,
    SectionLimits,
)
from newsflow.feeds.urls import clean_link
from newsflow.model.records import DIGEST_SCHEMA_VERSION
from newsflow.model.vocab import Disposition
from newsflow.scoring.importance import (
    COMPONENTS,
    DEFAULT_SCORE_CONFIG,
    SCORED_DISPOSITIONS,
    TIER_RANK,
    ScoreConfig,
    authority_score,
    corroboration_score,
    rescore,
    story_counts,
)
from newsflow.text.titles import short_headline
from newsflow.text.tokenize import _analyze_word, words

DUPLICATE_DISPOSITIONS = frozenset({Disposition.EXACT_DUPLICATE, Disposition.NEAR_DUPLICATE})


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
    if type(v) is float:
        return v
    return float(v) if isinstance(v, int | float) else 0.0


@dataclass(slots=True)
class _Cluster:
    members: list[int]  # indices into the sorted article list
    score: float = 0.0
    lead: int = -1
    terms: list[str] = field(default_factory=list)  # top stems
    label: tuple[str, str | None, list[str]] | None = None  # computed once (_label)
    term_hashes: list[int] = field(default_factory=list)
    stories: list[str] = field(default_factory=list)
    key: str = ""
    ranked: list[int] = field(default_factory=list)  # lead candidates, best first
    #: the stories' duplicate copies from other publishers than the lead's: (publisher, tier),
    #: one per distinct article
    copies: list[tuple[str, Any]] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Distinct articles of the topic: scored members + other outlets' copies (the one
        count behind trend sizes and "N more")."""
        return len(self.members) + len(self.copies)


#: what the digest shows of an article: taken from the ``preferred`` URL-duplicate copy
_SHOWN_FIELDS = ("title", "body_text", "url", "word_count", "_bz", "_th", "_tc")


def _preferred_copies(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """article id -> its URL-duplicate copy flagged ``preferred`` (more content; the one with
    the most words when several were)."""
    best: dict[str, Mapping[str, Any]] = {}
    for r in records:
        if r.get("disposition") == Disposition.EXACT_DUPLICATE:
            _prefer(best, r)
    return best


def _prefer(best: dict[str, Mapping[str, Any]], r: Mapping[str, Any]) -> None:
    """:func:`_preferred_copies` for one ``exact_duplicate`` record."""
    if not r.get("preferred"):
        return
    root = r.get("duplicate_of")
    if not root:
        return
    cur = best.get(root)
    k = (int(r.get("word_count") or 0), str(r.get("key") or ""))
    if cur is None or k > (int(cur.get("word_count") or 0), str(cur.get("key") or "")):
        best[root] = r


#: what assembly reads of every article, as columns (:class:`_WindowRecords`)
_COLUMNS = ("importance_components", "story_id", "_sc", "feed_id", "tier", "_th", "_tc")


@dataclass(slots=True)
class _WindowRecords:
    """The window's scored articles (one record per article id, its latest revision, shown
    with its ``preferred`` URL duplicate's fields), sorted by id, with the columns assembly
    reads of every one of them; the distinct duplicate keys; the stories' duplicate copies."""

    arts: list[Mapping[str, Any]]
    aids: list[str]  # article ids
    cols: dict[str, list[Any]]  # field (_COLUMNS) -> values, one per article (None: missing)
    duplicates: int
    copies: dict[str, list[tuple[str, Any]]]  # :func:`story_copies`

    def take(self, idx: list[int]) -> _WindowRecords:
        """The articles ``idx`` (in that order)."""
        g = idx.__iter__
        return _WindowRecords(list(map(self.arts.__getitem__, g())), list(map(self.aids.__getitem__, g())),
                              {k: list(map(v.__getitem__, g())) for k, v in self.cols.items()},
                              self.duplicates, self.copies)


def _window_records(
    records: Sequence[Mapping[str, Any]], window: DigestWindow, config: DigestConfig
) -> _WindowRecords:
    """What :func:`select_records` (before its ``adjust`` and importance cut) and
    :func:`story_copies` read of the records. Digest entries (the flow's) are read field by
    field for all records at once (:func:`_window_columns`); other records one by one."""
    fast = _window_columns(records, window, config)
    if fast is not None:
        return fast
    w = _window_pass(records, window, config, range(len(records)), scored_too=True)
    cols = {k: list(map(methodcaller("get", k), w.arts)) for k in _COLUMNS}
    return _WindowRecords(w.arts, w.aids, cols, w.duplicates, w.copies)


_ENTRY_FIELDS = {b: itemgetter("disposition", f"{b}_ms", "article_id", *_COLUMNS) for b in ("published", "fetched")}


def _window_columns(
    records: Sequence[Mapping[str, Any]], window: DigestWindow, config: DigestConfig
) -> _WindowRecords | None:
    """:func:`_window_records` when every record has every field read (digest entries): one
    pass picks them all; the scored articles are then chosen on columns (times and ids checked
    for type, collisions of ids resolved one by one), duplicates go through
    :func:`_window_pass`. None when a record lacks a field or a time is not an int."""
    basis = "fetched" if config.time_basis == "fetched" else "published"
    try:
        rows = list(map(_ENTRY_FIELDS[basis], records))
    except (KeyError, TypeError):
        return None
    n = len(rows)
    if n == 0:
        return None
    disp = list(map(itemgetter(0), rows))
    ms = list(map(itemgetter(1), rows))
    aid = list(map(itemgetter(2), rows))
    scored = np.fromiter(map(SCORED_DISPOSITIONS.__contains__, disp), bool, n)
    si = np.flatnonzero(scored)
    ms_s = ms if len(si) == n else [ms[i] for i in si.tolist()]
    if set(map(type, ms_s)) - {int}:
        return None  # a time to parse: one by one
    try:
        t = np.array(ms_s, dtype=np.int64)
    except OverflowError:
        return None
    inw = (t >= window.start_ms) & (t < window.end_ms)
    ins = si.tolist() if inw.all() else si[inw].tolist()
    ids = aid if len(ins) == n else [aid[i] for i in ins]
    if set(map(type, ids)) - {str} or not all(ids):
        return None
    first = dict(zip(ids, ins, strict=True))
    if len(first) < len(ids):  # revisions / re-emits: the latest of each id, as _window_pass
        first = {}
        for a_, i in zip(ids, ins, strict=True):
            cur = first.setdefault(a_, i)
            if cur != i and _record_key(records[i]) > _record_key(records[cur]):
                first[a_] = i
    others = np.flatnonzero(~scored).tolist()
    w = _window_pass(records, window, config, others, scored_too=False)
    aids = sorted(first)
    idx = list(map(first.__getitem__, aids))
    arts = list(map(records.__getitem__, idx))
    # the other fields of the chosen rows, in id order, as columns
    picked = list(zip(*map(rows.__getitem__, idx), strict=True))[3:] or [()] * len(_COLUMNS)
    out = {k: list(v) for k, v in zip(_COLUMNS, picked, strict=True)}
    if w.preferred:
        for j, a_ in enumerate(aids):
            p = w.preferred.get(a_)
            if p is not None:
                arts[j] = r = _shown(arts[j], p)
                for k in _COLUMNS:
                    out[k][j] = r.get(k)
    return _WindowRecords(arts, aids, out, w.duplicates, w.copies)


def _in_window(r: Mapping[str, Any], basis: str, start: int, end: int) -> bool:
    """Whether the record's time (``basis``) is in ``[start, end)``; a record without one is not."""
    try:
        t = article_time_ms(r, basis)
    except (KeyError, TypeError, ValueError):
        return False
    return start <= t < end


def _shown(r: Mapping[str, Any], p: Mapping[str, Any]) -> dict[str, Any]:
    """The article ``r`` shown with its preferred URL duplicate ``p``'s title, text and link."""
    return {**r, **{f: p.get(f) for f in _SHOWN_FIELDS if p.get(f) is not None}}


@dataclass(slots=True)
class _Pass:
    arts: list[Mapping[str, Any]]
    aids: list[str]
    duplicates: int
    copies: dict[str, list[tuple[str, Any]]]
    preferred: dict[str, Mapping[str, Any]]


def _window_pass(
    records: Sequence[Mapping[str, Any]], window: DigestWindow, config: DigestConfig,
    which: Iterable[int], *, scored_too: bool,
) -> _Pass:
    """The records ``which`` one by one, in order: the window's scored articles (with
    ``scored_too``; latest revision per id, sorted by id, preferred copies applied), the
    distinct duplicate keys, the stories' copies and the preferred URL duplicates."""
    preferred: dict[str, Mapping[str, Any]] = {}
    latest: dict[str, Mapping[str, Any]] = {}
    dup_keys: set[str] = set()
    copies: dict[str, list[tuple[str, Any]]] = {}
    copy_seen: set[str] = set()
    start, end = window.start_ms, window.end_ms
    basis = config.time_basis
    scored = SCORED_DISPOSITIONS
    for i in which:
        r = records[i]
        disp = r.get("disposition")
        if disp in scored:
            if not scored_too:
                continue
            if not _in_window(r, basis, start, end):
                continue
            aid = r.get("article_id")
            if not aid:
                continue
            if type(aid) is not str:
                aid = str(aid)
            cur = latest.setdefault(aid, r)
            if cur is not r and _record_key(r) > _record_key(cur):
                latest[aid] = r
            continue
        if disp == Disposition.EXACT_DUPLICATE:
            _prefer(preferred, r)  # whatever its time
        if disp not in DUPLICATE_DISPOSITIONS:
            continue
        if not _in_window(r, basis, start, end):
            continue
        dup_keys.add(str(r.get("key") or r.get("article_id") or ""))
        sid = r.get("story_id")
        if sid:  # the story's copies: one per distinct article
            key = str(r.get("article_id") or r.get("key") or "")
            if key not in copy_seen:
                copy_seen.add(key)
                pub = str(r.get("publisher") or r.get("feed_id") or "")
                copies.setdefault(str(sid), []).append((pub, r.get("tier")))
    aids = sorted(latest)
    arts = list(map(latest.__getitem__, aids))
    if preferred:
        for j, a in enumerate(aids):
            p = preferred.get(a)
            if p is not None:
                arts[j] = _shown(arts[j], p)
    return _Pass(arts, aids, len(dup_keys), copies, preferred)


def select_records(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    adjust: Any = None,
) -> tuple[list[Mapping[str, Any]], int, int]:
    """(articles >= min importance, sorted by id; article count; duplicates removed).

    One record per ``article_id`` (its latest revision); re-emitted keys count once;
    ``exact_duplicate``/``near_duplicate`` records are the duplicates removed. An article whose
    URL duplicate was ``preferred`` by dedup (more content) is shown with that copy's title,
    text and link. ``adjust(rec) -> rec`` (e.g. re-scoring) runs before the importance cut.
    """
    w = _window_records(records if isinstance(records, list) else list(records), window, config)
    arts = w.arts
    if adjust is not None:
        arts = [adjust(r) for r in arts]
    sel = [r for r in arts if _score(r) >= config.min_importance]
    return sel, len(arts), w.duplicates


def story_copies(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
) -> dict[str, list[tuple[str, Any]]]:
    """story id -> (publisher, tier) of the window's duplicate copies (exact and near), so a
    digest item can credit every outlet that carried the story, not only the scored ones.
    One entry per distinct article: a copy's later versions (``#rN``) are the same article."""
    return _window_records(records if isinstance(records, list) else list(records), window, config).copies


class _Selected(Sequence[Mapping[str, Any]]):
    """The window's selected articles (sorted by id), each as assembly reads it: the record
    re-scored as of the window's end (:func:`_rescorer`'s copy: new importance, components
    dropped, the story's publishers and tiers as of the end). Columns (``aids``, ``scores``,
    ``cols``, ``base``: the records before re-scoring, same ids, stories, tiers and texts)
    serve the passes over every article; a copy is made only for an article read one by one
    (leads, related items, labels), when first read."""

    __slots__ = ("_cov", "_made", "aids", "base", "cols", "scores")

    def __init__(self, w: _WindowRecords, scores: list[float],
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


def _select(
    w: _WindowRecords,
    coverage: StoryCoverage,
    end_ms: int,
    config: DigestConfig,
    score_config: ScoreConfig,
) -> _Selected:
    """:func:`select_records` with :func:`_rescorer` as ``adjust``, on columns: the same
    scores (:func:`_rescore_columns`), no record copied."""
    scores, cov = _rescore_columns(w, coverage, end_ms, score_config)
    lo = config.min_importance
    keep = np.flatnonzero(np.array(scores, dtype=np.float64) >= lo).tolist()
    if len(keep) == len(scores):
        return _Selected(w, scores, cov)
    return _Selected(w.take(keep), [scores[i] for i in keep], [cov[i] for i in keep])


#: what the digest functions take as a window's feed health: an accumulator, its summary, or
#: the window's ``feed-health`` records
FeedHealthInput = FeedHealthAccumulator | Mapping[str, Any] | Iterable[Mapping[str, Any]] | None


def assemble_digest(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    *,
    schedule: DigestSchedule | None = None,
    previous: Mapping[str, Any] | None = None,
    feed_health: FeedHealthInput = None,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    final: bool = True,
    coverage: StoryCoverage | None = None,
    score_config: ScoreConfig = DEFAULT_SCORE_CONFIG,
    as_of_ms: int | None = None,
) -> dict[str, Any]:
    """The digest of one window (a ``digests.v1`` dict). See the module doc.

    ``previous``: the previous digest of the same type (or :func:`digest_memory` of it) for
    trend flags; ``feed_health``: a :class:`FeedHealthAccumulator` (or its summary) or the
    window's ``feed-health`` records. ``coverage``: the stories' publishers/tiers over time and
    the feeds' reliability (the flow keeps one across windows); scores are recomputed from it
    as of the window's end (:func:`rescore_as_of`) with ``score_config`` (the flow's scoring
    configuration). Default: built from ``records``.

    ``generated_at`` is the window end, except for a non-final digest given ``as_of_ms`` (the
    event time the flow had reached, e.g. its watermark at the end of a finite input): then it
    is that time, clamped to the window, so a partial digest does not claim a time after its
    last data (and a reader can say "as of ..."). Ignored for a final digest.

    The cyclic garbage collector is paused while assembling (:func:`_gc_paused`).
    """
    return apply_trends(draft_digest(records, window, schedule=schedule, feed_health=feed_health,
                                     config=config, final=final, coverage=coverage,
                                     score_config=score_config, as_of_ms=as_of_ms),
                        previous, config)


def draft_digest(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    *,
    schedule: DigestSchedule | None = None,
    feed_health: FeedHealthInput = None,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    final: bool = True,
    coverage: StoryCoverage | None = None,
    score_config: ScoreConfig = DEFAULT_SCORE_CONFIG,
    as_of_ms: int | None = None,
) -> DigestDraft:
    """Everything of :func:`assemble_digest` that does not depend on the previous window:
    selection, scores, topics, labels, items, sections, topic index and checks, with every
    trend flag unset. :func:`apply_trends` then compares it with the previous window of its
    type. The draft of a window can be assembled anywhere, before the previous window's
    digest exists; only :func:`apply_trends` runs in window order."""
    with _gc_paused():
        d, candidates = _assemble(records, window, schedule, feed_health, config, final, coverage,
                                  score_config)
    if not final and as_of_ms is not None:
        d["generated_at"] = ms_to_iso(min(max(as_of_ms, window.start_ms), window.end_ms))
    return DigestDraft(d, candidates)


@dataclass(frozen=True, slots=True)
class TrendCandidate:
    """What trend matching reads of one topic of a window: its key, size (articles and other
    outlets' copies), every story id and its top-5 term hashes (:func:`_match_prev`)."""

    key: str
    size: int
    stories: tuple[str, ...]
    term_hashes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DigestDraft:
    """A window's digest without trend flags (:func:`draft_digest`) and the topics that can
    carry one: the multi-article ones and every one shown, in rank order."""

    digest: dict[str, Any]
    candidates: tuple[TrendCandidate, ...]


_NO_PREVIOUS_CHECK = {"check": "trends", "ok": True, "action": "no previous window: no trend flags"}
_GAP_CHECK = {"check": "trends", "ok": True,
              "action": "no poll in this window (a gap in the data): no declining topics"}


def apply_trends(draft: DigestDraft, previous: Mapping[str, Any] | None,
                 config: DigestConfig = DEFAULT_DIGEST_CONFIG) -> dict[str, Any]:
    """The digest of a draft against ``previous`` (the previous digest of its type, or its
    :func:`digest_memory`; None: there is none): each item's and index topic's trend
    (EMERGING / TRENDING / FADING), the emerging and declining topics of the health block, and
    the trend checks. Returns the draft's dict, completed (a draft is finalized once)."""
    d = draft.digest
    checks = d["self_checks"]
    if previous is None:
        checks.insert(0, dict(_NO_PREVIOUS_CHECK))
        return d
    prev_index = list(previous.get("topic_index") or [])
    trends = _trends(draft.candidates, prev_index, config)
    for section in d["sections"]:
        for item in section["items"]:
            item["trend"] = trends.get(item["topic_key"])
    index = d["topic_index"]
    for t in index:
        t["trend"] = trends.get(t["key"])
    health = d["feed_health"]
    gap = _no_polls(health) and d["article_count"] == 0
    # a name once: two topics may share a label ("TV Patrol North Luzon", two days' uploads)
    health["emerging_topics"] = list(dict.fromkeys(t["label"] for t in index if t["trend"] == "EMERGING"))[:10]
    if gap:
        checks.append(dict(_GAP_CHECK))
    else:
        health["declining_topics"] = list(dict.fromkeys(_declining(prev_index, draft.candidates, config)))[:10]
    return d


_GC_LOCK = threading.Lock()
_GC_PAUSES = [0]  # assemblies running; the one that paused a running collector resumes it
_GC_RESUME = [False]


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection during an assembly (thread-safe; re-entrant).

    Assembly allocates ~10 container objects per article (columns, the TF-IDF rows' bytes,
    labels' tuples) that die before it returns, and creates no reference cycles of note; with
    the collector running, the ones alive during young collections were promoted, and a
    weekly window of 100k articles triggered 2-3 full collections, each walking every object
    the process keeps (all the windows' entries): 1.4-1.7 s of a 3 s assembly here. Paused,
    they die by reference counting before any collection sees them. Outputs do not depend on
    it."""
    with _GC_LOCK:
        if _GC_PAUSES[0] == 0:
            _GC_RESUME[0] = gc.isenabled()
            gc.disable()
        _GC_PAUSES[0] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSES[0] -= 1
            if _GC_PAUSES[0] == 0 and _GC_RESUME[0]:
                gc.enable()


def _assemble(
    records: Iterable[Mapping[str, Any]],
    window: DigestWindow,
    schedule: DigestSchedule | None,
    feed_health: FeedHealthInput,
    config: DigestConfig,
    final: bool,
    coverage: StoryCoverage | None,
    score_config: ScoreConfig,
) -> tuple[dict[str, Any], tuple[TrendCandidate, ...]]:
    sched = schedule or DigestSchedule()
    dtype = (
        sched.type(window.digest_type)
        if _known(sched, window.digest_type)
        else _fallback_type(window.digest_type)
    )
    limits = config.limits or dtype.limits
    wr = config.summary_words or dtype.summary_words
    records = records if isinstance(records, list) else list(records)
    if coverage is None:
        coverage = StoryCoverage().extend(records)
    # analyzed once (the flow keeps entries: no text is analyzed again per window)
    records = digest_entries(records, title_weight=config.title_weight, body_words=config.body_words)
    # one pass over the records; the selection re-scored as of the end on columns (the same
    # scores as select_records(..., adjust=_rescorer(...)), no record copied)
    wrecs = _window_records(records, window, config)
    article_count, dups, copies = len(wrecs.arts), wrecs.duplicates, wrecs.copies
    sel = _select(wrecs, coverage, window.end_ms, config, score_config)

    clusters: list[_Cluster] = []
    X = None
    vocab = np.zeros(0, np.uint64)
    if sel:
        X, vocab = tfidf_from_counts(sel.cols["_th"], sel.cols["_tc"])
        labels = cluster_articles(X, sel.base, config,
                                  groups=story_groups_of(sel.cols["story_id"], sel.aids))
        clusters = _build_clusters(sel, X, vocab, labels)
        for c in clusters:
            c.copies = _cluster_copies(c, sel, copies)
        _topic_corroboration(clusters, sel, coverage, window.end_ms, score_config)

    checks: list[dict[str, Any]] = []  # (apply_trends adds the trend checks)
    # rank: best score, then size, then the fresher lead (most new articles score recency 100:
    # equal scores are common), then the lead's id
    clusters.sort(key=lambda c: (-c.score, -c.size, -article_time_ms(sel.base[c.lead]),
                                 sel.base[c.lead]["article_id"]))
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

    # a singleton can only be FADING and only matters when shown: trends for multi-article
    # topics (index, emerging list) and for everything that can be displayed
    shown = {c.key for items in sections_items.values() for c in items[: _cap(limits)]}
    candidates = tuple(TrendCandidate(c.key, c.size, tuple(c.stories), tuple(c.term_hashes[:5]))
                       for c in clusters if c.size >= 2 or c.key in shown)
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
        rendered: list[dict[str, Any]] = []
        for c in sections_items[name]:
            fixed, missing = _ensure_attribution(c, sel)
            attribution_fixes += fixed
            missing_attr += missing
            item = _item(c, sel, wr, config)
            label = item["label"]
            n = used_labels.get(label.lower(), 0)
            used_labels[label.lower()] = n + 1
            if n:  # re-label duplicates with the lead's publisher
                item["label"] = f"{label} ({item['lead']['publisher']})"
            rendered.append(item)
        section: dict[str, Any] = {"name": name, "items": rendered}
        if not rendered:
            section["empty_reason"] = empty_reason(name, [c.score for c in clusters], article_count, config)
        sections.append(section)
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

    index = _topic_index(clusters, sel, config)
    health = _health_block(feed_health)
    # (filled by apply_trends)
    health.update({"new_articles": article_count, "duplicates_removed": dups,
                   "emerging_topics": [], "declining_topics": []})
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
    }, candidates


def empty_reason(section: str, scores: Sequence[float], article_count: int, config: DigestConfig) -> str:
    """Why ``section`` of a digest is empty, for the reader.

    >>> empty_reason("Top Stories", [68.2, 41.0], 12, DigestConfig())
    'no story reached importance 70 yet (the best: 68)'
    >>> empty_reason("Noteworthy", [], 0, DigestConfig())
    'no article in this window yet'
    """
    if article_count == 0:
        return "no article in this window yet"
    floor, ceiling = {TOP_STORIES: (config.top_threshold, None),
                      NOTEWORTHY: (config.noteworthy_threshold, config.top_threshold),
                      ALSO_MENTIONED: (config.min_importance, config.noteworthy_threshold)}.get(
        section, (config.min_importance, None))
    below = [s for s in scores if ceiling is None or s < ceiling]
    best = f" (the best: {max(below):.0f})" if below else ""
    other = "" if ceiling is None else " other"
    return f"no{other} story reached importance {floor:g} yet{best}"


def _cap(limits: SectionLimits) -> int:
    return max(limits.top, limits.noteworthy, limits.also) + 1  # +1: the T5 re-rank


def _known(schedule: DigestSchedule, name: str) -> bool:
    return any(t.name == name for t in schedule.types)


def _fallback_type(name: str) -> DigestType:
    return DigestType(name, name.replace("_", " ").title(), "rolling", MORNING.limits)


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


def _build_clusters(
    sel: _Selected, X: sp.csr_matrix, vocab: np.ndarray, labels: np.ndarray
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
    score_l = sel.scores
    scores = np.array(score_l, dtype=np.float64)
    # lead: closest to the centroid, then importance, then tier, then id (``sel`` is sorted by
    # id: the index is the id's rank); one stable lexsort for all clusters
    near = np.array(_py_round(sims, 9))
    tiers = np.fromiter(map(TIER_RANK.get, sel.cols["tier"], itertools.repeat(6)), np.int64, n)
    order = np.lexsort((np.arange(n), tiers, -scores, -near, cid))
    bounds = np.searchsorted(cid[order], np.arange(m + 1))
    order_l, bounds_l = order.tolist(), bounds.tolist()
    # members in id order: one stable sort by cluster
    by_id = np.argsort(cid, kind="stable")
    by_id_l = by_id.tolist()
    cmax = _cluster_max(scores, score_l, bounds_l, by_id_l)
    stories = _cluster_stories(sel.cols["story_id"], cid, m)
    aids = sel.aids
    out = []
    for c in range(m):
        b0, b1 = bounds_l[c], bounds_l[c + 1]
        ranked = order_l[b0:b1]
        mem = by_id_l[b0:b1]
        cl = _Cluster(mem)
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




def _topic_corroboration(clusters: list[_Cluster], sel: _Selected, coverage: StoryCoverage, end_ms: int,
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
            imp = rescore(rec, publishers=len(pubs), tiers=len(tiers),
                          reliability=coverage.reliability_of(rec.get("feed_id"), end_ms), config=cfg)
            if imp is not None and imp.score > best:
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


def _cluster_stories(sids: Sequence[Any], cid: np.ndarray, m: int) -> list[list[str]]:
    """Per cluster, the sorted distinct story ids (as strings) of its members."""
    out: list[list[str]] = [[] for _ in range(m)]
    if set(map(type, sids)) == {str} and all(sids):  # the usual case: every article has a story
        names = sorted(set(sids))
        code = {k: j for j, k in enumerate(names)}  # codes in string order
        codes = np.fromiter(map(code.__getitem__, sids), np.int64, len(sids))
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


@functools.lru_cache(maxsize=1 << 15)
def _title_words(title: str) -> tuple[tuple[int, str, int, str], ...]:
    """(position, stem, stem hash, surface word) of each analysable word of a title, in order
    (memoized: a title is read again by every window and label it is in)."""
    out = []
    for pos, w in enumerate(_WORD_CASED.findall(title)):
        a = _analyze_word(w.lower())
        if a is not None:
            out.append((pos, a[0], a[1], w))
    return tuple(out)


@functools.lru_cache(maxsize=1 << 12)
def _text_stems(title: str, body: str | bytes, body_words: int = 100) -> dict[int, str]:
    """stem hash -> stem of the words of a title and the first ``body_words`` words of its
    body (``body``: :func:`newsflow.digest.labels.body_key`). Memoized per article; callers
    must not modify the returned dict."""
    text = title + " " + " ".join(body_of_key(body).split()[:body_words])
    out: dict[int, str] = {}
    for w in _WORD_CASED.findall(text):
        a = _analyze_word(w.lower())
        if a is not None:
            out[a[1]] = a[0]
    return out


def _surface(forms: Counter[str]) -> str:
    """The most frequent lower-cased word of a stem, shown in its most frequent spelling
    ("iPhone")."""
    low: Counter[str] = Counter()
    for w, n in forms.items():
        low[w.lower()] += n
    word = sorted(low.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    best = sorted(
        ((w, n) for w, n in forms.items() if w.lower() == word),
        key=lambda kv: (-kv[1], kv[0].istitle(), kv[0]),
    )
    return best[0][0]


#: labels by the texts they read (:class:`~newsflow.core.memo.BoundedMemo`). Digest windows
#: overlap (rolling, morning, midday, evening, weekly): the same story, with the same lead and
#: members, is labelled again in every window that shows it. A label depends only on the texts of the
#: articles it reads and a few small arguments, so it is computed once per distinct input, keyed
#: by a 128-bit xxh3 digest of those texts (never ``hash()``).
_LABELS = BoundedMemo(1 << 14)
_U32 = struct.Struct("<I")


def clear_memos() -> None:
    """Empty the text memos (labels, title words, stem maps, entities, summary sentences):
    for cold-cache measurements and tests; outputs never depend on them."""
    from newsflow.digest import labels

    _LABELS.data.clear()
    for f in (_title_words, _text_stems, labels._entities_keyed, labels._title_entities,
              labels._summary_sentences, labels._entities_text, labels._spaced_words):
        f.cache_clear()


def _texts_key(members: Iterable[Mapping[str, Any]]) -> bytes:
    """128-bit digest of what text computations read of the records: title and body (an
    entry's compressed body bytes, or a record's ``body_text``), length-prefixed."""
    h = xxhash.xxh3_128()
    for r in members:
        t = (r.get("title") or "").encode("utf-8", "surrogatepass")
        b = r.get("body_text")
        body = b"s" + str(b).encode("utf-8", "surrogatepass") if b is not None else b"z" + (r.get("_bz") or b"")
        h.update(_U32.pack(len(t)))
        h.update(t)
        h.update(_U32.pack(len(body)))
        h.update(body)
    return h.digest()


def _label(c: _Cluster, sel: Sequence[Mapping[str, Any]]) -> tuple[str, str | None, list[str]]:
    if c.label is None:
        key = (_texts_key([sel[i] for i in c.ranked[:20]]), tuple(c.term_hashes),
               sel[c.lead].get("title") or "")
        label, ent, terms = _LABELS.get(key, lambda: _frozen_label(c, sel))
        c.label = (label, ent, list(terms))
    return c.label


def _frozen_label(c: _Cluster, sel: Sequence[Mapping[str, Any]]) -> tuple[str, str | None, tuple[str, ...]]:
    label, ent, terms = _make_label(c, sel)
    return label, ent, tuple(terms)


def _key_stems(c: _Cluster, sel: Sequence[Mapping[str, Any]]) -> list[str]:
    """The topic's top stems (for the summary), from the titles and bodies of its lead and the
    members closest to the centroid."""
    members = c.ranked[:20]
    maps: list[dict[int, str]] = []  # read as far as needed (most stems are the lead's)
    out: list[str] = []
    for h in c.term_hashes:
        k = 0
        while k < len(members):
            if k == len(maps):
                r = sel[members[k]]
                maps.append(_text_stems(r.get("title") or "", body_key(r)))
            st = maps[k].get(h)
            if st is not None:  # a hash is the hash of one stem
                out.append(st)
                break
            k += 1
        if len(out) == 5:
            break
    return out


def _summary(lead: Mapping[str, Any], terms: Sequence[str], wr: tuple[int, int]) -> str:
    """:func:`extractive_summary` of the lead (its sentences are memoized per article)."""
    return extractive_summary(lead, terms, wr)


def _make_label(c: _Cluster, sel: Sequence[Mapping[str, Any]]) -> tuple[str, str | None, list[str]]:
    """000 Step 5 "[Entity]: top terms", readable: the entity is the story's most frequent
    named entity in its titles; the label's words are the lead's headline, shortened (first
    clause, or 14 words and "…"), after "[Entity]: " when the headline does not name the
    entity. The item's ``terms`` are the topic's top TF-IDF terms that its titles use, as the
    words a reader saw (not stems), in headline order. (Top terms strung together read as word
    salad: "meat mental Hotline"; a headline never does.)"""
    # the lead and the members closest to the centroid speak for the topic
    members = [sel[i] for i in c.ranked[:20]]
    t_stem_of: dict[int, str] = {}
    t_forms: dict[str, list[str]] = {}  # (counted only for the few stems picked)
    t_first: dict[str, tuple[int, int]] = {}
    for m, r in enumerate(members):
        for pos, st, h, w in _title_words(r.get("title") or ""):
            t_stem_of[h] = st
            forms = t_forms.get(st)
            if forms is None:
                t_forms[st] = [w]
                t_first[st] = (m, pos)
            else:
                forms.append(w)
    ent = title_entity(members)
    # names are entities, not terms: no word of any title entity is a term
    names = " ".join(e for r in members for e in title_entities(r).values())
    ent_stems = {a[0] for w in words(f"{ent or ''} {names}") if (a := _analyze_word(w)) is not None}
    picked: list[str] = []
    for h in c.term_hashes:
        hit = t_stem_of.get(h)
        if hit is None or hit in ent_stems or hit.isdigit() or hit in picked:
            continue
        picked.append(hit)
        if len(picked) == 3:
            break
    picked.sort(key=lambda st: t_first[st])
    terms = [_surface(Counter(t_forms[st])) for st in picked]
    # the words a reader reads best are a headline's: the lead's, shortened, after the entity
    # when it does not name it ("White House: US looks at winding down virus task force")
    title = sel[c.lead].get("title") or ""
    head = short_headline(title, max_words=14)
    if ent and head and f" {' '.join(words(ent))} " not in f" {' '.join(words(title))} ":
        label = f"{ent}: {head}"
    else:
        label = head or ent or "Untitled"
    return label, ent, terms


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


def _rescorer_parts(coverage: StoryCoverage, end_ms: int, cfg: ScoreConfig) -> _RescorerParts:
    return _RescorerParts(coverage, end_ms, cfg)


def _rescorer(coverage: StoryCoverage, end_ms: int, cfg: ScoreConfig = DEFAULT_SCORE_CONFIG) -> Any:
    """:func:`rescore_as_of` for the many records of one window, the same score (same float
    operations in the same order as :func:`newsflow.scoring.importance.rescore`) at a fraction
    of the cost: each story's coverage, each feed's reliability and each (tier, reliability)
    authority looked up once; the record's components are not re-emitted (assembly reads the
    score only), so the returned copy drops them rather than keep stale ones."""
    _, w1, _, w3, w4 = cfg.weights
    nd = cfg.ndigits
    assert COMPONENTS == ("authority", "recency", "corroboration", "relevance", "depth")
    part = _rescorer_parts(coverage, end_ms, cfg)
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
    w: _WindowRecords, coverage: StoryCoverage, end_ms: int,
    cfg: ScoreConfig = DEFAULT_SCORE_CONFIG,
) -> tuple[list[float], list[tuple[list[str], list[str]] | None]]:
    """Per article: (its score as of ``end_ms``, its story's (publishers, tiers) as of then, or
    None when it is not re-scored), the very floats of :func:`_rescorer` (its importance or,
    without components, :func:`_score`), computed on columns: per story and per feed once,
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
        scores.append(_score(a))
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
    w: _WindowRecords, coverage: StoryCoverage, end_ms: int, cfg: ScoreConfig,
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
    part = _rescorer_parts(coverage, end_ms, cfg)
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
    scores = _py_round(x, cfg.ndigits)
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


def _py_round(x: np.ndarray, nd: int) -> list[float]:
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


def _cluster_copies(
    c: _Cluster, sel: Sequence[Mapping[str, Any]], copies: Mapping[str, Sequence[tuple[str, Any]]]
) -> list[tuple[str, Any]]:
    # the stories' duplicate copies (syndication, near-duplicates) are related coverage too
    # (copies from the lead's own publisher add no coverage: left out)
    lead = sel[c.lead]
    lead_pub = str(lead.get("publisher") or lead.get("feed_id") or "")
    return [pt for sid in c.stories for pt in copies.get(sid, ()) if pt[0] != lead_pub]


def _item(
    c: _Cluster,
    sel: _Selected,
    wr: tuple[int, int],
    config: DigestConfig,
) -> dict[str, Any]:
    lead = sel[c.lead]
    label, ent, terms = _label(c, sel)
    others = [i for i in c.members if i != c.lead]
    # the members' scores, tiers, ids, publishers from the columns (a topic may hold thousands)
    sc, bs = sel.scores, sel.base
    others.sort(key=lambda i: (-sc[i], _tier_rank(bs[i].get("tier")), bs[i]["article_id"]))
    pubs: dict[str, int] = {}
    for i in others:
        r = bs[i]
        p = str(r.get("publisher") or r.get("feed_id") or "")
        if p:
            pubs[p] = min(pubs.get(p, 9), _tier_rank(r.get("tier")))
    extra = c.copies
    for p, tier in extra:
        if p:
            pubs[p] = min(pubs.get(p, 9), _tier_rank(tier))
    related_sources = [p for p, _ in sorted(pubs.items(), key=lambda kv: (kv[1], kv[0]))]
    c.terms = _key_stems(c, sel)
    summary = _summary(lead, c.terms, wr)
    return {
        "label": label,
        "trend": None,  # (apply_trends)
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
                "url": clean_link(sel[i].get("url")),
                "score": _score(sel[i]),
            }
            for i in others[: config.related_max]
        ],
        "article_ids": [lead["article_id"], *(sel[i]["article_id"] for i in others)][
            : config.article_ids_max
        ],
        "story_ids": c.stories[:20],
        "size": c.size,
        "topic_key": c.key,
    }


def _lead(r: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "article_id": r["article_id"],
        "title": r.get("title") or "",
        "url": clean_link(r.get("url")),
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
    c: TrendCandidate, terms: Sequence[int], prev: _PrevTopics | Sequence[Mapping[str, Any]]
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
    clusters: Sequence[TrendCandidate], prev_index: Sequence[Mapping[str, Any]], config: DigestConfig
) -> dict[str, str | None]:
    prev = _PrevTopics(prev_index)
    return {
        c.key: _trend_of(c.size, _match_prev(c, c.term_hashes, prev), config)
        for c in clusters
    }


def _index_order(clusters: Sequence[_Cluster]) -> list[_Cluster]:
    multi = [c for c in clusters if c.size >= 2]
    return sorted(multi, key=lambda c: (-c.size, -c.score, c.key))


def _topic_index(
    clusters: Sequence[_Cluster],
    sel: Sequence[Mapping[str, Any]],
    config: DigestConfig,
) -> list[dict[str, Any]]:
    """Compact description of the window's multi-article topics, for the next window's trend
    flags (matching by story ids and top terms)."""
    out = []
    for c in _index_order(clusters)[: config.topic_index_size]:
        out.append(
            {
                "key": c.key,
                "label": _label(c, sel)[0],  # the item's own readable label, never cut mid-phrase
                "size": c.size,
                "score": c.score,
                "trend": None,  # (apply_trends)
                "term_hashes": [str(h) for h in c.term_hashes[:5]],
                "story_ids": c.stories[:20],
            }
        )
    return out


def _declining(
    prev_index: Sequence[Mapping[str, Any]],
    clusters: Sequence[TrendCandidate],
    config: DigestConfig,
) -> list[str]:
    """Labels of previous topics that shrank by 50 %+ (or disappeared)."""
    cur_by_prev: dict[str, int] = {}
    prev = _PrevTopics(prev_index)
    for c in clusters:
        if c.size < 2:  # 1 article is a 50 %+ drop from any previous topic (>= 2)
            continue
        p = _match_prev(c, c.term_hashes, prev)
        if p is not None:
            k = str(p.get("key"))
            cur_by_prev[k] = cur_by_prev.get(k, 0) + c.size
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


def _no_polls(health: Mapping[str, Any] | None) -> bool:
    return isinstance(health, Mapping) and health.get("polls") == 0


def next_memory(previous: Mapping[str, Any] | None, d: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``previous`` for the window after ``d``: ``d``'s :func:`digest_memory`, except when
    ``d``'s window saw no poll and no article (a gap in the data, e.g. an archive that was not
    polled for a day, or a poller that was down): then the last window that had data stays the
    one to compare with, so the news after a gap is not all "EMERGING" against nothing."""
    if d.get("article_count") == 0 and _no_polls(d.get("feed_health")):
        return previous
    return digest_memory(d)


def digest_key(d: Mapping[str, Any]) -> bytes:
    """Kafka key of a digest: ``digest_type:window_start`` (re-emits are idempotent)."""
    return str(d["digest_id"]).encode()
