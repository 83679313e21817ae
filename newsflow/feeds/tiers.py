"""Default authority tiers of well-known sources (docs/rules.md#authority).

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

from newsflow.feeds.urls import SHARED_PLATFORMS, registrable_domain, url_hostname

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
    #: publisher families: another domain or a name (:func:`publisher_key`) -> the family's main domain
    families: Mapping[str, str] = field(default_factory=dict)
    _by_publisher: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)
    _family_by_name: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)
    _by_host: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def for_host(self, host: str) -> str | None:
        """Tier of the host or of its nearest listed parent domain, down to the registrable domain.

        >>> SourceTiers({"bbc.co.uk": "T2"}, {}).for_host("www.bbc.co.uk")
        'T2'
        >>> SourceTiers({"co.uk": "T1"}, {}).for_host("bbc.co.uk") is None  # never a public suffix
        True
        """
        hit = self._by_host.get(host, "")
        if hit != "":
            return hit
        name = host.lower().rstrip(".")
        found = None
        if name:
            floor = registrable_domain(name)
            while True:
                found = self.domains.get(name)
                if found is not None or name == floor or "." not in name:
                    break
                name = name.split(".", 1)[1]
        if len(self._by_host) < 65536:  # memoized: every article of a feed asks for the same host
            self._by_host[host] = found
        return found

    def for_publisher(self, name: str) -> str | None:
        """Tier of the publisher's name, or of the longest listed name it starts with (whole words).

        >>> SourceTiers({}, {"fox news": "T2"}).for_publisher("Fox News latest")
        'T2'
        >>> SourceTiers({}, {"ap": "T1"}).for_publisher("Apple Insider") is None
        True
        """
        return _by_name(self.publishers, self._by_publisher, name)

    def family(self, publisher: str | None, url: str | None) -> str:
        """The article's publisher family: its link's registrable domain, or the family that
        domain belongs to ([families]); on a shared platform (YouTube, …) or without a link, the
        family of the publisher's name, else the name lower-cased. The YouTube channels of CNN
        and Al Jazeera are two publishers (not one ``youtube.com``); a CNN video and a CNN
        article are one.

        >>> t = SourceTiers({}, {}, {"cnn.it": "cnn.com", "cnn": "cnn.com"})
        >>> [t.family("CNN", "https://www.youtube.com/watch?v=1"), t.family("CNN International", "https://cnn.it/2W"),
        ...  t.family("NYT World", "https://www.nytimes.com/a"), t.family("Al  Jazeera", "https://youtu.be/x")]
        ['cnn.com', 'cnn.com', 'nytimes.com', 'al jazeera']
        """
        name = " ".join((publisher or "").lower().split())
        if url and "://" in url:
            try:
                dom = registrable_domain(url)
            except ValueError:
                dom = ""
            if dom and not (dom in SHARED_PLATFORMS and name):
                return self.families.get(dom, dom)
        if name and self.families:
            fam = _by_name(self.families, self._family_by_name, publisher or "")
            if fam is not None:
                return fam
        return name

    def lookup(self, publisher: str | None, url: str | None) -> str | None:
        """The article's default tier: by its link's host, else by its publisher's name."""
        if url:
            host = url_hostname(url)
            t = self.for_host(host) if host else None
            if t is not None:
                return t
        return self.for_publisher(publisher) if publisher else None


def _by_name(table: Mapping[str, str], memo: dict[str, str | None], name: str) -> str | None:
    """``table``'s value for the publisher ``name``, or for the longest listed name it starts
    with (whole words, :func:`publisher_key`), memoized."""
    hit = memo.get(name, "")
    if hit != "":
        return hit
    words = publisher_key(name).split(" ")
    found = None
    for n in range(len(words), 0, -1):
        found = table.get(" ".join(words[:n]))
        if found is not None:
            break
    if len(memo) < 65536:
        memo[name] = found
    return found


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
    families: dict[str, str] = {}
    fam = data.get("families", {})
    if not isinstance(fam, dict):
        msg = f"source tier table {path}: [families] must be a table"
        raise ValueError(msg)
    for main, others in fam.items():
        if not isinstance(others, list) or not all(isinstance(x, str) for x in others):
            msg = f"source tier table {path}: families.{main} must be a list of domains and names"
            raise ValueError(msg)
        main = main.lower().strip().rstrip(".")
        for x in others:  # a domain has a dot; a name is matched like [publishers]
            families[x.lower().strip().rstrip(".") if "." in x else publisher_key(x)] = main
    return SourceTiers(out["domains"], out["publishers"], families)


BUILTIN_TIERS = load_source_tiers()
#: no table: no tiers by domain or name; families are registrable domains (channel names on
#: shared platforms)
NO_TABLE = SourceTiers({}, {})
