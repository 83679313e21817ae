"""The first rolling digest: per 24 h event-time window, the most corroborated, newest articles.

Two levels so no key holds a whole window: every dedup shard proposes its top-K clusters of the
window (:func:`shard_candidates`), one digest key merges the proposals of all shards
(:func:`assemble_digest`). Deterministic: candidates are ranked by a total order.
"""

from __future__ import annotations

from typing import Any

from newsflow.dedup import Cluster
from newsflow.model import DIGEST_SCHEMA_VERSION
from newsflow.timeutil import ms_to_iso

DIGEST_TYPE = "rolling_24h"


def window_of(ms: int, length_ms: int) -> int:
    """Start of the aligned (UTC epoch) window containing ``ms``."""
    return ms - ms % length_ms


def candidate(c: Cluster) -> dict[str, Any]:
    sources = sorted({s.publisher for s in c.sightings})
    return {
        "article_id": c.root_id, "title": c.title, "url": c.url, "publisher": c.publisher,
        "feed_id": c.feed_id, "tier": c.tier, "published_ms": c.published_ms,
        "publishers": len(sources), "copies": len(c.sightings), "sources": sources,
    }


def _rank(cand: dict[str, Any]) -> tuple[int, int, int, str]:
    return (-cand["publishers"], -cand["copies"], -cand["published_ms"], cand["article_id"])


def shard_candidates(clusters: list[Cluster], top_k: int) -> tuple[list[dict[str, Any]], int, int]:
    """Top-K candidates of one shard for a window, plus (article count, duplicates removed)."""
    cands = sorted((candidate(c) for c in clusters), key=_rank)
    dups = sum(len(c.sightings) - 1 for c in clusters)
    return cands[:top_k], len(clusters), dups


def assemble_digest(
    window_start: int, window_ms: int, proposals: list[tuple[list[dict[str, Any]], int, int]],
    max_items: int, *, final: bool = True,
) -> dict[str, Any]:
    """Merge every shard's proposal into one ``digests`` v1 record."""
    cands = sorted((c for p in proposals for c in p[0]), key=_rank)[:max_items]
    items = []
    for c in cands:
        others = [s for s in c["sources"] if s != c["publisher"]]
        items.append({
            "label": c["title"],
            "trend": None,
            "lead": {
                "article_id": c["article_id"], "title": c["title"], "url": c["url"],
                "publisher": c["publisher"], "feed_id": c["feed_id"], "tier": c["tier"],
                "published_at": ms_to_iso(c["published_ms"]), "score": None,
            },
            "summary": "",
            "related_count": c["copies"] - 1,
            "related_sources": others,
            "score": None,
            "article_ids": [c["article_id"]],
        })
    start_iso = ms_to_iso(window_start)
    return {
        "schema": "digests",
        "schema_version": DIGEST_SCHEMA_VERSION,
        "digest_id": f"{DIGEST_TYPE}:{start_iso}",
        "digest_type": DIGEST_TYPE,
        "window_start": start_iso,
        "window_end": ms_to_iso(window_start + window_ms),
        "generated_at": ms_to_iso(window_start + window_ms),
        "final": final,
        "article_count": sum(p[1] for p in proposals),
        "duplicates_removed": sum(p[2] for p in proposals),
        "sections": [{"name": "Top Stories", "items": items}],
        "feed_health": None,
    }
