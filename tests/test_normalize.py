"""Every normalization rule of docs/rules.md#parsing-and-normalization, one test each."""

from __future__ import annotations

from newsflow.core.timeutil import iso_to_ms
from newsflow.feeds.normalize import normalize_payload
from newsflow.model.records import Article, RawPayload
from newsflow.text.html import (
    clean_title,
    html_to_text,
    is_partial_content,
    reading_time_minutes,
    sanitize_html,
)

FETCH = iso_to_ms("2026-03-02T12:00:00Z")


def rss(items: str, extra_ns: str = "") -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?><rss version="2.0" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/" '
        f'xmlns:media="http://search.yahoo.com/mrss/" {extra_ns}><channel><title>Feed &amp; Co</title>'
        f"<link>https://ex.com/</link><managingEditor>editor@ex.com (Ed Itor)</managingEditor>{items}</channel></rss>"
    ).encode()


def one(body: bytes, url: str = "https://ex.com/feed.xml", **kw) -> Article:
    res = normalize_payload(RawPayload("f1", url, FETCH, 200, body, **kw))
    assert len(res.articles) == 1, (res.articles, res.deadletters)
    return res.articles[0]


def test_title_strips_html_decodes_entities_trims() -> None:
    assert clean_title("  <b>Hello</b> &amp; <i>world</i>  ") == "Hello & world"
    assert clean_title("Tom &amp;amp; Jerry") == "Tom & Jerry"
    a = one(rss("<item><title>  &lt;b&gt;Big&lt;/b&gt; news &#8211; today </title><link>https://ex.com/1</link></item>"))
    assert a.title == "Big news – today"


def test_title_falls_back_to_first_line_of_description() -> None:
    a = one(rss("<item><link>https://ex.com/1</link><description>&lt;p&gt;First sentence here. Second one.&lt;/p&gt;</description></item>"))
    assert a.title == "First sentence here."


def test_url_priority_link_then_permalink_guid_then_atom_id() -> None:
    a = one(rss('<item><title>t</title><guid isPermaLink="true">https://ex.com/g</guid></item>'))
    assert a.url == "https://ex.com/g"
    atom = (b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>'
            b"<entry><title>t</title><id>https://ex.com/atom-id</id></entry></feed>")
    assert one(atom).url == "https://ex.com/atom-id"
    b = one(rss('<item><title>t</title><link>https://ex.com/link</link><guid isPermaLink="true">https://ex.com/g</guid></item>'))
    assert b.url == "https://ex.com/link"


def test_url_canonicalized_and_relative_made_absolute() -> None:
    a = one(rss("<item><title>t</title><link>/a/b/?utm_source=rss&amp;fbclid=1#x</link></item>"))
    assert a.url.startswith("https://ex.com/a/b/")
    assert a.canonical_url == "https://ex.com/a/b"


def test_author_name_only() -> None:
    a = one(rss("<item><title>t</title><link>https://ex.com/1</link><author>jane@ex.com (Jane Roe)</author></item>"))
    assert a.author == "Jane Roe"
    b = one(rss("<item><title>t</title><link>https://ex.com/1</link><dc:creator>John Doe</dc:creator></item>"))
    assert b.author == "John Doe"
    c = one(rss("<item><title>t</title><link>https://ex.com/1</link></item>"))
    assert c.author == "Ed Itor"  # managingEditor fallback, name only


def test_date_priority_dc_date_before_pubdate_and_utc() -> None:
    a = one(rss("<item><title>t</title><link>https://ex.com/1</link>"
                "<pubDate>Mon, 02 Mar 2026 10:00:00 +0200</pubDate><dc:date>2026-03-02T07:30:00Z</dc:date></item>"))
    assert a.published_at == "2026-03-02T07:30:00Z" and a.date_source == "dc:date"
    b = one(rss("<item><title>t</title><link>https://ex.com/1</link><pubDate>Mon, 02 Mar 2026 10:00:00 +0200</pubDate></item>"))
    assert b.published_at == "2026-03-02T08:00:00Z" and b.date_source == "pubDate" and not b.date_uncertain


def test_atom_published_before_updated() -> None:
    atom = (b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><entry><title>t</title>'
            b'<link href="https://ex.com/1"/><id>x</id><updated>2026-03-02T09:00:00Z</updated>'
            b"<published>2026-03-01T09:00:00Z</published></entry></feed>")
    a = one(atom)
    assert a.published_at == "2026-03-01T09:00:00Z" and a.date_source == "published"


def test_missing_date_uses_fetch_time_and_flags_uncertain() -> None:
    a = one(rss("<item><title>t</title><link>https://ex.com/1</link><pubDate>not a date</pubDate></item>"))
    assert a.published_ms == FETCH and a.date_uncertain and a.date_source == "fetched_at"


def test_future_date_beyond_one_hour_not_trusted() -> None:
    ok = one(rss("<item><title>t</title><link>https://ex.com/1</link><pubDate>Mon, 02 Mar 2026 12:30:00 GMT</pubDate></item>"))
    assert not ok.date_uncertain  # 30 min ahead: clock skew, trusted
    bad = one(rss("<item><title>t</title><link>https://ex.com/1</link><pubDate>Mon, 02 Mar 2026 14:00:00 GMT</pubDate></item>"))
    assert bad.date_uncertain and bad.published_ms == FETCH and bad.date_source == "future_clamped"


def test_body_priority_content_encoded_then_description() -> None:
    a = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>short</description>"
                "<content:encoded><![CDATA[<p>the full body</p>]]></content:encoded></item>"))
    assert a.body_text == "the full body"
    b = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>only desc</description></item>"))
    assert b.body_text == "only desc"


def test_a_photo_caption_is_not_the_body() -> None:
    """feedparser files an RSS item's <media:description> (NYT's and the LA Times' photo
    captions) as content: the item's own description or content:encoded is the body."""
    cap = "<media:content url='https://ex.com/p.jpg' medium='image'/><media:description>A man at a desk, in February.</media:description>"
    nyt = one(rss("<item><title>t</title><link>https://ex.com/1</link>"
                  f"<description>The court rejected the petitions.</description>{cap}</item>"))
    assert nyt.body_text == "The court rejected the petitions."
    lat = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>short</description>"
                  "<content:encoded><![CDATA[<p>County officials announced 691 new cases.</p>]]></content:encoded>"
                  "<media:content url='https://ex.com/p.jpg'><media:description type='plain'>LOS ANGELES, CA - "
                  "APRIL 30: A nurse practitioner takes a swab sample from a woman in a wheelchair at a "
                  "testing site</media:description></media:content></item>"))
    assert lat.body_text == "County officials announced 691 new cases."
    only = one(rss(f"<item><title>t</title><link>https://ex.com/1</link>{cap}</item>"))
    assert only.body_text == "A man at a desk, in February."  # nothing else: the caption


def test_a_timestamp_opening_the_description_is_not_body_text() -> None:
    """The Straits Times opens every description with "May 07, 2020 5:00 AM": the summary and
    story matching read the article's words, not the feed's timestamp."""
    st = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>May 07, 2020 5:00 AM "
                 "A 61-year-old man has been charged with attempted murder.</description></item>"))
    assert st.body_text == "A 61-year-old man has been charged with attempted murder."
    dated = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>September 11, 2001, "
                    "will be remembered as one of the darkest days.</description></item>"))
    assert dated.body_text.startswith("September 11, 2001, will")  # a date alone is the sentence's


def test_body_sanitized_no_script_iframe_or_handlers() -> None:
    html = sanitize_html('<p onclick="steal()">Hi<script>evil()</script><iframe src="x"></iframe>'
                         '<a href="javascript:alert(1)">x</a><img src="a.png" onerror="bad()"></p>')
    low = html.lower()
    assert "script" not in low and "iframe" not in low and "onclick" not in low
    assert "onerror" not in low and "javascript:" not in low and "Hi" in html
    a = one(rss('<item><title>t</title><link>https://ex.com/1</link><content:encoded><![CDATA[<p onmouseover="x()">A</p>'
                "<script>alert(1)</script>]]></content:encoded></item>"))
    assert "script" not in a.body_html and "onmouseover" not in a.body_html and a.body_text == "A"


def test_plain_text_blocks_become_spaces() -> None:
    assert html_to_text("<p>a</p><p>b</p><ul><li>c</li></ul>") == "a b c"


def test_categories_normalized_case_and_synonyms() -> None:
    a = one(rss("<item><title>t</title><link>https://ex.com/1</link><category>Tech</category>"
                "<category> WORLD </category><category>world</category><dc:subject>Science</dc:subject></item>"))
    assert a.categories == ("technology", "world", "science")


def test_media_priority_enclosure_media_thumbnail_img() -> None:
    a = one(rss('<item><title>t</title><link>https://ex.com/1</link><enclosure url="https://ex.com/a.mp3" type="audio/mpeg" length="1"/>'
                '<media:content url="https://ex.com/v.mp4" type="video/mp4" width="640" height="360"/></item>'))
    assert [m.source for m in a.media] == ["enclosure", "media_content"]
    assert a.media[1].width == 640 and a.media[0].type == "audio/mpeg"
    b = one(rss('<item><title>t</title><link>https://ex.com/1</link><media:thumbnail url="https://ex.com/t.jpg" width="100"/></item>'))
    assert b.media[0].source == "media_thumbnail"
    c = one(rss('<item><title>t</title><link>https://ex.com/1</link><description>&lt;img src="/i.png"&gt; text</description></item>'))
    assert c.media[0].source == "img" and c.media[0].url == "https://ex.com/i.png"


def test_guid_priority_guid_then_canonical_url_then_hash() -> None:
    assert one(rss('<item><title>t</title><link>https://ex.com/1</link><guid isPermaLink="false">abc-1</guid></item>')).guid == "abc-1"
    assert one(rss("<item><title>t</title><link>https://ex.com/1?utm_source=x</link></item>")).guid == "https://ex.com/1"
    h = one(rss("<item><title>only a title</title></item>"))
    assert h.guid and h.url is None and len(h.guid) == 32


def test_word_count_reading_time_partial_content() -> None:
    assert reading_time_minutes(476) == 2.0
    assert is_partial_content("Some teaser text ...", 3)
    assert is_partial_content("Some teaser text [...]", 3)
    assert not is_partial_content(" ".join(["w"] * 120) + "...", 120)
    a = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>Read the rest of this teaser [...]</description></item>"))
    assert a.word_count == 6 and a.partial_content and a.reading_time_min == 0.0


def test_item_without_title_and_body_is_dead_lettered_and_counted() -> None:
    res = normalize_payload(RawPayload("f1", "https://ex.com/f", FETCH, 200, rss(
        "<item><link>https://ex.com/1</link></item><item><title>fine</title><link>https://ex.com/2</link></item>")))
    assert len(res.articles) == 1 and res.malformed == 1
    dl = res.deadletters[0]
    assert dl.reason == "no_title_no_body" and dl.item_index == 0 and dl.original and dl.feed_id == "f1"


def test_format_detection() -> None:
    assert one(rss("<item><title>t</title><link>https://ex.com/1</link></item>")).feed_format == "rss20"
    rdf = (b'<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
           b'xmlns="http://purl.org/rss/1.0/"><channel rdf:about="x"><title>x</title><link>https://ex.com</link>'
           b'<description>d</description></channel><item rdf:about="https://ex.com/1"><title>t</title><link>https://ex.com/1</link></item></rdf:RDF>')
    assert one(rdf).feed_format == "rss10"
    atom = b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>A</title><entry><title>t</title><id>x</id></entry></feed>'
    assert one(atom).feed_format == "atom10"


def test_lenient_recovery_of_broken_xml() -> None:
    broken = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>B</title><item><title>Fish & chips \x01</title>'
              b"<link>https://ex.com/f?a=1&b=2</link></item>")
    a = one(broken)
    assert a.title == "Fish & chips"


def test_html_page_instead_of_feed_is_its_own_status() -> None:
    res = normalize_payload(RawPayload("f1", "https://ex.com/f", FETCH, 200,
                                       b"<!DOCTYPE html><html><body>Just a moment...</body></html>"))
    assert res.status == "html_instead_of_feed" and not res.articles
    assert res.deadletters[0].reason == "html_instead_of_feed" and res.deadletters[0].original.startswith(b"<!DOCTYPE")


def test_garbage_is_dead_lettered_not_raised() -> None:
    for body in (b"\x00\xff\xfe garbage", b"{\"json\": true}", b"<rss><channel>"):
        res = normalize_payload(RawPayload("f1", "https://ex.com/f", FETCH, 200, body))
        assert res.articles or res.deadletters or res.status == "empty"


def test_article_id_stable_and_content_hash_tracks_content() -> None:
    x = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>v1</description></item>"))
    y = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>v1</description></item>"))
    z = one(rss("<item><title>t</title><link>https://ex.com/1</link><description>v2</description></item>"))
    assert x.article_id == y.article_id == z.article_id and len(x.article_id) == 16
    assert x.content_hash == y.content_hash != z.content_hash


def test_publisher_from_registry_then_feed_title() -> None:
    assert one(rss("<item><title>t</title><link>https://ex.com/1</link></item>"), publisher="Registry Name").publisher == "Registry Name"
    assert one(rss("<item><title>t</title><link>https://ex.com/1</link></item>")).publisher == "Feed & Co"


# ---- real-feed bugs ----------------------------------------------------------------------


def test_bare_ampersand_repaired_even_when_feedparser_recovers_items() -> None:
    # broken XML (bare '&') from which feedparser's loose parser still recovers the items: the
    # text must read "AT&T", never the "AT&T;" of an entity-looking guess
    body = rss("<item><title>AT&T and R&D news</title><link>https://ex.com/1</link>"
               "<description>AT&T spends on R&D & more</description></item>")
    a = one(body)
    assert a.title == "AT&T and R&D news"
    assert "AT&T spends on R&D & more" in a.body_text and "&T;" not in a.body_text


def test_http_error_envelopes_are_not_ingested_as_articles() -> None:
    feed = rss("<item><title>Not found page pretending</title><link>https://ex.com/1</link></item>")
    for status in (404, 410, 500):
        res = normalize_payload(RawPayload("f1", "https://ex.com/feed.xml", FETCH, status, feed))
        assert res.articles == [] and res.status == "http_error"
        assert [(d.stage, d.reason) for d in res.deadletters] == [("fetch", "http_error")]
    res = normalize_payload(RawPayload("f1", "https://ex.com/feed.xml", FETCH, 503, None))
    assert res.articles == [] and res.status == "http_error"


def test_atom_dc_date_takes_priority_over_published() -> None:
    atom = (b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom" '
            b'xmlns:dc="http://purl.org/dc/elements/1.1/"><title>A</title><entry><title>t</title>'
            b'<link href="https://ex.com/1"/><id>urn:x:1</id><published>2026-03-01T09:00:00Z</published>'
            b"<dc:date>2026-03-01T11:30:00Z</dc:date><updated>2026-03-02T09:00:00Z</updated></entry></feed>")
    a = one(atom)
    assert a.published_at == "2026-03-01T11:30:00Z" and a.date_source == "dc:date"


def test_email_only_author_is_kept_not_replaced_by_managing_editor() -> None:
    a = one(rss("<item><title>t</title><link>https://ex.com/1</link><author>jane@ex.com</author></item>"))
    assert a.author == "jane@ex.com"


# ---- default tiers of well-known sources ----


def test_source_tier_table_gives_well_known_sources_a_tier() -> None:
    from dataclasses import replace

    from newsflow.feeds.normalize import DEFAULT_NORMALIZE_CONFIG
    from newsflow.feeds.tiers import BUILTIN_TIERS, SourceTiers

    item = "<item><title>t</title><link>{}</link></item>"
    # by the link's host (any subdomain, down to the registrable domain)
    assert one(rss(item.format("https://www.bbc.co.uk/news/world-1"))).tier == "T2"
    assert one(rss(item.format("https://apnews.com/article/x"))).tier == "T1"
    assert one(rss(item.format("https://arstechnica.com/science/x"))).tier == "T3"
    # a shared platform's link: by the publisher's name, also a longer name starting with it
    yt = rss(item.format("https://www.youtube.com/watch?v=b0tXaZq5q"))
    assert one(yt, publisher="Al Jazeera English").tier == "T2"
    assert one(yt, publisher="Fox News latest").tier == "T2"
    assert one(yt, publisher="Some Channel").tier is None
    assert one(rss(item.format("https://ex.com/1"))).tier is None  # unknown: no tier (scored as T4)
    # the feed's own tier always wins
    assert one(rss(item.format("https://www.bbc.co.uk/news/1")), tier="T5").tier == "T5"
    # the table can be turned off or replaced
    off = replace(DEFAULT_NORMALIZE_CONFIG, source_tiers=None)
    res = normalize_payload(RawPayload("f1", "https://ex.com/feed.xml", FETCH, 200,
                                       rss(item.format("https://www.bbc.co.uk/news/1"))), off)
    assert res.articles[0].tier is None
    own = replace(DEFAULT_NORMALIZE_CONFIG, source_tiers=SourceTiers({"ex.com": "T1"}, {}))
    res = normalize_payload(RawPayload("f1", "https://ex.com/feed.xml", FETCH, 200,
                                       rss(item.format("https://news.ex.com/1"))), own)
    assert res.articles[0].tier == "T1"
    assert DEFAULT_NORMALIZE_CONFIG.source_tiers is BUILTIN_TIERS


def test_source_tier_table_from_configuration(tmp_path) -> None:
    import pytest

    from newsflow.config import Settings

    p = tmp_path / "tiers.toml"
    p.write_text('version = 1\n[domains]\n"ex.com" = "T1"\n[publishers]\n"my channel" = "T3"\n')
    t = Settings(normalize={"source_tiers": str(p)}).normalize.to_config().source_tiers
    assert t is not None and t.lookup("My Channel!", "https://youtube.com/x") == "T3"
    assert t.lookup(None, "https://a.ex.com/1") == "T1"
    assert Settings(normalize={"source_tiers": ""}).normalize.to_config().source_tiers is None
    p.write_text('[domains]\n"ex.com" = "T9"\n')
    with pytest.raises(ValueError, match="T9"):
        Settings(normalize={"source_tiers": str(p)})


def test_publisher_families_count_organisations_not_feeds(tmp_path) -> None:
    """The labelled real day: a CNN YouTube video and a CNN International article ("cnn" and
    "cnn.com", and "cnn.it" for its short links), Fox News' channel and foxnews.com, GMA News'
    channel and gmanetwork.com were each two publishers of a story, so 23 stories counted one
    organisation twice (corroboration 50 for a story only CNN carried)."""
    import pytest

    from newsflow.config import Settings
    from newsflow.feeds.tiers import BUILTIN_TIERS, NO_TABLE

    fam = BUILTIN_TIERS.family
    yt = "https://www.youtube.com/watch?v=x"
    assert fam("CNN", yt) == fam("CNN International", "https://www.cnn.com/a") == fam("X", "https://cnn.it/2W") == "cnn.com"
    assert fam("Fox News", yt) == fam("Fox News latest", "https://www.foxnews.com/us/a") == "foxnews.com"
    assert fam("GMA News", yt) == fam("GMA News Online", "https://www.gmanetwork.com/news/a") == "gmanetwork.com"
    assert fam("NYT U.S.", "https://www.nytimes.com/a") == fam("NYT World", "https://nyti.ms/1") == "nytimes.com"
    # other organisations stay apart; an unlisted channel is its name, an unlisted site its domain
    assert fam("Al Jazeera English", yt) != fam("CNN", yt)
    assert fam("Some  Channel", yt) == "some channel" and fam("Blog", "https://news.blog.example/a") == "blog.example"
    assert fam("CNNfan", yt) == "cnnfan"  # whole words only
    # without a table: registrable domains and channel names (never one "youtube.com")
    assert NO_TABLE.family("CNN", yt) == "cnn" and NO_TABLE.family("CNN International", "https://cnn.it/2") == "cnn.it"

    p = tmp_path / "tiers.toml"
    p.write_text('version = 1\n[families]\n"ex.com" = ["ex.net", "Ex Channel"]\n')
    t = Settings(normalize={"source_tiers": str(p)}).normalize.to_config().source_tiers
    assert t is not None and t.family("Ex Channel Live", yt) == t.family("A", "https://www.ex.net/1") == "ex.com"
    p.write_text('[families]\n"ex.com" = "ex.net"\n')
    with pytest.raises(ValueError, match="families"):
        Settings(normalize={"source_tiers": str(p)})


def test_utf8_feed_without_declaration_is_read_as_utf8_on_the_feedparser_path() -> None:
    """Real Daily Mail feed: no XML declaration, a UTF-8 no-break space at the end of titles, a
    namespace the fast path declines. Titles read "…in flames", never "…in flamesÂ"; an HTTP
    charset, when the server names one, is still honoured."""
    from dataclasses import replace

    from newsflow.feeds.normalize import DEFAULT_NORMALIZE_CONFIG

    body = ('<rss xmlns:atom="//www.w3.org/2005/Atom" version="2.0"><channel><title>DM</title>'
            "<item><title>UAE skyscraper is engulfed in flames\u00a0</title><link>https://ex.com/1</link>"
            "<description>Caf\u00e9 fire\u00a0report</description></item></channel></rss>").encode()
    for fast in (True, False):
        cfg = replace(DEFAULT_NORMALIZE_CONFIG, fast_parse=fast)
        for ct in (None, "application/rss+xml", "text/xml"):
            [a] = normalize_payload(RawPayload("dm", "https://ex.com/feed", FETCH, 200, body, content_type=ct),
                                    cfg).articles
            assert a.title == "UAE skyscraper is engulfed in flames", (fast, ct, a.title)
            assert a.body_text == "Café fire report", (fast, ct, a.body_text)
    latin = body.decode().encode("latin-1")
    [a] = normalize_payload(RawPayload("dm", "https://ex.com/feed", FETCH, 200, latin,
                                       content_type="text/xml; charset=ISO-8859-1"),
                            replace(DEFAULT_NORMALIZE_CONFIG, fast_parse=False)).articles
    assert a.body_text == "Café fire report"
