"""Whole-flow benchmark on real data: UCI headlines replayed as raw feed payloads.

    python bench/bench_flow.py --rows 100000                 # file mode + per-stage cost
    python bench/bench_flow.py --rows 100000 --kafka          # also Kafka mode (starts a broker)
    python bench/bench_flow.py --rows 100000 --kafka --brokers 127.0.0.1:9092

Prints articles/s end to end (one worker), peak RSS of the flow process and the cost of each
stage measured in-process (decode, parse+normalize, dedup, encode). The UCI file is read from
../shared and never copied into the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kafka_broker import broker_bootstrap  # (bench/ is the script's directory)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
UCI = ROOT.parent / "shared" / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"


def run_child(code: str) -> tuple[float, int]:
    """Run python code in a child process; wall seconds and the child's peak RSS (KiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return dt, max(peak, before)


def stage_costs(archive: Path) -> dict[str, float]:
    from newsflow.config import Settings
    from newsflow.connectors.files import iter_archive
    from newsflow.core.timeutil import iso_to_ms
    from newsflow.dedup.exact import DedupShard, dedup_shard_key
    from newsflow.feeds.normalize import normalize_payload
    from newsflow.wire.codec import article_record, decode_raw, dumps

    s = Settings()
    lines = list(iter_archive(archive))
    t0 = time.perf_counter()
    payloads = [decode_raw(x) for x in lines]
    t1 = time.perf_counter()
    arts = [a for p in payloads for a in normalize_payload(p, s.normalize.to_config()).articles]
    t2 = time.perf_counter()
    shards: dict[str, DedupShard] = {}
    decided = []
    for a in arts:
        k = dedup_shard_key(a, s.dedup.shards)
        sh = shards.get(k) or shards.setdefault(k, DedupShard(s.dedup.window_ms))
        decided.append((a, sh.process(a)))
    t3 = time.perf_counter()
    from newsflow.clustering.topics import OnlineTopics, annotate
    from newsflow.dedup.story_assigner import StoryAssigner
    from newsflow.dedup.story_features import featurize_batch

    kept = [(a, info) for a, info in decided if info is not None]
    assigner, topics = StoryAssigner(), OnlineTopics()
    recs = []
    for i in range(0, len(kept), 1000):
        chunk = kept[i : i + 1000]
        for (a, info), f in zip(chunk, featurize_batch([a for a, _ in chunk]), strict=True):
            exact = info.disposition in ("exact_duplicate", "revision")
            asg = assigner.assign(f, now_ms=None, duplicate_of=info.duplicate_of if exact else None)
            recs.append(article_record(a, info, "0000:000000000000:00000", {
                "story_id": asg.story_id, "story_publishers": asg.story_publishers}))
    t4 = time.perf_counter()
    for i in range(0, len(recs), 1000):
        chunk = recs[i : i + 1000]
        for r, fields in zip(chunk, annotate(chunk, iso_to_ms(chunk[-1]["fetched_at"]), topics), strict=True):
            r.update(fields)
    t5 = time.perf_counter()
    for r in recs:
        dumps(r)
    t6 = time.perf_counter()
    n = len(arts)
    return {
        "articles": n,
        "decode_us": (t1 - t0) / n * 1e6,
        "parse_normalize_us": (t2 - t1) / n * 1e6,
        "dedup_us": (t3 - t2) / n * 1e6,
        "stories_us": (t4 - t3) / n * 1e6,
        "score_topics_us": (t5 - t4) / n * 1e6,
        "encode_us": (t6 - t5) / n * 1e6,
        "stages_articles_per_s": n / (t6 - t0),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--uci", default=str(UCI))
    ap.add_argument("--kafka", action="store_true")
    ap.add_argument("--brokers")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="newsflow-bench-"))
    from newsflow.cli.main import main as cli

    t0 = time.perf_counter()
    cli(["import-uci", args.uci, "--out", str(work / "in"), "--limit", str(args.rows)])
    print(f"import-uci: {time.perf_counter() - t0:.1f}s")
    archive = work / "in"
    res: dict[str, object] = {"rows": args.rows}
    res["stages"] = stage_costs(archive)

    dt, rss = run_child(
        f"from newsflow.cli.main import run_file_flow; run_file_flow({str(archive)!r}, {str(work / 'out')!r})"
    )
    n = sum(1 for _ in (work / "out" / "articles.jsonl").open("rb"))
    res["file_mode"] = {
        "seconds": round(dt, 2),
        "articles": n,
        "articles_per_s": round(n / dt),
        "peak_rss_mb": round(rss / 1024),
    }

    if args.kafka:
        with broker_bootstrap(args.brokers) as brokers:
            suffix = uuid.uuid4().hex[:6]
            cfg = work / "settings.toml"
            cfg.write_text(
                "[kafka.topics]\n"
                + "\n".join(
                    f'{k} = "{v}.{suffix}"'
                    for k, v in (
                        ("raw", "feeds.raw"),
                        ("articles", "articles"),
                        ("digests", "digests"),
                        ("feed_health", "feed-health"),
                        ("deadletter", "deadletter"),
                    )
                )
                + "\n"
            )
            t0 = time.perf_counter()
            cli(["produce", str(archive), "--brokers", brokers, "--config", str(cfg)])
            produce_s = time.perf_counter() - t0
            dt, rss = run_child(
                f"from newsflow.cli.main import main; main(['run', '--brokers', {brokers!r}, '--config', {str(cfg)!r}, '--until-eof'])"
            )
            res["kafka_mode"] = {
                "produce_seconds": round(produce_s, 2),
                "seconds": round(dt, 2),
                "articles_per_s": round(n / dt),
                "peak_rss_mb": round(rss / 1024),
            }
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
