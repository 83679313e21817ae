"""Fetch safety: allowed schemes, blocked addresses (SSRF), credentials kept out of URLs and logs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# --------------------------------------------------------------------------------------------
# Safety helpers (pure; the fetcher enforces them)
# --------------------------------------------------------------------------------------------

ALLOWED_SCHEMES: frozenset[str] = frozenset({"http", "https"})

#: query parameters whose values are secrets: redacted in everything logged or emitted
SECRET_QUERY_PARAMS: frozenset[str] = frozenset(
    {"token", "access_token", "auth", "api_key", "apikey", "key", "password", "passwd", "pass",
     "secret", "sig", "signature", "client_secret", "private_token"}
)


def scheme_allowed(url: str) -> bool:
    """Only ``http`` and ``https`` URLs are fetched (no file:, ftp:, gopher:, data: ...)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ALLOWED_SCHEMES and bool(parts.hostname)


def strip_userinfo(url: str) -> str:
    """URL without ``user:password@`` (what the poller stores; credentials stay in the registry)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query,
                       parts.fragment))


def redact_url(url: str) -> str:
    """URL without credentials: userinfo dropped, secret query values replaced by ``REDACTED``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_QUERY_PARAMS for k, _ in pairs):
            query = urlencode([(k, "REDACTED" if k.lower() in SECRET_QUERY_PARAMS else v)
                               for k, v in pairs])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


#: CGNAT (100.64/10) is not flagged ``is_private`` by every Python version
_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def address_block_reason(
    address: str,
    *,
    allow_private: bool = False,
    allowed_networks: Iterable[str] = (),
) -> str | None:
    """Why connecting to this IP is refused, or ``None`` if it is allowed.

    Refused unless listed in ``allowed_networks``: loopback, private (RFC 1918, ULA, CGNAT),
    link-local (incl. 169.254.169.254 cloud metadata), multicast, reserved, unspecified.
    ``allow_private`` allows private and loopback, never link-local/multicast/unspecified.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for net in allowed_networks:
        try:
            if ip in ipaddress.ip_network(net, strict=False):
                return None
        except ValueError:
            continue
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_multicast:
        return "multicast address"
    if ip.is_loopback:
        return None if allow_private else "loopback address"
    if ip.is_private or (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT):
        return None if allow_private else "private address"
    if ip.is_reserved:
        return "reserved address"
    return None


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_message(message: str | None) -> str | None:
    """Messages may quote URLs (exception texts): strip credentials from every URL in them."""
    if message is None:
        return None
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), message)[:500]
