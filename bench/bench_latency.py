"""Live latency on a real broker: a payload landing on ``feeds.raw`` -> its article on ``articles``.

Runs ``newsflow run`` (tail mode) as a child process once per event-time tick setting, in the
same invocation, and produces live payloads (``fetched_at`` = now, 1-3 new items each, one
feed per poll round-robin) at a steady rate, plus the poller's heartbeat (``__tick__`` to every
partition of ``feeds.raw`` every ``PollerConfig().heartbeat_s``, its default). Every item's title carries a marker; the latency of an item is the time its
article record is consumed minus the time its payload was produced.

    .venv/bin/python bench/bench_latency.py [--seconds 60] [--rate 2] [--ticks 60000,1000]
        [--partitions N]        # feeds.raw partitions (payloads keyed by feed)
        [--brokers HOST:PORT]   # default: start a local broker from scripts/kafka
        [--profiles]            # each tick also with a configured default profile (live relevance)
        [--recovery]            # run with --recovery-dir, as docker-compose.yml does (snapshots every epoch)
        [--preload ARCHIVE]     # first produce a raw-payload archive and let the flow catch up: the live
                                # items then meet a full state (stories, dedup, open digest windows)
        [--at ISO]              # with --preload: the live stream's first event time (default: one
                                # minute after the archive's last fetch); it runs on from there in step
                                # with the wall clock, so a digest boundary inside the measurement closes
                                # a window full of the archive's articles

With ``--preload`` the live payloads (and the heartbeat) carry event times that continue the
archive's; the latency is still measured on the wall clock, from produce to consume.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import orjson
from confluent_kafka import Consumer, Producer
from kafka_broker import broker_bootstrap  # (bench/ is the script's directory)

ROOT = Path(__file__).resolve().parents[1]
TOPICS = (("raw", "feeds.raw"), ("articles", "articles"), ("digests", "digests"),
          ("feed_health", "feed-health"), ("deadletter", "deadletter"), ("interactions", "interactions"))
#: ``--profiles``: a configured default profile, so every article waits for the live relevance
#: stage; the poller's heartbeat then also goes to ``interactions``
PROFILE_TOML = """
[profiles.profile.default]
categories = ["news"]
[profiles.profile.default.topics]
bench = { keywords = ["story", "number"], weight = 1.0 }
"""


def rss(feed: str, items: list[tuple[str, str]], at_ms: int) -> bytes:
    body = "".join(
        f"<item><title>{title}</title><link>https://{feed}.example.com/{guid}</link>"
        f"<guid>{guid}</guid><description>Live item {title} for the latency bench.</description>"
        f"<pubDate>{time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime(at_ms / 1000))}</pubDate></item>"
        for guid, title in items
    )
    return (f'<?xml version="1.0"?><rss version="2.0"><channel><title>{feed}</title>'
            f"<link>https://{feed}.example.com/</link><description>d</description>{body}"
            "</channel></rss>").encode()


def envelope(feed: str, body: bytes | None, now_ms: int) -> bytes:
    from newsflow.model.records import RawPayload
    from newsflow.wire.codec import encode_raw

    if body is None:  # the poller's heartbeat
        return encode_raw(RawPayload(feed, "", now_ms, 0, None))[1]
    return encode_raw(RawPayload(feed, f"https://{feed}.example.com/rss", now_ms, 200, body, publisher=feed,
                                 tier="T2", category="news", language="en"))[1]


def percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    if not xs:
        return {}

    def p(q: float) -> float:
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3)

    return {"n": len(xs), "p50": p(0.50), "p90": p(0.90), "p99": p(0.99), "max": round(xs[-1], 3)}


def archive_end_ms(path: Path) -> int:
    """The last ``fetched_at`` of a raw-payload archive (epoch ms)."""
    from newsflow.connectors.files import Unreadable, archive_lines
    from newsflow.core.timeutil import iso_to_ms

    return max(iso_to_ms(orjson.loads(x)["fetched_at"]) for x in archive_lines(str(path))
               if not isinstance(x, Unreadable))


def measure(brokers: str, tick_ms: int, seconds: float, rate: float, work: Path,
            partitions: int = 1, profile: bool = False, recovery: bool = False,
            preload: Path | None = None, at_ms: int | None = None) -> dict[str, object]:
    from newsflow.connectors.poller.config import PollerConfig
    from newsflow.connectors.topics import create_topics
    from newsflow.wire.codec import interaction_heartbeat

    heartbeat_s = PollerConfig().heartbeat_s
    suffix = uuid.uuid4().hex[:6]
    names = {k: f"{v}.{suffix}" for k, v in TOPICS}
    cfg = work / f"settings-{tick_ms}-{int(profile)}.toml"
    cfg.write_text(f"[flow]\nlive_tick_seconds = {tick_ms / 1000}\n[kafka]\npartitions = {partitions}\n"
                   "[kafka.topics]\n"
                   + "\n".join(f'{k} = "{v}"' for k, v in names.items()) + "\n" + (PROFILE_TOML if profile else ""))
    create_topics(brokers, [names["raw"]], partitions=partitions)  # before the heartbeats name partitions
    preload_s = None
    if preload is not None:  # the archive first, as it was polled
        t0 = time.time()
        subprocess.run([sys.executable, "-m", "newsflow.cli.main", "produce", str(preload), "--brokers", brokers,
                        "--config", str(cfg), "--partitions", str(partitions)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        preload_s = round(time.time() - t0, 1)
    log = (work / f"run-{tick_ms}-{int(profile)}.log").open("wb")
    rec = ["--recovery-dir", str(work / f"recovery-{suffix}")] if recovery else []
    child = subprocess.Popen(
        [sys.executable, "-m", "newsflow.cli.main", "run", "--brokers", brokers, "--config", str(cfg), *rec],
        stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT,
    )
    sent: dict[str, float] = {}
    got: dict[str, float] = {}
    records = [0]  # every article record consumed (the preload's too)
    drafted: list[str] = []
    first_live = 0.0
    stop = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": brokers, "group.id": f"lat-{suffix}",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "topic.metadata.refresh.interval.ms": 1000})
        c.subscribe([names["articles"], names["digests"]])
        while not stop.is_set():
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            if m.topic() == names["digests"]:
                if first_live:  # the digests drafted while the live items were measured
                    drafted.append(orjson.loads(m.value()).get("digest_id"))
                continue
            records[0] += 1
            marker = (orjson.loads(m.value()).get("title") or "").split(" ", 1)[0]
            if marker.startswith("lat-") and marker not in got:
                got[marker] = time.time()
        c.close()

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    p = Producer({"bootstrap.servers": brokers, "linger.ms": 0})
    caught_up_s = None
    if preload is not None:  # wait until the flow has caught up: no new article for 10 s
        t0, last, last_t = time.time(), -1, time.time()
        while time.time() - t0 < 1800 and (records[0] == 0 or time.time() - last_t < 10):
            if records[0] != last:
                last, last_t = records[0], time.time()
            time.sleep(0.5)
        caught_up_s = round(last_t - t0, 1)
    # event time of the live stream: the wall clock, or (--preload) the archive's time running on
    shift = 0 if preload is None else (at_ms or archive_end_ms(preload) + 60_000) - int(time.time() * 1000)
    preloaded = records[0]
    first_live = time.time()

    def event_ms(t: float) -> int:
        return int(t * 1000) + shift

    # warm-up: the flow creates its consumer; wait for the first article before measuring
    n = 0
    feeds = [f"feed{i}" for i in range(6)]
    t_end = time.time() + seconds + 30
    measuring_from = None
    last_hb = 0.0
    while time.time() < t_end:
        now = time.time()
        if now - last_hb >= heartbeat_s:
            for part in range(partitions):
                p.produce(names["raw"], envelope("__tick__", None, event_ms(now)), key=b"__tick__",
                          partition=part)
            if profile:  # the poller's heartbeat goes to interactions too when profiles are configured
                p.produce(names["interactions"], orjson.dumps(interaction_heartbeat(event_ms(now))), key=b"__tick__")
            last_hb = now
        feed = feeds[n % len(feeds)]
        items = [(f"{suffix}-{n}-{j}", f"lat-{n}-{j} {feed} story number {n} item {j}") for j in range(1 + n % 3)]
        p.produce(names["raw"], envelope(feed, rss(feed, items, event_ms(now)), event_ms(now)), key=feed.encode())
        p.flush()
        for _, title in items:
            sent[title.split(" ", 1)[0]] = now
        if measuring_from is None and got:
            measuring_from = n  # the flow is up: measure from here, for `seconds`
            t_end = time.time() + seconds
        n += 1
        time.sleep(max(0.0, 1.0 / rate - (time.time() - now)))
    # let the tail arrive: the poller keeps sending heartbeats when no feed has news, and the
    # last items wait for the tick after them (without these, the last second's items were
    # never released and showed up as "missing")
    t_tail = time.time() + 5
    while time.time() < t_tail and any(k not in got for k in sent):
        for part in range(partitions):
            p.produce(names["raw"], envelope("__tick__", None, event_ms(time.time())), key=b"__tick__",
                      partition=part)
        if profile:
            p.produce(names["interactions"], orjson.dumps(interaction_heartbeat(event_ms(time.time()))),
                      key=b"__tick__")
        p.flush()
        time.sleep(heartbeat_s)
    stop.set()
    th.join(5)
    child.terminate()
    child.wait(30)
    log.close()
    lat = [got[k] - sent[k] for k in sent if k in got and int(k.split("-")[1]) >= (measuring_from or 0)]
    measured = [k for k in sent if int(k.split("-")[1]) >= (measuring_from or 0)]
    from newsflow.core.timeutil import ms_to_iso

    return {"tick_ms": tick_ms, "partitions": partitions, "heartbeat_s": heartbeat_s, "default_profile": profile,
            "recovery": recovery, "preload": str(preload) if preload else None, "preload_produce_s": preload_s,
            "preload_caught_up_s": caught_up_s, "preload_article_records": preloaded if preload else None,
            "live_event_time_from": ms_to_iso(event_ms(first_live)) if preload else None,
            "items_sent": len(measured), "items_received": len(lat), "latency_s": percentiles(lat), "payloads_sent": n,
            "digests_during_live": len(drafted), "digest_ids_during_live": sorted(set(drafted)),
            "missing": sorted((k for k in measured if k not in got), key=lambda k: tuple(map(int, k.split("-")[1:])))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=2.0, help="payloads per second")
    ap.add_argument("--ticks", default="60000,1000", help="live_tick_ms values to compare")
    ap.add_argument("--partitions", type=int, default=1, help="feeds.raw partitions")
    ap.add_argument("--brokers")
    ap.add_argument("--profiles", action="store_true",
                    help="per tick, a run without and one with a configured default profile (live relevance)")
    ap.add_argument("--recovery", action="store_true", help="run the flow with --recovery-dir (docker-compose.yml does)")
    ap.add_argument("--preload", type=Path, help="a raw-payload archive produced (and caught up on) first")
    ap.add_argument("--at", help="with --preload: the live stream's first event time (ISO; default: the "
                    "archive's last fetch + 1 min)")
    args = ap.parse_args()
    if args.at and not args.preload:
        ap.error("--at needs --preload")
    from newsflow.core.timeutil import iso_to_ms
    at_ms = iso_to_ms(args.at) if args.at else None
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"newsflow-lat-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    with broker_bootstrap(args.brokers) as brokers:
        res = [measure(brokers, int(t), args.seconds, args.rate, work, args.partitions, profile,
                       args.recovery, args.preload, at_ms)
               for t in args.ticks.split(",") for profile in ((False, True) if args.profiles else (False,))]
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
