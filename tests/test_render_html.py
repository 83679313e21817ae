"""Digest rendering: Markdown, and HTML checked in a real headless Chromium (Debian package
``chromium``). Under CI=true a missing chromium fails the test instead of skipping it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import main as digest_cli
from newsflow.core.timeutil import HOUR_MS
from newsflow.digest.assemble import assemble_digest
from newsflow.digest.render import safe_url, to_html, to_markdown
from newsflow.digest.schedule import DigestWindow
from newsflow.digest.trends import digest_memory
from tests.test_digest import START, WIN, rec, standard_records

SECTIONS = ["Top Stories", "Noteworthy", "Also Mentioned", "Feed Health Report"]


def sample_digest() -> dict:
    prev_recs = [rec("apple", 50 + i, 80, story="apple-story", hours=-3) for i in range(2)]
    prev = assemble_digest(prev_recs, DigestWindow("morning_brief", START - 24 * HOUR_MS, START))
    recs = standard_records()
    evil = rec("ebola", 7, 30, story="evil", variant="x")
    evil["title"] = 'Ebola <script>alert("x")</script> & "quotes"'
    evil["url"] = "javascript:alert(1)"
    recs.append(evil)
    health = {
        "feeds_polled": 2,
        "polls": 8,
        "successful": 4,
        "errors": 4,
        "success_rate": 0.5,
        "unhealthy_feeds": ["b<i>"],
        "feeds": [
            {"feed_id": "b<i>", "polls": 3, "successful": 0, "errors": 3, "success_rate": 0.0,
             "last_status": "http_error", "reliability": 0.1, "alert": None, "unhealthy": True},
            {"feed_id": "a", "polls": 5, "successful": 4, "errors": 1, "success_rate": 0.8,
             "last_status": "ok", "reliability": 0.8, "alert": None, "unhealthy": False},
        ],
    }  # fmt: skip
    return assemble_digest(recs, WIN, previous=digest_memory(prev), feed_health=health)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def dump_dom(html_path: Path) -> str:
    exe = find_chromium()
    if exe is None:
        msg = "chromium not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            html_path.resolve().as_uri(),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


class DomIndex(HTMLParser):
    """Headings, links and script tags of the DOM chromium serialized."""

    def __init__(self) -> None:
        super().__init__()
        self.h2: list[str] = []
        self.links: list[str] = []
        self.scripts = 0
        self.sections: list[str] = []
        self.badges: list[str] = []
        self.tables = 0
        self._in_h2 = False
        self._in_badge = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2":
            self._in_h2 = True
            self.h2.append("")
        elif tag == "a":
            self.links.append(a.get("href") or "")
        elif tag == "script":
            self.scripts += 1
        elif tag == "section":
            self.sections.append(a.get("data-section") or "")
        elif tag == "span" and "badge" in (a.get("class") or ""):
            self._in_badge = True
            self.badges.append("")
        elif tag == "table":
            self.tables += 1

    def handle_endtag(self, tag):
        if tag == "h2":
            self._in_h2 = False
        if tag == "span":
            self._in_badge = False

    def handle_data(self, data):
        if self._in_h2:
            self.h2[-1] += data
        if self._in_badge:
            self.badges[-1] += data


def test_html_in_headless_chromium(tmp_path):
    d = sample_digest()
    page = tmp_path / "digest.html"
    page.write_text(to_html(d), encoding="utf-8")
    dom = dump_dom(page)
    idx = DomIndex()
    idx.feed(dom)
    assert [h.strip() for h in idx.h2] == SECTIONS
    assert idx.sections == SECTIONS
    assert idx.scripts == 0  # the <script> in a title stayed text
    assert "Ebola <script>" not in dom and "&lt;script&gt;" in dom
    assert "TRENDING" in idx.badges
    assert idx.tables == 1
    assert any(h.startswith("https://reuters.example/apple/") for h in idx.links)
    assert not any(h.lower().startswith("javascript:") for h in idx.links)
    assert "b&lt;i&gt;" in dom


def test_markdown_sections_and_escaping():
    d = sample_digest()
    md = to_markdown(d)
    heads = re.findall(r"^## (.+)$", md, flags=re.MULTILINE)
    assert heads == SECTIONS
    assert md.startswith("# Morning Brief")
    assert "**\\[TRENDING\\]**" in md or "**[TRENDING]**" in md
    assert "javascript:" not in md
    assert "\\<script\\>" in md
    assert "| Feed | Polls |" in md
    top = next(s for s in d["sections"] if s["name"] == "Top Stories")["items"][0]
    assert f"Related: {top['related_count']} more from" in md


def test_safe_url():
    assert safe_url("https://a.example/x?y=1") == "https://a.example/x?y=1"
    for bad in ("javascript:alert(1)", "data:text/html,x", "//a.example", None, 'https://a/"x'):
        assert safe_url(bad) is None


def test_cli_render(tmp_path, capsys):
    d = sample_digest()
    other = dict(d, digest_id="evening_recap:2026-03-09T18:00:00Z", title="Evening Recap")
    f = tmp_path / "digests.jsonl"
    f.write_bytes(orjson.dumps(d) + b"\n" + orjson.dumps(other) + b"\n")
    assert digest_cli(["digest", "render", str(f), "--digest-id", d["digest_id"]]) == 0
    assert capsys.readouterr().out.startswith("# Morning Brief")
    out = tmp_path / "x.html"
    assert digest_cli(["digest", "render", str(f), "--format", "html", "--out", str(out)]) == 0
    assert "<title>Evening Recap" in out.read_text()
    assert digest_cli(["digest", "render", str(f), "--digest-id", "nope"]) == 2


def test_counts_are_pluralised_and_an_empty_also_mentioned_is_not_printed() -> None:
    d = assemble_digest([rec("apple", 0, 80)], WIN)
    d["feed_health"].update({"feeds_polled": 1, "successful": 1, "errors": 1, "new_articles": 1,
                             "duplicates_removed": 1})
    md, html = to_markdown(d), to_html(d)
    for text in (md, html):
        assert "1 articles" not in text and "1 errors" not in text and "1 feeds" not in text
        assert "1 duplicates" not in text and "1 new articles" not in text
        assert "Also Mentioned" not in text  # no items: no section
    assert "1 article ·" in md and "1 error" in md
    assert "Noteworthy" in md  # the main sections say "Nothing in this section." when empty


def test_emerging_topic_names_are_labels_not_cut_titles() -> None:
    prev = assemble_digest([], DigestWindow("morning_brief", START - 24 * HOUR_MS, START))
    recs = [rec("ebola", i, 75, story="ebola-s", pub=i) for i in range(3)]
    d = assemble_digest(recs, WIN, previous=digest_memory(prev))
    [name] = d["feed_health"]["emerging_topics"]
    assert name == _all_labels(d)[0] and not name.endswith(("in", "health", "…"))


def _all_labels(d: dict) -> list[str]:
    return [it["label"] for s in d["sections"] for it in s["items"]]


def test_a_label_that_is_the_lead_headline_is_shown_once() -> None:
    recs = [rec("ebola", i, 75, story="ebola-s", pub=i) for i in range(3)]
    d = assemble_digest(recs, WIN)
    [it] = [it for s in d["sections"] for it in s["items"]]
    assert it["label"] == it["lead"]["title"]
    md, html = to_markdown(d), to_html(d)
    top_md = md.split("## Top Stories", 1)[1].split("*Related", 1)[0]
    top_html = html.split("<h2>Top Stories</h2>", 1)[1].split('<div class="related">', 1)[0]
    assert top_md.count(it["label"]) == 1 and top_html.count(f">{it['label']}<") == 1
    assert it["lead"]["url"] in md and it["lead"]["url"] in html


def test_one_line_summaries_do_not_stop_at_an_abbreviation() -> None:
    # real NPR leads (2026-08-20) whose one-line summary used to read "Dr." and "The U.S."
    d = assemble_digest([rec("apple", 0, 55)], WIN)
    [item] = [it for s in d["sections"] for it in s["items"]]
    item["summary"] = ("The suspected launch comes a day after North Korea shrugged off a U.S. decision "
                       "to scale back drills. Dr. Kim said so.")
    md, html = to_markdown(d), to_html(d)
    for text in (md, html):
        assert "shrugged off a U.S. decision to scale back drills." in text
        assert "Dr. Kim" not in text  # one line: the first sentence only


def test_emerging_and_declining_topics_name_each_label_once() -> None:
    # real replay, morning brief of 2020-05-06: "TV Patrol North Luzon" was listed twice (two
    # clusters of one programme's uploads under one label)
    prev = assemble_digest([], DigestWindow("morning_brief", START - 24 * HOUR_MS, START))
    recs = [rec("ebola", i, 75, story="ebola-s", pub=i) for i in range(3)]
    recs += [rec("apple", i, 70, story="apple-s", pub=i) for i in range(3)]
    for r in recs:
        r["title"] = "TV Patrol North Luzon"
    d = assemble_digest(recs, WIN, previous=digest_memory(prev))
    names = d["feed_health"]["emerging_topics"]
    assert names == ["TV Patrol North Luzon"]


def test_a_summary_that_only_repeats_the_headline_is_not_printed() -> None:
    # real replay, morning brief of 2020-05-06: a CNN item without a description showed its
    # headline twice ("Europe slowly reopens as WHO chief warns: ..." as the summary too)
    title = "Europe slowly reopens as WHO chief warns: 'There can be no going back to business as usual'"
    for score in (75, 55):  # Top Stories, Noteworthy
        d = assemble_digest([rec("apple", 0, score)], WIN)
        [item] = [it for s in d["sections"] for it in s["items"]]
        item["lead"]["title"] = item["label"] = title
        item["summary"] = title
        md, html = to_markdown(d), to_html(d)
        assert md.count("Europe slowly reopens") == 1 and html.count("Europe slowly reopens") == 1
        item["summary"] = "Europe is reopening slowly."  # a summary of its own is printed
        assert "Europe is reopening slowly." in to_markdown(d) and "Europe is reopening slowly." in to_html(d)


def test_a_label_that_is_the_first_words_of_the_headline_is_not_shown_beside_it() -> None:
    # real replay, morning brief of 2020-05-06: "5-year-old who started driving to California to buy
    # a Lamborghini finally got to ride …" above the whole headline, and "Europe slowly reopens as
    # WHO chief warns" before "Europe slowly reopens as WHO chief warns: 'There can be no ...'"
    cases = [("5-year-old who started driving to California to buy a Lamborghini finally got to ride …",
              "5-year-old who started driving to California to buy a Lamborghini finally got to ride in one"),
             ("Europe slowly reopens as WHO chief warns",
              "Europe slowly reopens as WHO chief warns: 'There can be no going back to business as usual'")]
    for label, title in cases:
        for score in (75, 55):  # Top Stories, Noteworthy
            d = assemble_digest([rec("apple", 0, score)], WIN)
            [item] = [it for s in d["sections"] for it in s["items"]]
            item["label"], item["lead"]["title"] = label, title
            md, html = to_markdown(d), to_html(d)
            first = title.split()[0]
            assert md.count(first) == 1 and html.count(first) == 1, (label, score)
            assert title.replace("'", "&#x27;") in html or title in html
    # a label that says something else (the story's entity first) is still shown with the headline
    d = assemble_digest([rec("apple", 0, 75)], WIN)
    [item] = [it for s in d["sections"] for it in s["items"]]
    item["label"], item["lead"]["title"] = "Neil Ferguson: Lockdown professor steps down …", "Lockdown professor steps down"
    assert "Neil Ferguson" in to_markdown(d) and to_markdown(d).count("Lockdown professor") == 2


def test_a_partial_digest_says_in_progress_as_of_the_time_reached() -> None:
    # real replay, morning brief of 2020-05-06 (final: false, the archive ends at 22:08): its
    # title read like the whole window's, "Morning Brief — 2020-05-06 07:00 UTC – 2020-05-07 07:00 UTC"
    recs = standard_records()
    final = assemble_digest(recs, WIN)
    partial = assemble_digest(recs, WIN, final=False, as_of_ms=START + 15 * HOUR_MS + 8 * 60_000)
    unknown = assemble_digest(recs, WIN, final=False)  # the time reached not passed on
    rng = "2026-03-09 07:00 UTC – 2026-03-10 07:00 UTC"
    assert to_markdown(partial).startswith(f"# Morning Brief (in progress, as of 2026-03-09 22:08 UTC) — {rng}\n")
    assert to_markdown(unknown).startswith(f"# Morning Brief (in progress) — {rng}\n")
    assert to_markdown(final).startswith(f"# Morning Brief — {rng}\n")
    html = to_html(partial)
    assert f"<title>Morning Brief (in progress, as of 2026-03-09 22:08 UTC) — {rng}</title>" in html
    h1 = re.search(r"<h1>(.*?)</h1>", html).group(1)
    assert re.sub(r"<[^>]+>", "", h1) == "Morning Brief in progress, as of 2026-03-09 22:08 UTC"
    assert 'class="in-progress"' in h1
    assert "in progress, as of 2026-03-09 22:08 UTC: the window was still open" in html.split("<footer>", 1)[1]
    assert re.sub(r"<[^>]+>", "", re.search(r"<h1>(.*?)</h1>", to_html(unknown)).group(1)) == "Morning Brief in progress"
    for text in (to_markdown(final), to_html(final)):
        assert "in progress" not in text and "in-progress\"" not in text
    assert "<h1>Morning Brief</h1>" in to_html(final)


def test_cli_render_defaults_to_the_last_final_digest(tmp_path, capsys) -> None:
    # real replay: `digest render digests.jsonl` rendered the last line, the partial weekly roundup
    d = sample_digest()
    evening = dict(d, digest_id="evening_recap:2026-03-09T18:00:00Z", title="Evening Recap")
    weekly = dict(d, digest_id="weekly_roundup:2026-03-08T08:00:00Z", title="Weekly Roundup", final=False)
    f = tmp_path / "digests.jsonl"
    f.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in (d, evening, weekly)))
    assert digest_cli(["digest", "render", str(f)]) == 0
    assert capsys.readouterr().out.startswith("# Evening Recap —")
    only_partial = tmp_path / "partial.jsonl"  # none final: the last one, marked in progress
    only_partial.write_bytes(b"".join(orjson.dumps(dict(x, final=False)) + b"\n" for x in (d, weekly)))
    assert digest_cli(["digest", "render", str(only_partial)]) == 0
    assert capsys.readouterr().out.startswith("# Weekly Roundup (in progress) —")
    assert digest_cli(["digest", "render", str(f), "--digest-id", weekly["digest_id"]]) == 0
    assert capsys.readouterr().out.startswith("# Weekly Roundup (in progress) —")


def test_an_empty_section_says_why() -> None:
    from newsflow.wire.contracts import validate

    d = assemble_digest([rec("apple", 0, 55), rec("fed", 1, 20)], WIN)  # best importance below 70
    validate("digests", orjson.dumps(d))
    top = next(s for s in d["sections"] if s["name"] == "Top Stories")
    assert top["items"] == [] and top["empty_reason"].startswith("no story reached importance 70 yet (the best: ")
    md, html = to_markdown(d), to_html(d)
    from newsflow.digest.render import md_escape

    assert f"_Nothing in this section: {md_escape(top['empty_reason'])}._" in md
    assert f"Nothing in this section: {top['empty_reason']}." in html
    empty = assemble_digest([], WIN)
    assert "Nothing in this section: no article in this window yet." in to_markdown(empty)
