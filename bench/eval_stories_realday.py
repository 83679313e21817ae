"""Story quality on the hand-labelled real day, story step only (fast loop for variants).

    python bench/eval_stories_realday.py --articles /tmp/rd/articles.jsonl
        [--set story_threshold=0.3 ...] [--show-merges]
        [--partition-by title-entity|title-word|publisher --shards N]

``--articles``: the ``articles`` output of one replay of
``../shared/data/real-feeds/headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz`` (any story
configuration: only the layer 1-2 decisions of its records are reused). The records are fed
to a fresh :class:`StoryAssigner` in the flow's order (``flow_seq_key``) exactly as the flow's stories step does
(publication-time clock, GUID/URL duplicates keep their original's story), then scored like
``shared/tools/score_real_day.py`` (pairwise and B-cubed P/R/F1 over the 959 labelled items).
The whole-flow figure is ``newsflow demo --input ...`` + ``score_real_day.py``; this script
gives the same story ids (checked) in ~2 s instead of ~30 s.

``--partition-by KEY --shards N`` measures what splitting the stories step of feeds without a
category would cost: one independent :class:`StoryAssigner` per shard (as the flow keeps one per
category), each article sent to the shard of a stable hash of its ``KEY`` (``title-entity``: the
least hash over the title's named entities, else over its content words; ``title-word``: over
its content words; ``publisher``), a GUID/URL duplicate to its original's shard. Two articles in
different shards can never share a story; it prints each shard's share of the articles too.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
GOLD = SHARED / "data/real-feeds/headlines-24feeds_2020-05-06.stories.gold.jsonl"
sys.path.insert(0, str(SHARED / "tools"))
sys.path.insert(0, str(ROOT / "bench"))

from eval_stories import flow_seq_key, parse_sets
from score_real_day import scores

from newsflow.core.hashing import shard_of
from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_features import StoryInput, featurize_batch
from newsflow.text.entities import entity_keys, extract_entities
from newsflow.text.titles import content_tokens, title_tokens

PARTITIONS = ("title-entity", "title-word", "publisher")


def partition_key(rec: dict, by: str) -> str:
    """The value an article is sharded on (``--partition-by``): a content key picks the least
    stable hash among the title's entities or words, so two titles share it with a probability
    near the Jaccard similarity of those sets (one MinHash permutation)."""
    if by == "publisher":
        return str(rec["publisher"])
    words = set(content_tokens(title_tokens(rec["title"], rec["publisher"])))
    keys = set(entity_keys(extract_entities(rec["title"]))) if by == "title-entity" else set()
    pool = keys or words
    return min(pool, key=lambda k: (shard_of(k, 1 << 30), k)) if pool else ""


def load(path: Path) -> list[dict]:
    recs = [json.loads(line) for line in path.open("rb")]
    recs.sort(key=flow_seq_key)
    return recs


def assign(recs: list[dict], cfg: StoryConfig, partition_by: str | None = None, shards: int = 1
           ) -> tuple[dict[str, str], dict[str, dict], list[int]]:
    assigners = [StoryAssigner(cfg) for _ in range(shards)]
    shard_of_article: dict[str, int] = {}
    sizes = [0] * shards
    inputs = [StoryInput(r["article_id"], r["title"], r.get("url"), r["publisher"],
                         iso_to_ms(r["published_at"]), r.get("body_text") or "", r.get("canonical_url"))
              for r in recs]
    feats = featurize_batch(inputs, cfg)
    story: dict[str, str] = {}
    by_link: dict[str, dict] = {}
    for r, f in zip(recs, feats, strict=True):
        dup = r["duplicate_of"] if r["disposition"] in ("exact_duplicate", "revision") and \
            r["dedup_layer"] in ("guid", "url") else None
        if dup is not None and dup in shard_of_article:
            i = shard_of_article[dup]  # a duplicate follows its original (dedup knows it)
        else:
            i = shard_of(partition_key(r, partition_by), shards) if partition_by else 0
        shard_of_article[r["article_id"]] = i
        sizes[i] += 1
        a = assigners[i].assign(f, duplicate_of=dup)
        for k in (r.get("url"), r.get("canonical_url"), r.get("guid")):
            if k and k not in story:
                story[k] = f"{i}/{a.story_id}"
                by_link[k] = {"title": r["title"], "layer": a.layer, "score": a.score,
                              "matched": a.matched_ref, "publisher": r["publisher"]}
    return story, by_link, sizes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--articles", type=Path, required=True)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--show-merges", action="store_true")
    ap.add_argument("--partition-by", choices=PARTITIONS, default=None)
    ap.add_argument("--shards", type=int, default=1)
    args = ap.parse_args()
    cfg = parse_sets(args.set, StoryConfig())
    recs = load(args.articles)
    story, info, sizes = assign(recs, cfg, args.partition_by, args.shards if args.partition_by else 1)
    gold_rows = [json.loads(line) for line in GOLD.open()]
    gold = {g["id"]: g["story"] for g in gold_rows}
    pred = {g["id"]: story[g["link"]] for g in gold_rows}
    out = {"sets": args.set, "pred_stories": len(set(pred.values()))}
    if args.partition_by:
        out.update(partition_by=args.partition_by, shards=args.shards,
                   largest_shard_share=round(max(sizes) / sum(sizes), 3))
    out.update(scores(gold, pred))
    print(json.dumps(out))
    if args.show_merges:
        groups: dict[str, list[dict]] = defaultdict(list)
        for g in gold_rows:
            groups[pred[g["id"]]].append(g)
        for _sid, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            if len(items) < 2:
                continue
            golds = {g["story"] for g in items}
            print(f"\n== {len(items)} items, {len(golds)} gold stories")
            for g in items:
                i = info[g["link"]]
                print(f"  [{g['story'][:28]:28}] {i['layer'] or '-':7} {i['score']:.3f} {g['title'][:90]}")


if __name__ == "__main__":
    main()
