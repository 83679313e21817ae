"""A per-item work budget before the HTML sanitizer: no payload stalls a partition.

The sanitizer (nh3/html5ever) is quadratic in nesting depth: 7 items of ~20,000 nested
``<div>``s (0.7 MB, under every size cap) cost ~18 s of one partition. A linear pre-scan of the
nesting depth turns such an item into a ``html_too_deep`` dead letter, the sanitizer runs once
per item, and the first ``<img>`` of a body is found in linear time.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from newsflow.cli.main import run_file_flow
from newsflow.config import Settings
from newsflow.connectors.files import write_archive
from newsflow.feeds.normalize import normalize_payload
from newsflow.model.records import RawPayload
from newsflow.text.html import (
    MAX_HTML_DEPTH,
    first_img_src,
    html_depth,
    html_to_text,
    sanitize_html,
)

T0 = 1_772_431_200_000
DEEP = "<div>" * 19_990 + "deep text"  # under the 100,000-char body cap


def deep_feed(items: int = 7) -> bytes:
    body = "".join(f"<item><title>Deep item {i}</title><link>https://deep.example/{i}</link>"
                   f"<description><![CDATA[{DEEP}]]></description>"
                   "<pubDate>Mon, 02 Mar 2026 05:00:00 GMT</pubDate></item>" for i in range(items))
    return (f'<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Deep</title>{body}'
            '<item><title>A normal item</title><link>https://deep.example/ok</link>'
            "<description><![CDATA[<p>Plain <b>words</b> and <img src='https://deep.example/a.jpg'>.</p>]]>"
            "</description><pubDate>Mon, 02 Mar 2026 05:00:00 GMT</pubDate></item></channel></rss>").encode()


def test_the_depth_scan_is_linear_and_matches_the_parser_s_nesting() -> None:
    assert html_depth("<p>a<p>b<p>c<br><img src=x>") == 0  # implied ends and void elements
    assert html_depth("<div><span>x</div></div><div>y</div>") == 2  # a close pops what it closes
    assert html_depth("<div></x>" * 1000) == 1000  # a stray close hides nothing
    assert html_depth("<ul><li><ul><li><ul>") == 3
    t = time.perf_counter()
    assert html_depth("<div>" * 100_000, limit=MAX_HTML_DEPTH) > MAX_HTML_DEPTH
    assert time.perf_counter() - t < 0.2


def test_a_deep_payload_is_dead_lettered_item_by_item_in_well_under_a_second() -> None:
    payload = RawPayload("deep", "https://deep.example/rss", T0, 200, deep_feed(), publisher="Deep")
    assert 690_000 < len(payload.body or b"") < 800_000
    t = time.perf_counter()
    res = normalize_payload(payload)
    took = time.perf_counter() - t
    assert took < 1.0, took
    assert [d.reason for d in res.deadletters] == ["html_too_deep"] * 7
    assert all("nests HTML elements more than" in d.detail for d in res.deadletters)
    assert [d.item_index for d in res.deadletters] == list(range(7))
    assert [a.title for a in res.articles] == ["A normal item"]
    ok = res.articles[0]
    assert ok.body_text == "Plain words and ." and "<b>words</b>" in ok.body_html
    assert [m.url for m in ok.media] == ["https://deep.example/a.jpg"]


def test_the_deep_payload_through_the_flow(tmp_path: Path) -> None:
    write_archive([RawPayload("deep", "https://deep.example/rss", T0, 200, deep_feed(), publisher="Deep"),
                   RawPayload("deep", "https://deep.example/rss", T0 + 3_600_000, 200, deep_feed(),
                              publisher="Deep")], tmp_path / "in.jsonl")
    t = time.perf_counter()
    run_file_flow(str(tmp_path / "in.jsonl"), str(tmp_path / "out"), Settings())
    took = time.perf_counter() - t
    assert took < 4.0, took  # (the flow's start-up included; two polls of 7 deep items)
    dls = [orjson.loads(x) for x in (tmp_path / "out" / "deadletter.jsonl").read_bytes().splitlines()]
    assert [d["reason"] for d in dls] == ["html_too_deep"] * 14 and {d["feed_id"] for d in dls} == {"deep"}
    arts = [orjson.loads(x) for x in (tmp_path / "out" / "articles.jsonl").read_bytes().splitlines()]
    assert [a["title"] for a in arts] == ["A normal item"]


def test_text_fields_outside_the_body_fall_back_to_a_linear_strip() -> None:
    t = time.perf_counter()
    assert html_to_text("<span>" * 50_000 + "a &amp; b") == "a & b"
    assert time.perf_counter() - t < 0.5


def test_the_first_image_is_found_in_linear_time() -> None:
    t = time.perf_counter()
    assert first_img_src("<img " * 20_000) is None
    assert first_img_src("<IMG alt='x' SRC=\"https://a.example/1.jpg\"><img src=b>") == "https://a.example/1.jpg"
    assert first_img_src("<imgx src=no><img data=1><img src='c.png'") == "c.png"
    assert time.perf_counter() - t < 0.2


def test_sanitized_html_is_the_same_as_before() -> None:
    frag = "<p onclick='x()'>Hi <script>bad()</script><b>there</b><iframe src=x></iframe></p>"
    assert sanitize_html(frag) == '<p>Hi <b>there</b></p>'
