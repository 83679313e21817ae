"""A cheap scan of a fetched body for the poller: feed or HTML, format, items, dates, ttl and
``sy:*`` hints (lenient recovery of broken XML with :func:`newsflow.feeds.xml.repair_xml`).
"""

from __future__ import annotations

import calendar
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import xxhash

from newsflow.core.timeutil import dt_to_ms
from newsflow.feeds.xml import repair_xml, split_bom
from newsflow.model.vocab import HealthStatus
from newsflow.polling.state import PollPolicy

_FEED_ROOTS = frozenset({"rss", "feed", "rdf:rdf", "rdf", "channel"})


def _first_tag(body: bytes, limit: int = 4096) -> str | None:
    """Name of the first element (or ``!doctype x``) after BOM, XML declaration, comments, PIs."""
    _, head = split_bom(body[:limit])
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) > 1 and head[1:2] == b"\x00"):
        try:
            head = head.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError:
            return None
    i = 0
    n = len(head)
    while i < n:
        while i < n and head[i:i + 1] in (b" ", b"\t", b"\r", b"\n", b"\x0c"):
            i += 1
        if i >= n or head[i:i + 1] != b"<":
            return None
        if head.startswith(b"<?", i):
            j = head.find(b"?>", i)
            if j < 0:
                return None
            i = j + 2
            continue
        if head.startswith(b"<!--", i):
            j = head.find(b"-->", i)
            if j < 0:
                return None
            i = j + 3
            continue
        m = re.match(rb"<(!doctype\s+)?([A-Za-z_][\w.:-]*)", head[i:], re.IGNORECASE)
        if not m:
            return None
        name = m.group(2).decode("ascii", "replace").lower()
        return f"!doctype {name}" if m.group(1) else name
    return None


_HTML_ELEMENTS = frozenset({"html", "head", "body", "title", "meta", "p", "div", "h1", "h2",
                            "center", "table", "script", "style", "br", "span", "pre", "link"})


def looks_like_html(body: bytes, content_type: str | None) -> bool:
    """The body is an HTML page (Cloudflare challenge, error page, paywall) rather than a feed.

    Decided by the first element: ``<rss>``, ``<feed>``, ``<rdf:RDF>`` are feeds whatever the
    Content-Type says (many servers send feeds as text/html); an HTML doctype or an HTML element
    (``<html>``, ``<p>``, ...) is HTML. Otherwise a ``text/html`` Content-Type decides.
    """
    tag = _first_tag(body)
    if tag is not None:
        if tag.startswith("!doctype "):
            return tag == "!doctype html"
        local = tag.split(":", 1)[-1] if tag != "rdf:rdf" else tag
        if tag in _FEED_ROOTS or local in _FEED_ROOTS:
            return False
        if local in _HTML_ELEMENTS:
            return True
    ct = (content_type or "").lower()
    return "html" in ct and "xml" not in ct


def _parse_http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        dt = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:  # "-0000" or no zone: RFC 9110 dates are GMT
        dt = dt.replace(tzinfo=UTC)
    return dt


# --------------------------------------------------------------------------------------------
# Feed scanning (format, items, dates, hints) with lenient recovery
# --------------------------------------------------------------------------------------------

NS_ATOM = "http://www.w3.org/2005/Atom"
NS_ATOM03 = "http://purl.org/atom/ns#"
NS_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
NS_RSS10 = "http://purl.org/rss/1.0/"
NS_RSS090 = "http://my.netscape.com/rdf/simple/0.9/"
NS_SY = "http://purl.org/rss/1.0/modules/syndication/"
NS_DC = "http://purl.org/dc/elements/1.1/"

#: sy:updatePeriod -> seconds
SY_PERIODS_S: Mapping[str, float] = {
    "hourly": 3600.0,
    "daily": 86_400.0,
    "weekly": 7 * 86_400.0,
    "monthly": 30 * 86_400.0,
    "yearly": 365 * 86_400.0,
}


@dataclass(frozen=True, slots=True)
class FeedScan:
    """What the poller needs from a feed body (the dataflow does the full normalization)."""

    ok: bool
    feed_format: str | None = None  # rss20 | rss10 | rss090 | atom10 | atom03 | feedparser:<v>
    items: int = 0
    undated: int = 0
    item_keys: frozenset[int] = frozenset()
    ttl_s: float | None = None
    sy_interval_s: float | None = None
    recovered: str | None = None  # None | "repaired_xml" | "lenient_parser"
    error: str | None = None


def sy_update_interval_s(period: str | None, frequency: str | int | None) -> float | None:
    """``sy:updatePeriod`` / ``sy:updateFrequency``: e.g. hourly x 2 -> every 1800 s."""
    if not period:
        return None
    base = SY_PERIODS_S.get(str(period).strip().lower())
    if base is None:
        return None
    try:
        freq = int(str(frequency).strip()) if frequency is not None and str(frequency).strip() else 1
    except ValueError:
        freq = 1
    return base / max(freq, 1)


def _ttl_s(value: str | None) -> float | None:
    """RSS ``<ttl>`` is minutes."""
    if value is None:
        return None
    v = value.strip()
    if not v.isdigit():
        return None
    minutes = int(v)
    return minutes * 60.0 if minutes > 0 else None


_MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_RFC822 = re.compile(
    r"^\s*(?:[A-Za-z]{3,9},?\s*)?(\d{1,2})\s+([A-Za-z]{3})[A-Za-z]*\.?\s+(\d{2,4})\s+"
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:(GMT|UTC|UT|Z)|([+-])(\d{2}):?(\d{2}))?\s*$",
    re.IGNORECASE)


def _date_ms(value: str | None) -> int | None:
    """Epoch ms of an item date: RFC 822 (RSS ``pubDate``) or W3C-DTF/RFC 3339 (Atom,
    ``dc:date``). Fast paths for the common shapes, ``email.utils`` for the rest."""
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    if v[0].isdigit() and len(v) >= 10 and v[4:5] == "-":
        iso = v[:-1] + "+00:00" if v[-1] in "Zz" else v
        try:
            dt = datetime.fromisoformat(iso)
        except ValueError:
            return None
        return dt_to_ms(dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC))
    m = _RFC822.match(v)
    if m is not None:
        day, mon, year, hh, mm, ss, _z, sign, oh, om = m.groups()
        month = _MONTHS.get(mon.lower())
        y = int(year)
        if y < 100:
            y += 2000 if y < 50 else 1900
        if month is not None:
            secs: int | None
            try:
                secs = calendar.timegm((y, month, int(day), int(hh), int(mm), int(ss or 0)))
            except (ValueError, OverflowError):
                secs = None
            if secs is not None and 1 <= int(day) <= 31 and int(hh) < 25 and int(mm) < 60:
                if sign:
                    off = int(oh) * 3600 + int(om) * 60
                    secs -= off if sign == "+" else -off
                return secs * 1000
    http_dt = _parse_http_date(v)  # odd RFC 2822 shapes, named zones (EST, PDT, ...)
    return dt_to_ms(http_dt) if http_dt is not None else None


def _item_key(*candidates: str | None) -> int:
    for c in candidates:
        if c and c.strip():
            return xxhash.xxh3_64_intdigest(c.strip().encode("utf-8", "surrogatepass"))
    return 0


def _text(el: ET.Element | None) -> str | None:
    if el is None:
        return None
    return "".join(el.itertext())


def _local(tag: str) -> tuple[str, str]:
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return ns, name
    return "", tag


def _is_dated(value: str | None, now_ms: int, future_tolerance_s: float) -> bool:
    ms = _date_ms(value)
    return ms is not None and ms <= now_ms + future_tolerance_s * 1000


def _scan_tree(root: ET.Element, now_ms: int, policy: PollPolicy) -> FeedScan:
    ns, name = _local(root.tag)
    tol = policy.future_tolerance_s
    keys: list[int] = []
    undated = 0
    ttl_s: float | None = None
    sy_period: str | None = None
    sy_freq: str | None = None
    if name == "rss" and ns == "":
        fmt = "rss20"
        channel = root.find("channel")
        items = channel.findall("item") if channel is not None else []
        if channel is not None:
            ttl_s = _ttl_s(_text(channel.find("ttl")))
            sy_period = _text(channel.find(f"{{{NS_SY}}}updatePeriod"))
            sy_freq = _text(channel.find(f"{{{NS_SY}}}updateFrequency"))
        for it in items:
            guid, link, title = _text(it.find("guid")), _text(it.find("link")), _text(it.find("title"))
            date = _text(it.find("pubDate")) or _text(it.find(f"{{{NS_DC}}}date"))
            keys.append(_item_key(guid, link, (title or "") + "\x00" + (date or "")))
            undated += not _is_dated(date, now_ms, tol)
    elif name == "RDF" and ns == NS_RDF:
        item_ns = NS_RSS10 if root.find(f"{{{NS_RSS10}}}channel") is not None or root.find(
            f"{{{NS_RSS10}}}item") is not None else NS_RSS090
        fmt = "rss10" if item_ns == NS_RSS10 else "rss090"
        channel = root.find(f"{{{item_ns}}}channel")
        if channel is not None:
            sy_period = _text(channel.find(f"{{{NS_SY}}}updatePeriod"))
            sy_freq = _text(channel.find(f"{{{NS_SY}}}updateFrequency"))
        items = root.findall(f"{{{item_ns}}}item")
        for it in items:
            about = it.get(f"{{{NS_RDF}}}about")
            link, title = _text(it.find(f"{{{item_ns}}}link")), _text(it.find(f"{{{item_ns}}}title"))
            date = _text(it.find(f"{{{NS_DC}}}date"))
            keys.append(_item_key(about, link, title))
            undated += not _is_dated(date, now_ms, tol)
    elif name == "feed" and ns in (NS_ATOM, NS_ATOM03):
        fmt = "atom10" if ns == NS_ATOM else "atom03"
        sy_period = _text(root.find(f"{{{NS_SY}}}updatePeriod"))
        sy_freq = _text(root.find(f"{{{NS_SY}}}updateFrequency"))
        items = root.findall(f"{{{ns}}}entry")
        for it in items:
            eid = _text(it.find(f"{{{ns}}}id"))
            link_el = it.find(f"{{{ns}}}link")
            href = link_el.get("href") if link_el is not None else None
            title = _text(it.find(f"{{{ns}}}title"))
            dates = [_text(it.find(f"{{{ns}}}{t}")) for t in ("published", "updated", "issued",
                                                               "modified")]
            dates.append(_text(it.find(f"{{{NS_DC}}}date")))
            keys.append(_item_key(eid, href, title))
            undated += not any(_is_dated(d, now_ms, tol) for d in dates if d)
    else:
        return FeedScan(ok=False, error=f"unknown root element {name!r}")
    return FeedScan(
        ok=True,
        feed_format=fmt,
        items=len(keys),
        undated=undated,
        item_keys=frozenset(keys[: policy.max_item_keys]),
        ttl_s=ttl_s,
        sy_interval_s=sy_update_interval_s(sy_period, sy_freq),
    )


def _scan_with_feedparser(body: bytes, now_ms: int, policy: PollPolicy) -> FeedScan:
    """Lenient recovery, step 2 (docs/rules.md#responses): feedparser's HTML-tolerant parser
    (bytes only: a ``str`` argument could be taken for a URL and fetched)."""
    import feedparser  # local import: slow to import, rarely needed

    d: Any = feedparser.parse(bytes(body), sanitize_html=False, resolve_relative_uris=False)
    version = d.get("version") or ""
    entries = d.get("entries") or []
    if not version and not entries:
        bozo = d.get("bozo_exception")
        return FeedScan(ok=False, error=f"not a feed ({bozo})" if bozo else "not a feed")
    keys: list[int] = []
    undated = 0
    for e in entries:
        keys.append(_item_key(e.get("id"), e.get("link"), e.get("title")))
        parsed = e.get("published_parsed") or e.get("updated_parsed")
        if parsed is None:
            undated += 1
        else:
            year, month, day, hour, minute, second = parsed[:6]
            ts = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
            undated += dt_to_ms(ts) > now_ms + policy.future_tolerance_s * 1000
    feed = d.get("feed") or {}
    return FeedScan(
        ok=True,
        feed_format=f"feedparser:{version or 'unknown'}",
        items=len(keys),
        undated=undated,
        item_keys=frozenset(keys[: policy.max_item_keys]),
        ttl_s=_ttl_s(feed.get("ttl")),
        sy_interval_s=sy_update_interval_s(feed.get("sy_updateperiod"), feed.get("sy_updatefrequency")),
        recovered="lenient_parser",
    )


def scan_feed(body: bytes, now_ms: int, policy: PollPolicy | None = None) -> FeedScan:
    """Format, item keys, undated count and update hints of a feed body.

    Namespace-aware XML first; on failure the lenient recovery (docs/rules.md#responses):
    (1) :func:`repair_xml` and retry, (2) feedparser's HTML-tolerant parser, (3) give up ->
    ``ok=False`` (a parse failure; :func:`track_parse_failures` flags the feed unhealthy after 3
    in a row). DTDs and external
    entities are never fetched (ElementTree/expat do not resolve them).
    """
    p = policy or PollPolicy()
    first_error: str | None = None
    try:
        return _scan_tree(ET.fromstring(body), now_ms, p)
    except ET.ParseError as e:
        first_error = f"xml: {e}"
    except (ValueError, LookupError) as e:  # e.g. encoding unknown to expat
        first_error = f"xml: {e}"
    try:
        scan = _scan_tree(ET.fromstring(repair_xml(body)), now_ms, p)
        if scan.ok:
            return replace(scan, recovered="repaired_xml")
    except (ET.ParseError, ValueError, LookupError):
        pass
    scan = _scan_with_feedparser(body, now_ms, p)
    if scan.ok:
        return scan
    return replace(scan, error=f"{first_error}; {scan.error}")


def undated_status(scan: FeedScan) -> HealthStatus:
    """The date statuses (docs/rules.md#feed-statuses): ``empty`` (no items), ``all_undated``,
    ``partial_undated`` or ``ok``."""
    if scan.items == 0:
        return HealthStatus.EMPTY
    if scan.undated >= scan.items:
        return HealthStatus.ALL_UNDATED
    if scan.undated > 0:
        return HealthStatus.PARTIAL_UNDATED
    return HealthStatus.OK


# --------------------------------------------------------------------------------------------
# Interval hints and adaptation
# --------------------------------------------------------------------------------------------


def feed_hint_s(scan: FeedScan) -> float | None:
    """The publisher's own update hint in the feed: max of ``<ttl>`` and ``sy:update*``."""
    hints = [h for h in (scan.ttl_s, scan.sy_interval_s) if h]
    return max(hints) if hints else None
