"""The capitalized-phrase scanner reads lower-case runs as one token (``_cap_tokens``) and memoizes
what it reads of a capitalized token: it must find exactly what a token-by-token scan finds."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import orjson
import pytest

from newsflow.connectors.files import iter_archive
from newsflow.feeds.normalize import normalize_payload
from newsflow.text import entities
from newsflow.text.entities import capitalized_phrases
from newsflow.wire.codec import decode_raw

TRICKY = [
    "", "...", "X", "A. B. C.", "a _b _C d", "x/u.s. Senate votes", "data, e.g. Apple. Aftershocks of it",
    "New York New Zealand's new NEW New. new", "U.S. Sen. John McCain's plan: 'New' — Obama's (D.C.)",
    "Mr. Smith Goes To Washington", "J.K. Rowling's New Book", "NEW YORK (Reuters) - Apple Inc's",
    "1,000 people in 2014. Police said", "rain,Snow and 3.5 Hail in Oslo", "iPhone maker Apple's eBay",
    "Émile Zola in Paris — and Ángela in São Paulo", "naïve café owner Jürgen Klopp’s team",
    "Police say Kim Yo Jong’s rise is fast", "“Quoted” Name. Another_Name and __init__ Foo",
    "the end! Start again? Yes: Bob | Alice; Carol [Dave] (Eve)", "Ⓐ marks and ½ cup of Sugar",
    "ends with a word.", "Ends With Initials a.m.", "x-ray of New-York at 5p.m. Today",
]


def _token_by_token(text: str, **kw: object) -> tuple[list[str], list[str]]:
    lone: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(entities, "_cap_tokens", entities._CAP_TOKEN.findall)
        return capitalized_phrases(text, skipped=lone, **kw), lone  # type: ignore[arg-type]


def _same(texts: list[str]) -> None:
    for t in texts:
        for skip in (True, False):
            lone: list[str] = []
            assert (capitalized_phrases(t, skip_initial=skip, skipped=lone), lone) == \
                _token_by_token(t, skip_initial=skip), t
            assert capitalized_phrases(t, skip_initial=skip) == _token_by_token(t, skip_initial=skip)[0]


def test_lower_case_runs_and_token_memo_find_what_a_token_scan_finds() -> None:
    _same(TRICKY)
    # the three token sources: ASCII, non-ASCII without non-ASCII capitals, and the general one
    assert entities._cap_tokens("the U.S. and Bob") == ["the", "U.S.", "and", "Bob"]
    assert entities._cap_tokens("café owner Bob, his son") == ["café owner", "Bob", ",", "his son"]
    assert entities._cap_tokens("Émile and Bob") == ["Émile", "and", "Bob"]


def test_real_headlines_and_bodies_scan_alike(shared_dir: Path) -> None:
    uci = shared_dir / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
    with gzip.open(uci) as f:
        titles = [orjson.loads(line).get("title") or "" for line in itertools.islice(f, 5000)]
    texts = list(titles)
    day = shared_dir / "data" / "real-feeds" / "headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz"
    for raw in itertools.islice(iter_archive(day), 120):
        for a in normalize_payload(decode_raw(raw)).articles:
            texts += [a.title or "", a.body_text[:2000]]
    assert len(texts) > 6000 and sum(not t.isascii() for t in texts) > 50
    entities._CAP_WORDS.clear()
    _same(texts)


def test_token_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    size = 3
    monkeypatch.setattr(entities, "_CAP_WORDS_MAX", size)
    entities._CAP_WORDS.clear()
    got = capitalized_phrases("Barack Obama meets Angela Merkel and Francois Hollande in Berlin")
    assert got == ["Barack Obama", "Angela Merkel", "Francois Hollande", "Berlin"]
    assert len(entities._CAP_WORDS) <= size
