"""The learned pair model as a precision gate on the cascade: :class:`GatedStoryAssigner`.

The hand-tuned cascade (:meth:`~newsflow.dedup.story_assigner.StoryAssigner.assign`) proposes the
story an article joins (through a layer 3-4 near-duplicate or the story centroid) and the
stories a dense stream merges into it; the pair model
(:class:`~learned_stories.story_model.StoryModel`, the features of
:func:`~learned_stories.story_model.pair_features` against the proposed story as it is before the
article joins) vetoes: a join with P(same story) below the gate's threshold starts a story
instead, a merge whose merged-away story the article is below the threshold with is refused.
The model is trained on the cascade's own proposals (``bench/train_story_model.py``'s
:func:`gate_pairs`), so it learns the cascade's false joins. Measured leave-one-day-out by
``bench/cv_stories.py`` (``bench/RESULTS.md``).

Event time only, the cascade's order, floats summed in the order of the article's terms: the
same input gives the same stories for any number of shards, workers or processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from learned_stories.story_learned import LearnedStoryAssigner
from learned_stories.story_model import StoryModel, char_ngrams, jaccard, pair_features
from newsflow.dedup.story_assigner import StoryAssigner, StoryAssignment
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_decision import Decision, StoryState, story_id_for
from newsflow.dedup.story_features import StoryFeatures
from newsflow.model.vocab import Disposition

#: the flow's story configuration (the defaults)
CONFIG = StoryConfig()

__all__ = ["GatedStoryAssigner"]


class GatedStoryAssigner(LearnedStoryAssigner):
    """The cascade's story decision, each join and merge it proposes vetoed by the pair model
    when P(same story) < ``threshold`` (the model's own threshold unless given)."""

    def __init__(self, config: StoryConfig = CONFIG, band_shards: int = 1,
                 model: StoryModel | None = None, threshold: float | None = None) -> None:
        super().__init__(config, band_shards, model)
        self.gate_threshold = self.model.threshold if threshold is None else threshold
        #: training only: (article, proposed story, pair features) -> accept the proposal
        self.judge: Callable[[StoryFeatures, StoryState, list[float]], bool] | None = None
        self._current: StoryFeatures | None = None
        self._parts: tuple[dict[str, float], dict[str, float]] | None = None
        self._vec: Mapping[str, float] = {}
        #: proposals seen / vetoed (joins and merges)
        self.proposed = 0
        self.vetoed = 0

    def assign(self, features: StoryFeatures, now_ms: int | None = None,
               duplicate_of: str | None = None) -> StoryAssignment:
        self._current, self._parts, self._vec = features, None, {}
        try:
            return StoryAssigner.assign(self, features, now_ms, duplicate_of)
        finally:
            self._current, self._parts, self._vec = None, None, {}

    def _vector(self, features: StoryFeatures) -> dict[str, float]:
        vec = super()._vector(features)
        self._vec = vec
        return vec

    def _accept(self, st: StoryState, near_duplicate: bool) -> bool:
        f = self._current
        assert f is not None
        x = self._features(f, st, near_duplicate)
        self.proposed += 1
        ok = self.judge(f, st, x) if self.judge is not None else \
            self.model.probability(x) >= self.gate_threshold
        if not ok:
            self.vetoed += 1
        return ok

    def _merge(self, into: StoryState, other: StoryState) -> None:
        if self._current is not None and self._vec and not self._accept(other, False):
            return
        super()._merge(into, other)

    def _place(self, features: StoryFeatures, vec: Mapping[str, float], sid: str,
               decision: Decision, new: bool, member: bool = True) -> StoryAssignment:
        st = self.stories.get(sid)
        if not new and member and st is not None and self._current is not None:
            near = False
            if decision.matched_ref is not None:
                msid = self.story_of.get(decision.matched_ref)
                if msid is not None and self.merged:
                    msid = self.merged.get(msid, msid)
                near = msid == sid
            if not self._accept(st, near):
                d = decision if decision.layer != "story" and decision.disposition != Disposition.SAME_EVENT \
                    else Decision(Disposition.UNIQUE, None, None, 0.0)
                return super()._place(features, vec, story_id_for(features.ref), d, new=True)
        return super()._place(features, vec, sid, decision, new, member)

    def _split(self, f: StoryFeatures) -> tuple[dict[str, float], dict[str, float]]:
        """The title and body parts of the article's unit vector (each term's weight split by
        its tf shares), as :meth:`LearnedStoryAssigner._vectors` splits them."""
        if self._parts is None:
            vec = self._vec
            if not f.body_terms:
                self._parts = (dict(vec), {})
            else:
                title_tf = dict(f.terms)
                merged = dict(f.terms)
                for t, w in f.body_terms:
                    merged[t] = merged.get(t, 0.0) + w
                title: dict[str, float] = {}
                body: dict[str, float] = {}
                for t, w in vec.items():
                    tt = title_tf.get(t, 0.0)
                    share = tt / merged[t] if merged.get(t) else 1.0
                    if tt:
                        title[t] = w * share
                    if share < 1.0:
                        body[t] = w * (1.0 - share)
                self._parts = (title, body)
        return self._parts

    def _features(self, f: StoryFeatures, st: StoryState, near_duplicate: bool) -> list[float]:
        """The pair features of the article and the proposed story (before the article joins)."""
        vec = self._vec
        title, body = self._split(f)
        cent = st.centroid
        dot = dot_t = dot_b = top = 0.0
        words = bigrams = 0
        inv_top = 1.0 / math.log(self.terms.n + 1.5)
        for t, w in vec.items():
            cw = cent.get(t)
            if cw is None:
                continue
            dot += w * cw
            dot_t += title.get(t, 0.0) * cw
            dot_b += body.get(t, 0.0) * cw
            if "_" in t:
                bigrams += 1
            else:
                words += 1
            idf = self.terms.idf(t) * inv_top
            if idf > top:
                top = idf
        tn = math.sqrt(sum(w * w for w in title.values()))
        bn = math.sqrt(sum(w * w for w in body.values())) if body else 0.0
        wset = set(f.words)
        grams = char_ngrams(f.title_norm)
        numbers = {w for w in wset if any(ch.isdigit() for ch in w)}
        mj = mc = 0.0
        member_numbers: set[str] = set()
        for r in self.recent.get(st.story_id, ()):
            m = self.articles.get(r)
            if m is None:
                continue
            mw = set(m.words)
            mj = max(mj, jaccard(wset, mw))
            mc = max(mc, jaccard(grams, char_ngrams(m.title_norm)))
            if numbers:
                member_numbers |= mw & numbers
        names, name_words = f.names, f.name_words
        sure, loose = st.name_keys()
        shared = len(loose.intersection(names) | sure.intersection(name_words)) if names or name_words else 0
        return pair_features(
            dot_full=dot, dot_title=dot_t, dot_body=dot_b, norm=st.norm, count=st.count,
            shared_words=words, shared_bigrams=bigrams, rarest_shared=top,
            title_norm=tn, body_norm=bn, member_jaccard=mj, member_char3=mc,
            shared_names=shared, names_other=st.names_other(names, name_words),
            other_days=st.other_days(f.publisher, f.dates), shared_numbers=len(member_numbers),
            gap_ms=self._now - st.last_ms, publishers=len(st.publishers),
            own_publisher_only=len(st.publishers) == 1 and f.publisher in st.publishers,
            near_duplicate=near_duplicate)
