"""The story decision (pure domain code): layers 3-4 (docs/rules.md#deduplication) against
candidate articles (:func:`decide`), and the best open story for an article's TF-IDF vector
(:func:`match_story_centroid`) under the vetoes and thresholds of its stream's regime
(:class:`Regime`). :class:`StoryState` is the keyed state of one story that the decision reads.

Ties always go to the earliest, then the smallest id: the result never depends on the order
candidates come in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import repeat
from operator import mul
from typing import Any, NamedTuple

from newsflow.core.hashing import stable_id
from newsflow.dedup.similarity import first_sentences_overlap, signature_jaccard
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_features import StoryFeatures
from newsflow.model.vocab import Disposition
from newsflow.runtime.pickling import fast_pickle

__all__ = [
    "Decision",
    "Regime",
    "StoryState",
    "centroid_cosine",
    "content_match",
    "decide",
    "match_story_centroid",
    "story_id_for",
    "title_layer_changes",
]

#: Layer 3: a title of fewer words than this needs ``title_threshold_short`` (docs/rules.md#layer-3-title-similarity)
SHORT_TITLE_WORDS = 5
#: Layer 4: MinHash Jaccard of two bodies that makes them near-duplicates (docs/rules.md#layer-4-body-fingerprints)
MINHASH_THRESHOLD = 0.7
#: Layer 4: "if 2+ of the first 3 non-trivial sentences match" -> near-duplicate (docs/rules.md#layer-4-body-fingerprints)
MIN_SENTENCE_MATCHES = 2
#: a story is a late-merge candidate when the article's cosine with it reaches this share of
#: its threshold: an article that reaches half of one story and passes another joins them
STORY_MERGE_REACH = 0.5
#: a story whose members named at least this many of the article's rare sure names ...
STORY_NAME_MIN_SHARED = 2
#: ... needs the threshold x this: columns and reactions that share few words with the news
#: share its names ("Neil Ferguson", "Angela Merkel")
STORY_NAME_BOOST = 0.5


class Decision(NamedTuple):
    disposition: Disposition
    layer: str | None  # title | content | story | None
    matched_ref: str | None
    score: float = 0.0


def title_layer_changes(new: StoryFeatures, old: StoryFeatures | None) -> list[str]:
    """The ``changed`` fields of a title-layer revision (a new item of the same publisher whose
    title matches a recent item's and whose body does not): ``title`` when the normalized titles
    differ, and always ``body`` (that is what made it a revision, not a near duplicate)."""
    return (["title"] if old is None or old.words != new.words else []) + ["body"]


def content_match(a: StoryFeatures, b: StoryFeatures) -> tuple[bool, float]:
    """Layer 4: body MinHash Jaccard >= 0.7, or 2+ of the first 3 sentences match (docs/rules.md#layer-4-body-fingerprints).
    ``(False, 0)`` when either body is missing."""
    if not a.body_sig or not b.body_sig:
        return False, 0.0
    score = signature_jaccard(a.body_sig, b.body_sig)
    ok = score >= MINHASH_THRESHOLD
    if not ok:
        ok = first_sentences_overlap(a.sentences, b.sentences) >= MIN_SENTENCE_MATCHES
    return ok, score


def decide(features: StoryFeatures, candidates: Sequence[StoryFeatures],
           config: StoryConfig) -> Decision:
    """The decision of layers 3-4 (docs/rules.md#deduplication) against candidate articles.

    In order (cheapest, most certain first; the best-scoring candidate of the first layer that
    fires wins, ties to the earliest then smallest ref, so the result is order-free):

    - Layer 3 "Title similarity >= threshold" (word-set Jaccard): ``near_duplicate`` (layer
      ``title``) — except "Title similarity >= 0.85 + content fingerprint mismatch" from the
      *same publisher*, which is the matrix's ``revision`` (an updated article).
    - Layer 4 "Content fingerprint match": ``near_duplicate`` (layer ``content``).
    - otherwise ``unique`` (story matching may still make it ``same_event``).
    """
    best: tuple[float, int, str, StoryFeatures] | None = None
    fw = set(features.words)
    for c in candidates:
        if c.ref == features.ref or not fw or not c.words:
            continue
        cw = set(c.words)
        inter = len(fw & cw)
        if inter == 0:
            continue
        s = inter / (len(fw) + len(cw) - inter)
        short = min(len(fw), len(cw)) < SHORT_TITLE_WORDS
        if s >= (config.title_threshold_short if short else config.title_threshold) and (
            best is None or (-s, c.time_ms, c.ref) < (-best[0], best[1], best[2])
        ):
            best = (s, c.time_ms, c.ref, c)
    if best is not None:
        c = best[3]
        if features.body_sig and c.body_sig and features.publisher == c.publisher:
            same, _ = content_match(features, c)
            if not same:
                return Decision(Disposition.REVISION, "title", c.ref, best[0])
        return Decision(Disposition.NEAR_DUPLICATE, "title", c.ref, best[0])

    if features.body_sig:
        best = None
        for c in candidates:
            if c.ref == features.ref:
                continue
            ok, s = content_match(features, c)
            if ok and (best is None or (-s, c.time_ms, c.ref) < (-best[0], best[1], best[2])):
                best = (s, c.time_ms, c.ref, c)
        if best is not None:
            return Decision(Disposition.NEAR_DUPLICATE, "content", best[2], best[0])
    return Decision(Disposition.UNIQUE, None, None, 0.0)


# --- stories ------------------------------------------------------------------------------


def story_id_for(first_article_id: str) -> str:
    """A new story's id, derived from its first article's id (stable across runs/workers)."""
    return "s" + stable_id("story", first_article_id)


#: loose name keys a story keeps
MAX_NAMES = 256


@fast_pickle
@dataclass(slots=True)
class StoryState:
    """Keyed state of one story (key: ``story_id``)."""

    story_id: str
    first_ref: str
    first_ms: int
    last_ms: int
    count: int = 0
    publishers: set[str] = field(default_factory=set)
    #: sum of the members' unit TF-IDF vectors, its heaviest terms (``max_terms`` of :meth:`add`)
    centroid: dict[str, float] = field(default_factory=dict)
    norm: float = 0.0
    #: calendar days named by the members' titles, per publisher (sorted "publisher|M-D" keys;
    #: the date veto)
    dates: tuple[str, ...] = ()
    #: what the members named (:func:`~newsflow.dedup.story_features.name_keys`, sure /
    #: loose; the name veto); no more are added once ``MAX_NAMES`` loose keys are kept (a big
    #: story vetoes less, never more)
    names: frozenset[str] = frozenset()
    name_words: frozenset[str] = frozenset()

    def add(self, publisher: str, time_ms: int, vec: Mapping[str, float], max_terms: int,
            dates: tuple[str, ...] = (), names: tuple[str, ...] = (),
            name_words: tuple[str, ...] = ()) -> None:
        """Add a member: count, publisher, times, title days, names, and its unit vector to
        the centroid sum. The centroid is pruned to its ``max_terms`` heaviest terms when it
        reaches twice that (amortized O(1) per term)."""
        self.count += 1
        if name_words:
            self.add_names(names, name_words)
        if dates:
            self.add_dates(tuple(f"{publisher}|{d}" for d in dates))
        if publisher:
            self.publishers.add(publisher)
        if time_ms > self.last_ms:
            self.last_ms = time_ms
        if time_ms < self.first_ms:
            self.first_ms = time_ms
        c = self.centroid
        sq = self.norm * self.norm
        for t, w in vec.items():
            old = c.get(t, 0.0)
            new = old + w
            c[t] = new
            sq += new * new - old * old
        if len(c) >= 2 * max_terms:
            keep = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:max_terms]
            self.centroid = dict(keep)
            sq = sum(w * w for _, w in keep)
        self.norm = math.sqrt(max(sq, 0.0))

    def add_dates(self, dates: tuple[str, ...]) -> None:
        old = self.day_keys()
        if not set(dates) <= set(old):
            self.dates = tuple(sorted({*old, *dates}))

    def add_names(self, names: Iterable[str], name_words: Iterable[str]) -> None:
        old, old_words = self.name_keys()
        if len(old_words) < MAX_NAMES and not (old_words.issuperset(name_words) and old.issuperset(names)):
            self.names, self.name_words = old | frozenset(names), old_words | frozenset(name_words)

    def name_keys(self) -> tuple[frozenset[str], frozenset[str]]:
        """``(sure, loose)`` names of the members (a state pickled before the fields: none)."""
        return getattr(self, "names", frozenset()), getattr(self, "name_words", frozenset())

    def names_other(self, names: tuple[str, ...], name_words: tuple[str, ...]) -> bool:
        """Whether an article naming ``names`` (sure) / ``name_words`` (loose) names only
        other things than this story's members: both sides have sure names, and neither
        side's sure names meet the other's loose ones."""
        sure, loose = self.name_keys()
        if not names or not sure:
            return False
        return loose.isdisjoint(names) and sure.isdisjoint(name_words)

    def day_keys(self) -> tuple[str, ...]:
        """The title days (a state pickled before the field has none)."""
        return getattr(self, "dates", ())

    def other_days(self, publisher: str, dates: tuple[str, ...]) -> bool:
        """Whether a title of ``publisher`` naming ``dates`` is another episode than this
        story's: the story has titles of that publisher naming days, and none of them is one of
        ``dates`` (:func:`~newsflow.text.titles.episode_keys`: a day with a programme's name is
        another episode than the same day with another name; a day without one matches any)."""
        if not dates:
            return False
        head = publisher + "|"
        own = [k[len(head):].partition("@") for k in self.day_keys() if k.startswith(head)]
        if not own:
            return False
        for d in dates:
            day, _, name = d.partition("@")
            if any(o_day == day and (not name or not o_name or name == o_name) for o_day, _, o_name in own):
                return False
        return True

    def snapshot(self) -> tuple[Any, ...]:
        return (self.story_id, self.first_ref, self.first_ms, self.last_ms, self.count,
                tuple(sorted(self.publishers)),
                tuple((t, round(w, 5)) for t, w in self.centroid.items()), self.day_keys(),
                *(tuple(sorted(k)) for k in self.name_keys()))

    @classmethod
    def restore(cls, snap: tuple[Any, ...]) -> StoryState:
        sid, first_ref, first_ms, last_ms, count, pubs, cent = snap[:7]
        st = cls(sid, first_ref, first_ms, last_ms, count, set(pubs), dict(cent))
        st.norm = math.sqrt(sum(w * w for w in st.centroid.values()))
        if len(snap) > 7:
            st.dates = tuple(snap[7])
        if len(snap) > 9:
            st.names, st.name_words = frozenset(snap[8]), frozenset(snap[9])
        return st



class Regime(NamedTuple):
    """How an article is matched to open stories on a sparse stream (a reader's own feeds:
    mostly singletons) or a redundant one (an aggregator: every event covered dozens of times);
    :class:`~newsflow.dedup.story_assigner.StoryAssigner` picks one per article."""

    #: a story accepts new members while its last member is younger than this
    idle_ms: int
    #: a story of n members needs threshold x n ** -decay (a big story's centroid is broader)
    decay: float
    #: a story whose only publisher is the article's own needs threshold x this: one outlet's
    #: recurring series ("Live updates", "Your Wednesday Briefing") share words across events
    same_publisher_factor: float
    #: distinct concepts an article must share with a story (a shared bigram and its two words
    #: are one concept): one shared name ("climate change", "Orange County") is a topic
    min_concepts: int
    #: the name veto and boost (:meth:`StoryState.names_other`, ``STORY_NAME_BOOST``)
    names: bool
    #: late merges (0: off): an article that passes two open stories whose centroids have at
    #: least this cosine merges them
    merge: float


def match_story_centroid(vec: Mapping[str, float], postings: Mapping[str, Iterable[str]],
                         stories: Mapping[str, StoryState], now_ms: int,
                         regime: Regime, threshold: float,
                         publisher: str | None = None,
                         passing: list[StoryState] | None = None,
                         dates: tuple[str, ...] = (),
                         names: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
                         rare_names: AbstractSet[str] = frozenset(),
                         ) -> tuple[StoryState | None, float]:
    """Best open story for a unit TF-IDF vector ``vec``.

    ``postings`` maps each term of ``vec`` to the stories indexed under it; the dot product
    with each story's centroid is accumulated term by term (only shared terms cost anything),
    then divided by the centroid norm (cosine). A story is open while its last member is less
    than ``regime.idle_ms`` old. Returns the best story when its cosine >= ``threshold``;
    ties go to the older story, then the smaller id (order-free). With ``dates`` (the days the
    article's title names), a story whose titles name only other days is not a match; with
    ``names`` (the article's sure and loose :func:`~newsflow.dedup.story_features.name_keys`)
    and ``regime.names``, a story whose members named only other things
    (:meth:`StoryState.names_other`) is not either, and a story whose members named
    ``STORY_NAME_MIN_SHARED`` of ``rare_names`` (the article's rare sure names) needs the
    threshold x ``STORY_NAME_BOOST``. With ``passing``, the stories it passes, and those it
    reaches ``STORY_MERGE_REACH`` of the threshold of, are appended to it (late merges)."""
    dots: dict[str, float] = {}
    concepts: dict[str, int] = {}
    count_concepts = regime.min_concepts > 0
    cents: dict[str, dict[str, float]] = {}
    cents_get, dots_get, stories_get = cents.get, dots.get, stories.get
    for t, sids in postings.items():  # in the order of vec's terms
        w = vec.get(t)
        if w is None:
            continue
        one = -1 if "_" in t else 1
        for sid in sids:
            c = cents_get(sid)
            if c is None:
                st = stories_get(sid)
                if st is None:
                    continue
                c = cents[sid] = st.centroid
            cw = c.get(t)
            if cw is not None:
                dots[sid] = dots_get(sid, 0.0) + w * cw
                if count_concepts:
                    concepts[sid] = concepts.get(sid, 0) + one
    best: StoryState | None = None
    best_s = 0.0
    decay = regime.decay
    same_pub = regime.same_publisher_factor
    reach = STORY_MERGE_REACH if passing is not None else 1.0
    name_veto = regime.names and bool(names[0])
    boost = STORY_NAME_BOOST if regime.names else 1.0
    if boost == 1.0 or len(rare_names) < STORY_NAME_MIN_SHARED:
        rare_names = frozenset()
    for sid, dot in dots.items():
        st = stories[sid]
        if now_ms - st.last_ms >= regime.idle_ms or st.norm <= 0.0:
            continue
        s = dot / st.norm
        thr = threshold * st.count ** -decay if decay else threshold
        if same_pub != 1.0 and publisher is not None and len(st.publishers) == 1 and \
                publisher in st.publishers:
            thr *= same_pub
        # most stories that share a term are far: dropped before the boost and the vetoes
        # (which only drop), when below the lowest threshold the boost could give
        if s < (thr * boost if boost < 1.0 else thr) * (reach if reach < 1.0 else 1.0):
            continue
        if rare_names and len(st.name_keys()[0] & rare_names) >= STORY_NAME_MIN_SHARED:
            thr *= boost
        near = s < thr and reach < 1.0 and s >= thr * reach  # near enough to be merged, not joined
        if s < thr and not near:
            continue
        if dates and st.other_days(publisher or "", dates):
            continue
        if name_veto and st.names_other(*names):
            continue
        if near:
            passing.append(st)  # type: ignore[union-attr]
            continue
        if count_concepts and concepts.get(sid, 0) < regime.min_concepts:
            continue
        if passing is not None:
            passing.append(st)
        if s > best_s or (best is not None and s == best_s and
                          (st.first_ms, st.story_id) < (best.first_ms, best.story_id)):
            best, best_s = st, s
    return best, best_s


def centroid_cosine(a: StoryState, b: StoryState) -> float:
    """Cosine of two stories' centroids (a late merge needs ``Regime.merge``)."""
    if a.norm <= 0.0 or b.norm <= 0.0:
        return 0.0
    small, big = (a.centroid, b.centroid) if len(a.centroid) <= len(b.centroid) else (b.centroid, a.centroid)
    # (the same products summed in the same order as a generator would, without its frames)
    dot: float = sum(map(mul, small.values(), map(big.get, small, repeat(0.0))))
    return dot / (a.norm * b.norm)
