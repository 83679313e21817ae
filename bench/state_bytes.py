"""State bytes per article in the window, per step, from the flow's own snapshots (issue 11 item 7).

    python bench/state_bytes.py ARCHIVE [--until ISO] [--out DIR] [--recovery DIR]

Replays ARCHIVE with ``newsflow demo --recovery-dir`` (the snapshots Bytewax keeps for a resume:
what a crash would restore, pickled), then reads the recovery store: for each step, the size of
every key's latest snapshot at the last snapshot epoch, summed. It divides each step's bytes by
the article records in that step's window at the end of the replay (fetched within the dedup
window for parse and dedup, within the stories' window for stories, within a week for the digest
steps, whose longest window is the weekly roundup) and all steps' bytes by the articles of the
longest window. Pickled bytes: what recovery writes and a restarted process reads back; in
memory a Python object takes more (``bench/story_state_bytes.py`` traces the story assigner's).

Each step also says how many articles its state holds (``articles_held``: its own window, on
its own clock) and its bytes per held article.

``--until ISO`` replays only the polls fetched before that instant, so the state can be read at
a chosen phase of the windows: e.g. just before a weekly roundup closes, when its step holds a
whole week.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from newsflow.config import Settings
from newsflow.core.timeutil import HOUR_MS, iso_to_ms


def snapshot_bytes(recovery: Path) -> dict[str, int]:
    """step name -> bytes of its keys' latest snapshots at the last epoch (all partitions)."""
    latest: dict[tuple[str, str], tuple[int, int]] = {}
    for db in sorted(recovery.glob("part-*.sqlite3")):
        with sqlite3.connect(db) as con:
            for step, key, epoch, n in con.execute(
                    "SELECT step_id, state_key, snap_epoch, length(ser_change) FROM snaps"):
                if (step, key) not in latest or latest[(step, key)][0] < epoch:
                    latest[(step, key)] = (epoch, n or 0)
    out: collections.Counter[str] = collections.Counter()
    for (step, _), (_, n) in latest.items():
        out[step.split(".")[1]] += n
    return dict(out)


def held_articles(recovery: Path) -> dict[str, int]:
    """step name -> the articles its keys' latest snapshots hold: the story assigners' article
    features, the dedup shards' GUID entries, the digest steps' entries. Each step keeps them on
    its own clock and rule (stories: 72 h of publication time, in 12 h slabs; dedup: 72 h after
    the last sighting, and 84 h after publication), which the fetch-time window of
    ``articles_in_window`` only approximates."""
    import pickle

    latest: dict[tuple[str, str], tuple[int, bytes | None]] = {}
    for db in sorted(recovery.glob("part-*.sqlite3")):
        with sqlite3.connect(db) as con:
            for step, key, epoch, ser in con.execute("SELECT step_id, state_key, snap_epoch, ser_change FROM snaps"):
                if (step, key) not in latest or latest[(step, key)][0] < epoch:
                    latest[(step, key)] = (epoch, ser)
    out: collections.Counter[str] = collections.Counter()
    for (step, _), (_, ser) in latest.items():
        if ser is None:
            continue
        snap = pickle.loads(ser)
        if isinstance(snap, bytes | bytearray):
            snap = pickle.loads(snap)
        if not isinstance(snap, dict) or "state" not in snap:
            continue
        st, name = snap["state"], step.split(".")[1]
        if "assigner" in st:
            out[name] += len(st["assigner"].articles)
        elif "shard" in st:
            out[name] += len(st["shard"].by_guid)
        elif "buckets" in st:
            out[name] += sum(len(v) for v in st["buckets"].values())
    return dict(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--out")
    ap.add_argument("--recovery")
    ap.add_argument("--until", help="replay only the polls fetched before this ISO instant")
    a = ap.parse_args()
    out = Path(a.out or tempfile.mkdtemp(prefix="state-out-"))
    rec = Path(a.recovery or tempfile.mkdtemp(prefix="state-rec-"))
    archive = a.archive
    if a.until:
        until = iso_to_ms(a.until)
        archive = str(Path(tempfile.mkdtemp(prefix="state-in-")) / "until.feeds.raw.jsonl.gz")
        with gzip.open(a.archive, "rb") as src, gzip.open(archive, "wb", compresslevel=1) as dst:
            for line in src:
                if line.strip() and iso_to_ms(orjson.loads(line)["fetched_at"]) < until:
                    dst.write(line)
    subprocess.run([sys.executable, "-m", "newsflow.cli.main", "demo", "--input", archive, "--out", str(out),
                    "--recovery-dir", str(rec)], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    by_step = snapshot_bytes(rec)
    held = held_articles(rec)
    fetched = sorted(iso_to_ms(orjson.loads(x)["fetched_at"]) for x in (out / "articles.jsonl").open("rb"))
    end = fetched[-1]
    s = Settings()
    windows = {"parse": s.dedup.window_ms, "dedup": s.dedup.window_ms,
               "stories": int(s.stories.window_hours * HOUR_MS)}
    week = 7 * 24 * HOUR_MS

    def live(ms: int) -> int:
        return sum(1 for t in fetched if t >= end - ms)

    rows = []
    for step, n in sorted(by_step.items(), key=lambda kv: -kv[1]):
        if n == 0:
            continue
        w = windows.get(step, week)
        k = live(w)
        row = {"step": step, "bytes": n, "window_hours": w / HOUR_MS, "articles_in_window": k,
               "bytes_per_article": round(n / max(k, 1))}
        if held.get(step):
            row["articles_held"] = held[step]
            row["bytes_per_article_held"] = round(n / held[step])
        rows.append(row)
    total = sum(by_step.values())
    print(orjson.dumps({"archive": a.archive, "until": a.until, "article_records": len(fetched), "steps": rows,
                        "all_steps_bytes": total, "articles_in_longest_window": live(week),
                        "all_steps_bytes_per_article": round(total / max(live(week), 1))},
                       option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
