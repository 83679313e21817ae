"""Fast path for well-formed RSS 2.0 / RSS 1.0 / Atom 1.0 documents.

feedparser is the parser of record, but it costs ~2-5 ms per small document (SAX callbacks in
Python, URL joins per element): measured ~780 articles/s on UCI replays, below the 2,000/s
target. Most real payloads are well-formed XML in one of three formats, so this module parses
them with the C ElementTree parser and returns entries in the *same shape* feedparser gives
(the keys ``normalize_entry`` reads), using feedparser's own date parser. Anything unusual --
not well-formed, a DOCTYPE, another format/version, XHTML content, an unknown encoding --
returns ``None`` and the caller falls back to feedparser. ``tests/test_fastfeed.py`` checks,
on the parser corpora, that both paths give identical articles.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from functools import lru_cache
from typing import Any
from urllib.parse import urlparse, urlunparse

from newsflow.feeds.xml import declared_encoding, split_bom

try:  # feedparser's own date parser: identical dates on both paths
    from feedparser.datetimes import _parse_date as parse_date
except ImportError:  # pragma: no cover - a future feedparser moved it: always fall back
    parse_date = None

ATOM = "{http://www.w3.org/2005/Atom}"
RSS1 = "{http://purl.org/rss/1.0/}"
RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
DC = "{http://purl.org/dc/elements/1.1/}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
CONTENT = "{http://purl.org/rss/1.0/modules/content/}"
MEDIA = "{http://search.yahoo.com/mrss/}"
SY = "{http://purl.org/rss/1.0/modules/syndication/}"
#: declared encodings the fast path reads (expat's own); any other goes to feedparser
_FAST_ENCODINGS = frozenset({"utf-8", "utf8", "us-ascii"})

# Only documents made of these elements take the fast path: for them the extraction below is
# exactly what feedparser does for the fields ``normalize_entry`` reads. Any other element
# (itunes:*, media:group, xhtml:body, another DC namespace, ...) -> feedparser.
RSS20_CHANNEL = frozenset({
    "title", "link", "description", "language", "copyright", "managingEditor", "webMaster", "pubDate",
    "lastBuildDate", "category", "generator", "docs", "ttl", "image", "item", "cloud", "skipHours",
    "skipDays", f"{ATOM}link", f"{SY}updatePeriod", f"{SY}updateFrequency", f"{SY}updateBase",
})
RSS20_ITEM = frozenset({
    "title", "link", "guid", "description", "pubDate", "category", "author", "enclosure", "comments",
    f"{CONTENT}encoded", f"{DC}creator", f"{DC}date", f"{DC}subject", f"{MEDIA}content", f"{MEDIA}thumbnail",
})
RSS10_ROOT = frozenset({f"{RSS1}channel", f"{RSS1}item", f"{RSS1}image", f"{RSS1}textinput"})
RSS10_CHANNEL = frozenset({
    f"{RSS1}title", f"{RSS1}link", f"{RSS1}description", f"{RSS1}items", f"{RSS1}image",
    f"{RSS1}textinput", f"{DC}language", f"{DC}date", f"{DC}publisher", f"{DC}rights",
    f"{SY}updatePeriod", f"{SY}updateFrequency", f"{SY}updateBase",
})
RSS10_ITEM = frozenset({f"{RSS1}title", f"{RSS1}link", f"{RSS1}description", f"{DC}date", f"{DC}subject",
                        f"{DC}creator", f"{CONTENT}encoded"})
ATOM_FEED = frozenset(f"{ATOM}{t}" for t in (
    "title", "subtitle", "id", "updated", "published", "link", "author", "generator", "icon", "logo", "rights",
    "entry", "category"))  # (the feed's own dates: normalize never reads them)
ATOM_ENTRY = frozenset(f"{ATOM}{t}" for t in (
    "title", "link", "id", "updated", "published", "author", "content", "summary", "category"))
MEDIA_GROUP = f"{MEDIA}group"
MEDIA_TITLE, MEDIA_DESCRIPTION = f"{MEDIA}title", f"{MEDIA}description"
MEDIA_CHILDREN = frozenset({f"{MEDIA}content", f"{MEDIA}thumbnail"})
MEDIA_IN_GROUP = MEDIA_CHILDREN
_EMAIL_NAME = re.compile(r"^\s*\S+@\S+\s*\((.+)\)\s*$")
_NAME_EMAIL = re.compile(r"^\s*(.+?)\s*<\S+@\S+>\s*$")


class _Unsupported(Exception):
    pass


def _fp_tables() -> tuple[dict[str, str], frozenset[str]]:
    """feedparser's namespace table (lower-case URI -> canonical prefix) and the element names
    it has a handler for (``_start_<name>`` / ``_end_<name>``)."""
    try:
        from feedparser.api import StrictFeedParser
        from feedparser.mixin import _FeedParserMixin
    except ImportError:  # pragma: no cover - a future feedparser moved them: nothing is inert
        return {}, frozenset()
    ns = {k.lower(): v for k, v in _FeedParserMixin.namespaces.items()}
    handled = {n.split("_", 2)[2] for n in dir(StrictFeedParser) if n.startswith(("_start_", "_end_"))}
    return ns, frozenset(handled)


FP_NAMESPACES, FP_HANDLED = _fp_tables()
#: entry/feed keys ``normalize`` reads: an element stored under one of them is never inert
READ_KEYS = frozenset({
    "title", "content", "description", "summary", "link", "links", "id", "guidislink", "published",
    "updated", "published_parsed", "updated_parsed", "author", "author_detail", "tags", "enclosures",
    "media_content", "media_thumbnail", "language", "category",
})
#: media elements whose feedparser handlers only store keys normalize never reads
MEDIA_INERT = frozenset(f"{MEDIA}{t}" for t in ("credit", "rating", "restriction", "license"))
_XMLNS = re.compile(rb"""xmlns(?::([A-Za-z_][\w.-]*))?\s*=\s*["']([^"']*)["']""")


class _Names:
    """The name feedparser gives each element of one document.

    feedparser names an element ``<prefix>_<localname>`` (lower-cased) where the prefix is its
    canonical one for a namespace it knows and the document's own prefix otherwise, and calls
    the handler of that name if it has one; an element without a handler is only stored under
    its name. Such an element -- whose subtree is made of such elements -- is *inert*: it changes
    nothing ``normalize`` reads, so the fast path may skip it (``slash:comments``,
    ``wfw:commentRss``, publishers' own namespaces, ...). An element of a namespace bound to two
    prefixes is inert when it is under each of its possible names.
    """

    def __init__(self, body: bytes) -> None:
        #: every prefix a URI is bound to (feedparser names an element by the one it is written with)
        self.prefixes: dict[str, set[str]] = {}
        for m in _XMLNS.finditer(body):
            try:
                uri = m.group(2).decode("utf-8")
            except UnicodeDecodeError:
                continue
            self.prefixes.setdefault(uri, set()).add((m.group(1) or b"").decode("ascii", "replace"))
        self._inert: dict[str, bool] = {}

    def names(self, tag: str) -> list[str]:
        """The names feedparser may give an element: one (its canonical prefix for a namespace it
        knows, else the document's), or one per prefix of a namespace bound to several (WSJ binds
        its own to ``wsj`` and ``dj``); none for an undeclared one."""
        if tag[:1] != "{":
            return [tag.lower()]
        uri, local = tag[1:].split("}", 1)
        low = uri.lower()
        if "backend.userland.com/rss" in low:
            return []
        pfx = FP_NAMESPACES.get(low)
        pfxs = [pfx] if pfx is not None else sorted(self.prefixes.get(uri, ()))
        return [f"{p.lower()}_{local.lower()}" if p else local.lower() for p in pfxs]

    def inert(self, el: ET.Element) -> bool:
        tag = el.tag
        ok = self._inert.get(tag)
        if ok is None:
            if tag in MEDIA_INERT:
                ok = True
            else:
                ns = self.names(tag) if isinstance(tag, str) else []
                ok = bool(ns) and all(n not in FP_HANDLED and n not in READ_KEYS for n in ns)
            self._inert[tag] = ok
        return ok and all(self.inert(c) for c in el)


def _media_ok(el: ET.Element, names: _Names, extra: frozenset[str] = frozenset()) -> None:
    """Inside media:content / media:thumbnail only more of them (all collected, in document
    order, by ``_media``), inert elements or ``extra`` ones (an item's checked captions): a
    nested ``media:title`` would set the title."""
    for c in el:
        if c.tag in MEDIA_CHILDREN:
            _media_ok(c, names, extra)
        elif c.tag not in extra and not names.inert(c):
            raise _Unsupported


def _only(el: ET.Element, allowed: frozenset[str], names: _Names, extra: frozenset[str] = frozenset()) -> None:
    for child in el:
        if child.tag in allowed or child.tag in extra:
            if child.tag in MEDIA_CHILDREN:
                _media_ok(child, names, extra)
            continue
        if child.tag == MEDIA_GROUP:  # feedparser ignores the group itself, not its children
            _only(child, MEDIA_IN_GROUP, names, extra)
            continue
        if not names.inert(child):
            raise _Unsupported


#: a tag or an entity reference: text feedparser may take for HTML
_HTMLISH = re.compile(r"</?[A-Za-z]|&#?\w+;")
#: an RSS item's elements that ``_item_extras`` checks, then the fast path skips
ITEM_EXTRAS = frozenset({MEDIA_DESCRIPTION, f"{ATOM}link", "source"})


def _item_extras(item: ET.Element) -> None:
    """An RSS item's ``media:description`` (a photo caption) and ``atom:link`` change nothing
    ``normalize`` reads in these cases, else the item is left to feedparser:

    * feedparser files a description-like element as the summary, or as ``text/plain`` content
      when a summary came first and no content did (``_start_description``); normalize's body is
      then the item's content:encoded or its own description (``extract_body``). So captions are
      skipped when the item has a non-empty content:encoded (and no empty one), or when one
      caption follows a non-empty ``<description>``. A caption that holds a tag or an entity
      reference (feedparser may type it ``text/html``) is skipped only in the second case, with
      no content:encoded and no other description: normalize drops such content as a caption
      on feedparser's path too (``caption_contents``).
    * an ``atom:link`` with an ``href`` and a ``rel`` other than alternate / enclosure only adds
      to ``links``, which normalize reads for alternate links alone.
    * a text-only ``<source url="...">`` (the feed an item came from) only fills ``source``,
      which normalize does not read; but feedparser forgets after it which title came first
      (``title_depth``), so an item with a ``<title>`` after its source is left to it.
    """
    caps: list[int] = []
    desc_at = enc_ok = -1
    enc_empty = in_source = htmlish = False
    for i, el in enumerate(item.iter()):
        tag = el.tag
        if tag == "source":
            if len(el):
                raise _Unsupported
            in_source = True
        elif tag == "title" and in_source:
            raise _Unsupported
        elif tag == MEDIA_DESCRIPTION:
            if len(el):
                raise _Unsupported
            htmlish = htmlish or bool(_HTMLISH.search(el.text or ""))  # lookslikehtml may say yes
            caps.append(i)
        elif tag == "description" and desc_at < 0 and (el.text or "").strip() and not len(el):
            desc_at = i
        elif tag == f"{CONTENT}encoded":
            if (el.text or "").strip():
                enc_ok = i
            else:
                enc_empty = True
        elif tag == f"{ATOM}link":
            rel = (el.get("rel") or "").strip().lower()
            if not el.get("href") or rel in ("", "alternate", "enclosure") or len(el):
                raise _Unsupported
    one = len(caps) == 1 and 0 <= desc_at < caps[0]
    if caps and (enc_empty or (enc_ok < 0 and not one)):
        raise _Unsupported
    if htmlish and not (one and _caption_item(item)):  # what normalize drops on feedparser's path
        raise _Unsupported


_C1 = re.compile("[\x80-\x9f]")
#: UTF-8 encoded twice (e.g. "SelÃ§uk"): feedparser's decoding repairs it, ElementTree's doesn't
_DOUBLE_UTF8 = re.compile(rb"\xc3[\x82-\xb4]\xc2[\x80-\xbf]")
#: an entity left in a URL after XML decoding ("&amp;amp;"): feedparser unescapes it once more
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


def _uri(s: str) -> str:
    if _ENTITY.search(s):
        raise _Unsupported
    return s


#: what feedparser does to an entry's ``<link>`` text (its ``pop``): "&amp;" becomes "&", then
#: any other "&name;" loses its semicolon (query strings taken for character references)
_FP_LINK_REF = re.compile("&([A-Za-z0-9_]+);")


def _link(s: str) -> str:
    """An RSS item's ``<link>`` text as feedparser stores it (a double-escaped "&amp;amp;" in a
    real feed's URL is "&" to it).

    >>> _link("https://x.nz/a?b=1&amp;c=2&amp;amp;d"), _link("https://x.nz/nsa&#39;s&lt;")
    ('https://x.nz/a?b=1&c=2&ampd', 'https://x.nz/nsa&#39;s&lt')
    """
    if "&" in s:
        s = _FP_LINK_REF.sub(r"&\g<1>", s.replace("&amp;", "&"))
    return s


def _text(el: ET.Element | None) -> str | None:
    if el is None:
        return None
    if len(el):  # child elements (XHTML, nested markup): leave it to feedparser
        raise _Unsupported
    t = el.text or ""
    if _C1.search(t):  # cp1252 / double-encoded text: feedparser repairs it ("demoronize")
        raise _Unsupported
    return t


def _date(s: str | None) -> Any:
    if not s or parse_date is None:
        return None
    return _parsed_date(s.strip())


@lru_cache(maxsize=8192)
def _parsed_date(s: str) -> Any:
    """feedparser's date of ``s`` (a ``time.struct_time``, immutable, or None), memoized: a
    feed's items and its re-polls repeat their dates (the 20k UCI rows hold 6 distinct ones;
    in the first 3,000 polls of the labelled real day, 4,856 dates are 2,942 strings), and one
    costs ~15-50 us to parse."""
    return parse_date(s)


def _author_detail(raw: str) -> dict[str, str]:
    m = _EMAIL_NAME.match(raw) or _NAME_EMAIL.match(raw)
    if m:
        return {"name": m.group(1).strip()}
    if "@" in raw and " " not in raw.strip():
        return {"email": raw.strip()}
    return {"name": raw.strip()}


def _media(item: ET.Element) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    mc = [dict(e.attrib) for e in item.iter(f"{MEDIA}content")]
    mt: list[dict[str, Any]] = []
    for e in item.iter(f"{MEDIA}thumbnail"):
        d: dict[str, Any] = dict(e.attrib)
        if "url" not in d and e.text and e.text.strip():  # feedparser takes the text as the URL
            d["url"] = e.text
        mt.append(d)
    return mc, mt


def _language(el: ET.Element | None, xml_lang: bool = False) -> str | None:
    if el is None:
        return None
    for cand in (el.find("language"), el.find(f"{DC}language")):
        if cand is not None and cand.text and cand.text.strip():
            return cand.text.strip()
    return el.get(XML_LANG) if xml_lang else None


def _common(item: ET.Element, e: dict[str, Any]) -> None:
    creator = item.find(f"{DC}creator")
    if creator is not None and creator.text and creator.text.strip():
        e["author"] = creator.text.strip()
        e["author_detail"] = {"name": creator.text.strip()}
    tags = [{"term": (_text(c) or "").strip()} for c in item.findall("category")]
    tags += [{"term": (_text(c) or "").strip()} for c in item.findall(f"{DC}subject")]
    if tags:
        e["tags"] = [t for t in tags if t["term"]]
    mc, mt = _media(item)
    if mc:
        e["media_content"] = mc
    if mt:
        e["media_thumbnail"] = mt
    enc = item.find(f"{CONTENT}encoded")
    if enc is not None:
        e["content"] = [{"value": _text(enc)}]
    d = item.find(f"{DC}date")
    if d is not None:
        e["updated_parsed"] = _date(d.text)
        e["dc_date_parsed"] = e["updated_parsed"]  # as normalize's feedparser hook


def _rss20(root: ET.Element, names: _Names) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    ch = root.find("channel")
    if ch is None or len(root) != 1:
        raise _Unsupported
    _only(ch, RSS20_CHANNEL, names)
    feed: dict[str, Any] = {"title": _text(ch.find("title")) or "", "language": _language(ch) or ch.get(XML_LANG) or root.get(XML_LANG)}
    me = ch.find("managingEditor")
    if me is not None and me.text and me.text.strip():
        feed["author"] = me.text.strip()
        feed["author_detail"] = _author_detail(me.text)
    entries = []
    for item in ch.findall("item"):
        _item_extras(item)
        _only(item, RSS20_ITEM, names, ITEM_EXTRAS)
        e: dict[str, Any] = {}
        t = item.find("title")
        if t is not None:
            e["title"] = _text(t)
        links = item.findall("link")
        if len(links) > 1 or (links and links[0].attrib):
            raise _Unsupported
        if links and (link_text := (_text(links[0]) or "").strip()):
            e["link"] = _link(link_text)
        g = item.find("guid")
        if g is not None and g.text and g.text.strip():
            e["id"] = _uri(g.text.strip())
            permalink = g.get("isPermaLink", "true").lower() != "false"
            if permalink and ":" not in e["id"]:
                raise _Unsupported  # feedparser resolves a relative permalink against the base
            e["guidislink"] = permalink and "link" not in e
            if permalink and "link" not in e:
                e["link"] = e["id"]
        desc = item.find("description")
        if desc is not None:
            e["description"] = _text(desc)
        p = item.find("pubDate")
        if p is not None:
            e["published_parsed"] = _date(p.text)
        a = item.find("author")
        if a is not None and a.text and a.text.strip():
            e["author"] = a.text.strip()
            e["author_detail"] = _author_detail(a.text)
        encs = []
        for x in item.findall("enclosure"):
            if len(x):
                raise _Unsupported
            if x.get("url"):
                encs.append({"href": x.get("url"), "type": x.get("type")})
        if encs:
            e["enclosures"] = encs
        _common(item, e)
        entries.append(e)
    return feed, entries


def _rss10(root: ET.Element, names: _Names) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    _only(root, RSS10_ROOT, names)
    ch = root.find(f"{RSS1}channel")
    if ch is None:
        raise _Unsupported
    _only(ch, RSS10_CHANNEL, names)
    feed: dict[str, Any] = {"title": _text(ch.find(f"{RSS1}title")) if ch is not None else "",
                            "language": _language(ch)}
    entries = []
    for item in root.findall(f"{RSS1}item"):
        _only(item, RSS10_ITEM, names)
        e: dict[str, Any] = {}
        t = item.find(f"{RSS1}title")
        if t is not None:
            e["title"] = _text(t)
        link = item.find(f"{RSS1}link")
        if link is not None and link.text and link.text.strip():
            e["link"] = _link(link.text.strip())
        about = item.get(f"{RDF}about")
        if about:
            e["id"] = _uri(about.strip())
        desc = item.find(f"{RSS1}description")
        if desc is not None:
            e["description"] = _text(desc)
        _common(item, e)
        entries.append(e)
    return feed, entries


def _atom_text(el: ET.Element | None) -> str | None:
    if el is None:
        return None
    if el.get("type") in ("xhtml", "application/xhtml+xml"):
        raise _Unsupported
    return _text(el)


def _atom_group_extras(en: ET.Element) -> tuple[frozenset[str], str | None]:
    """A YouTube-shaped Atom entry's ``media:group`` title and description: (the tags the fast
    path may then skip, the description as the summary), else :class:`_Unsupported`.

    * ``media:title`` after the entry's own ``<title>`` with the same text: feedparser keeps the
      first title (``title_depth``), and the text is the same either way;
    * one ``media:description``, with no ``<summary>`` or ``<content>`` in the entry: feedparser
      files it as the summary (``_start_description``), as HTML; never one with a tag or an
      entity reference in its text, which its sanitizer may rewrite.
    """
    group = [c for c in en if c.tag == MEDIA_GROUP]
    titles = [t for g in group for t in g.iter(MEDIA_TITLE)]
    descs = [d for g in group for d in g.iter(MEDIA_DESCRIPTION)]
    if not titles and not descs:
        return frozenset(), None
    if len(group) != 1 or any(t not in group[0] or len(t) for t in titles + descs):
        raise _Unsupported  # only as the group's own children, without markup
    extra: set[str] = set()
    if titles:
        own = [c for c in en if c.tag == f"{ATOM}title"]
        kids = list(en)
        if (len(titles) > 1 or len(own) != 1 or kids.index(own[0]) > kids.index(group[0])
                or (titles[0].text or "") != (own[0].text or "") or own[0].get("type") not in (None, "text")):
            raise _Unsupported
        extra.add(MEDIA_TITLE)
    summary = None
    if descs:
        if len(descs) > 1 or en.find(f"{ATOM}summary") is not None or en.find(f"{ATOM}content") is not None:
            raise _Unsupported
        summary = _text(descs[0]) or ""
        if _HTMLISH.search(summary) or descs[0].attrib:
            raise _Unsupported
        extra.add(MEDIA_DESCRIPTION)
    return frozenset(extra), summary


def _atom(root: ET.Element, names: _Names) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    _only(root, ATOM_FEED, names)
    feed: dict[str, Any] = {"title": _atom_text(root.find(f"{ATOM}title")) or "", "language": _language(root, xml_lang=True)}
    fa = root.find(f"{ATOM}author/{ATOM}name")
    if fa is not None and fa.text and fa.text.strip():
        feed["author"] = fa.text.strip()
        feed["author_detail"] = {"name": fa.text.strip()}
    entries = []
    for en in root.findall(f"{ATOM}entry"):
        extra, group_summary = _atom_group_extras(en)
        _only(en, ATOM_ENTRY, names, extra)
        e: dict[str, Any] = {}
        t = en.find(f"{ATOM}title")
        if t is not None:
            e["title"] = _atom_text(t)
        links = [{"rel": x.get("rel", "alternate"), "href": _uri(x.get("href") or "")} for x in en.findall(f"{ATOM}link") if x.get("href")]
        e["links"] = links
        for lk in links:
            if lk["rel"] == "alternate":
                e["link"] = lk["href"]
                break
        encs = [{"href": lk["href"], "type": None} for lk in links if lk["rel"] == "enclosure"]
        if encs:
            raise _Unsupported  # enclosure typing differs subtly: leave to feedparser
        if "link" not in e:
            raise _Unsupported  # feedparser derives the link from the id: leave it to feedparser
        i = en.find(f"{ATOM}id")
        if i is not None and i.text and i.text.strip():
            e["id"] = _uri(i.text.strip())
            if ":" not in e["id"]:
                raise _Unsupported  # feedparser resolves relative ids against the base URL
        c = en.find(f"{ATOM}content")
        if c is not None:
            if c.get("src"):
                raise _Unsupported
            e["content"] = [{"value": _atom_text(c)}]
        s = en.find(f"{ATOM}summary")
        if s is not None:
            e["summary"] = _atom_text(s)
        elif group_summary is not None:
            e["summary"] = group_summary
        p = en.find(f"{ATOM}published")
        if p is not None:
            e["published_parsed"] = _date(p.text)
        u = en.find(f"{ATOM}updated")
        if u is not None:
            e["updated_parsed"] = _date(u.text)
        an = en.find(f"{ATOM}author/{ATOM}name")
        if an is not None and an.text and an.text.strip():
            e["author"] = an.text.strip()
            e["author_detail"] = {"name": an.text.strip()}
        tags = [{"term": x.get("term", "")} for x in en.findall(f"{ATOM}category") if x.get("term")]
        if tags:
            e["tags"] = tags
        mc, mt = _media(en)
        if mc:
            e["media_content"] = mc
        if mt:
            e["media_thumbnail"] = mt
        entries.append(e)
    return feed, entries


def _media_alias(root: ET.Element, names: _Names) -> None:
    """Elements of a namespace feedparser does not know, bound to the prefix ``media``, are
    Media RSS to it (it dispatches on the prefix): the Daily Mail writes the namespace
    ``//search.yahoo.com/mrss/``. They are read as Media RSS here too."""
    aliases = {"{" + uri + "}" for uri, pfxs in names.prefixes.items()
               if pfxs == {"media"} and "{" + uri + "}" != MEDIA and uri.lower() not in FP_NAMESPACES}
    if not aliases:
        return
    for el in root.iter():
        tag = el.tag
        if isinstance(tag, str) and tag[:1] == "{":
            ns = tag[: tag.index("}") + 1]
            if ns in aliases:
                el.tag = MEDIA + tag[len(ns):]


#: a URI with a scheme ("https:", "mailto:"): what a base cannot change
_ABSOLUTE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
#: elements whose text feedparser resolves against the base (``can_be_relative_uri``), and
#: attributes holding a URI
_URI_TEXT = frozenset({"link", "guid", "comments", "docs", "url", f"{ATOM}id", f"{ATOM}icon", f"{ATOM}logo"})
_URI_ATTRS = ("url", "href")


def _base_inert(root: ET.Element) -> bool:
    """An ``xml:base`` on the root element alone, in a document whose every URI is absolute:
    feedparser resolves links against it (``resolve_uri``), which changes no absolute URI; with
    ``resolve_relative_uris=False`` it rewrites no markup. Normalize makes relative URIs absolute
    against the feed's own URL, so a document with any relative URI is left to feedparser
    (Straits Times: ``xml:base`` on ``<rss>``, absolute links)."""
    if XML_BASE not in root.attrib:
        return False
    for el in root.iter():
        if el is not root and XML_BASE in el.attrib:
            return False
        t = (el.text or "").strip()
        if t and el.tag in _URI_TEXT and not _absolute(t):
            return False
        for a in _URI_ATTRS:
            v = el.get(a)
            if v is not None and not _absolute(v):
                return False
    return True


def _absolute(u: str) -> bool:
    """A URI with a scheme that ``urljoin`` gives back unchanged against any base (it
    re-assembles a URI of the base's scheme: "http://x/a?" would lose its "?")."""
    return bool(_ABSOLUTE.match(u)) and urlunparse(urlparse(u)) == u


def caption_contents(body: bytes) -> list[bool] | None:
    """Per RSS item, in document order: whether the ``content`` feedparser files for it is a
    photo caption. feedparser files a ``<media:description>`` that follows the item's
    ``<description>`` as content (``_start_description``), typed ``text/html`` when it holds an
    entity reference (NYT: "Guant&amp;aacute;namo"), and normalize took that caption for the
    body. True when the item's description-like elements are one ``<description>`` then one
    caption, and it has no element feedparser files as content itself (content:encoded,
    fullitem, body, content). A second caption would replace the summary: such items are left
    as they are. ``None`` when ElementTree cannot read the document."""
    try:
        root = ET.fromstring(body)
        _media_alias(root, _Names(body))  # feedparser's Media RSS is any namespace named "media"
    except (ET.ParseError, ValueError, _Unsupported):
        return None
    return [_caption_item(item) for item in root.iter()
            if isinstance(item.tag, str) and item.tag.rpartition("}")[2] == "item"]


def _caption_item(item: ET.Element) -> bool:
    """:func:`caption_contents` for one item (its Media RSS tags already named ``MEDIA``)."""
    seq: list[str] = []
    for el in item.iter():
        tag = el.tag
        if not isinstance(tag, str) or el is item:
            continue
        local = tag.rpartition("}")[2]
        if local in ("encoded", "fullitem", "body") or (local == "content" and not tag.startswith(MEDIA)):
            return False  # content of its own
        if local in ("description", "summary", "abstract"):
            seq.append(tag)
    return seq == ["description", MEDIA_DESCRIPTION]


#: ``<rss version>`` values the 2.0 reader takes, named as feedparser names them
#: (``_start_rss``): feedparser reads 0.91-0.94 as 2.0 and only the name differs (a Netscape
#: 0.91 is told by its DOCTYPE, which the fast path leaves to feedparser)
_RSS_VERSIONS = {"2.0": "rss20", "0.91": "rss091u", "0.92": "rss092", "0.93": "rss093", "0.94": "rss094"}


def fast_parse(body: bytes) -> tuple[str, dict[str, Any], list[dict[str, Any]]] | None:
    """``(version, feed, entries)`` in feedparser's shape, or ``None`` to use feedparser."""
    head = body[:512]
    if b"<!DOCTYPE" in head or b"<!doctype" in head or b"<!ENTITY" in body[:4096]:
        return None
    enc = declared_encoding(head)
    if enc is not None and enc.lower() not in _FAST_ENCODINGS:
        return None
    if split_bom(head)[0] in ("utf-16-le", "utf-16-be") or _DOUBLE_UTF8.search(body):
        return None
    try:
        root = ET.fromstring(body)
        if b"xml:base" in body and not _base_inert(root):
            return None
        if root.tag == "rss":
            version = _RSS_VERSIONS.get(root.get("version") or "")
            if version is None:
                return None
            names = _Names(body)
            _media_alias(root, names)
            feed, entries = _rss20(root, names)
            return version, feed, entries
        if root.tag == f"{ATOM}feed":
            feed, entries = _atom(root, _Names(body))
            return "atom10", feed, entries
        if root.tag == f"{RDF}RDF" and root.find(f"{RSS1}channel") is not None:
            feed, entries = _rss10(root, _Names(body))
            return "rss10", feed, entries
    except (ET.ParseError, _Unsupported, ValueError, TypeError):
        return None
    return None
