"""Trend flags (pure): a window's topics against the previous window of its type (EMERGING /
TRENDING / FADING, declining topics), and what a digest keeps for the next window."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from newsflow.digest.config import DEFAULT_DIGEST_CONFIG, DigestConfig
from newsflow.digest.record import Check, Digest, DigestMemory, FeedHealth, IndexTopic, Previous
from newsflow.model.vocab import Trend


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
    """A window's digest without trend flags (:func:`~newsflow.digest.assemble.draft_digest`) and the topics that can
    carry one: the multi-article ones and every one shown, in rank order."""

    digest: Digest
    candidates: tuple[TrendCandidate, ...]


_NO_PREVIOUS_CHECK: Check = {"check": "trends", "ok": True, "action": "no previous window: no trend flags"}


_GAP_CHECK: Check = {"check": "trends", "ok": True,
              "action": "no poll in this window (a gap in the data): no declining topics"}


def apply_trends(draft: DigestDraft, previous: Previous | None,
                 config: DigestConfig = DEFAULT_DIGEST_CONFIG) -> Digest:
    """The digest of a draft against ``previous`` (the previous digest of its type, or its
    :func:`digest_memory`; None: there is none): each item's and index topic's trend
    (EMERGING / TRENDING / FADING), the emerging and declining topics of the health block, and
    the trend checks. Returns the draft's dict, completed (a draft is finalized once)."""
    d = draft.digest
    checks = d["self_checks"]
    if previous is None:
        checks.insert(0, _NO_PREVIOUS_CHECK.copy())
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
    health["emerging_topics"] = list(dict.fromkeys(t["label"] for t in index if t["trend"] == Trend.EMERGING))[:10]
    if gap:
        checks.append(_GAP_CHECK.copy())
    else:
        health["declining_topics"] = list(dict.fromkeys(_declining(prev_index, draft.candidates, config)))[:10]
    return d


class _PrevTopics:
    """The previous window's topic index, parsed once, with inverted indexes by story id and
    top-term hash (so matching a cluster looks only at topics sharing something with it)."""

    def __init__(self, prev_index: Sequence[IndexTopic]) -> None:
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
    c: TrendCandidate, terms: Sequence[int], prev: _PrevTopics | Sequence[IndexTopic]
) -> IndexTopic | None:
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
    best: tuple[tuple[float, float, int, str], IndexTopic] | None = None
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


def _trend_of(size: int, prev: IndexTopic | None, config: DigestConfig) -> Trend | None:
    if prev is None:
        return Trend.EMERGING if size >= config.emerging_min else None
    ps = int(prev.get("size") or 0)
    if ps <= 0:
        return Trend.EMERGING if size >= config.emerging_min else None
    if size >= ps * (1 + config.trend_change) and size >= 2:
        return Trend.TRENDING
    if ps >= 2 and size <= ps * (1 - config.trend_change):
        return Trend.FADING
    return None


def _trends(
    clusters: Sequence[TrendCandidate], prev_index: Sequence[IndexTopic], config: DigestConfig
) -> dict[str, Trend | None]:
    prev = _PrevTopics(prev_index)
    return {
        c.key: _trend_of(c.size, _match_prev(c, c.term_hashes, prev), config)
        for c in clusters
    }


def _declining(
    prev_index: Sequence[IndexTopic],
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


def digest_memory(d: Previous) -> DigestMemory:
    """What to keep of a digest as ``previous`` for the next window of its type (small)."""
    return {
        "digest_id": d.get("digest_id"),
        "window_end": d.get("window_end"),
        "topic_index": list(d.get("topic_index") or []),
    }


def _no_polls(health: FeedHealth | None) -> bool:
    return isinstance(health, Mapping) and health.get("polls") == 0


def next_memory(previous: Previous | None, d: Digest) -> Previous | None:
    """The ``previous`` for the window after ``d``: ``d``'s :func:`digest_memory`, except when
    ``d``'s window saw no poll and no article (a gap in the data, e.g. an archive that was not
    polled for a day, or a poller that was down): then the last window that had data stays the
    one to compare with, so the news after a gap is not all "EMERGING" against nothing."""
    if d.get("article_count") == 0 and _no_polls(d.get("feed_health")):
        return previous
    return digest_memory(d)
