"""The desk's state: the current stories, their member articles, the digests and feed health.

Fed one decoded record at a time (:meth:`Store.apply`) from either source (a replay's output
directory or the topics), read by the pages. A ``stories`` record replaces the story's previous
one (the topic is compacted: the latest record per story is its state); an ``expired`` record
or a tombstone removes the story, and one with ``merged_into`` also redirects its id to the
story it was merged into (``schemas/stories.v1.json``). Every change bumps :attr:`Store.version`
and records the version at which each story last changed, so a live page asks for what changed
since the version it shows (:meth:`Store.changes_since`).

Nothing here does I/O; one lock serialises the writer (the consumer thread) and the readers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from newsflow.core.timeutil import iso_to_ms
from newsflow.digest.health import FeedHealthAccumulator
from newsflow.digest.render import safe_url
from newsflow.model.vocab import FAILED_POLL_STATUSES
from newsflow.scoring.importance import DEFAULT_SCORE_CONFIG, recency_score, story_phase

#: bars of a story card's mention timeline
TIMELINE_BINS = 16
#: the shortest span a timeline covers (a story of one article still has a readable axis)
TIMELINE_MIN_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class Article:
    """What the desk keeps of an ``articles`` record (the body is not shown)."""

    article_id: str
    story_id: str
    publisher: str
    published_at: str
    title: str
    url: str | None
    disposition: str
    tier: str | None
    categories: tuple[str, ...]
    importance: float | None
    components: tuple[tuple[str, float], ...]
    weights: tuple[tuple[str, float], ...]


def article_of(rec: Mapping[str, Any]) -> Article:
    """The desk's view of an ``articles`` record; the link is kept only when it is http(s).

    >>> a = article_of({"article_id": "a1", "story_id": "s1", "publisher": "Wire", "title": "T",
    ...     "published_at": "2026-03-02T06:00:00Z", "url": "javascript:alert(1)", "disposition": "unique",
    ...     "categories": ["world"], "category": "news"})
    >>> a.url, a.categories
    (None, ('news', 'world'))
    """
    cats = [str(c) for c in rec.get("categories") or [] if c]
    if rec.get("category"):
        cats.insert(0, str(rec["category"]))
    imp = rec.get("importance")
    return Article(
        article_id=str(rec.get("article_id") or ""), story_id=str(rec.get("story_id") or ""),
        publisher=str(rec.get("publisher") or ""), published_at=str(rec.get("published_at") or ""),
        title=str(rec.get("title") or ""),
        url=safe_url(rec.get("canonical_url")) or safe_url(rec.get("url")),
        disposition=str(rec.get("disposition") or ""), tier=rec.get("tier") if isinstance(rec.get("tier"), str) else None,
        categories=tuple(dict.fromkeys(cats)),
        importance=float(imp) if isinstance(imp, int | float) else None,
        components=tuple((str(k), float(v)) for k, v in (rec.get("importance_components") or {}).items()),
        weights=tuple((str(k), float(v)) for k, v in (rec.get("importance_weights") or {}).items()))


@dataclass(frozen=True, slots=True)
class PhaseStep:
    """One entry of a story's phase history: the phase from ``at`` on, and the importance then."""

    at: str
    phase: str
    importance: float


@dataclass(frozen=True, slots=True)
class Filters:
    """The board's query: every given field must match (text search is case-insensitive)."""

    category: str = ""
    publisher: str = ""
    tier: str = ""
    phase: str = ""
    q: str = ""
    profile: str = ""

    @classmethod
    def of(cls, params: Mapping[str, str]) -> Filters:
        return cls(**{k: str(params.get(k, "")).strip()[:200] for k in cls.__slots__})

    def query(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k)}


@dataclass(slots=True)
class _Feed:
    last: dict[str, Any] = field(default_factory=dict)
    polled: str = ""  # the latest poll the poller reported
    parsed: str = ""  # the latest payload the flow parsed (a file replay has no poller)

    @property
    def last_poll(self) -> str:
        return self.polled or self.parsed


def as_of(rec: Mapping[str, Any], lead: Article | None, clock_ms: int | None) -> tuple[str, float]:
    """A story's phase and importance at the desk's clock (the latest event time it has seen).

    The flow writes a story's record when the story changes; the board shows every story as of
    the same moment: the phase by the flow's own rule (:func:`story_phase`,
    docs/rules.md#story-phases: fading after 24 h without a mention), the importance with the
    lead article's recency component aged to the clock (docs/rules.md#recency), never raised.

    >>> rec = {"importance": 70.0, "peak_importance": 70.0, "member_count": 4, "phase": "sustained",
    ...        "first_seen": "2026-03-01T06:00:00Z", "last_seen": "2026-03-01T08:00:00Z"}
    >>> lead = article_of({"article_id": "a", "story_id": "s", "publisher": "P", "title": "T",
    ...     "published_at": "2026-03-01T06:00:00Z", "disposition": "unique", "importance": 70.0,
    ...     "importance_components": {"recency": 100.0}, "importance_weights": {"recency": 0.2}})
    >>> as_of(rec, lead, iso_to_ms("2026-03-01T08:00:00Z"))
    (<StoryPhase.SUSTAINED: 'sustained'>, 68.8)
    >>> as_of(rec, lead, iso_to_ms("2026-03-02T09:00:00Z"))
    (<StoryPhase.FADING: 'fading'>, 58.9)
    """
    imp = rec.get("importance")
    importance = float(imp) if isinstance(imp, int | float) else 0.0
    first, last = _ms(rec.get("first_seen")), _ms(rec.get("last_seen"))
    if clock_ms is None or first is None or last is None:
        return str(rec.get("phase") or ""), round(importance, 1)
    comps, weights = (dict(lead.components), dict(lead.weights)) if lead else ({}, {})
    published = _ms(lead.published_at) if lead else None
    if "recency" in comps and "recency" in weights and published is not None:
        hours = (clock_ms - published) / 3_600_000
        aged = min(comps["recency"], recency_score(hours, DEFAULT_SCORE_CONFIG.lam))
        importance += weights["recency"] * (aged - comps["recency"])
    peak = rec.get("peak_importance")
    phase = story_phase(int(rec.get("member_count") or 0), first, max(clock_ms, last), last_seen=last,
                        current_score=importance,
                        peak_score=float(peak) if isinstance(peak, int | float) else None)
    return phase, round(importance, 1)


def timeline(times_ms: Iterable[int], start_ms: int, end_ms: int, bins: int = TIMELINE_BINS) -> list[int]:
    """Mentions per bin of ``[start_ms, end_ms]`` (widened to :data:`TIMELINE_MIN_MS`).

    >>> timeline([0, 10, 3_599_999, 3_600_000], 0, 3_600_000, bins=4)
    [2, 0, 0, 2]
    """
    span = max(end_ms - start_ms, TIMELINE_MIN_MS)
    out = [0] * bins
    for t in times_ms:
        i = (t - start_ms) * bins // span
        out[min(max(i, 0), bins - 1)] += 1
    return out


def profile_of(d: Mapping[str, Any]) -> str:
    """The profile a digest was ranked for (``profile.id``), "" for the general digests.

    >>> profile_of({"profile": {"id": "reader", "top_terms": []}}), profile_of({})
    ('reader', '')
    """
    p = d.get("profile")
    return str(p.get("id") or "") if isinstance(p, Mapping) else ""


def _ms(iso: Any) -> int | None:
    try:
        return iso_to_ms(str(iso))
    except (ValueError, TypeError):
        return None


class Store:
    """The current state of the desk (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.version = 0
        self.records = 0
        self.clock = ""  # the latest event time (updated_at) of any story record
        self._stories: dict[str, dict[str, Any]] = {}
        self._changed: dict[str, int] = {}  # story id -> version of its last change (also removals)
        self._redirect: dict[str, str] = {}
        self._merged_from: dict[str, set[str]] = {}
        self._history: dict[str, list[PhaseStep]] = {}
        self._articles: dict[str, Article] = {}
        self._by_story: dict[str, set[str]] = {}
        self._digests: dict[str, dict[str, Any]] = {}
        self._health = FeedHealthAccumulator()
        self._feeds: dict[str, _Feed] = {}

    # ---------------------------------------------------------------- writing
    def apply(self, topic: str, rec: Mapping[str, Any] | None, key: str | None = None) -> None:
        """One record of ``topic`` (a role: stories, articles, digests, feed-health); ``None``
        is a tombstone of ``key``."""
        with self.lock:
            self.records += 1
            if topic == "stories":
                self._story(rec, key)
            elif rec is None:
                return
            elif topic == "articles":
                self._article(rec)
            elif topic == "digests":
                if rec.get("digest_id"):
                    self._digests[str(rec["digest_id"])] = dict(rec)
                    self.version += 1
            elif topic == "feed-health":
                self._feed_health(rec)

    def _bump(self, sid: str) -> None:
        self.version += 1
        self._changed[sid] = self.version

    def _story(self, rec: Mapping[str, Any] | None, key: str | None) -> None:
        sid = str(rec.get("story_id") or "") if rec is not None else str(key or "")
        if not sid:
            return
        if rec is None or rec.get("status") == "expired":
            self._stories.pop(sid, None)
            target = rec.get("merged_into") if rec is not None else None
            if target:  # (its articles now count for the story it was merged into)
                self._redirect[sid] = str(target)
                self._merged_from.setdefault(str(target), set()).add(sid)
                if str(target) in self._stories:
                    self._bump(str(target))
            else:
                self._forget(sid)
            self._bump(sid)
            return
        self._redirect.pop(sid, None)
        self._stories[sid] = dict(rec)
        at, phase = str(rec.get("updated_at") or ""), str(rec.get("phase") or "")
        imp = rec.get("importance")
        hist = self._history.setdefault(sid, [])
        if not hist or hist[-1].phase != phase:
            hist.append(PhaseStep(at, phase, float(imp) if isinstance(imp, int | float) else 0.0))
        self.clock = max(self.clock, at)
        self._bump(sid)

    def _forget(self, sid: str) -> None:
        """Drop what the desk kept for a story that left (and the stories merged into it): its
        articles and phase history, so the state stays the size of the current stories."""
        for s in (sid, *self._merged_from.pop(sid, ())):
            for aid in self._by_story.pop(s, ()):
                self._articles.pop(aid, None)
            self._history.pop(s, None)

    def _article(self, rec: Mapping[str, Any]) -> None:
        a = article_of(rec)
        if not a.article_id:
            return
        old = self._articles.get(a.article_id)
        if old is not None and old.story_id != a.story_id:
            self._by_story.get(old.story_id, set()).discard(a.article_id)
        self._articles[a.article_id] = a
        self._by_story.setdefault(a.story_id, set()).add(a.article_id)
        if a.story_id in self._stories:  # (its timeline and members changed)
            self._bump(a.story_id)
        else:
            self.version += 1

    def _feed_health(self, rec: Mapping[str, Any]) -> None:
        fid = str(rec.get("feed_id") or "")
        if not fid:
            return
        self._health.add(rec)
        f = self._feeds.setdefault(fid, _Feed())
        at = str(rec.get("at") or "")
        if at >= str(f.last.get("at") or ""):
            f.last = dict(rec)
        if rec.get("source") == "poller":
            f.polled = max(f.polled, at)
        else:
            f.parsed = max(f.parsed, at)
        self.version += 1

    # ---------------------------------------------------------------- reading
    def resolve(self, sid: str) -> str:
        """The story ``sid`` is now: itself, or the story it was merged into (followed)."""
        with self.lock:
            seen = {sid}
            while sid in self._redirect and self._redirect[sid] not in seen:
                sid = self._redirect[sid]
                seen.add(sid)
            return sid

    def _members(self, sid: str) -> list[Article]:
        ids = set(self._stories.get(sid, {}).get("members") or [])
        for s in (sid, *self._merged_from.get(sid, ())):
            ids |= self._by_story.get(s, set())
        arts = [self._articles[i] for i in ids if i in self._articles]
        return sorted(arts, key=lambda a: (a.published_at, a.article_id))

    def _card(self, sid: str) -> dict[str, Any]:
        rec = self._stories[sid]
        lead = rec.get("lead") or {}
        members = self._members(sid)
        lead_art = self._articles.get(str(lead.get("article_id") or ""))
        first, last = _ms(rec.get("first_seen")), _ms(rec.get("last_seen"))
        times = [t for t in (_ms(a.published_at) for a in members) if t is not None]
        cats = sorted({c for a in members for c in a.categories})
        phase, importance = as_of(rec, lead_art, _ms(self.clock) if self.clock else None)
        return {
            "id": sid, "label": str(rec.get("label") or lead.get("title") or ""),
            "phase": phase, "importance": importance,
            "lead_title": str(lead.get("title") or ""), "lead_url": safe_url(lead.get("canonical_url")),
            "lead_publisher": str(lead.get("publisher") or ""),
            "lead_tier": (lead_art.tier if lead_art else None) or "",
            "lead_time": lead_art.published_at if lead_art else str(rec.get("first_seen") or ""),
            "publishers": [str(p) for p in rec.get("publishers") or []],
            "publisher_count": int(rec.get("publisher_count") or 0),
            "first_seen": str(rec.get("first_seen") or ""), "last_seen": str(rec.get("last_seen") or ""),
            "article_count": int(rec.get("member_count") or 0), "mentions": len(members),
            "tiers": [str(t) for t in rec.get("tiers") or []], "categories": cats,
            "timeline": timeline(times, first or 0, last or 0) if first is not None and last is not None else [],
        }

    def _profile_scores(self, profile: str) -> dict[str, float]:
        """Story id -> its score in the latest of the profile's digests that lists it."""
        scores: dict[str, float] = {}
        mine = [d for d in self._digests.values() if profile_of(d) == profile]
        for d in sorted(mine, key=lambda d: (str(d.get("window_start")), str(d.get("digest_id")))):
            for sec in d.get("sections") or []:
                for it in sec.get("items") or []:
                    if isinstance(it.get("score"), int | float):
                        for sid in it.get("story_ids") or []:
                            scores[str(sid)] = float(it["score"])
        return scores

    @staticmethod
    def _matches(card: Mapping[str, Any], f: Filters, titles: str) -> bool:
        if f.phase and card["phase"] != f.phase:
            return False
        if f.tier and f.tier not in card["tiers"]:
            return False
        if f.category and f.category not in card["categories"]:
            return False
        if f.publisher and f.publisher not in card["publishers"] and f.publisher != card["lead_publisher"]:
            return False
        if f.q:
            hay = " ".join((card["label"], card["lead_title"], card["lead_publisher"], *card["publishers"], titles))
            return f.q.casefold() in hay.casefold()
        return True

    def matching(self, f: Filters) -> list[dict[str, Any]]:
        """The cards of the current stories matching ``f``, ranked by importance, or with a
        profile by its score in the profile's digests (the stories they never listed after)."""
        with self.lock:
            cards = []
            for sid in self._stories:
                card = self._card(sid)
                titles = " ".join(a.title for a in self._members(sid)) if f.q else ""
                if self._matches(card, f, titles):
                    cards.append(card)
            scores = self._profile_scores(f.profile) if f.profile else {}
            for c in cards:
                c["relevance"] = scores.get(c["id"])
            cards.sort(key=lambda c: (-(c["relevance"] if c["relevance"] is not None else -1.0),
                                      -c["importance"], c["id"]))
            return cards

    def changes_since(self, version: int) -> list[str]:
        """The ids of the stories changed (or removed) after ``version``."""
        with self.lock:
            return sorted(s for s, v in self._changed.items() if v > version)

    def facets(self) -> dict[str, list[str]]:
        """The values the board's filters offer: categories, publishers, tiers, phases, profiles."""
        with self.lock:
            cats: dict[str, int] = {}
            pubs: set[str] = set()
            for sid, rec in self._stories.items():
                pubs.update(str(p) for p in rec.get("publishers") or [])
                for c in {c for a in self._members(sid) for c in a.categories}:
                    cats[c] = cats.get(c, 0) + 1
            top = sorted(cats, key=lambda c: (-cats[c], c))[:40]
            return {"category": sorted(top), "publisher": sorted(pubs), "tier": ["T1", "T2", "T3", "T4", "T5"],
                    "phase": ["breaking", "developing", "sustained", "fading"],
                    "profile": sorted({profile_of(d) for d in self._digests.values()} - {""})}

    def story(self, sid: str) -> dict[str, Any] | None:
        """A story page's data: its card, members, tiers, importance components, phase history."""
        with self.lock:
            if sid not in self._stories:
                return None
            card = self._card(sid)
            rec = self._stories[sid]
            lead = self._articles.get(str((rec.get("lead") or {}).get("article_id") or ""))
            members = self._members(sid)
            sources: dict[str, str] = {}
            for a in members:
                sources.setdefault(a.publisher, a.tier or "")
            return {**card, "status": rec.get("status"), "updated_at": rec.get("updated_at"),
                    "peak_importance": rec.get("peak_importance"), "members": members,
                    "sources": sorted(sources.items(), key=lambda kv: (kv[1] or "T9", kv[0])),
                    "components": [(k, v, dict(lead.weights).get(k)) for k, v in lead.components] if lead else [],
                    "history": list(self._history.get(sid, [])),
                    "merged_from": sorted(self._merged_from.get(sid, ()))}

    def digests(self) -> tuple[list[dict[str, Any]], dict[tuple[str, str], dict[str, Any]], list[dict[str, Any]]]:
        """The latest digest of each type (the general ones, then each profile's), the latest
        closed (``final``) one of each type by (profile, type), and the archive: every digest,
        newest window first."""
        with self.lock:
            latest: dict[tuple[str, str], dict[str, Any]] = {}
            closed: dict[tuple[str, str], dict[str, Any]] = {}
            for d in self._digests.values():
                k = (profile_of(d), str(d.get("digest_type")))
                for into in (latest, closed) if d.get("final") is not False else (latest,):
                    if k not in into or str(d.get("window_start")) > str(into[k].get("window_start")):
                        into[k] = d
            archive = sorted(self._digests.values(), key=lambda d: (str(d.get("window_start")), str(d["digest_id"])),
                             reverse=True)
            return [latest[k] for k in sorted(latest)], closed, archive

    def digest(self, digest_id: str) -> dict[str, Any] | None:
        with self.lock:
            return self._digests.get(digest_id)

    def feeds(self) -> list[dict[str, Any]]:
        """One row per feed: broken (its latest status a failed poll) first, then unhealthy
        (:class:`newsflow.digest.health.FeedHealthAccumulator`'s rule), then by success rate."""
        with self.lock:
            rows = []
            for r in self._health.summary(max_rows=len(self._feeds) + 1)["feeds"]:
                f = self._feeds.get(r["feed_id"], _Feed())
                broken = str(f.last.get("status")) in FAILED_POLL_STATUSES
                rows.append({**r, "broken": broken, "status": f.last.get("status"), "at": f.last.get("at"),
                             "last_poll": f.last_poll, "url": safe_url(f.last.get("url")),
                             "http_status": f.last.get("http_status"), "message": f.last.get("message"),
                             "next_poll_at": f.last.get("next_poll_at")})
            rows.sort(key=lambda r: (not r["broken"], not r["unhealthy"],
                                     r["success_rate"] if r["success_rate"] is not None else 2.0, r["feed_id"]))
            return rows

    def counts(self) -> dict[str, int]:
        with self.lock:
            return {"stories": len(self._stories), "articles": len(self._articles),
                    "digests": len(self._digests), "feeds": len(self._feeds), "records": self.records}
