"""HTML and text rules of normalization (docs/rules.md#html-and-text): title cleaning, body
sanitizing, plain text, counts."""

from __future__ import annotations

import html
import re

import nh3

_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BLOCK_TAG = re.compile(
    r"<(?=/?(?:p|div|br|li|ul|ol|h[1-6]|tr|td|th|table|blockquote|pre|section|article|hr|dd|dt)\b)",
    re.IGNORECASE,
)
_IMG_SRC = re.compile(r"""<img\b[^>]*?\bsrc\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_TRUNCATION = re.compile(r"(\.\.\.|…|\[\.\.\.\]|\[…\])\s*$")

#: tags allowed in sanitized bodies: nh3's safe defaults minus anything that can embed content
_ALLOWED_TAGS = frozenset(nh3.ALLOWED_TAGS) - {"iframe", "script", "style", "object", "embed", "form"}

#: deepest element nesting handed to the HTML parser (nh3/html5ever), whose work grows with the
#: square of the depth: 5,000 nested ``<div>``s cost 0.39 s, 20,000 6.1 s, while real bodies nest
#: at most 7 deep (11,177 bodies of the shared archives). At 256 a 100,000-char body costs < 0.05 s
MAX_HTML_DEPTH = 256
_TAG_START = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)")
#: elements that never deepen the parser's stack: void ones, and those a sibling of the same
#: kind closes (``<p>a<p>b``)
_FLAT = frozenset({
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
    "param", "keygen", "frame", "basefont", "bgsound",
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "tbody", "thead", "tfoot", "caption",
    "colgroup", "rb", "rt", "rp", "rtc",
})
#: one tag of serialized (well-formed, sanitized) HTML, its quoted attribute values included
_SERIALIZED_TAG = re.compile(r"""<(?:[^>"']|"[^"]*"|'[^']*')*>""")
_LOOSE_TAG = re.compile(r"<[^<>]*>?")


def html_depth(fragment: str, limit: int | None = None) -> int:
    """The deepest element nesting of an HTML fragment, in one linear pass over its tags: a
    stack of open elements as the parser keeps it, roughly (a closing tag pops what it closes,
    a stray one nothing; :data:`_FLAT` elements are not pushed). With ``limit``, the scan stops
    once the depth is over it (the result is then ``limit + 1``)."""
    if limit is not None and fragment.count("<") <= limit:
        return min(fragment.count("<"), limit)  # (not exact: a bound that decides the limit)
    stack: list[str] = []
    open_: dict[str, int] = {}
    best = 0
    for m in _TAG_START.finditer(fragment):
        name = m.group(2).lower()
        if m.group(1):
            if open_.get(name):
                while True:
                    x = stack.pop()
                    open_[x] -= 1
                    if x == name:
                        break
        elif name not in _FLAT:
            stack.append(name)
            open_[name] = open_.get(name, 0) + 1
            if len(stack) > best:
                best = len(stack)
                if limit is not None and best > limit:
                    return best
    return best


def _strip_tags_linear(fragment: str) -> str:
    """Plain text of HTML too deep for the parser: tags cut by a regex (linear), entities decoded."""
    return collapse_ws(html.unescape(_LOOSE_TAG.sub(" ", fragment)))


def collapse_ws(s: str) -> str:
    """Collapse whitespace, drop control characters, trim."""
    return _WS.sub(" ", _CONTROL.sub("", s)).strip()


def html_to_text(fragment: str) -> str:
    """Strip tags (dropping script/style contents), decode entities, collapse whitespace.

    Block-level tags become spaces so that ``<p>a</p><p>b</p>`` gives ``a b``.
    """
    if not fragment:
        return ""
    if "<" not in fragment and "&" not in fragment:
        return collapse_ws(fragment)
    if html_depth(fragment, MAX_HTML_DEPTH) > MAX_HTML_DEPTH:  # (a body is refused before: normalize)
        return _strip_tags_linear(fragment)
    spaced = _BLOCK_TAG.sub(" <", fragment)
    stripped = nh3.clean(spaced, tags=set(), attributes={}, link_rel=None)
    return collapse_ws(html.unescape(stripped))


#: a timestamp opening a description ("May 07, 2020 5:00 AM A 61-year-old man …", the Straits
#: Times' feed): a date *and* a time; a sentence that starts with a date is content
_DATELINE = re.compile(
    r"^(?:(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day,?\s+)?"
    r"(?:[A-Z][a-z]{2,8}\.?\s+\d{1,2},?\s+\d{4}|\d{1,2}\s+[A-Z][a-z]{2,8}\s+\d{4}),?\s+(?:at\s+)?"
    r"\d{1,2}[:.]\d{2}\s*(?:[AaPp]\.?[Mm]\.?)?(?:\s+(?:[A-Z]{2,4}T|UTC|GMT))?\s+(?=\S)")


def strip_dateline(text: str) -> str:
    """Plain text without an opening timestamp (the feed's dateline, not the article's words).

    >>> strip_dateline("May 07, 2020 5:00 AM A 61-year-old man was charged.")
    'A 61-year-old man was charged.'
    >>> strip_dateline("September 11, 2001, will be remembered as one of the darkest days.")
    'September 11, 2001, will be remembered as one of the darkest days.'
    """
    return _DATELINE.sub("", text, count=1)


def clean_title(raw: str | None) -> str:
    """The title rule (docs/rules.md#html-and-text): strip HTML tags, decode entities
    (twice-escaped too), trim."""
    if not raw:
        return ""
    t = html_to_text(raw)
    if "&" in t:  # double-escaped entities (&amp;amp;) are common in titles
        t = collapse_ws(html.unescape(t))
    return t


def sanitize_html(fragment: str) -> str:
    """Safe HTML: no script/iframe/object/style, no ``on*`` handlers, no javascript: URLs. The
    caller bounds the nesting depth first (:func:`html_depth`): the parser is quadratic in it."""
    if not fragment:
        return ""
    return nh3.clean(fragment, tags=set(_ALLOWED_TAGS), link_rel="noopener noreferrer nofollow")


def text_of_sanitized(sanitized: str) -> str:
    """:func:`html_to_text` of a fragment, from its :func:`sanitize_html` output, without parsing
    it again: sanitized HTML is serialized by the parser (every tag closed, ``<`` in text and
    quotes in attributes escaped), so a linear pass over its tags gives the same text (the same
    on all 2,195 HTML bodies of the shared archives' samples): the sanitizer runs once per item."""
    if "<" not in sanitized and "&" not in sanitized:
        return collapse_ws(sanitized)
    return collapse_ws(html.unescape(_SERIALIZED_TAG.sub("", _BLOCK_TAG.sub(" <", sanitized))))


def first_line(text: str, max_chars: int = 200) -> str:
    """Title fallback: the first line/sentence of the description."""
    t = text.strip()
    if not t:
        return ""
    for sep in ("\n", ". ", "! ", "? "):
        i = t.find(sep)
        if 0 < i < max_chars:
            t = t[: i + (1 if sep != "\n" else 0)]
            break
    if len(t) > max_chars:
        cut = t[:max_chars].rsplit(" ", 1)[0]
        t = cut + "…"
    return collapse_ws(t)


#: a whitespace-separated token without a letter or digit ("—", "[...]")
_NOT_A_WORD = re.compile(r"(?<!\S)[^\w\s]+(?!\S)")


def word_count(text: str) -> int:
    """Whitespace-separated tokens that contain a letter or digit ("[...]" is not a word): all
    tokens less the few without one (~1.6x faster than finding every word).

    >>> word_count("Rates rose — again [...] in 2024.")
    5
    """
    return len(text.split()) - len(_NOT_A_WORD.findall(text)) if text else 0


def reading_time_minutes(words: int, wpm: int = 238) -> float:
    """Reading time (docs/rules.md#html-and-text): ``words / 238`` minutes, rounded to 0.1."""
    return round(words / wpm, 1)


def is_partial_content(text: str, words: int, max_words: int = 100) -> bool:
    """Partial content (docs/rules.md#html-and-text): fewer than 100 words and ending in "..."
    or "[...]" (or "…")."""
    return 0 < words < max_words and bool(_TRUNCATION.search(text))


def first_img_src(fragment: str) -> str | None:
    """The ``src`` of the first ``<img>`` that has one, in linear time: each tag is searched up
    to its ``>`` (one regex search over the whole fragment tried every ``<img`` to the end when
    none closed: 83 s for 20,000 of them)."""
    if not fragment:
        return None
    low = fragment.lower()
    i = low.find("<img")
    while i >= 0:
        end = low.find(">", i + 4)
        if not (low[i + 4:i + 5].isalnum() or low[i + 4:i + 5] == "_"):  # (``<imgx`` is another tag)
            m = _IMG_SRC.match(fragment, i, len(fragment) if end < 0 else end + 1)
            if m:
                return html.unescape(m.group(1))
        if end < 0:
            return None
        i = low.find("<img", end)
    return None


def looks_like_html_page(body: bytes) -> bool:
    """A body that is an HTML page (Cloudflare challenge, error page) rather than a feed."""
    head = body[:2048].lstrip().lower()
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip()
    if head.startswith(b"<?xml"):
        # XHTML pages start with an XML declaration too
        return b"<html" in head and b"<rss" not in head and b"<feed" not in head and b"<rdf" not in head
    return head.startswith((b"<!doctype html", b"<html")) or (
        b"<html" in head and b"<rss" not in head and b"<feed" not in head
    )
