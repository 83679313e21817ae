"""The peer: what a user would write instead of newsflow -- feedparser + a dict on GUID /
canonical URL over the same raw-payload archive.

    python bench/naive_peer.py ARCHIVE [--out FILE]

Reads ``feeds.raw`` envelopes (a ``*.jsonl[.gz]`` file or a directory of them), parses every
body with feedparser, keeps the first entry per GUID (or per link without its query string when
there is no GUID) and writes one JSON line per new item. No schemas, no dead letters, no
stories or digests: the floor a careful script reaches with the standard library + feedparser.
It imports nothing from newsflow, so it measures the peer and only the peer.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import feedparser


def lines(path: Path):  # type: ignore[no-untyped-def]
    files = [path] if path.is_file() else sorted(
        f for f in path.rglob("*") if f.name.endswith((".jsonl", ".jsonl.gz")))
    for f in files:
        with (gzip.open(f, "rb") if f.name.endswith(".gz") else f.open("rb")) as fh:
            for line in fh:
                if line.strip():
                    yield line


def canonical(url: str) -> str:
    s = urlsplit(url.strip())
    return urlunsplit((s.scheme.lower(), s.netloc.lower(), s.path.rstrip("/") or "/", "", ""))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--out", default="/dev/null")
    args = ap.parse_args()
    seen: dict[str, str] = {}
    polls = items = new = bad = 0
    t0 = time.perf_counter()
    with open(args.out, "w", encoding="utf-8") as out:
        for line in lines(Path(args.archive)):
            try:
                env = json.loads(line)
                body = base64.b64decode(env["body_b64"]) if env.get("body_b64") else None
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            polls += 1
            if not body:
                continue
            d = feedparser.parse(body)
            for e in d.entries:
                items += 1
                link = e.get("link") or ""
                key = e.get("id") or (canonical(link) if link else e.get("title", ""))
                if key in seen:
                    continue
                seen[key] = env.get("feed_id", "")
                new += 1
                out.write(json.dumps({
                    "feed_id": env.get("feed_id"), "guid": key, "url": link, "title": e.get("title"),
                    "published": e.get("published"), "summary": e.get("summary"),
                }) + "\n")
    dt = time.perf_counter() - t0
    print(json.dumps({"polls": polls, "items": items, "unique": new, "bad_envelopes": bad,
                      "seconds": round(dt, 2), "items_per_s": round(items / dt)}), file=sys.stderr)


if __name__ == "__main__":
    main()
