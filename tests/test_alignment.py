from __future__ import annotations

import random

from newsflow.core.alignment import END, EpochMerge


def stream(parts: int, seed: int) -> list[list[tuple]]:
    """Per input partition: items tagged with their epoch, ticks when a partition's clock crosses
    into a later bucket (partitions skip buckets now and then, as sparse feeds do)."""
    rng = random.Random(seed)
    per: list[list[tuple]] = [[] for _ in range(parts)]
    for p in range(parts):
        b = 0
        for i in range(40):
            if rng.random() < 0.3:
                b += rng.choice([1, 1, 2, 5])
                per[p].append(("T", f"p{p}", b, b * 1000 + p))
            per[p].append(("A", b, f"{p:04d}:{i:012d}", f"item{p}-{i}"))
        per[p].append(("T", f"p{p}", END, b * 1000 + p))
    return per


def interleave(per: list[list[tuple]], seed: int) -> list[tuple]:
    """A random interleaving that keeps each partition's channel FIFO."""
    rng = random.Random(seed)
    out, pos = [], [0] * len(per)
    while any(pos[s] < len(per[s]) for s in range(len(per))):
        s = rng.choice([s for s in range(len(per)) if pos[s] < len(per[s])])
        out.append(per[s][pos[s]])
        pos[s] += 1
    return out


def run(events: list[tuple], parts: int) -> list[tuple]:
    m, got = EpochMerge(tuple(f"p{p}" for p in range(parts))), []
    for ev in events:
        if ev[0] == "A":
            m.add_item(ev[1], ev[2], ev[3])
        else:
            for r in m.add_tick(ev[1], ev[2], ev[3]):
                got.append((r.boundary, r.watermark, r.items))
    assert len(m) == 0  # every partition ended: everything released
    return got


def test_releases_are_independent_of_interleaving() -> None:
    for data_seed in range(5):
        per = stream(3, data_seed)
        ref = run(interleave(per, 0), 3)
        assert sum(len(items) for _, _, items in ref) == 120
        for seed in range(1, 25):
            assert run(interleave(per, seed), 3) == ref


def test_items_come_out_in_epoch_then_offset_order() -> None:
    per = stream(3, 1)
    items = [x for _, _, batch in run(interleave(per, 3), 3) for x in batch]
    epoch = {ev[3]: (ev[1], ev[2].split(":")[1], ev[2].split(":")[0]) for p in per for ev in p if ev[0] == "A"}
    assert items == sorted(items, key=lambda x: epoch[x])


def test_nothing_released_before_every_source_ticked() -> None:
    m = EpochMerge(("a", "b"))
    m.add_item(3, "0000:000000000001", "x")
    assert m.add_tick("a", 5, 5_100) == []
    m.add_item(4, "0001:000000000000", "y")
    [r] = m.add_tick("b", 4, 4_200)  # boundary 4: epochs < 4; the watermark is the lower clock
    assert (r.boundary, r.watermark, r.items) == (4, 4_200, ["x"])
    [r] = m.add_tick("b", 6, 6_000)
    assert (r.boundary, r.watermark, r.items) == (5, 5_100, ["y"])
    assert m.add_tick("b", 6, 6_000) == []  # a re-sent tick changes nothing
    assert m.watermark == 5_100


def test_an_ended_source_stops_holding_the_others() -> None:
    m = EpochMerge(("a", "b"))
    m.add_item(1, "0000:000000000001", "x")
    assert m.add_tick("b", END, 0) == []
    [r] = m.add_tick("a", 2, 2_000)
    assert (r.boundary, r.watermark, r.items) == (2, 2_000, ["x"])
    [r] = m.add_tick("a", END, 2_000)
    assert (r.boundary, r.watermark, r.items) == (END, None, [])
