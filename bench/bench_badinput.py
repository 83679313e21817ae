"""Time and peak RSS of every bad-input case (tests/badinput.py), each run alone through the
whole flow (``newsflow demo --input``, between two good payloads) under ``/usr/bin/time -v``,
plus the whole corpus in one run; writes a Markdown table (case -> outcome -> time -> RSS).

    .venv/bin/python bench/bench_badinput.py [--out FILE.md] [--only NAME]
"""

from __future__ import annotations

import argparse
import base64
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.badinput import corpus, good

NEWSFLOW = [sys.executable, "-m", "newsflow.cli.main", "demo"]


def timed(archive: Path, out: Path) -> tuple[int, float, float]:
    p = subprocess.run(["/usr/bin/time", "-v", *NEWSFLOW, "--input", str(archive), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", p.stderr)
    secs = float(wall.group(3)) + 60 * float(wall.group(2)) + 3600 * float(wall.group(1) or 0) if wall else -1
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    return p.returncode, secs, int(rss.group(1)) / 1024 if rss else -1


def outcome(out: Path, name: str) -> str:
    reasons: Counter[str] = Counter()
    f = out / "deadletter.jsonl"
    for line in f.read_bytes().splitlines() if f.exists() else []:
        d = orjson.loads(line)
        if d["feed_id"] == name or name.encode() in base64.b64decode(d["original_b64"])[:4096]:
            reasons[d["reason"]] += 1
    arts = 0
    f = out / "articles.jsonl"
    trunc = 0
    for line in f.read_bytes().splitlines() if f.exists() else []:
        d = orjson.loads(line)
        if d["feed_id"] == name:
            arts += 1
            trunc += bool(d.get("truncated"))
    parts = [f"dead letter `{r}`" + (f" x{n}" if n > 1 else "") for r, n in sorted(reasons.items())]
    if arts:
        parts.append(f"{arts} article{'s' if arts > 1 else ''}" + (f" ({trunc} truncated)" if trunc else ""))
    return ", ".join(parts) or "**nothing**"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="also write the table to this Markdown file (after a <!-- table --> line)")
    ap.add_argument("--only")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nf-bad-"))
    lines, cases = corpus(tmp)
    rows = []
    base = tmp / "base.jsonl"
    base.write_bytes(good(0) + b"\n" + good(1) + b"\n")
    rc, b_s, b_rss = timed(base, tmp / "base-out")
    rows.append(("(peer: two good payloads only)", f"exit {rc}", b_s, b_rss))
    for c in cases:
        if a.only and a.only not in c.name:
            continue
        arch = tmp / f"{c.name}.jsonl"
        arch.write_bytes(b"\n".join([good(0), c.line, good(1)]) + b"\n")
        rc, s, rss = timed(arch, tmp / f"{c.name}-out")
        res = outcome(tmp / f"{c.name}-out", c.name)
        rows.append((c.name, (f"exit {rc}; " if rc else "") + res, s, rss))
        print(f"{c.name:40s} {s:6.2f} s {rss:7.0f} MB  {rows[-1][1]}", flush=True)
    allf = tmp / "all.jsonl"
    allf.write_bytes(b"\n".join(lines) + b"\n")
    rc, s, rss = timed(allf, tmp / "all-out")
    rows.append((f"**whole corpus, one run** ({len(cases)} bad + {len(cases) + 1} good)", f"exit {rc}", s, rss))
    md = ["| case | outcome | time (s) | peak RSS (MB) | vs peer (time, RSS) |", "|---|---|---:|---:|---:|"]
    md += [f"| {n} | {o} | {s:.2f} | {r:.0f} | {s / b_s:.2f}x, {r / b_rss:.2f}x |" for n, o, s, r in rows]
    table = "\n".join(md)
    print(table)
    if a.out and not a.only:
        p = Path(a.out)
        text = p.read_text() if p.exists() else ""
        start = text.find("<!-- table -->")
        head = text[:start] if start >= 0 else text
        p.write_text(head + "<!-- table -->\n" + table + "\n")


if __name__ == "__main__":
    main()
