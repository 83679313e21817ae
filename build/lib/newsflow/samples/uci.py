"""Render UCI News Aggregator rows into raw feed payloads so real data replays through the flow.

One RSS 2.0 document per publisher section (UCI category b/t/e/m) per day, like a publisher's
section feeds; item ``<guid isPermaLink="false">`` = the UCI row id;
items keep the file's order; ``fetched_at`` = the row's day + 23:59:59 (UCI times are floored to
the day, so the poll happens at the end of it); payloads are emitted in day order, publishers in
order of first appearance that day. The data stays in ../shared: nothing is copied into the repo.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import orjson

from newsflow.core.hashing import stable_id
from newsflow.core.timeutil import iso_to_ms
from newsflow.model.records import RawPayload

UCI_FETCH_OFFSET_MS = 86_399_000


def read_uci(path: str | Path, limit: int | None = None) -> Iterator[dict[str, Any]]:
    p = Path(path)
    opener = gzip.open if p.name.endswith(".gz") else open
    with opener(p, "rb") as fh:
        for i, line in enumerate(fh):
            if limit is not None and i >= limit:
                return
            if line.strip():
                yield orjson.loads(line)


def _time_ms(v: Any) -> int:
    if isinstance(v, int | float):
        return int(v if v > 1e11 else v * 1000)
    return iso_to_ms(str(v))


def render_feed(publisher: str, host: str, rows: list[dict[str, Any]], day_ms: int) -> bytes:
    pub = format_datetime(datetime.fromtimestamp(day_ms / 1000, tz=UTC))
    items = "".join(
        f"<item><title>{escape(r['title'] or '')}</title><link>{escape(r['url'] or '')}</link>"
        f'<guid isPermaLink="false">{escape(str(r["id"]))}</guid><pubDate>{pub}</pubDate>'
        f"<category>{escape(r.get('category') or '')}</category></item>"
        for r in rows
    )
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>{escape(publisher)}</title>'
            f"<link>http://{escape(host)}/</link><description>{quoteattr(publisher)[1:-1]}</description>"
            f"{items}</channel></rss>").encode()


def uci_payloads(path: str | Path, limit: int | None = None) -> Iterator[RawPayload]:
    """Group rows by (day, publisher, category) in file order; one payload per group."""
    day: int | None = None
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def flush(d: int) -> Iterator[RawPayload]:
        for i, ((publisher, category), rows) in enumerate(groups.items()):
            host = rows[0].get("hostname") or "unknown"
            yield RawPayload(
                feed_id="uci-" + stable_id(publisher, category), url=f"http://{host}/rss/{category}",
                fetched_at_ms=d + UCI_FETCH_OFFSET_MS + i, status=200,
                body=render_feed(publisher, host, rows, d), content_type="application/rss+xml",
                publisher=publisher, category=category, language="en",
            )

    for row in read_uci(path, limit):
        d = _time_ms(row["time"])
        d -= d % 86_400_000
        if day is not None and d != day:
            yield from flush(day)
            groups = {}
        day = d
        publisher = row.get("source") or row.get("hostname") or "unknown"
        groups.setdefault((publisher, row.get("category") or ""), []).append(row)
    if day is not None:
        yield from flush(day)
