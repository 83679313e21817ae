"""The keys of the dataflow's keyed steps, named in one place: the dedup and story shards', the
digest windows' and trend keys (each placed on a chosen worker by ``newsflow.runtime.placement``),
which key each message between the steps goes to (:func:`to_shard`, :func:`route_to_stories`),
and :func:`by_key`, which groups keyed messages into one item per key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from newsflow.config import Settings
from newsflow.core.hashing import shard_of
from newsflow.digest.schedule import DigestWindow
from newsflow.model.messages import DedupOutput, HealthReport, ShardInput, Tick, ToShard
from newsflow.model.records import Article
from newsflow.runtime.pickling import Batch
from newsflow.runtime.placement import key_name, placed_key


def shard_keys(settings: Settings) -> list[str]:
    """The dedup shards' keys: shard ``i`` runs on worker ``i % W`` (``newsflow.runtime.placement``)."""
    return [placed_key(f"dd{i:03d}", i, on=settings.flow.placement) for i in range(settings.dedup.shards)]


def placed_shard_keys(settings: Settings) -> dict[str, str]:
    """Dedup shard name (:func:`~newsflow.dedup.exact.dedup_shard_key`) -> its key."""
    return {key_name(k): k for k in shard_keys(settings)}


def story_keys(settings: Settings) -> list[str]:
    """The story shards' keys (``newsflow.runtime.placement``): shard ``i`` runs on worker ``i % W``,
    except the shard of feeds without a category, which runs on the last worker."""
    return list(_story_shard_keys(settings.stories.shards, settings.flow.placement))


@lru_cache(maxsize=16)
def _story_shard_keys(shards: int, placement: bool) -> tuple[str, ...]:
    # feeds without a category (every real feed here) all share one story shard, the one key that
    # sees most articles and works serially: it goes to the last worker, which reads the fewest
    # input partitions (partition i is read on worker i % W)
    blank = shard_of("", shards)
    return tuple(placed_key(f"st{i:02d}", -1 if i == blank else i, on=placement) for i in range(shards))


def story_key(article: Article, settings: Settings) -> str:
    """Stories are kept per feed category (hashed into ``story_shards`` keys): a story rarely
    crosses categories, and measured on UCI, per-category assigners group *better* (B-cubed F1
    0.768 vs 0.755 with one assigner), so no key holds the whole window."""
    shards = settings.stories.shards
    return _story_shard_keys(shards, settings.flow.placement)[shard_of(article.category or "", shards)]


@lru_cache(maxsize=4096)
def window_key(w: DigestWindow) -> str:
    return f"dw:{w.digest_type}:{w.start_ms}"


def trend_key(dtype: str, slot: int, placement: bool) -> str:
    return placed_key(f"dt:{dtype}", slot, on=placement)


def trend_keys(settings: Settings) -> dict[str, str]:
    """Digest type -> its trend key: the types in name order take the workers 0, 1, ..."""
    types = sorted(t.name for t in settings.digests.schedule().types)
    return {t: trend_key(t, j, settings.flow.placement) for j, t in enumerate(types)}


def digest_clock_key(settings: Settings) -> str:
    """The digest clock's one key: on the worker after the trend keys'."""
    return placed_key("digest_clock", len(trend_keys(settings)), on=settings.flow.placement)


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


def route_to_stories(settings: Settings) -> Callable[[tuple[str, DedupOutput]], list[tuple[str, DedupOutput]]]:
    """A dedup shard's output to its story shards' keys: an article to its category's, a tick
    to every one, a health report to every one (only the first reports it)."""
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


def to_shard(kv: tuple[str, ToShard]) -> tuple[str, ShardInput]:
    """A parse output to its dedup shard's key."""
    item = kv[1].item
    if isinstance(item, Tick):  # a partition's tick names the partition (the merge waits for each)
        item = Tick(item.bucket, item.watermark, key_name(kv[0]))
    return kv[1].shard, item
