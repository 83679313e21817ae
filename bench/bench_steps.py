"""Where the CPU of a multi-process run goes: each step's CPU per process, and what is left
outside the steps (Bytewax's exchange of items between processes, routing maps, sinks).

Runs the file flow on an archive with 1 process, then with ``--procs N`` processes
(``bytewax.testing.cluster_main`` on loopback), in one invocation, and prints per process its CPU
seconds, each step's CPU (thread time inside the step's logic), the rest, and what it pickled
and unpickled to exchange items with the other processes (per kind of message: count, MB, CPU
s). CPU, not wall time: it is what a busy machine cannot hide, and a step's CPU does not depend
on the other processes.

    .venv/bin/python bench/bench_steps.py ../shared/data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz
    .venv/bin/python bench/bench_steps.py --no-single ARCHIVE   # only the --procs N run
    .venv/bin/python bench/bench_steps.py --exchange     # Bytewax's own cost of one item crossing
    .venv/bin/python bench/bench_steps.py --pickle ../shared/data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz

``--pickle ARCHIVE`` times a pickle round trip (what Bytewax does to a message that crosses
processes) of the messages the first 300 polls of an archive make, ``Deduped`` (article, dedup
decision, story features) and ``ScoredArticle``, with the dataclasses' own pickling and with
``newsflow.runtime.pickling.fast_pickle``, in one invocation.

``--exchange`` measures the cost of moving an item between processes in Bytewax itself: 20,000
dicts of ~1 KB through two keyed steps, on 1 process and on 2 (CPU of all processes summed); the
difference per crossing is what every keyed step that sends an item to another process pays.

Each process's CPU seconds in every wall second of the run (``cpu_per_wall_second``, from
``/proc``) show when it waits for the others: ``seconds_under_half_busy`` counts the seconds it
used less than half a core (e.g. the steps of a 2-process replay running in turn, one process
idle, as they did with 256 raw messages per file read).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r'''
import collections, json, sys, time
sys.path.insert(0, sys.argv[4])
# what Bytewax pickles to send items to other processes (it calls pickle.dumps / pickle.loads):
# per kind of message, count, MB and CPU seconds of the outermost call (a Shared message's
# payload, pickled inside it on first use, is counted as "payload" with no time of its own)
import pickle
pickles = collections.defaultdict(lambda: [0, 0, 0.0])
depth = [0]
_dumps, _loads = pickle.dumps, pickle.loads

def kind(o):
    if type(o).__name__ == "Shared":
        o = o.obj
    name = type(o).__name__
    if name == "tuple" and len(o) == 2:
        return kind(o[1])
    if name == "Batch" and o.items:
        first = o.items[0]
        inner = getattr(first, "message", None)
        return f"Batch[{type(first).__name__}" + (f"/{type(inner).__name__}]" if inner is not None else "]")
    return name

def counted(fn, label):
    def wrapper(arg, *a, **kw):
        depth[0] += 1
        t = time.thread_time()
        try:
            out = fn(arg, *a, **kw)
        finally:
            depth[0] -= 1
        dt = time.thread_time() - t
        obj, data = (arg, out) if label == "dumps" else (out, arg)
        row = pickles[(label if depth[0] == 0 else "payload " + label, kind(obj), type(obj).__name__ == "Shared")]
        row[0] += 1
        row[1] += len(data)
        row[2] += dt if depth[0] == 0 else 0.0
        return out
    return wrapper

pickle.dumps, pickle.loads = counted(_dumps, "dumps"), counted(_loads, "loads")
from newsflow.flows import isolation
cpu = collections.Counter()
items = collections.Counter()
inner_on_item = isolation.Isolated.on_item

def timed(self, value):
    t = time.thread_time()
    try:
        return inner_on_item(self, value)
    finally:
        name = type(self.inner).__name__  # the digest steps by kind (feeder, clock, window, trend)
        k = self.stage + (":" + name if self.stage == "digests" else "")
        cpu[k] += time.thread_time() - t
        items[k] += 1

isolation.Isolated.on_item = timed

from bytewax.testing import cluster_main, run_main
from flows.entry import file_flow
pid, n, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
flow = file_flow()
c0, t0 = time.process_time(), time.perf_counter()
if n == 1:
    run_main(flow)
else:
    cluster_main(flow, [f"127.0.0.1:{port + i}" for i in range(n)], pid)
total = time.process_time() - c0
print(json.dumps({"proc": pid, "cpu_s": round(total, 2), "wall_s": round(time.perf_counter() - t0, 2),
                  "steps": {k: [round(v, 2), items[k]] for k, v in cpu.most_common()},
                  "pickles": {f"{op} {k}{' (shared)' if sh else ''}": [n, round(b / 1e6, 2), round(t, 2)]
                              for (op, k, sh), (n, b, t) in sorted(pickles.items(), key=lambda kv: -kv[1][2])},
                  "outside_steps_s": round(total - sum(cpu.values()), 2)}))
'''

_EXCHANGE = r'''
import sys, time
import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, TestingSink, cluster_main, run_main
pid, n, port, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rec = {"title": "x" * 80, "body": "word " * 150, "ids": list(range(20)), "score": {"a": 1.5, "b": "zz"}}
items = [(f"k{i % 16}", dict(rec, i=i)) for i in range(count)] if pid == 0 else []
flow = Dataflow("exchange")
s = op.input("in", flow, TestingSource(items))
a = op.stateful_map("a", s, lambda st, v: (None, v["i"]))
b = op.stateful_map("b", op.key_on("rekey", a, lambda kv: f"z{kv[1] % 16}"), lambda st, v: (None, v))
op.output("out", b, TestingSink([]))
c0 = time.process_time()
if n == 1:
    run_main(flow)
else:
    cluster_main(flow, [f"127.0.0.1:{port + i}" for i in range(n)], pid)
print(time.process_time() - c0)
'''


def _cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) of a running process, from ``/proc`` (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_procs(code: str, n: int, args: list[str], env: dict[str, str], port: int,
               busy: list[list[float]] | None = None) -> list[str]:
    """Runs ``n`` processes of ``code`` and returns each one's last line of output. With ``busy``
    (a list), appends per process its CPU seconds in each wall second of the run: a step that
    waits for another process shows as seconds well under 1."""
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i), str(n), str(port), *args], env=env,
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    if busy is not None:
        per: list[list[float]] = [[] for _ in procs]
        last = [0.0] * n
        while any(p.poll() is None for p in procs):
            time.sleep(1.0)
            for i, p in enumerate(procs):
                c = _cpu_s(p.pid)
                if c is not None:
                    per[i].append(round(c - last[i], 2))
                    last[i] = c
        busy.extend(per)
    outs = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"process failed ({p.returncode}): {err[-2000:]}")
        outs.append(out.strip().splitlines()[-1])
    return outs


def exchange(count: int) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    one = sum(float(x) for x in _run_procs(_EXCHANGE, 1, [str(count)], env, 47730))
    two = sum(float(x) for x in _run_procs(_EXCHANGE, 2, [str(count)], env, 47730))
    # with 16 keys per step spread over 2 workers, about half of the items cross at each of the
    # two keyed steps (the input is on process 0): ~count crossings in all
    print(json.dumps({"items": count, "cpu_s_1_process": round(one, 2), "cpu_s_2_processes": round(two, 2),
                      "extra_us_per_crossing": round((two - one) / count * 1e6, 1)}))


def pickling(archive: str, polls: int = 300, rounds: int = 5) -> None:
    """Pickle round trips of real messages: the dataclasses' own ``__getstate__`` /
    ``__setstate__`` vs :func:`~newsflow.runtime.pickling.fast_pickle`'s ``__reduce__``."""
    import itertools
    import pickle

    sys.path.insert(0, str(ROOT))
    from newsflow.connectors.files import iter_archive
    from newsflow.dedup.story_features import StoryFeatures, StoryInput, featurize_batch
    from newsflow.feeds.normalize import normalize_payload
    from newsflow.model import messages, records
    from newsflow.model.records import DedupInfo
    from newsflow.wire.codec import decode_raw
    from newsflow.wire.envelope import EnvelopeError

    msgs: list[object] = []
    for raw in itertools.islice(iter_archive(Path(archive)), polls):
        try:
            arts = normalize_payload(decode_raw(raw)).articles
        except EnvelopeError:
            continue
        feats = featurize_batch([StoryInput(a.article_id, a.title, a.url, a.publisher, a.published_ms,
                                            a.body_text, a.canonical_url) for a in arts])
        for a, f in zip(arts, feats, strict=True):
            msgs.append(messages.Deduped(a.article_id, a, DedupInfo("unique", None, None, seen_in=(records.Sighting(a.feed_id, a.publisher, a.url or "", a.fetched_at, a.article_id),)), 0, f))
            msgs.append(messages.ScoredArticle({"article_id": a.article_id, "title": a.title, "body_text": a.body_text}))
    classes = list(dict.fromkeys([c for m in (messages, records) for c in vars(m).values()
                                  if isinstance(c, type) and "__reduce__" in vars(c)] + [StoryFeatures]))
    fast = {c: vars(c)["__reduce__"] for c in classes}

    def round_trips() -> float:
        t0 = time.perf_counter()
        for m in msgs:
            pickle.loads(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL))
        return (time.perf_counter() - t0) / len(msgs) * 1e6

    res: dict[str, list[float]] = {"dataclass": [], "fast_pickle": []}
    for _ in range(rounds):
        for c in classes:
            delattr(c, "__reduce__")  # back to the dataclass's own __getstate__/__setstate__
        res["dataclass"].append(round_trips())
        for c, f in fast.items():
            c.__reduce__ = f  # type: ignore[method-assign]
        res["fast_pickle"].append(round_trips())
    ratio = [a / b for a, b in zip(res["dataclass"], res["fast_pickle"], strict=True)]
    print(json.dumps({"messages": len(msgs), "us_per_round_trip_median": {
        k: round(sorted(v)[len(v) // 2], 2) for k, v in res.items()},
        "dataclass_over_fast_per_round": [round(x, 2) for x in ratio]}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("archive", nargs="?")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--no-single", action="store_true", help="skip the 1-process run")
    ap.add_argument("--exchange", action="store_true")
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--pickle", metavar="ARCHIVE")
    a = ap.parse_args()
    if a.pickle:
        pickling(a.pickle)
        return
    if a.exchange:
        exchange(a.count)
        return
    if not a.archive:
        raise SystemExit("an archive (or --exchange)")
    out = Path(tempfile.mkdtemp(prefix="newsflow-steps-"))
    report: dict[str, object] = {"input": a.archive}
    for n in ((a.procs,) if a.no_single else (1, a.procs)):
        env = {**os.environ, "NEWSFLOW_INPUT": str(Path(a.archive).resolve()), "NEWSFLOW_OUT": str(out / f"p{n}"),
               "PYTHONHASHSEED": "0"}
        t0 = time.perf_counter()
        busy: list[list[float]] = []
        rows = [json.loads(x) for x in _run_procs(_CHILD, n, [str(ROOT)], env, 47740, busy)]
        for r, b in zip(rows, busy, strict=True):
            # (the last second is cut short by the end of the process)
            r["seconds_under_half_busy"] = sum(1 for x in b[:-1] if x < 0.5)
            r["cpu_per_wall_second"] = b
        steps: collections.Counter[str] = collections.Counter()
        for r in rows:
            for k, (v, _) in r["steps"].items():
                steps[k] += v
        report[f"{n}_process" + ("es" if n > 1 else "")] = {
            "wall_s": round(time.perf_counter() - t0, 1),
            "cpu_s_sum": round(sum(r["cpu_s"] for r in rows), 2),
            "cpu_s_max_process": max(r["cpu_s"] for r in rows),
            "outside_steps_s_sum": round(sum(r["outside_steps_s"] for r in rows), 2),
            "steps_cpu_s_sum": {k: round(v, 2) for k, v in steps.most_common()},
            "processes": rows,
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
