"""MinHash inside the flow: the project's numpy batch function against datasketch's batch API.

    .venv/bin/python bench/bench_minhash.py [ARCHIVE] [--rounds 5] [--flow]

1. Replays ``ARCHIVE`` (default: the labelled real day,
   ``../shared/data/real-feeds/headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz``) through the
   file flow, one worker, and records every call the story features make to
   ``newsflow.dedup.similarity.minhash_signatures`` (the title word sets and the body shingle
   sets of each activation's batch, as the flow forms them), with the CPU it took and the
   flow's CPU in all.
2. Computes the signatures of exactly those calls, in the same order, ``--rounds`` times each
   way (alternating): the project's ``minhash_signatures`` (its title-word memo cleared
   before every round, as at the start of a flow) and ``datasketch.MinHash.bulk`` with the same
   ``num_perm`` and ``seed``, the latter also with each result frozen as a ``LeanMinHash`` (what
   a state would keep). Every signature of every call is checked to be identical.
3. With ``--flow``, replays the archive twice more, once with each implementation behind the
   story features, and checks that the five output files are byte-identical.

Prints one JSON object: per implementation the CPU seconds (median of the rounds), the ratio
datasketch / project, MinHash's share of the flow's CPU, and the sizes of the calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from datasketch import LeanMinHash, MinHash

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from newsflow.cli.main import run_file_flow
from newsflow.dedup import similarity, stories

DEFAULT = ROOT.parent / "shared/data/real-feeds/headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz"
TOPICS = ("articles", "digests", "feed-health", "deadletter", "stories")

Call = tuple[list[list[str]], int, int, bool]  # shingle sets, num_perm, seed, cached
Impl = Callable[..., np.ndarray]


def _datasketch(shingle_sets: Sequence[Sequence[str]], num_perm: int = 128, seed: int = 1, *,
                cached: bool = True, lean: bool = False) -> np.ndarray:
    """``minhash_signatures`` through ``datasketch.MinHash.bulk`` (UTF-8 bytes of each shingle,
    datasketch's own sha1_hash32 and permutations); ``cached`` has no counterpart there."""
    ms = MinHash.bulk([[s.encode("utf-8", "surrogatepass") for s in sh] for sh in shingle_sets],
                      num_perm=num_perm, seed=seed)
    if lean:
        ms = [LeanMinHash(m) for m in ms]
    if not ms:
        return np.empty((0, num_perm), dtype=np.uint64)
    return np.stack([m.hashvalues for m in ms]).astype(np.uint64, copy=False)


def _lean(shingle_sets: Sequence[Sequence[str]], num_perm: int = 128, seed: int = 1, *,
          cached: bool = True) -> np.ndarray:
    return _datasketch(shingle_sets, num_perm, seed, cached=cached, lean=True)


def _replay(archive: Path, out: Path, impl: Impl | None = None,
            calls: list[Call] | None = None) -> tuple[float, float]:
    """One-worker replay with ``impl`` behind the story features (None: the project's); records
    the calls into ``calls``. Returns (the flow's CPU s, the CPU s inside MinHash)."""
    own = stories.minhash_signatures
    inner = impl or own
    spent = [0.0]

    def recorded(shingle_sets: Sequence[Sequence[str]], num_perm: int = 128, seed: int = 1, *,
                 cached: bool = True) -> np.ndarray:
        if calls is not None:
            calls.append(([list(s) for s in shingle_sets], num_perm, seed, cached))
        t = time.process_time()
        got = inner(shingle_sets, num_perm, seed, cached=cached)
        spent[0] += time.process_time() - t
        return got

    stories.minhash_signatures = recorded  # type: ignore[assignment]
    try:
        similarity._shingle_hash.cache_clear()
        t = time.process_time()
        run_file_flow(str(archive), str(out))
        return time.process_time() - t, spent[0]
    finally:
        stories.minhash_signatures = own


def _time(impl: Impl, calls: list[Call]) -> tuple[float, list[np.ndarray]]:
    similarity._shingle_hash.cache_clear()
    t = time.process_time()
    got = [impl(sets, num_perm, seed, cached=cached) for sets, num_perm, seed, cached in calls]
    return time.process_time() - t, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("archive", nargs="?", default=str(DEFAULT))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--flow", action="store_true", help="also replay with each implementation in the flow")
    a = ap.parse_args()
    archive = Path(a.archive)
    calls: list[Call] = []
    with tempfile.TemporaryDirectory() as tmp:
        flow_cpu, in_flow = _replay(archive, Path(tmp) / "record", calls=calls)
    impls: dict[str, Impl] = {"project": similarity.minhash_signatures, "datasketch_bulk": _datasketch,
                              "datasketch_bulk_lean": _lean}
    seconds: dict[str, list[float]] = {k: [] for k in impls}
    reference: list[np.ndarray] | None = None
    for _ in range(a.rounds):
        for name, impl in impls.items():
            dt, got = _time(impl, calls)
            seconds[name].append(dt)
            if reference is None:
                reference = got
            else:
                assert len(got) == len(reference)
                for x, y in zip(got, reference, strict=True):
                    assert x.dtype == y.dtype == np.uint64 and np.array_equal(x, y), name
    med = {k: statistics.median(v) for k, v in seconds.items()}
    # the title word sets (through the project's memo) and the body shingle sets, apart
    by_kind: dict[str, dict[str, float]] = {}
    for kind, cached in (("title", True), ("body", False)):
        part = [c for c in calls if c[3] is cached]
        t = {name: statistics.median(_time(impl, part)[0] for _ in range(a.rounds))
             for name, impl in (("project", impls["project"]), ("datasketch_bulk", _datasketch))}
        by_kind[kind] = {"project_cpu_s": round(t["project"], 4), "datasketch_bulk_cpu_s": round(t["datasketch_bulk"], 4),
                         "ratio": round(t["datasketch_bulk"] / t["project"], 2)}
    sets = [len(c[0]) for c in calls]
    shingles = [sum(map(len, c[0])) for c in calls]
    report: dict[str, Any] = {
        "archive": archive.name,
        "calls": len(calls), "sets": sum(sets), "shingles": sum(shingles),
        "sets_per_call_median": statistics.median(sets) if sets else 0,
        "title_calls": sum(1 for c in calls if c[3]), "body_calls": sum(1 for c in calls if not c[3]),
        "identical_signatures": True,
        "cpu_s_median": {k: round(v, 4) for k, v in med.items()},
        "cpu_s_rounds": {k: [round(x, 4) for x in v] for k, v in seconds.items()},
        "ratio_datasketch_bulk_over_project": round(med["datasketch_bulk"] / med["project"], 2),
        "ratio_datasketch_bulk_lean_over_project": round(med["datasketch_bulk_lean"] / med["project"], 2),
        "by_kind": by_kind,
        "flow_cpu_s": round(flow_cpu, 2), "minhash_in_flow_cpu_s": round(in_flow, 3),
        "minhash_share_of_flow": round(in_flow / flow_cpu, 4),
    }
    if a.flow:
        with tempfile.TemporaryDirectory() as tmp:
            runs = {}
            for name, impl in (("project", None), ("datasketch_bulk", _datasketch)):
                out = Path(tmp) / name
                runs[name] = (_replay(archive, out, impl), {t: (out / f"{t}.jsonl").read_bytes() for t in TOPICS})
            assert runs["project"][1] == runs["datasketch_bulk"][1], "the outputs differ"
            report["flow_outputs_identical"] = True
            report["flow_with"] = {name: {"flow_cpu_s": round(r[0][0], 2), "minhash_cpu_s": round(r[0][1], 3)}
                                   for name, r in runs.items()}
    print("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in report.items()) + "\n}")


if __name__ == "__main__":
    main()
