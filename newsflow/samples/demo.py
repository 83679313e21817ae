"""The bundled demo sample, written by the team: a small, realistic day and a half of news.

Twelve publishers (RSS 2.0, RSS 1.0/RDF and Atom feeds), several polls each, wire stories
syndicated under different URLs, tracking-parameter URL variants, a revised article, an item
with neither title nor body, a feed serving an HTML error page and a feed with broken XML.
Generated deterministically (no clock, no randomness), so ``newsflow demo`` is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

from newsflow.core.timeutil import HOUR_MS, iso_to_ms, ms_to_iso
from newsflow.model.records import RawPayload

START_MS = iso_to_ms("2026-03-02T06:00:00Z")


@dataclass(frozen=True)
class Feed:
    feed_id: str
    publisher: str
    tier: str
    fmt: str  # rss20 | rss10 | atom
    site: str


FEEDS = [
    Feed("wire-world", "Global Wire", "T1", "rss20", "https://wire.example.com"),
    Feed("wire-business", "Global Wire", "T1", "rss20", "https://wire.example.com"),
    Feed("daily-herald", "Daily Herald", "T2", "rss20", "https://www.dailyherald.example"),
    Feed("metro-times", "Metro Times", "T2", "atom", "https://metrotimes.example.org"),
    Feed("tech-insider", "Tech Insider", "T3", "atom", "https://techinsider.example.net"),
    Feed("science-journal", "Science Journal", "T2", "rss10", "https://sciencejournal.example.edu"),
    Feed("portal-news", "Portal News", "T4", "rss20", "https://news.portal.example"),
    Feed("city-blog", "City Blog", "T4", "rss20", "https://cityblog.example.io"),
    Feed("market-watch", "Market Watcher", "T3", "rss20", "https://marketwatcher.example.com"),
    Feed("health-daily", "Health Daily", "T3", "atom", "https://healthdaily.example.org"),
    Feed("aggregator", "Aggregator Hub", "T5", "rss20", "https://aggregator.example.biz"),
    Feed("broken-feed", "Broken Gazette", "T5", "rss20", "https://brokengazette.example"),
]
BY_ID = {f.feed_id: f for f in FEEDS}

P = "<p>{}</p>"
STORIES = [
    # (id, hour, headline, body paragraphs)
    ("quake", 0, "Strong earthquake strikes off northern coast, tsunami warning issued",
     ["A magnitude 7.1 earthquake struck off the northern coast early on Monday, the national seismology institute said, prompting a tsunami warning for three coastal provinces.",
      "Officials said there were no immediate reports of casualties. Residents of low-lying areas were told to move to higher ground while the warning remained in effect.",
      "The quake hit at a depth of 10 kilometres, about 80 km from the nearest city, according to preliminary data. Aftershocks of up to magnitude 5.4 followed within the hour."]),
    ("rates", 1, "Central bank holds interest rates at 4.25% as inflation cools",
     ["The central bank kept its benchmark rate unchanged at 4.25% on Monday, saying inflation had cooled to 2.8% in February but remained above its 2% target.",
      "Governor Maria Lindqvist said the committee voted 7-2 to hold, with two members favouring a quarter-point cut. Markets had priced in a 60% chance of a hold.",
      "Bond yields fell 5 basis points after the announcement, and the currency slipped 0.3% against the dollar."]),
    ("chip", 2, "Tech giant unveils 2-nanometre chip, promises 30% less power use",
     ["The company unveiled its first processor built on a 2-nanometre process, claiming 30% lower power use and 15% higher performance than its previous generation.",
      "Volume production will begin in the third quarter at its new fabrication plant, the company said, with the first laptops expected before the end of the year.",
      "Analysts said the announcement puts pressure on rivals, who have struggled with yields on comparable processes."]),
    ("vaccine", 3, "Trial shows new malaria vaccine 77% effective in children",
     ["A late-stage trial of a new malaria vaccine showed 77% efficacy in children aged 5 to 17 months over twelve months of follow-up, researchers reported on Monday.",
      "The study enrolled 4,800 children across four countries. Side effects were mild, mostly fever and soreness at the injection site.",
      "Health officials said the results could pave the way for approval next year, though manufacturing capacity remains a constraint."]),
    ("stadium", 5, "City council approves new stadium after marathon session",
     ["The city council approved plans for a 40,000-seat stadium after an eleven-hour session that ended shortly before dawn.",
      "Supporters said the project would create 3,000 jobs; opponents warned of traffic congestion and rising rents near the site.",
      "Construction is expected to begin next spring, subject to an environmental review."]),
    ("merger", 7, "Two largest regional airlines agree to merge in $4 billion deal",
     ["The country's two largest regional airlines agreed to merge in an all-share deal valuing the combined group at about $4 billion, the companies said on Monday.",
      "The merger, which requires approval from competition regulators, would create a carrier with 210 aircraft serving 95 destinations.",
      "Unions said they would seek guarantees on jobs; the airlines said they expected annual savings of $150 million by 2028."]),
    ("heat", 26, "Heatwave breaks March temperature record in the capital",
     ["Temperatures in the capital reached 29.4C on Tuesday, the highest ever recorded in March, the weather service said.",
      "The previous record of 27.8C was set in 1968. Forecasters expect the warm spell to last until Thursday before a cold front arrives."]),
    ("election", 27, "Opposition leader announces bid for presidency",
     ["The leader of the main opposition party announced on Tuesday that she will run for president in next year's election, promising to cut taxes for small businesses.",
      "Polls show her trailing the incumbent by four points, with a large share of voters still undecided."]),
]


def story_url(feed: Feed, sid: str) -> str:
    return f"{feed.site}/news/2026/03/{sid}"


def _item_rss(title: str | None, link: str, guid: str, pub_ms: int, body: str | None, cat: str, permalink: bool) -> str:
    from datetime import UTC, datetime
    from email.utils import format_datetime

    pub = format_datetime(datetime.fromtimestamp(pub_ms / 1000, tz=UTC))
    parts = ["<item>"]
    if title is not None:
        parts.append(f"<title>{escape(title)}</title>")
    parts.append(f"<link>{escape(link)}</link>")
    parts.append(f'<guid isPermaLink="{"true" if permalink else "false"}">{escape(guid)}</guid>')
    parts.append(f"<pubDate>{pub}</pubDate><category>{escape(cat)}</category>")
    if body is not None:
        parts.append(f"<description>{escape(body)}</description>")
    parts.append("</item>")
    return "".join(parts)


def _doc(feed: Feed, items: list[tuple[str | None, str, str, int, str | None, str]]) -> bytes:
    if feed.fmt == "atom":
        entries = "".join(
            f"<entry><title>{escape(t or '')}</title><link rel=\"alternate\" href=\"{escape(link)}\"/>"
            f"<id>{escape(guid)}</id><published>{ms_to_iso(pub)}</published><updated>{ms_to_iso(pub)}</updated>"
            f"<author><name>{escape(feed.publisher)} Staff</name></author><category term=\"{escape(cat)}\"/>"
            f"<content type=\"html\">{escape(body or '')}</content></entry>"
            for t, link, guid, pub, body, cat in items
        )
        return (f'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
                f"<title>{escape(feed.publisher)}</title><id>{feed.site}/</id><updated>2026-03-02T00:00:00Z</updated>"
                f"{entries}</feed>").encode()
    if feed.fmt == "rss10":
        lis = "".join(f'<rdf:li rdf:resource="{escape(link)}"/>' for _, link, *_ in items)
        its = "".join(
            f'<item rdf:about="{escape(link)}"><title>{escape(t or "")}</title><link>{escape(link)}</link>'
            f"<dc:date>{ms_to_iso(pub)}</dc:date><dc:subject>{escape(cat)}</dc:subject>"
            f"<description>{escape(body or '')}</description></item>"
            for t, link, guid, pub, body, cat in items
        )
        return (f'<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
                f'xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                f'<channel rdf:about="{feed.site}/rss"><title>{escape(feed.publisher)}</title><link>{feed.site}</link>'
                f"<description>x</description><items><rdf:Seq>{lis}</rdf:Seq></items></channel>{its}</rdf:RDF>").encode()
    body = "".join(_item_rss(t, link, guid, pub, b, cat, guid == link) for t, link, guid, pub, b, cat in items)
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>{escape(feed.publisher)}</title>'
            f"<link>{feed.site}</link><description>{escape(feed.publisher)} news</description><ttl>30</ttl>{body}</channel></rss>").encode()


#: which feeds carry which stories: own reporting, or the wire copy syndicated
COVERAGE = {
    "wire-world": ["quake", "vaccine", "heat", "election"],
    "wire-business": ["rates", "merger", "chip"],
    "daily-herald": ["quake", "rates", "stadium", "election"],
    "metro-times": ["stadium", "heat", "quake"],
    "tech-insider": ["chip"],
    "science-journal": ["vaccine", "quake"],
    "portal-news": ["quake*", "rates*", "merger*", "vaccine*"],  # * = syndicated wire copy
    "city-blog": ["stadium", "heat"],
    "market-watch": ["rates", "merger", "chip*"],
    "health-daily": ["vaccine", "heat"],
    "aggregator": ["quake*", "chip*", "election*"],
}
WIRE_HOME = {"quake": "wire-world", "vaccine": "wire-world", "heat": "wire-world", "election": "wire-world",
             "rates": "wire-business", "merger": "wire-business", "chip": "wire-business"}
POLL_HOURS = [1, 4, 8, 12, 20, 28, 32, 36]


def _story(sid: str) -> tuple[int, str, list[str]]:
    for s, hour, title, paras in STORIES:
        if s == sid:
            return hour, title, paras
    raise KeyError(sid)


def demo_payloads() -> list[RawPayload]:
    """All raw payloads of the demo, in fetch-time order."""
    out: list[RawPayload] = []
    for poll_no, hour in enumerate(POLL_HOURS):
        for fi, feed in enumerate(FEEDS):
            fetched = START_MS + hour * HOUR_MS + fi * 37_000
            if feed.feed_id == "broken-feed":
                if poll_no % 2 == 0:
                    body = (b"<!DOCTYPE html><html><head><title>503 Service Unavailable</title></head>"
                            b"<body><h1>Checking your browser...</h1></body></html>")
                else:  # broken XML: bare ampersands, an undefined entity, a control byte, no closing tags
                    body = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>Broken Gazette</title>'
                            b"<item><title>Fish & chips shop wins award &nbsp; \x01</title>"
                            b"<link>https://brokengazette.example/fish?utm_source=rss&utm_medium=feed</link>"
                            b"<description>Local fish & chips shop named best in region.</description></item>"
                            b"<item><title></title><description></description></item>")
                out.append(RawPayload(feed.feed_id, f"{feed.site}/rss", fetched, 200, body,
                                      content_type="application/rss+xml", publisher=feed.publisher, tier=feed.tier))
                continue
            items: list[tuple[str | None, str, str, int, str | None, str]] = []
            for entry in COVERAGE.get(feed.feed_id, []):
                syndicated = entry.endswith("*")
                sid = entry.rstrip("*")
                s_hour, title, paras = _story(sid)
                if s_hour > hour:
                    continue
                pub = START_MS + s_hour * HOUR_MS + (0 if syndicated or feed.feed_id == WIRE_HOME.get(sid) else 40 * 60_000)
                if syndicated:  # the wire text, re-published under the portal's own URL
                    home = BY_ID[WIRE_HOME[sid]]
                    link = story_url(feed, sid) + "-wire"
                    guid = story_url(home, sid)  # many portals keep the wire GUID
                    body_paras = paras
                    t = title
                else:
                    link = story_url(feed, sid)
                    guid = link
                    own = feed.feed_id != WIRE_HOME.get(sid)  # the outlet's own write-up
                    t = title.split(",")[0] if own else title
                    body_paras = [*paras[1:], paras[0]] if own and len(paras) > 2 else paras
                # a revised article: the wire corrects the quake magnitude from hour 8 on
                if sid == "quake" and hour >= 8 and (feed.feed_id == "wire-world" or syndicated):
                    t = t.replace("Strong earthquake", "Magnitude 7.3 earthquake")
                    body_paras = [p.replace("magnitude 7.1", "magnitude 7.3") for p in body_paras]
                    if feed.feed_id == "wire-world":
                        body_paras = [*body_paras, "This story has been corrected to show the magnitude was 7.3, not 7.1."]
                # tracking-parameter variants of the same URL
                if feed.feed_id == "daily-herald" and poll_no >= 2:
                    link = link + "?utm_source=rss&utm_medium=feed&fbclid=IwAR0x"
                body_html = "".join(P.format(escape(p)) for p in body_paras)
                items.append((t, link, guid, pub, body_html, "World" if sid in ("quake", "heat", "election") else "Business"))
            if feed.feed_id == "city-blog" and poll_no == 3:
                items.append((None, f"{feed.site}/empty", f"{feed.site}/empty", fetched - HOUR_MS, None, "Misc"))
            # the aggregator re-posts the herald's stadium piece with tracking parameters
            if feed.feed_id == "aggregator" and hour >= 8:
                herald = BY_ID["daily-herald"]
                items.append(("City council approves new stadium (Daily Herald)",
                              story_url(herald, "stadium") + "?utm_campaign=agg&ref=hub",
                              f"agg-{poll_no}-stadium", START_MS + 5 * HOUR_MS, "<p>Via Daily Herald.</p>", "Local"))
            out.append(RawPayload(feed.feed_id, f"{feed.site}/feed", fetched, 200, _doc(feed, items),
                                  content_type="application/xml", publisher=feed.publisher, tier=feed.tier,
                                  category="news", language="en"))
    # a last heartbeat (03-04 08:00) closes the morning brief of the 4th on event time
    out.append(RawPayload("__tick__", "", START_MS + 50 * HOUR_MS, 0, None))
    out.sort(key=lambda p: p.fetched_at_ms)
    return out
