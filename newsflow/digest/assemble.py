"""One event-time window's records -> a ``digests.v1`` dict (pure).

:func:`assemble_digest`: importance >= 15; topics by DBSCAN (cosine, eps 0.4) or Ward
(:mod:`newsflow.clustering.window`); labels = the lead headline, after "[Entity]: " when it
does not name the story's entity (``entity`` and top ``terms`` as fields); lead = closest to
the centroid, then importance, then tier; trends vs the previous window (EMERGING / TRENDING /
FADING); Top Stories (>= 70), Noteworthy (40-69), Also Mentioned (15-39), Feed Health Report;
sizing limits per type; extractive summaries; the self-checks (re-rank, re-label, trim).

The steps, one module each: :mod:`~newsflow.digest.selection` (the window's articles),
:mod:`~newsflow.digest.rescore` (their scores as of the window's end),
:mod:`~newsflow.digest.topics` (clusters, leads, topic scores), :mod:`~newsflow.digest.labels`
(labels, terms, summaries), :mod:`~newsflow.digest.sections` (items, sections, self-checks,
topic index), :mod:`~newsflow.digest.trends` (flags against the previous window).

Deterministic: records are de-duplicated and sorted by a stable key first, so the same input in
any order gives byte-identical ``orjson.dumps`` output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

import numpy as np

from newsflow.clustering.window import cluster_articles, story_groups_of, tfidf_from_counts
from newsflow.core.gctune import gc_paused
from newsflow.core.timeutil import ms_to_iso
from newsflow.digest.config import DEFAULT_DIGEST_CONFIG, DigestConfig
from newsflow.digest.coverage import CoverageAsOf, StoryCoverage
from newsflow.digest.entries import DigestEntry, DigestInput, digest_entries
from newsflow.digest.health import FeedHealthAccumulator, summarize_feed_health
from newsflow.digest.record import Check, Digest, FeedHealth, Item, Previous, Section
from newsflow.digest.rescore import select_rescored
from newsflow.digest.schedule import (
    ALSO_MENTIONED,
    MORNING,
    NOTEWORTHY,
    TOP_STORIES,
    DigestSchedule,
    DigestType,
    DigestWindow,
)
from newsflow.digest.sections import (
    check_t5_top,
    empty_reason,
    ensure_attribution,
    sections_sorted,
    shown_cap,
    topic_index,
    topic_item,
)
from newsflow.digest.selection import (
    article_time_ms,
    window_records,
)
from newsflow.digest.topics import Cluster, build_clusters, cluster_copies, topic_corroboration
from newsflow.digest.trends import (
    DigestDraft,
    TrendCandidate,
    apply_trends,
)
from newsflow.model.records import DIGEST_SCHEMA_VERSION
from newsflow.scoring.importance import (
    DEFAULT_SCORE_CONFIG,
    ScoreConfig,
)

#: what the digest functions take as a window's feed health: an accumulator, its summary, or
#: the window's ``feed-health`` records
FeedHealthInput = FeedHealthAccumulator | FeedHealth | Iterable[Mapping[str, object]] | None


def assemble_digest(
    records: Iterable[DigestInput],
    window: DigestWindow,
    *,
    schedule: DigestSchedule | None = None,
    previous: Previous | None = None,
    feed_health: FeedHealthInput = None,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    final: bool = True,
    coverage: CoverageAsOf | None = None,
    score_config: ScoreConfig = DEFAULT_SCORE_CONFIG,
    as_of_ms: int | None = None,
) -> Digest:
    """The digest of one window (a ``digests.v1`` dict). See the module doc.

    ``previous``: the previous digest of the same type (or :func:`~newsflow.digest.trends.digest_memory` of it) for
    trend flags; ``feed_health``: a :class:`FeedHealthAccumulator` (or its summary) or the
    window's ``feed-health`` records. ``coverage``: the stories' publishers/tiers over time and
    the feeds' reliability (the flow keeps one across windows); scores are recomputed from it
    as of the window's end (:func:`~newsflow.digest.rescore.select_rescored`) with ``score_config`` (the flow's scoring
    configuration). Default: built from ``records``.

    ``generated_at`` is the window end, except for a non-final digest given ``as_of_ms`` (the
    event time the flow had reached, e.g. its watermark at the end of a finite input): then it
    is that time, clamped to the window, so a partial digest does not claim a time after its
    last data (and a reader can say "as of ..."). Ignored for a final digest.

    The cyclic garbage collector is paused while assembling (:func:`~newsflow.core.gctune.gc_paused`).
    """
    return apply_trends(draft_digest(records, window, schedule=schedule, feed_health=feed_health,
                                     config=config, final=final, coverage=coverage,
                                     score_config=score_config, as_of_ms=as_of_ms),
                        previous, config)


def draft_digest(
    records: Iterable[DigestInput],
    window: DigestWindow,
    *,
    schedule: DigestSchedule | None = None,
    feed_health: FeedHealthInput = None,
    config: DigestConfig = DEFAULT_DIGEST_CONFIG,
    final: bool = True,
    coverage: CoverageAsOf | None = None,
    score_config: ScoreConfig = DEFAULT_SCORE_CONFIG,
    as_of_ms: int | None = None,
) -> DigestDraft:
    """Everything of :func:`assemble_digest` that does not depend on the previous window:
    selection, scores, topics, labels, items, sections, topic index and checks, with every
    trend flag unset. :func:`~newsflow.digest.trends.apply_trends` then compares it with the previous window of its
    type. The draft of a window can be assembled anywhere, before the previous window's
    digest exists; only :func:`~newsflow.digest.trends.apply_trends` runs in window order."""
    with gc_paused():
        d, candidates = _assemble(records, window, schedule, feed_health, config, final, coverage,
                                  score_config)
    if not final and as_of_ms is not None:
        d["generated_at"] = ms_to_iso(min(max(as_of_ms, window.start_ms), window.end_ms))
    return DigestDraft(d, candidates)


def _assemble(
    records: Iterable[DigestInput],
    window: DigestWindow,
    schedule: DigestSchedule | None,
    feed_health: FeedHealthInput,
    config: DigestConfig,
    final: bool,
    coverage: CoverageAsOf | None,
    score_config: ScoreConfig,
) -> tuple[Digest, tuple[TrendCandidate, ...]]:
    sched = schedule or DigestSchedule()
    dtype = (
        sched.type(window.digest_type)
        if _known(sched, window.digest_type)
        else _fallback_type(window.digest_type)
    )
    limits = config.limits or dtype.limits
    wr = config.summary_words or dtype.summary_words
    given = records if isinstance(records, list) else list(records)
    if coverage is None:
        coverage = StoryCoverage().extend(r.coverage_record() if isinstance(r, DigestEntry) else r for r in given)
    # analyzed once (the flow keeps entries: no text is analyzed again per window)
    entries = digest_entries(given, title_weight=config.title_weight, body_words=config.body_words)
    # one pass over the entries; the selection re-scored as of the end on columns (the same
    # scores as newsflow.scoring.importance.rescore_components, no entry copied)
    wrecs = window_records(entries, window, config)
    article_count, dups, copies = len(wrecs.arts), wrecs.duplicates, wrecs.copies
    sel = select_rescored(wrecs, coverage, window.end_ms, config, score_config)

    clusters: list[Cluster] = []
    X = None
    vocab = np.zeros(0, np.uint64)
    if sel:
        X, vocab = tfidf_from_counts(sel.cols.term_hashes, sel.cols.term_counts)
        labels = cluster_articles(X, sel.base, config,
                                  groups=story_groups_of(sel.cols.story_id, sel.aids))
        clusters = build_clusters(sel, X, vocab, labels)
        for c in clusters:
            c.copies = cluster_copies(c, sel.base, copies)
        topic_corroboration(clusters, sel, coverage, window.end_ms, score_config)

    checks: list[Check] = []  # (apply_trends adds the trend checks)
    # rank: best score, then size, then the fresher lead (most new articles score recency 100:
    # equal scores are common), then the lead's id
    clusters.sort(key=lambda c: (-c.score, -c.size, -article_time_ms(sel.base[c.lead]),
                                 sel.base[c.lead].article_id))
    sections_items: dict[str, list[Cluster]] = {
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
    shown = {c.key for items in sections_items.values() for c in items[: shown_cap(limits)]}
    candidates = tuple(TrendCandidate(c.key, c.size, tuple(c.stories), tuple(c.term_hashes[:5]))
                       for c in clusters if c.size >= 2 or c.key in shown)
    # self-check: a T5 source should not lead the digest unless corroborated
    check_t5_top(sections_items, sel, checks)
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
        rendered: list[Item] = []
        for c in sections_items[name]:
            fixed, missing = ensure_attribution(c, sel.base)
            attribution_fixes += fixed
            missing_attr += missing
            item = topic_item(c, sel, wr, config)
            label = item["label"]
            n = used_labels.get(label.lower(), 0)
            used_labels[label.lower()] = n + 1
            if n:  # re-label duplicates with the lead's publisher
                item["label"] = f"{label} ({item['lead']['publisher']})"
            rendered.append(item)
        section: Section = {"name": name, "items": rendered}
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
    checks.append({"check": "order", "ok": sections_sorted(sections), "action": None})

    index = topic_index(clusters, sel.base, config)
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


def _known(schedule: DigestSchedule, name: str) -> bool:
    return any(t.name == name for t in schedule.types)


def _fallback_type(name: str) -> DigestType:
    return DigestType(name, name.replace("_", " ").title(), "rolling", MORNING.limits)


def _health_block(
    fh: FeedHealthInput,
) -> FeedHealth:
    if fh is None:
        return FeedHealthAccumulator().summary()
    if isinstance(fh, FeedHealthAccumulator):
        return fh.summary()
    if isinstance(fh, Mapping):  # a summary
        return cast(FeedHealth, dict(fh))
    return summarize_feed_health(fh)


def digest_key(d: Digest) -> bytes:
    """Kafka key of a digest: ``digest_type:window_start`` (re-emits are idempotent)."""
    return str(d["digest_id"]).encode()
