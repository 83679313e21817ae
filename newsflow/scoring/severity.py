"""The keyword severity classifier (critical .. info) with historical-date damping: the
severity profile of docs/rules.md#severity-profile.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from newsflow.core.timeutil import dt_to_ms, iso_to_ms
from newsflow.text.tokenize import _WORD_RE


def _to_ms(t: datetime | int | str) -> int:
    if isinstance(t, datetime):
        if t.tzinfo is None:
            msg = "naive datetime: pass a timezone-aware datetime"
            raise ValueError(msg)
        return dt_to_ms(t)
    if isinstance(t, str):
        return iso_to_ms(t)
    return int(t)


# --------------------------------------------------------------------------------------
# Optional severity profile
# --------------------------------------------------------------------------------------

SEVERITY_LEVELS: tuple[str, ...] = ("critical", "high", "medium", "low", "info")
SEVERITY_SCORES: Mapping[str, float] = {
    "critical": 100.0,
    "high": 75.0,
    "medium": 50.0,
    "low": 25.0,
    "info": 0.0,
}
# Tier T1..T4 -> 100/75/50/25 (no tier: as T4); T5 (unverified) gets 0.
SEVERITY_TIER_SCORES: Mapping[str, float] = {
    "T1": 100.0,
    "T2": 75.0,
    "T3": 50.0,
    "T4": 25.0,
    "T5": 0.0,
}
LIFESTYLE_EXCLUSIONS: tuple[str, ...] = (
    "protein", "couples", "relationship", "dating", "diet", "fitness", "recipe", "cooking",
    "shopping", "fashion", "celebrity", "movie", "tv show", "sports", "game", "concert",
    "festival", "wedding", "vacation", "travel tips", "life hack", "self-care", "wellness",
)  # fmt: skip
DEFAULT_SEVERITY_KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "critical": (
        "nuclear strike", "nuclear attack", "nuclear war", "invasion", "invades", "declares war",
        "declaration of war", "genocide", "coup", "martial law", "chemical attack",
        "chemical weapons", "mass casualty", "pandemic declared", "state of emergency",
        "assassinated", "assassination",
    ),
    "high": (
        "war", "attack", "airstrike", "air strike", "missile", "bombing", "explosion", "killed",
        "dead", "deaths", "death toll", "shooting", "hostage", "terrorist", "terrorism",
        "earthquake", "tsunami", "hurricane", "cyclone", "typhoon", "wildfire", "flood",
        "sanctions", "cyberattack", "cyber attack", "ransomware", "outbreak", "evacuation",
        "troops", "crash", "zero-day",
    ),
    "medium": (
        "protest", "riot", "strike", "election", "recession", "inflation", "layoffs", "breach",
        "vulnerability", "tariff", "default", "bankruptcy", "arrest", "indicted", "lawsuit",
        "recall", "resigns", "shortage", "drought", "storm", "virus", "hack",
    ),
    "low": (
        "talks", "summit", "meeting", "agreement", "deal", "forecast", "report", "policy",
        "regulation", "investigation", "proposal", "warning", "plan", "vote",
    ),
}  # fmt: skip
_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_MONTH_RE = "|".join(m[:3] + r"[a-z]*\.?" for m in _MONTHS)
_HIST_RE = re.compile(
    r"^\s*(?:science history|throwback|flashback)\b"
    r"|\bon this day(?: in \d{4})?\b|\bthis day in history\b"
    r"|\banniversary\b|\byears on\b"
    r"|\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty"
    r"|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred)\s+years\s+(?:ago|since|after)\b",
    re.IGNORECASE,
)
_DATE_MDY_RE = re.compile(rf"\b({_MONTH_RE})\s+(\d{{1,2}}),?\s+(\d{{4}})\b", re.IGNORECASE)
_DATE_DMY_RE = re.compile(rf"\b(\d{{1,2}})\s+({_MONTH_RE}),?\s+(\d{{4}})\b", re.IGNORECASE)
_DATE_ISO_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


@dataclass(frozen=True, slots=True)
class SeverityProfile:
    """The keyword classifier: levels, historical-marker downgrade, lifestyle exclusions."""

    keywords: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: dict(DEFAULT_SEVERITY_KEYWORDS)
    )
    exclusions: tuple[str, ...] = LIFESTYLE_EXCLUSIONS
    weights: tuple[float, float, float, float] = (0.55, 0.20, 0.15, 0.10)  # sev/tier/corr/rec
    recency_hours: float = 24.0  # linear 24 h curve, 0 after
    corroboration_cap: int = 5  # 20 points per source up to 5
    historical_years: float = 2.0

    def matcher(self) -> _KeywordMatcher:
        spec = tuple((lvl, tuple(self.keywords.get(lvl, ()))) for lvl in SEVERITY_LEVELS)
        got = _MATCHERS.get(spec)
        if got is None:
            got = _MATCHERS[spec] = _KeywordMatcher(spec)
        return got


def _base(w: str) -> str:
    """Crude inflection folding for keyword matching: attacks/attacked/attacking -> attack,
    wars -> war (but warning -> warn, not war), crashes -> crash, casualties -> casualty."""
    if len(w) > 5 and w.endswith("ing"):
        return w[:-3]
    if len(w) > 4 and w.endswith("ed"):
        return w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith(("sses", "shes", "ches", "xes", "zes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


class _KeywordMatcher:
    """Whole-word keyword lookup on folded title tokens (no giant regex alternation):
    single words via a dict, phrases via a space-joined token string."""

    def __init__(self, spec: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        self.words: dict[str, tuple[int, str]] = {}
        self.phrases: list[tuple[int, str, str]] = []
        for rank, (_lvl, kws) in enumerate(spec):
            for kw in kws:
                toks = [_base(t) for t in _WORD_RE.findall(kw.lower())]
                if len(toks) == 1:
                    self.words.setdefault(toks[0], (rank, kw))
                elif toks:
                    self.phrases.append((rank, f" {' '.join(toks)} ", kw))
        self.phrases.sort()
        self.levels = [lvl for lvl, _ in spec]

    def match(self, title: str) -> tuple[str, str] | None:
        """(level, keyword) of the most severe keyword in ``title``."""
        toks = [_base(t) for t in _WORD_RE.findall(title.lower())]
        best: tuple[int, str] | None = None
        for t in toks:
            hit = self.words.get(t)
            if hit is not None and (best is None or hit[0] < best[0]):
                best = hit
        if self.phrases:
            joined = f" {' '.join(toks)} "
            for rank, ph, kw in self.phrases:
                if best is not None and rank >= best[0]:
                    break
                if ph in joined:
                    best = (rank, kw)
                    break
        return (self.levels[best[0]], best[1]) if best else None


_MATCHERS: dict[tuple[Any, ...], _KeywordMatcher] = {}


@dataclass(frozen=True, slots=True)
class SeverityResult:
    level: str
    keyword: str | None
    historical_downgrade: bool
    excluded: bool  # lifestyle exclusion matched


def has_historical_marker(
    title: str, now: datetime | int | None = None, years: float = 2.0
) -> bool:
    """Retrospective markers (throwback, on this day, anniversary, ...) or a full date at least
    ``years`` before ``now`` (event time)."""
    if _HIST_RE.search(title):
        return True
    if now is None:
        return False
    now_dt = datetime.fromtimestamp(_to_ms(now) / 1000, tz=UTC)
    limit = now_dt - timedelta(days=365.25 * years)
    return any(d <= limit for d in _full_dates(title))


def _full_dates(text: str) -> list[datetime]:
    out = []
    for m in _DATE_MDY_RE.finditer(text):
        out.append((_month(m.group(1)), int(m.group(2)), int(m.group(3))))
    for m in _DATE_DMY_RE.finditer(text):
        out.append((_month(m.group(2)), int(m.group(1)), int(m.group(3))))
    for m in _DATE_ISO_RE.finditer(text):
        out.append((int(m.group(2)), int(m.group(3)), int(m.group(1))))
    res = []
    for mo, day, yr in out:
        try:
            res.append(datetime(yr, mo, day, tzinfo=UTC))
        except ValueError:
            continue
    return res


def _month(s: str) -> int:
    s = s[:3].lower()
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(s))


def severity_level(
    title: str, profile: SeverityProfile | None = None, now: datetime | int | None = None
) -> SeverityResult:
    """The keyword classifier on the title (docs/rules.md#severity-profile): lifestyle
    exclusions first (substring match -> info), then the most severe keyword level;
    critical/high with a historical marker -> info (``keyword-historical-downgrade``)."""
    p = profile or SeverityProfile()
    low = title.lower()
    if any(x in low for x in p.exclusions):
        return SeverityResult("info", None, False, True)
    hit = p.matcher().match(title)
    if hit is not None:
        lvl, kw = hit
        if lvl in ("critical", "high") and has_historical_marker(title, now, p.historical_years):
            return SeverityResult("info", kw, True, False)
        return SeverityResult(lvl, kw, False, False)
    return SeverityResult("info", None, False, False)
