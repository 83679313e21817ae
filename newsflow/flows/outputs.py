"""What goes to the sinks: story-shard records and dead letters as :class:`Output` (JSON built by
``newsflow.wire.codec``), the guard every record passes before a sink, and a batch's lines per
topic for the file sinks.
"""

from __future__ import annotations

from collections.abc import Callable

from newsflow.config import Settings
from newsflow.core.exactbytes import exact_size
from newsflow.feeds.normalize import make_deadletter
from newsflow.flows import metrics
from newsflow.flows.keys import by_key
from newsflow.model.messages import (
    MergedArticle,
    Output,
    ScoredArticle,
    StoryOutput,
    StoryUpdate,
)
from newsflow.model.records import DeadLetter
from newsflow.runtime.pickling import Batch
from newsflow.wire.codec import (
    deadletter_to_dict,
    dumps,
    story_record,
)
from newsflow.wire.guard import check_record


def deadletter_output(topic: str, dl: DeadLetter) -> Output:
    return Output(topic, dl.dl_id.encode(), exact_size(dumps(deadletter_to_dict(dl))))


def record_output(topic: str, kind: type[ScoredArticle | MergedArticle]
                  | tuple[type[ScoredArticle | MergedArticle], ...], key_field: str
                  ) -> Callable[[tuple[str, StoryOutput]], Output | None]:
    """The story shards' article records of one ``kind`` as :class:`Output` for ``topic``, keyed
    by the record's ``key_field`` (``key``, also when emitted again after a merge)."""
    def select(kv: tuple[str, StoryOutput]) -> Output | None:
        msg = kv[1]
        if not isinstance(msg, kind):
            return None
        # (exact-size bytes: a batch's records wait for the sinks together, orjson's keep ~8 KB each)
        return Output(topic, msg.record[key_field].encode(), exact_size(dumps(msg.record)))

    return select


def story_output(topic: str) -> Callable[[tuple[str, StoryOutput]], Output | None]:
    """The story shards' :class:`StoryUpdate` as ``stories`` records for ``topic``, keyed by
    ``story_id``."""
    def select(kv: tuple[str, StoryOutput]) -> Output | None:
        msg = kv[1]
        if not isinstance(msg, StoryUpdate):
            return None
        return Output(topic, msg.story.story_id.encode(), exact_size(dumps(story_record(msg.story))))

    return select


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
        return [deadletter_output(t.deadletter, dl)]

    return guard


def lines_by_topic(batch: list[Output]) -> list[tuple[str, bytes]]:
    return [(t, b"\n".join(v.items) if isinstance(v, Batch) else v)
            for t, v in by_key((o.topic, o.value) for o in batch)]
