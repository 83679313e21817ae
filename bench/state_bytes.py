"""State bytes per article in the window, per step, from the flow's own snapshots.

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

``--peak`` runs the flow in this process instead (recovery on, a snapshot every
``--epoch-seconds``) and keeps, at every epoch, the sum of the latest snapshot of every live
key (a key that ends drops out): the largest sum, per step, dated by the article records
emitted by then. The store read at the end misses the per-window digest keys, which end with
their windows (at the end of a replay, all of them). It also prints the wall seconds the
steps spent in ``snapshot()`` over the replay, per step: what recovery costs a run besides
writing the store.

Bytes are what the store keeps: each snapshot is a pickle compressed with zstd
(``newsflow.core.snapshot``); ``pickled_bytes`` are the same snapshots before compression (what
the pickle weighs). Neither is the memory of the live objects: peak RSS is
measured by ``bench_throughput.py``.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from newsflow.config import Settings
from newsflow.core.snapshot import pickled_size, thaw
from newsflow.core.timeutil import HOUR_MS, iso_to_ms, ms_to_iso


def snapshot_bytes(recovery: Path) -> tuple[dict[str, int], dict[str, int]]:
    """step name -> bytes of its keys' latest snapshots at the last epoch (all partitions), as
    stored and as pickled before compression."""
    import pickle

    latest: dict[tuple[str, str], tuple[int, int, int]] = {}
    for db in sorted(recovery.glob("part-*.sqlite3")):
        with sqlite3.connect(db) as con:
            for step, key, epoch, ser in con.execute(
                    "SELECT step_id, state_key, snap_epoch, ser_change FROM snaps"):
                if (step, key) not in latest or latest[(step, key)][0] < epoch:
                    blob = pickle.loads(ser) if ser is not None else None  # (Bytewax's pickle of ours)
                    raw = pickled_size(blob) if isinstance(blob, bytes | bytearray) else len(ser or b"")
                    latest[(step, key)] = (epoch, len(ser or b""), raw)
    out: collections.Counter[str] = collections.Counter()
    raw_out: collections.Counter[str] = collections.Counter()
    for (step, _), (_, n, raw) in latest.items():
        out[step.split(".")[1]] += n
        raw_out[step.split(".")[1]] += raw
    return dict(out), dict(raw_out)


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
            snap = thaw(snap)
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


def peak(archive: str, out: Path, rec: Path, epoch_s: float) -> dict[str, object]:
    """The flow in this process with recovery on: each key's latest snapshot size, summed over
    the live keys (a key that ends drops out) at every epoch; the largest sum, per step, and the
    article records emitted by then (their fetch times, read from the output afterwards, date
    it). Unlike the recovery store read at the end, this sees the per-window digest keys while
    their windows are open."""
    import os
    import pickle

    from bytewax.operators import StatefulLogic

    from newsflow.cli.main import run_file_flow
    from newsflow.config import load_settings
    from newsflow.flows import isolation, metrics

    os.environ["NEWSFLOW_FLOW__EPOCH_SECONDS"] = str(epoch_s)
    sizes: dict[int, tuple[str, int, int]] = {}
    best: dict[str, object] = {"bytes": -1}
    calls = [0]
    spent: collections.Counter[str] = collections.Counter()  # seconds in snapshot(), per step
    a0 = metrics.total(metrics.ARTICLES)

    def label(logic: isolation.Isolated) -> str:
        name = type(logic.inner).__name__
        return logic.stage + (":" + name if logic.stage == "digests" else "")

    orig_snap, orig_item, orig_eof = (isolation.Isolated.snapshot, isolation.Isolated.on_item,
                                      isolation.Isolated.on_eof)

    def sample() -> None:
        total = sum(n for _, n, _ in sizes.values())
        if total > int(best["bytes"]):  # type: ignore[call-overload]
            per: collections.Counter[str] = collections.Counter()
            raw: collections.Counter[str] = collections.Counter()
            for lab, n, r in sizes.values():
                per[lab] += n
                raw[lab] += r
            best.update({"bytes": total, "by_step": dict(per.most_common()), "keys": len(sizes),
                         "pickled_bytes": sum(raw.values()), "pickled_by_step": dict(raw.most_common()),
                         "articles_emitted": int(metrics.total(metrics.ARTICLES) - a0)})

    def snapshot(self: isolation.Isolated) -> object:
        t0 = time.perf_counter()
        s = orig_snap(self)
        spent[label(self)] += time.perf_counter() - t0
        n = len(s) if isinstance(s, bytes | bytearray) else len(pickle.dumps(s))
        sizes[id(self)] = (label(self), n, pickled_size(s) if isinstance(s, bytes | bytearray) else n)
        calls[0] += 1
        if calls[0] % 16 == 0:
            sample()
        return s

    def ended(self: isolation.Isolated, got: tuple[object, bool]) -> tuple[object, bool]:
        if got[1] == StatefulLogic.DISCARD:
            sizes.pop(id(self), None)
        return got

    isolation.Isolated.snapshot = snapshot  # type: ignore[method-assign]
    isolation.Isolated.on_item = lambda self, v: ended(self, orig_item(self, v))  # type: ignore[method-assign]
    isolation.Isolated.on_eof = lambda self: ended(self, orig_eof(self))  # type: ignore[method-assign]
    try:
        run_file_flow(archive, str(out), load_settings(None), recovery_dir=str(rec))
    finally:
        isolation.Isolated.snapshot, isolation.Isolated.on_item, isolation.Isolated.on_eof = (
            orig_snap, orig_item, orig_eof)
    sample()
    best["snapshot_seconds"] = {k: round(v, 2) for k, v in spent.most_common()}
    best["snapshot_seconds_total"] = round(sum(spent.values()), 2)
    best["snapshots"] = calls[0]
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--out")
    ap.add_argument("--recovery")
    ap.add_argument("--until", help="replay only the polls fetched before this ISO instant")
    ap.add_argument("--peak", action="store_true",
                    help="the largest sum of the live keys' snapshots during the replay (in this process)")
    ap.add_argument("--epoch-seconds", type=float, default=2.0, help="with --peak: snapshot interval")
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
    if a.peak:
        best = peak(archive, out, rec, a.epoch_seconds)
        fetched = sorted(iso_to_ms(orjson.loads(x)["fetched_at"]) for x in (out / "articles.jsonl").open("rb"))
        k = min(max(int(best["articles_emitted"]), 1), len(fetched))  # type: ignore[call-overload]
        at = fetched[k - 1]  # (the flow emits in event-time order: the k-th fetch time, about)
        week = 7 * 24 * HOUR_MS
        live = sum(1 for t in fetched[:k] if t >= at - week)
        print(orjson.dumps({"archive": a.archive, "peak_bytes": best["bytes"], "live_keys": best["keys"],
                            "by_step": best["by_step"], "articles_emitted": k,
                            "at_about": ms_to_iso(at), "articles_in_longest_window": live,
                            "bytes_per_article": round(int(best["bytes"]) / max(live, 1)),  # type: ignore[call-overload]
                            "pickled_bytes": best["pickled_bytes"], "pickled_by_step": best["pickled_by_step"],
                            "pickled_bytes_per_article": round(int(best["pickled_bytes"]) / max(live, 1)),  # type: ignore[call-overload]
                            "snapshots": best["snapshots"], "snapshot_seconds_total": best["snapshot_seconds_total"],
                            "snapshot_seconds": best["snapshot_seconds"]},
                           option=orjson.OPT_INDENT_2).decode())
        return
    subprocess.run([sys.executable, "-m", "newsflow.cli.main", "demo", "--input", archive, "--out", str(out),
                    "--recovery-dir", str(rec)], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    by_step, pickled = snapshot_bytes(rec)
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
               "bytes_per_article": round(n / max(k, 1)), "pickled_bytes": pickled.get(step, 0)}
        if held.get(step):
            row["articles_held"] = held[step]
            row["bytes_per_article_held"] = round(n / held[step])
        rows.append(row)
    total = sum(by_step.values())
    print(orjson.dumps({"archive": a.archive, "until": a.until, "article_records": len(fetched), "steps": rows,
                        "all_steps_bytes": total, "articles_in_longest_window": live(week),
                        "all_steps_bytes_per_article": round(total / max(live(week), 1)),
                        "all_steps_pickled_bytes": sum(pickled.values()),
                        "all_steps_pickled_bytes_per_article": round(sum(pickled.values()) / max(live(week), 1))},
                       option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
