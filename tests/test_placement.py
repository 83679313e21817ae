"""Key placement (``newsflow.runtime.placement``): the flow's shard and digest keys spread over
the workers, and with ``flow.placement = false`` every key is its plain name. Where Bytewax
really runs each key is checked against real processes in ``tests/test_runtime_contract.py``."""

from __future__ import annotations

from collections import defaultdict

from newsflow.config import FlowSettings, Settings
from newsflow.core.hashing import shard_of
from newsflow.flows.keys import shard_keys, story_key, story_keys, trend_keys
from newsflow.runtime.placement import input_keys, key_name, placed_key, worker_of
from tests.test_flow_logic import demo_articles


def test_placed_keys_spread_the_flows_shards_and_digest_types() -> None:
    s = Settings()
    for w in range(1, 7):
        assert [worker_of(k, w) for k in shard_keys(s)] == [i % w for i in range(s.dedup.shards)]
        # the uncategorised feeds' shard (every real feed here) on the last worker, which reads
        # the fewest input partitions
        blank = shard_of("", s.stories.shards)
        assert [worker_of(k, w) for k in story_keys(s)] == [
            w - 1 if i == blank else i % w for i in range(s.stories.shards)]
    # on 2 workers the five digest types do not share one worker (by hash alone: all on worker 0)
    by_worker = defaultdict(list)
    for t, k in trend_keys(s).items():
        by_worker[worker_of(k, 2)].append(t)
    assert sorted(len(v) for v in by_worker.values()) == [2, 3]
    assert key_name(placed_key("st03", 3, on=True)) == "st03"
    keys = input_keys({"0000": "p0000", "0001": "p0001"}, on=True)
    assert [worker_of(keys[p], 2) for p in ("0000", "0001")] == [0, 1]


def test_without_placement_every_key_is_its_plain_name() -> None:
    on, off = Settings(), Settings(flow=FlowSettings(placement=False))
    assert shard_keys(off) == [key_name(k) for k in shard_keys(on)] == [f"dd{i:03d}" for i in range(8)]
    assert story_keys(off) == [key_name(k) for k in story_keys(on)] == [f"st{i:02d}" for i in range(8)]
    assert trend_keys(off) == {t: key_name(k) for t, k in trend_keys(on).items()}
    assert all("@" not in k for k in trend_keys(off).values())
    assert any("@" in k for k in [*shard_keys(on), *story_keys(on), *trend_keys(on).values()])
    for _, a in demo_articles(2):
        assert story_key(a, off) == key_name(story_key(a, on)) and "@" not in story_key(a, off)
    assert input_keys({"0000": "p0000", "0001": "p0001"}, on=False) == {"0000": "p0000", "0001": "p0001"}
