"""XML byte-level facts and step (1) of the lenient recovery of a feed that does not parse: fix
common XML issues, unescaped ``&`` and invalid bytes (docs/rules.md#responses). One module for the parser (``feeds.normalize``), its fast path
(``feeds.fastfeed``) and the poller's body scan (``polling.scan``).

Two depths of the same repair: :func:`repair_xml_bytes` fixes the bytes only (the parser hands
the result to feedparser, which detects encodings and knows HTML entities itself);
:func:`repair_xml` first normalizes the document to UTF-8 with numeric references, then applies
:func:`repair_xml_bytes` (the poller's scan hands it to ElementTree, which knows neither).
"""

from __future__ import annotations

import html.entities
import re

__all__ = [
    "BOM_ENCODINGS",
    "declared_encoding",
    "escape_bare_ampersands",
    "needs_byte_repair",
    "repair_xml",
    "repair_xml_bytes",
    "split_bom",
]

#: byte-order marks and the encoding each one announces
BOM_ENCODINGS: dict[bytes, str] = {
    b"\xef\xbb\xbf": "utf-8",
    b"\xff\xfe": "utf-16-le",
    b"\xfe\xff": "utf-16-be",
}
_DECL_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*\bencoding\s*=\s*["']([^"'>]*)["']""")
_XML_DECL = re.compile(rb"^\s*<\?xml[^>]*\?>")
#: an ``&`` that starts no reference: not ``&name;``, ``&#123;`` or ``&#x1F;`` (XML 1.0 §4.1;
#: names of 2-32 characters, references of at most 7 decimal / 6 hex digits: real ones)
_BARE_AMP = re.compile(rb"&(?!(?:[A-Za-z][A-Za-z0-9]{1,31}|#[0-9]{1,7}|#x[0-9A-Fa-f]{1,6});)")
#: bytes XML 1.0 forbids in any ASCII-compatible encoding (C0 controls but tab, LF, CR)
_BAD_XML_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
#: characters XML 1.0 forbids (C0 controls but tab, LF, CR; U+FFFE, U+FFFF)
_BAD_XML_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_NAMED_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
_XML_ENTITIES = frozenset({"amp", "lt", "gt", "quot", "apos"})


def split_bom(data: bytes) -> tuple[str | None, bytes]:
    """``(encoding of the byte-order mark or None, the bytes after it)``.

    >>> split_bom(b"\\xef\\xbb\\xbf<rss/>")
    ('utf-8', b'<rss/>')
    >>> split_bom(b"<rss/>")
    (None, b'<rss/>')
    """
    for bom, enc in BOM_ENCODINGS.items():
        if data.startswith(bom):
            return enc, data[len(bom):]
    return None, data


def declared_encoding(head: bytes) -> str | None:
    """The ``encoding`` of the XML declaration at the start of ``head``, as written (maybe
    empty or unknown to Python: callers decide what to do then).

    >>> declared_encoding(b'<?xml version="1.0" encoding="ISO-8859-1"?><rss/>')
    'ISO-8859-1'
    >>> declared_encoding(b'<?xml version="1.0"?><rss/>') is None
    True
    """
    m = _DECL_ENCODING.match(head[:200])
    return m.group(1).decode("latin-1") if m else None


def escape_bare_ampersands(data: bytes) -> bytes:
    """Escape every ``&`` that starts no entity or character reference.

    >>> escape_bare_ampersands(b"<title>AT&T &amp; Q&A &#38; &#x26;</title>")
    b'<title>AT&amp;T &amp; Q&amp;A &#38; &#x26;</title>'
    """
    return _BARE_AMP.sub(b"&amp;", data)


def needs_byte_repair(body: bytes) -> bool:
    """True when :func:`repair_xml_bytes` would change ``body``.

    >>> needs_byte_repair(b"<t>AT&T</t>"), needs_byte_repair(b"<t>AT&amp;T</t>")
    (True, False)
    """
    return _BARE_AMP.search(body) is not None or _BAD_XML_BYTES.search(body) is not None


def repair_xml_bytes(body: bytes) -> bytes:
    """Escape bare ``&`` and drop the control bytes XML forbids; nothing else changes.

    >>> repair_xml_bytes(b"<t>Fish & chips\x01 &nbsp;</t>")
    b'<t>Fish &amp; chips &nbsp;</t>'
    """
    return _BAD_XML_BYTES.sub(b"", escape_bare_ampersands(body))


def repair_xml(body: bytes) -> bytes:
    """Fix common XML problems before a second strict parse.

    Decodes with the byte-order mark, else the declared encoding, else UTF-8 (bad bytes become
    U+FFFD); drops characters XML forbids; turns HTML named entities (``&nbsp;``) into numeric
    references and unknown ones into text; escapes bare ``&``; re-encodes as UTF-8 without the
    old XML declaration (its encoding no longer applies).

    >>> repair_xml(b'<?xml version="1.0" encoding="latin-1"?><t>caf\\xe9 &nbsp;&\\x01 &bogus;</t>')
    b'<t>caf\\xc3\\xa9 &#160;&amp; &amp;bogus;</t>'
    """
    bom_enc, raw = split_bom(body)
    if bom_enc is not None:
        text = raw.decode(bom_enc, "replace")
    else:
        enc = declared_encoding(raw) or "utf-8"
        try:
            text = raw.decode(enc, "replace")
        except LookupError:
            text = raw.decode("utf-8", "replace")
    text = _BAD_XML_CHARS.sub("", text)

    def _entity(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in _XML_ENTITIES:
            return m.group(0)
        cp = html.entities.name2codepoint.get(name)
        return f"&#{cp};" if cp is not None else f"&amp;{name};"

    text = _NAMED_ENTITY.sub(_entity, text)
    return repair_xml_bytes(_XML_DECL.sub(b"", text.encode("utf-8"), count=1))
