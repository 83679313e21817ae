"""The learned story decision: :class:`LearnedStoryAssigner` (pure domain code).

The same state as :class:`~newsflow.dedup.story_assigner.StoryAssigner` (band index, story postings,
story centroids, IDF over the window; layers 3-4 decide the dispositions), with one story
decision in place of the hand-tuned cascade: every open candidate story (those sharing terms with
the article in the story postings, the ``max_candidates`` of highest cosine, and the story of its
layer 3-4 near-duplicate) gets the pair features of :func:`~learned_stories.story_model.pair_features`
and the logistic model's P(same story) (:class:`~learned_stories.story_model.StoryModel`).
Trained and measured leave-one-day-out by ``bench/train_story_model.py`` and
``bench/cv_stories.py`` (``bench/RESULTS.md``).

Event time only, stable order (candidates in story-id order, floats summed in one order): the
same input gives the same stories for any number of shards, workers or processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from learned_stories.story_model import StoryModel, char_ngrams, jaccard, load_model, pair_features
from newsflow.dedup.story_assigner import StoryAssigner, StoryAssignment
from newsflow.dedup.story_config import SLAB_MS, StoryConfig
from newsflow.dedup.story_decision import Decision, StoryState, decide, story_id_for
from newsflow.dedup.story_features import StoryFeatures
from newsflow.model.vocab import Disposition

#: the flow's story configuration (the defaults)
CONFIG = StoryConfig()

__all__ = ["RECENT_MEMBERS", "LearnedStoryAssigner"]

#: recent members a story keeps the ids of (its closest member is one of them)
RECENT_MEMBERS = 8


class LearnedStoryAssigner(StoryAssigner):
    """:class:`StoryAssigner` whose story decision is the learned pair model."""

    def __init__(self, config: StoryConfig = CONFIG, band_shards: int = 1,
                 model: StoryModel | None = None) -> None:
        super().__init__(config, band_shards)
        #: the pair model (default: the one shipped in the package)
        self.model = model if model is not None else load_model()
        #: training only (``bench/train_story_model.py``): picks the story instead of the model
        self.teacher: Callable[[StoryFeatures, list[tuple[StoryState, list[float]]]],
                               StoryState | None] | None = None
        #: story id -> its most recent members' ids (newest last)
        self.recent: dict[str, tuple[str, ...]] = {}

    def assign(self, features: StoryFeatures, now_ms: int | None = None,
               duplicate_of: str | None = None) -> StoryAssignment:
        """Decide and place one article. ``duplicate_of``: the article id that layers 1-2
        (GUID/URL) matched — a revision or exact duplicate keeps that article's story. The
        article joins the candidate story of highest P(same story) >= the model's threshold
        (ties: the older story, then the smaller id), else starts one; another candidate with
        P >= the merge threshold is merged into the one it joins."""
        self.advance(features.time_ms if now_ms is None else now_ms)
        now = self._now
        ref = features.ref
        kept = self.keep_prior_story(features, duplicate_of)
        if kept is not None:
            return kept
        cfg = self.config
        vec, title_part, body_part = self._vectors(features)
        cands = self.candidates(features)
        decision = decide(features, cands, cfg)
        near_sid = None
        if decision.matched_ref is not None:
            near_sid = self.story_of.get(decision.matched_ref)
            if near_sid is not None and self.merged:
                near_sid = self.merged.get(near_sid, near_sid)
        scored = self._candidate_stories(features, vec, title_part, body_part, near_sid, now)
        model = self.model
        if self.teacher is not None:
            story = self.teacher(features, scored)
        else:
            story, best_p, second = None, -1.0, []
            for st, x in scored:
                p = model.probability(x)
                if p < model.threshold:
                    continue
                if p > best_p or (p == best_p and story is not None and
                                  (st.first_ms, st.story_id) < (story.first_ms, story.story_id)):
                    if story is not None:
                        second.append((best_p, story))
                    story, best_p = st, p
                else:
                    second.append((p, st))
            if story is not None:
                if decision.matched_ref is None or near_sid != story.story_id:
                    decision = Decision(Disposition.SAME_EVENT, "story", story.first_ref, best_p)
                for p, other in sorted(second, key=lambda po: po[1].story_id):
                    if p >= model.merge_threshold and other.story_id in self.stories:
                        self._merge(story, other)
        if story is None:
            return self._place(features, vec, story_id_for(ref), decision, new=True)
        return self._place(features, vec, story.story_id, decision, new=False)

    def _vectors(self, features: StoryFeatures
                 ) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """The article's unit TF-IDF vector (title, bigram and URL-slug terms with the summary
        lead's) and its title and body parts (each term's weight split by its tf shares)."""
        body = features.body_terms
        if not body:
            full = self.terms.add_and_weigh(features.terms, features.time_ms)
            return full, full, {}
        merged = dict(features.terms)
        for t, w in body:
            merged[t] = merged.get(t, 0.0) + w
        full = self.terms.add_and_weigh(sorted(merged.items()), features.time_ms)
        title_tf = dict(features.terms)
        title: dict[str, float] = {}
        bpart: dict[str, float] = {}
        for t, w in full.items():
            tt = title_tf.get(t, 0.0)
            share = tt / merged[t]
            if tt:
                title[t] = w * share
            if share < 1.0:
                bpart[t] = w * (1.0 - share)
        return full, title, bpart

    def _candidate_stories(self, features: StoryFeatures, vec: Mapping[str, float],
                           title: Mapping[str, float], body: Mapping[str, float],
                           near_sid: str | None, now: int) -> list[tuple[StoryState, list[float]]]:
        """The open stories the article could join with the pair features of each: those
        sharing a term with it (story postings, the ``max_candidates`` of highest cosine) and
        the story of its layer 3-4 near-duplicate. In story-id order."""
        cfg = self.config
        stories = self.stories
        dots: dict[str, list[Any]] = {}
        inv_top = 1.0 / math.log(self.terms.n + 1.5)
        if vec:
            for t, sids in self._postings_lookup(vec, now).items():
                w = vec[t]
                wt = title.get(t, 0.0)
                wb = body.get(t, 0.0)
                bi = 4 if "_" in t else 3
                idf = self.terms.idf(t) * inv_top
                for sid in sids:
                    st = stories.get(sid)
                    if st is None:
                        continue
                    cw = st.centroid.get(t)
                    if cw is None:
                        continue
                    d = dots.get(sid)
                    if d is None:
                        d = dots[sid] = [0.0, 0.0, 0.0, 0, 0, 0.0]
                    d[0] += w * cw
                    d[1] += wt * cw
                    d[2] += wb * cw
                    d[bi] += 1
                    if idf > d[5]:
                        d[5] = idf
        idle = cfg.story_idle_ms
        live = [(d[0] / stories[sid].norm, sid) for sid, d in dots.items()
                if stories[sid].norm > 0.0 and now - stories[sid].last_ms < idle]
        live.sort(key=lambda cs: (-cs[0], cs[1]))
        keep = [sid for _, sid in live[:cfg.max_candidates]]
        if near_sid is not None and near_sid in stories and near_sid not in keep and \
                now - stories[near_sid].last_ms < idle:
            keep.append(near_sid)
        if not keep:
            return []
        tn = math.sqrt(sum(w * w for w in title.values()))
        bn = math.sqrt(sum(w * w for w in body.values())) if body else 0.0
        words = set(features.words)
        grams = char_ngrams(features.title_norm)
        numbers = {w for w in words if any(ch.isdigit() for ch in w)}
        names, name_words = features.names, features.name_words
        arts = self.articles
        out = []
        for sid in sorted(keep):
            st = stories[sid]
            d = dots.get(sid) or [0.0, 0.0, 0.0, 0, 0, 0.0]
            mj = mc = 0.0
            member_numbers: set[str] = set()
            for r in self.recent.get(sid, ()):
                m = arts.get(r)
                if m is None:
                    continue
                mw = set(m.words)
                mj = max(mj, jaccard(words, mw))
                mc = max(mc, jaccard(grams, char_ngrams(m.title_norm)))
                if numbers:
                    member_numbers |= mw & numbers
            sure, loose = st.name_keys()
            shared = len(loose.intersection(names) | sure.intersection(name_words)) if names or name_words else 0
            out.append((st, pair_features(
                dot_full=d[0], dot_title=d[1], dot_body=d[2], norm=st.norm, count=st.count,
                shared_words=d[3], shared_bigrams=d[4], rarest_shared=d[5],
                title_norm=tn, body_norm=bn, member_jaccard=mj, member_char3=mc,
                shared_names=shared, names_other=st.names_other(names, name_words),
                other_days=st.other_days(features.publisher, features.dates),
                shared_numbers=len(member_numbers), gap_ms=now - st.last_ms,
                publishers=len(st.publishers),
                own_publisher_only=len(st.publishers) == 1 and features.publisher in st.publishers,
                near_duplicate=sid == near_sid)))
        return out

    def _place(self, features: StoryFeatures, vec: Mapping[str, float], sid: str,
               decision: Decision, new: bool, member: bool = True) -> StoryAssignment:
        out = super()._place(features, vec, sid, decision, new, member)
        if member or out.story_size == 1:
            r = self.recent.get(sid, ())
            if features.ref not in r:
                self.recent[sid] = (*r[-(RECENT_MEMBERS - 1):], features.ref)
        return out

    def _merge(self, into: StoryState, other: StoryState) -> None:
        super()._merge(into, other)
        r = self.recent.get(into.story_id, ())
        for ref in self.recent.pop(other.story_id, ()):
            if ref not in r:
                r = (*r[-(RECENT_MEMBERS - 1):], ref)
        self.recent[into.story_id] = r

    def advance(self, now_ms: int) -> None:
        expired = now_ms > self._now and now_ms - self._expired_until >= SLAB_MS
        super().advance(now_ms)
        if expired:
            self.recent = {sid: r for sid, r in self.recent.items() if sid in self.stories}
