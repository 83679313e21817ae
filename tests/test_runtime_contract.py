"""What ``newsflow.runtime`` relies on in Bytewax, checked against the installed Bytewax with real
worker threads and processes (``tests/runtime_probe.py``). An upgrade of Bytewax must pass
these tests; a failure names the assumption that no longer holds:

* routing: a key runs on worker ``SipHash-1-3(name) % workers`` (``runtime.placement.worker_of``),
  the ``i``-th sorted input partition is read on worker ``i % workers``, and a key chosen by
  ``input_keys`` runs on the worker that read its partition;
* pickling: an item that goes to a key of another process is pickled twice by the sender
  (the reason ``Batch`` caches its pickle) and unpickled once by the receiver; an item for a key
  of the same process, on any of its worker threads, is never pickled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

from newsflow.config import FlowSettings, Settings
from newsflow.flows.keys import shard_keys, story_keys, trend_keys
from newsflow.runtime import BYTEWAX
from newsflow.runtime.placement import input_keys, key_name, worker_of
from tests.cluster_addresses import loopback_addresses

ROOT = Path(__file__).resolve().parents[1]
PARTS = [f"{i:04d}" for i in range(5)] + ["10-feeds.raw", "9-feeds.raw"]


def _flow_keys() -> list[str]:
    """The flow's own keys, placed and plain, and keys no placement chose."""
    keys: list[str] = []
    for placement in (True, False):
        s = Settings(flow=FlowSettings(placement=placement))
        keys += [*shard_keys(s), *story_keys(s), *trend_keys(s).values()]
    return sorted(set(keys)) + [f"k{i}" for i in range(40)]


@dataclass
class Run:
    workers: int
    #: key -> the thread ("pid.tid") that ran its state, per kind of item
    ran: dict[str, dict[str, str]]
    #: thread -> worker index
    worker: dict[str, int]
    #: partition -> (thread that read it, thread that ran its key)
    reads: dict[str, tuple[str, str]]
    #: (pickle | unpickle, probe name, thread)
    pickles: list[tuple[str, str, str]]


def _probe(tmp_path: Path, processes: int, per_process: int, keys: list[str]) -> Run:
    out = tmp_path / f"p{processes}w{per_process}"
    out.mkdir()
    env = {**os.environ, "PROBE_PARTS": ",".join(PARTS), "PROBE_KEYS": ",".join(keys), "PROBE_OUT": str(out)}
    # Bytewax's own launcher (``bytewax.testing -p``) takes fixed ports: free ones here
    cluster = ["-a", loopback_addresses(processes)] if processes > 1 else []
    procs = [subprocess.Popen([sys.executable, "-m", "bytewax.run", "tests.runtime_probe:flow", "-w", str(per_process),
                               *(["-i", str(i)] if cluster else []), *cluster],
                              env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(processes)]
    try:
        codes = [p.wait(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert codes == [0] * processes, [p.stderr.read() for p in procs if p.stderr]
    lines = [line.split() for f in sorted(out.iterdir()) for line in f.read_text().splitlines()]
    run = Run(processes * per_process, {}, {}, {}, [])
    for x in lines:
        if x[0] == "ran":  # ran KIND NAME READER THREAD on WORKER SINK_THREAD
            _, kind, name, reader, thread, _, worker, sink = x
            assert sink == thread  # a key's output is written by the worker that ran it
            run.worker[thread] = int(worker)
            if kind == "read":
                run.reads[name] = (reader, thread)
            else:
                run.ran.setdefault(kind, {})[name] = thread
        else:
            run.pickles.append((x[0], x[1], x[2]))
    return run


@pytest.fixture(scope="module", params=[(1, 2), (2, 2), (3, 1)], ids=lambda p: f"{p[0]}proc-{p[1]}workers")
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    processes, per_process = request.param
    return _probe(tmp_path_factory.mktemp("probe"), processes, per_process, _flow_keys())


def _process(thread: str) -> str:
    return thread.split(".")[0]


def test_the_installed_bytewax_is_the_one_the_runtime_is_checked_against() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert f"bytewax=={BYTEWAX}" in deps
    assert version("bytewax") == BYTEWAX


def test_each_key_runs_on_the_worker_the_routing_model_predicts(run: Run) -> None:
    keys = _flow_keys()
    for kind in ("bare", "batch", "shared"):
        assert sorted(run.ran[kind]) == sorted(keys)
        for k, thread in run.ran[kind].items():
            assert run.worker[thread] == worker_of(k, run.workers), (kind, k)
    # every worker is one thread of its own
    assert len(run.worker) == run.workers and sorted(run.worker.values()) == list(range(run.workers))


def test_the_ith_partition_is_read_on_worker_i_and_parsed_where_it_is_read(run: Run) -> None:
    assert sorted(run.reads) == sorted(PARTS)
    keys = input_keys({p: "p" + p for p in PARTS}, on=True)
    for i, part in enumerate(sorted(PARTS)):
        reader, ran = run.reads[part]
        assert run.worker[reader] == i % run.workers, part
        assert ran == reader, part  # no input item crosses to another worker to reach its key
        assert worker_of(keys[part], run.workers) == i % run.workers
        assert key_name(keys[part]) == "p" + part


def test_an_item_is_pickled_twice_to_cross_processes_and_never_within_one(run: Run) -> None:
    """Bytewax pickles an item for another process twice (its size, then its bytes): a bare
    item's ``__reduce__`` runs twice, a :class:`Batch`'s items are pickled once; the receiving
    thread unpickles each once. Items for keys of the sending process are not pickled at all."""
    sender = _process(run.reads[sorted(PARTS)[0]][0])  # the first partition sent the probes
    calls = Counter(run.pickles)
    crossed = 0
    for k, thread in run.ran["bare"].items():
        if _process(thread) == sender:
            assert not [c for c in run.pickles if c[1] in (f"bare:{k}", f"batch:{k}")], k
            continue
        crossed += 1
        reader = run.reads[sorted(PARTS)[0]][0]
        assert calls["pickle", f"bare:{k}", reader] == 2, k
        assert calls["pickle", f"batch:{k}", reader] == 1, k
        assert calls["unpickle", f"bare:{k}", thread] == 1, k
        assert calls["unpickle", f"batch:{k}", run.ran["batch"][k]] == 1, k
        assert sum(n for (_, name, _), n in calls.items() if name in (f"bare:{k}", f"batch:{k}")) == 5, k
    processes = len({_process(t) for t in run.worker})
    assert crossed > 0 if processes > 1 else not run.pickles


def test_a_shared_item_is_pickled_once_for_every_key_of_other_processes(run: Run) -> None:
    """One :class:`Shared` sent to every key: pickled once by the sender, unpickled at most once
    per receiving worker thread (once per process but for threads that miss the table at the
    same time), and every key's step got it."""
    shared = [c for c in run.pickles if c[1] == "shared"]
    receivers = {_process(t) for t in run.ran["shared"].values()} - {_process(run.reads[sorted(PARTS)[0]][0])}
    assert sum(1 for c in shared if c[0] == "pickle") == (1 if receivers else 0)
    unpickled = Counter(_process(t) for kind, _, t in shared if kind == "unpickle")
    assert set(unpickled) == receivers
    for proc, n in unpickled.items():
        assert 1 <= n <= sum(1 for t in run.worker if _process(t) == proc)

