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


#: what ``allow_private`` opens: RFC 1918, CGNAT (100.64/10), IPv6 ULA (fc00::/7) -- an
#: operator's own networks. Every other non-global range stays refused (see below).
PRIVATE_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                                      "fc00::/7"))

#: cloud instance-metadata endpoints that are not link-local: refused even with ``allow_private``
#: (AWS IPv6 IMDS, Alibaba Cloud, Oracle Cloud); 169.254.169.254 and fe80::a9fe:a9fe are link-local
METADATA_ADDRESSES: frozenset[ipaddress.IPv4Address | ipaddress.IPv6Address] = frozenset(
    ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200", "192.0.0.192"))

#: IANA special-purpose ranges that are not globally reachable, listed here because Python's
#: ``is_global`` differs between patch releases (e.g. 192.0.0.0/24 before 3.11.10)
SPECIAL_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(n) for n in (
        "0.0.0.0/8", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24",
        "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
        "100::/64", "2001::/23", "2001:db8::/32", "fec0::/10"))

#: IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64, RFC 6052 / 8215)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """The IPv4 address an IPv6 transition address points at (6to4, NAT64)."""
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if any(ip in n for n in _NAT64):
        return "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_block_reason(
    address: str,
    *,
    allow_private: bool = False,
    allowed_networks: Iterable[str] = (),
) -> str | None:
    """Why connecting to this IP is refused, or ``None`` if it is allowed.

    Only globally routable addresses are allowed, unless listed in ``allowed_networks``.
    ``allow_private`` also allows loopback and :data:`PRIVATE_NETWORKS`, never cloud metadata
    (:data:`METADATA_ADDRESSES`, link-local 169.254/16), multicast, unspecified, reserved or
    special-purpose ranges (192.0.0/24, benchmarking, documentation, ...), Teredo, and never an
    IPv6 6to4/NAT64 address wrapping a non-public IPv4 (judged as that IPv4 otherwise).
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
    if ip in METADATA_ADDRESSES:
        return "cloud metadata address"
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_multicast:
        return "multicast address"
    if ip.is_loopback:
        return None if allow_private else "loopback address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.teredo is not None:  # a tunnel to an obfuscated client address: never a feed host
            return "Teredo address"
        wrapped = _embedded_ipv4(ip)
        if wrapped is not None:
            kind, v4 = wrapped
            inner = address_block_reason(str(v4))
            return f"{kind} address wrapping a {inner}" if inner is not None else None
    if any(ip in n for n in PRIVATE_NETWORKS):
        return None if allow_private else "private address"
    if not ip.is_global or any(ip in n for n in SPECIAL_NETWORKS):
        return "reserved address" if ip.is_reserved else "non-public address"
    return None


_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_message(message: str | None) -> str | None:
    """Messages may quote URLs (exception texts): strip credentials from every URL in them."""
    if message is None:
        return None
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), message)[:500]
