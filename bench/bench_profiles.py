"""Cost of the live relevance stage: the same archive replayed in file mode, in one
invocation, without profiles, with a configured ``default`` profile (subscriptions only), and
with that profile learning from a simulated reader (reads one category, skips another, 40 min
after each unique article is fetched).

    .venv/bin/python bench/bench_profiles.py [--input ARCHIVE] [--workers 1] [--runs 3]

Default input: the real 24-feed replay in ../shared (read in place, never copied). The three
commands run in turn, ``--runs`` rounds (A B C A B C ...). Prints per command the median wall
seconds and articles/s, and its ratio to the plain run per round and their median (a drift of
the shared machine's speed cancels out within a round); checks that only the relevance and the
importance of the article records differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT.parent / "shared" / "data" / "real-feeds" / "headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz"


def demo(archive: str, out: Path, workers: int, config: Path | None = None,
         interactions: Path | None = None) -> float:
    cmd = [sys.executable, "-m", "newsflow.cli.main", "demo", "--input", archive, "--out", str(out),
           "--workers", str(workers)]
    if config is not None:
        cmd += ["--config", str(config)]
    if interactions is not None:
        cmd += ["--interactions", str(interactions)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


READS, SKIPS = ("virus", "coronavirus", "covid"), ("trump", "football", "league")


def reader_clicks(arts: list[dict], reads: tuple[str, ...], skips: tuple[str, ...]) -> list[dict]:
    """The simulated reader: 40 min after each unique article is fetched, reads it (90 s) when
    its title has a ``reads`` word, skips it when a ``skips`` word; in event-time order."""
    from newsflow.core.timeutil import iso_to_ms
    from newsflow.wire.codec import interaction_record

    out = []
    for a in arts:
        words = set((a.get("title") or "").lower().replace(",", " ").split())
        if a.get("disposition") != "unique" or not words & set(reads + skips):
            continue
        at = iso_to_ms(a["fetched_at"]) + 40 * 60_000
        out.append(interaction_record("default", "read" if words & set(reads) else "skip", at,
                                      article_id=a["article_id"], dwell_s=90.0 if words & set(reads) else None))
    out.sort(key=lambda r: (r["at"], r["article_id"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default=str(REAL))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="newsflow-bench-profiles-"))
    res: dict[str, list[float]] = {"plain": [], "default_profile": [], "default_profile_learning": []}
    res["plain"].append(demo(args.input, work / "plain", args.workers))
    arts = [orjson.loads(x) for x in (work / "plain" / "articles.jsonl").read_bytes().splitlines()]
    cfg = work / "newsflow.toml"
    cfg.write_text('[profiles.profile.default.topics]\nhealth = ["virus", "hospital", "vaccine"]\n')
    ix = work / "interactions.jsonl"
    clicks = reader_clicks(arts, READS, SKIPS)
    ix.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in clicks))
    for i in range(args.runs):
        if i:
            res["plain"].append(demo(args.input, work / "plain", args.workers))
        res["default_profile"].append(demo(args.input, work / "static", args.workers, cfg))
        res["default_profile_learning"].append(demo(args.input, work / "learn", args.workers, cfg, ix))
    keep = ("importance", "importance_components")
    for run in ("static", "learn"):
        got = [orjson.loads(x) for x in (work / run / "articles.jsonl").read_bytes().splitlines()]
        a = sorted(({k: v for k, v in r.items() if k not in keep} for r in arts), key=lambda r: r["key"])
        b = sorted(({k: v for k, v in r.items() if k not in keep} for r in got), key=lambda r: r["key"])
        assert a == b, f"{run}: records differ beyond relevance/importance"
    n = len(arts)
    print(json.dumps({
        "input": args.input, "workers": args.workers, "articles": n, "interactions": len(clicks),
        "reads": READS, "skips": SKIPS,
        "runs": {k: {"seconds_median": round(statistics.median(v), 2),
                     "articles_per_s": round(n / statistics.median(v), 1),
                     "vs_plain_per_round": [round(x / p, 3) for x, p in zip(v, res["plain"], strict=True)],
                     "vs_plain_median": round(statistics.median(x / p for x, p in zip(v, res["plain"], strict=True)), 3)}
                 for k, v in res.items()},
    }, indent=2))


if __name__ == "__main__":
    main()
