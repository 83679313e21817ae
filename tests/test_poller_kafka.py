"""The poller end to end on a REAL Kafka broker: local HTTP fixture server -> poller dataflow
(``--once``) -> ``feeds.raw`` + ``feed-health``; every message validated against its schema.

The broker comes from the session fixture ``kafka_bootstrap`` (tests/kafka_fixture.py).
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import orjson
import pytest

from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.http_fetch import FetchConfig
from newsflow.connectors.poller.config import PollerConfig
from newsflow.connectors.topics import ensure_topics
from newsflow.flows.poller import run_poller_flow
from newsflow.polling.registry import FeedSpec, dump_registry
from newsflow.wire.codec import decode_raw
from newsflow.wire.contracts import validate
from tests.http_fixture_server import FIXTURES, FixtureServer
from tests.kafka_fixture import consume_all

pytestmark = [pytest.mark.kafka, pytest.mark.http]


def test_poll_once_into_kafka_then_again_via_cli(kafka_bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    brokers = [kafka_bootstrap]
    ensure_topics(brokers, Settings(kafka=KafkaSettings(topics=topics)), partitions=3)
    fetch = FetchConfig(allowed_networks=("127.0.0.1/32",), timeout_s=3.0, io_timeout_s=2.0,
                        retry_backoff_s=(0.01, 0.02))
    cfg = PollerConfig(topics=topics, fetch=fetch, partitions=2, heartbeat_s=30.0)
    state = tmp_path / "state"

    with FixtureServer() as srv:
        feeds = [
            FeedSpec("wire", srv.url("/feeds/rss20.xml"), "Wire", "Wire Co", "T1", "world", "en"),
            FeedSpec("atom", srv.url("/feeds/atom.xml"), "Atom", "Atom Co", "T3", "tech", "en"),
            FeedSpec("rdf", srv.url("/feeds/rss10_sy.xml"), "RDF", "RDF Co", "T4", "science", "en"),
            FeedSpec("broken", srv.url("/feeds/broken.xml"), "Broken", "B", "T5", "misc", "en"),
            FeedSpec("cf", srv.url("/html/cloudflare.html"), "CF", "CF", "T4", "misc", "en"),
            FeedSpec("gone", srv.url("/status/410"), "Gone", "G", "T4", "misc", "en"),
        ]
        run_poller_flow(feeds, cfg, brokers, state_dir=state, once=True, snapshot_s=1.0)

        raw_msgs = consume_all(kafka_bootstrap, topics.raw)
        health_msgs = consume_all(kafka_bootstrap, topics.feed_health)
        for m in raw_msgs:
            validate("feeds.raw", m.value())
            assert dict(m.headers() or []).get("schema") == b"feeds.raw"
        for m in health_msgs:
            validate("feed-health", m.value())
            assert dict(m.headers() or []) == {"schema": b"feed-health", "schema_version": b"1",
                                               "content-type": b"application/json"}

        ticks = [m for m in raw_msgs if m.key() == b"__tick__"]
        assert sorted(m.partition() for m in ticks) == [0, 1, 2]  # a tick on every partition
        polls = {m.key().decode(): m for m in raw_msgs if m.key() != b"__tick__"}
        assert set(polls) == {"wire", "atom", "rdf", "broken", "cf", "gone"}  # every poll
        for fid, m in polls.items():
            p = decode_raw(m.value())
            assert p.feed_id == fid and m.timestamp()[1] == p.fetched_at_ms
            if fid in ("cf", "gone"):  # no feed body: the poll's status instead
                assert p.body is None and p.error
                assert (p.status, p.poll_status) == ({"cf": 200, "gone": 410}[fid],
                                                     {"cf": "html_instead_of_feed", "gone": "dead"}[fid])
            else:
                assert p.status == 200 and p.poll_status is None and p.body
        wire = decode_raw(polls["wire"].value())
        assert wire.body == (FIXTURES / "rss20.xml").read_bytes()
        assert (wire.publisher, wire.tier, wire.category, wire.language) == ("Wire Co", "T1", "world", "en")
        # one feed's polls stay in one partition: keyed by feed_id
        assert all(m.key().startswith(b"poller:") for m in health_msgs)
        status = {orjson.loads(m.value())["feed_id"]: orjson.loads(m.value())["status"] for m in health_msgs}
        assert status == {"wire": "ok", "atom": "ok", "rdf": "ok", "broken": "parse_error",
                          "cf": "html_instead_of_feed", "gone": "dead"}

        # second round through the CLI, same state dir: conditional requests -> not modified
        reg = tmp_path / "feeds.toml"
        reg.write_text(dump_registry(feeds))
        conf = tmp_path / "poller.toml"
        conf.write_text(
            "[poller]\npartitions = 2\n"
            f"[kafka.topics]\nraw = \"{topics.raw}\"\nfeed_health = \"{topics.feed_health}\"\n"
            "[poller.fetch]\ntimeout_s = 3.0\nretry_backoff_s = [0.01, 0.02]\n"
            'allowed_networks = ["127.0.0.1/32"]\n')
        from newsflow.cli.main import main

        rc = main(["poll", "--registry", str(reg), "--brokers", kafka_bootstrap, "--once", "--force",
                   "--state-dir", str(state), "--config", str(conf), "--no-create-topics"])
        assert rc == 0
        assert "If-None-Match" in srv.requests_for("/feeds/rss20.xml")[-1].headers

    seen = {(m.topic(), m.partition(), m.offset()) for m in [*health_msgs, *raw_msgs]}
    health2 = [m for m in consume_all(kafka_bootstrap, topics.feed_health)
               if (m.topic(), m.partition(), m.offset()) not in seen]
    raw2 = [m for m in consume_all(kafka_bootstrap, topics.raw) if (m.topic(), m.partition(), m.offset()) not in seen]
    for m in health2:
        validate("feed-health", m.value())
    st2 = Counter(orjson.loads(m.value())["status"] for m in health2)
    assert st2["not_modified"] == 3 and "dead" not in st2, st2  # dead feed no longer polled
    # nothing new: the unchanged polls without a body, and the final ticks
    assert all(decode_raw(m.value()).body is None for m in raw2)
    # each poll is on feeds.raw with the status its feed-health record has
    assert Counter(decode_raw(m.value()).poll_status for m in raw2 if m.key() != b"__tick__") == st2
    counters = {orjson.loads(m.value())["feed_id"]: orjson.loads(m.value())["counters"] for m in health2}
    assert counters["wire"]["total_polls"] == 2 and counters["wire"]["not_modified_polls"] == 1


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_ctrl_c_on_newsflow_poll_stops_cleanly_and_saves_state(sig: str, kafka_bootstrap: str, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from newsflow.cli.main import main as cli_main

    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
    cfg = tmp_path / "poller.toml"
    cfg.write_text("[kafka.topics]\n" + "".join(
        f'{n} = "{getattr(topics, n)}"\n' for n in ("raw", "articles", "digests", "feed_health", "deadletter")))
    state = tmp_path / "state"
    with FixtureServer() as srv:
        reg = tmp_path / "feeds.toml"
        reg.write_text(f'[[feed]]\nid = "wire"\nurl = "{srv.url("/feeds/rss20.xml")}"\nname = "Wire"\n'
                       'publisher = "Wire Co"\ntier = "T1"\ncategory = "world"\nlanguage = "en"\n')
        cmd = [sys.executable, "-m", "newsflow.cli.main", "poll", "--registry", str(reg), "--brokers",
               kafka_bootstrap, "--config", str(cfg), "--state-dir", str(state), "--allow-private",
               "--snapshot-interval", "0.5", "--heartbeat", "30", "--no-create-topics"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 60
            while not srv.requests_for("/feeds/rss20.xml"):  # the first poll happened
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(2.0)  # a snapshot interval or more after the poll
            t0 = time.monotonic()
            proc.send_signal(getattr(signal, sig))
            out, err = proc.communicate(timeout=30)
            took = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                proc.kill()
        text = (out + err).decode(errors="replace")
        assert proc.returncode == 0, text
        stops = [x for x in err.decode(errors="replace").splitlines() if "stopped" in x]
        assert len(stops) == 1 and "poller stopped by" in stops[0] and f"per-feed state saved in {state}" in stops[0], text
        assert "panicked" not in text and "backtrace" not in text and "Traceback" not in text, text
        assert took < 5, took
        # the state was saved: a forced run sends a conditional GET from the recovered ETag
        assert cli_main(["poll", "--registry", str(reg), "--brokers", kafka_bootstrap, "--config", str(cfg),
                         "--state-dir", str(state), "--allow-private", "--once", "--force", "--quiet",
                         "--no-create-topics"]) == 0
        assert "If-None-Match" in srv.requests_for("/feeds/rss20.xml")[-1].headers
