"""Story quality of the WHOLE dataflow on the UCI labelled headlines (issue 4, item 7).

    python bench/eval_stories_flow.py                 # all 266,965 rows
    python bench/eval_stories_flow.py --rows 60000

UCI rows -> ``newsflow import-uci`` (one RSS document per publisher per day, GUID = row id) ->
the file-mode flow (parse, dedup, stories, scores, topics, digests) -> ``articles.jsonl`` ->
``{id: guid, story: story_id}`` for every UCI id -> ``shared/tools/score_stories.py --by-day``.
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
SHARED = ROOT.parent / "shared"
UCI = SHARED / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
SCORER = SHARED / "tools" / "score_stories.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int)
    ap.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="newsflow-uci-flow-")))
    args = ap.parse_args()
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
    gold_path, pred_path = out / "gold.jsonl", out / "pred.jsonl"
    n = 0
    with gzip.open(UCI, "rt", encoding="utf-8") as src, gold_path.open("w") as g, pred_path.open("w") as p:
        for i, line in enumerate(src):
            if args.rows and i >= args.rows:
                break
            r = json.loads(line)
            g.write(json.dumps({"id": r["id"], "story": r["story"], "time": r["time"]}) + "\n")
            p.write(json.dumps({"id": r["id"], "story": story[str(r["id"])]}) + "\n")
            n += 1
    res = subprocess.run([sys.executable, str(SCORER), str(gold_path), str(pred_path), "--by-day"],
                         check=True, capture_output=True, text=True)
    print(json.dumps({"rows": n, "flow_seconds": round(dt, 1), "articles_per_s": round(n / dt),
                      "stories": len(set(story.values())), "score": json.loads(res.stdout)}, indent=2))


if __name__ == "__main__":
    main()
