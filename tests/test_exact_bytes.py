"""Output and kept JSON bytes are exact-size: orjson's ``dumps`` result keeps its whole output
buffer (~16 KB for a 1.6 KB record, as tracemalloc counts it), and a story shard's batch of
records waits for the sinks together (the 100k UCI replay's peak held 6,484 of them: 95 MB)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson

from newsflow.core.exactbytes import exact_size
from newsflow.dedup.story_state import StoryLead, StoryView
from newsflow.flows.outputs import record_output, story_output
from newsflow.model.messages import MergedArticle, ScoredArticle, StoryUpdate
from newsflow.wire.codec import story_record


def _record(i: int) -> dict[str, Any]:
    return {"schema": "articles", "key": f"k{i}", "story_id": f"s{i % 7}", "title": f"Title {i} " + "w" * 1500,
            "importance_components": {"authority": 50.0, "recency": 48.68}, "seen_in": [{"feed_id": "f"}] * 3}


def _held_per_object(make: Callable[[int], bytes], n: int = 200) -> tuple[float, list[bytes]]:
    """Bytes of traced memory per object while ``n`` results of ``make`` are kept."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make(i) for i in range(n)]
        return (tracemalloc.get_traced_memory()[0] - before) / n, kept
    finally:
        tracemalloc.stop()


def test_exact_size_keeps_the_bytes_and_drops_orjsons_buffer() -> None:
    size = len(orjson.dumps(_record(0)))
    as_returned, _ = _held_per_object(lambda i: orjson.dumps(_record(i)))
    exact, kept = _held_per_object(lambda i: exact_size(orjson.dumps(_record(i))))
    assert kept == [orjson.dumps(_record(i)) for i in range(200)]
    assert as_returned > 3 * size  # the premise (orjson 3.x): a dumps result holds its buffer
    assert exact < size + 100


def test_article_and_story_outputs_are_exact_size() -> None:
    """The records a story shard emits (and emits again after a merge) and its stories records
    reach the sinks as exact-size bytes, equal to ``dumps`` of the record."""
    size = len(orjson.dumps(_record(0)))
    for kind, key in ((ScoredArticle, "key"), (MergedArticle, "key")):
        select = record_output("topic", kind, key)

        def value(i: int, kind: Any = kind, select: Any = select) -> bytes:
            out = select(("st00", kind(_record(i))))
            assert out is not None
            return out.value  # type: ignore[no-any-return]

        held, kept = _held_per_object(value)
        assert kept == [orjson.dumps(_record(i)) for i in range(200)]
        assert held < size + 100, kind
    stories = story_output("topic")

    def story_value(i: int) -> bytes:
        out = stories(("st00", StoryUpdate(_story(i))))
        assert out is not None and out.key == f"s{i}".encode()
        return out.value

    size = len(orjson.dumps(story_record(_story(0))))
    held, kept = _held_per_object(story_value)
    assert kept == [orjson.dumps(story_record(_story(i))) for i in range(200)]
    assert held < size + 100


def _story(i: int) -> StoryView:
    lead = StoryLead(f"a{i}", f"Title {i} " + "w" * 1500, None, "P", 50.0)
    return StoryView(f"s{i}", "active", 1_700_000_000_000, 1_700_000_000_000, 1_700_000_000_000, 1, (f"a{i}",),
                     ("P",), ("T1",), "breaking", lead, f"Label {i}", 50.0, 50.0)
