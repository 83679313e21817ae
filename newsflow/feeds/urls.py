"""URL rules: canonicalization (dedup layer 2 key) and registrable domains."""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

#: query parameters that only track the reader (docs/rules.md#url-canonicalization); ``utm_*``
#: and the other prefixes below by prefix
TRACKING_PARAMS = frozenset(
    {
        "fbclid", "gclid", "dclid", "gclsrc", "msclkid", "yclid", "mc_cid", "mc_eid",
        "ref", "ref_src", "ref_url", "referrer", "cmpid", "ncid", "ocid", "igshid",
        "_hsenc", "_hsmi", "mkt_tok", "spm", "share", "s_cid", "icid", "ito", "wt.mc_id",
        "feature", "rss", "rssfeed", "at_medium", "at_campaign", "source",
    }
)
TRACKING_PREFIXES = ("utm_", "pk_", "mtm_", "vero_", "hsa_", "oly_", "ns_")  # ns_: Comscore
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def is_tracking_param(name: str) -> bool:
    n = name.lower()
    return n in TRACKING_PARAMS or n.startswith(TRACKING_PREFIXES)


def absolutize(url: str, base: str | None) -> str:
    """Resolve a relative URL against the document's base URL."""
    url = url.strip()
    if base and not urlsplit(url).scheme:
        return urljoin(base, url)
    return url


def canonicalize_url(url: str, base: str | None = None) -> str | None:
    """The canonical form used as dedup key (layer 2; docs/rules.md#url-canonicalization).

    relative -> absolute; lowercase scheme and host; ``http`` and ``https`` compare equal
    (canonical scheme https); ``www.`` dropped; default port dropped; userinfo dropped;
    tracking parameters removed (utm_*, fbclid, gclid, ref, ...), remaining ones sorted;
    fragment dropped; trailing slash removed (except the root path). Returns ``None`` when the
    result is not an http(s) URL.

    >>> canonicalize_url("HTTP://www.Example.com:80/news/story/?utm_source=rss&id=7&fbclid=x#top")
    'https://example.com/news/story?id=7'
    >>> canonicalize_url("story/?b=2&a=1", base="https://example.com/news/")
    'https://example.com/news/story?a=1&b=2'
    >>> canonicalize_url("mailto:desk@example.com") is None
    True
    """
    if not url:
        return None
    url = absolutize(url, base)
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return None
    if host.startswith("www."):
        host = host[4:]
    netloc = host
    if port is not None and str(port) != _DEFAULT_PORTS.get(scheme):
        netloc = f"{host}:{port}"
    path = parts.path or "/"
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    query_items = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_tracking_param(k)
    ]
    query = urlencode(sorted(query_items), doseq=True)
    return urlunsplit(("https", netloc, path, query, ""))


def clean_link(url: str | None) -> str | None:
    """The link to show a reader: the URL as served (scheme, host with its ``www.``, path,
    meaningful parameters in their order) minus tracking parameters and the fragment. Unlike
    :func:`canonicalize_url` (a dedup key: ``www.`` dropped, https forced, parameters sorted) it
    always points where the publisher pointed. ``None`` unless http(s)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_tracking_param(k)]
    return urlunsplit((parts.scheme.lower(), parts.netloc, parts.path or "/", urlencode(kept, doseq=True), ""))


@functools.cache
def _extractor() -> Any:
    import tldextract

    # suffix_list_urls=() -> use the Public Suffix List snapshot bundled with the package;
    # never touch the network (and no cache writes in read-only installs)
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


#: sites that host many publishers: their domain says nothing about who published (a news
#: channel's videos are all youtube.com links), so the publisher's name must
SHARED_PLATFORMS = frozenset({
    "youtube.com", "youtu.be", "vimeo.com", "dailymotion.com", "twitter.com", "x.com", "facebook.com",
    "instagram.com", "tiktok.com", "threads.net", "linkedin.com", "reddit.com", "medium.com",
    "substack.com", "tumblr.com", "blogspot.com", "wordpress.com", "feedburner.com",
    "apple.news", "flipboard.com", "soundcloud.com", "spotify.com",
    "podbean.com", "libsyn.com", "anchor.fm",
})

#: scheme://netloc followed by / ? # or the end, the netloc plain ASCII without userinfo or
#: brackets: its host is ``urlsplit(url).hostname`` (before the first ":", lower-cased below);
#: anything else goes through urlsplit
_PLAIN_NETLOC = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([A-Za-z0-9._~%!$&'()*+,;=:-]*)(?:[/?#]|\Z)")


def registrable_domain(url_or_host: str) -> str:
    """eTLD+1 of a URL or a host: the one definition used by dedup sharding, the poller's
    per-domain politeness and the registry.

    >>> registrable_domain("https://a.b.tumblr.com/post/1")
    'tumblr.com'
    >>> registrable_domain("news.bbc.co.uk")
    'bbc.co.uk'

    IP literals stand for themselves; a host outside the Public Suffix List keeps its last two
    labels (``feeds.example`` -> ``feeds.example``, ``a.b.internal`` -> ``b.internal``).
    """
    host = url_hostname(url_or_host) if "/" in url_or_host else url_or_host
    host = host.lower().rstrip(".")
    return _host_domain(host) if host else ""


def url_hostname(url: str) -> str:
    """``urlsplit(url).hostname`` ("" when it has none or urlsplit refuses the URL), ~10x
    cheaper for a plain URL.

    >>> url_hostname("https://WWW.BBC.co.uk:443/news?x=1"), url_hostname("https://u@[::1]:80/"), url_hostname("x")
    ('www.bbc.co.uk', '::1', '')
    """
    m = _PLAIN_NETLOC.match(url)
    if m is not None:
        host, pct, zone = m.group(1).partition(":")[0].partition("%")
        return host.lower() + pct + zone  # (as urlsplit: an IPv6 zone id keeps its case)
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


@functools.lru_cache(maxsize=131072)
def _host_domain(host: str) -> str:
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host.strip("[]")
    except ValueError:
        pass
    ext = _extractor()(host)
    top = (
        ext.top_domain_under_public_suffix
        if hasattr(ext, "top_domain_under_public_suffix")
        else ext.registered_domain  # tldextract < 5.3
    )
    if top:
        return str(top).lower()
    labels = [x for x in host.split(".") if x]
    return ".".join(labels[-2:]) if labels else host
