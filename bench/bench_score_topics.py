"""Throughput of importance scoring + online topics (river k-means semantics), one core.

Input: the UCI News Aggregator titles from ``../shared/data/uci-news`` (read in place, never
copied) turned into article records; UCI has titles only, so each record gets a synthetic
~250-word body built deterministically from the titles of its own UCI story plus filler words
drawn from the corpus vocabulary (with a few figures, list items and links so every depth
rule fires now and then). Without the corpus (or with ``--synthetic``) records are fully
synthetic.

    python3 bench/bench_score_topics.py --n 100000            # newsflow (numpy) k-means
    python3 bench/bench_score_topics.py --n 5000 --river      # stock river KMeans, for scale
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from newsflow.clustering.topics import (
    OnlineTopics,
    TopicConfig,
    annotate,
    hashed_vector,
    vector_to_dict,
)
from newsflow.core.timeutil import iso_to_ms, ms_to_iso
from newsflow.scoring.importance import InterestProfile, ScoreConfig, importance
from newsflow.scoring.severity import SeverityProfile
from newsflow.text.tokenize import TextFeatures

UCI = (
    Path(__file__).resolve().parent.parent.parent
    / "shared/data/uci-news/uci_news_2014-03_05.daily_shuffled.jsonl.gz"
)
TIERS = ("T1", "T2", "T3", "T4", "T5")


def uci_rows(limit: int) -> Iterator[dict[str, Any]]:
    with gzip.open(UCI) as f:
        for i, line in enumerate(f):
            if i >= limit:
                return
            yield orjson.loads(line)


def synthetic_rows(limit: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    subjects = ["Apple", "Google", "Fed", "Ukraine", "Obama", "Samsung", "Ebola", "Malaysia"]
    verbs = ["unveils", "reports", "faces", "plans", "warns", "wins", "cuts", "probes"]
    objs = ["iPhone", "rates", "crisis", "deal", "outbreak", "flight", "earnings", "sanctions"]
    for i in range(limit):
        s = rng.randrange(len(subjects))
        t = f"{subjects[s]} {rng.choice(verbs)} {objs[(s + rng.randrange(2)) % len(objs)]} {i % 97}"
        yield {
            "id": str(i),
            "time": ms_to_iso(1_394_409_600_000 + i * 20_000),
            "title": t,
            "url": f"https://example{i % 50}.com/{i}",
            "source": f"Publisher {i % 50}",
            "story": f"s{s}-{i % 300}",
            "hostname": f"example{i % 50}.com",
        }


def make_records(n: int, *, synthetic: bool = False, seed: int = 11) -> list[dict[str, Any]]:
    """``n`` article records (articles.v1 fields + story fields) with ~250-word bodies."""
    rows = list(synthetic_rows(n) if synthetic or not UCI.exists() else uci_rows(n))
    rng = random.Random(seed)
    by_story: dict[str, list[str]] = {}
    vocab: list[str] = []
    for r in rows:
        by_story.setdefault(r["story"], []).append(r["title"])
        if len(vocab) < 50_000:
            vocab.extend(r["title"].split())
    story_pubs: dict[str, set[str]] = {}
    story_tiers: dict[str, set[str]] = {}
    recs = []
    for i, r in enumerate(rows):
        pub = r["source"] or r["hostname"]
        tier = TIERS[int(r["id"]) % 5] if r["id"].isdigit() else TIERS[i % 5]
        story_pubs.setdefault(r["story"], set()).add(pub)
        story_tiers.setdefault(r["story"], set()).add(tier)
        sibs = by_story[r["story"]]
        body_words: list[str] = []
        for t in sibs[:6]:
            body_words.extend(t.split())
        body_words.extend(rng.choice(vocab) for _ in range(250 - min(len(body_words), 200)))
        if i % 3 == 0:
            body_words.insert(rng.randrange(len(body_words)), f"{rng.randrange(1, 99)}.{i % 10}%")
        body = " ".join(body_words)
        html = f"<p>{body}</p>"
        if i % 7 == 0:
            html += "<ul><li>one</li><li>two</li><li>three</li></ul>"
        if i % 5 == 0:
            html += '<a href="https://www.reuters.com/x">source</a>'
        ms = iso_to_ms(r["time"]) + (i % 86_400) * 1000
        recs.append(
            {
                "schema": "articles",
                "schema_version": 1,
                "key": f"{i:016x}",
                "article_id": f"{i:016x}",
                "seq": f"0:{i}:0",
                "feed_id": r["hostname"],
                "publisher": pub,
                "tier": tier,
                "guid": r["url"],
                "url": r["url"],
                "title": r["title"],
                "published_at": ms_to_iso(ms),
                "published_ms": ms,
                "date_uncertain": i % 17 == 0,
                "fetched_at": ms_to_iso(ms + 300_000),
                "body_text": body,
                "body_html": html,
                "word_count": len(body_words) + (i % 4) * 300,
                "partial_content": i % 11 == 0,
                "content_hash": f"{i:016x}",
                "disposition": "unique" if i % 9 else "same_event",
                "duplicate_of": None,
                "seen_in": [],
                "publishers_seen": 1,
                "story_id": r["story"],
            }
        )
    for rec in recs:
        rec["story_publishers"] = sorted(story_pubs[rec["story_id"]])
        rec["story_tiers"] = sorted(story_tiers[rec["story_id"]])
    return recs


def python_ref_us() -> float:
    """Machine calibration: best-of-50 time of ``sum(range(1000))`` in µs (≈ 8 µs on an idle
    modern x86 core with CPython 3.11). Divide figures by ``8 / this`` to compare machines."""
    import timeit

    return round(min(timeit.repeat("sum(range(1000))", number=200, repeat=50)) / 200 * 1e6, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--river", action="store_true", help="stock river.cluster.KMeans on dicts")
    ap.add_argument("--profile", action="store_true", help="with an interest + severity profile")
    args = ap.parse_args()

    ref0 = python_ref_us()
    t0 = time.perf_counter()
    recs = make_records(args.n, synthetic=args.synthetic)
    t_gen = time.perf_counter() - t0
    cfg = ScoreConfig()
    if args.profile:
        cfg = ScoreConfig(
            profile=InterestProfile.from_terms({"apple iphone": 1.0, "ukraine russia": 1.0}),
            severity=SeverityProfile(),
        )
    topics = OnlineTopics(TopicConfig())
    now = max(r["published_ms"] for r in recs)
    reliability = {r["feed_id"]: 0.97 for r in recs}

    t0 = time.perf_counter()
    c0 = time.process_time()
    half_cpu = 0.0
    total = 0.0
    if args.river:
        km = topics.to_river()
        for r in recs:
            f = TextFeatures.of(r["title"], r["body_text"])
            total += importance(r, now, cfg, reliability=0.97, features=f).score
            km.learn_one(vector_to_dict(hashed_vector(f)))
    else:
        for s in range(0, len(recs), args.batch):
            if s == len(recs) // 2 // args.batch * args.batch:
                half_cpu = time.process_time()
            out = annotate(recs[s : s + args.batch], now, topics, cfg, reliability)
            total += sum(o["importance"] or 0.0 for o in out)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    second_half = len(recs) - len(recs) // 2 // args.batch * args.batch
    steady = time.process_time() - half_cpu if half_cpu else None
    snap = topics.snapshot()
    print(
        orjson.dumps(
            {
                "articles": len(recs),
                "corpus": "synthetic" if args.synthetic or not UCI.exists() else "uci",
                "kmeans": "river" if args.river else "newsflow-numpy",
                "profile": bool(args.profile),
                "seconds": round(dt, 3),
                "articles_per_s": round(len(recs) / dt),
                "cpu_seconds": round(cpu, 3),
                "articles_per_cpu_s": round(len(recs) / cpu),
                "steady_articles_per_cpu_s": round(second_half / steady) if steady else None,
                "mean_importance": round(total / len(recs), 2),
                "snapshot_bytes": len(snap),
                "topic_sizes": None if args.river else topics.sizes(),
                "gen_seconds": round(t_gen, 2),
                "python_ref_us_before_after": [ref0, python_ref_us()],
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        ).decode()
    )


if __name__ == "__main__":
    main()
