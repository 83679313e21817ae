"""Cost of checking feeds.raw envelopes at the edge: hand-written checks (``decode_raw``) vs the
JSON Schema (``jsonschema`` Draft 2020-12) on the same real envelopes, in one invocation.

    .venv/bin/python bench/bench_envelope.py [ARCHIVE.jsonl.gz] [--repeat N]
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import orjson

from newsflow.wire.codec import decode_raw
from newsflow.wire.contracts import validator
from newsflow.wire.envelope import check_envelope

DEFAULT = Path(__file__).resolve().parents[2] / "shared/data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("archive", nargs="?", default=str(DEFAULT))
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    with gzip.open(a.archive, "rb") as fh:
        lines = [x for x in fh if x.strip()]
    dicts = [orjson.loads(x) for x in lines]
    v = validator("feeds.raw")

    def t(fn) -> float:  # type: ignore[no-untyped-def]
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        return best / len(lines) * 1e6

    hand = t(lambda: [check_envelope(d) for d in dicts])
    schema = t(lambda: [v.validate(d) for d in dicts])
    full = t(lambda: [decode_raw(x) for x in lines])
    print(f"{len(lines)} envelopes from {Path(a.archive).name}")
    print(f"  check_envelope (hand):       {hand:8.2f} us/envelope")
    print(f"  jsonschema validate:         {schema:8.2f} us/envelope  ({schema / hand:.1f}x the hand checks)")
    print(f"  decode_raw (JSON+b64+check): {full:8.2f} us/envelope  (hand checks = {hand / full:.1%} of it)")


if __name__ == "__main__":
    main()
