"""The XSS corpus through the whole flow into the desk: feeds whose titles, summaries, link
schemes, categories, publisher names and feed ids carry script payloads are written as
``feeds.raw`` records, run through ``newsflow demo --input``, served by ``newsflow serve --from``
and opened in headless chromium. On every page: no payload ran (``window.__xss`` unset, the
document title untouched), no ``javascript:``/``data:`` link and no injected element is in the
DOM, and the payloads that reach the page show as text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import orjson
import pytest
from selenium.webdriver.common.by import By

from newsflow.cli.main import main as cli_main
from newsflow.connectors.files import write_archive
from newsflow.core.timeutil import iso_to_ms
from newsflow.model.records import RawPayload
from tests.serve_browser import browser, serving

X = "window.__xss=1"
IMG = f'<img src=x onerror="{X}">'
TITLE_JS = '</title><script>document.title="pwned"</script>'
PUBLISHER = f'{IMG}Evil</b> "News" <script>{X}</script>'
#: (guid, title as the feed sends it (escaped once more into the XML), link, summary)
ITEMS = [
    ("t1", f"<script>{X}</script>Harbour bridge closed after {IMG} crash", "https://evil.example/a1",
     f'<p>Summary <script>{X}</script>{IMG}<svg onload="{X}"></svg></p>'),
    ("t2", f'Storm "><svg/onload={X}> floods {TITLE_JS} valley', f"javascript:{X}", f"javascript:{X}"),
    ("t3", "Markets rally &lt;b&gt;bold&lt;/b&gt; {{7*7}} ${7*7} as oil slides",
     f"data:text/html,<script>{X}</script>", f'<a href="javascript:{X}">click</a><iframe src="javascript:{X}"></iframe>'),
    ("t4", "Election count resumes in three districts", f"  JaVaScRiPt:{X}", "Plain summary."),
    # entity-encoded twice: the title the flow keeps is the markup itself, as text
    ("t5", f"Ferry strike ends &lt;img src=x onerror=&quot;{X}&quot;&gt; {escape(TITLE_JS)}", "https://evil.example/a5",
     f"&lt;script&gt;{X}&lt;/script&gt;"),
]


def xss_feed(items: list[tuple[str, str, str, str]]) -> bytes:
    out = ['<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
           f"<title>{escape(f'<script>{X}</script>')}</title><link>https://evil.example/</link><description>x</description>"]
    for i, (gid, title, link, summary) in enumerate(items):
        out.append(f'<item><guid isPermaLink="false">{gid}</guid><title>{escape(title)}</title>'
                   f"<link>{escape(link)}</link><description>{escape(summary)}</description>"
                   f"<category>{escape(f'<script>{X}</script>news')}</category>"
                   f"<pubDate>Mon, 02 Mar 2026 0{6 + i}:00:00 GMT</pubDate></item>")
    return ("".join(out) + "</channel></rss>").encode()


def corpus() -> list[RawPayload]:
    at = iso_to_ms("2026-03-02T12:00:00Z")
    return [
        RawPayload(feed_id="xss-feed", url="https://evil.example/feed", fetched_at_ms=at, status=200,
                   body=xss_feed(ITEMS), publisher=PUBLISHER, tier="T2", content_type="application/rss+xml"),
        RawPayload(feed_id=f'xss"><script>{X}</script>', url="https://evil2.example/feed", fetched_at_ms=at + 60_000,
                   status=200, body=xss_feed([("u1", "Second feed reports the bridge closure", "https://evil2.example/b", "x")]),
                   publisher=f"{IMG}Second", tier="T3", content_type="application/rss+xml"),
    ]


@pytest.fixture(scope="module")
def xss_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("desk-xss")
    write_archive(corpus(), root / "feeds.raw.jsonl")
    assert cli_main(["demo", "--input", str(root / "feeds.raw.jsonl"), "--out", str(root / "out")]) == 0
    return root / "out"


@pytest.fixture(scope="module")
def page(xss_dir: Path) -> Iterator[tuple[str, Any]]:
    with serving("--from", str(xss_dir)) as base, browser() as d:
        yield base, d


def assert_inert(d: Any, title: str) -> None:
    """Nothing of the corpus ran or became markup on the page ``d`` shows."""
    assert d.execute_script("return window.__xss") is None
    assert d.title == title
    for a in d.find_elements(By.CSS_SELECTOR, "a[href]"):
        href = a.get_attribute("href")
        assert re.match(r"^https?://", href), href  # (relative links resolve to http://127.0.0.1)
    assert not d.find_elements(By.CSS_SELECTOR, "img, iframe, object, embed, [onerror], [onload], body svg:not(.timeline)")
    assert len(d.find_elements(By.TAG_NAME, "script")) <= 1  # desk.js only
    for s in d.find_elements(By.TAG_NAME, "script"):
        assert s.get_attribute("src").endswith("/static/desk.js")


def test_the_corpus_reaches_the_records(xss_dir: Path) -> None:
    """The payloads survive the flow (else the page tests could not fail): the publisher names,
    the link schemes of the leads and the twice-encoded title are in the stories records."""
    stories = [orjson.loads(x) for x in (xss_dir / "stories.jsonl").read_bytes().splitlines()]
    assert any(r["lead"]["publisher"] == PUBLISHER for r in stories)
    assert {str(r["lead"]["canonical_url"]).strip().lower().split(":")[0] for r in stories} >= {"javascript", "data"}
    assert any("<img src=x onerror=" in r["label"] and "</title><script>" in r["label"] for r in stories)


def test_the_board_shows_the_payloads_as_text_and_runs_none(page: tuple[str, Any]) -> None:
    base, d = page
    d.get(base + "/")
    assert_inert(d, "Board — newsflow desk")
    cards = d.find_elements(By.CSS_SELECTOR, "#board > li")
    assert len(cards) >= 5
    text = d.find_element(By.ID, "board").text
    assert PUBLISHER in text  # the publisher name, as written
    assert '<img src=x onerror="window.__xss=1">' in text and "</title><script>document.title=" in text
    # the leads with javascript: or data: links are text, not links
    assert sum(1 for c in cards if not c.find_element(By.CSS_SELECTOR, '[data-f="lead_link"]').get_attribute("href")) >= 3
    for q in ("script", "onerror", "javascript"):  # the filters echo the query as text
        d.get(f"{base}/?q=%3Cscript%3E{X}%3C%2Fscript%3E{q}&publisher=%22%3E%3Cimg+src%3Dx+onerror%3D{X}%3E")
        assert_inert(d, "Board — newsflow desk")
        assert d.find_element(By.NAME, "q").get_attribute("value") == f"<script>{X}</script>{q}"


def test_story_pages_digests_and_feeds_run_none(page: tuple[str, Any], xss_dir: Path) -> None:
    base, d = page
    d.get(base + "/")
    ids = [c.get_attribute("data-story-id") for c in d.find_elements(By.CSS_SELECTOR, "#board > li")]
    labels = {c.get_attribute("data-story-id"): c.find_element(By.CSS_SELECTOR, '[data-f="label"]').text
              for c in d.find_elements(By.CSS_SELECTOR, "#board > li")}
    for sid in ids:
        d.get(f"{base}/story/{sid}")
        assert_inert(d, f"{labels[sid]} — newsflow desk")  # (the label's </title> is text)
        assert IMG in d.find_element(By.CSS_SELECTOR, "table.members").text  # (every publisher carries it)
    d.get(base + "/digests")
    assert_inert(d, "Digests — newsflow desk")
    links = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "table.archive a")]
    assert links
    for href in links:  # rendered by newsflow.digest.render.to_html
        d.get(href)
        assert d.execute_script("return window.__xss") is None
        assert "pwned" not in d.title
        assert not d.find_elements(By.CSS_SELECTOR, "script, img, iframe, [onerror], [onload], a[href^='javascript'], a[href^='data']")
    d.get(base + "/feeds")
    assert_inert(d, "Feeds — newsflow desk")
    assert f'xss"><script>{X}</script>' in d.find_element(By.CSS_SELECTOR, "table.feeds").text
