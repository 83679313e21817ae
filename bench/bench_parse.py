"""The parse step alone (decode + parse + normalize) against the naive peer's parsing, in one
process on the same payloads, each variant in turn, ``--runs`` rounds:

    python bench/bench_parse.py --archive ../shared/data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz

* ``naive``: ``feedparser.parse`` of every body + a dict on GUID / link (what ``naive_peer.py`` does)
* ``feedparser``: newsflow's normalization with the feedparser path only (``fast_parse=False``)
* ``fast``: with the ElementTree fast path
* ``fast+memory``: with the fast path and the per-feed re-poll memory (what the flow's parse step runs)

Prints median seconds, items/s and each variant's speed relative to ``naive`` per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import feedparser

from newsflow.connectors.files import iter_archive
from newsflow.feeds.normalize import NormalizeConfig, RepollMemory, normalize_payload
from newsflow.wire.codec import decode_raw


def naive(lines: list[bytes]) -> int:
    seen: dict[str, str] = {}
    n = 0
    for line in lines:
        p = decode_raw(line)
        if not p.body:
            continue
        for e in feedparser.parse(p.body).entries:
            n += 1
            seen.setdefault(e.get("id") or e.get("link") or e.get("title", ""), p.feed_id)
    return n


def flow_parse(lines: list[bytes], settings: NormalizeConfig, memory: bool) -> int:
    m = RepollMemory() if memory else None
    n = 0
    for line in lines:
        n += len(normalize_payload(decode_raw(line), settings, m).articles)
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archive", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", type=int)
    args = ap.parse_args()
    lines = list(iter_archive(args.archive))[: args.limit]
    variants = {
        "naive": lambda: naive(lines),
        "feedparser": lambda: flow_parse(lines, NormalizeConfig(fast_parse=False), memory=False),
        "fast": lambda: flow_parse(lines, NormalizeConfig(), memory=False),
        "fast+memory": lambda: flow_parse(lines, NormalizeConfig(), memory=True),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    items = 0
    for r in range(args.runs):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            n = fn()
            times[name].append(time.perf_counter() - t0)
            items = max(items, n)
            print(f"run {r} {name}: {times[name][-1]:.2f} s ({n} items)", file=sys.stderr)
    out: dict[str, object] = {"payloads": len(lines), "items": items}
    for name, ts in times.items():
        speed = [a / b for a, b in zip(times["naive"], ts, strict=True)]
        out[name] = {"s_median": round(statistics.median(ts), 2), "items_per_s": round(items / statistics.median(ts)),
                     "speed_vs_naive_median": round(statistics.median(speed), 2),
                     "speed_vs_naive": [round(x, 2) for x in speed]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
