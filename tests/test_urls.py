from __future__ import annotations

import pytest

from newsflow.feeds.urls import canonicalize_url, registrable_domain


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("https://example.com/a?utm_source=rss&utm_medium=feed", "https://example.com/a"),
        ("https://example.com/a?fbclid=XYZ&gclid=1&ref=home", "https://example.com/a"),
        ("HTTPS://EXAMPLE.COM/Path", "https://example.com/Path"),  # host lowercased, path kept
        ("https://example.com/a#comments", "https://example.com/a"),
        ("https://example.com/a/", "https://example.com/a"),
        ("https://example.com/", "https://example.com/"),
        ("http://example.com/a", "https://example.com/a"),  # http and https compare equal
        ("https://www.example.com/a", "https://example.com/a"),  # www and non-www compare equal
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:8080/a", "https://example.com:8080/a"),
        ("https://user:pw@example.com/a", "https://example.com/a"),  # no credentials
        ("https://example.com/a?b=2&a=1", "https://example.com/a?a=1&b=2"),  # stable order
        ("https://example.com/a?id=5&utm_campaign=x", "https://example.com/a?id=5"),
        ("mailto:x@example.com", None),
        ("", None),
    ],
)
def test_canonicalize_url(raw: str, expected: str | None) -> None:
    assert canonicalize_url(raw) == expected


def test_relative_url_resolved_against_feed_url() -> None:
    assert canonicalize_url("/news/1?utm_source=x", "https://news.example.org/feed.xml") == "https://news.example.org/news/1"
    assert canonicalize_url("2", "https://news.example.org/a/") == "https://news.example.org/a/2"


def test_registrable_domain_groups_subdomains() -> None:
    assert registrable_domain("https://a.b.tumblr.com/x") == "tumblr.com"
    assert registrable_domain("news.bbc.co.uk") == "bbc.co.uk"
