"""Digest assembly time for one window of N articles (default 100,000), one core.

Records come from ``bench_score_topics.make_records`` (UCI titles + deterministic synthetic
bodies, story ids = UCI story ids), scored with :func:`newsflow.score.score_record` at the
window end; all of them fall into one morning-brief window. The timed part is
:func:`newsflow.digest.assemble_digest` alone (selection, TF-IDF, DBSCAN, labels, leads,
summaries, trends against a previous digest, sections, self-checks).

    python3 bench/bench_digest.py --n 100000
    python3 bench/bench_digest.py --n 100000 --no-stories   # every article its own story
    python3 bench/bench_digest.py --n 20000 --topics 12     # Agglomerative Ward, k = 12
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_score_topics import make_records

from newsflow.digest.assemble import assemble_digest, digest_memory
from newsflow.digest.config import DigestConfig
from newsflow.digest.schedule import DigestWindow
from newsflow.scoring.importance import score_record
from newsflow.wire.contracts import validate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--no-stories", action="store_true", help="drop story ids (no grouping)")
    ap.add_argument("--topics", type=int, default=None, help="fixed number of topics (Ward)")
    ap.add_argument("--synthetic", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    recs = make_records(args.n, synthetic=args.synthetic)
    end = max(r["published_ms"] for r in recs) + 1
    start = min(r["published_ms"] for r in recs)
    scored = []
    for r in recs:
        if args.no_stories:
            r["story_id"] = None
            r["story_publishers"] = [r["publisher"]]
            r["story_tiers"] = [r["tier"]]
        scored.append(score_record(r, end))
    # a previous window: the first half of the records, for the trend flags
    rng = random.Random(5)
    prev_recs = rng.sample(scored, len(scored) // 4)
    t_prep = time.perf_counter() - t0
    cfg = DigestConfig(n_topics=args.topics)
    win = DigestWindow("morning_brief", start, end)
    t0 = time.perf_counter()
    prev = assemble_digest(prev_recs, win, config=cfg)
    t_prev = time.perf_counter() - t0
    t0 = time.perf_counter()
    c0 = time.process_time()
    d = assemble_digest(scored, win, previous=digest_memory(prev), config=cfg)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    validate("digests", d)
    print(
        orjson.dumps(
            {
                "articles": len(scored),
                "stories": not args.no_stories,
                "clustering": d["clustering"],
                "assemble_seconds": round(dt, 2),
                "assemble_cpu_seconds": round(cpu, 2),
                "previous_window_articles": len(prev_recs),
                "previous_assemble_seconds": round(t_prev, 2),
                "selected": d["selected_count"],
                "clusters": d["cluster_count"],
                "items": [len(s["items"]) for s in d["sections"]],
                "trends": sorted({it["trend"] or "-" for s in d["sections"] for it in s["items"]}),
                "digest_bytes": len(orjson.dumps(d)),
                "prep_seconds": round(t_prep, 1),
            }
        ).decode()
    )


if __name__ == "__main__":
    main()
