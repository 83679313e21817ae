"""Feed snapshots -> ``feeds.raw`` polls (pure code; ``newsflow import-snapshots`` does the I/O).

A snapshot is one saved copy of one feed document: a file of a crawl folder, or one version of a
feed file in a git history. Each becomes one poll (a :class:`RawPayload` with status 200):

* **time**: a timestamp in the file name (:func:`name_time`), else the caller's fallback (the
  file's modification time, a commit's time);
* **feed id**: the file name without its timestamp, separators and extension
  (:func:`feed_name`), or the name of its folder when nothing else is left;
* **bad snapshots** (empty, not a feed document, too large, a time outside 1995-2100, a second
  snapshot of one feed at the same millisecond) are not polls: each gets one line saying why.

:func:`plan` orders the snapshots by (time, feed id, source) before any is read, so the same
snapshots always give the same archive, byte for byte, and a large history is streamed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import PurePosixPath

from newsflow.model.records import RawPayload
from newsflow.wire.envelope import MAX_FETCHED_MS, MIN_FETCHED_MS

#: file names that are snapshots (before an optional ``.gz``), unless the caller gives others
FEED_SUFFIXES = (".xml", ".rss", ".atom", ".rdf")
#: the largest body a poll carries (the flow's ``normalize.max_payload_bytes`` default)
MAX_BODY_BYTES = 16 * 1024 * 1024

# ISO 8601 (extended or basic, "-" for ":" as file names need, "_" or " " for "T", seconds and
# zone optional) or a 10-digit epoch in seconds / 13-digit one in milliseconds
_ISO = re.compile(
    r"(?<!\d)(?P<y>\d{4})-?(?P<mo>\d{2})-?(?P<d>\d{2})"
    r"(?:[T_ -]?(?P<h>\d{2})[:-]?(?P<mi>\d{2})(?:[:-]?(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?"
    r"(?P<z>Z|z|[+-]\d{2}:?\d{2})?)?(?!\d)")
_EPOCH = re.compile(r"(?<!\d)(?P<e>1\d{9}|1\d{12})(?!\d)")
_SEPARATORS = "-_. @"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One saved feed document, before its bytes are read: ``source`` names it in reports (a
    path, ``commit:path``), ``ref`` is how the reader finds its bytes."""

    source: str
    feed_id: str
    fetched_ms: int
    ref: str


def _iso_ms(m: re.Match[str]) -> int | None:
    g = m.groupdict()
    try:
        tz = UTC
        z = g["z"]
        if z and z not in ("Z", "z"):
            sign = 1 if z[0] == "+" else -1
            digits = z[1:].replace(":", "")
            tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
        frac = (g["f"] or "0")[:6].ljust(6, "0")
        t = datetime(int(g["y"]), int(g["mo"]), int(g["d"]), int(g["h"] or 0), int(g["mi"] or 0),
                     int(g["s"] or 0), int(frac), tzinfo=tz)
    except ValueError:  # month 13, hour 25, offset 99:99: not a time
        return None
    return int(t.timestamp() * 1000 + 0.5) if frac != "000000" else int(t.timestamp()) * 1000


def name_time(stem: str) -> tuple[int, str] | None:
    """The time a file name holds (epoch ms, UTC when it names no zone) and the name without it;
    None when it holds none. The first ISO 8601 time wins, else a 10- or 13-digit epoch.

    >>> name_time("npr_2026-02-08T12-30-00Z")
    (1770553800000, 'npr_')
    >>> name_time("20260208-123000-ars")
    (1770553800000, '-ars')
    >>> name_time("wgrz.2026-02-08T13:30:00+01:00")
    (1770553800000, 'wgrz.')
    >>> name_time("feed-1770553800")
    (1770553800000, 'feed-')
    >>> name_time("feed") is None, name_time("2026-13-45") is None
    (True, True)
    """
    for m in _ISO.finditer(stem):
        ms = _iso_ms(m)
        if ms is not None:
            return ms, stem[:m.start()] + stem[m.end():]
    m2 = _EPOCH.search(stem)
    if m2 is not None:
        e = int(m2.group("e"))
        return (e * 1000 if len(m2.group("e")) == 10 else e), stem[:m2.start()] + stem[m2.end():]
    return None


def strip_suffixes(name: str, suffixes: Iterable[str] = FEED_SUFFIXES) -> str:
    """A file name without ``.gz`` and one feed suffix (any case).

    >>> strip_suffixes("npr-20260208.XML.gz")
    'npr-20260208'
    """
    low = name.lower()
    if low.endswith(".gz"):
        name, low = name[:-3], low[:-3]
    for s in suffixes:
        if s and low.endswith(s.lower()):
            return name[:-len(s)]
    return name


def feed_name(path: str, stem_rest: str) -> str:
    """The feed id of a snapshot at ``path`` (relative, ``/``-separated) whose file name without
    suffix and timestamp is ``stem_rest``: that, trimmed of separators; when nothing is left,
    the folder's name ("" for a file at the top with a bare timestamp as name).

    >>> feed_name("npr_2026-02-08T12-30-00Z.xml", "npr_")
    'npr'
    >>> feed_name("ars/2026-02-08T12-30-00Z.xml", "")
    'ars'
    >>> feed_name("20260208.xml", "")
    ''
    """
    rest = re.sub(r"[-_. @]{2,}", lambda m: m.group(0)[0], stem_rest.strip(_SEPARATORS))
    if rest:
        return rest
    parent = PurePosixPath(path).parent
    return "" if str(parent) in ("", ".") else parent.name


_PROLOG = re.compile(rb"\s*(?:<\?[^>]*\?>|<!--.*?-->|<!DOCTYPE[^>]*>|\s)*", re.S | re.I)
_ROOT = re.compile(rb"<([A-Za-z_][\w.:-]*)")
FEED_ROOTS = frozenset({"rss", "feed", "rdf"})


def not_a_feed(body: bytes) -> str | None:
    """Why ``body`` is no feed document (None when it looks like one): empty, or an XML
    root element other than ``rss``, ``feed`` (Atom) or ``rdf:RDF`` (RSS 1.0), or no XML
    at all. A cheap look at the start only: the flow parses the rest and dead-letters
    what it cannot read.

    >>> not_a_feed(b'\\xef\\xbb\\xbf<?xml version="1.0"?>\\n<!-- x --><rss version="2.0">') is None
    True
    >>> not_a_feed(b"<!DOCTYPE html><html><body>502</body></html>")
    'not a feed document: the root element is <html>'
    >>> not_a_feed(b"  ")
    'empty file'
    """
    head = body[:65536]
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if not head.strip():
        return "empty file"
    for enc in ("utf-16", "utf-32"):  # a BOM of a wide encoding: look at it as text
        if head[:2] in (b"\xff\xfe", b"\xfe\xff") or head[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
            try:
                head = head.decode(enc, "ignore").encode("utf-8")
                break
            except (LookupError, ValueError):
                continue
    m = _ROOT.match(head, _PROLOG.match(head).end())  # type: ignore[union-attr]
    if m is None:
        return "not a feed document: no XML element at the start"
    name = m.group(1).decode("ascii", "replace")
    local = name.rsplit(":", 1)[-1].lower()
    if local not in FEED_ROOTS:
        return f"not a feed document: the root element is <{name[:40]}>"
    return None


@dataclass(frozen=True, slots=True)
class FeedMeta:
    """What a registry knows of a feed, copied into its polls' envelopes."""

    url: str = ""
    publisher: str | None = None
    tier: str | None = None
    category: str | None = None
    language: str | None = None


def plan(snapshots: Iterable[Snapshot]) -> tuple[list[Snapshot], list[str]]:
    """The snapshots to read, in the archive's (time, feed id, source) order, and one line per
    snapshot that cannot be a poll whatever its bytes (``source: why``): no feed id, a time
    outside 1995-2100, or a second snapshot of a feed at the same millisecond (one poll id:
    the first by source is kept)."""
    bad: list[str] = []
    good: list[Snapshot] = []
    for s in snapshots:
        if not s.feed_id:
            bad.append(f"{s.source}: no feed id: the file name is only a timestamp (use --feed-id)")
        elif not MIN_FETCHED_MS <= s.fetched_ms < MAX_FETCHED_MS:
            bad.append(f"{s.source}: its time ({s.fetched_ms} ms) is outside 1995-2100")
        else:
            good.append(s)
    good.sort(key=lambda s: (s.fetched_ms, s.feed_id, s.source))
    out: list[Snapshot] = []
    kept: dict[tuple[str, int], str] = {}
    for s in good:
        first = kept.setdefault((s.feed_id, s.fetched_ms), s.source)
        if first != s.source:
            bad.append(f"{s.source}: feed {s.feed_id!r} has another snapshot at this time ({first})")
        else:
            out.append(s)
    return out, bad


def to_poll(s: Snapshot, body: bytes, meta: FeedMeta | None = None,
            max_body: int = MAX_BODY_BYTES) -> RawPayload | str:
    """The poll of a planned snapshot whose bytes are ``body``, or why it is none."""
    if len(body) > max_body:
        return f"{len(body)} bytes is larger than {max_body}"
    why = not_a_feed(body)
    if why is not None:
        return why
    m = meta or FeedMeta()
    return RawPayload(feed_id=s.feed_id, url=m.url, fetched_at_ms=s.fetched_ms, status=200, body=body,
                      publisher=m.publisher, tier=m.tier, category=m.category, language=m.language)
