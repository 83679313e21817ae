"""Deterministic merge of several keyed streams: tick alignment (punctuations).

A downstream key that receives items from N upstream shards sees them interleaved in an order
that depends on worker scheduling. To make its output independent of that order, every item
carries its position in the (replayable) input, ``seq``, and every upstream shard forwards each
event-time tick it receives together with ``seq_cut``, the input position the tick was cut at.
Because each upstream->downstream channel is FIFO, once *all* N shards have forwarded a tick,
every item up to ``seq_cut`` of that input partition has arrived: those are released, sorted
by ``seq``. The result is the same for any number of workers and any interleaving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def seq_partition(seq: str) -> str:
    return seq.split(":", 1)[0]


@dataclass(slots=True)
class Aligner:
    """Buffers items until every upstream source has passed a tick beyond them."""

    sources: int
    #: (partition, seq_cut, wm) -> number of sources that forwarded it
    _ticks: dict[tuple[str, str, int], int] = field(default_factory=dict)
    _buffer: list[tuple[str, Any]] = field(default_factory=list)
    watermark: int = 0

    def add_item(self, seq: str, item: Any) -> None:
        self._buffer.append((seq, item))

    def add_tick(self, seq_cut: str, wm: int) -> tuple[list[Any], int | None]:
        """Count one source's tick; when all sources passed it, release what precedes it.

        Returns ``(released items in seq order, new watermark or None)``.
        """
        key = (seq_partition(seq_cut), seq_cut, wm)
        n = self._ticks.get(key, 0) + 1
        if n < self.sources:
            self._ticks[key] = n
            return [], None
        self._ticks.pop(key, None)
        part = key[0]
        ready = [x for x in self._buffer if seq_partition(x[0]) == part and x[0] <= seq_cut]
        if ready:
            keep = [x for x in self._buffer if not (seq_partition(x[0]) == part and x[0] <= seq_cut)]
            self._buffer = keep
            ready.sort(key=lambda x: x[0])
        if wm > self.watermark:
            self.watermark = wm
        return [x[1] for x in ready], wm

    def drain(self) -> list[Any]:
        """End of input: everything left, in seq order."""
        out = sorted(self._buffer, key=lambda x: x[0])
        self._buffer = []
        self._ticks.clear()
        return [x[1] for x in out]

    def __len__(self) -> int:
        return len(self._buffer)
