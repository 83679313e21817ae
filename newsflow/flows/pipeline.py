"""The newsflow dataflow. Reads top to bottom like the pipeline diagram:

    raw (keyed by input partition)
      -> parse      parse + normalize; event-time clock; ticks      [key: input partition]
      -> dedup      exact dedup, layers 1-2 (GUID, canonical URL)   [key: dedup.shards domain shards]
      -> stories    tick-aligned merge; layers 3-5 + story ids;     [key: K shards by a stable
                    importance score; online topic (river k-means)   hash of the feed category]
      -> digests    event-time digest windows (morning/midday/evening/weekly/rolling):
                    feeders: entries to windows, seals              [key: the story shard's]
                    clock: which windows close (ticks, health)      [key: one, no articles]
                    windows: one draft each                         [key: "dw:<type>:<start>"]
                    trends: drafts in window order -> digests       [key: one per digest type]
                    (``newsflow.flows.digest_windows``)
      -> (topic, key, value) for the sinks

Only wiring lives here: the logic is in the pure step packages. Step ids are constants because
recovery state is keyed by them. Messages between steps are the typed classes of
``newsflow.model.messages``; every stateful step snapshots in the one versioned format of
``newsflow.core.snapshot``.

Event time: the parse step keeps a per-input-partition watermark (max ``fetched_at`` seen) and,
when it crosses a ``tick_ms`` boundary, broadcasts a tick (watermark + the input position it was
cut at) to every dedup shard. Shards expire state on ticks and forward them; the stories step
releases items only when every shard has forwarded a tick beyond them (``newsflow.core.alignment``),
in input order, so its output is identical for any number of workers; it forwards the
watermark to the digests, which close windows on it. Nothing reads the wall clock. A
heartbeat envelope (``feed_id="__tick__"``) moves event time on quiet streams.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.operators import StatefulLogic

from newsflow.clustering.topics import OnlineTopics, annotate
from newsflow.config import Settings
from newsflow.connectors.files import END_OF_PARTITION, UNREADABLE, BodyRefError, resolve_body_ref
from newsflow.connectors.inflight import InflightJournals
from newsflow.core.alignment import END, EpochMerge
from newsflow.core.eventclock import FUTURE_FETCHED_AT, JumpCandidate, judge_fetched_at
from newsflow.core.exactbytes import exact_size
from newsflow.core.gctune import tune_gc
from newsflow.core.hashing import shard_of
from newsflow.core.placement import input_keys, key_name, placed_key
from newsflow.core.snapshot import Snapshot, make_snapshot, restore
from newsflow.core.timeutil import iso_to_ms, ms_to_iso
from newsflow.dedup.exact import DedupShard, dedup_shard_key, story_margin_ms
from newsflow.dedup.stories import (
    StoryAssigner,
    StoryFeatures,
    featurize_batch,
    title_layer_changes,
)
from newsflow.dedup.story_state import MemberRecords, StoryTracker
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.entries import digest_entries
from newsflow.digest.health import report_view
from newsflow.feeds.normalize import RepollMemory, make_deadletter, normalize_payload
from newsflow.feeds.poll_outcome import bodiless_poll_result, poll_error_fields
from newsflow.flows import metrics
from newsflow.flows.isolation import envelope_head, internal_error, isolated
from newsflow.model.messages import (
    Batch,
    Deduped,
    DedupOutput,
    FromShard,
    HealthReport,
    JsonRecord,
    MergedArticle,
    Output,
    ParsedArticle,
    ParseOutput,
    ProfileAt,
    ScoredArticle,
    ShardInput,
    ShardWatermark,
    StoryMerge,
    StoryOutput,
    StoryUpdate,
    Tick,
    ToShard,
)
from newsflow.model.records import Article, DeadLetter, RawPayload
from newsflow.model.vocab import Disposition
from newsflow.profiles.config import ProfilesConfig
from newsflow.scoring.importance import scored_as_of
from newsflow.wire.codec import (
    EnvelopeError,
    article_record,
    deadletter_to_dict,
    decode_raw,
    dumps,
    health_key,
    health_record,
    story_record,
)
from newsflow.wire.contracts import ROLE_RECORD_FIELDS
from newsflow.wire.guard import check_record

STEP_PARSE = "parse"
STEP_DEDUP = "dedup"
STEP_STORIES = "stories"
STEP_DIGESTS = "digests"
TICK_FEED_ID = "__tick__"


def shard_keys(settings: Settings) -> list[str]:
    """The dedup shards' keys: shard ``i`` runs on worker ``i % W`` (``newsflow.core.placement``)."""
    return [placed_key(f"dd{i:03d}", i) for i in range(settings.dedup.shards)]


def placed_shard_keys(settings: Settings) -> dict[str, str]:
    """Dedup shard name (:func:`~newsflow.dedup.exact.dedup_shard_key`) -> its key."""
    return {key_name(k): k for k in shard_keys(settings)}


def story_keys(settings: Settings) -> list[str]:
    """The story shards' keys (``newsflow.core.placement``): shard ``i`` runs on worker ``i % W``,
    except the shard of feeds without a category, which runs on the last worker."""
    return list(_story_shard_keys(settings.stories.shards))


@lru_cache(maxsize=16)
def _story_shard_keys(shards: int) -> tuple[str, ...]:
    # feeds without a category (every real feed here) all share one story shard, the one key that
    # sees most articles and works serially: it goes to the last worker, which reads the fewest
    # input partitions (partition i is read on worker i % W)
    blank = shard_of("", shards)
    return tuple(placed_key(f"st{i:02d}", -1 if i == blank else i) for i in range(shards))


def story_key(article: Article, settings: Settings) -> str:
    """Stories are kept per feed category (hashed into ``story_shards`` keys): a story rarely
    crosses categories, and measured on UCI, per-category assigners group *better* (B-cubed F1
    0.768 vs 0.755 with one assigner), so no key holds the whole window."""
    shards = settings.stories.shards
    return _story_shard_keys(shards)[shard_of(article.category or "", shards)]


def route_to_stories(settings: Settings) -> Callable[[tuple[str, DedupOutput]], list[tuple[str, DedupOutput]]]:
    keys = story_keys(settings)

    def route(kv: tuple[str, DedupOutput]) -> list[tuple[str, DedupOutput]]:
        item = kv[1]
        if isinstance(item, Tick):  # every story shard merges on the ticks of every dedup shard
            tick = Tick(item.bucket, item.watermark, key_name(kv[0]))  # (dataclasses.replace: 10x slower)
            return [(k, tick) for k in keys]
        if isinstance(item, HealthReport):  # reliability scores in every shard; one reports it
            if item.record.get("reliability") is None:  # a copy would change nothing elsewhere
                return [(keys[0], item)]
            quiet = HealthReport(item.seq, item.record, False, item.epoch)
            return [(k, item if k == keys[0] else quiet) for k in keys]
        return [(story_key(item.article, settings), item)]

    return route


# ---------------------------------------------------------------- parse + event-time clock
class ParseLogic(StatefulLogic[tuple[str, bytes], ParseOutput, Snapshot]):
    """One input partition: raw message ``(seq, bytes)`` -> records for the sinks and items for
    the dedup shards; keeps the partition's watermark and emits a :class:`Tick` to every shard
    when it crosses a ``tick_ms`` boundary. ``archive``: the input is a file replay, whose order
    is its time order (a gap in it is real: ``newsflow.core.eventclock``); else live (Kafka)."""

    def __init__(self, settings: Settings, resume: Snapshot | None, recovery: bool,
                 inflight_dir: str | None = None, *, archive: bool = False) -> None:
        self.s = settings
        self.recovery = recovery
        self.archive = archive
        self.keys = shard_keys(settings)
        self.placed = placed_shard_keys(settings)
        self.normalize_config = settings.normalize.to_config()
        #: poison messages: what each partition is parsing, on disk beside the recovery snapshots
        self.journals = InflightJournals(inflight_dir) if inflight_dir else None
        st = restore(STEP_PARSE, resume) if resume is not None else {}
        self.wm: int = st.get("watermark", 0)
        self.bucket: int = st.get("bucket", -1)
        #: the last payload rejected for a clock jump (``newsflow.core.eventclock``)
        self.candidate: JumpCandidate | None = st.get("clock_candidate")
        #: each feed's last payload, so re-polls skip parsing / normalization (same output); a
        #: cache, not in snapshots: after a resume each feed's first payload is parsed again
        self.repolls: RepollMemory = st.get("repolls") or RepollMemory()
        #: up to two feed ids seen on this partition (one: a gap is confirmed by that feed)
        self.feeds: list[str] = st.get("feeds", [])
        #: each feed's last poll that showed the feed (200 with items, or 304), event time
        self.polls: dict[str, int] = st.get("polls", {})

    def on_item(self, value: tuple[str, bytes]) -> tuple[Iterable[ParseOutput], bool]:
        seq, raw = value
        if not raw and seq.endswith(":" + END_OF_PARTITION):  # a file partition's last item
            return self._end(), StatefulLogic.RETAIN
        if seq.endswith(":" + UNREADABLE):  # an archive file broke off: what was lost is said
            dl = make_deadletter("envelope", "unreadable_archive", raw.decode("utf-8", "replace"), b"",
                                 feed_id=None, fetched_ms=None, item_index=None)
            metrics.DEADLETTERS.labels("envelope", "unreadable_archive").inc()
            return [_dl_out(self.s.kafka.topics.deadletter, dl)], StatefulLogic.RETAIN
        if self.journals is None:
            return self._item(seq, raw), StatefulLogic.RETAIN
        journal = self.journals.of(seq)
        crashes = journal.crashes(seq)
        if crashes >= self.s.flow.poison_after_crashes:
            feed_id, fetched_ms = envelope_head(raw)  # (not decoded: that is what may kill)
            dl = make_deadletter("envelope", "poison_message",
                                 f"{crashes} runs died while parsing this message; it is not parsed again",
                                 raw, feed_id=feed_id, fetched_ms=fetched_ms, item_index=None,
                                 max_original=self.s.normalize.max_deadletter_original_bytes)
            metrics.DEADLETTERS.labels("envelope", "poison_message").inc()
            journal.done(seq)
            return [_dl_out(self.s.kafka.topics.deadletter, dl)], StatefulLogic.RETAIN
        journal.begin(seq)
        out = self._item(seq, raw)
        journal.done(seq)
        return out, StatefulLogic.RETAIN

    def _item(self, seq: str, raw: bytes) -> list[ParseOutput]:
        t = self.s.kafka.topics
        out: list[ParseOutput] = []
        cap = self.s.normalize.max_deadletter_original_bytes
        try:
            payload = decode_raw(raw)
        except EnvelopeError as e:
            dl = make_deadletter("envelope", e.reason, str(e), raw if isinstance(raw, bytes) else b"",
                                 feed_id=None, fetched_ms=None, item_index=None, max_original=cap)
            metrics.DEADLETTERS.labels("envelope", e.reason).inc()
            out.append(_dl_out(t.deadletter, dl))
            return out
        # one message with a bad clock must not move event time (a second feed confirms a gap)
        if len(self.feeds) < 2 and payload.feed_id not in self.feeds:
            self.feeds.append(payload.feed_id)
        v = judge_fetched_at(payload.fetched_at_ms, payload.feed_id, self.wm, self.candidate,
                             tolerance_ms=self.s.flow.clock_jump_tolerance_ms, seq=seq, held=raw,
                             sole_feed=len(self.feeds) == 1, archive=self.archive)
        self.candidate = v.candidate  # held in the snapshot until confirmed or discarded
        if v.discarded is not None:
            out.append(self._clock_deadletter(v.discarded, payload.fetched_at_ms))
        if v.confirmed is not None:  # the held payload was right after all: it goes first
            out.extend(self._payload(v.confirmed.seq, v.confirmed.held, decode_raw(v.confirmed.held)))
        if not v.accept:
            if v.candidate is None or v.candidate.seq != seq:  # rejected outright (edge clock)
                out.append(self._clock_deadletter(JumpCandidate(payload.fetched_at_ms, payload.feed_id, seq, raw)))
            return out
        out.extend(self._payload(seq, raw, payload))
        return out

    def on_eof(self) -> tuple[Iterable[ParseOutput], bool]:
        return self._end(), StatefulLogic.RETAIN

    def _end(self) -> list[ParseOutput]:
        """This partition sends nothing more: a payload still held is processed (the partition's
        only one) or dead-lettered (an unconfirmed jump), and the shards' merge stops waiting.
        Not with recovery: there the end of a finite input is a pause (a rerun resumes it), and
        an end tick kept in the shards' snapshots would stop their event time for good."""
        if self.recovery:
            return []
        held, self.candidate = self.candidate, None
        out: list[ParseOutput] = []
        if held is not None and (self.wm <= 0 or self.archive):  # nothing contradicted it
            out.extend(self._payload(held.seq, held.held, decode_raw(held.held)))
        elif held is not None:
            out.append(self._clock_deadletter(held))
        out.extend(ToShard(k, Tick(END, self.wm)) for k in self.keys)
        return out

    def _clock_deadletter(self, c: JumpCandidate, next_ms: int | None = None) -> Output:
        """The dead letter of a payload too far ahead; its detail says which guard: in an archive,
        the archive's next payload (fetched at ``next_ms``) went back (a clock fault inside the
        archive, not a gap); live, nothing confirmed the jump (a clock fault at the edge)."""
        head = (f"fetched_at {ms_to_iso(c.fetched_ms)} is more than {self.s.flow.clock_jump_tolerance_ms} ms "
                f"ahead of the partition's event time {ms_to_iso(self.wm)}")
        if self.archive:
            detail = (f"{head}, and the archive's next payload{'' if next_ms is None else ' ' + ms_to_iso(next_ms)} "
                      "went back before it: a clock fault inside the archive, not a gap (a gap is followed by "
                      "payloads at or after it)")
        else:
            detail = (f"{head}, and no other feed confirmed the jump: live input, a clock fault at the edge "
                      "(a replay of an archive with gaps: replay the file, where gaps are real, or raise "
                      "flow.clock_jump_tolerance_hours)")
        dl = make_deadletter("envelope", FUTURE_FETCHED_AT, detail, c.held, feed_id=c.feed_id, fetched_ms=c.fetched_ms,
                             item_index=None, max_original=self.s.normalize.max_deadletter_original_bytes)
        metrics.DEADLETTERS.labels("envelope", FUTURE_FETCHED_AT).inc()
        return _dl_out(self.s.kafka.topics.deadletter, dl)

    def _payload(self, seq: str, raw: bytes, payload: RawPayload) -> list[ParseOutput]:
        t = self.s.kafka.topics
        out: list[ParseOutput] = []
        metrics.labelled(metrics.PAYLOADS, str(payload.status)).inc()
        if payload.body_ref:
            try:
                payload = resolve_body_ref(payload, self.s.flow.blob_dir or None, self.s.normalize.max_payload_bytes)
            except BodyRefError as e:  # the dead letter holds the envelope, never the target's bytes
                dl = make_deadletter("envelope", e.reason, f"{(payload.body_ref or '')[:300]}: {e}", raw,
                                     feed_id=payload.feed_id, fetched_ms=payload.fetched_at_ms, item_index=None)
                metrics.DEADLETTERS.labels("envelope", e.reason).inc()
                out.append(_dl_out(t.deadletter, dl))
        if payload.fetched_at_ms > self.wm:
            self.wm = payload.fetched_at_ms
            metrics.labelled(metrics.EVENT_TIME, seq.split(":", 1)[0]).set(self.wm / 1000)
            b = self.wm // self.s.flow.tick_ms
            if b > self.bucket:  # every item of an earlier epoch was sent (the wiring adds the source)
                self.bucket = b
                self.repolls.expire(self.wm, self.s.dedup.window_ms)
                self.polls = expire_polls(self.polls, self.wm - self.s.dedup.window_ms)
                out.extend(ToShard(k, Tick(b, self.wm)) for k in self.keys)
        epoch = self.bucket  # this payload's items: released once every partition ticked past it
        if payload.feed_id != TICK_FEED_ID:
            res = bodiless_poll_result(payload) or normalize_payload(payload, self.normalize_config, self.repolls)
            prev = self.polls.get(payload.feed_id)
            if payload.status == 304 or res.items:
                self.polls[payload.feed_id] = max(payload.fetched_at_ms, prev or 0)
            for a in res.articles:
                out.append(ToShard(self.placed[dedup_shard_key(a, self.s.dedup.shards)],
                                   ParsedArticle(f"{seq}:{a.item_index:05d}", a, epoch, prev)))
            for dl in res.deadletters:
                metrics.DEADLETTERS.labels(dl.stage, dl.reason).inc()
                if dl.reason == "no_title_no_body":
                    metrics.MALFORMED.labels(payload.feed_id).inc()
                out.append(_dl_out(t.deadletter, dl))
            h = health_record(
                payload.feed_id, payload.fetched_at_ms, res.status, url=payload.final_url or payload.url,
                http_status=payload.status, items=res.items, malformed=res.malformed, undated=res.undated,
                feed_format=res.feed_format, bozo=res.bozo, reliability=payload.reliability,
                **poll_error_fields(payload),
            )
            out.append(Output(t.feed_health, health_key("flow", payload.feed_id), exact_size(dumps(h))))
            # the digest's feed-health report gets it too, in input order, via a dedup shard
            out.append(ToShard(self.keys[0], HealthReport(f"{seq}:~", h, epoch=epoch)))
        return out

    def snapshot(self) -> Snapshot:
        return make_snapshot(STEP_PARSE, {"watermark": self.wm, "bucket": self.bucket,
                                          "clock_candidate": self.candidate,
                                          "feeds": self.feeds, "polls": self.polls},
                             freeze=self.recovery)


def expire_polls(polls: dict[str, int], cutoff_ms: int) -> dict[str, int]:
    """The feeds' last polls without those older than ``cutoff_ms`` (event time)."""
    if all(t >= cutoff_ms for t in polls.values()):
        return polls
    return {f: t for f, t in polls.items() if t >= cutoff_ms}


def _dl_out(topic: str, dl: DeadLetter) -> Output:
    return Output(topic, dl.dl_id.encode(), exact_size(dumps(deadletter_to_dict(dl))))


# ---------------------------------------------------------------- dedup shard (layers 1-2)
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
                                                     self.story_config.slab_ms)
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


# ---------------------------------------------------------------- stories, scores, topics
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
        out.extend(StoryUpdate(story_record(v)) for v in self.tracker.flush())
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


# ---------------------------------------------------------------- wiring
def by_key(kvs: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Keyed messages -> one message per key (a :class:`Batch` when there are several), keys in
    order of first appearance, each key's messages in their order: Bytewax pays ~100 us of CPU
    per item that crosses processes (``bench/bench_steps.py --exchange``), ~1 us per message of a
    batch."""
    groups: dict[str, list[Any]] = {}
    for k, v in kvs:
        g = groups.get(k)
        if g is None:
            groups[k] = [v]
        else:
            g.append(v)
    return [(k, g[0] if len(g) == 1 else Batch(tuple(g))) for k, g in groups.items()]


def _from_shards(settings: Settings, profile_terms: bool = False
                 ) -> Callable[[list[tuple[str, StoryOutput]]], list[tuple[str, FromShard]]]:
    """Story-shard outputs as the digests read them, each with its shard's key: an article's
    digest entry and publisher families are built here, once, where the story shard runs (not
    once per digest step or window), for a whole batch of records in one call (the text analysis
    is vectorized per call: ~2x cheaper than one call per record)."""
    cfg = settings.digests.to_config()
    family = settings.normalize.families().family

    def convert(batch: list[tuple[str, StoryOutput]]) -> list[tuple[str, FromShard]]:
        kept = [(k, m) for k, m in batch if not isinstance(m, StoryUpdate | MergedArticle)]
        # (without its feed's boilerplate: a channel's description under every video is not
        # what the video is about, for the topic clustering and the summary)
        arts = [m.record if m.story_text is None else {**m.record, "body_text": m.story_text}
                for _, m in kept if isinstance(m, ScoredArticle)]
        entries = iter(digest_entries(arts, title_weight=cfg.title_weight, body_words=cfg.body_words,
                                      profile_terms=profile_terms) if arts else ())
        return [(k, FromShard(k, ScoredArticle(_digest_view(m.record, family), next(entries))
                              if isinstance(m, ScoredArticle) else
                              _slim(m) if isinstance(m, HealthReport) else m)) for k, m in kept]

    return convert


def _slim(m: HealthReport) -> HealthReport:
    """A health report as the digest steps read it (:func:`~newsflow.digest.health.report_view`)."""
    return HealthReport(m.seq, report_view(m.record), m.report, m.epoch)


#: what a digest step reads of an article record besides its entry (event time, story coverage)
_DIGEST_RECORD_FIELDS = ("story_id", "fetched_at", "publisher", "feed_id", "tier", "seen_in")


def _digest_view(rec: JsonRecord, family: Callable[[str | None, str | None], str]) -> JsonRecord:
    """The record fields a digest step reads beside the entry: the 5 digest steps may run in
    other processes, where each gets its own pickled copy (not the body text ×5). With the
    publisher families of the record and of its sightings (:meth:`StoryCoverage.add`'s
    ``family`` / ``seen_families``), looked up here once, not by each digest step."""
    view = {k: rec[k] for k in _DIGEST_RECORD_FIELDS if k in rec}
    fams = StoryCoverage.families_of(rec, family)
    view["family"], view["seen_families"] = fams
    return view


def _to_shard(kv: tuple[str, ToShard]) -> tuple[str, ShardInput]:
    item = kv[1].item
    if isinstance(item, Tick):  # a partition's tick names the partition (the merge waits for each)
        item = Tick(item.bucket, item.watermark, key_name(kv[0]))
    return kv[1].shard, item


def _record_output(topic: str, kind: type[ScoredArticle | MergedArticle | StoryUpdate]
                   | tuple[type[ScoredArticle | MergedArticle | StoryUpdate], ...], key_field: str
                   ) -> Callable[[tuple[str, StoryOutput]], Output | None]:
    """The story shards' records of one ``kind`` as :class:`Output` for ``topic``, keyed by the
    record's ``key_field`` (articles: ``key``, also when emitted again after a merge; stories:
    ``story_id``)."""
    def select(kv: tuple[str, StoryOutput]) -> Output | None:
        msg = kv[1]
        if not isinstance(msg, kind):
            return None
        # (exact-size bytes: a batch's records wait for the sinks together, orjson's keep ~8 KB each)
        return Output(topic, msg.record[key_field].encode(), exact_size(dumps(msg.record)))

    return select


def newsflow_steps(
    raw: Stream[tuple[str, tuple[str, bytes]]], settings: Settings, *, recovery: bool = False,
    interactions: Stream[tuple[str, tuple[str, bytes]]] | None = None, profiles: ProfilesConfig | None = None,
    ix_partitions: int = 1, inflight_dir: str | None = None, partitions: Iterable[str] = ("p0000",),
    archive: bool = False,
) -> Stream[Output]:
    """All steps from keyed raw messages ``(partition, (seq, bytes))`` to :class:`Output` records;
    ``partitions``: every key of ``raw`` (the dedup shards merge them on event time, so each must
    tick: traffic or heartbeats). With keyed ``interactions`` (same shape) and ``profiles``, the
    profile steps too (``newsflow.flows.profiles``). ``archive``: ``raw`` is a file replay
    (:class:`ParseLogic`)."""
    tune_gc(settings.flow.gc_young_threshold)
    sources = tuple(sorted(key_name(p) for p in partitions))  # the merges name sources by name
    parsed = op.stateful(STEP_PARSE, raw, isolated("parse", settings,
                                                    lambda r: ParseLogic(settings, r, recovery, inflight_dir,
                                                                                 archive=archive)))
    split = op.branch("split_parse", parsed, lambda kv: isinstance(kv[1], Output))
    direct: Stream[Output] = op.map("parse_outputs", split.trues, lambda kv: kv[1])
    to_shards: Stream[tuple[str, ShardInput | Batch]] = op.flat_map_batch(
        "to_shards", split.falses, lambda b: by_key(map(_to_shard, b)))
    # every stateful step is isolated: an item that raises becomes a dead letter (an Output)
    dedup_all = op.stateful(STEP_DEDUP, to_shards, isolated("dedup", settings, lambda r: DedupLogic(settings, r, recovery, sources)))
    dedup_split = op.branch("split_dedup", dedup_all, lambda kv: isinstance(kv[1], Output))
    route = route_to_stories(settings)
    to_stories = op.flat_map_batch("to_stories", dedup_split.falses,
                                   lambda b: by_key(kv for x in b for kv in route(x)))
    stories_all = op.stateful(STEP_STORIES, to_stories,
                              isolated("stories", settings, lambda r: StoriesLogic(settings, r, recovery)))
    stories_split = op.branch("split_stories", stories_all, lambda kv: isinstance(kv[1], Output))
    storied = stories_split.falses
    stories = op.filter_map("story_outputs", storied, _record_output(settings.kafka.topics.stories, StoryUpdate, "story_id"))
    extra: list[Stream[Output]] = []
    scored: Stream[tuple[str, StoryOutput]] = storied
    learned = None
    if profiles is not None:
        from newsflow.flows.profiles import live_relevance_steps, profile_steps

        dls, learned = profile_steps(storied, interactions, settings, profiles,
                                     ix_partitions=ix_partitions if interactions is not None else 0,
                                     recovery=recovery)
        extra.append(dls)
        if profiles.live_relevance:  # the default profile's relevance in every article record
            rel_dls, scored = live_relevance_steps(storied, learned, settings, profiles, story_keys(settings),
                                                   recovery=recovery)
            extra.append(rel_dls)
    articles = op.filter_map("article_outputs", scored, _record_output(settings.kafka.topics.articles, (ScoredArticle, MergedArticle), "key"))
    digest_outs = _per_window_digests(scored, learned, settings, recovery, profiles)
    digest_out = op.merge("digest_outputs", *digest_outs)
    errors = op.map("step_errors", op.merge("merge_step_errors", dedup_split.trues, stories_split.trues),
                    lambda kv: kv[1])
    outs = op.merge("all_outputs", direct, articles, stories, digest_out, errors, *extra)
    return op.flat_map("guard_outputs", outs, output_guard(settings))


def _per_window_digests(scored: Stream[tuple[str, StoryOutput]], learned: Stream[Any] | None, settings: Settings,
                        recovery: bool, profiles: ProfilesConfig | None = None) -> list[Stream[Output]]:
    """Digests assembled per window (:mod:`newsflow.flows.digest_windows`): each story shard's
    feeder (same key) -> window keys and the clock (ticks, health; the profiles' weights at
    window ends) -> the types' trend keys."""
    from newsflow.flows.digest_windows import (
        DigestClockLogic,
        FeederLogic,
        FeederTick,
        TrendLogic,
        WindowDraft,
        WindowLogic,
        WindowOrder,
        trend_keys,
    )

    tkeys = trend_keys(settings)
    clock_key = placed_key("digest_clock", len(tkeys))
    wconfigs = (settings.digests.schedule(), settings.digests.to_config(), settings.scoring.to_config())
    with_digests = profiles.with_digests if profiles is not None else []
    live = profiles is not None and profiles.live_relevance
    profile_types = {p.name: frozenset(p.digests) for p in with_digests}
    # each shard's messages for its feeder: the same key, no crossing
    convert = _from_shards(settings, profile_terms=bool(with_digests))
    feeder_in = op.flat_map_batch("to_digest_feeders", scored, lambda b: by_key(convert(b)))
    feeders = op.stateful("digest_feeders", feeder_in, isolated("digests", settings, lambda r: FeederLogic(settings, r, clock_key, recovery)))
    f_dl = op.branch("split_feeders_dl", feeders, lambda kv: isinstance(kv[1], Output))
    f_routes = op.map("feeder_routes", f_dl.falses, lambda kv: kv[1])
    f_split = op.branch("split_feeders", f_routes, lambda kv: isinstance(kv[1], FeederTick | FromShard))
    clock_in = op.flat_map_batch("to_digest_clock", f_split.trues, by_key)
    if learned is not None and with_digests:  # the profiles' weights at window ends
        clock_in = op.merge("digest_clock_in", clock_in, op.filter_map(
            "profiles_to_digest_clock", learned, lambda m: (clock_key, m) if isinstance(m, ProfileAt) else None))
    clock = op.stateful("digest_clock", clock_in, isolated(
        "digests", settings, lambda r: DigestClockLogic(settings, r, tkeys, recovery, profile_types, live)))
    c_dl = op.branch("split_clock_dl", clock, lambda kv: isinstance(kv[1], Output))
    c_routes = op.map("clock_routes", c_dl.falses, lambda kv: kv[1])
    c_split = op.branch("split_clock", c_routes, lambda kv: isinstance(kv[1], WindowOrder | WindowDraft))
    win_in = op.flat_map_batch("to_digest_windows", op.merge("digest_window_in", f_split.falses, c_split.falses), by_key)
    wins = op.stateful("digest_windows", win_in, isolated("digests", settings, lambda r: WindowLogic(
        settings, r, tkeys, wconfigs, recovery, live_relevance=live)))
    w_dl = op.branch("split_windows_dl", wins, lambda kv: isinstance(kv[1], Output))
    trend_in = op.merge("digest_trend_in", op.map("window_drafts", w_dl.falses, lambda kv: kv[1]), c_split.trues)
    trends = op.stateful("digest_trends", trend_in, isolated("digests", settings, lambda r: TrendLogic(settings, r, recovery)))
    return [op.map("feeder_dls", f_dl.trues, lambda kv: kv[1]), op.map("clock_dls", c_dl.trues, lambda kv: kv[1]),
            op.map("window_dls", w_dl.trues, lambda kv: kv[1]), op.map("trend_outputs", trends, lambda kv: kv[1])]


def output_guard(settings: Settings) -> Callable[[Output], list[Output]]:
    """Last check before the sinks: every record fits ``max_record_bytes`` (articles are cut
    and flagged) and, with ``validate_outputs``, matches its topic schema; otherwise it becomes
    a ``sink`` dead letter (``record_too_large`` / ``schema_violation``), never a bad record."""
    t = settings.kafka.topics
    schemas = {t.articles: "articles", t.digests: "digests", t.feed_health: "feed-health", t.deadletter: "deadletter",
               t.stories: "stories"}

    def guard(o: Output) -> list[Output]:
        c = check_record(schemas[o.topic], o.value, max_bytes=settings.flow.max_record_bytes,
                         validate_schema=settings.flow.validate_outputs)
        if c.value is not None:
            return [o if c.value is o.value else Output(o.topic, o.key, c.value)]
        dl = make_deadletter("sink", c.reason or "schema_violation", c.detail, o.value, feed_id=None,
                             fetched_ms=None, max_original=settings.normalize.max_deadletter_original_bytes)
        metrics.DEADLETTERS.labels("sink", dl.reason).inc()
        return [_dl_out(t.deadletter, dl)]

    return guard


def file_flow(input_path: str, out_dir: str, settings: Settings | None = None, *, recovery: bool = False,
              interactions_path: str | None = None, profiles: ProfilesConfig | None = None,
              inflight_dir: str | None = None) -> Dataflow:
    """Raw-payload archive (file or directory) -> ``<out_dir>/<topic>.jsonl``; no Kafka. With
    ``interactions_path`` (a JSONL archive of ``interactions`` records), profiles learn."""
    from newsflow.connectors.files import JsonlTopicSink, RawArchiveSource

    settings = settings or Settings()
    flow = Dataflow("newsflow_files")
    archive = RawArchiveSource(input_path, batch_size=settings.flow.read_batch,
                               partitions=settings.flow.file_partitions)
    src = op.input("raw_in", flow, archive)
    pkeys = input_keys({p: "p" + p for p in archive.list_parts()})
    keyed = op.map("key_by_partition", src, lambda item: (pkeys[item[0].split(":", 1)[0]], item))
    ix, n_ix = None, 0
    if interactions_path is not None:
        ix_src = op.input("interactions_in", flow, RawArchiveSource(interactions_path, end_marker=False))
        ix = op.map("key_interactions", ix_src, lambda item: ("ix" + item[0].split(":", 1)[0], item))
        profiles, n_ix = profiles or ProfilesConfig(), 1
    outs = newsflow_steps(keyed, settings, recovery=recovery, interactions=ix, profiles=profiles,
                          ix_partitions=n_ix, inflight_dir=inflight_dir,
                          partitions=list(pkeys.values()), archive=True)
    t = settings.kafka.topics
    topics = [t.articles, t.digests, t.feed_health, t.deadletter, t.stories]
    # each file, once the replay ends, in an order that does not depend on the workers
    order = {getattr(t, role): fields for role, fields in ROLE_RECORD_FIELDS.items()}
    # one item per topic and batch: the lines joined (the sink joins its items with newlines)
    op.output("files_out", op.flat_map_batch("to_files", outs, _lines_by_topic),
              JsonlTopicSink(out_dir, topics, order))
    return flow


def _lines_by_topic(batch: list[Output]) -> list[tuple[str, bytes]]:
    return [(t, b"\n".join(v.items) if isinstance(v, Batch) else v)
            for t, v in by_key((o.topic, o.value) for o in batch)]


def kafka_flow(
    brokers: list[str], settings: Settings | None = None, *, tail: bool = True,
    recovery: bool = False, add_config: dict[str, str] | None = None, profiles: ProfilesConfig | None = None,
    inflight_dir: str | None = None,
) -> Dataflow:
    """``feeds.raw`` on Kafka -> the output topics on Kafka. Event time ticks every
    ``flow.live_tick_seconds`` (live latency); a replay of the same topic gives the same records. With
    ``profiles``, the ``interactions`` topic is a second input and profiles learn from it."""
    from newsflow.connectors.kafka import kafka_interactions_input, kafka_outputs, kafka_raw_input

    settings = settings or Settings()
    settings = settings.model_copy(update={"flow": settings.flow.live()})
    flow = Dataflow("newsflow_kafka")
    keyed, parts = kafka_raw_input(flow, brokers, settings, tail=tail, add_config=add_config)
    ix, n_ix = None, 1
    if profiles is not None:
        ix, n_ix = kafka_interactions_input(flow, brokers, settings, tail=tail, add_config=add_config)
    outs = newsflow_steps(keyed, settings, recovery=recovery, interactions=ix, profiles=profiles, ix_partitions=n_ix,
                          inflight_dir=inflight_dir, partitions=parts)
    kafka_outputs(outs, brokers, settings, add_config=add_config)
    return flow
