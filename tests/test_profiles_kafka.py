"""Interest profiles on a REAL Kafka broker: the README's producer example publishes a reader's
clicks to ``interactions``; the flow reads ``feeds.raw`` + ``interactions`` and the profile's
digests equal the file-mode run's (event time only: the same records). The flow is
``newsflow run --config F`` with the profiles in F's ``[profiles]`` section."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import main as cli_main
from newsflow.cli.main import run_file_flow
from newsflow.config import DigestSettings, KafkaSettings, ProfilesSettings, Settings, Topics, show
from newsflow.connectors.files import write_archive
from newsflow.connectors.poller.config import poller_config
from newsflow.connectors.topics import ensure_topics, produce_values
from newsflow.samples.reader_week import reader_interactions, week_payloads
from newsflow.wire.codec import encode_raw
from newsflow.wire.contracts import validate
from tests.kafka_fixture import consume_all
from tests.test_profiles_flow import PROFILES, PROFILES_SECTION

pytestmark = pytest.mark.kafka
README = Path(__file__).resolve().parent.parent / "README.md"


def readme_producer() -> str:
    m = re.search(r"<!-- interactions-producer -->\n```python\n(.*?)```", README.read_text(), re.S)
    assert m, "the README's interactions producer example is missing"
    return m.group(1)


def test_readme_producer_feeds_profiles_on_kafka(kafka_bootstrap: str, tmp_path: Path) -> None:
    payloads = week_payloads(days=3)
    archive = tmp_path / "feeds.raw.jsonl"
    write_archive(payloads, archive)
    run_file_flow(str(archive), str(tmp_path / "plain"))
    arts = [orjson.loads(x) for x in (tmp_path / "plain" / "articles.jsonl").read_bytes().splitlines()]
    clicks = [{"profile_id": r["profile_id"], "article_id": r["article_id"], "action": r["action"],
               "at": r["at"], "dwell_s": r.get("dwell_s")} for r in reader_interactions(arts)]
    assert len(clicks) > 20

    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    settings = Settings(kafka=KafkaSettings(topics=topics))
    brokers = [kafka_bootstrap]
    ensure_topics(brokers, settings)
    assert produce_values(brokers, topics.raw, [encode_raw(p)[1] for p in payloads]) == len(payloads)
    exec(readme_producer(), {"BOOTSTRAP": kafka_bootstrap, "TOPIC": topics.interactions, "CLICKS": clicks})
    published = consume_all(kafka_bootstrap, topics.interactions)
    assert len(published) == len(clicks)
    for m in published:
        validate("interactions", m.value())
        assert m.key() == b"reader"

    # `newsflow run` with the profiles in its --config: interactions are its second input
    cfg = tmp_path / "newsflow.toml"
    cfg.write_text(show(settings.model_copy(update={"profiles": PROFILES_SECTION}), {}))
    assert cli_main(["run", "--brokers", kafka_bootstrap, "--config", str(cfg), "--until-eof",
                     "--metrics-port", "0"]) == 0
    got = [orjson.loads(m.value()) for m in consume_all(kafka_bootstrap, topics.digests)]
    mine = sorted((d["digest_id"], d["sections"]) for d in got if (d.get("profile") or {}).get("id") == "reader")
    assert mine, "no digest for the reader profile"

    ix_file = tmp_path / "interactions.jsonl"
    ix_file.write_bytes(b"".join(m.value() + b"\n" for m in published))
    run_file_flow(str(archive), str(tmp_path / "files"), interactions_path=str(ix_file), profiles=PROFILES)
    files = [orjson.loads(x) for x in (tmp_path / "files" / "digests.jsonl").read_bytes().splitlines()]
    want = sorted((d["digest_id"], d["sections"]) for d in files if (d.get("profile") or {}).get("id") == "reader")
    assert mine == want
    assert not [m for m in consume_all(kafka_bootstrap, topics.deadletter)
                if orjson.loads(m.value())["stage"] == "interactions"]


def _consume_until(bootstrap: str, topic: str, done: Callable[[list[dict]], bool], proc: subprocess.Popen[bytes],
                   timeout_s: float) -> list[dict]:
    """Records of ``topic`` as they come (tail), until ``done`` says so or the time is up."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[dict] = []
    end = time.monotonic() + timeout_s
    try:
        while time.monotonic() < end and not done(got):
            assert proc.poll() is None, "newsflow run stopped"
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(orjson.loads(m.value()))
    finally:
        c.close()
    return got


def test_live_run_with_a_quiet_interactions_topic_does_not_stall(kafka_bootstrap: str, tmp_path: Path) -> None:
    """`newsflow run` (tail, live ticks) with a default profile and a reader profile, and not one
    reader event: the poller's heartbeats on ``interactions`` move the profiles' clock, so the
    articles come out (with the default profile's relevance) and the reader's digests close."""
    from newsflow.connectors.poller.records import tick_event

    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    profiles = ProfilesSettings.model_validate({"profile": {
        "default": {"categories": ["science"], "topics": {"science": ["research", "scientists", "study"]}},
        "reader": {"digests": ["rolling"], "categories": ["science"]}}})
    settings = Settings(kafka=KafkaSettings(topics=topics), profiles=profiles,
                        digests=DigestSettings(rolling_minutes=1))
    ensure_topics([kafka_bootstrap], settings)
    cfg = tmp_path / "newsflow.toml"
    cfg.write_text(show(settings, {}))
    payloads = [p for p in week_payloads(days=1) if p.fetched_at_ms == week_payloads(days=1)[0].fetched_at_ms]
    t0 = payloads[0].fetched_at_ms
    archive = tmp_path / "feeds.raw.jsonl"
    write_archive(payloads, archive)
    run_file_flow(str(archive), str(tmp_path / "files"))
    n_articles = len((tmp_path / "files" / "articles.jsonl").read_bytes().splitlines())
    proc = subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", "run", "--brokers", kafka_bootstrap,
                             "--config", str(cfg), "--metrics-port", "0"],
                            stdout=subprocess.DEVNULL, stderr=(tmp_path / "run.log").open("wb"))
    try:
        produce_values([kafka_bootstrap], topics.raw, [encode_raw(p)[1] for p in payloads])
        # the poller's heartbeat (poller_config sends it to interactions: profiles are configured)
        assert poller_config(settings).interactions_heartbeat
        from confluent_kafka import Producer

        prod = Producer({"bootstrap.servers": kafka_bootstrap})
        for rec in tick_event(t0 + 5 * 60_000, topics, interactions=True).records:
            prod.produce(rec.topic, rec.value, key=rec.key, headers=list(rec.headers))
        prod.flush(30)
        arts = _consume_until(kafka_bootstrap, topics.articles, lambda got: len(got) >= n_articles, proc, 90)
        assert len(arts) == n_articles, (len(arts), n_articles, (tmp_path / "run.log").read_text()[-2000:])
        rel = {a["category"]: a["importance_components"]["relevance"] for a in arts}
        assert rel["science"] > 0 and rel["sports"] == 0.0, rel  # the default profile's, not the neutral 50
        digests = _consume_until(kafka_bootstrap, topics.digests,
                                 lambda got: any((d.get("profile") or {}).get("id") == "reader" for d in got), proc, 60)
        assert any((d.get("profile") or {}).get("id") == "reader" for d in digests), "the reader's digests stalled"
    finally:
        proc.terminate()
        proc.wait(30)
