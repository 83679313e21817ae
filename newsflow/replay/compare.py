"""What changes between two replays of one archive under two configurations (pure code).

Input: each run's records (``articles`` and ``digests`` topics, as dicts) and, per topic, how
many records it wrote and how many distinct keys they have. A key written more than once (a
revision, a re-emit) counts once where the comparison is of *things* (articles, stories,
windows): its last version wins, as under log compaction. Output: a :class:`Comparison`,
rendered by :mod:`newsflow.replay.report` as Markdown or as a standalone HTML page.

What is compared, in the order a reader of the digests would ask:

* **stories** (by the articles' ``story_id``, articles matched across runs by key): stories
  gained (no article of theirs in run A), lost, merged (articles of several A stories in one B
  story), split (one A story's articles in several B stories); size distribution and the
  largest stories;
* **briefs** (every digest type but ``rolling``): the windows whose top items changed;
* **dedup dispositions**: records and distinct articles per disposition, and the articles in
  both runs that moved from one disposition to another;
* **digest windows**, matched by overlap (:mod:`newsflow.replay.windows`): items added,
  removed, re-ranked and their score deltas, and why digests are empty (no article in the
  window, nothing above ``digests.min_importance``; Top Stories empty because no item reached
  ``digests.top_threshold``);
* **importance**: per-article score deltas (articles in both runs), the largest listed.

Deterministic: everything is sorted on stable keys, so the same two runs always give
byte-identical reports.
"""

from __future__ import annotations

import contextlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from newsflow.core.timeutil import iso_to_ms
from newsflow.replay.windows import (
    ItemChange,
    WindowGroup,
    diff_items,
    match_windows,
    nonzero,
    ranked_items,
)

__all__ = ["BRIEF_TOP", "Comparison", "DigestHealth", "ItemChange", "RunOutputs", "StoryChanges",
           "TopicCount", "WindowGroup", "compare", "diff_items", "digest_health", "run_outputs",
           "story_changes", "story_stats"]

JsonRecord = dict[str, Any]

#: story-size buckets of the size distribution (inclusive lower bound, label)
SIZE_BUCKETS: tuple[tuple[int, str], ...] = ((1, "1"), (2, "2"), (3, "3–5"), (6, "6–10"), (11, "11+"))
#: a brief's top items: the first ranks a reader sees
BRIEF_TOP = 5
ROLLING = "rolling"
DAY_MS = 86_400_000


# ------------------------------------------------------------------------------ inputs
@dataclass(frozen=True, slots=True)
class TopicCount:
    """What one run wrote to one topic: records, and distinct keys among them."""

    topic: str
    records: int
    keys: int


@dataclass(frozen=True, slots=True)
class RunOutputs:
    """One run's records (latest version per key, in order of first appearance), the records
    per disposition before that, per-topic counts, and the digest thresholds it ran with."""

    label: str
    articles: tuple[JsonRecord, ...]
    digests: tuple[JsonRecord, ...]
    deadletters: int = 0
    topics: tuple[TopicCount, ...] = ()
    disposition_records: tuple[tuple[str, int], ...] = ()
    top_threshold: float = 70.0
    min_importance: float = 15.0
    records_per_day: tuple[tuple[str, int], ...] = ()  # article records by the day of fetched_at


def _last_wins(records: Iterable[Mapping[str, Any]], key: str) -> tuple[JsonRecord, ...]:
    by: dict[str, JsonRecord] = {}
    for r in records:
        by[str(r.get(key))] = dict(r)  # dict keeps the first position, takes the last value
    return tuple(by.values())


def run_outputs(label: str, articles: Iterable[Mapping[str, Any]], digests: Iterable[Mapping[str, Any]],
                deadletters: int = 0, topics: Sequence[TopicCount] = (), *, top_threshold: float = 70.0,
                min_importance: float = 15.0) -> RunOutputs:
    arts = list(articles)
    recs = Counter(str(r.get("disposition")) for r in arts)
    return RunOutputs(label, _last_wins(arts, "key"), _last_wins(digests, "digest_id"), deadletters,
                      tuple(topics), tuple(sorted(recs.items())), top_threshold, min_importance,
                      tuple(sorted(_per_day(arts).items())))


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True, slots=True)
class StoryStats:
    stories: int
    articles: int
    buckets: tuple[int, ...]  # one count per SIZE_BUCKETS entry
    multi_publisher: int
    largest: tuple[tuple[int, str, str], ...]  # (size, story_id, a title), largest first


@dataclass(frozen=True, slots=True)
class StoryChange:
    """A story of one run and what became of its articles in the other."""

    kind: str  # merged | split
    story: str  # the merged B story / the split A story
    title: str
    size: int
    parts: int  # the stories of the other run its articles are in


@dataclass(frozen=True, slots=True)
class StoryChanges:
    same: int  # stories with the same articles in both runs
    gained: int  # B stories none of whose articles is in A
    lost: int  # A stories none of whose articles is in B
    merged: int  # B stories holding articles of several A stories
    split: int  # A stories whose articles are in several B stories
    examples: tuple[StoryChange, ...]  # the largest merges and splits


@dataclass(frozen=True, slots=True)
class ScoreChange:
    key: str
    title: str
    a: float
    b: float

    @property
    def delta(self) -> float:
        return round(self.b - self.a, 4)


@dataclass(frozen=True, slots=True)
class DigestHealth:
    """One run's digests of one type: how many, how many empty and why, Top Stories."""

    digest_type: str
    digests: int
    empty: int  # no item in any section
    empty_no_articles: int  # ... because no article fell in the window
    empty_below_min: int  # ... because no article scored digests.min_importance
    top_empty: int  # digests whose Top Stories section is empty
    best_score: float | None  # the best item score of all its digests
    window_minutes: int  # the median window length


@dataclass(frozen=True, slots=True)
class BriefChange:
    """A brief window (matched by overlap) whose top items differ."""

    digest_type: str
    start: str
    entered: tuple[str, ...]  # titles in B's top, not in A's
    left: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Comparison:
    label_a: str
    label_b: str
    articles: tuple[int, int]  # distinct article keys
    deadletters: tuple[int, int]
    only_a: int  # article keys only in run A
    only_b: int
    topics: tuple[tuple[str, TopicCount | None, TopicCount | None], ...]
    dispositions: tuple[tuple[str, int, int], ...]  # (disposition, articles A, articles B), last versions
    disposition_records: tuple[tuple[str, int, int], ...]  # (disposition, records A, records B)
    transitions: tuple[tuple[str, str, int], ...]  # (A disposition, B disposition, articles), A != B
    stories: tuple[StoryStats, StoryStats]
    story_changes: StoryChanges
    regrouped: int  # articles in both runs whose story co-members (among common articles) differ
    score_matched: int
    score_changed: int
    score_changes: tuple[ScoreChange, ...]  # delta != 0.00 at 2 decimals, largest |delta| first
    windows: tuple[WindowGroup, ...]
    briefs: tuple[BriefChange, ...]  # brief windows whose top items changed
    briefs_compared: int
    health: tuple[tuple[DigestHealth, ...], tuple[DigestHealth, ...]]
    thresholds: tuple[tuple[float, float], tuple[float, float]]  # (top, min importance) per run
    per_day: tuple[tuple[str, int, int], ...]  # (day, article records A, article records B)
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def windows_changed(self) -> tuple[WindowGroup, ...]:
        return tuple(w for w in self.windows if w.changed)


# ------------------------------------------------------------------------------ comparison
def story_stats(articles: Sequence[Mapping[str, Any]], top: int = 5) -> StoryStats:
    members: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in articles:
        members[str(r.get("story_id"))].append(r)
    buckets = [0] * len(SIZE_BUCKETS)
    multi = 0
    for recs in members.values():
        n = len(recs)
        i = max(j for j, (lo, _) in enumerate(SIZE_BUCKETS) if n >= lo)
        buckets[i] += 1
        if len({r.get("publisher") for r in recs}) > 1:
            multi += 1
    largest = sorted(((len(recs), sid, str(recs[0].get("title") or "")) for sid, recs in members.items()),
                     key=lambda t: (-t[0], t[1]))[:top]
    return StoryStats(len(members), len(articles), tuple(buckets), multi, tuple(largest))


def _story_members(recs: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    by: dict[str, list[str]] = defaultdict(list)
    for k in sorted(recs):
        by[str(recs[k].get("story_id"))].append(k)
    return by


def _lead_title(keys: Sequence[str], recs: Mapping[str, Mapping[str, Any]]) -> str:
    def imp(k: str) -> float:
        v = recs[k].get("importance")
        return float(v) if isinstance(v, int | float) else 0.0

    best = min(keys, key=lambda k: (-imp(k), k))
    return str(recs[best].get("title") or "")


def story_changes(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]],
                  top: int = 10) -> StoryChanges:
    """Stories of run A (article key -> record) vs run B's, through the articles they share."""
    sa, sb = _story_members(a), _story_members(b)
    same = gained = lost = merged = split = 0
    examples: list[StoryChange] = []
    for sid, keys in sa.items():
        parts = {str(b[k].get("story_id")) for k in keys if k in b}
        if not parts:
            lost += 1
        elif len(parts) > 1:
            split += 1
            examples.append(StoryChange("split", sid, _lead_title(keys, a), len(keys), len(parts)))
        elif sorted(sb[next(iter(parts))]) == keys:
            same += 1
    for sid, keys in sb.items():
        parts = {str(a[k].get("story_id")) for k in keys if k in a}
        if not parts:
            gained += 1
        elif len(parts) > 1:
            merged += 1
            examples.append(StoryChange("merged", sid, _lead_title(keys, b), len(keys), len(parts)))
    examples.sort(key=lambda c: (-c.size, -c.parts, c.kind, c.story))
    return StoryChanges(same, gained, lost, merged, split, tuple(examples[:top]))


def _regrouped(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]]) -> int:
    common = sorted(set(a) & set(b))

    def groups(recs: Mapping[str, Mapping[str, Any]]) -> dict[str, frozenset[str]]:
        by: dict[str, set[str]] = defaultdict(set)
        for k in common:
            by[str(recs[k].get("story_id"))].add(k)
        frozen = {sid: frozenset(ks) for sid, ks in by.items()}
        return {k: frozen[str(recs[k].get("story_id"))] for k in common}

    ga, gb = groups(a), groups(b)
    return sum(1 for k in common if ga[k] != gb[k])


def digest_health(digests: Sequence[Mapping[str, Any]]) -> tuple[DigestHealth, ...]:
    """Per digest type: empty digests and why, Top Stories, the best item score."""
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for d in digests:
        by[str(d.get("digest_type"))].append(d)
    out = []
    for kind in sorted(by):
        n = empty = no_art = below = top_empty = 0
        best: float | None = None
        lengths: list[int] = []
        for d in by[kind]:
            n += 1
            items = ranked_items(d)
            if not items:
                empty += 1
                if int(d.get("article_count") or 0) == 0:
                    no_art += 1
                elif int(d.get("selected_count") or 0) == 0:
                    below += 1
            top = [s for s in d.get("sections") or [] if s.get("name") == "Top Stories"]
            if not any(s.get("items") for s in top):
                top_empty += 1
            for _, it in items:
                s = it.get("score")
                if isinstance(s, int | float) and (best is None or s > best):
                    best = float(s)
            with contextlib.suppress(ValueError, OverflowError):
                lengths.append(iso_to_ms(str(d.get("window_end"))) - iso_to_ms(str(d.get("window_start"))))
        lengths.sort()
        minutes = lengths[len(lengths) // 2] // 60_000 if lengths else 0
        out.append(DigestHealth(kind, n, empty, no_art, below, top_empty, best, minutes))
    return tuple(out)


def _brief_changes(groups: Sequence[WindowGroup]) -> tuple[tuple[BriefChange, ...], int]:
    out = []
    compared = 0
    for g in groups:
        if g.digest_type == ROLLING or not g.ids_a or not g.ids_b:
            continue
        compared += 1
        in_a = {it.article_id for it in g.items if it.rank_a is not None and it.rank_a <= BRIEF_TOP}
        in_b = {it.article_id for it in g.items if it.rank_b is not None and it.rank_b <= BRIEF_TOP}
        if in_a == in_b:
            continue
        entered = tuple(it.title for it in sorted(g.items, key=lambda it: it.rank_b or 0)
                        if it.article_id in in_b - in_a)
        left = tuple(it.title for it in sorted(g.items, key=lambda it: it.rank_a or 0)
                     if it.article_id in in_a - in_b)
        out.append(BriefChange(g.digest_type, g.start, entered, left))
    return tuple(out), compared


def _per_day(recs: Iterable[Mapping[str, Any]]) -> Counter[str]:
    c: Counter[str] = Counter()
    for r in recs:
        t = str(r.get("fetched_at") or "")
        c[t[:10] if len(t) >= 10 else "?"] += 1
    return c


def compare(a: RunOutputs, b: RunOutputs, *, top: int = 20) -> Comparison:
    """Run A (the baseline) vs run B."""
    ka = {str(r.get("key")): r for r in a.articles}
    kb = {str(r.get("key")): r for r in b.articles}
    ca = Counter(str(r.get("disposition")) for r in a.articles)
    cb = Counter(str(r.get("disposition")) for r in b.articles)
    disps = tuple((d, ca.get(d, 0), cb.get(d, 0)) for d in sorted(set(ca) | set(cb)))
    ra, rb = dict(a.disposition_records), dict(b.disposition_records)
    disp_recs = tuple((d, ra.get(d, 0), rb.get(d, 0)) for d in sorted(set(ra) | set(rb)))
    common = sorted(set(ka) & set(kb))
    moves = Counter((str(ka[k].get("disposition")), str(kb[k].get("disposition"))) for k in common)
    transitions = tuple(sorted(((x, y, n) for (x, y), n in moves.items() if x != y),
                               key=lambda t: (-t[2], t[0], t[1])))
    changes = []
    matched = 0
    for k in common:
        sa, sb = ka[k].get("importance"), kb[k].get("importance")
        if isinstance(sa, int | float) and isinstance(sb, int | float):
            matched += 1
            if nonzero(sb - sa):
                changes.append(ScoreChange(k, str(kb[k].get("title") or ""), float(sa), float(sb)))
    changes.sort(key=lambda c: (-abs(c.delta), c.key))
    groups = match_windows(a.digests, b.digests)
    briefs, compared = _brief_changes(groups)
    ta, tb = {t.topic: t for t in a.topics}, {t.topic: t for t in b.topics}
    topic_order = [t.topic for t in a.topics] + [t.topic for t in b.topics if t.topic not in ta]
    da, db = dict(a.records_per_day), dict(b.records_per_day)
    return Comparison(
        label_a=a.label, label_b=b.label,
        articles=(len(a.articles), len(b.articles)),
        deadletters=(a.deadletters, b.deadletters),
        only_a=len(set(ka) - set(kb)), only_b=len(set(kb) - set(ka)),
        topics=tuple((t, ta.get(t), tb.get(t)) for t in topic_order),
        dispositions=disps, disposition_records=disp_recs, transitions=transitions,
        stories=(story_stats(a.articles), story_stats(b.articles)),
        story_changes=story_changes(ka, kb),
        regrouped=_regrouped(ka, kb),
        score_matched=matched, score_changed=len(changes),
        score_changes=tuple(changes[:top]) if top else tuple(changes),
        windows=groups, briefs=briefs, briefs_compared=compared,
        health=(digest_health(a.digests), digest_health(b.digests)),
        thresholds=((a.top_threshold, a.min_importance), (b.top_threshold, b.min_importance)),
        per_day=tuple((d, da.get(d, 0), db.get(d, 0)) for d in sorted(set(da) | set(db))),
    )
