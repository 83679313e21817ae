from __future__ import annotations

import random

from newsflow.core.alignment import Aligner


def stream(shards: int, seed: int) -> list[tuple[int, tuple]]:
    """Items of 3 input positions per tick, spread over shards, ticks broadcast to all shards."""
    per_shard: list[list[tuple]] = [[] for _ in range(shards)]
    for t in range(5):
        for i in range(6):
            seq = f"0000:{t * 10 + i:012d}"
            per_shard[(t * 7 + i) % shards].append(("A", seq, f"item{t}-{i}"))
        cut = f"0000:{t * 10 + 9:012d}"
        for s in range(shards):
            per_shard[s].append(("T", cut, 1000 * (t + 1)))
    # a random FIFO-preserving interleaving of the shard channels
    rng = random.Random(seed)
    out, pos = [], [0] * shards
    while any(pos[s] < len(per_shard[s]) for s in range(shards)):
        s = rng.choice([s for s in range(shards) if pos[s] < len(per_shard[s])])
        out.append(per_shard[s][pos[s]])
        pos[s] += 1
    return out


def run(events: list[tuple], shards: int) -> list[str]:
    al, got = Aligner(shards), []
    for ev in events:
        if ev[0] == "A":
            al.add_item(ev[1], ev[2])
        else:
            items, _wm = al.add_tick(ev[1], ev[2])
            got.extend(items)
    return got + al.drain()


def test_release_order_is_independent_of_interleaving() -> None:
    ref = run(stream(4, 0), 4)
    assert len(ref) == 30 and ref == sorted(ref, key=lambda s: (int(s[4]), int(s.split("-")[1])))
    for seed in range(1, 30):
        assert run(stream(4, seed), 4) == ref


def test_nothing_released_before_every_source_ticked() -> None:
    al = Aligner(2)
    al.add_item("0000:000000000001", "x")
    assert al.add_tick("0000:000000000005", 100) == ([], None)
    assert al.add_tick("0000:000000000005", 100) == (["x"], 100)
    assert al.watermark == 100
