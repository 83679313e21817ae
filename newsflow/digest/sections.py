"""A digest's sections and items (pure): a topic as a ``digests.v1`` item (lead, summary,
related coverage), the Top Stories / Noteworthy / Also Mentioned self-checks (attribution, T5
lead, order), why a section is empty, and the topic index the next window's trends read."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from newsflow.core.timeutil import ms_to_iso
from newsflow.digest.config import DigestConfig
from newsflow.digest.entries import DigestEntry
from newsflow.digest.labels import (
    extractive_summary,
    key_stems,
    topic_label,
)
from newsflow.digest.record import Check, IndexTopic, Item, Lead, Section
from newsflow.digest.rescore import Selected
from newsflow.digest.schedule import (
    ALSO_MENTIONED,
    NOTEWORTHY,
    TOP_STORIES,
    SectionLimits,
)
from newsflow.digest.selection import (
    article_time_ms,
    importance_of,
)
from newsflow.digest.topics import Cluster
from newsflow.feeds.urls import clean_link
from newsflow.scoring.importance import (
    TIER_RANK,
)


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


def shown_cap(limits: SectionLimits) -> int:
    return max(limits.top, limits.noteworthy, limits.also) + 1  # +1: the T5 re-rank


def _tier_rank(t: str | None) -> int:
    return TIER_RANK.get(t, 6)


def topic_item(
    c: Cluster,
    sel: Selected,
    wr: tuple[int, int],
    config: DigestConfig,
) -> Item:
    # (the texts, ids and links of the articles are the entries' own: only the lead, whose score
    # and story coverage the item shows, is read re-scored)
    lead = sel[c.lead]
    label, ent, terms = topic_label(c, sel.base)
    others = [i for i in c.members if i != c.lead]
    # the members' scores, tiers, ids, publishers from the columns (a topic may hold thousands)
    sc, bs = sel.scores, sel.base
    others.sort(key=lambda i: (-sc[i], _tier_rank(bs[i].tier), bs[i].article_id))
    pubs: dict[str, int] = {}
    for i in others:
        r = bs[i]
        p = str(r.publisher or r.feed_id or "")
        if p:
            pubs[p] = min(pubs.get(p, 9), _tier_rank(r.tier))
    extra = c.copies
    for p, tier in extra:
        if p:
            pubs[p] = min(pubs.get(p, 9), _tier_rank(tier))
    related_sources = [p for p, _ in sorted(pubs.items(), key=lambda kv: (kv[1], kv[0]))]
    c.terms = key_stems(c, sel.base)
    summary = extractive_summary(lead.title or "", lead.body_z, c.terms, wr)
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
                "article_id": bs[i].article_id,
                "title": bs[i].title or "",
                "publisher": str(bs[i].publisher or bs[i].feed_id or ""),
                "url": clean_link(bs[i].url),
                "score": sc[i],
            }
            for i in others[: config.related_max]
        ],
        "article_ids": [lead.article_id, *(bs[i].article_id for i in others)][
            : config.article_ids_max
        ],
        "story_ids": c.stories[:20],
        "size": c.size,
        "topic_key": c.key,
    }


def _lead(r: DigestEntry) -> Lead:
    return {
        "article_id": r.article_id,
        "title": r.title or "",
        "url": clean_link(r.url),
        "publisher": str(r.publisher or r.feed_id or "unknown"),
        "feed_id": str(r.feed_id or ""),
        "tier": r.tier,
        "published_at": ms_to_iso(article_time_ms(r, "published")),
        "score": importance_of(r),
    }


def ensure_attribution(c: Cluster, sel: Sequence[DigestEntry]) -> tuple[int, int]:
    """Self-check: the lead needs a source name and URL; else re-rank to the best-ranked
    member that has both. Returns (re-ranked, still missing)."""

    def ok(i: int) -> bool:
        r = sel[i]
        return bool(r.url) and bool(r.publisher or r.feed_id)

    if ok(c.lead):
        return 0, 0
    for i in c.ranked:
        if ok(i):
            c.lead = i
            return 1, 0
    return 0, 1


def check_t5_top(
    sections: dict[str, list[Cluster]],
    sel: Selected,
    checks: list[Check],
) -> None:
    """Self-check: if the highest-scoring article is from a T5 source, review its
    corroboration: a T5 lead without any T1-T4 coverage in its cluster or story is moved
    below the first item that is not such a case."""
    for name in (TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED):
        items = sections[name]
        if not items:
            continue
        first = items[0]
        lead = sel[first.lead]
        if lead.tier != "T5":
            checks.append({"check": "t5_top", "ok": True, "action": None})
            return
        tiers = {sel.base[i].tier for i in first.members} | set(lead.story_tiers or ())
        if tiers & {"T1", "T2", "T3", "T4"}:
            checks.append(
                {"check": "t5_top", "ok": True, "action": "T5 lead corroborated by T1-T4"}
            )
            return
        j = next((k for k, c in enumerate(items) if sel.base[c.lead].tier != "T5"), None)
        if j is None:
            checks.append({"check": "t5_top", "ok": False, "action": "only T5 sources"})
            return
        items.insert(j, items.pop(0))
        checks.append(
            {"check": "t5_top", "ok": False, "action": "re-ranked an uncorroborated T5 lead"}
        )
        return
    checks.append({"check": "t5_top", "ok": True, "action": None})


def sections_sorted(sections: list[Section]) -> bool:
    for s in sections:
        sc = [it["score"] for it in s["items"]]
        # one re-rank (T5 self-check) may move a single item down
        bad = sum(1 for a, b in itertools.pairwise(sc) if a < b)
        if bad > 1:
            return False
    return True


def _index_order(clusters: Sequence[Cluster]) -> list[Cluster]:
    multi = [c for c in clusters if c.size >= 2]
    return sorted(multi, key=lambda c: (-c.size, -c.score, c.key))


def topic_index(
    clusters: Sequence[Cluster],
    sel: Sequence[DigestEntry],
    config: DigestConfig,
) -> list[IndexTopic]:
    """Compact description of the window's multi-article topics, for the next window's trend
    flags (matching by story ids and top terms)."""
    out: list[IndexTopic] = []
    for c in _index_order(clusters)[: config.topic_index_size]:
        out.append(
            {
                "key": c.key,
                "label": topic_label(c, sel)[0],  # the item's own readable label, never cut mid-phrase
                "size": c.size,
                "score": c.score,
                "trend": None,  # (apply_trends)
                "term_hashes": [str(h) for h in c.term_hashes[:5]],
                "story_ids": c.stories[:20],
            }
        )
    return out
