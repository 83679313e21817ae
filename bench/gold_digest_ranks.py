"""Where the labelled day's widely covered stories land in its digests.

For each gold story with >= 3 distinct publishers (headlines-24feeds_2020-05-06.stories.gold.jsonl),
find the digest items holding its articles (by url / canonical_url / guid -> article_id, as
score_real_day.py maps them) in the given digests, and print: story, publishers, the best
rank of an item holding it (1 = first item of the digest), how many items hold it (split), how
many other gold stories share that item (merged), and the item's label.

    .venv/bin/python bench/gold_digest_ranks.py GOLD ARTICLES.jsonl DIGESTS.jsonl DIGEST_ID...
"""

from __future__ import annotations

import sys
from collections import defaultdict

import orjson


def _lines(path: str) -> list[dict]:
    with open(path, "rb") as fh:
        return [orjson.loads(x) for x in fh]


def main(gold_path: str, articles: str, digests: str, ids: list[str]) -> None:
    gold = _lines(gold_path)
    by_story: dict[str, list[dict]] = defaultdict(list)
    for g in gold:
        by_story[g["story"]].append(g)
    wide = {s: v for s, v in by_story.items() if len({g["publisher"] for g in v}) >= 3}
    link_aid: dict[str, str] = {}
    for r in _lines(articles):
        for k in (r.get("url"), r.get("canonical_url"), r.get("guid")):
            if k and k not in link_aid:
                link_aid[k] = r["article_id"]
    aid_story = {link_aid[g["link"]]: g["story"] for g in gold if g["link"] in link_aid}
    ds = {d["digest_id"]: d for d in _lines(digests) if d["digest_id"] in ids}
    best: dict[str, tuple[int, str, str, int]] = {}  # story -> (rank, digest, label, section rank)
    for did in ids:
        d = ds[did]
        items = [it for s in d["sections"] for it in s["items"]]
        print(f"\n## {did} (final={d['final']}, {len(items)} items)\n")
        print("| gold story | publishers | rank | items holding it | other gold stories in that item | label |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for s, v in sorted(wide.items(), key=lambda kv: -len({g['publisher'] for g in kv[1]})):
            ranks = []
            for n, it in enumerate(items, 1):
                stories_in = {aid_story.get(a) for a in it["article_ids"]} - {None}
                if s in stories_in:
                    ranks.append((n, len(stories_in - {s}), it["label"]))
            npub = len({g["publisher"] for g in v})
            if ranks:
                n, other, label = ranks[0]
                if s not in best or n < best[s][0]:
                    best[s] = (n, did, label, other)
                print(f"| {s} | {npub} | {n} | {len(ranks)} | {other} | {label} |")
            else:
                print(f"| {s} | {npub} | – | 0 | – | – |")


    if len(ids) > 1:  # the day's digests together: each story's best place
        print(f"\n## best place over {len(ids)} digests: {len(best)} of {len(wide)} widely covered stories shown\n")
        print("| gold story | publishers | best rank | digest | other gold stories in that item | label |")
        print("| --- | ---: | ---: | --- | ---: | --- |")
        for s, v in sorted(wide.items(), key=lambda kv: -len({g['publisher'] for g in kv[1]})):
            npub = len({g["publisher"] for g in v})
            if s in best:
                n, did, label, other = best[s]
                print(f"| {s} | {npub} | {n} | {did} | {other} | {label} |")
            else:
                print(f"| {s} | {npub} | – | – | – | – |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
