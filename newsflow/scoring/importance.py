"""Importance scoring (pure; no Bytewax, no Kafka, no wall clock).

One function per rule of docs/rules.md#importance:

* :func:`authority_score` — tier T1..T5 -> 95/80/65/50/30, x feed reliability (0..1)
* :func:`recency_score` — ``100 * e^(-lam * hours)``, -20 % when the date is uncertain
* :func:`corroboration_score` — ``min(100, 25 * publishers)``, +10 for 3+ tiers (cap 100)
* :func:`relevance_score` — TF-IDF cosine vs an :class:`InterestProfile` (50 when none)
* :func:`depth_score` — word-count buckets 20/50/75/100, +15 data, +10 structure,
  +10 citations, cap 100, cap 40 when the content is partial
* :func:`importance` — the weighted sum 0.25/0.20/0.20/0.20/0.15 with its components

plus the optional severity profile (:mod:`newsflow.scoring.severity`,
docs/rules.md#severity-profile) and the story phases (docs/rules.md#story-phases).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from newsflow.core.timeutil import HOUR_MS, iso_to_ms
from newsflow.model.vocab import Disposition, StoryPhase
from newsflow.scoring.severity import (
    SEVERITY_SCORES,
    SEVERITY_TIER_SCORES,
    SeverityProfile,
    _to_ms,
    severity_level,
)
from newsflow.text.html import word_count
from newsflow.text.tokenize import TextFeatures, analyze, token_hash

# --------------------------------------------------------------------------------------
# Rule 1: source authority
# --------------------------------------------------------------------------------------

TIER_SCORES: Mapping[str, float] = {"T1": 95.0, "T2": 80.0, "T3": 65.0, "T4": 50.0, "T5": 30.0}
TIER_RANK: Mapping[str | None, int] = {"T1": 1, "T2": 2, "T3": 3, "T4": 4, "T5": 5, None: 6}


def authority_score(
    tier: str | None,
    reliability: float | None = None,
    *,
    tier_scores: Mapping[str, float] = TIER_SCORES,
    unknown_tier_score: float = 50.0,
) -> float:
    """Tier base score x feed reliability (``successful_polls / total_polls``, 0..1).

    Unknown tier -> ``unknown_tier_score`` (as T4); unknown reliability (no feed-health yet)
    -> 1.0 (docs/rules.md#authority).
    """
    base = tier_scores.get(tier, unknown_tier_score) if tier is not None else unknown_tier_score
    r = 1.0 if reliability is None else min(1.0, max(0.0, float(reliability)))
    return base * r


# --------------------------------------------------------------------------------------
# Rule 2: recency
# --------------------------------------------------------------------------------------


def recency_score(
    hours: float, lam: float = 0.03, date_uncertain: bool = False, *, penalty: float = 0.20
) -> float:
    """``100 * e^(-lam * hours)``; future dates count as 0 h; x (1 - penalty) if uncertain.

    The recency table of docs/rules.md#recency (lambda 0.03):

    >>> [round(recency_score(h)) for h in (0, 6, 12, 24, 48, 72)]
    [100, 84, 70, 49, 24, 12]
    >>> recency_score(-2.0), round(recency_score(24, date_uncertain=True), 1)
    (100.0, 38.9)
    """
    s = 100.0 * math.exp(-lam * max(0.0, hours))
    return s * (1.0 - penalty) if date_uncertain else s


def scored_as_of(fetched_ms: int, published_ms: int, previous_poll_ms: int | None) -> int:
    """The event time an article's importance (its recency) is computed at: its fetch, or,
    when its feed was polled before (``previous_poll_ms``, that poll showed the feed), the
    latest time the article can have first appeared there: its publication if that came after
    the previous poll, else that poll. A gap between polls (a replayed archive polled a few
    times a day, an outage) does not age the news it brings; an item that surfaces long after
    its publication still counts as old.

    >>> h = 3_600_000
    >>> scored_as_of(10 * h, 9 * h, None), scored_as_of(10 * h, 9 * h, 2 * h), scored_as_of(10 * h, 1 * h, 2 * h)
    (36000000, 32400000, 7200000)
    """
    if previous_poll_ms is None or previous_poll_ms >= fetched_ms:
        return fetched_ms
    return min(fetched_ms, max(published_ms, previous_poll_ms))


def hours_between(now: datetime | int, published: datetime | int | str) -> float:
    """Hours from ``published`` to ``now`` (aware datetimes, epoch ms or ISO strings)."""
    return (_to_ms(now) - _to_ms(published)) / HOUR_MS


# --------------------------------------------------------------------------------------
# Rule 3: cross-source corroboration
# --------------------------------------------------------------------------------------


def corroboration_score(distinct_publishers: int, distinct_tiers: int = 1) -> float:
    """``min(100, 25 x publishers)``; +10 when the sources span 3+ tiers; capped at 100."""
    s = min(100.0, 25.0 * max(0, distinct_publishers))
    if distinct_tiers >= 3:
        s += 10.0
    return min(100.0, s)


# --------------------------------------------------------------------------------------
# Rule 4: topic relevance against an interest profile (hashed TF-IDF, cosine)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InterestProfile:
    """A user's interest vector over stem hashes (already IDF-weighted), plus the IDF used
    to weight article vectors. Build with :meth:`from_terms` or :meth:`from_texts`."""

    weights: Mapping[int, float]
    idf: Mapping[int, float] = field(default_factory=dict)
    default_idf: float = 1.0
    norm: float = 1.0

    @classmethod
    def from_terms(
        cls, terms: Mapping[str, float], idf: Mapping[str, float] | None = None
    ) -> InterestProfile:
        """``{"climate change": 1.0, "ai": 0.5}``: every stem of a phrase gets its weight;
        ``idf`` maps *words* to IDF values (see :func:`idf_from_documents`)."""
        idf_h = _idf_hashes(idf)
        w: dict[int, float] = {}
        for phrase, weight in sorted(terms.items()):
            for s in analyze(phrase):
                h = token_hash(s)
                w[h] = w.get(h, 0.0) + float(weight) * idf_h.get(h, 1.0)
        return cls._make(w, idf_h)

    @classmethod
    def from_texts(
        cls, texts: Sequence[str], idf: Mapping[str, float] | None = None
    ) -> InterestProfile:
        """Mean TF-IDF vector of example texts the user cares about."""
        idf_h = _idf_hashes(idf)
        w: dict[int, float] = {}
        for t in texts:
            tf: dict[int, int] = {}
            for s in analyze(t):
                h = token_hash(s)
                tf[h] = tf.get(h, 0) + 1
            vec = {h: (1.0 + math.log(c)) * idf_h.get(h, 1.0) for h, c in tf.items()}
            n = math.sqrt(sum(v * v for v in vec.values())) or 1.0
            for h, v in vec.items():
                w[h] = w.get(h, 0.0) + v / n
        return cls._make(w, idf_h)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(sorted uint64 keys, weights) for vectorized lookups."""
        got = _PROFILE_ARRAYS.get(id(self))
        if got is None or got[0] is not self:
            keys = np.array(sorted(self.weights), dtype=np.uint64)
            vals = np.array([self.weights[int(k)] for k in keys.tolist()], dtype=np.float64)
            got = (self, keys, vals)
            _PROFILE_ARRAYS[id(self)] = got
        return got[1], got[2]

    @classmethod
    def _make(cls, w: dict[int, float], idf_h: dict[int, float]) -> InterestProfile:
        norm = math.sqrt(sum(v * v for v in w.values()))
        return cls(weights=dict(sorted(w.items())), idf=idf_h, norm=norm or 1.0)


_PROFILE_ARRAYS: dict[int, tuple[InterestProfile, np.ndarray, np.ndarray]] = {}


def _idf_hashes(idf: Mapping[str, float] | None) -> dict[int, float]:
    out: dict[int, float] = {}
    for word, v in sorted((idf or {}).items()):
        for s in analyze(word):
            out[token_hash(s)] = float(v)
    return out


def idf_from_documents(docs: Iterable[str]) -> dict[str, float]:
    """Smoothed IDF (``ln((1+n)/(1+df)) + 1``, as scikit-learn) of each stem in ``docs``."""
    df: dict[str, int] = {}
    n = 0
    for d in docs:
        n += 1
        for s in set(analyze(d)):
            df[s] = df.get(s, 0) + 1
    return {s: math.log((1 + n) / (1 + c)) + 1.0 for s, c in sorted(df.items())}


def relevance_score(
    text: str | TextFeatures, profile: InterestProfile | None, *, default: float = 50.0
) -> float:
    """Cosine(article TF-IDF, profile) x 100; ``default`` (50, neutral) without a profile.

    ``text`` is the raw "title + first 200 words" or precomputed :class:`TextFeatures`.
    Article TF is sublinear (1 + ln tf) and weighted by the profile's IDF.
    """
    if profile is None or not profile.weights:
        return default
    feats = text if isinstance(text, TextFeatures) else TextFeatures.of_text(text)
    if feats.n_tokens == 0:
        return 0.0
    u, c = feats.unique_counts()
    v = 1.0 + np.log(c)
    if profile.idf:
        idf = profile.idf
        v = v * np.array([idf.get(h, profile.default_idf) for h in u.tolist()])
    elif profile.default_idf != 1.0:
        v = v * profile.default_idf
    keys, vals = profile.arrays()
    idx = np.searchsorted(keys, u)
    idx[idx >= len(keys)] = 0
    hit = keys[idx] == u
    dot = float(v[hit] @ vals[idx[hit]])
    if dot <= 0.0:
        return 0.0
    return min(100.0, 100.0 * dot / (math.sqrt(float(v @ v)) * profile.norm))


# --------------------------------------------------------------------------------------
# Rule 5: content depth
# --------------------------------------------------------------------------------------

_PCT_RE = re.compile(r"[0-9]\s?%")
_CUR_RE = re.compile(r"[$€£¥]\s?[0-9]")
_UNIT_RE = re.compile(r"[0-9]\s?(?:percent|per cent|pct|million|billion|trillion|bn|mn)\b")
_NUM_SEP_RE = re.compile(r"[0-9][.,][0-9]")  # 3.5, 1,234
_BULLET_RE = re.compile(r"^\s*(?:[-*•●▪]|\d{1,2}[.)])\s+\S", re.MULTILINE)
_HREF_RE = re.compile(r"""<a\s[^>]*?href\s*=\s*["']?(https?://[^"'\s>]+)""", re.IGNORECASE)
_HOST_RE = re.compile(r"^https?://(?:www\.)?([^/:?#]+)", re.IGNORECASE)
_CITE_TEXT_RE = re.compile(r"\b(?:according to|source:|sources:|cited in|doi:)", re.IGNORECASE)
_DEPTH_SCAN_CHARS = 50_000


def has_data(text: str) -> bool:
    """Numbers that are data: percentages, currency, 1,234 / 3.5 figures, "2 million".

    Each pattern starts at a digit or a currency sign: one regex scan each (C speed; a
    substring pre-test per unit word cost more than the scan).
    """
    t = text[:_DEPTH_SCAN_CHARS]
    if "%" in t and _PCT_RE.search(t):
        return True
    if _CUR_RE.search(t) or _NUM_SEP_RE.search(t):
        return True
    return _UNIT_RE.search(t.lower()) is not None


def depth_signals(
    body_text: str, body_html: str = "", url: str | None = None
) -> tuple[bool, bool, bool]:
    """``(has_data, has_structure, has_citations)`` of an article body.

    data: see :func:`has_data`; structure: a ``<table>`` or 3+ list items (HTML ``<li>`` or
    bullet/numbered lines); citations: a link to another host than the article's own (or
    "according to"/"source:" phrasing when there is no HTML).
    """
    data = has_data(body_text)
    html = (body_html or "")[:_DEPTH_SCAN_CHARS]
    if html:
        hl = html.lower()
        structure = "<table" in hl or (hl.count("<li>") + hl.count("<li ")) >= 3
    else:
        hl = ""
        structure = False
    if not structure and ("\n" in body_text):
        structure = len(_BULLET_RE.findall(body_text[:_DEPTH_SCAN_CHARS])) >= 3
    if html:
        own = _host(url)
        cites = "href" in hl and any(_host(h) != own for h in _HREF_RE.findall(html))
    else:
        cites = _CITE_TEXT_RE.search(body_text[:_DEPTH_SCAN_CHARS]) is not None
    return data, structure, cites


def _host(url: str | None) -> str | None:
    if not url:
        return None
    m = _HOST_RE.match(url)
    return m.group(1).lower() if m else None


def word_count_points(word_count: int) -> float:
    """0-199 words: 20, 200-499: 50, 500-999: 75, 1000+: 100."""
    if word_count >= 1000:
        return 100.0
    if word_count >= 500:
        return 75.0
    if word_count >= 200:
        return 50.0
    return 20.0


def depth_score(
    word_count: int,
    has_data: bool = False,
    has_structure: bool = False,
    has_citations: bool = False,
    partial: bool = False,
) -> float:
    s = word_count_points(word_count)
    s += 15.0 if has_data else 0.0
    s += 10.0 if has_structure else 0.0
    s += 10.0 if has_citations else 0.0
    s = min(100.0, s)
    return min(40.0, s) if partial else s


# --------------------------------------------------------------------------------------
# Composite importance
# --------------------------------------------------------------------------------------

SCORED_DISPOSITIONS: frozenset[str] = frozenset({Disposition.UNIQUE, Disposition.REVISION, Disposition.SAME_EVENT})
COMPONENTS: tuple[str, ...] = ("authority", "recency", "corroboration", "relevance", "depth")


@dataclass(frozen=True, slots=True)
class ScoreConfig:
    """Scoring knobs (frozen; share one instance)."""

    lam: float = 0.03
    uncertain_penalty: float = 0.20
    # authority, recency, corroboration, relevance, depth
    weights: tuple[float, float, float, float, float] = (0.25, 0.20, 0.20, 0.20, 0.15)
    tier_scores: Mapping[str, float] = field(default_factory=lambda: dict(TIER_SCORES))
    unknown_tier_score: float = 50.0
    relevance_default: float = 50.0
    profile: InterestProfile | None = None
    title_weight: int = 2
    body_words: int = 200
    severity: SeverityProfile | None = None  # set to also compute the severity profile
    ndigits: int = 2


DEFAULT_SCORE_CONFIG = ScoreConfig()


def weighted_importance(
    components: Mapping[str, float], weights: Sequence[float] = (0.25, 0.20, 0.20, 0.20, 0.15)
) -> float:
    """``0.25*authority + 0.20*recency + 0.20*corroboration + 0.20*relevance + 0.15*depth``."""
    s = sum(w * components[c] for w, c in zip(weights, COMPONENTS, strict=True))
    return min(100.0, max(0.0, s))


@dataclass(frozen=True, slots=True)
class SeverityScore:
    level: str
    keyword: str | None
    historical_downgrade: bool
    excluded: bool
    score: float
    components: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "keyword": self.keyword,
            "historical_downgrade": self.historical_downgrade,
            "excluded": self.excluded,
            "score": self.score,
            "components": dict(self.components),
        }


@dataclass(frozen=True, slots=True)
class Importance:
    score: float
    components: Mapping[str, float]
    weights: tuple[float, ...]
    severity: SeverityScore | None = None

    def to_fields(self) -> dict[str, Any]:
        """Fields to merge into the article record (so subscribers can re-weight)."""
        out: dict[str, Any] = {
            "importance": self.score,
            "importance_components": dict(self.components),
            "importance_weights": dict(zip(COMPONENTS, self.weights, strict=True)),
        }
        if self.severity is not None:
            out["severity"] = self.severity.to_dict()
        return out


def record_ms(rec: Mapping[str, Any], key: str = "published") -> int:
    """Epoch ms of ``published`` (or ``fetched``) of a record: ``*_ms`` if present, else ISO."""
    ms = rec.get(f"{key}_ms")
    if isinstance(ms, int):
        return ms
    return iso_to_ms(rec[f"{key}_at"])


def story_counts(rec: Mapping[str, Any]) -> tuple[int, int]:
    """(distinct publishers, distinct tiers) of the article's story (at least its own)."""
    pubs = rec.get("story_publishers") or ()
    tiers = [t for t in (rec.get("story_tiers") or ()) if t]
    # a count, or the names (distinct, as the stories stage emits them)
    n_story = pubs if isinstance(pubs, int) else len(pubs)
    n_pub = max(n_story, int(rec.get("publishers_seen") or 0), 1)
    n_tier = max(len(set(tiers)), 1 if rec.get("tier") else 0)
    return n_pub, n_tier


def importance(
    rec: Mapping[str, Any],
    now: datetime | int,
    config: ScoreConfig = DEFAULT_SCORE_CONFIG,
    *,
    reliability: float | None = None,
    features: TextFeatures | None = None,
    story_text: str | None = None,
) -> Importance:
    """Composite importance (0-100) of one article record at event time ``now``.

    ``reliability`` is the feed's ``successful/total polls`` from feed-health (None -> 1.0);
    ``features`` may be passed to reuse the analyzed text (e.g. from the topic stage);
    ``story_text``: the body without its feed's boilerplate (``Article.story_text``), what depth
    is measured on when given (a channel's description under every video is not depth).
    """
    nd = config.ndigits
    hours = hours_between(now, record_ms(rec))
    uncertain = bool(rec.get("date_uncertain"))
    n_pub, n_tier = story_counts(rec)
    if config.profile is not None:
        if features is None:
            features = TextFeatures.of(
                rec.get("title") or "",
                rec.get("body_text") or "",
                title_weight=config.title_weight,
                body_words=config.body_words,
            )
        rel = relevance_score(features, config.profile, default=config.relevance_default)
    else:
        rel = config.relevance_default
    if story_text is None:
        words = int(rec.get("word_count") or 0)
        data, struct, cites = depth_signals(
            rec.get("body_text") or "", rec.get("body_html") or "", rec.get("url")
        )
    else:  # (its HTML, if any, still holds the boilerplate's links and lists)
        words = word_count(story_text)
        data, struct, cites = depth_signals(story_text, "", rec.get("url"))
    comps = {
        "authority": authority_score(
            rec.get("tier"),
            reliability,
            tier_scores=config.tier_scores,
            unknown_tier_score=config.unknown_tier_score,
        ),
        "recency": recency_score(hours, config.lam, uncertain, penalty=config.uncertain_penalty),
        "corroboration": corroboration_score(n_pub, n_tier),
        "relevance": rel,
        "depth": depth_score(words, data, struct, cites, bool(rec.get("partial_content"))),
    }
    score = round(weighted_importance(comps, config.weights), nd)
    sev = None
    if config.severity is not None:
        sev = severity_importance(rec, now, config.severity, hours=hours, n_publishers=n_pub)
    return Importance(
        score=score,
        components={k: round(v, nd) for k, v in comps.items()},
        weights=config.weights,
        severity=sev,
    )


def rescore(
    rec: Mapping[str, Any],
    *,
    publishers: int,
    tiers: int,
    reliability: float | None = None,
    config: ScoreConfig = DEFAULT_SCORE_CONFIG,
) -> Importance | None:
    """Importance recomputed from the story as it stands, at digest time (docs/rules.md#weights):
    corroboration from the story's distinct ``publishers`` / ``tiers`` now, authority from the
    tier x the feed's current ``reliability``; recency, relevance and depth are the record's own
    (recency as of its first sighting, :func:`scored_as_of`: a digest ranks what was fresh when
    it came in, it does not age a morning's news against the evening). ``None`` when the record
    has no components (not scored)."""
    comps = rec.get("importance_components")
    if not isinstance(comps, Mapping) or not all(c in comps for c in COMPONENTS):
        return None
    return rescore_components(comps, rec.get("tier"), story_counts(rec), publishers=publishers, tiers=tiers,
                              reliability=reliability, config=config)


def rescore_components(comps: Mapping[str, float], tier: str | None, counts: tuple[int, int], *, publishers: int,
                       tiers: int, reliability: float | None = None,
                       config: ScoreConfig = DEFAULT_SCORE_CONFIG) -> Importance:
    """:func:`rescore` of an article's components (all of :data:`COMPONENTS`), tier and story
    counts as it was scored (:func:`story_counts`)."""
    n_pub, n_tier = counts
    new = dict(comps)
    new["authority"] = authority_score(tier, reliability, tier_scores=config.tier_scores,
                                       unknown_tier_score=config.unknown_tier_score)
    new["corroboration"] = corroboration_score(max(publishers, n_pub), max(tiers, n_tier))
    nd = config.ndigits
    return Importance(
        score=round(weighted_importance(new, config.weights), nd),
        components={k: round(float(v), nd) for k, v in new.items()},
        weights=config.weights,
    )


def severity_importance(
    rec: Mapping[str, Any],
    now: datetime | int,
    profile: SeverityProfile | None = None,
    *,
    hours: float | None = None,
    n_publishers: int | None = None,
) -> SeverityScore:
    """Severity profile (docs/rules.md#severity-profile):
    ``0.55*severity + 0.20*tier + 0.15*corroboration + 0.10*recency``.

    tier T1..T4 -> 100/75/50/25 (T5 0, unknown = T4); corroboration 20 per source capped at 5;
    recency linear over 24 h, 0 after.
    """
    p = profile or SeverityProfile()
    if hours is None:
        hours = hours_between(now, record_ms(rec))
    if n_publishers is None:
        n_publishers = story_counts(rec)[0]
    res = severity_level(rec.get("title") or "", p, now)
    tier = rec.get("tier")
    comps = {
        "severity": SEVERITY_SCORES[res.level],
        "tier": SEVERITY_TIER_SCORES.get(tier, 25.0) if tier else 25.0,
        "corroboration": 20.0 * min(p.corroboration_cap, max(1, n_publishers)),
        "recency": 100.0 * max(0.0, 1.0 - max(0.0, hours) / p.recency_hours),
    }
    w = p.weights
    s = (
        w[0] * comps["severity"]
        + w[1] * comps["tier"]
        + w[2] * comps["corroboration"]
        + w[3] * comps["recency"]
    )
    return SeverityScore(
        level=res.level,
        keyword=res.keyword,
        historical_downgrade=res.historical_downgrade,
        excluded=res.excluded,
        score=round(min(100.0, max(0.0, s)), 2),
        components={k: round(v, 2) for k, v in comps.items()},
    )


def should_score(rec: Mapping[str, Any]) -> bool:
    """Only ``unique``, ``revision`` and ``same_event`` articles get an importance score."""
    return rec.get("disposition") in SCORED_DISPOSITIONS


def score_record(
    rec: Mapping[str, Any],
    now: datetime | int,
    config: ScoreConfig = DEFAULT_SCORE_CONFIG,
    *,
    reliability: float | None = None,
    features: TextFeatures | None = None,
) -> dict[str, Any]:
    """``rec`` + importance fields (a new dict); records that are not scored come back with
    ``importance: None``."""
    out = dict(rec)
    if should_score(rec):
        out.update(
            importance(rec, now, config, reliability=reliability, features=features).to_fields()
        )
    else:
        out["importance"] = None
    return out


# --------------------------------------------------------------------------------------
# Story phases (docs/rules.md#story-phases)
# --------------------------------------------------------------------------------------


def story_phase(
    mention_count: int,
    first_seen: datetime | int,
    now: datetime | int,
    *,
    last_seen: datetime | int | None = None,
    current_score: float | None = None,
    peak_score: float | None = None,
    silence_hours: float = 24.0,
) -> StoryPhase:
    """Story phase at event time ``now`` (docs/rules.md#story-phases): ``fading`` (more than
    ``silence_hours`` since the last mention, or the current score below half the peak, both
    positive), ``breaking`` (1 mention), ``developing`` (2-5 mentions and under 2 h old), else
    ``sustained``."""
    now_ms = _to_ms(now)
    if last_seen is not None and (now_ms - _to_ms(last_seen)) / HOUR_MS > silence_hours:
        return StoryPhase.FADING
    if (
        current_score is not None
        and peak_score is not None
        and current_score > 0
        and peak_score > 0
        and current_score < peak_score / 2
    ):
        return StoryPhase.FADING
    if mention_count <= 1:
        return StoryPhase.BREAKING
    if mention_count <= 5 and (now_ms - _to_ms(first_seen)) / HOUR_MS < 2.0:
        return StoryPhase.DEVELOPING
    return StoryPhase.SUSTAINED
