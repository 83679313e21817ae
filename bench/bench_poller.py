"""Poller benchmark: 1,000 feeds on the local fixture server, mixed 200/304.

    python bench/bench_poller.py [--feeds 1000] [--rounds 3] [--concurrency 50] [--kafka HOST:PORT]

The fixture server runs in its own process pinned to CPU 1; the poller is pinned to CPU 0, so
"CPU per poll" is the poller's own cost on one core (``time.process_time``: fetch, decode,
rules, feed scan, envelope + health record encoding; with ``--kafka`` also producing).
The feeds are spread over ``--origins`` server ports (distinct origins, like distinct hosts).
Feed ``/bench/<i>``: even i is a stable feed (ETag -> 304 after the first round), odd i gains a
new item on every request (200 + scan + payload). Round 1 is cold (all 200); the following
rounds are the mixed 50/50 steady state. Every feed is on 127.0.0.1, so the per-domain cap is
lifted to the global cap here (in production the feeds would be on many domains).
A last round goes through the Bytewax dataflow (PollerSource -> records -> a null sink) to
show the framework overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bytewax.outputs import DynamicSink, StatelessSinkPartition

from newsflow.connectors.http_fetch import FetchConfig
from newsflow.connectors.poller.config import PollerConfig
from newsflow.connectors.poller.engine import PollEngine
from newsflow.connectors.poller.records import KafkaRecord
from newsflow.flows.poller import run_poller_flow
from newsflow.polling.registry import FeedSpec


class _Null(StatelessSinkPartition[KafkaRecord]):
    def __init__(self, counter: list[int]) -> None:
        self.counter = counter

    def write_batch(self, items: list[KafkaRecord]) -> None:
        self.counter[0] += len(items)


class NullSink(DynamicSink[KafkaRecord]):
    def __init__(self) -> None:
        self.counter = [0]

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Null:
        return _Null(self.counter)


def start_server(ports: int = 1) -> tuple[subprocess.Popen[str], list[str]]:
    cpus = os.sched_getaffinity(0)
    server_cpu = {1} if 1 in cpus else set(cpus)

    def pin() -> None:  # runs in the child
        os.sched_setaffinity(0, server_cpu)

    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "http_fixture_server.py"), "--quiet", "--ports", str(ports)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=pin,
    )
    assert proc.stdout is not None
    bases = proc.stdout.readline().split()
    if not bases or not all(b.startswith("http://127.0.0.1:") for b in bases):
        proc.kill()
        msg = f"fixture server did not start: {bases!r}"
        raise RuntimeError(msg)
    return proc, bases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--feeds", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3, help="rounds after the cold one")
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--origins", type=int, default=25,
                    help="server ports the feeds are spread over (distinct origins)")
    ap.add_argument("--kafka", help="also produce every record to this broker (topics bench.*)")
    args = ap.parse_args()

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the poller: one core
    proc, bases = start_server(args.origins)
    try:
        feeds = [
            FeedSpec(
                f"bench-{i:04d}",
                f"{bases[i % len(bases)]}/bench/{i}",
                f"Bench {i}",
                f"pub{i % 50}",
                "T3",
                "bench",
                "en",
            )
            for i in range(args.feeds)
        ]
        cfg = PollerConfig(
            concurrency=args.concurrency,
            per_domain_concurrency=args.concurrency,
            fetch=FetchConfig(allowed_networks=("127.0.0.1/32",), timeout_s=30.0),
        )
        producer: Any = None
        if args.kafka:
            from confluent_kafka import Producer

            from newsflow.connectors.topics import producer_config

            producer = Producer(producer_config(args.kafka))

        clock_ms = [1_715_000_000_000]

        async def rounds() -> list[tuple[str, int, float, float, Counter[str]]]:
            eng = PollEngine(feeds, cfg, clock=lambda: clock_ms[0])
            out = []
            try:
                for r in range(1 + args.rounds):
                    c0, w0 = time.process_time(), time.perf_counter()
                    evs = await eng.poll_round(force=True)
                    if producer is not None:
                        for ev in evs:
                            for rec in ev.records:
                                while True:
                                    try:
                                        producer.produce(
                                            f"bench.{rec.topic}",
                                            rec.value,
                                            rec.key,
                                            timestamp=rec.timestamp_ms,
                                        )
                                        break
                                    except BufferError:
                                        producer.poll(0.05)
                        if producer.flush(60) > 0:
                            raise RuntimeError("Kafka did not take all records within 60 s")
                    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
                    out.append(
                        (
                            "cold (all 200)" if r == 0 else f"mixed round {r}",
                            len(evs),
                            wall,
                            cpu,
                            Counter(e.status for e in evs),
                        )
                    )
                    clock_ms[0] += 3_600_000
            finally:
                await eng.aclose()
            return out

        results = asyncio.run(rounds())
        print(
            f"poller benchmark: {args.feeds} feeds on {len(bases)} origins, concurrency {args.concurrency}, "
            "poller on 1 core, "
            f"server in another process{', producing to Kafka' if producer else ''}"
        )
        print(f"{'round':<18}{'polls':>7}{'wall s':>9}{'polls/s':>10}{'CPU ms/poll':>13}  statuses")
        mixed = [x for x in results[1:]]
        for name, n, wall, cpu, st in results:
            print(
                f"{name:<18}{n:>7}{wall:>9.2f}{n / wall:>10.0f}{cpu / n * 1000:>13.3f}  {dict(st)}"
            )
        if mixed:
            n = sum(x[1] for x in mixed)
            wall = sum(x[2] for x in mixed)
            cpu = sum(x[3] for x in mixed)
            print(
                f"{'mixed 200/304':<18}{n:>7}{wall:>9.2f}{n / wall:>10.0f}{cpu / n * 1000:>13.3f}"
            )

        # one round through the Bytewax dataflow (null sink)
        sink = NullSink()
        c0, w0 = time.process_time(), time.perf_counter()
        run_poller_flow(
            feeds,
            replace(cfg, partitions=4, heartbeat_s=0),
            [],
            state_dir=None,
            once=True,
            force=True,
            sink=sink,
        )
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        print(
            f"{'bytewax flow':<18}{args.feeds:>7}{wall:>9.2f}{args.feeds / wall:>10.0f}"
            f"{cpu / args.feeds * 1000:>13.3f}  (cold, fresh state, {sink.counter[0]} records)"
        )
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
