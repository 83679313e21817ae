"""Differential evaluation of feed parsers against the feedparser path.

    python bench/parser_diff.py [--corpus] [--archive FILE ...] [--limit N]

For every input (each parser-corpus file of ``shared/data/parser-corpora/manifest.jsonl`` and
each payload of the given real archives) it normalizes the payload three ways:

* ``feedparser``: the parser of record (``NormalizeConfig(fast_parse=False)``);
* ``fastfeed``: newsflow's C-ElementTree fast path (``newsflow.feeds.fastfeed``) where it claims
  the payload, else feedparser;
* ``feedparser-rs`` (if installed): the Rust parser with a feedparser-compatible API, adapted to
  the entry shape ``normalize_entry`` reads; it claims every payload it parses without ``bozo``.

and counts, per candidate, the payloads it claims, how many of those give normalized Article
records identical to the feedparser path, and the parse time of the claimed payloads. A
candidate is only worth shipping where it claims a payload *and* is identical.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
if not SHARED.exists():
    SHARED = Path("/work/shared")

from newsflow.connectors.files import iter_archive
from newsflow.feeds import normalize as nz
from newsflow.feeds.fastfeed import fast_parse
from newsflow.feeds.normalize import NormalizeConfig
from newsflow.model.records import RawPayload
from newsflow.wire.codec import decode_raw

SLOW = NormalizeConfig(fast_parse=False)
FAST = NormalizeConfig(fast_parse=True)


def _plain(v: Any) -> Any:
    """feedparser-rs objects -> the dicts/lists feedparser gives (only what normalize reads)."""
    if v is None or isinstance(v, (str, int, float, bool, tuple)):
        return v
    if isinstance(v, list):
        return [_plain(x) for x in v]
    out = {}
    for k in ("value", "type", "href", "rel", "url", "term", "label", "medium", "width", "height", "name"):
        try:
            x = getattr(v, k)
        except AttributeError:
            continue
        if x is not None:
            out[k] = x
    return out


ENTRY_KEYS = ("title", "content", "description", "summary", "link", "links", "id", "guidislink",
              "published_parsed", "updated_parsed", "author", "author_detail", "tags", "enclosures",
              "media_content", "media_thumbnail")


def rs_parse(body: bytes) -> tuple[str, dict[str, Any], list[dict[str, Any]]] | None:
    import feedparser_rs

    try:
        r = feedparser_rs.parse(body)
    except Exception:  # a crash means "not claimed"
        return None
    if r.bozo or not r.version:
        return None
    f = r.feed
    feed = {k: _plain(f.get(k)) for k in ("title", "language", "author", "author_detail") if f.get(k) is not None}
    entries = []
    for e in r.entries:
        d = {k: _plain(e.get(k)) for k in ENTRY_KEYS if e.get(k) is not None}
        if not r.version.startswith("atom"):  # feedparser files only dc:date under updated (RSS)
            d.pop("updated_parsed", None)
            if e.get("dc_date_parsed") is not None:
                d["updated_parsed"] = e.get("dc_date_parsed")
        entries.append(d)
    return r.version, feed, entries


def inputs(corpus: bool, archives: list[str], limit: int | None) -> list[tuple[str, RawPayload]]:
    out: list[tuple[str, RawPayload]] = []
    if corpus:
        root = SHARED / "data" / "parser-corpora"
        for line in (root / "manifest.jsonl").read_bytes().splitlines():
            m = json.loads(line)
            body = (root / m["path"]).read_bytes()
            out.append(("corpus", RawPayload("f", "https://feeds.example.org/" + m["path"], 1_700_000_000_000, 200, body)))
    for a in archives:
        for i, line in enumerate(iter_archive(a)):
            if limit and i >= limit:
                break
            p = decode_raw(line)
            if p.body:
                out.append((Path(a).name.split("_")[0], p))
    return out


def key(res: nz.NormalizeResult) -> Any:
    return (res.articles, [(d.reason, d.item_index) for d in res.deadletters])


def run(name: str, parser: Any, items: list[tuple[str, RawPayload]], refs: list[Any]) -> dict[str, Any]:
    claimed: Counter[str] = Counter()
    same: Counter[str] = Counter()
    differ: list[str] = []
    t_parse = 0.0
    for (src, p), ref in zip(items, refs, strict=True):
        t0 = time.perf_counter()
        got = parser(p.body)
        t_parse += time.perf_counter() - t0
        if got is None:
            continue
        claimed[src] += 1
        saved = nz.fast_parse
        nz.fast_parse = lambda _b, got=got: got  # this candidate's result for this payload
        try:
            res = nz.normalize_payload(p, FAST)
        finally:
            nz.fast_parse = saved
        if key(res) == ref:
            same[src] += 1
        elif len(differ) < 8:
            differ.append(f"{src}:{p.url}")
    return {"candidate": name, "claimed": dict(claimed), "identical": dict(same),
            "parse_s_claimed": round(t_parse, 2), "first_differences": differ}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", action="store_true")
    ap.add_argument("--archive", action="append", default=[])
    ap.add_argument("--limit", type=int)
    args = ap.parse_args()
    items = inputs(args.corpus, args.archive, args.limit)
    t0 = time.perf_counter()
    refs = [key(nz.normalize_payload(p, SLOW)) for _, p in items]
    t_ref = time.perf_counter() - t0
    print(json.dumps({"inputs": dict(Counter(s for s, _ in items)), "feedparser_path_s": round(t_ref, 2)}))
    cands: list[tuple[str, Any]] = [("fastfeed", fast_parse)]
    try:
        import feedparser_rs  # noqa: F401

        cands.append(("feedparser-rs", rs_parse))
    except ImportError:
        print("feedparser-rs not installed: only fastfeed evaluated")
    for name, parser in cands:
        print(json.dumps(run(name, parser, items, refs)))


if __name__ == "__main__":
    main()
