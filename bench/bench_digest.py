"""Digest assembly time for one window of N articles (default 100,000), one core.

Records come from ``bench_score_topics.make_records`` (UCI titles + deterministic synthetic
bodies, story ids = UCI story ids), scored with :func:`newsflow.scoring.importance.score_record` at the
window end; all of them fall into one window (``--type``, default the weekly roundup). The
timed part is :func:`newsflow.digest.assemble_digest` on the digest step's entries
(:mod:`newsflow.digest.entries`: what the flow keeps, analyzed once on arrival) — selection,
re-scoring as of the window end, TF-IDF rows, DBSCAN over story centroids, leads, labels,
summaries, trends against a previous digest, sections, self-checks. The cost of building the
entries (once per article, on arrival) is printed apart, per article; so is the story coverage
(:class:`newsflow.digest.coverage.StoryCoverage`), which the flow's digest step also keeps across
windows and fills as records arrive: it is built untimed too.

``--baseline-src DIR`` runs the same window through the code of another checkout (e.g. ``main``
before a change) in a subprocess on the same records, in the same
invocation, and prints both (ratio = baseline / this). A baseline that keeps entries
(``newsflow.digest.entries``) gets them built before its timed part, as here, so both time
assembly alone. State bytes are pickle sizes per article of what the digest step keeps
(entries; for an older baseline its ``digest_view`` records).

    python3 bench/bench_digest.py --n 100000 --baseline-src /work/main
    python3 bench/bench_digest.py --n 100000 --no-stories   # every article its own story
    python3 bench/bench_digest.py --n 20000 --topics 12     # Agglomerative Ward, k = 12
    python3 bench/bench_digest.py --synthetic --no-stories --n 8000   # near-copies: every pair within eps

``again_seconds``: the same window assembled a second time in this process (the same bytes),
its text memos warm as a flow's daily windows leave them for the weekly one; the target is
the first, cold, figure. Each side also prints its process's RSS before the two assemblies
and its peak RSS during them (the peak is reset first: ``/proc/self/clear_refs``): a dense
window's neighbour pairs once held gigabytes. ``--synthetic`` titles are 8 subjects x 8 verbs
x 8 objects (and a number): every article is near every other.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_BASELINE = r'''
import pickle, sys, time
import orjson
from newsflow.digest.assemble import assemble_digest
try:
    from newsflow.digest.trends import digest_memory
except ImportError:  # a checkout whose assembly is one module
    from newsflow.digest.assemble import digest_memory
from newsflow.digest.config import DigestConfig
from newsflow.digest.schedule import DigestWindow
args = pickle.load(open(sys.argv[1], "rb"))
cfg = DigestConfig(n_topics=args["topics"])
win = DigestWindow(*args["window"])
recs, prev_recs, state = args["recs"], args["prev"], None
try:  # a checkout that keeps entries: time assembly on entries too (built untimed, as here)
    from newsflow.digest.entries import digest_entries
    recs = digest_entries(recs, title_weight=cfg.title_weight, body_words=cfg.body_words)
    prev_recs = digest_entries(prev_recs, title_weight=cfg.title_weight, body_words=cfg.body_words)
    state = len(pickle.dumps(recs, protocol=5))
except ImportError:
    try:
        from newsflow.flows.pipeline import digest_view
        state = len(pickle.dumps([digest_view(r) for r in recs], protocol=5))
    except ImportError:
        pass
kw = {}
try:  # a checkout whose digest step keeps story coverage across windows: built untimed, as here
    from newsflow.digest.coverage import StoryCoverage
    kw["coverage"] = StoryCoverage().extend(args["recs"])
except ImportError:
    pass
import re
def status_mb(field):  # as _status_mb below: this script runs on its own
    return int(re.search(field + r":\s+(\d+)", open("/proc/self/status").read()).group(1)) / 1024
rss0 = status_mb("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # the peak from here on
prev = assemble_digest(prev_recs, win, config=cfg)
t0, c0 = time.perf_counter(), time.process_time()
d = assemble_digest(recs, win, previous=digest_memory(prev), config=cfg, **kw)
print(orjson.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
                    "rss_before_mb": rss0,
                    "peak_rss_mb": status_mb("VmHWM"),
                    "state_bytes": state, "clusters": d["cluster_count"],
                    "leads": [it["lead"]["article_id"] for s in d["sections"] for it in s["items"]]}).decode())
'''


def _status_mb(field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (its peak) of this process, MB."""
    m = re.search(rf"{field}:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(m.group(1)) / 1024 if m else float("nan")


def main() -> None:
    from bench_score_topics import make_records

    from newsflow.digest.assemble import assemble_digest
    from newsflow.digest.config import DigestConfig
    from newsflow.digest.coverage import StoryCoverage
    from newsflow.digest.entries import digest_entries
    from newsflow.digest.schedule import DigestWindow
    from newsflow.digest.trends import digest_memory
    from newsflow.scoring.importance import score_record
    from newsflow.wire.contracts import validate

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--type", default="weekly_roundup", help="digest type of the window")
    ap.add_argument("--no-stories", action="store_true", help="drop story ids (no grouping)")
    ap.add_argument("--topics", type=int, default=None, help="fixed number of topics (Ward)")
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--baseline-src", default=None, help="checkout whose assemble_digest to compare")
    args = ap.parse_args()

    t0 = time.perf_counter()
    recs = make_records(args.n, synthetic=args.synthetic)
    end = max(r["published_ms"] for r in recs) + 1
    start = min(r["published_ms"] for r in recs)
    scored = []
    for r in recs:
        if args.no_stories:
            r["story_id"] = None
            r["story_publishers"] = [r["publisher"]]
            r["story_tiers"] = [r["tier"]]
        scored.append(score_record(r, end))
    # a previous window: a quarter of the records, for the trend flags
    rng = random.Random(5)
    prev_recs = rng.sample(scored, len(scored) // 4)
    t_prep = time.perf_counter() - t0
    cfg = DigestConfig(n_topics=args.topics)
    win = DigestWindow(args.type, start, end)

    base = None
    if args.baseline_src:
        with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
            pickle.dump({"recs": scored, "prev": prev_recs, "window": (args.type, start, end),
                         "topics": args.topics}, f, protocol=5)
        env = {**os.environ, "PYTHONPATH": str(Path(args.baseline_src).resolve())}
        try:
            out = subprocess.run([sys.executable, "-c", _BASELINE, f.name], env=env, check=True,
                                 capture_output=True, cwd=args.baseline_src).stdout
        finally:
            os.unlink(f.name)
        base = orjson.loads(out.splitlines()[-1])

    c0 = time.process_time()
    entries = digest_entries(scored, title_weight=cfg.title_weight, body_words=cfg.body_words)
    entry_cpu = time.process_time() - c0
    # the flow's digest step keeps story coverage (publishers / tiers per story over time) across
    # windows, filled as records arrive (StoryCoverage.add), like the entries: built untimed
    c0 = time.process_time()
    coverage = StoryCoverage().extend(scored)
    coverage_cpu = time.process_time() - c0
    prev_entries = digest_entries(prev_recs, title_weight=cfg.title_weight, body_words=cfg.body_words)
    state = len(pickle.dumps(entries, protocol=5))
    rss0 = _status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak from here on: the assemblies'
    t0 = time.perf_counter()
    prev = assemble_digest(prev_entries, win, config=cfg)
    t_prev = time.perf_counter() - t0
    t0 = time.perf_counter()
    c0 = time.process_time()
    d = assemble_digest(entries, win, previous=digest_memory(prev), config=cfg, coverage=coverage)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak = _status_mb("VmHWM")
    validate("digests", d)
    # the same window again in this process: its text memos (labels' entities, stems, summary
    # sentences) warm, as the daily windows of a flow's process leave them for its weekly one
    t0 = time.perf_counter()
    again = assemble_digest(entries, win, previous=digest_memory(prev), config=cfg, coverage=coverage)
    t_again = time.perf_counter() - t0
    assert orjson.dumps(again) == orjson.dumps(d)
    res = {
        "articles": len(scored),
        "window": args.type,
        "stories": not args.no_stories,
        "clustering": d["clustering"],
        "assemble_seconds": round(dt, 2),
        "assemble_cpu_seconds": round(cpu, 2),
        "entry_cpu_us_per_article": round(entry_cpu / len(scored) * 1e6, 1),
        "coverage_cpu_us_per_article": round(coverage_cpu / len(scored) * 1e6, 1),
        "state_bytes_per_article": round(state / len(scored)),
        "previous_window_articles": len(prev_recs),
        "previous_assemble_seconds": round(t_prev, 2),
        "again_seconds": round(t_again, 2),
        # the process's RSS before the two assemblies and its peak during them
        "rss_before_mb": round(rss0),
        "peak_rss_mb": round(peak),
        "selected": d["selected_count"],
        "clusters": d["cluster_count"],
        "items": [len(s["items"]) for s in d["sections"]],
        "trends": sorted({it["trend"] or "-" for s in d["sections"] for it in s["items"]}),
        "digest_bytes": len(orjson.dumps(d)),
        "prep_seconds": round(t_prep, 1),
    }
    if base is not None:
        leads = [it["lead"]["article_id"] for s in d["sections"] for it in s["items"]]
        res["baseline"] = {
            "src": args.baseline_src,
            "assemble_seconds": round(base["seconds"], 2),
            "assemble_cpu_seconds": round(base["cpu_seconds"], 2),
            "state_bytes_per_article": round(base["state_bytes"] / len(scored)) if base["state_bytes"] else None,
            "rss_before_mb": round(base["rss_before_mb"]),
            "peak_rss_mb": round(base["peak_rss_mb"]),
            "clusters": base["clusters"],
            "same_leads_shown": len(set(leads) & set(base["leads"])),
            "leads_shown": len(base["leads"]),
        }
        res["speedup_cpu"] = round(base["cpu_seconds"] / max(cpu, 1e-9), 1)
    print(orjson.dumps(res).decode())


if __name__ == "__main__":
    main()
