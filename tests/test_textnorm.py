"""Title normalization of dedup Layer 3 (newsflow.text.titles,
docs/rules.md#layer-3-title-similarity)."""

from __future__ import annotations

import pytest

from newsflow.text.titles import (
    char_shingles,
    content_tokens,
    normalize_title,
    strip_title_affixes,
    title_tokens,
    url_slug_tokens,
    word_shingles,
)
from newsflow.text.tokenize import light_stem


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Breaking: Quake hits Chile", "quake hits chile"),
        ("Update: Quake hits Chile", "quake hits chile"),
        ("UPDATE 1-Fed holds rates steady", "fed holds rates steady"),
        ("UPDATE 2-White House plays down role", "white house plays down role"),
        ("ICYMI: Apple unveils watch", "apple unveils watch"),
        ("JUST IN: Obama speaks", "obama speaks"),
        ("Fed holds rates - Reuters", "fed holds rates"),
        ("Quake hits Chile | BBC News", "quake hits chile"),
        ("Crude oil drops to $101 a barrel  ...", "crude oil drops to 101 a barrel"),
        ("Rand Paul's plan: \u201cdrill\u201d everywhere!", "rand paul plan drill everywhere"),
    ],
)
def test_normalize_title_rules(raw: str, expected: str) -> None:
    assert normalize_title(raw) == expected


def test_suffix_named_by_publisher_is_dropped_and_others_kept() -> None:
    assert normalize_title("Fed holds - The Malay Mail Online", "The Malay Mail Online") == "fed holds"
    # a dash inside the headline that is not a publisher name stays
    assert normalize_title("Apple - Samsung trial opens") == "apple samsung trial opens"
    assert strip_title_affixes("Markets - Asia") == "Markets - Asia"


def test_prefix_only_title_is_not_emptied() -> None:
    assert normalize_title("Breaking:") == "breaking"


def test_title_tokens_and_content_tokens() -> None:
    assert title_tokens("UPDATE 1-Banks raise rates") == ["banks", "raise", "rates"]
    assert content_tokens(["the", "banks", "raise", "rates", "a"]) == ["bank", "raise", "rate"]
    assert light_stem("stories") == "story"
    assert light_stem("glass") == "glass"
    # a headline abbreviation is the word it stands for ("paves way for govt formation")
    assert content_tokens(title_tokens("Israeli court paves way for govt formation")) == \
        content_tokens(title_tokens("Israeli court paves way for government formation"))


def test_url_slug_tokens() -> None:
    url = "http://abcnews.go.com/International/wireStory/asian-stocks-tumble-weak-china-japan-data-22842362"
    assert url_slug_tokens(url) == ["asian", "stocks", "tumble", "weak", "china", "japan", "data"]
    assert url_slug_tokens("http://online.wsj.com/article/12345.html") == []
    assert url_slug_tokens(None) == []
    assert url_slug_tokens("https://example.com") == []


def test_shingles() -> None:
    assert word_shingles(["a", "b", "c"], 2) == ["a b", "b c"]
    assert word_shingles(["a"], 3) == ["a"]
    assert word_shingles(["a", "b", "a"], 1) == ["a", "b"]
    assert char_shingles("abcdef", 5) == ["abcde", "bcdef"]


def test_features_batch_equals_one_by_one_with_multi_word_tokens() -> None:
    """Raw tokens of several words ("U.S.-based") are spliced in the same way in a batch as
    alone, and each document keeps its own hashes."""
    import numpy as np

    from newsflow.text.tokenize import TextFeatures, features_batch

    docs = [("U.S.-based firm buys rival", "The U.S.-based company, a self-driving start-up, said so."),
            ("Plain title", "x y z U.K.-listed shares fell"), ("", "start-up"), ("No body", "")] * 2
    for got, (t, b) in zip(features_batch(docs), docs, strict=True):
        assert np.array_equal(got.hashes, TextFeatures.of(t, b).hashes)
