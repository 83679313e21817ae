"""Default authority tiers of well-known sources (001 "Source Authority Tiers").

A feed's own tier (feed registry, envelope) always wins; for a feed without one, the article's
tier is looked up in a table: first by the host of its link (``www.bbc.co.uk`` -> ``bbc.co.uk``,
then shorter suffixes down to the registrable domain), then by the publisher's name for feeds
on shared platforms (a YouTube channel's links are youtube.com). Pure: the table is data
(``source_tiers.toml`` next to this module, or a file of the same format named in the
configuration), loaded once by the configuration.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from newsflow.feeds.urls import registrable_domain

TIERS = ("T1", "T2", "T3", "T4", "T5")
BUILTIN = Path(__file__).with_name("source_tiers.toml")
_NON_ALNUM = re.compile(r"[^0-9a-z]+")


def publisher_key(name: str) -> str:
    """Lowercased, punctuation and spacing collapsed: ``"ABS-CBN News"`` -> ``"abs cbn news"``."""
    return _NON_ALNUM.sub(" ", name.lower()).strip()


@dataclass(frozen=True, slots=True)
class SourceTiers:
    """Tier by link host (``domains``) and by publisher name (``publishers``, see :func:`publisher_key`)."""

    domains: Mapping[str, str]
    publishers: Mapping[str, str]
    _by_publisher: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def for_host(self, host: str) -> str | None:
        """Tier of the host or of its nearest listed parent domain, down to the registrable domain.

        >>> SourceTiers({"bbc.co.uk": "T2"}, {}).for_host("www.bbc.co.uk")
        'T2'
        >>> SourceTiers({"co.uk": "T1"}, {}).for_host("bbc.co.uk") is None  # never a public suffix
        True
        """
        host = host.lower().rstrip(".")
        if not host:
            return None
        floor = registrable_domain(host)
        while True:
            t = self.domains.get(host)
            if t is not None or host == floor or "." not in host:
                return t
            host = host.split(".", 1)[1]

    def for_publisher(self, name: str) -> str | None:
        """Tier of the publisher's name, or of the longest listed name it starts with (whole words).

        >>> SourceTiers({}, {"fox news": "T2"}).for_publisher("Fox News latest")
        'T2'
        >>> SourceTiers({}, {"ap": "T1"}).for_publisher("Apple Insider") is None
        True
        """
        hit = self._by_publisher.get(name, "")
        if hit != "":
            return hit
        key = publisher_key(name)
        words = key.split(" ")
        found = None
        for n in range(len(words), 0, -1):
            found = self.publishers.get(" ".join(words[:n]))
            if found is not None:
                break
        if len(self._by_publisher) < 65536:
            self._by_publisher[name] = found
        return found

    def lookup(self, publisher: str | None, url: str | None) -> str | None:
        """The article's default tier: by its link's host, else by its publisher's name."""
        if url:
            try:
                host = urlsplit(url).hostname or ""
            except ValueError:
                host = ""
            t = self.for_host(host) if host else None
            if t is not None:
                return t
        return self.for_publisher(publisher) if publisher else None


def load_source_tiers(path: str | Path = BUILTIN) -> SourceTiers:
    """Read a tier table (TOML: ``version = 1``, ``[domains]``, ``[publishers]``); raises ``ValueError``."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        msg = f"source tier table {path}: {e}"
        raise ValueError(msg) from e
    if data.get("version", 1) != 1:
        msg = f"source tier table {path}: unsupported version {data.get('version')!r}"
        raise ValueError(msg)
    out: dict[str, dict[str, str]] = {"domains": {}, "publishers": {}}
    for section, norm in (("domains", lambda k: k.lower().strip().rstrip(".")), ("publishers", publisher_key)):
        table = data.get(section, {})
        if not isinstance(table, dict):
            msg = f"source tier table {path}: [{section}] must be a table"
            raise ValueError(msg)
        for k, v in table.items():
            if v not in TIERS:
                msg = f"source tier table {path}: {section}.{k} = {v!r} is not one of {', '.join(TIERS)}"
                raise ValueError(msg)
            out[section][norm(k)] = v
    return SourceTiers(out["domains"], out["publishers"])


BUILTIN_TIERS = load_source_tiers()
