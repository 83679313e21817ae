"""The one article vector of profiles, in the space the articles' relevance uses.

Terms are the stable stem hashes of :class:`newsflow.text.tokenize.TextFeatures` (title x2 +
the first 200 body words, docs/rules.md#relevance), plus two meta terms, ``category:<c>`` and
``publisher:<p>``, so subscriptions to feed categories and publishers live in the same vector.
Term frequency is sublinear (``1 + ln tf``) and the IDF is 1: profiles are compared by cosine
(:func:`newsflow.scoring.importance.relevance_score`), and a stream has no fixed corpus to take
an IDF from (the digest's own clustering weights by the window's IDF separately).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from newsflow.profiles.config import ProfileSpec
from newsflow.scoring.importance import InterestProfile, relevance_score
from newsflow.text.tokenize import TextFeatures, analyze, token_hash

TITLE_WEIGHT = 2
BODY_WORDS = 200

#: a sparse vector: sorted term hashes -> weights
Vector = dict[int, float]


def meta_term(kind: str, value: str) -> str:
    return f"{kind}:{' '.join(value.lower().split())}"


def _meta(rec: Mapping[str, Any]) -> list[str]:
    out = []
    if rec.get("category"):
        out.append(meta_term("category", str(rec["category"])))
    if rec.get("publisher"):
        out.append(meta_term("publisher", str(rec["publisher"])))
    return out


def article_features(rec: Mapping[str, Any]) -> TextFeatures:
    """Analyzed text of an article record (title x2 + first 200 words) + its meta terms."""
    f = TextFeatures.of(rec.get("title") or "", rec.get("body_text") or "",
                        title_weight=TITLE_WEIGHT, body_words=BODY_WORDS)
    meta = _meta(rec)
    if not meta:
        return f
    extra = np.array([token_hash(m) for m in meta], dtype=np.uint64)
    return TextFeatures(np.concatenate([f.hashes, extra]))


def unpacked_features(hashes: bytes, counts: bytes) -> TextFeatures:
    """The :func:`article_features` that :func:`packed_features` packed."""
    return TextFeatures(np.repeat(np.frombuffer(hashes, np.uint64), np.frombuffer(counts, np.uint16)))


def packed_features(rec: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """:func:`article_features` of a record as (sorted unique ``uint64`` hashes, ``uint16``
    counts) bytes: what a digest entry keeps so its relevance needs no text
    (:mod:`newsflow.digest.entries`)."""
    u, c = article_features(rec).unique_counts()
    return u.astype(np.uint64).tobytes(), c.astype(np.uint16).tobytes()


def article_vector(rec: Mapping[str, Any]) -> tuple[Vector, dict[int, str]]:
    """(L2-normalized sublinear-TF vector, names of its title stems and meta terms)."""
    u, c = article_features(rec).unique_counts()
    v = 1.0 + np.log(c)
    n = float(np.sqrt(v @ v)) or 1.0
    vec = {int(h): float(x) / n for h, x in zip(u.tolist(), v.tolist(), strict=True)}
    names = {token_hash(s): s for s in analyze(rec.get("title") or "")}
    names.update({token_hash(m): m for m in _meta(rec)})
    return vec, {h: s for h, s in names.items() if h in vec}


def seed_vector(spec: ProfileSpec) -> tuple[Vector, dict[int, str]]:
    """A profile's vector from its subscriptions: every stem of a topic's keywords gets the
    topic's weight (summed over topics), every subscribed category / publisher ``meta_weight``."""
    w: Vector = {}
    names: dict[int, str] = {}
    for t in spec.topics:
        for kw in t.keywords:
            for s in dict.fromkeys(analyze(kw)):
                h = token_hash(s)
                w[h] = w.get(h, 0.0) + t.weight
                names[h] = s
    for kind, values in (("category", spec.categories), ("publisher", spec.publishers)):
        for val in values:
            m = meta_term(kind, val)
            h = token_hash(m)
            w[h] = w.get(h, 0.0) + spec.meta_weight
            names[h] = m
    return dict(sorted(w.items())), names


def interest_profile(weights: Mapping[int, float]) -> InterestProfile | None:
    """The scoring module's profile of a weight vector (None when every weight is 0: the
    neutral relevance applies, docs/rules.md#relevance)."""
    w = {h: v for h, v in sorted(weights.items()) if v != 0.0}
    if not w:
        return None
    norm = math.sqrt(sum(v * v for v in w.values()))
    return InterestProfile(weights=w, norm=norm or 1.0)


def relevance(rec: Mapping[str, Any], profile: InterestProfile | None, default: float = 50.0) -> float:
    """Relevance of a record (docs/rules.md#relevance): cosine(article, profile) x 100 (clamped to 0..100),
    ``default`` (50) without a profile."""
    if profile is None:
        return default
    return round(relevance_score(article_features(rec), profile, default=default), 2)
