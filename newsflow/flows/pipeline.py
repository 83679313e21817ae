"""The newsflow dataflow. Reads top to bottom like the pipeline diagram:

    raw (keyed by input partition)
      -> parse      parse + normalize; event-time clock; ticks      [key: input partition]
      -> dedup      exact dedup, layers 1-2 (GUID, canonical URL)   [key: dedup.shards domain shards]
      -> stories    tick-aligned merge; layers 3-4 + story ids;     [key: K shards by a stable
                    importance score; online topic (river k-means)   hash of the feed category]
      -> digests    event-time digest windows (morning/midday/evening/weekly/rolling):
                    feeders: entries to windows, seals              [key: the story shard's]
                    clock: which windows close (ticks, health)      [key: one, no articles]
                    windows: one draft each                         [key: "dw:<type>:<start>"]
                    trends: drafts in window order -> digests       [key: one per digest type]
                    (``newsflow.flows.digest_windows``)
      -> (topic, key, value) for the sinks

Only wiring lives here: each stateful step's logic is a module of :mod:`newsflow.flows.steps`
(over the pure step packages), the keys are named in :mod:`newsflow.flows.keys`, the records for
the sinks are built in :mod:`newsflow.flows.outputs`. Step ids are constants because recovery
state is keyed by them. Messages between steps are the typed classes of
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

from collections.abc import Iterable
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream

from newsflow.config import Settings
from newsflow.core.gctune import tune_gc
from newsflow.flows.digest_windows import (
    FeederTick,
    WindowDraft,
    WindowOrder,
    digest_inputs,
)
from newsflow.flows.isolation import isolated
from newsflow.flows.keys import (
    by_key,
    digest_clock_key,
    route_to_stories,
    story_keys,
    to_shard,
    trend_keys,
)
from newsflow.flows.outputs import lines_by_topic, output_guard, record_output, story_output
from newsflow.flows.steps.dedup import STEP_DEDUP, DedupLogic
from newsflow.flows.steps.digest_clock import DigestClockLogic
from newsflow.flows.steps.digest_feeder import FeederLogic
from newsflow.flows.steps.digest_trend import TrendLogic
from newsflow.flows.steps.digest_window import WindowLogic
from newsflow.flows.steps.parse import STEP_PARSE, ParseLogic
from newsflow.flows.steps.stories import STEP_STORIES, StoriesLogic
from newsflow.model.messages import (
    FromShard,
    MergedArticle,
    Output,
    ProfileAt,
    ScoredArticle,
    ShardInput,
    StoryOutput,
)
from newsflow.profiles.config import ProfilesConfig
from newsflow.runtime.pickling import Batch
from newsflow.runtime.placement import input_keys, key_name
from newsflow.wire.contracts import ROLE_RECORD_FIELDS

STEP_DIGESTS = "digests"


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
        "to_shards", split.falses, lambda b: by_key(map(to_shard, b)))
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
    stories = op.filter_map("story_outputs", storied, story_output(settings.kafka.topics.stories))
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
    articles = op.filter_map("article_outputs", scored, record_output(settings.kafka.topics.articles, (ScoredArticle, MergedArticle), "key"))
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
    tkeys = trend_keys(settings)
    clock_key = digest_clock_key(settings)
    wconfigs = (settings.digests.schedule(), settings.digests.to_config(), settings.scoring.to_config())
    with_digests = profiles.with_digests if profiles is not None else []
    live = profiles is not None and profiles.live_relevance
    profile_types = {p.name: frozenset(p.digests) for p in with_digests}
    # each shard's messages for its feeder: the same key, no crossing
    convert = digest_inputs(settings, profile_terms=bool(with_digests))
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
    pkeys = input_keys({p: "p" + p for p in archive.list_parts()}, on=settings.flow.placement)
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
    op.output("files_out", op.flat_map_batch("to_files", outs, lines_by_topic),
              JsonlTopicSink(out_dir, topics, order))
    return flow


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
