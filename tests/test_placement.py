"""Key placement (``newsflow.core.placement``) against real Bytewax processes: the model of
Bytewax's routing must predict where every key runs, an input partition must be parsed on the
worker that reads it, and the flow's shard and digest keys must spread over the workers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from newsflow.config import Settings
from newsflow.core.hashing import shard_of
from newsflow.core.placement import input_keys, key_name, placed_key, worker_of
from newsflow.flows.keys import shard_keys, story_keys, trend_keys

ROOT = Path(__file__).resolve().parents[1]


def _probe(tmp_path: Path, processes: int, parts: list[str], keys: list[str]) -> list[list[str]]:
    out = tmp_path / f"p{processes}"
    out.mkdir()
    env = {**os.environ, "PROBE_PARTS": ",".join(parts), "PROBE_KEYS": ",".join(keys), "PROBE_OUT": str(out)}
    subprocess.run([sys.executable, "-m", "bytewax.testing", "tests.placement_probe:flow", "-p", str(processes)],
                   env=env, check=True, timeout=120, cwd=ROOT, capture_output=True)
    return [line.split() for f in sorted(out.iterdir()) for line in f.read_text().splitlines()]


@pytest.mark.parametrize("processes", [2, 3])
def test_the_routing_model_predicts_where_bytewax_runs_each_key(tmp_path: Path, processes: int) -> None:
    s = Settings()
    keys = [*shard_keys(s), *story_keys(s), *trend_keys(s).values(),
            *(key_name(k) for k in shard_keys(s)), *(f"k{i}" for i in range(40))]
    parts = [f"{i:04d}" for i in range(5)] + ["10-feeds.raw", "9-feeds.raw"]
    lines = _probe(tmp_path, processes, parts, keys)
    ran = {x[1]: x[2] for x in lines if x[0] == "key"}
    assert set(ran) == set(keys)
    # the processes are the workers: one pid per predicted worker, and no pid shared by two
    pid_of: dict[int, set[str]] = defaultdict(set)
    for k, pid in ran.items():
        pid_of[worker_of(k, processes)].add(pid)
    assert all(len(p) == 1 for p in pid_of.values()), pid_of
    assert len({next(iter(p)) for p in pid_of.values()}) == len(pid_of) == processes
    # each partition is parsed where it is read (no raw payload crosses processes)
    reads = [(name, reader, here) for kind, name, reader, here in (x for x in lines if x[0] == "read")]
    assert sorted(n for n, _, _ in reads) == sorted(parts)
    assert all(reader == here for _, reader, here in reads), reads
    # ... and the i-th sorted partition is read on worker i % W, as input_keys assumes
    worker_pid = {w: next(iter(p)) for w, p in pid_of.items()}
    for i, name in enumerate(sorted(parts)):
        assert next(r for n, r, _ in reads if n == name) == worker_pid[i % processes]


def test_placed_keys_spread_the_flows_shards_and_digest_types() -> None:
    s = Settings()
    for w in range(1, 7):
        assert [worker_of(k, w) for k in shard_keys(s)] == [i % w for i in range(s.dedup.shards)]
        # the uncategorised feeds' shard (every real feed here) on the last worker, which reads
        # the fewest input partitions
        blank = shard_of("", s.stories.shards)
        assert [worker_of(k, w) for k in story_keys(s)] == [
            w - 1 if i == blank else i % w for i in range(s.stories.shards)]
    # on 2 workers the five digest types do not share one worker (before: all five on worker 0)
    by_worker = defaultdict(list)
    for t, k in trend_keys(s).items():
        by_worker[worker_of(k, 2)].append(t)
    assert sorted(len(v) for v in by_worker.values()) == [2, 3]
    assert key_name(placed_key("st03", 3)) == "st03"
    keys = input_keys({"0000": "p0000", "0001": "p0001"})
    assert [worker_of(keys[p], 2) for p in ("0000", "0001")] == [0, 1]
