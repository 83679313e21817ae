"""A flow catching up on a backlog of ``feeds.raw`` on a real broker, on several processes, for
each Kafka read size (``flow.read_batch``), in turn, in one invocation.

The archive's raw messages are produced once into a fresh ``feeds.raw`` with ``--partitions``
partitions (keyed by feed, as the poller does); then, round after round, for each read size,
``--procs`` processes run ``newsflow.flows.pipeline.kafka_flow(..., tail=False)`` on loopback
(``bytewax.testing.cluster_main``) until every partition's end, each run into fresh output
topics. Printed: each run's wall and CPU seconds per process, the articles it wrote, and per read
size the median wall time. Without ``--brokers`` it starts the project's broker
(``scripts/kafka``) and stops it at the end.

    python bench/bench_kafka_catchup.py ../shared/data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz
    python bench/bench_kafka_catchup.py ARCHIVE --batches 1000,16 --rounds 3 --procs 2 --partitions 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kafka_broker import broker_bootstrap  # (bench/ is the script's directory)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_CHILD = r'''
import json, sys, time
pid, n, port, brokers, topics, batch = sys.argv[1:7]
from bytewax.testing import cluster_main
from newsflow.config import FlowSettings, KafkaSettings, Settings, Topics
from newsflow.flows.pipeline import kafka_flow
s = Settings(kafka=KafkaSettings(topics=Topics(**json.loads(topics))), flow=FlowSettings(read_batch=int(batch)))
c0 = time.process_time()
cluster_main(kafka_flow([brokers], s, tail=False), [f"127.0.0.1:{int(port) + i}" for i in range(int(n))], int(pid))
print(json.dumps({"cpu_s": round(time.process_time() - c0, 2), "read_batch": s.flow.read_batch}))
'''


def _count(brokers: str, topic: str) -> int:
    """Messages in every partition of ``topic`` (end offset minus start offset)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": brokers, "group.id": f"count-{uuid.uuid4().hex[:6]}"})
    try:
        parts = c.list_topics(topic, timeout=30).topics[topic].partitions
        total = 0
        for p in parts:
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += hi - lo
        return total
    finally:
        c.close()


def run(brokers: str, topics: dict[str, str], procs: int, batch: int, port: int) -> dict[str, object]:
    t0 = time.perf_counter()
    ps = [subprocess.Popen([sys.executable, "-c", _CHILD, str(i), str(procs), str(port), brokers,
                            json.dumps(topics), str(batch)], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for i in range(procs)]
    outs = [p.communicate() for p in ps]
    wall = time.perf_counter() - t0
    for p, (_, err) in zip(ps, outs, strict=True):
        if p.returncode:
            raise SystemExit(f"a flow process failed ({p.returncode}): {err[-2000:]}")
    rows = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert all(r["read_batch"] == batch for r in rows)
    return {"read_batch": batch, "wall_s": round(wall, 1), "cpu_s": [r["cpu_s"] for r in rows],
            "articles": _count(brokers, topics["articles"])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--batches", default="1000,16", help="Kafka read sizes to compare, in this order")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3, help="partitions of feeds.raw")
    ap.add_argument("--brokers")
    a = ap.parse_args()
    from newsflow.config import KafkaSettings, Settings, Topics
    from newsflow.connectors.files import iter_archive
    from newsflow.connectors.topics import ensure_topics, produce_values

    with broker_bootstrap(a.brokers) as brokers:
        names = Topics().roles()
        raw = f"{names['raw']}.catchup-{uuid.uuid4().hex[:6]}"
        ensure_topics([brokers], Settings(kafka=KafkaSettings(topics=Topics(**{**names, "raw": raw}))),
                      partitions=a.partitions)
        produced = produce_values([brokers], raw, iter_archive(Path(a.archive)))
        runs = []
        for rnd in range(a.rounds):
            for batch in (int(b) for b in a.batches.split(",")):
                suffix = uuid.uuid4().hex[:6]
                topics = {r: raw if r == "raw" else f"{n}.{suffix}" for r, n in names.items()}
                ensure_topics([brokers], Settings(kafka=KafkaSettings(topics=Topics(**topics))), partitions=1)
                r = run(brokers, topics, a.procs, batch, 47960)
                r["round"] = rnd
                runs.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    medians = {b: statistics.median(float(r["wall_s"]) for r in runs if r["read_batch"] == int(b))  # type: ignore[arg-type]
               for b in a.batches.split(",")}
    print(json.dumps({"archive": a.archive, "raw_messages": produced, "partitions": a.partitions,
                      "processes": a.procs, "runs": runs, "wall_s_median": medians}, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
