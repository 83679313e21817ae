"""Online story ids (pure domain code): :class:`StoryAssigner` puts each article in a story.

Rules: docs/rules.md#layer-3-title-similarity, docs/rules.md#layer-4-body-fingerprints, docs/rules.md#stories. Per article,
in event order: candidates from the LSH band index (:mod:`~newsflow.dedup.story_index`),
layers 3-4 (:func:`~newsflow.dedup.story_decision.decide`), then, unless it is a copy of
another publisher's article, the open story whose TF-IDF centroid it is closest to
(:func:`~newsflow.dedup.story_decision.match_story_centroid`, IDF learned online from the
window: layer ``"story"``, disposition ``same_event``). How redundant the stream is (the share
of cross-publisher title near-duplicates) picks the threshold and the :class:`Regime` (see
docs/user-guide.md, "Stories", and ``bench/RESULTS.md`` for the measurements).

Event time only: "now" is always passed in; all state expires ``window_ms`` (72 h) after the
event time of its slab. The state is split the way a dataflow keys it, and the result does
not depend on the number of shards.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

from newsflow.dedup.story_config import SLAB_MS, StoryConfig
from newsflow.dedup.story_decision import (
    STORY_NAME_MIN_SHARED,
    Decision,
    Regime,
    StoryState,
    centroid_cosine,
    decide,
    match_story_centroid,
    story_id_for,
)
from newsflow.dedup.story_features import StoryFeatures, index_keys, story_terms
from newsflow.dedup.story_index import PACKED_V1, BandIndex, StoryPostings, key_shard, term_key
from newsflow.model.vocab import Disposition
from newsflow.runtime.pickling import from_columns, set_slots, to_columns

__all__ = ["StoryAssigner", "StoryAssignment"]

#: centroid terms kept per story (the heaviest): bounds state and scoring cost
CENTROID_MAX_TERMS = 128
#: the share of cross-publisher title near-duplicates at or below which a stream is sparse (a
#: reader's own feeds: ~0.2 %) and at or above which it is redundant (UCI: ~10 %)
REDUNDANCY_LOW = 0.004
REDUNDANCY_HIGH = 0.02
#: weight of the prior (pseudo-articles at the remembered rate, filled up at the low rate) in
#: the redundancy estimate: a young stream starts in the cautious, sparse regime
REDUNDANCY_MIN_ARTICLES = 200
#: sparse stream: a story whose only publisher is the article's own needs threshold x this
#: (one outlet's recurring series share words and boilerplate across events)
SAME_PUBLISHER_FACTOR = 1.2
#: sparse stream: concepts an article must share with a story (one shared name is a theme)
STORY_MIN_CONCEPTS = 2
#: redundant stream: a story of n members needs threshold x n ** -0.1 (an aggregator's big
#: stories have broad centroids a new rewording meets at a lower cosine; UCI 0.7586 -> 0.7628)
STORY_THRESHOLD_DECAY_DENSE = 0.1
#: redundant stream: an article that passes two open stories whose centroids have this cosine
#: merges them (UCI whole flow 0.7740 -> 0.7767 as emitted, 0.7967 -> 0.8164 as the stories
#: topic relabels merged members)
STORY_MERGE_DENSE = 0.2
#: sparse stream: a name is rare when in at most this share of the window's documents
#: ("Neil Ferguson", not "Trump"): a story sharing rare names needs a lower threshold
STORY_NAME_RARE_DF = 0.005

_DEFAULT = StoryConfig()


class StoryAssignment(NamedTuple):
    """What the assigner decided for one article (one record per input, duplicates included)."""

    ref: str
    story_id: str
    disposition: Disposition
    layer: str | None
    matched_ref: str | None  # article matched (layers 3-4) or the story's first article (story)
    score: float
    story_size: int
    story_publishers: int
    new_story: bool


class _Redundancy:
    """Articles and cross-publisher title near-duplicates over the window, per slab.

    Expired slabs are not forgotten entirely: they fold into a bounded memory of the stream's
    rate (at most ``REDUNDANCY_MIN_ARTICLES`` pseudo-articles, so the window still decides
    within its own span) that stands in for the fixed cautious prior. A stream that was
    redundant and goes quiet for longer than the window (UCI has 3-4 day gaps; a flow stopped
    over a weekend) resumes in the regime it had, instead of re-learning it from scratch and
    fragmenting the first stories of the day (``bench/eval_stories.py`` on UCI, ``bench/RESULTS.md``)."""

    __slots__ = ("_slabs", "dups", "mem_dups", "mem_n", "n", "slab_ms", "window_ms")

    def __init__(self, window_ms: int, slab_ms: int) -> None:
        self.window_ms, self.slab_ms = window_ms, slab_ms
        self.n = 0
        self.dups = 0
        #: memory of expired slabs: pseudo-articles and their near-duplicates (floats)
        self.mem_n = 0.0
        self.mem_dups = 0.0
        self._slabs: dict[int, list[int]] = {}

    def add(self, time_ms: int, near_duplicate: bool) -> None:
        slab = self._slabs.setdefault(time_ms // self.slab_ms, [0, 0])
        slab[0] += 1
        self.n += 1
        if near_duplicate:
            slab[1] += 1
            self.dups += 1

    def expire(self, now_ms: int) -> None:
        """Drop slabs older than the window and fold them into the memory of the rate, scaled
        to at most ``REDUNDANCY_MIN_ARTICLES`` pseudo-articles (oldest slab first)."""
        cutoff = now_ms - self.window_ms
        for s in sorted(s for s in self._slabs if (s + 1) * self.slab_ms <= cutoff):
            n, d = self._slabs.pop(s)
            self.n -= n
            self.dups -= d
            if n:
                mn, md = self.mem_n + n, self.mem_dups + d
                if mn > REDUNDANCY_MIN_ARTICLES:
                    md *= REDUNDANCY_MIN_ARTICLES / mn
                    mn = float(REDUNDANCY_MIN_ARTICLES)
                self.mem_n, self.mem_dups = mn, md

    def level(self) -> float:
        """How redundant the stream is: 0 (r <= ``REDUNDANCY_LOW``) to 1
        (r >= ``REDUNDANCY_HIGH``), log-linear in between."""
        lo, hi = REDUNDANCY_LOW, REDUNDANCY_HIGH
        # smoothed: REDUNDANCY_MIN_ARTICLES pseudo-articles at the remembered rate of expired
        # slabs (filled up at the low rate), so a young stream starts sparse (the cautious
        # regime) until its own near-duplicates say otherwise
        m = REDUNDANCY_MIN_ARTICLES
        mn = getattr(self, "mem_n", 0.0)
        md = getattr(self, "mem_dups", 0.0) if mn else 0.0
        prior = md + max(m - mn, 0.0) * lo
        r = (self.dups + prior) / (self.n + max(m, mn))
        if r <= lo:
            return 0.0
        if r >= hi:
            return 1.0
        return math.log(r / lo) / math.log(hi / lo)


class _TermStats:
    """Document frequencies over the window (IDF learned online from the stream), per slab."""

    __slots__ = ("_slabs", "df", "n", "slab_ms", "window_ms")

    def __init__(self, window_ms: int, slab_ms: int) -> None:
        self.window_ms, self.slab_ms = window_ms, slab_ms
        self.df: Counter[str] = Counter()
        self.n = 0
        self._slabs: dict[int, tuple[list[int], Counter[str]]] = {}

    def rare(self, terms: Iterable[str], max_df: float) -> frozenset[str]:
        """Those of ``terms`` found in at most ``max_df`` of the window's documents."""
        lim = max_df * self.n
        df = self.df
        return frozenset(t for t in terms if df.get(t, 0) <= lim)

    def idf(self, term: str) -> float:
        return math.log((self.n + 1) / (self.df.get(term, 0) + 0.5))

    def add_and_weigh(self, terms: Sequence[tuple[str, float]], time_ms: int) -> dict[str, float]:
        """Count the document, then its unit TF-IDF vector (positive weights only):
        w(t) = tf(t) * log((N + 1) / (df(t) + 0.5)), N and df over the window, this doc
        included."""
        slab = self._slabs.get(time_ms // self.slab_ms)
        if slab is None:
            slab = self._slabs[time_ms // self.slab_ms] = ([0], Counter())
        slab[0][0] += 1
        self.n += 1
        n1 = self.n + 1
        df = self.df
        keys = [t for t, _ in terms]
        df.update(keys)  # Counter.update over an iterable counts in C
        slab[1].update(keys)
        log = math.log
        raw = [(t, w * log(n1 / (df[t] + 0.5))) for t, w in terms]
        sq = 0.0
        for _, x in raw:
            sq += x * x
        if sq <= 0.0:
            return {}
        inv = 1.0 / math.sqrt(sq)
        return {t: x * inv for t, x in raw if x > 0}

    def expire(self, now_ms: int) -> None:
        cutoff = now_ms - self.window_ms
        for s in sorted(s for s in self._slabs if (s + 1) * self.slab_ms <= cutoff):
            count, sdf = self._slabs.pop(s)
            self.n -= count[0]
            df = self.df
            for t, c in sdf.items():
                left = df[t] - c
                if left:
                    df[t] = left
                else:
                    del df[t]

    def snapshot(self) -> tuple[Any, ...]:
        return tuple((s, c[0], tuple(d.items())) for s, (c, d) in sorted(self._slabs.items()))

    def __getstate__(self) -> tuple[Any, ...]:
        """Pickled without ``df`` and ``n``: they are the sums of the slabs' counts, rebuilt on
        load (``df`` was about half of this state in a snapshot)."""
        return (PACKED_V1, self.window_ms, self.slab_ms, self._slabs)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        if state[0] is None:  # pickled before __getstate__: (None, {slot: value})
            set_slots(self, state)
            return
        _, self.window_ms, self.slab_ms, self._slabs = state
        self.df = Counter()
        self.n = 0
        for s in sorted(self._slabs):
            count, sdf = self._slabs[s]
            self.n += count[0]
            self.df.update(sdf)


class StoryAssigner:
    """Layers 3-4 + story ids in one process, its state split the way a dataflow keys it.

    - ``band_shards`` :class:`BandIndex` shards, a bucket key routed by :func:`key_shard`;
    - article records (features of the window) and story states keyed by id;
    - story postings (term -> open stories) in :class:`StoryPostings` shards by term;
    - document frequencies for IDF.

    The result does not depend on the number of shards (tested). Call :meth:`assign` in event
    order with ``now_ms`` = the event-time watermark (defaults to the article's own time).
    """

    def __init__(self, config: StoryConfig = _DEFAULT, band_shards: int = 1) -> None:
        self.config = config
        self.band_shards = max(1, band_shards)
        self.bands = [BandIndex(config.window_ms, SLAB_MS, config.max_bucket)
                      for _ in range(self.band_shards)]
        self.postings = [StoryPostings(config.story_idle_ms, config.max_postings)
                         for _ in range(self.band_shards)]
        self.articles: dict[str, StoryFeatures] = {}
        self.story_of: dict[str, str] = {}
        self.stories: dict[str, StoryState] = {}
        self.terms = _TermStats(config.window_ms, SLAB_MS)
        self.redundancy = _Redundancy(config.window_ms, SLAB_MS)
        #: how stories are matched on a sparse and on a redundant stream
        self.sparse = Regime(config.story_idle_ms, 0.0, SAME_PUBLISHER_FACTOR, STORY_MIN_CONCEPTS,
                             names=True, merge=0.0)
        self.dense = Regime(config.story_idle_ms_dense, STORY_THRESHOLD_DECAY_DENSE, 1.0, 0,
                            names=False, merge=STORY_MERGE_DENSE)
        self._article_slabs: dict[int, list[str]] = {}
        #: story merged away -> the story it was merged into (story_merge_dense)
        self.merged: dict[str, str] = {}
        #: merges since the last take_merges(), in order: (merged away, into)
        self.merge_log: list[tuple[str, str]] = []
        self._now = -(1 << 62)
        self._expired_until = -(1 << 62)

    # -- pickling (recovery snapshots)
    def __getstate__(self) -> dict[str, Any]:
        """The attributes, with the window's article features as columns (one list per field,
        in the dict's order): a story shard is pickled every epoch with recovery on, and ~5k
        features pickled one object at a time took 20 of its ~45 ms at the end of 100k UCI
        rows (as columns: ~11)."""
        state = dict(self.__dict__)
        state["articles_columns"] = to_columns(state.pop("articles"), StoryFeatures)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        cols = state.pop("articles_columns", None)
        self.__dict__.update(state)
        if cols is not None:  # (a snapshot of before the columns keeps the dict itself)
            self.articles = from_columns(cols, StoryFeatures)

    # -- event time
    def advance(self, now_ms: int) -> None:
        """Move the event-time clock; expire state once per slab boundary."""
        if now_ms <= self._now:
            return
        self._now = now_ms
        cfg = self.config
        if now_ms - self._expired_until < SLAB_MS:
            return
        self._expired_until = now_ms
        for b in self.bands:
            b.expire(now_ms)
        for p in self.postings:
            p.expire(now_ms)
        self.terms.expire(now_ms)
        self.redundancy.expire(now_ms)
        cutoff = now_ms - cfg.window_ms
        for s in [s for s in self._article_slabs if (s + 1) * SLAB_MS <= cutoff]:
            for ref in self._article_slabs.pop(s):
                self.articles.pop(ref, None)
                self.story_of.pop(ref, None)
        for sid in [sid for sid, st in self.stories.items() if st.last_ms < cutoff]:
            del self.stories[sid]
        if self.merged:
            self.merged = {a: b for a, b in self.merged.items() if b in self.stories}

    def _merge(self, into: StoryState, other: StoryState) -> None:
        """Merge ``other`` into ``into`` (state only: articles already placed keep their ids;
        near-duplicates of them follow ``into`` from now on)."""
        c = into.centroid
        for t, w in other.centroid.items():
            c[t] = c.get(t, 0.0) + w
        if len(c) >= 2 * CENTROID_MAX_TERMS:
            into.centroid = dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:CENTROID_MAX_TERMS])
        into.norm = math.sqrt(sum(w * w for w in into.centroid.values()))
        into.count += other.count
        into.publishers |= other.publishers
        if other.day_keys():
            into.add_dates(other.day_keys())
        if other.name_keys()[1]:
            into.add_names(*other.name_keys())
        into.first_ms = min(into.first_ms, other.first_ms)
        into.last_ms = max(into.last_ms, other.last_ms)
        del self.stories[other.story_id]
        self.merged[other.story_id] = into.story_id
        self.merge_log.append((other.story_id, into.story_id))
        for a, b in self.merged.items():
            if b == other.story_id:
                self.merged[a] = into.story_id
        posted = [t for t in other.centroid if t in into.centroid]
        if posted:
            self._postings_add(posted, into.story_id, other.last_ms)

    def take_merges(self) -> list[tuple[str, str]]:
        """The merges since the last call, in order: ``(merged-away story, story it joined)``."""
        out, self.merge_log = self.merge_log, []
        return out

    # -- the pipeline
    def _lookup(self, keys: Sequence[int], shards: list[BandIndex],
                since_ms: int | None = None) -> list[tuple[Any, int]]:
        if self.band_shards == 1:
            return shards[0].lookup(keys, self._now, since_ms)
        out: list[tuple[Any, int]] = []
        n = self.band_shards
        for k in keys:  # key order, as the single-shard lookup
            out.extend(shards[key_shard(k, n)].lookup((k,), self._now, since_ms))
        return out

    def _insert(self, keys: Sequence[int], ref: Any, time_ms: int, shards: list[BandIndex],
                unique: bool = False) -> None:
        if self.band_shards == 1:
            shards[0].insert(keys, ref, time_ms, unique)
            return
        n = self.band_shards
        for k in keys:
            shards[key_shard(k, n)].insert((k,), ref, time_ms, unique)

    def candidates(self, features: StoryFeatures) -> list[StoryFeatures]:
        """Candidate articles: those sharing an LSH band key (title or body), most shared
        bands first, bounded by ``max_candidates`` so the cost per article does not grow with
        the window."""
        keys = index_keys(features)
        if not keys:
            return []
        hits = self._lookup(keys, self.bands)
        if not hits:
            return []
        arts = self.articles
        out: list[StoryFeatures] = []
        counts = Counter(ref for ref, _ in hits)
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        cap = self.config.max_candidates
        for r, _ in ranked:
            if r == features.ref or r not in arts:
                continue
            out.append(arts[r])
            if len(out) >= cap:
                break
        return out

    def _vector(self, features: StoryFeatures) -> dict[str, float]:
        return self.terms.add_and_weigh(story_terms(features), features.time_ms)

    def _postings_lookup(self, terms: Iterable[str], now_ms: int) -> dict[str, list[str]]:
        if self.band_shards == 1:
            return self.postings[0].lookup(terms, now_ms)
        n = self.band_shards
        out: dict[str, list[str]] = {}
        for t in terms:
            out.update(self.postings[term_key(t) % n].lookup((t,), now_ms))
        return out

    def _postings_add(self, terms: Sequence[str], sid: str, time_ms: int) -> None:
        if self.band_shards == 1:
            self.postings[0].add(terms, sid, time_ms)
            return
        n = self.band_shards
        for t in terms:
            self.postings[term_key(t) % n].add((t,), sid, time_ms)

    def keep_prior_story(self, features: StoryFeatures, duplicate_of: str | None) -> StoryAssignment | None:
        """Layers 1-2 (or the same article id again): a revision or a copy keeps the story of the
        article it repeats; it is re-indexed under its (possibly edited) title but is not a new
        member. ``None`` when the article repeats none this state knows."""
        ref = features.ref
        prior = duplicate_of if duplicate_of in self.story_of else (
            ref if ref in self.story_of else None)
        if prior is None:
            return None
        sid = self.story_of[prior]
        if self.merged:  # its story was merged away since: the story it joined
            sid = self.merged.get(sid, sid)
        decision = Decision(Disposition.REVISION if prior == ref else Disposition.EXACT_DUPLICATE,
                            "guid" if prior == ref else "url", prior, 1.0)
        return self._place(features, {}, sid, decision, new=False, member=False)

    def assign(self, features: StoryFeatures, now_ms: int | None = None,
               duplicate_of: str | None = None) -> StoryAssignment:
        """Decide and place one article. ``duplicate_of``: the article id that layers 1-2
        (GUID/URL) matched — a revision or exact duplicate keeps that article's story."""
        cfg = self.config
        self.advance(features.time_ms if now_ms is None else now_ms)
        now = self._now
        ref = features.ref
        kept = self.keep_prior_story(features, duplicate_of)
        if kept is not None:
            return kept
        vec = self._vector(features)

        cands = self.candidates(features)
        decision = decide(features, cands, cfg)
        # a near-duplicate of another publisher's article: a Layer 3/4 match of the same
        # publisher (another GUID and URL) is one outlet's series, and the centroid decides
        other_publisher = decision.matched_ref is not None and \
            self.articles[decision.matched_ref].publisher != features.publisher
        self.redundancy.add(features.time_ms, other_publisher and decision.layer == "title"
                            and decision.disposition == Disposition.NEAR_DUPLICATE)
        x = self.redundancy.level()
        thr = cfg.story_threshold + x * (cfg.story_threshold_dense - cfg.story_threshold)
        # a redundant stream: the sparse-stream guards are off
        regime = self.dense if x >= 0.5 else self.sparse
        story: StoryState | None = None
        if other_publisher:
            matched_sid = self.story_of.get(decision.matched_ref)  # type: ignore[arg-type]
            if matched_sid is not None and self.merged:
                matched_sid = self.merged.get(matched_sid, matched_sid)
            story = self.stories.get(matched_sid) if matched_sid is not None else None
            if story is not None and now - story.last_ms >= regime.idle_ms:
                story = None  # a copy of an article of a closed story joins an open one
            if story is not None and story.other_days(features.publisher, features.dates):
                # another episode of a dated series, not a copy of it
                story, decision = None, Decision(Disposition.UNIQUE, None, None, 0.0)
        if story is None and vec:
            postings = self._postings_lookup(vec, now)
            passing: list[StoryState] | None = [] if regime.merge else None
            rare: AbstractSet[str] = frozenset()
            if regime.names and len(features.names) >= STORY_NAME_MIN_SHARED:
                rare = self.terms.rare(features.names, STORY_NAME_RARE_DF)
            st, score = match_story_centroid(vec, postings, self.stories, now, regime, thr,
                                             features.publisher, passing, features.dates,
                                             (features.names, features.name_words), rare)
            if st is not None and passing:
                for other in sorted(passing, key=lambda o: o.story_id):
                    if other is not st and centroid_cosine(st, other) >= regime.merge:
                        self._merge(st, other)
            if st is not None:
                story = st
                if decision.matched_ref is None:
                    decision = Decision(Disposition.SAME_EVENT, "story", st.first_ref, score)
        if story is None:
            return self._place(features, vec, story_id_for(ref), decision, new=True)
        return self._place(features, vec, story.story_id, decision, new=False)

    def _place(self, features: StoryFeatures, vec: Mapping[str, float], sid: str,
               decision: Decision, new: bool, member: bool = True) -> StoryAssignment:
        ref = features.ref
        st = self.stories.get(sid)
        if st is None:
            # (a copy of an article whose story expired before the article did: the story
            # starts again with it as its one member, never with none)
            st = self.stories[sid] = StoryState(sid, ref, features.time_ms, features.time_ms)
            new = member = True
        if member:
            st.add(features.publisher, features.time_ms, vec, CENTROID_MAX_TERMS, features.dates,
                   features.names, features.name_words)
        else:  # a sighting of a known article: counts for distinct publishers only
            if features.publisher:
                st.publishers.add(features.publisher)
            st.last_ms = max(st.last_ms, features.time_ms)
        if vec:
            # post (or refresh) the story under this article's terms: an active story stays
            # findable by the words its recent members use
            cent = st.centroid
            posted = [t for t in vec if t in cent]
            if posted:
                self._postings_add(posted, sid, features.time_ms)
        if ref not in self.articles:
            self._article_slabs.setdefault(features.time_ms // SLAB_MS, []).append(ref)
        self._insert(index_keys(features), ref, features.time_ms, self.bands)
        # kept for the window as a candidate: what decide() reads of a candidate, without the
        # band keys and terms only an arriving article needs (a third of the bytes kept)
        f = features
        self.articles[ref] = StoryFeatures(f.ref, f.publisher, f.time_ms, f.words, (), (), f.body_sig,
                                           f.sentences)
        self.story_of[ref] = sid
        return StoryAssignment(ref, sid, decision.disposition, decision.layer,
                               decision.matched_ref, round(decision.score, 4), st.count,
                               len(st.publishers), new)

    # -- measurement
    def live_articles(self) -> int:
        return len(self.articles)

    def snapshot(self) -> tuple[Any, ...]:
        """Compact picklable state (used to measure bytes per article)."""
        arts = tuple(
            (f.ref, self.story_of.get(f.ref, ""), f.publisher, f.time_ms, " ".join(f.words),
             f.body_sig, f.sentences)
            for f in self.articles.values()
        )
        return (
            tuple(b.snapshot() for b in self.bands),
            tuple(p.snapshot() for p in self.postings),
            arts,
            tuple(st.snapshot() for st in self.stories.values()),
            self.terms.snapshot(),
        )
