"""Deterministic merge of several keyed streams on event-time epochs (punctuations).

A downstream key that receives items from several upstream sources (input partitions, dedup
shards) sees them interleaved in an order that depends on worker scheduling. To make its output
independent of that order, and of the number of workers and processes:

* every input partition keeps its own event-time clock: a *bucket* (``watermark // tick_ms``),
  and when its watermark crosses into a later bucket ``b`` it broadcasts a tick ``(b, wm)``:
  "every item of mine with an epoch ``< b`` was sent";
* every item carries the bucket of its partition once its payload was seen (its *epoch*: the
  payload's own bucket, or the partition's when the payload is older) and its position in the
  input (``seq``, ``"<partition>:<offset>…"``, fixed width);
* each upstream->downstream channel is FIFO, so once every source has sent a tick ``>= b``, every
  item with epoch ``< b`` has arrived: those are released, sorted by epoch, then offset, then
  partition (a file replay numbers every archive line, so within an epoch its order is the
  archive's, however the feeds are split between partitions), at the *boundary* ``b``. The
  boundaries are the buckets any source ticked at, taken in order; the watermark of boundary
  ``b`` is the smallest watermark of each source's first tick ``>= b``.

Everything above is a function of each partition's own (replayable) sequence, so the released
batches, their order and their watermarks are the same for any interleaving: items are merged
on event time at tick granularity. An item waits until every partition has passed its bucket,
so live latency is about one tick plus the time until each partition next speaks. A source that will send nothing more
sends :data:`END`; a partition with no traffic must still tick (the poller's heartbeat reaches
every partition of ``feeds.raw``), or the merge waits for it.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

#: the bucket a source ticks at when it has nothing more to send (end of a finite input)
END = 1 << 62


def seq_partition(seq: str) -> str:
    return seq.split(":", 1)[0]


@dataclass(frozen=True, slots=True)
class Release:
    """The items of every epoch ``< boundary``, in merge order; ``watermark`` is None
    for the final release (every source ended)."""

    boundary: int
    watermark: int | None
    items: list[Any]


@dataclass(slots=True)
class EpochMerge:
    """Buffers items until every source has ticked past their epoch; see the module doc."""

    sources: tuple[str, ...]
    #: per source, its ticks ``(bucket, wm)`` still needed, ascending
    _ticks: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    _buffer: list[tuple[tuple[int, str, str], Any]] = field(default_factory=list)
    #: items with epoch < done were released
    done: int = -(1 << 62)
    watermark: int = 0
    #: each source's latest bucket; their minimum and how many sources sit at it (a tick from a
    #: source above the minimum cannot release anything: O(1) for most ticks)
    _last: dict[str, int] = field(default_factory=dict)
    _frontier: int = -(1 << 62)
    _at_min: int = 0

    def add_item(self, epoch: int, seq: str, item: Any) -> None:
        part, _, offset = seq.partition(":")
        self._buffer.append(((epoch, offset, part), item))

    def add_tick(self, source: str, bucket: int, wm: int) -> list[Release]:
        """Record one source's tick; returns the releases it completes (usually 0 or 1)."""
        last = self._last.get(source)
        if last is None and source not in self.sources:
            msg = f"tick from unknown source {source!r} (sources: {', '.join(self.sources)})"
            raise ValueError(msg)
        if last is not None and bucket <= last:
            return []  # a re-sent tick (at-least-once) changes nothing
        self._ticks.setdefault(source, []).append((bucket, wm))
        self._last[source] = bucket
        if last is None:
            if len(self._last) < len(self.sources):
                return []
            self._recount()
        elif last == self._frontier:
            self._at_min -= 1
            if self._at_min > 0:
                return []
            self._recount()
        else:
            return []
        frontier = self._frontier
        if frontier <= self.done:
            return []
        # each source's pending ticks are ascending: only the prefix up to the frontier is read
        # (a source far ahead may hold thousands more); none is below done (popped on release)
        done = self.done
        found: set[int] = set()
        for ts in self._ticks.values():
            for b, _ in ts:
                if b > frontier:
                    break
                if b > done:
                    found.add(b)
        bounds = sorted(found)
        out: list[Release] = []
        if not bounds:
            return out
        self._buffer.sort(key=_key)
        epochs = [x[0][0] for x in self._buffer]
        start = 0
        for b in bounds:
            stop = bisect_left(epochs, b, lo=start)
            firsts = [next(t for t in ts if t[0] >= b) for ts in self._ticks.values()]
            live = [w for bb, w in firsts if bb != END]
            at = min(live) if live else None
            if at is not None and at > self.watermark:
                self.watermark = at
            out.append(Release(b, at, [x[1] for x in self._buffer[start:stop]]))
            start = stop
            self.done = b
            for ts in self._ticks.values():
                while ts and ts[0][0] < b:
                    ts.pop(0)
        del self._buffer[:start]
        return out

    def _recount(self) -> None:
        self._frontier = min(self._last.values())
        self._at_min = sum(1 for v in self._last.values() if v == self._frontier)

    def drain(self) -> list[Any]:
        """End of input: everything left, in merge order."""
        out = sorted(self._buffer, key=_key)
        self._buffer = []
        return [x[1] for x in out]

    def __len__(self) -> int:
        return len(self._buffer)


def _key(x: tuple[tuple[int, str, str], Any]) -> tuple[int, str, str]:
    return x[0]


def slowest_watermark(sources: dict[str, int], source: str, watermark: int, n_sources: int,
                      current: int | None) -> int | None:
    """Records ``source``'s ``watermark`` in ``sources`` (each source's latest) and returns the
    slowest source's watermark if all ``n_sources`` have reported and it moved past ``current``
    (None: it did not). A step that closes windows on it closes one only when every source has
    sent all of its records."""
    if watermark > sources.get(source, -1):
        sources[source] = watermark
    if len(sources) < n_sources:
        return None
    wm = min(sources.values())
    return wm if current is None or wm > current else None
