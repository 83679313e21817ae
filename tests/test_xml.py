"""newsflow.feeds.xml: the one lenient XML repair (recovery step 1, docs/rules.md#responses)
used by the parser and the poller's scan, and the encoding facts the fast path relies on."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from newsflow.feeds.fastfeed import fast_parse
from newsflow.feeds.xml import declared_encoding, repair_xml

BROKEN = [
    b'<rss version="2.0"><channel><item><title>AT&T & Q&A</title></item></channel></rss>',
    b'<rss version="2.0"><channel><item><title>bad\x01\x0bchar</title></item></channel></rss>',
    b'<rss version="2.0"><channel><item><title>a&nbsp;b &bogus; &#X41;</title></item></channel></rss>',
    b'<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel><item><title>caf\xe9 &'
    b" co</title></item></channel></rss>",
    b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><item>'
    b"<title>x\x00y</title></item></channel></rss>",
]
EXPECTED = ["AT&T & Q&A", "badchar", "a\u00a0b &bogus; &#X41;", "caf\u00e9 & co", "xy"]


@pytest.mark.parametrize(("body", "title"), list(zip(BROKEN, EXPECTED, strict=True)))
def test_repair_makes_broken_feeds_well_formed(body: bytes, title: str) -> None:
    with pytest.raises(ET.ParseError):
        ET.fromstring(body)
    root = ET.fromstring(repair_xml(body))
    assert root.findtext("channel/item/title") == title


def test_repair_keeps_well_formed_references() -> None:
    body = b"<t>&amp; &lt; &#38; &#x26; &quot;</t>"
    assert repair_xml(body) == body


@pytest.mark.parametrize("decl", [b'encoding=""', b'encoding="windows-1252"', b"encoding='latin-1'"])
def test_fast_path_leaves_other_encodings_to_feedparser(decl: bytes) -> None:
    body = b'<?xml version="1.0" ' + decl + b'?><rss version="2.0"><channel><title>T</title></channel></rss>'
    assert declared_encoding(body) is not None
    assert fast_parse(body) is None


def test_fast_path_takes_utf8_declarations() -> None:
    body = b"<?xml version='1.0' encoding = 'UTF-8'?><rss version=\"2.0\"><channel><title>T</title></channel></rss>"
    parsed = fast_parse(body)
    assert parsed is not None and parsed[0] == "rss20"
