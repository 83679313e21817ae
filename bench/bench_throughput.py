"""Whole-flow throughput against its peers, in one invocation on the same input.

    python bench/bench_throughput.py --archive ../shared/data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz
    python bench/bench_throughput.py --uci-rows 100000 [--runs 3] [--skip naive]

Runs, in turn (A B C A B C ...), each as its own process:

* ``flow-p1``: the whole flow, 1 process (``python -m bytewax.run "flows.entry:file_flow()"``,
  not ``bytewax.testing -p 1``, which opens ``localhost:2101`` for a cluster of one: two copies
  at once could collide there, as ``--pair`` runs them)
* ``flow-p2``: the whole flow, 2 processes (``-p 2``)
* ``naive``:   ``bench/naive_peer.py`` (feedparser + a dict on GUID / canonical URL)
* ``flow-base`` (with ``--baseline-src DIR``): the whole flow, 1 process, with another
  checkout's code (e.g. ``/work/main``), so a change is measured against its base in the same
  invocation; its outputs are compared with ``flow-p1``'s (``same_outputs_as_base``)

* ``flow-p1x2`` (with ``--pair``): two copies of ``flow-p1`` at once, each with its own output:
  what two busy processes get from this machine. ``2 * flow-p1 / flow-p1x2`` is the speed-up
  two processes could reach if they shared no work (``pair_ceiling``); ``p2_vs_ceiling``
  compares ``-p 2`` with it

and prints per command the median wall seconds and peak RSS (largest process, from
``wait4``), articles (or items) per second, and the ratios of each round's pair (so a drift of
the shared machine's speed cancels out): ``naive / flow-p1`` (how many times faster the flow
is than the peer), ``flow-p1 / flow-p2`` (speed-up of 2 processes) and ``flow-base / flow-p1``.

    python bench/bench_throughput.py --uci-rows 20000 --runs 2 --skip naive --pair
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
if not SHARED.exists():
    SHARED = Path("/work/shared")
UCI = SHARED / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"


def run(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, int]:
    """Wall seconds and peak RSS in MB of one command (its largest process)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    dt = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else b""
    if status != 0:
        sys.stderr.write(err.decode(errors="replace")[-3000:])
        raise SystemExit(f"failed ({status}): {' '.join(cmd)}")
    return dt, usage.ru_maxrss // 1024


def run_pair(cmd: list[str], envs: list[dict[str, str]], cwd: Path = ROOT) -> tuple[float, int]:
    """Wall seconds until every copy of ``cmd`` (one per env, started together) has ended, and
    the peak RSS in MB of the largest process."""
    t0 = time.perf_counter()
    peak = 0
    with contextlib.ExitStack() as stack:  # (a pipe could fill while the other copy runs)
        errs = [stack.enter_context(tempfile.TemporaryFile()) for _ in envs]
        procs = [subprocess.Popen(cmd, env=e, cwd=cwd, stdout=subprocess.DEVNULL, stderr=f)
                 for e, f in zip(envs, errs, strict=True)]
        for i, proc in enumerate(procs):
            _, status, usage = os.wait4(proc.pid, 0)
            if status != 0:
                errs[i].seek(0)
                sys.stderr.write(errs[i].read().decode(errors="replace")[-3000:])
                raise SystemExit(f"failed ({status}, copy {i}): {' '.join(cmd)}")
            peak = max(peak, usage.ru_maxrss // 1024)
    return time.perf_counter() - t0, peak


def count_items(archive: Path) -> tuple[int, int]:
    """(polls, items) of an archive, counted with the peer's parser-free view: lines and
    ``<item``/``<entry`` tags of the decoded bodies (only for the report)."""
    import base64

    polls = items = 0
    files = [archive] if archive.is_file() else sorted(archive.rglob("*.jsonl*"))
    for f in files:
        with (gzip.open(f, "rb") if f.name.endswith(".gz") else f.open("rb")) as fh:
            for line in fh:
                if not line.strip():
                    continue
                polls += 1
                b64 = json.loads(line).get("body_b64")
                if b64:
                    body = base64.b64decode(b64)
                    items += body.count(b"<item") + body.count(b"<entry")
    return polls, items


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archive")
    ap.add_argument("--uci-rows", type=int)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip", action="append", default=[], choices=["flow-p1", "flow-p2", "naive"])
    ap.add_argument("--baseline-src", help="another checkout: its flow (1 process) runs as a peer")
    ap.add_argument("--pair", action="store_true",
                    help="also run two 1-process flows at once: this machine's ceiling for 2 processes")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="newsflow-thr-"))
    if args.uci_rows:
        archive = work / "uci"
        subprocess.run([sys.executable, "-m", "newsflow.cli.main", "import-uci", str(UCI), "--out", str(archive),
                        "--limit", str(args.uci_rows)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    elif args.archive:
        archive = Path(args.archive).resolve()
    else:
        raise SystemExit("--archive or --uci-rows")
    polls, items = count_items(archive)
    py = sys.executable
    cmds = {
        "flow-p1": [py, "-m", "bytewax.run", "flows.entry:file_flow()"],  # (no port: see above)
        "flow-p2": [py, "-m", "bytewax.testing", "flows.entry:file_flow()", "-p", "2"],
        "naive": [py, "bench/naive_peer.py", str(archive)],
    }
    cmds = {k: v for k, v in cmds.items() if k not in args.skip}
    base = Path(args.baseline_src).resolve() if args.baseline_src else None
    if base is not None:
        cmds["flow-base"] = cmds.get("flow-p1") or [py, "-m", "bytewax.run", "flows.entry:file_flow()"]
    if args.pair:
        cmds["flow-p1x2"] = [py, "-m", "bytewax.run", "flows.entry:file_flow()"]
    res: dict[str, list[tuple[float, int]]] = {k: [] for k in cmds}
    articles = 0
    for r in range(args.runs):
        for name, cmd in cmds.items():
            out = work / f"out-{name}-{r}"
            env = {**os.environ, "NEWSFLOW_INPUT": str(archive), "NEWSFLOW_OUT": str(out), "PYTHONHASHSEED": "0"}
            if name == "flow-base":
                assert base is not None
                env["PYTHONPATH"] = str(base)  # its newsflow package and flows/ entry points
            if name == "flow-p1x2":  # two copies at once, each its own output directory
                envs = [{**env, "NEWSFLOW_OUT": f"{out}-{i}"} for i in range(2)]
                res[name].append(run_pair(cmd, envs))
            else:
                res[name].append(run(cmd, env, base if name == "flow-base" and base else ROOT))
            if name in ("flow-p1", "flow-p2"):
                articles = sum(1 for _ in (out / "articles.jsonl").open("rb"))
            print(f"run {r} {name}: {res[name][-1][0]:.1f} s, {res[name][-1][1]} MB", file=sys.stderr)
    report: dict[str, object] = {"input": str(archive), "polls": polls, "items": items,
                                 "articles_out": articles, "runs": args.runs}
    for name, xs in res.items():
        wall = statistics.median(x[0] for x in xs)
        report[name] = {"wall_s_median": round(wall, 2), "wall_s": [round(x[0], 2) for x in xs],
                        "peak_rss_mb_max": max(x[1] for x in xs),
                        "articles_per_s": round(articles / wall), "items_per_s": round(items / wall)}
    if "naive" in res and "flow-p1" in res:
        q = [n[0] / f[0] for n, f in zip(res["naive"], res["flow-p1"], strict=True)]
        report["flow_p1_vs_naive_speed"] = {"median": round(statistics.median(q), 2), "per_round": [round(x, 2) for x in q]}
    if "flow-p2" in res and "flow-p1" in res:
        q = [a[0] / b[0] for a, b in zip(res["flow-p1"], res["flow-p2"], strict=True)]
        report["p2_speedup"] = {"median": round(statistics.median(q), 2), "per_round": [round(x, 2) for x in q]}
    if "flow-p1x2" in res and "flow-p1" in res:
        q = [2 * a[0] / b[0] for a, b in zip(res["flow-p1"], res["flow-p1x2"], strict=True)]
        report["pair_ceiling"] = {"median": round(statistics.median(q), 2), "per_round": [round(x, 2) for x in q]}
        if "flow-p2" in res:
            r2 = [a[0] / b[0] / c for a, b, c in zip(res["flow-p1"], res["flow-p2"], q, strict=True)]
            report["p2_vs_ceiling"] = {"median": round(statistics.median(r2), 2), "per_round": [round(x, 2) for x in r2]}
    if "flow-base" in res and "flow-p1" in res:
        q = [b[0] / f[0] for b, f in zip(res["flow-base"], res["flow-p1"], strict=True)]
        report["flow_p1_vs_base_speed"] = {"median": round(statistics.median(q), 2), "per_round": [round(x, 2) for x in q]}
        report["same_outputs_as_base"] = {
            f: (work / "out-flow-base-0" / f).read_bytes() == (work / "out-flow-p1-0" / f).read_bytes()
            for f in ("articles.jsonl", "stories.jsonl", "digests.jsonl")}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
