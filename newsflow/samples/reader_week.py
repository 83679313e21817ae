"""A simulated week for interest profiles: three feeds (science, sports, news), one new item
per feed every 3 hours for 8 days, and a simulated reader who reads the science items and skips
the sports ones. Deterministic (seeded); used by the profile tests and ``newsflow profile demo``."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape

from newsflow.core.timeutil import iso_to_ms
from newsflow.model.records import RawPayload
from newsflow.model.vocab import Disposition
from newsflow.wire.codec import interaction_record

START_MS = iso_to_ms("2026-03-02T00:00:00Z")
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

_WORDS = {
    "science": (
        ["Astronomers", "Biologists", "Physicists", "Chemists", "Geologists", "Climate scientists",
         "Neuroscientists", "Researchers"],
        ["discover", "map", "measure", "detect", "sequence", "observe", "model", "confirm"],
        ["a distant exoplanet atmosphere", "ancient microbe genomes", "dark matter halos",
         "a new quantum material", "deep ocean volcanoes", "glacier melt rates", "neural circuits of memory",
         "a comet's icy nucleus", "protein folding pathways", "gravitational wave echoes"],
        "The study, published in a peer-reviewed journal, used telescope data, laboratory experiments "
        "and genome sequencing. Scientists said the research could change how the physics and biology "
        "of the phenomenon are understood.",
    ),
    "sports": (
        ["Rovers", "United", "City", "Athletic", "Wanderers", "Rangers", "Olympic", "Albion"],
        ["beat", "edge", "thrash", "hold", "stun", "outlast", "overpower", "draw with"],
        ["rivals in the league derby", "the champions in extra time", "visitors after a late goal",
         "leaders in a cup quarter-final", "the title favourites at home", "a striker's hat-trick side",
         "promoted rivals on penalties", "a stubborn defence away", "their neighbours in the playoff",
         "the holders in the semi-final"],
        "The coach praised the squad after the match; the goalkeeper made saves in the second half and "
        "the striker scored twice. Fans filled the stadium for the league fixture.",
    ),
    "news": (
        ["Council", "Parliament", "Ministers", "Regulators", "Mayor", "Unions", "Senators", "Governors"],
        ["approve", "debate", "delay", "reject", "review", "announce", "propose", "fund"],
        ["a housing budget", "new transport fares", "a water pricing plan", "school funding rules",
         "a hospital expansion", "port redevelopment", "a tax reform package", "road safety measures",
         "an energy subsidy", "public library hours"],
        "Officials said the decision follows months of consultation with residents and businesses; "
        "opposition members criticised the timetable and asked for an independent review.",
    ),
}
FEEDS = (("sci-daily", "Science Daily", "science"), ("sports-wire", "Sports Wire", "sports"),
         ("city-news", "City News", "news"))


def _title(rng: random.Random, cat: str, n: int) -> str:
    who, verb, what, _ = _WORDS[cat]
    return f"{rng.choice(who)} {rng.choice(verb)} {rng.choice(what)} ({n})"


def week_payloads(days: int = 8, every_h: int = 3) -> list[RawPayload]:
    """One RSS poll per feed every ``every_h`` hours, each with the feed's newest 4 items."""
    rng = random.Random(13)
    items: dict[str, list[tuple[str, str, int, str]]] = {f: [] for f, _, _ in FEEDS}
    out: list[RawPayload] = []
    n = 0
    for t in range(0, days * DAY_MS, every_h * HOUR_MS):
        fetched = START_MS + t + 5 * 60_000
        for feed_id, publisher, cat in FEEDS:
            n += 1
            vocab = _WORDS[cat][3].replace(",", "").replace(";", "").replace(".", "").split()
            body = " ".join(rng.sample(vocab, 18)) + "."
            items[feed_id].append((_title(rng, cat, n), f"https://{feed_id}.example.org/a/{n}", START_MS + t, body))
            xml = "".join(
                f"<item><title>{escape(title)}</title><link>{link}</link><guid>{link}</guid>"
                f"<pubDate>{_rfc822(pub)}</pubDate><description>{escape(title + '. ' + body)}</description></item>"
                for title, link, pub, body in reversed(items[feed_id][-4:])
            )
            doc = (f'<?xml version="1.0"?><rss version="2.0"><channel><title>{publisher}</title>'
                   f"<link>https://{feed_id}.example.org/</link><description>d</description>{xml}</channel></rss>")
            out.append(RawPayload(feed_id, f"https://{feed_id}.example.org/rss", fetched, 200, doc.encode(),
                                  content_type="application/rss+xml", publisher=publisher, tier="T2",
                                  category=cat, language="en"))
    out.append(RawPayload("__tick__", "", START_MS + days * DAY_MS + HOUR_MS, 0, None))
    return out


def _rfc822(ms: int) -> str:
    from datetime import UTC, datetime
    from email.utils import format_datetime

    return format_datetime(datetime.fromtimestamp(ms / 1000, tz=UTC))


def reader_interactions(articles: Iterable[Mapping[str, Any]], profile: str = "reader", *,
                        reads: str = "science", skips: str = "sports", until_ms: int | None = None,
                        ) -> list[dict[str, Any]]:
    """The simulated reader: 40 min after each unique article is fetched, reads it (90 s) when
    its category is ``reads``, skips it when ``skips``; in event-time order."""
    out = []
    for a in articles:
        if a.get("disposition") != Disposition.UNIQUE:
            continue
        at = iso_to_ms(a["fetched_at"]) + 40 * 60_000
        if until_ms is not None and at >= until_ms:
            continue
        if a.get("category") == reads:
            out.append(interaction_record(profile, "read", at, article_id=a["article_id"], dwell_s=90.0))
        elif a.get("category") == skips:
            out.append(interaction_record(profile, "skip", at, article_id=a["article_id"]))
    out.sort(key=lambda r: (r["at"], r["article_id"]))
    return out
