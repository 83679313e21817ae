"""Cost per article and state bytes per article of the StoryAssigner at growing window sizes.

    python bench/bench_stories_scale.py [--sizes 10000,100000,1000000] [--measure 20000]

For each size N, UCI headlines are replayed (copy k of a row gets id "<id>#k", so a title comes
back once per 266,965 rows) with event times spaced so that the 72 h window holds N articles,
the state is filled with N articles, then the next ``--measure`` articles are timed (assign
only; featurize is stateless and timed separately) and the compact state snapshot is pickled
(streamed, not held) to give bytes per live article. Prints one JSON line per size.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_features import StoryFeatures, StoryInput, featurize_batch

DATA = ROOT.parent / "shared/data/uci-news/uci_news_2014-03_05.daily_shuffled.jsonl.gz"
T0 = 1_396_310_400_000  # 2014-04-01T00:00Z


class _Count:
    def __init__(self) -> None:
        self.n = 0

    def write(self, b: bytes) -> int:
        self.n += len(b)
        return len(b)


def base_features(limit: int) -> list[StoryFeatures]:
    cfg = StoryConfig()
    rows = []
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) >= limit:
                break
    inputs = [StoryInput(str(r["id"]), r["title"], r.get("url"), r.get("source") or "", 0) for r in rows]
    t = time.process_time()
    feats = []
    for i in range(0, len(inputs), 1000):
        feats.extend(featurize_batch(inputs[i : i + 1000], cfg))
    dt = time.process_time() - t
    print(json.dumps({"featurize_us_per_article_cpu": round(dt / len(inputs) * 1e6, 1),
                      "rows": len(inputs)}), flush=True)
    return feats


def replay(base: list[StoryFeatures], i: int, spacing_ms: float) -> StoryFeatures:
    f = base[i % len(base)]
    k = i // len(base)
    return StoryFeatures(f"{f.ref}#{k}" if k else f.ref, f.publisher, T0 + int(i * spacing_ms),
                         f.words, f.title_keys, f.body_keys, f.body_sig, f.sentences, f.terms)


def run_size(base: list[StoryFeatures], n: int, measure: int) -> dict:
    cfg = StoryConfig()
    spacing = cfg.window_ms / n
    sa = StoryAssigner(cfg)
    fill_t = time.process_time()
    for i in range(n):
        sa.assign(replay(base, i, spacing))
    fill_dt = time.process_time() - fill_t
    t = time.process_time()
    for i in range(n, n + measure):
        sa.assign(replay(base, i, spacing))
    dt = time.process_time() - t
    live = sa.live_articles()
    counter = _Count()
    pickle.dump(sa.snapshot(), counter, protocol=pickle.HIGHEST_PROTOCOL)
    return {
        "window_articles": n,
        "live_articles": live,
        "assign_us_per_article_cpu": round(dt / measure * 1e6, 1),
        "fill_us_per_article_cpu": round(fill_dt / n * 1e6, 1),
        "state_bytes": counter.n,
        "bytes_per_article": round(counter.n / live, 1),
        "stories_in_state": len(sa.stories),
        "max_bucket_entries": max((len(v) for b in sa.bands for slab in b._slabs.values()
                                   for v in slab.values()), default=0),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--measure", type=int, default=20000)
    ap.add_argument("--base-rows", type=int, default=266965)
    args = ap.parse_args(argv)
    base = base_features(args.base_rows)
    for n in (int(x) for x in args.sizes.split(",")):
        print(json.dumps(run_size(base, n, args.measure)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
