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


def _domain_via_urlsplit(url: str) -> str:
    """The definition the fast path must equal: urlsplit's hostname, then the same eTLD+1."""
    from urllib.parse import urlsplit

    from newsflow.feeds.urls import _host_domain

    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return ""
    host = host.lower().rstrip(".")
    return _host_domain(host) if host else ""


def test_registrable_domain_fast_path_equals_urlsplit() -> None:
    """Plain URLs skip urlsplit (a regex takes the host); userinfo, ports, brackets, spaces,
    control and non-ASCII characters, odd schemes and random junk must give urlsplit's answer."""
    import random

    edge = ["http://a.b.com", "https://WWW.Ex.co.uk:8080/x?y#z", "http://u:p@h.com/", "http://h.com:80@evil.com/",
            "http://[::1]/x", " http://x.com/", "http://x.com\t/", "http://ex.com?q", "http://ex.com#f", "http://ex.com:",
            "http://:80/", "http:///x", "ftp://h.org/p", "http://bücher.ch/", "//h.com/x", "a/b", "http:/x.com/",
            "http://x.com./", "HTTP://X.COM/", "http://ex.com:abc/", "http://a%41.com/", "http://ex.com\\evil.com/",
            "http://ex.com;x/", "mailto:foo/bar", "http://h.com/\n", "http://h.com /", "1http://h.com/"]
    rnd = random.Random(7)
    alphabet = "ab.:@/[]?#%-xC1 \t\n\u00e9\\;"
    junk = [rnd.choice(["http://", "https://", "h://", "", "HTTP://", "//"])
            + "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12))) + rnd.choice(["", "/p", "?q"])
            for _ in range(20_000)]
    for url in edge + junk:
        if "/" in url:
            assert registrable_domain(url) == _domain_via_urlsplit(url), url


def test_url_hostname_is_urlsplit_hostname():
    """The cheap host of a plain URL is exactly ``urlsplit(url).hostname`` (or "" when it has none
    or urlsplit refuses the URL), on odd URLs and 20,000 random ones."""
    import random
    import string
    from urllib.parse import urlsplit

    from newsflow.feeds.urls import url_hostname

    rnd = random.Random(11)
    chars = string.ascii_letters + string.digits + ":/?#[]@!$&'()*+,;=%-._~ \t"
    cases = ["https://WWW.BBC.co.uk:443/news?x=1", "http://u@h/", "http://[::1]/a", "http://[fe80::1%ETH0]/",
             " http://h/", "http://H%ZZ.com/", "https://:80/", "https://ümlaut.de/", "mailto:x@y", "//h.com/p"]
    cases += [rnd.choice(["http://", "HTTPS://", "a+b.c://", ""]) + "".join(rnd.choice(chars) for _ in range(rnd.randint(0, 24)))
              for _ in range(20_000)]
    for url in cases:
        try:
            want = urlsplit(url).hostname or ""
        except ValueError:
            want = ""
        assert url_hostname(url) == want, url
