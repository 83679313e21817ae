"""Every poll outcome reaches the flow: a real HTTP server on 127.0.0.1 with a good feed, a feed
answering 404 and one serving an HTML error page; the poller puts every poll on a real
broker's ``feeds.raw``, the flow (``newsflow run``) reads it, and its ``feed-health`` records
and the digests' feed-health report count the failed polls as errors and name those feeds.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import main as cli_main
from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.http_fetch import FetchConfig
from newsflow.connectors.poller.config import PollerConfig
from newsflow.connectors.topics import ensure_topics
from newsflow.digest.render import to_markdown
from newsflow.flows.poller import run_poller_flow
from newsflow.polling.registry import FeedSpec
from newsflow.wire.contracts import validate
from tests.http_fixture_server import FixtureServer
from tests.kafka_fixture import consume_all

pytestmark = [pytest.mark.kafka, pytest.mark.http]


def test_failed_polls_reach_the_flow_and_the_digest_health_report(kafka_bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    brokers = [kafka_bootstrap]
    ensure_topics(brokers, Settings(kafka=KafkaSettings(topics=topics)))
    fetch = FetchConfig(allowed_networks=("127.0.0.1/32",), timeout_s=3.0, io_timeout_s=2.0,
                        retry_backoff_s=(0.01, 0.02))
    cfg = PollerConfig(topics=topics, fetch=fetch, partitions=1, heartbeat_s=30.0)
    with FixtureServer() as srv:
        feeds = [
            FeedSpec("wire", srv.url("/feeds/rss20.xml"), "Wire", "Wire Co", "T1", "world", "en"),
            FeedSpec("missing", srv.url("/status/404"), "Missing", "M", "T4", "misc", "en"),
            FeedSpec("errpage", srv.url("/html/cloudflare.html"), "ErrPage", "E", "T4", "misc", "en"),
        ]
        for _ in range(2):  # two rounds: the good feed's second poll is a 304
            run_poller_flow(feeds, cfg, brokers, state_dir=tmp_path / "state", once=True, force=True,
                            snapshot_s=1.0)

    raw = [orjson.loads(m.value()) for m in consume_all(kafka_bootstrap, topics.raw)]
    for r in raw:
        validate("feeds.raw", orjson.dumps(r))
    polls = [(r["feed_id"], r["status"], r.get("poll_status")) for r in raw if r["feed_id"] != "__tick__"]
    assert sorted(polls) == sorted([
        ("wire", 200, None), ("wire", 304, "not_modified"),
        ("missing", 404, "http_error"), ("missing", 404, "http_error"),
        ("errpage", 200, "html_instead_of_feed"), ("errpage", 200, "html_instead_of_feed")]), polls

    conf = tmp_path / "flow.toml"
    conf.write_text("[kafka.topics]\n" + "".join(f'{n} = "{getattr(topics, n)}"\n' for n in topics.roles()))
    assert cli_main(["run", "--brokers", kafka_bootstrap, "--config", str(conf), "--until-eof",
                     "--metrics-port", "0"]) == 0

    health = [(m.key(), orjson.loads(m.value())) for m in consume_all(kafka_bootstrap, topics.feed_health)]
    flow = [(k, h) for k, h in health if h["source"] == "flow"]
    assert all(k == f"flow:{h['feed_id']}".encode() for k, h in flow)
    assert sorted((h["feed_id"], h["status"]) for _, h in flow) == sorted([
        ("wire", "ok"), ("wire", "not_modified"), ("missing", "http_error"), ("missing", "http_error"),
        ("errpage", "html_instead_of_feed"), ("errpage", "html_instead_of_feed")])
    assert all(h.get("message") for _, h in flow if h["feed_id"] != "wire")
    dls = consume_all(kafka_bootstrap, topics.deadletter)
    assert not dls, [orjson.loads(m.value())["reason"] for m in dls]  # failed polls are not bad input

    digests = [orjson.loads(m.value()) for m in consume_all(kafka_bootstrap, topics.digests)]
    with_health = [d for d in digests if (d.get("feed_health") or {}).get("polls")]
    assert with_health, [d.get("digest_type") for d in digests]
    fh = max(with_health, key=lambda d: d["feed_health"]["polls"])["feed_health"]
    assert (fh["polls"], fh["successful"], fh["errors"]) == (6, 2, 4), fh
    assert set(fh["unhealthy_feeds"]) == {"missing", "errpage"}, fh
    rows = {r["feed_id"]: r for r in fh["feeds"]}
    assert rows["missing"]["last_status"] == "http_error" and rows["missing"]["success_rate"] == 0
    assert rows["errpage"]["last_status"] == "html_instead_of_feed"
    md = to_markdown(max(with_health, key=lambda d: d["feed_health"]["polls"]))
    assert "4 errors" in md and "errpage" in md and "missing" in md, md[-2000:]

    # compaction on the real broker keeps the latest record of each source for each feed: roll
    # the segment (another poll round after segment.ms), let the log cleaner run, read again
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topics.feed_health, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in (("segment.ms", "100"), ("min.cleanable.dirty.ratio", "0.01"), ("min.compaction.lag.ms", "0"))])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)
    before = {h["record_id"] for _, h in health}
    time.sleep(1.0)
    with FixtureServer() as srv2:  # same ids, any URLs: a third round of poller records
        run_poller_flow([FeedSpec(f.id, srv2.url("/status/404"), f.name, f.publisher, f.tier, f.category, f.language)
                         for f in feeds], cfg, brokers, state_dir=None, once=True, force=True, snapshot_s=1.0)
    deadline = time.monotonic() + 90
    while True:
        after = [(m.key(), orjson.loads(m.value())) for m in consume_all(kafka_bootstrap, topics.feed_health)]
        if {h["record_id"] for _, h in after} & before != before or time.monotonic() > deadline:
            break
        time.sleep(2.0)
    kept = {h["record_id"] for _, h in after} & before
    assert kept != before, "the log cleaner did not run"
    # each feed keeps its latest record of each source: the flow's (nothing newer on its keys)
    # and the poller's (of the second or the third round)
    latest = {k: h["record_id"] for k, h in health}
    assert {k.split(b":")[0] for k in latest} == {b"poller", b"flow"} and len(latest) == 6
    assert {rid for k, rid in latest.items() if k.startswith(b"flow:")} <= kept, (sorted(kept), latest)
    assert {k for k, _ in after} == set(latest), {k for k, _ in after}
