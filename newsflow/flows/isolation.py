"""Per-item isolation of the flow's stateful steps.

:class:`Isolated` wraps any step's :class:`StatefulLogic`: an unexpected exception while one
item is processed becomes a ``deadletter`` :class:`Output` (the step as ``stage``, reason
``internal_error``, the exception type and message, the item's original bytes when it has
them) and a counter, and the flow goes on with the next item. Snapshots, EOF and
notifications are the wrapped logic's. The wiring splits the dead letters off to the sinks
(``op.branch`` on ``isinstance(x, Output)``), so the steps' own message types stay as they are.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import orjson
from bytewax.operators import StatefulLogic

from newsflow.config import Settings
from newsflow.core.timeutil import iso_to_ms
from newsflow.feeds.normalize import make_deadletter
from newsflow.flows import metrics
from newsflow.model.messages import Output
from newsflow.runtime.pickling import Batch, Shared
from newsflow.wire.codec import deadletter_to_dict, dumps
from newsflow.wire.envelope import MAX_FETCHED_MS, MIN_FETCHED_MS

log = logging.getLogger(__name__)
INTERNAL_ERROR = "internal_error"


def original_bytes(item: Any) -> bytes:
    """The bytes a dead letter keeps of an item: raw input as-is, typed messages as JSON."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes | bytearray):
        return bytes(item[1])  # (seq, raw message) of the parse step
    try:
        return orjson.dumps(item, default=repr)
    except (TypeError, orjson.JSONEncodeError):
        return repr(item).encode("utf-8", "replace")


def _feed_of(item: Any) -> tuple[str | None, int | None]:
    msg = getattr(item, "message", item)
    a = getattr(msg, "article", None)
    fid, ms = getattr(a, "feed_id", None), getattr(a, "fetched_ms", None)
    if isinstance(fid, str):  # the failing item may be malformed itself: nothing assumed
        return fid, ms if isinstance(ms, int) else None
    rec = getattr(msg, "record", None)
    if isinstance(rec, dict) and isinstance(rec.get("feed_id"), str):
        return rec["feed_id"], None
    return None, None


#: the envelope's feed id and fetch time as the poller writes them (JSON strings without escapes)
_HEAD_FEED = re.compile(rb'"feed_id"\s*:\s*"([^"\\]{1,500})"')
_HEAD_FETCHED = re.compile(rb'"fetched_at"\s*:\s*"([^"\\]{1,64})"')
#: how much of a raw message's start is searched: the poller's envelopes put both fields first
HEAD_BYTES = 4096


def envelope_head(raw: bytes) -> tuple[str | None, int | None]:
    """The feed id and fetch time (ms) of a raw message, read off its first bytes with a regex,
    never by decoding it: a poison message's dead letter names its feed even though decoding and
    parsing it is what killed the runs before. ``None`` for what the head does not show."""
    head = raw[:HEAD_BYTES]
    fid = m.group(1).decode("utf-8", "replace") if (m := _HEAD_FEED.search(head)) else None
    ms: int | None = None
    if (m := _HEAD_FETCHED.search(head)) is not None:
        try:
            ms = iso_to_ms(m.group(1).decode("ascii"))
        except (ValueError, UnicodeDecodeError, OverflowError):
            ms = None
        if ms is not None and not MIN_FETCHED_MS <= ms < MAX_FETCHED_MS:  # (as the envelope check)
            ms = None
    return fid, ms


def internal_error(stage: str, topic: str, exc: BaseException, item: Any, max_original: int) -> Output:
    """The dead-letter record of an item whose processing raised ``exc``."""
    feed_id, fetched_ms = _feed_of(item)
    dl = make_deadletter(stage, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", original_bytes(item),
                         feed_id=feed_id, fetched_ms=fetched_ms, max_original=max_original)
    metrics.DEADLETTERS.labels(stage, INTERNAL_ERROR).inc()
    log.warning("%s: %s on one item, dead-lettered as %s", stage, type(exc).__name__, dl.dl_id)
    return Output(topic, dl.dl_id.encode(), dumps(deadletter_to_dict(dl)))


class Isolated(StatefulLogic[Any, Any, Any]):
    """A step's logic whose per-item failures become dead letters instead of stopping the flow."""

    def __init__(self, inner: StatefulLogic[Any, Any, Any], stage: str, topic: str, max_original: int) -> None:
        self.inner, self.stage, self.topic, self.max_original = inner, stage, topic, max_original

    def on_item(self, value: Any) -> tuple[Iterable[Any], bool]:
        if isinstance(value, Shared):  # one message sent to several steps (never modified)
            value = value.obj
        if not isinstance(value, Batch):
            return self._one(value)
        out: list[Any] = []  # each message of a batch on its own, as if it came alone
        discard = StatefulLogic.RETAIN
        for x in value.items:
            got, discard = self._one(x)
            out.extend(got)
        return out, discard

    def _one(self, value: Any) -> tuple[list[Any], bool]:
        try:
            out, discard = self.inner.on_item(value)
            return list(out), discard
        except Exception as e:  # one item's bug must not stop every partition behind it
            return [internal_error(self.stage, self.topic, e, value, self.max_original)], StatefulLogic.RETAIN

    def on_notify(self) -> tuple[Iterable[Any], bool]:
        try:
            out, discard = self.inner.on_notify()
            return list(out), discard
        except Exception as e:
            return [internal_error(self.stage, self.topic, e, None, self.max_original)], StatefulLogic.RETAIN

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        try:
            out, discard = self.inner.on_eof()
            return list(out), discard
        except Exception as e:
            return [internal_error(self.stage, self.topic, e, None, self.max_original)], StatefulLogic.RETAIN

    def notify_at(self) -> datetime | None:
        return self.inner.notify_at()

    def snapshot(self) -> Any:
        return self.inner.snapshot()


def isolated(stage: str, settings: Settings, build: Callable[[Any], StatefulLogic[Any, Any, Any]]
             ) -> Callable[[Any], Isolated]:
    """A Bytewax builder for ``op.stateful`` whose logic is :class:`Isolated`."""
    topic, cap = settings.kafka.topics.deadletter, settings.normalize.max_deadletter_original_bytes

    def builder(resume: Any) -> Isolated:
        return Isolated(build(resume), stage, topic, cap)

    return builder
