"""A live digest window key's recovery snapshots: one entry arriving per epoch, a snapshot
each epoch (what ``newsflow run --recovery-dir`` does for an open window in a quiet hour).

    python bench/bench_window_snapshot.py ARTICLES.jsonl [--n 3000] [--last 200]

ARTICLES.jsonl: a run's article records (e.g. ``newsflow demo --input UCI100K --out D``, then
``D/articles.jsonl``); their digest entries arrive one per epoch. Three ways to snapshot, in
turn, in this process: the whole window pickled and compressed (``make_snapshot`` of its
state, as before chunks), a chunk per epoch (``CHUNK_ENTRIES = 1``), and the flow's chunks
(at least ``CHUNK_ENTRIES`` entries each). Prints the mean time of the last ``--last``
snapshots and the size of the last one.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from newsflow.config import Settings
from newsflow.core.snapshot import make_snapshot
from newsflow.digest.entries import digest_entries
from newsflow.flows import digest_windows as dw
from newsflow.flows.steps import digest_window as dwl


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("articles")
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--last", type=int, default=200)
    a = ap.parse_args()
    with open(a.articles, "rb") as f:
        entries = digest_entries([orjson.loads(x) for x in itertools.islice(f, a.n)])
    s = Settings()
    configs = (s.digests.schedule(), s.digests.to_config(), s.scoring.to_config())
    flow_chunk = dwl.CHUNK_ENTRIES
    out = {}
    for mode in ("whole", "chunk per epoch", f"chunks of {flow_chunk}"):
        dwl.CHUNK_ENTRIES = 1 if mode == "chunk per epoch" else flow_chunk
        logic = dwl.WindowLogic(s, None, {}, configs, recovery=True)
        spent, size = 0.0, 0
        for i, e in enumerate(entries):
            logic.on_item(dw.WindowEntry(e))
            t0 = time.perf_counter()
            snap = (make_snapshot(dw.STEP_WINDOW, {"state": logic.st}, freeze=True) if mode == "whole"
                    else logic.snapshot())
            if i >= len(entries) - a.last:
                spent += time.perf_counter() - t0
                size = len(snap)  # type: ignore[arg-type]
        out[mode] = {"ms_per_snapshot": round(spent / a.last * 1000, 2), "snapshot_mb": round(size / 1e6, 2),
                     "chunks": len(logic.chunks) if mode != "whole" else None}
    dwl.CHUNK_ENTRIES = flow_chunk
    print(orjson.dumps({"entries": len(entries), **out}, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
