"""Parse one raw feed payload and normalize its items (docs/rules.md#parsing-and-normalization).

Pure: ``normalize_payload(RawPayload) -> NormalizeResult``; no I/O, no wall clock ("now" is the
payload's ``fetched_at``). Every item ends as an :class:`Article` or a :class:`DeadLetter`;
a payload that is not a feed at all ends as one dead-letter record. Nothing raises.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any

import feedparser
import orjson

from newsflow.core.hashing import bytes_id, fingerprint, stable_id
from newsflow.core.timeutil import ms_to_iso
from newsflow.feeds.fastfeed import caption_contents, fast_parse
from newsflow.feeds.tiers import BUILTIN_TIERS, SourceTiers
from newsflow.feeds.urls import absolutize, canonicalize_url, registrable_domain
from newsflow.feeds.xml import needs_byte_repair, repair_xml_bytes
from newsflow.model.records import Article, DeadLetter, Media, RawPayload
from newsflow.model.vocab import HealthStatus
from newsflow.text.boilerplate import without_boilerplate
from newsflow.text.html import (
    MAX_HTML_DEPTH,
    clean_title,
    collapse_ws,
    first_img_src,
    first_line,
    html_depth,
    html_to_text,
    is_partial_content,
    looks_like_html_page,
    reading_time_minutes,
    sanitize_html,
    strip_dateline,
    text_of_sanitized,
    word_count,
)


@dataclass(frozen=True, slots=True)
class NormalizeConfig:
    """Normalization knobs (built by ``newsflow.config``'s ``[normalize]`` section)."""

    #: a date more than this far after the fetch time is not trusted (docs/rules.md#dates)
    future_tolerance_ms: int = 3_600_000
    #: words per minute for reading time (docs/rules.md#html-and-text)
    reading_wpm: int = 238
    #: "partialContent" when fewer words than this and the body ends in "..." / "[...]"
    partial_max_words: int = 100
    #: parse well-formed RSS 2.0/1.0/Atom with the C ElementTree fast path (identical output,
    #: ~10x faster); anything unusual still goes through feedparser
    fast_parse: bool = True
    # bounds on bad input: what is cut is flagged or dead-lettered, never dropped
    #: largest feed body (bytes, inline or from a blob); larger -> dead letter ``payload_too_large``
    max_payload_bytes: int = 16 * 1024 * 1024
    #: items normalized per payload (feeds list newest first); the rest -> one dead letter
    #: ``too_many_items`` with the count (a 50,000-item feed took 36 s / 1.3 GB uncapped)
    max_items_per_payload: int = 2_000
    #: longest item body used (chars of the raw HTML/text); longer is cut, record ``truncated``
    max_item_body_chars: int = 100_000
    #: deepest HTML element nesting of an item body handed to the sanitizer (quadratic in it);
    #: deeper -> dead letter ``html_too_deep`` (``newsflow.text.html.MAX_HTML_DEPTH``)
    max_html_depth: int = MAX_HTML_DEPTH
    #: original bytes kept in a dead letter (the rest is cut; ``original_size`` has the full size)
    max_deadletter_original_bytes: int = 256 * 1024
    #: default tiers of well-known sources for feeds without a tier of their own (None: off)
    source_tiers: SourceTiers | None = BUILTIN_TIERS
    #: a sentence found in this many items of one feed document is its boilerplate (channel
    #: descriptions, blurbs): left out of the text story features read (0: off)
    boilerplate_min_items: int = 3


DEFAULT_NORMALIZE_CONFIG = NormalizeConfig()

#: known category synonyms (normalized lowercase -> preferred form)
CATEGORY_SYNONYMS = {
    "tech": "technology", "sci": "science", "biz": "business", "econ": "economy",
    "sports": "sport", "politic": "politics", "world news": "world", "us news": "us",
    "entertainment news": "entertainment", "health news": "health",
}
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")


@dataclass(slots=True)
class NormalizeResult:
    articles: list[Article] = field(default_factory=list)
    deadletters: list[DeadLetter] = field(default_factory=list)
    #: feed-health summary of this payload (status + counters)
    status: HealthStatus = HealthStatus.OK
    feed_format: str | None = None
    items: int = 0
    malformed: int = 0
    undated: int = 0
    bozo: str | None = None
    recovered: bool = False


#: longest title kept (chars); a longer one is cut and the record flagged ``truncated``
MAX_TITLE_CHARS = 2_000
#: original bytes kept in a dead letter by default (``NormalizeConfig.max_deadletter_original_bytes``)
MAX_ORIGINAL_BYTES = 256 * 1024


def make_deadletter(
    stage: str, reason: str, detail: str, original: bytes, *,
    feed_id: str | None, fetched_ms: int | None, item_index: int | None = None,
    max_original: int = MAX_ORIGINAL_BYTES,
) -> DeadLetter:
    """A dead-letter record with a stable id (re-emits after a crash overwrite themselves).
    At most ``max_original`` original bytes are kept (a dead letter must fit in a Kafka
    message); ``original_size`` then tells the full size."""
    dl_id = stable_id(
        stage, reason, feed_id or "", str(fetched_ms or 0), str(item_index), bytes_id(original)
    )
    cut = len(original) > max_original
    return DeadLetter(
        dl_id=dl_id, stage=stage, reason=reason, detail=detail[:2000], feed_id=feed_id,
        fetched_at=ms_to_iso(fetched_ms) if fetched_ms is not None else None,
        item_index=item_index, original=original[:max_original] if cut else original,
        original_size=len(original) if cut else None,
    )


def _install_dc_date_hook() -> None:
    """feedparser files ``<dc:date>`` under ``updated``, where Atom's own ``<updated>`` also goes:
    keep its parsed value under ``dc_date_parsed`` too, so the date priority (dc:date first,
    docs/rules.md#dates) can be applied on Atom entries as well. Behaviour for every existing
    key is unchanged."""
    from feedparser.datetimes import _parse_date
    from feedparser.namespaces.dc import Namespace

    if getattr(Namespace, "_newsflow_dc_date", False):
        return

    def _end_dc_date(self: Any) -> None:
        value = self.pop("updated")
        parsed = _parse_date(value)
        self._save("updated_parsed", parsed, overwrite=True)
        if parsed is not None:
            self._save("dc_date_parsed", parsed, overwrite=True)

    Namespace._end_dc_date = _end_dc_date
    Namespace._newsflow_dc_date = True


_install_dc_date_hook()


def parse_feed(body: bytes, base_url: str | None, content_type: str | None = None) -> Any:
    """feedparser on the body. The HTTP ``Content-Type`` is passed only when it names a
    charset; otherwise the document's own declaration (else UTF-8) decides, as the fast path
    does. (Any response headers without a Content-Type make feedparser assume ``text/xml``
    and ISO-8859-1: a UTF-8 no-break space came out as "Â" in 61 Daily Mail titles.)"""
    headers: dict[str, str] = {}
    if base_url:
        headers["content-location"] = base_url
    if headers:
        headers["content-type"] = (content_type if content_type and "charset=" in content_type.lower()
                                   else "application/xml")
    return feedparser.parse(
        body, response_headers=headers or None, sanitize_html=False, resolve_relative_uris=False
    )


def extract_author(entry: Any, feed: Any) -> str | None:
    """dc:creator -> author name -> author (email) -> managingEditor
    (docs/rules.md#field-priorities); the name only ("jane@ex.com (Jane Roe)" -> "Jane Roe").
    An item author given only as an email is still the item's author (the email is all there
    is): it is kept rather than replaced by the feed's managingEditor."""
    for src in (entry, feed):
        detail = src.get("author_detail") or {}
        name = detail.get("name")
        raw = src.get("author") or ""
        if not name:
            name = raw
        if name:
            cleaned = collapse_ws(_EMAIL.sub("", html_to_text(name)).replace("()", ""))
            cleaned = cleaned.strip(" ()<>,;")
            if cleaned:
                return cleaned
        if src is entry:
            email = detail.get("email") or (m.group(0) if (m := _EMAIL.search(html_to_text(raw))) else None)
            if email:
                return str(email)
    return None


def _struct_to_ms(st: time.struct_time | None) -> int | None:
    if not st:
        return None
    try:
        return calendar.timegm(st) * 1000
    except (OverflowError, ValueError, TypeError):
        return None


def extract_date(entry: Any, feed_format: str, fetched_ms: int, future_tolerance_ms: int) -> tuple[int, bool, str]:
    """Date priority dc:date -> published -> updated -> pubDate, as UTC epoch ms.

    ``dc:date`` is kept apart as ``dc_date_parsed`` (see :func:`_install_dc_date_hook`; the fast
    path does the same) and comes first on every format. feedparser files ``dc:date`` and Atom
    ``updated`` under ``updated`` and both RSS ``pubDate`` and Atom ``published`` under
    ``published``; so then for RSS the order is updated then published(=pubDate), for Atom
    published then updated. Missing/unparseable -> fetch time and
    ``date_uncertain``; more than ``future_tolerance_ms`` after the fetch -> not trusted: fetch time,
    uncertain (docs/rules.md#dates).
    """
    is_atom = feed_format.startswith("atom")
    order = (("dc_date_parsed", "dc:date"),) + (
        (("published_parsed", "published"), ("updated_parsed", "updated"))
        if is_atom
        else (("updated_parsed", "dc:date"), ("published_parsed", "pubDate"))
    )
    for key, label in order:
        # dict.get: FeedParserDict.get('updated_parsed') silently falls back to 'published'
        ms = _struct_to_ms(dict.get(entry, key))
        if ms is not None:
            if ms > fetched_ms + future_tolerance_ms:
                return fetched_ms, True, "future_clamped"
            return ms, False, label
    return fetched_ms, True, "fetched_at"


def extract_body(entry: Any, feed_format: str = "") -> str:
    """content:encoded / Atom content -> description -> summary (the longest content wins ties).

    In RSS, feedparser files a second description as ``text/plain`` content: a
    ``<media:description>``, the photo caption of NYT and LA Times items ("Prime Minister
    Benjamin Netanyahu of Israel during an event in Kiryat Arba…"). It is not the body when the
    item has HTML content (content:encoded) or a description of its own.
    """
    contents = entry.get("content") or []
    if contents and feed_format.startswith("rss"):
        html = [c for c in contents if c.get("type") != "text/plain"]
        if html or entry.get("description") or entry.get("summary"):
            contents = html
    best = ""
    for c in contents:
        v = c.get("value") or ""
        if len(v) > len(best):
            best = v
    if best.strip():
        return best
    return entry.get("description") or entry.get("summary") or ""


def extract_categories(entry: Any) -> tuple[str, ...]:
    """All <category> + <dc:subject>, lowercased, whitespace-collapsed, synonyms mapped, unique."""
    out: list[str] = []
    for tag in entry.get("tags") or []:
        term = tag.get("term") or tag.get("label") or ""
        for part in term.split(",") if "," in term and len(term) > 40 else (term,):
            t = collapse_ws(html_to_text(part)).lower()
            t = CATEGORY_SYNONYMS.get(t, t)
            if t and t not in out:
                out.append(t)
    return tuple(out)


def _int_or_none(v: Any) -> int | None:
    try:
        return int(v) if v not in (None, "") else None
    except (TypeError, ValueError):
        return None


def extract_media(entry: Any, body_html: str, base: str | None) -> tuple[Media, ...]:
    """enclosure -> media:content -> media:thumbnail -> first <img> of the body."""
    out: list[Media] = []
    seen: set[str] = set()

    def add(url: str | None, source: str, **kw: Any) -> None:
        if not url:
            return
        u = absolutize(url, base)
        if u in seen or not u.startswith(("http://", "https://")):
            return
        seen.add(u)
        out.append(Media(url=u, source=source, **kw))

    for enc in entry.get("enclosures") or []:
        add(enc.get("href") or enc.get("url"), "enclosure", type=enc.get("type") or None)
    for mc in entry.get("media_content") or []:
        add(mc.get("url"), "media_content", type=mc.get("type") or None, medium=mc.get("medium") or None,
            width=_int_or_none(mc.get("width")), height=_int_or_none(mc.get("height")))
    for mt in entry.get("media_thumbnail") or []:
        add(mt.get("url"), "media_thumbnail", width=_int_or_none(mt.get("width")),
            height=_int_or_none(mt.get("height")))
    if not out:
        add(first_img_src(body_html), "img")
    return tuple(out)


def extract_link(entry: Any) -> str | None:
    """<link> -> <guid isPermaLink="true"> -> Atom <id> when it is a URL."""
    link: str | None = entry.get("link")
    if link:
        return link
    for lk in entry.get("links") or []:
        if lk.get("rel", "alternate") == "alternate" and lk.get("href"):
            href: str = lk["href"]
            return href
    gid = entry.get("id") or ""
    if entry.get("guidislink", False) or gid.startswith(("http://", "https://")):
        return gid or None
    return None


def content_hash(title: str, body_text: str) -> str:
    return stable_id(title, body_text, size=16)


def _entry_bytes(entry: Any) -> bytes:
    try:
        return orjson.dumps(entry, default=str, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return repr(entry).encode("utf-8", "replace")


def normalize_entry(
    entry: Any, feed: Any, payload: RawPayload, feed_format: str, index: int, base: str | None,
    settings: NormalizeConfig, publisher: str,
) -> Article | DeadLetter:
    raw_body = extract_body(entry, feed_format).strip()
    truncated = len(raw_body) > settings.max_item_body_chars
    if truncated:  # bounded work per item: html_to_text/sanitize/fingerprints see the cap only
        raw_body = raw_body[: settings.max_item_body_chars]
    is_html = "<" in raw_body
    if is_html and html_depth(raw_body, settings.max_html_depth) > settings.max_html_depth:
        # the sanitizer's work grows with the square of the nesting depth: refused before it
        return make_deadletter(
            "normalize", "html_too_deep",
            f"item body nests HTML elements more than {settings.max_html_depth} deep "
            "(normalize.max_html_depth; the HTML sanitizer's work grows with the square of the depth): "
            "not normalized", _entry_bytes(entry), feed_id=payload.feed_id,
            fetched_ms=payload.fetched_at_ms, item_index=index,
        )
    # one parse per item: the text is read off the sanitized HTML (the same text)
    body_html = sanitize_html(raw_body) if is_html else html_to_text(raw_body)
    body_text = strip_dateline(text_of_sanitized(body_html) if is_html else body_html)
    title = clean_title((entry.get("title") or "")[:MAX_TITLE_CHARS * 4])
    if len(title) > MAX_TITLE_CHARS:
        title, truncated = title[:MAX_TITLE_CHARS], True
    if not title:
        title = first_line(body_text)
    if not title and not body_text:
        return make_deadletter(
            "normalize", "no_title_no_body", "item has neither title nor body",
            _entry_bytes(entry), feed_id=payload.feed_id, fetched_ms=payload.fetched_at_ms,
            item_index=index,
        )
    link = extract_link(entry)
    url = absolutize(link, base) if link else None
    canonical = canonicalize_url(url) if url else None
    guid = collapse_ws(entry.get("id") or "") or canonical or content_hash(title, body_text)
    published_ms, uncertain, date_source = extract_date(
        entry, feed_format, payload.fetched_at_ms, settings.future_tolerance_ms
    )
    words = word_count(body_text)
    return Article(
        article_id=stable_id(payload.feed_id, guid),
        feed_id=payload.feed_id,
        publisher=publisher,
        tier=payload.tier or (settings.source_tiers.lookup(publisher, canonical)
                              if settings.source_tiers is not None else None),
        guid=guid,
        url=url,
        canonical_url=canonical,
        title=title,
        author=extract_author(entry, feed),
        published_at=ms_to_iso(published_ms),
        published_ms=published_ms,
        date_uncertain=uncertain,
        date_source=date_source,
        fetched_at=ms_to_iso(payload.fetched_at_ms),
        fetched_ms=payload.fetched_at_ms,
        body_html=body_html,
        body_text=body_text,
        categories=extract_categories(entry),
        media=extract_media(entry, raw_body, base),
        word_count=words,
        reading_time_min=reading_time_minutes(words, settings.reading_wpm),
        partial_content=is_partial_content(body_text, words, settings.partial_max_words),
        content_hash=content_hash(title, body_text),
        feed_format=feed_format,
        language=payload.language or (feed.get("language") or None),
        category=payload.category,
        item_index=index,
        truncated=truncated,
    )


def publisher_of(payload: RawPayload, feed: Any) -> str:
    """Registry publisher -> feed title -> registrable domain of the feed URL
    (docs/rules.md#field-priorities)."""
    if payload.publisher:
        return payload.publisher
    title = clean_title(feed.get("title")) if feed else ""
    return title or registrable_domain(payload.final_url or payload.url) or payload.feed_id


# ---------------------------------------------------------------- re-poll memory
@dataclass(slots=True)
class FeedMemory:
    """What one feed served last time: its payload's fingerprint and normalized result, and
    each normalized item by its fingerprint. Replaced as a whole on every poll, never mutated."""

    last_ms: int
    payload_fp: bytes
    result: NormalizeResult
    items: dict[bytes, Article]


@dataclass(slots=True)
class RepollMemory:
    """Per-feed memory of the last payload, so a re-poll costs nearly nothing:

    * a payload with the same bytes (and envelope context) as the feed's previous one is not
      parsed: the previous result is re-stamped with this fetch time;
    * an item whose parsed entry (and feed context) is the same as in the feed's previous
      payload is not normalized again: the previous :class:`Article` is re-stamped.

    Re-stamping changes only ``fetched_at``/``fetched_ms``/``item_index`` (and dead letters'
    ids), the only fields a fetch time or position can change -- except dates taken from the
    fetch time (undated or future-dated items), which are never reused. So the output is
    byte-identical to normalizing from scratch. State is one payload per feed, keyed by feed
    and expired on event time (:meth:`expire`).
    """

    feeds: dict[str, FeedMemory] = field(default_factory=dict)
    payload_hits: int = 0
    item_hits: int = 0

    def expire(self, watermark_ms: int, horizon_ms: int) -> None:
        old = [k for k, m in self.feeds.items() if m.last_ms < watermark_ms - horizon_ms]
        for k in old:
            del self.feeds[k]


def _context_fp(payload: RawPayload) -> bytes:
    """Everything of the envelope besides the body that normalization reads."""
    return fingerprint(orjson.dumps([payload.feed_id, payload.url, payload.final_url, payload.publisher,
                                     payload.tier, payload.category, payload.language, payload.status]))


def _reusable(a: Article, fetched_ms: int, settings: NormalizeConfig) -> bool:
    return not a.date_uncertain and a.published_ms <= fetched_ms + settings.future_tolerance_ms


def _restamp(a: Article, payload: RawPayload, index: int) -> Article:
    return replace(a, fetched_at=ms_to_iso(payload.fetched_at_ms), fetched_ms=payload.fetched_at_ms,
                   item_index=index)


def _restamp_result(prev: NormalizeResult, payload: RawPayload, settings: NormalizeConfig) -> NormalizeResult | None:
    if not all(_reusable(a, payload.fetched_at_ms, settings) for a in prev.articles):
        return None
    if any(d.original_size is not None for d in prev.deadletters):  # ids hash the full original
        return None
    res = replace(prev, articles=[_restamp(a, payload, a.item_index) for a in prev.articles], deadletters=[
        make_deadletter(d.stage, d.reason, d.detail, d.original, feed_id=payload.feed_id,
                        fetched_ms=payload.fetched_at_ms, item_index=d.item_index,
                        max_original=max(len(d.original), 1))
        for d in prev.deadletters])
    return res


def _mark_boilerplate(articles: list[Article], efps: list[bytes | None], min_items: int,
                      seen: dict[bytes, Article] | None) -> None:
    """Each article of one document with ``story_text`` = its body without the sentences that
    ``min_items`` of the document's items share (in place; the re-poll memory keeps the same
    article, so a re-served item reads the same text)."""
    cores = without_boilerplate([a.body_text for a in articles], min_items)
    for k, (a, core) in enumerate(zip(articles, cores, strict=True)):
        text = None if core == a.body_text else core
        if text != a.story_text:
            articles[k] = a = replace(a, story_text=text)
            if seen is not None and efps[k] is not None:
                seen[efps[k]] = a  # type: ignore[index]


def _entry_fp(entry: Any, feed_ctx: bytes) -> bytes:
    """The re-poll memory's key of one parsed entry in its feed's context: its fields as JSON
    (orjson, ~4x faster than ``repr``; dates and other non-JSON values by their ``repr``), or
    its ``repr`` when JSON can't hold it (lone surrogates, huge integers)."""
    try:
        data = b"j" + orjson.dumps(entry, default=repr)
    except (TypeError, orjson.JSONEncodeError):
        data = b"r" + repr(entry).encode("utf-8", "surrogatepass")
    return fingerprint(feed_ctx + data)


def normalize_payload(payload: RawPayload, settings: NormalizeConfig = DEFAULT_NORMALIZE_CONFIG,
                      memory: RepollMemory | None = None) -> NormalizeResult:
    """Parse one ``feeds.raw`` payload into articles and dead letters; never raises.

    With ``memory`` (the caller's per-feed state), unchanged payloads and unchanged items are
    recognised and re-stamped instead of parsed / normalized again (same output)."""
    body = payload.body
    if memory is None or payload.status == 304 or not body:
        return _normalize_payload(payload, settings, None)
    pfp = fingerprint(_context_fp(payload) + body)
    prev = memory.feeds.get(payload.feed_id)
    if prev is not None and prev.payload_fp == pfp:
        res = _restamp_result(prev.result, payload, settings)
        if res is not None:
            memory.payload_hits += 1
            memory.feeds[payload.feed_id] = FeedMemory(payload.fetched_at_ms, pfp, prev.result, prev.items)
            return res
    seen: dict[bytes, Article] = {}
    res = _normalize_payload(payload, settings, (prev.items if prev is not None else {}, seen, memory))
    memory.feeds[payload.feed_id] = FeedMemory(payload.fetched_at_ms, pfp, res, seen)
    return res


_ItemMemory = tuple[dict[bytes, Article], dict[bytes, Article], RepollMemory]


def _normalize_payload(payload: RawPayload, settings: NormalizeConfig, items: _ItemMemory | None) -> NormalizeResult:
    res = NormalizeResult()
    body = payload.body
    fid, fms = payload.feed_id, payload.fetched_at_ms
    if payload.status >= 400:
        # an error page (404/410/500 ...) is not the feed, whatever its body looks like: no
        # articles; the feed-health status says so, and a body is kept as one dead letter
        res.status = HealthStatus.HTTP_ERROR
        if body:
            res.deadletters.append(make_deadletter(
                "fetch", "http_error", f"HTTP {payload.status}: the body of an error response is not parsed",
                body, feed_id=fid, fetched_ms=fms))
        return res
    if payload.status == 304 or body is None:
        res.status = HealthStatus.NOT_MODIFIED if payload.status == 304 else HealthStatus.EMPTY
        return res
    if not body.strip():
        res.status = HealthStatus.EMPTY
        res.deadletters.append(make_deadletter("parse", "empty_body", "HTTP 200 with an empty body", body,
                                               feed_id=fid, fetched_ms=fms))
        return res
    if len(body) > settings.max_payload_bytes:
        res.status = HealthStatus.PARSE_ERROR
        res.deadletters.append(make_deadletter(
            "parse", "payload_too_large", f"body of {len(body)} bytes is larger than {settings.max_payload_bytes}",
            body, feed_id=fid, fetched_ms=fms, max_original=settings.max_deadletter_original_bytes))
        return res
    base = payload.final_url or payload.url or None
    fast = fast_parse(body) if settings.fast_parse else None
    if fast is not None:
        fmt, feed, entries = fast
    else:
        try:
            d = parse_feed(body, base, payload.content_type)
            fmt = d.get("version") or ""
            if d.get("bozo") and (not d.entries or needs_byte_repair(body)):
                # feedparser's loose parser recovers items from broken XML but reads a bare
                # "&T" as an entity ("AT&T;"): repair and re-parse whenever the repair applies,
                # keep the repaired parse when it finds at least as many items
                fixed = repair_xml_bytes(body)
                d2 = parse_feed(fixed, base, payload.content_type)
                if len(d2.entries) >= len(d.entries) and (
                        d2.entries or (d2.get("version") and not d2.get("bozo"))):
                    d, fmt, res.recovered = d2, d2.get("version") or "", True
        except Exception as e:  # feedparser is lenient, but a crash must never stop the flow
            res.status = HealthStatus.PARSE_ERROR
            res.deadletters.append(make_deadletter(
                "parse", "parser_crash", f"{type(e).__name__}: {e}", body, feed_id=fid, fetched_ms=fms))
            return res
        if d.get("bozo"):
            exc = d.get("bozo_exception")
            res.bozo = f"{type(exc).__name__}: {exc}"[:300] if exc else "bozo"
        feed, entries = d.feed, d.entries
        if fmt.startswith("rss") and any("content" in e for e in entries):
            caps = caption_contents(body)
            if caps is not None and len(caps) == len(entries):
                for entry, cap in zip(entries, caps, strict=True):
                    if cap and "content" in entry:
                        del entry["content"]  # a photo caption, never the body (caption_contents)
    if not fmt and not entries:
        if looks_like_html_page(body):
            res.status, reason, detail = HealthStatus.HTML_INSTEAD_OF_FEED, "html_instead_of_feed", "body is an HTML page, not a feed"
        else:
            res.status, reason, detail = HealthStatus.PARSE_ERROR, "not_a_feed", res.bozo or "no feed structure found"
        res.deadletters.append(make_deadletter("parse", reason, detail, body, feed_id=fid, fetched_ms=fms))
        return res
    res.feed_format = fmt or "unknown"
    publisher = publisher_of(payload, feed)
    if len(entries) > settings.max_items_per_payload:  # feeds list newest first: keep the head
        res.deadletters.append(make_deadletter(
            "parse", "too_many_items", f"{len(entries)} items; items {settings.max_items_per_payload}.."
            f"{len(entries) - 1} were not normalized (max_items_per_payload)", body, feed_id=fid,
            fetched_ms=fms, max_original=settings.max_deadletter_original_bytes))
    feed_ctx = repr((_context_fp(payload), res.feed_format, publisher, base, feed.get("language"), feed.get("author"),
                     feed.get("author_detail"))).encode("utf-8", "surrogatepass") if items is not None else b""
    efps: list[bytes | None] = []  # per article, its entry's fingerprint (with a memory)
    for i, entry in enumerate(entries[: settings.max_items_per_payload]):
        efp = None
        if items is not None:
            efp = _entry_fp(entry, feed_ctx)
            known = items[0].get(efp)
            if known is not None and _reusable(known, fms, settings):
                items[2].item_hits += 1
                again = _restamp(known, payload, i)
                items[1][efp] = again
                res.articles.append(again)
                efps.append(efp)
                continue
        try:
            out = normalize_entry(entry, feed, payload, res.feed_format, i, base, settings, publisher)
        except Exception as e:  # a bug or an exotic entry: dead-letter it, keep going
            out = make_deadletter("normalize", "normalize_error", f"{type(e).__name__}: {e}",
                                  _entry_bytes(entry), feed_id=fid, fetched_ms=fms, item_index=i)
        if efp is not None and isinstance(out, Article):
            items[1][efp] = out  # type: ignore[index]
        if isinstance(out, Article):
            res.articles.append(out)
            efps.append(efp)
            res.undated += out.date_uncertain
        else:
            res.deadletters.append(out)
            res.malformed += 1
    _mark_boilerplate(res.articles, efps, settings.boilerplate_min_items, items[1] if items is not None else None)
    res.items = len(entries)
    if not entries:
        # a well-formed feed without items: not an error, but every input must end somewhere
        # (articles or dead letters), so it is dead-lettered with its own reason and counted
        res.status = HealthStatus.EMPTY
        res.deadletters.append(make_deadletter("parse", "no_items", res.bozo or "feed has no items", body,
                                               feed_id=fid, fetched_ms=fms))
    elif res.articles and res.undated == len(res.articles):
        res.status = HealthStatus.ALL_UNDATED
    elif res.undated:
        res.status = HealthStatus.PARTIAL_UNDATED
    return res
