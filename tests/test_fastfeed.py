"""The ElementTree fast path gives exactly the articles feedparser's path gives."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from newsflow.config import Settings
from newsflow.feeds.fastfeed import fast_parse
from newsflow.feeds.normalize import normalize_payload
from newsflow.model.records import RawPayload
from newsflow.samples.demo import demo_payloads

SLOW = Settings(fast_parse=False)


def same(p: RawPayload) -> None:
    a, b = normalize_payload(p), normalize_payload(p, SLOW)
    assert a.articles == b.articles
    assert [(d.reason, d.item_index) for d in a.deadletters] == [(d.reason, d.item_index) for d in b.deadletters]


@pytest.mark.corpus
def test_fast_path_equals_feedparser_on_parser_corpora(shared_dir: Path) -> None:
    root = shared_dir / "data" / "parser-corpora"
    fast = 0
    for line in (root / "manifest.jsonl").read_bytes().splitlines():
        m = orjson.loads(line)
        body = (root / m["path"]).read_bytes()
        if fast_parse(body) is None:
            continue
        fast += 1
        same(RawPayload("f", "https://feeds.example.org/" + m["path"], 1_700_000_000_000, 200, body))
    assert fast >= 500  # the fast path is really exercised


def test_fast_path_equals_feedparser_on_demo_sample() -> None:
    used = 0
    for p in demo_payloads():
        if p.body and fast_parse(p.body) is not None:
            used += 1
        same(p)
    assert used >= 70


def test_unusual_documents_fall_back_to_feedparser() -> None:
    assert fast_parse(b'<?xml version="1.0" encoding="windows-1252"?><rss version="2.0"><channel/></rss>') is None
    assert fast_parse(b'<!DOCTYPE rss><rss version="0.91"><channel/></rss>') is None
    assert fast_parse(b'<rss version="2.0"><channel><item><itunes:author xmlns:itunes="x">a</itunes:author></item></channel></rss>') is None
    assert fast_parse(b"<rss version='2.0'><channel><item><title>a & b</title></item></channel></rss>") is None
    assert fast_parse(b"<rss version='2.0'><channel><item><title>ok</title></item></channel></rss>") is not None
