"""Replay the UCI News Aggregator month through the StoryAssigner and score story ids.

    python bench/eval_stories.py [--limit N] [--set FIELD=VALUE ...] [--out DIR] [--no-score]

Reads ../shared/data/uci-news/uci_news_2014-03_05.daily_shuffled.jsonl.gz in file order (never
copied into the repo), builds one article per row (title, url, publisher = source, time; UCI has
no body, so body = ""), assigns story ids online in one pass, writes {id, story} predictions and
a gold file ({id, story, time}, derived from the same rows) to --out (default /tmp), runs
``score_stories.py GOLD PRED --by-day`` and prints pairwise and B-cubed P/R/F1, articles/s
(stage only: featurize + assign, reading/JSON excluded) and per-layer link precision.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import subprocess
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_features import StoryInput, featurize_batch

SHARED = ROOT.parent / "shared"
DATA = SHARED / "data/uci-news/uci_news_2014-03_05.daily_shuffled.jsonl.gz"
SCORER = SHARED / "tools/score_stories.py"


def load_rows(path: Path, limit: int | None) -> list[dict]:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line))
            if limit and len(rows) >= limit:
                break
    return rows


def flow_seq_key(rec: dict) -> tuple[str, str]:
    """Sort key of a flow output record in the order its stories step saw it: the partition
    merge (``core.alignment.EpochMerge``) releases items by epoch, then offset, then partition;
    a file replay numbers every archive line, so offset then partition is that order (a plain
    sort on ``seq`` puts each partition's records after the previous partition's)."""
    part, _, rest = str(rec["seq"]).partition(":")
    return rest, part


def resolve_merges(story_id: str, merged_into: dict[str, str]) -> str:
    """The story an article belongs to as the ``stories`` topic has it: its story id followed
    through the late merges (``merged_into``: merged-away story -> the story it joined)."""
    seen = {story_id}
    while story_id in merged_into:
        story_id = merged_into[story_id]
        if story_id in seen:  # defensive: a cycle would be a bug upstream
            break
        seen.add(story_id)
    return story_id


def parse_sets(sets: list[str], cfg: StoryConfig) -> StoryConfig:
    """``--set name=value`` overrides of :class:`StoryConfig` fields."""
    types = {f.name: f.type for f in fields(StoryConfig)}
    kw: dict[str, object] = {}
    for s in sets:
        k, v = s.split("=", 1)
        t = types[k]
        kw[k] = (v.lower() in ("1", "true", "yes")) if t in ("bool", bool) else (
            int(v) if t in ("int", int) else float(v) if t in ("float", float) else v)
    return replace(cfg, **kw)


def flow_order(rows: list[dict]) -> list[dict]:
    """The order in which the whole flow's stories step sees UCI rows (``newsflow import-uci``):
    day by day; within a day one feed document per (publisher, category) in order of first
    appearance, its items in file order."""
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["time"][:10], r.get("source") or r.get("hostname") or "unknown",
                           r.get("category") or ""), []).append(r)
    return [r for g in groups.values() for r in g]  # dicts keep first-appearance order


def run(rows: list[dict], cfg: StoryConfig, band_shards: int = 1, batch: int = 500,
        partition_by: str | None = None) -> tuple:
    """Featurize in batches and assign in file order. ``partition_by`` (e.g. "category"):
    one independent StoryAssigner per value of that row field — the keyed layout a dataflow
    can use (``key_on(category)``), each key with its own state and IDF."""
    inputs = [
        StoryInput(str(r["id"]), r["title"], r.get("url"), r.get("source") or r.get("hostname") or "",
                   iso_to_ms(r["time"]))
        for r in rows
    ]
    keys = [str(r.get(partition_by, "")) if partition_by else "" for r in rows]
    assigners: dict[str, StoryAssigner] = {}
    out = []
    t0 = time.perf_counter()
    c0 = time.process_time()
    for i in range(0, len(inputs), batch):
        feats = featurize_batch(inputs[i : i + batch], cfg)
        for k, f in zip(keys[i : i + batch], feats, strict=True):
            sa = assigners.get(k)
            if sa is None:
                sa = assigners[k] = StoryAssigner(cfg, band_shards=band_shards)
            out.append(sa.assign(f))
    return out, time.perf_counter() - t0, time.process_time() - c0, assigners


def layer_table(rows: list[dict], out: list) -> dict:
    """Per layer: how many articles it placed, and the precision of its links — the share of
    same-day links (article -> matched article, or -> the story's first article for layer
    "story") whose two ends have the same gold story. Cross-day links are counted apart: the
    UCI gold gives a re-crawled event a new story id each day."""
    gold = {str(r["id"]): r["story"] for r in rows}
    day = {str(r["id"]): r["time"][:10] for r in rows}
    stats: dict = collections.defaultdict(lambda: [0, 0, 0])
    for r, a in zip(rows, out, strict=True):
        s = stats[a.layer or "new story"]
        s[0] += 1
        m = a.matched_ref
        if m is not None and m in gold and day[m] == r["time"][:10]:
            s[1] += 1
            s[2] += gold[m] == r["story"]
    return {k: {"n": n, "same_day_links": sd,
                "link_precision": round(ok / sd, 4) if sd else None}
            for k, (n, sd, ok) in sorted(stats.items())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--band-shards", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("/tmp/newsflow-eval-stories"))
    ap.add_argument("--partition-by", default=None,
                    help="row field to key independent assigners by (e.g. category)")
    ap.add_argument("--flow-order", action="store_true",
                    help="feed rows in the whole flow's order (per day, grouped by publisher and "
                         "category as import-uci writes them) and one assigner per category")
    ap.add_argument("--no-score", action="store_true")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a StoryConfig field (repeatable)")
    args = ap.parse_args(argv)

    rows = load_rows(args.data, args.limit)
    if args.flow_order:
        rows = flow_order(rows)
        args.partition_by = "category"
    cfg = parse_sets(args.set, StoryConfig())
    out, dt, cpu, _sa = run(rows, cfg, args.band_shards, partition_by=args.partition_by)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = f"-by-{args.partition_by}" if args.partition_by else ""
    suffix += "-flow-order" if args.flow_order else ""
    tag = "-" + hashlib.sha1("\n".join(args.set).encode()).hexdigest()[:10] if args.set else ""
    pred_path = args.out / f"pred{suffix}{tag}.jsonl"
    gold_path = args.out / f"gold-{len(rows)}.jsonl"
    with open(pred_path, "w", encoding="utf-8") as f:
        for r, a in zip(rows, out, strict=True):
            f.write(json.dumps({"id": str(r["id"]), "story": a.story_id}) + "\n")
    with open(gold_path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({"id": str(r["id"]), "story": r["story"], "time": r["time"]}) + "\n")
    result = {
        "sets": args.set,
        "partition_by": args.partition_by,
        "rows": len(rows),
        "articles_per_s_wall": round(len(rows) / dt),
        "articles_per_s_cpu": round(len(rows) / cpu),
        "stories": len({a.story_id for a in out}),
        "layers": layer_table(rows, out),
    }
    if not args.no_score:
        proc = subprocess.run(
            [sys.executable, str(SCORER), str(gold_path), str(pred_path), "--by-day"],
            capture_output=True,
            text=True,
            check=True,
        )
        result["score"] = json.loads(proc.stdout)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
