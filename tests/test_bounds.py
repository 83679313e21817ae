"""Bounded work per payload by construction: what is cut is flagged or
dead-lettered, never silently dropped."""

from __future__ import annotations

import orjson

from newsflow.dedup.story_features import featurize_batch
from newsflow.feeds.normalize import NormalizeConfig, make_deadletter, normalize_payload
from newsflow.model.records import DedupInfo, RawPayload, Sighting
from newsflow.wire.codec import article_record, deadletter_to_dict
from newsflow.wire.contracts import validate
from tests.badinput import rss

AT = 1_772_431_200_000


def payload(body: bytes) -> RawPayload:
    return RawPayload("f", "https://f.example/rss", AT, 200, body, publisher="P")


def test_a_payload_over_the_cap_is_one_bounded_dead_letter() -> None:
    s = NormalizeConfig(max_payload_bytes=10_000, max_deadletter_original_bytes=1_000)
    res = normalize_payload(payload(rss([("t", "w " * 20_000)])), s)
    assert not res.articles and [d.reason for d in res.deadletters] == ["payload_too_large"]
    dl = deadletter_to_dict(res.deadletters[0])
    assert dl["original_size"] > 40_000 and len(res.deadletters[0].original) == 1_000
    validate("deadletter", dl)


def test_items_over_the_cap_are_counted_in_a_dead_letter() -> None:
    s = NormalizeConfig(max_items_per_payload=10)
    res = normalize_payload(payload(rss([(f"Title {k}", f"body {k}") for k in range(25)])), s)
    assert len(res.articles) == 10 and [a.item_index for a in res.articles] == list(range(10))
    [dl] = res.deadletters
    assert dl.reason == "too_many_items" and "25 items" in dl.detail and "10..24" in dl.detail


def test_a_long_body_is_cut_and_flagged_and_the_record_validates() -> None:
    s = NormalizeConfig(max_item_body_chars=5_000)
    res = normalize_payload(payload(rss([("Long one", "word " * 100_000), ("Short one", "few words")])), s)
    long, short = res.articles
    assert long.truncated and len(long.body_text) <= 5_000 and not short.truncated
    seen = (Sighting(long.feed_id, long.publisher, long.url or "", long.fetched_at, long.article_id),)
    rec = article_record(long, DedupInfo("unique", None, None, seen_in=seen), "0:0", {
        "story_id": "s", "story_size": 1, "story_publishers": 1, "topic_id": "t"})
    assert rec["truncated"] is True
    validate("articles", orjson.dumps(rec))
    assert "truncated" not in article_record(short, DedupInfo("unique", None, None), "0:1")


def test_a_long_title_is_cut_and_flagged() -> None:
    res = normalize_payload(payload(rss([("T" * 50_000, "b")])))
    [a] = res.articles
    assert a.truncated and len(a.title) == 2_000


def test_deadletter_originals_are_capped() -> None:
    dl = make_deadletter("parse", "not_a_feed", "x", b"z" * 1_000_000, feed_id="f", fetched_ms=AT)
    assert len(dl.original) == 256 * 1024 and dl.original_size == 1_000_000
    small = make_deadletter("parse", "not_a_feed", "x", b"z" * 10, feed_id="f", fetched_ms=AT)
    assert small.original_size is None and "original_size" not in deadletter_to_dict(small)


def test_fingerprints_use_only_the_lead_of_a_huge_body() -> None:
    lead = " ".join(f"w{k}" for k in range(2_000))
    short, huge = normalize_payload(payload(rss([("Same title", lead), ("Same title", lead + "".join(f" t{k}" for k in range(20_000)))]))).articles
    fs, fh = featurize_batch([short, huge])
    assert fs.body_keys == fh.body_keys and fs.body_sig == fh.body_sig
