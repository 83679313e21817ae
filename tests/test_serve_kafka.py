"""The live desk on a REAL Kafka broker: ``newsflow run`` follows feeds.raw, ``newsflow serve
--brokers`` follows the output topics, and a story produced while the board is open in headless
chromium appears on it without a reload, within 2 s of its ``stories`` record (the latency from
the record's timestamp to the DOM is printed)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from email.utils import formatdate
from pathlib import Path
from xml.sax.saxutils import escape

import orjson
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.poller.records import TICK_FEED_ID
from newsflow.connectors.topics import ensure_topics, produce_values
from newsflow.model.records import RawPayload
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from tests.kafka_fixture import consume_all
from tests.serve_browser import browser, serving

pytestmark = pytest.mark.kafka

X = "window.__xss=1"
#: the live poll: ten minutes after the sample's last (the flow's event time only moves on)
LIVE_AT_MS = max(p.fetched_at_ms for p in demo_payloads()) + 600_000


def live_payload(title: str, publisher: str) -> RawPayload:
    """One poll of a feed with one new item (its publisher name an XSS payload, shown as text)."""
    body = ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Live</title>'
            "<link>https://live.example.org/</link><description>live</description>"
            f'<item><guid isPermaLink="false">live-{uuid.uuid4().hex}</guid><title>{escape(title)}</title>'
            "<link>https://live.example.org/news/1</link><description>A new story, produced while the board was "
            f"open.</description><pubDate>{formatdate((LIVE_AT_MS - 60_000) / 1000, usegmt=True)}</pubDate>"
            "</item></channel></rss>")
    return RawPayload(feed_id="live-feed", url="https://live.example.org/feed", fetched_at_ms=LIVE_AT_MS,
                      status=200, body=body.encode(), publisher=publisher, tier="T2", content_type="application/rss+xml")


def heartbeats(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """What the poller sends to every partition of feeds.raw every second: a heartbeat tick, so
    the flow's event time passes the last poll and releases its items (a second of event time
    each; ``newsflow.connectors.poller.records.tick_event``)."""
    from confluent_kafka import Producer

    prod = Producer({"bootstrap.servers": bootstrap})
    partitions = sorted(prod.list_topics(topic, timeout=10).topics[topic].partitions)
    at = LIVE_AT_MS
    while not stop.wait(0.5):
        at += 1000
        key, value = encode_raw(RawPayload(feed_id=TICK_FEED_ID, url="", fetched_at_ms=at, status=0, body=None))
        for p in partitions:
            prod.produce(topic, value, key=key, partition=p)
        prod.flush(10)


def test_a_story_produced_live_appears_on_the_open_board(kafka_bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    cfg = tmp_path / "newsflow.toml"
    cfg.write_text("[kafka.topics]\n" + "".join(f'{name} = "{getattr(topics, name)}"\n' for name in Topics().roles()))
    flow: subprocess.Popen[bytes] | None = None
    try:
        # the desk starts first, before its topics exist: it reads each as soon as it appears
        with serving("--brokers", kafka_bootstrap, "--config", str(cfg)) as base, browser() as d:
            d.get(base + "/")
            ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
            demo = [encode_raw(p)[1] for p in demo_payloads()]
            assert produce_values([kafka_bootstrap], topics.raw, demo) == len(demo)
            flow = subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", "run", "--brokers", kafka_bootstrap,
                                     "--config", str(cfg), "--metrics-port", "0"], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            deadline = time.monotonic() + 120
            shown, stable_since = -1, time.monotonic()
            while shown < 1 or time.monotonic() - stable_since < 3:  # the demo's stories, all read
                assert flow.poll() is None, flow.communicate()[0].decode()[-3000:]
                assert time.monotonic() < deadline, "the demo's stories never reached the page"
                n = len(d.find_elements(By.CSS_SELECTOR, "#board > li"))
                if n != shown:
                    shown, stable_since = n, time.monotonic()
                time.sleep(0.3)
            d.execute_script("window.__kept = 42;")  # (gone if the page reloads)
            before = len(d.find_elements(By.CSS_SELECTOR, "#board > li"))

            title = f"Lighthouse keeper rescues {suffix} stranded kayakers in gale"
            publisher = f'<img src=x onerror="{X}">Coast Post'
            assert produce_values([kafka_bootstrap], topics.raw,
                                  [encode_raw(live_payload(title, publisher))[1]]) == 1
            stop = threading.Event()
            ticks = threading.Thread(target=heartbeats, args=(kafka_bootstrap, topics.raw, stop), daemon=True)
            ticks.start()
            deadline = time.monotonic() + 60
            card = None
            while card is None:
                assert time.monotonic() < deadline, "the live story never appeared on the page"
                try:
                    for li in d.find_elements(By.CSS_SELECTOR, "#board > li"):
                        if suffix in li.find_element(By.CSS_SELECTOR, '[data-f="label"]').text:
                            card = li
                except StaleElementReferenceException:  # (a card replaced while it was read)
                    card = None
                time.sleep(0.05)
            seen_at = int(card.get_attribute("data-added-at") or 0)
            stop.set()
            ticks.join()
            assert d.execute_script("return window.__kept") == 42  # no reload
            assert len(d.find_elements(By.CSS_SELECTOR, "#board > li")) == before + 1
            # the card's feed strings are text: the publisher name shows as written, nothing ran
            assert card.find_element(By.CSS_SELECTOR, '[data-f="lead_publisher"]').text == publisher
            assert card.find_element(By.CSS_SELECTOR, '[data-f="lead_link"]').get_attribute("href") == \
                "https://live.example.org/news/1"
            assert d.execute_script("return window.__xss") is None
            assert not d.find_elements(By.CSS_SELECTOR, "#board img")

        recs = [(m.timestamp()[1], orjson.loads(m.value())) for m in consume_all(kafka_bootstrap, topics.stories)
                if m.value() is not None]
        first = min(ts for ts, r in recs if suffix in r["label"])
        latency_ms = seen_at - first
        print(f"\nstories record -> DOM: {latency_ms} ms (record timestamp {first}, on the page {seen_at})")
        assert 0 <= latency_ms < 2000, latency_ms
    finally:
        if flow is not None:
            flow.terminate()
            try:
                flow.wait(30)
            except subprocess.TimeoutExpired:
                flow.kill()
                flow.wait()
