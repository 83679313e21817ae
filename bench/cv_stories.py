"""Leave-one-day-out table of the story decision: the hand-tuned cascade, the learned model, and
the cascade gated by the learned model.

    .venv/bin/python bench/cv_stories.py [--uci-rows 20000] [--algorithms baseline learned gate]

For each labelled real day (``bench/train_story_model.py``'s ``DAYS``): the learned model is
trained on the OTHER days (its threshold chosen inside them), then the day's story step is
replayed with it and scored as ``../shared/tools/score_real_day.py`` scores (B-cubed F1, pairwise
P/R/F1 over the labelled items). The gate (``learned_stories/story_gate.py``: the cascade proposes,
the pair model vetoes) is trained the same way on the cascade's proposals of the other days, its
threshold chosen inside them. The baseline row is the flow's story step (the hand-tuned
cascade, ``StoryConfig()``) on the same articles records; both rows give the story step's CPU per article
record (timed after one untimed warm-up replay of the day). UCI (``../shared/data/uci-news``,
months no model was trained on): the first ``--uci-rows`` rows, one assigner per category as the
flow keys them, scored by ``score_stories.py --by-day`` (B-cubed F1), with the models trained on all
the days.
Prints one JSON line per row and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import train_story_model as tsm
from learned_stories.story_gate import GatedStoryAssigner
from learned_stories.story_learned import LearnedStoryAssigner
from learned_stories.story_model import StoryModel

from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_features import StoryInput, featurize_batch

#: the flow's story configuration (the defaults)
CONFIG = StoryConfig()

UCI = tsm.SHARED / "data/uci-news/uci_news_2014-03_05.daily_shuffled.jsonl.gz"
UCI_SCORER = tsm.SHARED / "tools/score_stories.py"
ALGORITHMS = ("baseline", "learned", "gate")


def assign_baseline(day: tsm.Day) -> tuple[dict[str, str], float]:
    """Story id per labelled link with the flow's story step (the hand-tuned cascade, the default StoryConfig),
    and its CPU seconds per article record."""
    sa = StoryAssigner(CONFIG)
    c0 = time.process_time()
    story = tsm.replay_day(day, sa)
    return story, (time.process_time() - c0) / len(day.records)


def timed_learned(day: tsm.Day, model: StoryModel) -> tuple[dict[str, str], float]:
    c0 = time.process_time()
    story = tsm.assign(day, model)
    return story, (time.process_time() - c0) / len(day.records)


def timed_gate(day: tsm.Day, model: StoryModel) -> tuple[dict[str, str], float]:
    c0 = time.process_time()
    story = tsm.assign_gate(day, model)
    return story, (time.process_time() - c0) / len(day.records)


def uci_rows(n: int) -> list[dict]:
    import gzip

    rows = []
    with gzip.open(UCI, "rt", encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) >= n:
                break
    return rows


def uci_assign(rows: list[dict], model: StoryModel | None, gate: bool = False) -> list[str]:
    """Story ids of UCI rows, one assigner per category; ``model`` None: the cascade; ``gate``:
    the cascade gated by ``model``."""
    out = []
    assigners: dict[str, StoryAssigner] = {}
    inputs = [StoryInput(str(r["id"]), r["title"], r.get("url"), r.get("source") or r.get("hostname") or "",
                         iso_to_ms(r["time"])) for r in rows]
    for i in range(0, len(inputs), 500):
        for r, f in zip(rows[i:i + 500], featurize_batch(inputs[i:i + 500], CONFIG), strict=True):
            sa = assigners.get(r["category"])
            if sa is None:
                sa = assigners[r["category"]] = (
                    StoryAssigner(CONFIG) if model is None
                    else GatedStoryAssigner(CONFIG, model=model) if gate
                    else LearnedStoryAssigner(CONFIG, model=model))
            out.append(sa.assign(f).story_id)
    return out


def uci_score(rows: list[dict], pred: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        g, p = Path(tmp) / "gold.jsonl", Path(tmp) / "pred.jsonl"
        g.write_text("".join(json.dumps({"id": str(r["id"]), "story": r["story"], "time": r["time"]}) + "\n"
                             for r in rows))
        p.write_text("".join(json.dumps({"id": str(r["id"]), "story": s}) + "\n"
                             for r, s in zip(rows, pred, strict=True)))
        res = subprocess.run([sys.executable, str(UCI_SCORER), str(g), str(p), "--by-day"],
                             check=True, capture_output=True, text=True)
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uci-rows", type=int, default=20_000, help="0: no UCI row")
    ap.add_argument("--work", type=Path, default=tsm.WORK)
    ap.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=ALGORITHMS)
    args = ap.parse_args()
    algos = [a for a in ALGORITHMS if a in args.algorithms]
    names = sorted(tsm.DAYS)
    days = {n: tsm.load_day(n, args.work) for n in names}
    rows: list[dict] = []
    for n in names:
        others = [days[o] for o in names if o != n]
        assign_baseline(days[n])  # warm-up (caches of the text helpers), untimed
        for algo in algos:
            model = None
            if algo == "baseline":
                story, cpu = assign_baseline(days[n])
            elif algo == "learned":
                model = tsm.train(others)
                story, cpu = timed_learned(days[n], model)
            else:
                model = tsm.train_gate(others)
                story, cpu = timed_gate(days[n], model)
            s = tsm.score(days[n], story)
            row = {"day": n, "algorithm": algo, **s, "cpu_ms_per_article": round(cpu * 1000, 3)}
            if model is not None:
                row["threshold"] = model.threshold
            rows.append(row)
            print(json.dumps(row), flush=True)
    uci: dict[str, dict] = {}
    if args.uci_rows:
        data = uci_rows(args.uci_rows)
        for algo in algos:
            extra = {}
            if algo == "baseline":
                pred = uci_assign(data, None)
            else:
                model = tsm.train(list(days.values())) if algo == "learned" else \
                    tsm.train_gate(list(days.values()))
                pred = uci_assign(data, model, gate=algo == "gate")
                extra = {"threshold": model.threshold}
            uci[algo] = uci_score(data, pred)
            print(json.dumps({"uci_rows": len(data), "algorithm": algo, **uci[algo], **extra}), flush=True)
    print("\n| day | algorithm | B-cubed F1 | pairwise F1 (P / R) | CPU ms / article |\n|---|---|---:|---:|---:|")
    for algo in algos:
        mine = [r for r in rows if r["algorithm"] == algo]
        for r in mine:
            pw = r["pairwise"]
            thr = f" (threshold {r['threshold']})" if "threshold" in r else ""
            print(f"| {r['day']} | {algo}{thr} | {r['bcubed']['F1']:.3f} | {pw['F1']:.3f} "
                  f"({pw['P']:.3f} / {pw['R']:.3f}) | {r['cpu_ms_per_article']:.2f} |")
        mb = sum(r["bcubed"]["F1"] for r in mine) / len(mine)
        mp = sum(r["pairwise"]["F1"] for r in mine) / len(mine)
        print(f"| mean | {algo} | {mb:.3f} | {mp:.3f} | |")
        if algo in uci:
            u = uci[algo]
            print(f"| UCI {args.uci_rows} rows | {algo} | {u['bcubed']['F1']:.3f} | {u['pairwise']['F1']:.3f} | |")


if __name__ == "__main__":
    main()
