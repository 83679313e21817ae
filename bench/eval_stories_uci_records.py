"""UCI story quality from a whole-flow run's records, story step only (fast loop for variants).

    python bench/eval_stories_flow.py --out DIR            # once: the whole flow, DIR/flow/articles.jsonl
    python bench/eval_stories_uci_records.py --articles DIR/flow/articles.jsonl [--set FIELD=VALUE ...]

Feeds the flow's article records to one fresh :class:`StoryAssigner` per story key (the
category, as ``pipeline.story_key``) in ``seq`` order, exactly as the flow's stories step does
(publication-time clock, GUID/URL duplicates keep their original's story), and scores the story
ids against the UCI gold with ``shared/tools/score_stories.py --by-day`` (pairwise and B-cubed).
With the flow's own configuration it gives the flow's story ids (checked: the same scores as
``eval_stories_flow.py``) in ~2 min of CPU instead of ~7. ``stories_topic``: the same articles
with each story followed through the late merges (``merged_into`` on the stories topic).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
SHARED = ROOT.parent / "shared"
UCI = SHARED / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
sys.path.insert(0, str(SHARED / "tools"))

from eval_stories import flow_seq_key, parse_sets, resolve_merges
from score_stories import score

from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_features import StoryInput, featurize_batch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--articles", type=Path, required=True)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--pred", type=Path, help="also write the predictions {id, story} here")
    args = ap.parse_args()
    cfg = parse_sets(args.set, StoryConfig())
    recs = [json.loads(line) for line in args.articles.open("rb")]
    recs.sort(key=flow_seq_key)
    assigners: dict[str, StoryAssigner] = {}
    story: dict[str, str] = {}
    merged: dict[str, str] = {}  # late merges: merged-away story -> the story it joined
    batch = 1000
    for i in range(0, len(recs), batch):
        part = recs[i:i + batch]
        feats = featurize_batch([StoryInput(r["article_id"], r["title"], r.get("url"), r["publisher"],
                                            iso_to_ms(r["published_at"]), r.get("body_text") or "",
                                            r.get("canonical_url")) for r in part], cfg)
        for r, f in zip(part, feats, strict=True):
            dup = r["duplicate_of"] if r["disposition"] in ("exact_duplicate", "revision") and \
                r["dedup_layer"] in ("guid", "url") else None
            key = r.get("category") or ""
            sa = assigners.get(key)
            if sa is None:
                sa = assigners[key] = StoryAssigner(cfg)
            story[r["guid"]] = sa.assign(f, duplicate_of=dup).story_id
            merged.update(sa.take_merges())  # what the stories topic says (merged_into)
    gold_rows = []
    with gzip.open(UCI, "rt", encoding="utf-8") as fh:
        for line in fh:
            g = json.loads(line)
            if str(g["id"]) in story:
                gold_rows.append({"id": g["id"], "story": g["story"], "time": g["time"]})
    if args.pred:
        with args.pred.open("w") as fh:
            for g in gold_rows:
                fh.write(json.dumps({"id": g["id"], "story": story[str(g["id"])]}) + "\n")
    res = score(gold_rows, {str(g["id"]): story[str(g["id"])] for g in gold_rows}, True)
    final = {k: resolve_merges(v, merged) for k, v in story.items()}
    res_topic = score(gold_rows, {str(g["id"]): final[str(g["id"])] for g in gold_rows}, True)
    print(json.dumps({"sets": args.set, "stories": len(set(story.values())), **res,
                      "stories_topic": {"stories": len(set(final.values())), **res_topic}}))


if __name__ == "__main__":
    main()
