"""The feed registry: which feeds to poll and what we know about their source.

Format: a TOML file with one ``[[feed]]`` table per feed and an optional ``[defaults]`` table
whose keys apply to every feed that does not set them::

    [defaults]
    language = "en"

    [[feed]]
    id = "bbc-world"                       # required: [a-z0-9][a-z0-9._-]*, unique
    url = "https://feeds.bbci.co.uk/news/world/rss.xml"   # required: http(s)
    name = "BBC News - World"              # display name
    publisher = "BBC"                      # family: feeds of one publisher count as one source
    tier = "T2"                            # authority tier T1..T5 (docs/rules.md#authority)
    category = "world"
    language = "en"                        # BCP 47 tag, "und" if unknown
    interval = "30m"                       # optional: "90s", "15m", "2h", "1d" or seconds (int);
                                           #   also the shortest interval adaptation may use
    feed_type = "major"                    # optional: breaking|major|blog|newsletter|dormant
                                           #   (docs/rules.md#poll-interval)

OPML (the format every feed reader speaks) is imported tolerantly (:func:`import_opml`: nested
category outlines, missing attributes, bare ``&``) and exported losslessly (:func:`export_opml`:
our fields ride along as extra outline attributes, which feed readers ignore).
:func:`check` validates a registry and returns problems instead of raising.
"""

from __future__ import annotations

import re
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from newsflow.core.hashing import stable_id
from newsflow.feeds.urls import registrable_domain
from newsflow.polling.safety import address_block_reason, scheme_allowed
from newsflow.polling.state import FEED_TYPE_INTERVALS_S

TIERS: tuple[str, ...] = ("T1", "T2", "T3", "T4", "T5")
#: a feed without a tier: none in its envelope, so the article takes the default tier of its
#: source from ``newsflow/feeds/source_tiers.toml`` (or none: scored as T4, docs/rules.md#authority)
DEFAULT_TIER: str | None = None
DEFAULT_CATEGORY = "general"
DEFAULT_LANGUAGE = "und"
#: reserved by the heartbeat envelope on feeds.raw
RESERVED_IDS = frozenset({"__tick__"})
FEED_KEYS = frozenset({"id", "url", "name", "publisher", "tier", "category", "language", "interval",
                       "feed_type"})
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
LANG_RE = re.compile(r"^(?:[a-zA-Z]{2,3}(?:-[A-Za-z0-9]{2,8})*|und)$")
_DURATION_RE = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s)?\s*$",
                          re.IGNORECASE)


class RegistryError(ValueError):
    """The registry file cannot be read at all (I/O, TOML syntax, wrong structure)."""


@dataclass(frozen=True, slots=True)
class FeedSpec:
    """One feed of the registry."""

    id: str
    url: str
    name: str
    publisher: str
    tier: str | None = DEFAULT_TIER
    category: str = DEFAULT_CATEGORY
    language: str = DEFAULT_LANGUAGE
    interval_s: float | None = None
    feed_type: str | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    level: Literal["error", "warning"]
    feed_id: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.feed_id or '-'}{'.' + self.field if self.field else ''}"
        return f"{self.level}: {where}: {self.message}"


@dataclass(frozen=True, slots=True)
class Registry:
    feeds: tuple[FeedSpec, ...]
    #: problems found while reading (unknown keys, bad values replaced by defaults)
    load_problems: tuple[Problem, ...] = field(default_factory=tuple)

    def by_id(self) -> dict[str, FeedSpec]:
        return {f.id: f for f in self.feeds}


# --------------------------------------------------------------------------------------------
# Durations
# --------------------------------------------------------------------------------------------


def parse_duration_s(value: Any) -> float | None:
    """``"15m"``, ``"2h"``, ``"1d"``, ``"1h30m"``, ``"90s"`` or an int/float of seconds."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value > 0 else None
    s = str(value).strip()
    if s.isdigit():
        return float(int(s)) if int(s) > 0 else None
    m = _DURATION_RE.match(s)
    if not m or not any(m.groups()):
        return None
    d, h, mi, se = (int(g) if g else 0 for g in m.groups())
    total = d * 86_400 + h * 3_600 + mi * 60 + se
    return float(total) if total > 0 else None


def format_duration(seconds: float) -> str:
    s = round(seconds)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if s % size == 0:
            return f"{s // size}{unit}"
    return f"{s}s"


# --------------------------------------------------------------------------------------------
# Reading / writing TOML
# --------------------------------------------------------------------------------------------


def slugify(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:48].strip("-")


def default_publisher(url: str) -> str:
    """The registrable domain groups feeds of one publisher (``feeds.bbci.co.uk`` -> ``bbci.co.uk``)."""
    return registrable_domain(url) or "unknown"


def _feed_from_mapping(raw: Mapping[str, Any], defaults: Mapping[str, Any], index: int
                       ) -> tuple[FeedSpec | None, list[Problem]]:
    problems: list[Problem] = []
    d = {**defaults, **raw}
    fid = str(d.get("id") or "").strip()
    url = str(d.get("url") or "").strip()
    label = fid or f"#{index + 1}"
    for k in raw:
        if k not in FEED_KEYS:
            problems.append(Problem("warning", label, k, "unknown key (ignored)"))
    if not url:
        problems.append(Problem("error", label, "url", "missing url"))
        return None, problems
    if not fid:
        problems.append(Problem("error", label, "id", "missing id"))
        return None, problems
    interval_raw = d.get("interval")
    interval = parse_duration_s(interval_raw)
    if interval_raw is not None and interval is None:
        problems.append(Problem("error", fid, "interval", f"not a duration: {interval_raw!r}"))
    spec = FeedSpec(
        id=fid,
        url=url,
        name=str(d.get("name") or "").strip() or (urlsplit(url).hostname or url),
        publisher=str(d.get("publisher") or "").strip() or default_publisher(url),
        tier=str(d["tier"]).strip().upper() if d.get("tier") else DEFAULT_TIER,
        category=str(d.get("category") or DEFAULT_CATEGORY).strip(),
        language=str(d.get("language") or DEFAULT_LANGUAGE).strip(),
        interval_s=interval,
        feed_type=(str(d["feed_type"]).strip().lower() if d.get("feed_type") else None),
    )
    return spec, problems


def parse_registry(data: Mapping[str, Any]) -> Registry:
    """Registry from parsed TOML data (``{"defaults": {...}, "feed": [{...}, ...]}``)."""
    feeds_raw = data.get("feed", data.get("feeds", []))
    if not isinstance(feeds_raw, list):
        msg = "registry: 'feed' must be an array of tables ([[feed]])"
        raise RegistryError(msg)
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        msg = "registry: 'defaults' must be a table"
        raise RegistryError(msg)
    problems: list[Problem] = [Problem("warning", None, k, "unknown top-level key (ignored)")
                               for k in data if k not in ("feed", "feeds", "defaults")]
    feeds: list[FeedSpec] = []
    for i, raw in enumerate(feeds_raw):
        if not isinstance(raw, dict):
            problems.append(Problem("error", f"#{i + 1}", None, "feed entry is not a table"))
            continue
        spec, probs = _feed_from_mapping(raw, defaults, i)
        problems.extend(probs)
        if spec is not None:
            feeds.append(spec)
    return Registry(tuple(feeds), tuple(problems))


def load_registry(path: str | Path) -> Registry:
    """Read a registry TOML file; raises :class:`RegistryError` if it cannot be read at all."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        msg = f"registry {path}: {e}"
        raise RegistryError(msg) from e
    except tomllib.TOMLDecodeError as e:
        msg = f"registry {path}: TOML syntax error: {e}"
        raise RegistryError(msg) from e
    return parse_registry(data)


def _toml_str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dump_registry(feeds: Iterable[FeedSpec], header: str | None = None) -> str:
    """Registry TOML text (round-trips through :func:`parse_registry`)."""
    lines: list[str] = []
    if header:
        lines.extend(f"# {h}" for h in header.splitlines())
        lines.append("")
    for f in feeds:
        lines.append("[[feed]]")
        for key in ("id", "url", "name", "publisher", "tier", "category", "language"):
            if getattr(f, key) is not None:
                lines.append(f"{key} = {_toml_str(getattr(f, key))}")
        if f.interval_s is not None:
            lines.append(f"interval = {_toml_str(format_duration(f.interval_s))}")
        if f.feed_type is not None:
            lines.append(f"feed_type = {_toml_str(f.feed_type)}")
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# OPML
# --------------------------------------------------------------------------------------------

_BARE_AMP = re.compile(r"&(?!(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);)")


def _attr(el: ET.Element, *names: str) -> str | None:
    """Attribute by any of ``names``, case-insensitively (``xmlUrl``, ``xmlurl``, ``XMLURL``)."""
    lower = {k.lower(): v for k, v in el.attrib.items()}
    for n in names:
        v = lower.get(n.lower())
        if v is not None and v.strip():
            return v.strip()
    return None


def _parse_opml_root(text: str | bytes) -> ET.Element:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    try:
        return ET.fromstring(raw)
    except ET.ParseError:
        pass
    # tolerant second try: bare '&' and HTML entities are the usual OPML export bugs
    import html as _html

    s = raw.decode("utf-8", "replace")
    s = re.sub(r"^\s*<\?xml[^>]*\?>", "", s)
    s = re.sub(r"&([A-Za-z][A-Za-z0-9]*);",
               lambda m: m.group(0) if m.group(1) in ("amp", "lt", "gt", "quot", "apos")
               else _html.unescape(m.group(0)).replace("&", "&amp;"), s)
    s = _BARE_AMP.sub("&amp;", s)
    try:
        return ET.fromstring(s.encode("utf-8"))
    except ET.ParseError as e:
        msg = f"OPML is not XML even after repair: {e}"
        raise RegistryError(msg) from e


def import_opml(
    text: str | bytes,
    *,
    default_tier: str | None = DEFAULT_TIER,
    default_language: str | None = None,
    existing_ids: Iterable[str] = (),
    rejected: list[tuple[str, str]] | None = None,
) -> list[FeedSpec]:
    """Feeds of an OPML subscription list.

    Only http(s) feeds are imported: ``feed://host/x`` and ``feed:https://host/x`` (the
    pseudo-scheme some readers export) become ``http://host/x`` / ``https://host/x``; any other
    scheme (``javascript:``, ``data:``, ``file:`` ...) is refused and, with ``rejected``, listed
    there as ``(url, reason)``. Nested folders keep their path as the category
    (``News/World``) unless the outline has its own ``category``.

    Every ``outline`` with an ``xmlUrl`` is a feed (any nesting); the category is the outline's
    own ``category`` attribute (first entry, leading ``/`` dropped) or the text of the nearest
    enclosing outline without ``xmlUrl``. ``id``/``feedId``, ``publisher``, ``tier``,
    ``language``, ``interval``, ``feedType`` attributes written by :func:`export_opml` are read
    back; otherwise the id is a slug of the title (made unique), the publisher the registrable
    domain, the language the OPML's ``language`` attribute or ``default_language``.
    """
    root = _parse_opml_root(text)
    body = root.find("body")
    if body is None:
        body = root
    taken = set(existing_ids)
    seen_urls: set[str] = set()
    out: list[FeedSpec] = []

    def unique_id(base: str) -> str:
        cand = base if ID_RE.match(base) else ""
        if not cand:
            return ""
        n = 2
        final = cand
        while final in taken:
            final = f"{cand}-{n}"
            n += 1
        return final

    def walk(el: ET.Element, category: str | None) -> None:
        for child in el:
            if child.tag.split("}")[-1].lower() != "outline":
                continue
            url = _attr(child, "xmlUrl")
            if url is None and (_attr(child, "type") or "").lower() in ("rss", "atom", "feed"):
                url = _attr(child, "url")
            title = _attr(child, "title", "text")
            if not url:  # a folder: its path is the category of the feeds inside
                walk(child, f"{category}/{title}" if category and title else (title or category))
                continue
            url = _opml_feed_url(url)
            scheme = urlsplit(url).scheme.lower() if "://" in url or ":" in url else ""
            if scheme not in ("http", "https"):
                if rejected is not None:
                    rejected.append((url, f"scheme {scheme or 'missing'!r} is not http(s)"))
                continue
            if url in seen_urls:
                continue
            seen_urls.add(url)
            cat_attr = _attr(child, "category")
            cat = (cat_attr.split(",")[0].strip().lstrip("/").split("/")[-1] if cat_attr else None)
            fid = unique_id(_attr(child, "feedId", "id") or "") or unique_id(slugify(title or ""))
            if not fid:
                fid = unique_id(f"feed-{stable_id(url, size=4)}")
            taken.add(fid)
            tier = (_attr(child, "tier") or default_tier or "").upper() or None
            interval = parse_duration_s(_attr(child, "interval"))
            ftype = _attr(child, "feedType", "feed_type")
            out.append(FeedSpec(
                id=fid,
                url=url,
                name=title or (urlsplit(url).hostname or url),
                publisher=_attr(child, "publisher") or default_publisher(_attr(child, "htmlUrl") or url),
                tier=tier if tier in TIERS else default_tier,
                category=cat or category or DEFAULT_CATEGORY,
                language=_attr(child, "language", "lang") or default_language or DEFAULT_LANGUAGE,
                interval_s=interval,
                feed_type=ftype.lower() if ftype else None,
            ))
            walk(child, category)  # nested outlines under a feed outline (rare, tolerated)

    walk(body, None)
    return out


def _opml_feed_url(url: str) -> str:
    """``feed://h/x`` -> ``http://h/x``; ``feed:https://h/x`` -> ``https://h/x``.

    >>> _opml_feed_url("feed://example.com/rss"), _opml_feed_url("feed:https://example.com/rss")
    ('http://example.com/rss', 'https://example.com/rss')
    """
    u = url.strip()
    low = u.lower()
    if low.startswith("feed://"):
        return "http://" + u[7:]
    if low.startswith("feed:http://") or low.startswith("feed:https://"):
        return u[5:]
    return u


def export_opml(feeds: Iterable[FeedSpec], title: str = "newsflow feeds") -> str:
    """OPML 2.0 with one folder outline per category; our fields as extra attributes."""
    root = ET.Element("opml", version="2.0")
    head = ET.SubElement(root, "head")
    ET.SubElement(head, "title").text = title
    body = ET.SubElement(root, "body")
    groups: dict[str, list[FeedSpec]] = {}
    for f in feeds:
        groups.setdefault(f.category, []).append(f)
    for cat, items in groups.items():
        folder = ET.SubElement(body, "outline", text=cat, title=cat)
        for f in items:
            attrs = {
                "type": "rss",
                "text": f.name,
                "title": f.name,
                "xmlUrl": f.url,
                "feedId": f.id,
                "publisher": f.publisher,
                **({"tier": f.tier} if f.tier else {}),
                "category": f.category,
                "language": f.language,
            }
            if f.interval_s is not None:
                attrs["interval"] = format_duration(f.interval_s)
            if f.feed_type is not None:
                attrs["feedType"] = f.feed_type
            ET.SubElement(folder, "outline", attrs)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def merge_feeds(existing: Sequence[FeedSpec], new: Iterable[FeedSpec]) -> tuple[list[FeedSpec], int]:
    """Append ``new`` feeds whose URL and id are not in ``existing``; returns (all, added)."""
    urls = {f.url for f in existing}
    ids = {f.id for f in existing}
    out = list(existing)
    added = 0
    for f in new:
        if f.url in urls or f.id in ids:
            continue
        out.append(f)
        urls.add(f.url)
        ids.add(f.id)
        added += 1
    return out, added


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def check(
    registry: Registry,
    *,
    min_interval_s: float = 300.0,
    allow_private: bool = False,
    allowed_networks: Iterable[str] = (),
) -> list[Problem]:
    """Validate a registry: every problem found, errors first. An empty list means valid.

    Errors: missing/duplicate/reserved/malformed id, missing or non-http(s) URL, unknown tier,
    bad interval, unknown feed_type. Warnings: duplicate URL, credentials in the URL, private or
    loopback IP literal, interval below the politeness floor, malformed language tag, missing
    name/publisher/category, unknown keys.
    """
    problems: list[Problem] = list(registry.load_problems)
    ids: dict[str, int] = {}
    urls: dict[str, str] = {}
    if not registry.feeds and not any(p.level == "error" for p in problems):
        problems.append(Problem("warning", None, None, "registry has no feeds"))
    for f in registry.feeds:
        ids[f.id] = ids.get(f.id, 0) + 1
        if f.id in RESERVED_IDS:
            problems.append(Problem("error", f.id, "id", "reserved id"))
        elif not ID_RE.match(f.id):
            problems.append(Problem("error", f.id, "id", "id must match [a-z0-9][a-z0-9._-]{0,63}"))
        if not scheme_allowed(f.url):
            problems.append(Problem("error", f.id, "url", "url must be http(s) with a host"))
        else:
            parts = urlsplit(f.url)
            if parts.username or parts.password:
                problems.append(Problem("warning", f.id, "url",
                                        "credentials in the URL (they are never logged or emitted)"))
            reason = address_block_reason(parts.hostname or "", allow_private=allow_private,
                                          allowed_networks=tuple(allowed_networks))
            if reason not in (None, "not an IP address"):
                problems.append(Problem("warning", f.id, "url",
                                        f"{reason}: refused unless --allow-private"))
            if f.url in urls:
                problems.append(Problem("warning", f.id, "url", f"same URL as feed {urls[f.url]!r}"))
            urls.setdefault(f.url, f.id)
        if f.tier is not None and f.tier not in TIERS:
            problems.append(Problem("error", f.id, "tier", f"tier must be one of {', '.join(TIERS)}"))
        if f.interval_s is not None:
            if f.interval_s > 7 * 86_400:
                problems.append(Problem("warning", f.id, "interval", "interval above 7 days"))
            if f.interval_s < min_interval_s:
                problems.append(Problem("warning", f.id, "interval",
                                        f"below the politeness floor ({format_duration(min_interval_s)}); "
                                        "the floor applies"))
        if f.feed_type is not None and f.feed_type not in FEED_TYPE_INTERVALS_S:
            problems.append(Problem("error", f.id, "feed_type",
                                    f"feed_type must be one of {', '.join(FEED_TYPE_INTERVALS_S)}"))
        if not LANG_RE.match(f.language):
            problems.append(Problem("warning", f.id, "language", f"not a BCP 47 tag: {f.language!r}"))
        for k in ("name", "publisher", "category"):
            if not getattr(f, k).strip():
                problems.append(Problem("warning", f.id, k, f"empty {k}"))
    for fid, n in ids.items():
        if n > 1:
            problems.append(Problem("error", fid, "id", f"duplicate id ({n} feeds)"))
    problems.sort(key=lambda p: (p.level != "error", p.feed_id or "", p.field or ""))
    return problems


def valid_feeds(registry: Registry, **check_options: Any) -> tuple[list[FeedSpec], list[Problem]]:
    """Feeds the poller may poll (no error of their own), and all problems."""
    problems = check(registry, **check_options)
    bad = {p.feed_id for p in problems if p.level == "error"}
    seen: set[str] = set()
    ok: list[FeedSpec] = []
    for f in registry.feeds:
        if f.id in bad or f.id in seen:
            continue
        seen.add(f.id)
        ok.append(f)
    return ok, problems
