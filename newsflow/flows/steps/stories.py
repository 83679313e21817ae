"""The stories step's logic: one story shard, tick-aligned: near-duplicates, same-event and story
ids (layers 3-4), importance, online topics, late merges, the ``stories`` records.
"""

from __future__ import annotations

from collections.abc import Iterable

from bytewax.operators import StatefulLogic

from newsflow.clustering.topics import OnlineTopics, annotate
from newsflow.config import Settings
from newsflow.core.alignment import EpochMerge
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_decision import title_layer_changes
from newsflow.dedup.story_features import StoryFeatures, featurize_batch
from newsflow.dedup.story_state import MemberRecords, StoryTracker
from newsflow.flows import metrics
from newsflow.flows.keys import (
    shard_keys,
    story_key,
)
from newsflow.model.messages import (
    Deduped,
    DedupOutput,
    HealthReport,
    JsonRecord,
    MergedArticle,
    ScoredArticle,
    ShardWatermark,
    StoryMerge,
    StoryOutput,
    StoryUpdate,
    Tick,
)
from newsflow.model.vocab import Disposition
from newsflow.runtime.placement import key_name
from newsflow.scoring.importance import scored_as_of
from newsflow.wire.codec import (
    article_record,
)

STEP_STORIES = "stories"


class StoriesLogic(StatefulLogic[DedupOutput, StoryOutput, Snapshot]):
    """Tick-aligned: near-duplicates, same-event and story ids, importance, topics."""

    def __init__(self, settings: Settings, resume: Snapshot | None, recovery: bool) -> None:
        self.s = settings
        self.recovery = recovery
        self.story_config = settings.stories.to_config()
        self.score_config = settings.scoring.to_config()
        self.families = settings.normalize.families()
        st = restore(STEP_STORIES, resume) if resume is not None else {}
        # (explicit membership tests: an empty aligner is falsy but its tick counts matter)
        self.merge: EpochMerge = st["merge"] if "merge" in st else EpochMerge(
            tuple(key_name(k) for k in shard_keys(settings)))
        self.assigner: StoryAssigner = st["assigner"] if "assigner" in st else StoryAssigner(self.story_config)
        self.topics: OnlineTopics = st["topics"] if "topics" in st else OnlineTopics(settings.topics.to_config())
        self.reliability: dict[str, float] = st.get("reliability", {})
        self.tiers: dict[str, set[str]] = st.get("tiers", {})
        self.tracker: StoryTracker = st["tracker"] if "tracker" in st else StoryTracker(self.assigner.config.window_ms)
        #: the window's emitted records per story (a late merge emits them again; older snapshots lack it)
        self.members: MemberRecords = st["members"] if "members" in st else MemberRecords(self.assigner.config.window_ms)

    def on_item(self, value: DedupOutput) -> tuple[Iterable[StoryOutput], bool]:
        if isinstance(value, Tick):
            out: list[StoryOutput] = []
            for r in self.merge.add_tick(value.source, value.bucket, value.watermark):
                if r.items:
                    out.extend(self._process(r.items))
                if r.watermark is not None:
                    out.append(ShardWatermark(r.watermark))
            return out, StatefulLogic.RETAIN
        self.merge.add_item(value.epoch, value.seq, value)
        return (), StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[StoryOutput], bool]:
        return self._process(self.merge.drain()), StatefulLogic.RETAIN

    def _process(self, items: list[Deduped | HealthReport]) -> list[StoryOutput]:
        """Items released in input order -> health reports and scored article records."""
        out: list[StoryOutput] = []
        missing = [x.article for x in items if isinstance(x, Deduped) and x.features is None]
        feats = iter(featurize_batch(missing, self.story_config, self.families)) if missing else iter(())
        recs: list[tuple[JsonRecord, str, str | None, int]] = []
        for x in items:
            if isinstance(x, HealthReport):
                h = x.record
                if h.get("reliability") is not None:
                    self.reliability[h["feed_id"]] = h["reliability"]
                if x.report or h.get("reliability") is not None:
                    out.append(x)  # (the quiet copies too: each shard's digest feeder keeps reliability)
                continue
            a = x.article
            recs.append((self._story(x, x.features if x.features is not None else next(feats)),
                         story_key(a, self.s), getattr(a, "story_text", None),
                         scored_as_of(a.fetched_ms, a.published_ms, getattr(x, "previous_poll_ms", None))))
        if recs:
            # each record scored as of its fetch, or of its feed's previous poll if the article
            # was published before it (the age it had when the feed could first have shown it)
            fields = annotate([r for r, _, _, _ in recs], [t for _, _, _, t in recs], self.topics, self.score_config,
                              reliability=self.reliability, story_texts=[t for _, _, t, _ in recs])
            for (rec, key, text, _), f in zip(recs, fields, strict=True):
                rec.update(f)
                rec["topic_id"] = f"{key_name(key)}/{rec['topic_id']}"  # topics are per story shard
                metrics.labelled(metrics.ARTICLES, rec["disposition"]).inc()
                out.append(ScoredArticle(rec, story_text=text))
                self.tracker.observe(rec, self.families)
                self.members.add(rec)
        merges = self.assigner.take_merges()
        if merges:  # late merges: the stories topic says so, the digests follow them, and the
            # merged-away story's articles records are emitted again (same keys) under the new id
            at = max(iso_to_ms(r["fetched_at"]) for r, _, _, _ in recs)
            for gone, into in merges:
                self.tracker.merge(gone, into)
                out.append(StoryMerge(gone, into, at))
                out.extend(MergedArticle(r) for r in self.members.merge(gone, into))
        # the stories that changed in this batch (one record each) and those that expired
        out.extend(StoryUpdate(v) for v in self.tracker.flush())
        if len(self.tiers) > 2 * len(self.assigner.stories) + 1024:  # follow the assigner's expiry
            self.tiers = {k: v for k, v in self.tiers.items() if k in self.assigner.stories}
        self.members.expire()
        return out

    def _story(self, x: Deduped, f: StoryFeatures) -> JsonRecord:
        # the story clock runs on publication times (story activity is when things were
        # published; the assigner keeps the max seen): data-driven like every clock here
        a, info = x.article, x.info
        exact = info.disposition in (Disposition.EXACT_DUPLICATE, Disposition.REVISION)
        asg = self.assigner.assign(f, now_ms=None, duplicate_of=info.duplicate_of if exact else None)
        disposition, layer, dup = info.disposition, info.layer, info.duplicate_of
        extra: JsonRecord = {}
        # (the story state knowing this very article that dedup forgot -- it forgets on
        # publication time, dedup on fetch time -- is a re-sighting, never a revision of itself)
        if info.disposition == Disposition.UNIQUE and asg.matched_ref != a.article_id \
                and asg.disposition in (Disposition.NEAR_DUPLICATE, Disposition.SAME_EVENT, Disposition.REVISION):
            disposition, layer, dup = asg.disposition, asg.layer, asg.matched_ref
            if disposition == Disposition.REVISION and layer == "title":  # what differs from the item it revises
                extra["changed"] = title_layer_changes(f, self.assigner.articles.get(dup or ""))
        tiers = self.tiers.setdefault(asg.story_id, set())
        if a.tier:
            tiers.add(a.tier)
        return article_record(a, info, x.seq, {
            **extra,
            "disposition": disposition,
            "dedup_layer": layer,
            "duplicate_of": dup,
            "story_id": asg.story_id,
            "story_size": asg.story_size,
            "story_publishers": asg.story_publishers,
            "story_tiers": sorted(tiers),
            "match_score": asg.score,
        }, self.families)

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_STORIES, {
            "merge": self.merge, "assigner": self.assigner, "topics": self.topics,
            "reliability": self.reliability, "tiers": self.tiers, "tracker": self.tracker,
            "members": self.members,
        }, freeze=self.recovery)
