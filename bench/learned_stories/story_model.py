"""The learned story decision: pair features of (article, candidate story) and a logistic model.

P(the article belongs to the story) = sigmoid(intercept + sum(coef_i * x_i)) over the features
:data:`FEATURES` of the pair (:func:`pair_features`). The coefficients are data: a small JSON
file (``story_model.json`` beside this module, or the operator's own file), written by
``bench/train_story_model.py`` from hand-labelled days of real feeds. Inference is plain
Python over floats, so a replay gives the same decisions on any number of workers/processes
(no scikit-learn object is loaded; floats are summed in the order of :data:`FEATURES`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["DEFAULT_MODEL", "FEATURES", "MODEL_VERSION", "StoryModel", "char_ngrams", "jaccard",
           "load_model", "pair_features"]

#: the layout of a model file (a file of another version is refused, not misread)
MODEL_VERSION = 1
#: the model shipped in the package
DEFAULT_MODEL = Path(__file__).with_name("story_model.json")
HOUR_MS = 3_600_000

#: the pair features, in the order of the coefficients
FEATURES: tuple[str, ...] = (
    "cos_full",  # cosine of the article's TF-IDF vector (title, bigrams, URL slug, summary lead) with the centroid
    "cos_title",  # the title part of the vector alone, with the centroid
    "cos_body",  # the summary/body-lead part alone, with the centroid (0 without one)
    "avg_link",  # mean cosine with the members (the centroid is the sum of their unit vectors)
    "shared_words",  # log(1 + title/summary words shared with the centroid)
    "shared_bigrams",  # log(1 + title word pairs shared with the centroid)
    "one_word",  # 1: at most one word shared with the centroid (one name is a theme, not an event)
    "rarest_shared",  # IDF of the rarest shared term / log(window documents): a name, not a theme
    "member_jaccard",  # title word-set Jaccard with the closest recent member
    "member_char3",  # character 3-gram Jaccard of the titles, same member
    "shared_names",  # log(1 + names the article and the story's members both name)
    "names_other",  # 1: both name people/places/organisations, none in common
    "other_days",  # 1: the publisher's titles in the story name other calendar days (episodes)
    "shared_numbers",  # log(1 + numbers in the title also in the recent members' titles)
    "log_gap_h",  # log(1 + hours since the story's last member)
    "log_size",  # log(1 + members)
    "cos_size",  # cos_full x log_size: a big story's centroid is broader (its members' cosines lower)
    "log_publishers",  # log(1 + distinct publishers)
    "own_publisher_only",  # 1: the story's only publisher is the article's
    "own_publisher_cos",  # cos_full when the story's only publisher is the article's (a series, a beat)
    "near_duplicate",  # 1: a title/body near-duplicate (layers 3-4) of the article is a member
    "title_only",  # 1: the article has no summary/body (headline streams, aggregators)
    "title_only_cos",  # cos_full of such an article
)


@dataclass(frozen=True, slots=True)
class StoryModel:
    """Coefficients of the logistic pair model and its decision thresholds."""

    coef: tuple[float, ...]
    intercept: float
    #: an article joins its most probable candidate story when P >= threshold
    threshold: float = 0.5
    #: a second candidate story with P >= this is merged into the one joined (> 1: never)
    merge_threshold: float = 2.0
    features: tuple[str, ...] = FEATURES
    trained_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.features != FEATURES or len(self.coef) != len(FEATURES):
            msg = f"story model features {list(self.features)} are not {list(FEATURES)}"
            raise ValueError(msg)

    def logit(self, x: Sequence[float]) -> float:
        z = self.intercept
        for c, v in zip(self.coef, x, strict=True):
            z += c * v
        return z

    def probability(self, x: Sequence[float]) -> float:
        z = self.logit(x)
        return 1.0 / (1.0 + math.exp(-z)) if z >= -700 else 0.0

    def to_json(self) -> dict[str, object]:
        return {"version": MODEL_VERSION, "features": list(self.features),
                "coef": [round(c, 6) for c in self.coef], "intercept": round(self.intercept, 6),
                "threshold": self.threshold, "merge_threshold": self.merge_threshold,
                "trained_on": list(self.trained_on)}

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> StoryModel:
        if d.get("version") != MODEL_VERSION:
            msg = f"story model version {d.get('version')!r} is not {MODEL_VERSION}"
            raise ValueError(msg)
        feats = d["features"]
        coef = d["coef"]
        if not isinstance(feats, list) or not isinstance(coef, list):
            msg = "story model: features and coef must be lists"
            raise ValueError(msg)
        return cls(tuple(float(c) for c in coef), float(d["intercept"]),  # type: ignore[arg-type]
                   float(d.get("threshold", 0.5)), float(d.get("merge_threshold", 2.0)),  # type: ignore[arg-type]
                   tuple(str(f) for f in feats),
                   tuple(str(x) for x in d.get("trained_on", ())))  # type: ignore[attr-defined]


@lru_cache(maxsize=8)
def load_model(path: str | None = None) -> StoryModel:
    """The model of ``path`` (a JSON file of :meth:`StoryModel.to_json`), else the shipped one."""
    p = Path(path) if path else DEFAULT_MODEL
    return StoryModel.from_json(json.loads(p.read_text(encoding="utf-8")))


@lru_cache(maxsize=1 << 14)
def char_ngrams(text: str, n: int = 3) -> frozenset[str]:
    """Character ``n``-grams of a normalized title (with a space at each end)."""
    t = f" {text} "
    return frozenset(t[i:i + n] for i in range(len(t) - n + 1))


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if inter else 0.0


def pair_features(*, dot_full: float, dot_title: float, dot_body: float, norm: float, count: int,
                  shared_words: int, shared_bigrams: int, rarest_shared: float,
                  title_norm: float, body_norm: float, member_jaccard: float, member_char3: float,
                  shared_names: int, names_other: bool, other_days: bool, shared_numbers: int,
                  gap_ms: int, publishers: int, own_publisher_only: bool, near_duplicate: bool,
                  ) -> list[float]:
    """The feature vector (:data:`FEATURES`) of one pair from what the assigner measured.

    ``dot_*``: dot products of the article's unit vector (full) and of its title / body parts
    (``title_norm`` / ``body_norm``: the norms of those parts) with the story centroid of norm
    ``norm``; a part's cosine is its dot over its own norm and the centroid's."""
    inv = 1.0 / norm if norm > 0.0 else 0.0
    return [
        dot_full * inv,
        dot_title * inv / title_norm if title_norm > 0.0 else 0.0,
        dot_body * inv / body_norm if body_norm > 0.0 else 0.0,
        dot_full / count if count else 0.0,
        math.log1p(shared_words),
        math.log1p(shared_bigrams),
        1.0 if shared_words <= 1 else 0.0,
        rarest_shared,
        member_jaccard,
        member_char3,
        math.log1p(shared_names),
        1.0 if names_other else 0.0,
        1.0 if other_days else 0.0,
        math.log1p(shared_numbers),
        math.log1p(max(gap_ms, 0) / HOUR_MS),
        math.log1p(count),
        dot_full * inv * math.log1p(count),
        math.log1p(publishers),
        1.0 if own_publisher_only else 0.0,
        dot_full * inv if own_publisher_only else 0.0,
        1.0 if near_duplicate else 0.0,
        0.0 if body_norm > 0.0 else 1.0,
        0.0 if body_norm > 0.0 else dot_full * inv,
    ]
