"""The dedup step's logic: one shard's exact dedup (layers 1-2) on the input partitions merged on
event-time epochs, and the story features computed there.
"""

from __future__ import annotations

from collections.abc import Iterable

from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.core.alignment import EpochMerge
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.dedup.exact import DedupShard, story_margin_ms
from newsflow.dedup.story_config import SLAB_MS
from newsflow.dedup.story_features import featurize_batch
from newsflow.flows import metrics
from newsflow.flows.isolation import internal_error
from newsflow.model.messages import (
    Deduped,
    DedupOutput,
    HealthReport,
    Output,
    ParsedArticle,
    ShardInput,
    Tick,
)

STEP_DEDUP = "dedup"


class DedupLogic(StatefulLogic[ShardInput, DedupOutput | Output, Snapshot]):
    """One dedup shard: merges the input partitions on event-time epochs
    (``newsflow.core.alignment``), so which copy comes first never depends on scheduling;
    decisions, health records and one tick per boundary go on to the stories step."""

    def __init__(self, settings: Settings, resume: Snapshot | None, recovery: bool,
                 sources: tuple[str, ...] = ("p0000",)) -> None:
        self.recovery = recovery
        self.s = settings
        self.story_config = settings.stories.to_config()
        self.families = settings.normalize.families()
        st = restore(STEP_DEDUP, resume) if resume is not None else {}
        self.shard: DedupShard = (
            st["shard"] if "shard" in st else DedupShard(settings.dedup.window_ms, settings.dedup.emit_repolls)
        )
        # (also on a resumed shard: its snapshot may predate the current story settings)
        self.shard.story_margin_ms = story_margin_ms(settings.dedup.window_ms, self.story_config.window_ms,
                                                     SLAB_MS)
        self.merge: EpochMerge = st["merge"] if "merge" in st else EpochMerge(sources)

    def on_item(self, value: ShardInput) -> tuple[Iterable[DedupOutput | Output], bool]:
        if not isinstance(value, Tick):
            self.merge.add_item(value.epoch, value.seq, value)
            return (), StatefulLogic.RETAIN
        out: list[DedupOutput | Output] = []
        for r in self.merge.add_tick(value.source, value.bucket, value.watermark):
            out.extend(self._run(r.items))
            if r.watermark is not None:
                self.shard.advance(r.watermark)
                out.append(Tick(r.boundary, r.watermark))
        return out, StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[DedupOutput | Output], bool]:
        return self._run(self.merge.drain()), StatefulLogic.RETAIN

    def _run(self, items: list[ParsedArticle | HealthReport]) -> list[DedupOutput | Output]:
        out: list[DedupOutput | Output] = []
        for x in items:
            if not isinstance(x, ParsedArticle):
                out.append(x)  # health records pass through, in order
                continue
            try:
                info = self.shard.process(x.article)
            except Exception as e:  # one item's bug: a dead letter, the batch goes on
                out.append(internal_error("dedup", self.s.kafka.topics.deadletter, e, x,
                                          self.s.normalize.max_deadletter_original_bytes))
                continue
            if info is None:
                metrics.REPOLLS.inc()
                continue
            out.append(Deduped(x.seq, x.article, info, x.epoch, None, x.previous_poll_ms))
        # the story features (stateless: titles, MinHash bands, terms) are computed here, in
        # the dedup shards spread over every worker, not in the story shards (one per category)
        todo = [(i, d) for i, d in enumerate(out) if isinstance(d, Deduped)]
        if todo:
            feats = featurize_batch([d.article for _, d in todo], self.story_config, self.families)
            for (i, d), f in zip(todo, feats, strict=True):
                out[i] = Deduped(d.seq, d.article, d.info, d.epoch, f, d.previous_poll_ms)
        return out

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_DEDUP, {"shard": self.shard, "merge": self.merge}, freeze=self.recovery)
