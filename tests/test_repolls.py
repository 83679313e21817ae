"""Re-polls cost nearly nothing and change no output byte.

``RepollMemory`` keeps each feed's last payload: the same bytes again are not parsed, an item
seen in the feed's previous payload is not normalized again; both are re-stamped with the new
fetch time. Every result must equal normalizing from scratch.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from newsflow.config import Settings
from newsflow.connectors.files import iter_archive
from newsflow.feeds.normalize import RepollMemory, normalize_payload
from newsflow.model.records import RawPayload
from newsflow.wire.codec import decode_raw

SETTINGS = Settings()
S = SETTINGS.normalize.to_config()  # what the parse step passes
HOUR = 3_600_000
REAL = "data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz"


def feed(items: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>T</title>{items}'
            "</channel></rss>").encode()


def item(n: int, dated: bool = True) -> str:
    date = "<pubDate>Mon, 02 Mar 2026 06:00:00 GMT</pubDate>" if dated else ""
    return (f"<item><title>Story {n}</title><link>https://ex.org/{n}</link><guid>https://ex.org/{n}</guid>"
            f"<description>&lt;p&gt;Body {n}&lt;/p&gt;</description>{date}</item>")


def poll(body: bytes, at_ms: int, **kw: object) -> RawPayload:
    return RawPayload("f1", "https://ex.org/feed", at_ms, 200, body, publisher="Ex", **kw)  # type: ignore[arg-type]


def test_same_bytes_again_are_not_parsed_and_give_the_same_result() -> None:
    m = RepollMemory()
    t0 = 1_772_431_200_000
    body = feed(item(1) + item(2))
    first = normalize_payload(poll(body, t0), S, m)
    again = normalize_payload(poll(body, t0 + HOUR), S, m)
    assert m.payload_hits == 1
    assert again == normalize_payload(poll(body, t0 + HOUR), S)  # what a fresh parse gives
    assert [a.fetched_ms for a in again.articles] == [t0 + HOUR] * 2
    assert [a.article_id for a in again.articles] == [a.article_id for a in first.articles]


def test_unchanged_items_of_a_changed_payload_are_not_normalized_again() -> None:
    m = RepollMemory()
    t0 = 1_772_431_200_000
    normalize_payload(poll(feed(item(1) + item(2)), t0), S, m)
    p2 = poll(feed(item(3) + item(1) + item(2)), t0 + HOUR)  # a new item on top: positions move
    got = normalize_payload(p2, S, m)
    assert m.item_hits == 2 and m.payload_hits == 0
    assert got == normalize_payload(p2, S)
    assert [a.item_index for a in got.articles] == [0, 1, 2]


def test_undated_items_are_normalized_again_their_date_is_the_fetch_time() -> None:
    m = RepollMemory()
    t0 = 1_772_431_200_000
    body = feed(item(1, dated=False))
    normalize_payload(poll(body, t0), S, m)
    again = normalize_payload(poll(body, t0 + HOUR), S, m)
    assert m.payload_hits == 0 and m.item_hits == 0
    assert again.articles[0].published_ms == t0 + HOUR
    assert again == normalize_payload(poll(body, t0 + HOUR), S)


def test_a_changed_envelope_context_is_not_reused() -> None:
    m = RepollMemory()
    t0 = 1_772_431_200_000
    body = feed(item(1))
    normalize_payload(poll(body, t0), S, m)
    p2 = poll(body, t0 + HOUR, tier="T1")  # the registry changed the feed's tier
    got = normalize_payload(p2, S, m)
    assert m.payload_hits == 0 and m.item_hits == 0
    assert got.articles[0].tier == "T1" and got == normalize_payload(p2, S)


def test_memory_expires_on_event_time() -> None:
    m = RepollMemory()
    t0 = 1_772_431_200_000
    normalize_payload(poll(feed(item(1)), t0), S, m)
    m.expire(t0 + 71 * HOUR, SETTINGS.dedup.window_ms)
    assert "f1" in m.feeds
    m.expire(t0 + 73 * HOUR, SETTINGS.dedup.window_ms)
    assert not m.feeds


def test_real_archive_with_memory_equals_from_scratch(shared_dir: Path) -> None:
    """The first 120 polls of NPR / Ars Technica / WGRZ, each served twice (a minute later the
    same bytes): identical results to normalizing from scratch; items re-served by the next
    poll of a feed are reused, and the byte-identical second copies are not parsed at all."""
    payloads = [decode_raw(x) for _, x in zip(range(120), iter_archive(shared_dir / REAL), strict=False)]
    replay = [q for p in payloads for q in (p, replace(p, fetched_at_ms=p.fetched_at_ms + 60_000))]
    m = RepollMemory()
    for p in replay:
        assert normalize_payload(p, S, m) == normalize_payload(p, S)
    items = sum(len(normalize_payload(p, S).articles) for p in payloads)
    assert m.payload_hits == len(payloads)
    assert m.item_hits > items / 2  # most items of a new payload were in the feed's previous one


def test_entry_fingerprints_hold_what_json_cannot() -> None:
    """An entry's re-poll key: its fields as JSON, dates by their repr; an entry JSON can't
    hold (a lone surrogate, a huge integer) still gets a key, different from its neighbours'."""
    import time as _time

    from newsflow.feeds.normalize import _entry_fp

    ctx = b"ctx"
    dated = {"title": "a", "published_parsed": _time.gmtime(0)}
    assert _entry_fp(dated, ctx) == _entry_fp(dict(dated), ctx)
    assert _entry_fp(dated, ctx) != _entry_fp({**dated, "published_parsed": _time.gmtime(60)}, ctx)
    odd = [{"title": "\ud800"}, {"title": "\udc00"}, {"n": 1 << 70}, {"n": 1 << 71}]
    assert len({_entry_fp(e, ctx) for e in odd}) == 4
    assert _entry_fp({"title": "a"}, ctx) != _entry_fp({"title": "a"}, b"other feed")
