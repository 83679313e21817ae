"""In-memory bytes per live article of the story assigner (tracemalloc).

    python bench/story_state_bytes.py ARTICLES.jsonl [--rows 30000] [--label X]

Feeds the first ``--rows`` article records (title, URL, publisher, publication time) through one
``StoryAssigner`` with the flow's settings, featurized in batches of 500 inside the traced
region, and prints traced bytes / live articles in the window (memos the assigner fills count
too). Run it with another checkout on ``PYTHONPATH`` to compare.
"""

from __future__ import annotations

import argparse
import tracemalloc

import orjson

from newsflow.config import Settings
from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_features import StoryInput, featurize_batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("articles")
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--label", default="this checkout")
    args = ap.parse_args()
    cfg = Settings().stories.to_config()
    recs = []
    with open(args.articles, "rb") as f:
        for i, line in enumerate(f):
            if i >= args.rows:
                break
            r = orjson.loads(line)
            recs.append(StoryInput(r["article_id"], r["title"], r.get("url"), r["publisher"],
                                   iso_to_ms(r["published_at"]), r.get("body_text") or "", r.get("canonical_url")))
    tracemalloc.start()
    sa = StoryAssigner(cfg)
    for i in range(0, len(recs), 500):
        for feat in featurize_batch(recs[i:i + 500], cfg):
            sa.assign(feat)
    cur, _ = tracemalloc.get_traced_memory()
    print(f"{args.label}: {sa.live_articles()} live articles, {round(cur / sa.live_articles())} bytes per live article")


if __name__ == "__main__":
    main()
