"""Ranking a digest for one profile: relevance from the profile's live weights replaces the
neutral component of every scored record, and the digest says whose it is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from newsflow.digest.record import Digest
from newsflow.profiles.config import ProfileRates
from newsflow.profiles.state import ProfileState
from newsflow.profiles.vectors import interest_profile, relevance
from newsflow.scoring.importance import (
    COMPONENTS,
    DEFAULT_SCORE_CONFIG,
    InterestProfile,
    weighted_importance,
)


def with_relevance(rec: Mapping[str, Any], profile: InterestProfile | None) -> Mapping[str, Any]:
    """The record with ``importance_components.relevance`` from ``profile`` and the importance
    re-weighted with the record's own ``importance_weights`` (the default weights,
    docs/rules.md#weights, when it has none; records without components, i.e. not scored, are
    returned as they are)."""
    comps = rec.get("importance_components")
    if not isinstance(comps, Mapping) or not all(c in comps for c in COMPONENTS):
        return rec
    new = dict(comps)
    new["relevance"] = relevance(rec, profile)
    w = rec.get("importance_weights")
    weights = tuple(float(w[c]) for c in COMPONENTS) if isinstance(w, Mapping) and all(c in w for c in COMPONENTS) \
        else DEFAULT_SCORE_CONFIG.weights
    return {**rec, "importance_components": new, "importance": round(weighted_importance(new, weights), 2)}


def live_profile(terms: Iterable[tuple[int, float, int | None]], t_ms: int, rates: ProfileRates) -> InterestProfile | None:
    """The interest profile of a profile state (``ProfileVersion.terms``: weight, last engaged)
    at event time ``t_ms``, decay applied (None: every weight 0, the neutral 50)."""
    st = ProfileState("", {h: (w, since) for h, w, since in terms})
    return interest_profile(st.vector_at(t_ms, rates))


def personalize(digest: Digest, profile: str, top_terms: Sequence[tuple[str, float]],
                relevance_of: Mapping[str, float]) -> Digest:
    """Key ``profile:type:window_start``; the profile's top terms; each item's lead relevance."""
    digest["digest_id"] = f"{profile}:{digest['digest_id']}"
    digest["profile"] = {"id": profile, "top_terms": [{"term": t, "weight": w} for t, w in top_terms]}
    return with_item_relevance(digest, relevance_of)


def with_item_relevance(digest: Digest, relevance_of: Mapping[str, float]) -> Digest:
    """Each item's ``relevance``: its lead's."""
    for s in digest["sections"]:
        for it in s["items"]:
            it["relevance"] = relevance_of.get(it["lead"]["article_id"])
    return digest
