"""Story quality of the WHOLE dataflow on the UCI labelled headlines.

    python bench/eval_stories_flow.py                 # all 266,965 rows
    python bench/eval_stories_flow.py --rows 60000

UCI rows -> ``newsflow import-uci`` (one RSS document per publisher per day, GUID = row id) ->
the file-mode flow (parse, dedup, stories, scores, topics, digests) -> ``articles.jsonl`` ->
``{id: guid, story: story_id}`` for every UCI id -> ``shared/tools/score_stories.py --by-day``.
``score``: the story ids of the article records as emitted; ``stories_topic``: the same articles
in the stories the ``stories`` topic ends with (each story id followed through ``merged_into``:
a late merge moves the merged-away story's members into the story it joined).
Prints the scorer's pairwise and B-cubed P/R/F1 and the flow's articles/s. The UCI data is read
from ../shared and never copied into the repo.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
SHARED = ROOT.parent / "shared"
UCI = SHARED / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
SCORER = SHARED / "tools" / "score_stories.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int)
    ap.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="newsflow-uci-flow-")))
    args = ap.parse_args()
    from eval_stories import resolve_merges

    from newsflow.cli.main import main as cli
    from newsflow.cli.main import run_file_flow

    out: Path = args.out
    lim = ["--limit", str(args.rows)] if args.rows else []
    cli(["import-uci", str(UCI), "--out", str(out / "in"), *lim])
    t0 = time.perf_counter()
    run_file_flow(str(out / "in"), str(out / "flow"))
    dt = time.perf_counter() - t0

    story: dict[str, str] = {}
    with (out / "flow" / "articles.jsonl").open("rb") as fh:
        for line in fh:
            r = json.loads(line)
            story[r["guid"]] = r["story_id"]
    merged: dict[str, str] = {}  # the stories topic: a story merged into another says so
    with (out / "flow" / "stories.jsonl").open("rb") as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("merged_into"):
                merged[r["story_id"]] = r["merged_into"]
    final = {k: resolve_merges(v, merged) for k, v in story.items()}
    gold_path, pred_path, topic_path = out / "gold.jsonl", out / "pred.jsonl", out / "pred-stories-topic.jsonl"
    n = 0
    with gzip.open(UCI, "rt", encoding="utf-8") as src, gold_path.open("w") as g, pred_path.open("w") as p, \
            topic_path.open("w") as t:
        for i, line in enumerate(src):
            if args.rows and i >= args.rows:
                break
            r = json.loads(line)
            g.write(json.dumps({"id": r["id"], "story": r["story"], "time": r["time"]}) + "\n")
            p.write(json.dumps({"id": r["id"], "story": story[str(r["id"])]}) + "\n")
            t.write(json.dumps({"id": r["id"], "story": final[str(r["id"])]}) + "\n")
            n += 1
    scores = [json.loads(subprocess.run([sys.executable, str(SCORER), str(gold_path), str(path), "--by-day"],
                                        check=True, capture_output=True, text=True).stdout)
              for path in (pred_path, topic_path)]
    print(json.dumps({"rows": n, "flow_seconds": round(dt, 1), "articles_per_s": round(n / dt),
                      "stories": len(set(story.values())), "score": scores[0],
                      "stories_topic": {"stories": len(set(final.values())), "score": scores[1]}}, indent=2))


if __name__ == "__main__":
    main()
