"""A labelled day's morning brief scored against the gold stories.

    .venv/bin/python bench/score_briefs.py OUT_DIR [--day 2020-05-06 ...]

``OUT_DIR``: the output of ``newsflow demo --input <the day's archive> --out OUT_DIR``
(``articles.jsonl`` and ``digests.jsonl``). The day's morning brief is the last record of the
digest ``morning_brief:<day>…``; its items in order (sections in order) are mapped to the gold
stories through their ``article_ids`` (an article's url, canonical_url or guid is a labelled
link). Prints per day:

- ``wide_as_one``: of the widely covered gold stories (>= 3 publishers in the gold) that appear in
  the first 20 items, how many appear in exactly one of them and make >= 80 % of that item's
  labelled members;
- the topic grouping over all the brief's items: ``errors`` (items whose labelled members belong
  to two or more gold stories) and ``misses`` (gold stories whose labelled members are split over
  two or more items), with the items and gold stories counted.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared/data/real-feeds"
TOP = 20


def brief_items(digests: Path, day: str) -> list[dict]:
    last = None
    for line in digests.open("rb"):
        d = json.loads(line)
        if d["digest_id"].startswith(f"morning_brief:{day}"):
            last = d
    if last is None:
        msg = f"no morning brief of {day} in {digests}"
        raise SystemExit(msg)
    return [it for sec in last["sections"] for it in sec["items"]]


def score_day(out: Path, day: str) -> dict:
    gold_rows = [json.loads(line) for line in (REAL / f"headlines-24feeds_{day}.stories.gold.jsonl").open()]
    gold_of_link = {g["link"]: g["story"] for g in gold_rows}
    publishers: dict[str, set[str]] = defaultdict(set)
    for g in gold_rows:
        publishers[g["story"]].add(g["publisher"])
    wide = {s for s, p in publishers.items() if len(p) >= 3}
    gold_of_article: dict[str, str] = {}
    for line in (out / "articles.jsonl").open("rb"):
        r = json.loads(line)
        for k in (r.get("url"), r.get("canonical_url"), r.get("guid")):
            if k in gold_of_link:
                gold_of_article.setdefault(r["article_id"], gold_of_link[k])
    items = brief_items(out / "digests.jsonl", day)
    labelled = [Counter(gold_of_article[a] for a in it["article_ids"] if a in gold_of_article) for it in items]
    top = labelled[:TOP]
    in_top: dict[str, list[Counter[str]]] = defaultdict(list)
    for c in top:
        for s in c:
            in_top[s].append(c)
    wide_seen = [s for s in in_top if s in wide]
    as_one = [s for s in wide_seen if len(in_top[s]) == 1 and in_top[s][0][s] >= 0.8 * sum(in_top[s][0].values())]
    spread: dict[str, int] = Counter(s for c in labelled for s in c)
    return {
        "day": day, "items": len(items), "labelled_items": sum(1 for c in labelled if c),
        "wide_as_one": f"{len(as_one)} of {len(wide_seen)}",
        "wide_as_one_share": round(len(as_one) / len(wide_seen), 3) if wide_seen else None,
        "topic_errors": sum(1 for c in labelled if len(c) >= 2),
        "topic_misses": sum(1 for n in spread.values() if n >= 2),
        "gold_stories_in_brief": len(spread),
        "top": [items[i]["label"] for i in range(min(5, len(items)))],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--day", nargs="+", required=True)
    args = ap.parse_args()
    for day in args.day:
        print(json.dumps(score_day(args.out, day)))


if __name__ == "__main__":
    main()
