"""The poller rides out broker outages: a running ``newsflow poll`` (real HTTP server on
127.0.0.1 serving feeds that change on every poll) writes to a dedicated real broker that this
test stops and starts again on the same data dir and ports.

While the broker is away the poller must stay up, report ``/healthz`` 503 with a reason and
not poll (a poll's state is saved only once Kafka acknowledged its records); once it is back,
every poll the server answered must be on ``feeds.raw`` exactly once and ``/healthz`` is 200
again.

Two outages: 60 s with the producer's default ``message.timeout.ms`` (5 min: nothing times
out in the producer), and a long one: 45 s with ``message.timeout.ms`` lowered to 3 s, so the
outage lasts 15 delivery timeouts and every waiting record times out in the producer and is
produced again many times over (the same path a real 10-minute outage takes with the default
timeout, in a fraction of the time).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kafka_local import KafkaBroker

from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.topics import ensure_topics
from tests.http_fixture_server import FixtureServer
from tests.kafka_fixture import consume_all

pytestmark = [pytest.mark.kafka, pytest.mark.http]


CHANGING = ("/bench/1", "/bench/3")  # a new item (and ETag "<i>-<n>") on every request


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def outage_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[KafkaBroker]]:
    """A broker of this module's own (``[0]``), which the tests stop and replace by one on the
    same data dir and ports."""
    d = tmp_path_factory.mktemp("outage-broker")
    holder = [KafkaBroker(data_dir=d).start()]
    try:
        yield holder
    finally:
        holder[0].stop(remove_data=True)


def _health(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _polls(srv: FixtureServer) -> int:
    return sum(len(srv.requests_for(p)) for p in CHANGING)


def _topics_and_config(broker: KafkaBroker, tmp_path: Path) -> tuple[Topics, Path]:
    """Topics of this test's own on the broker, and a config file naming them (polls every 2 s)."""
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    ensure_topics([broker.bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
    conf = tmp_path / "newsflow.toml"
    conf.write_text("[kafka.topics]\n" + "".join(f'{n} = "{getattr(topics, n)}"\n' for n in topics.roles())
                    + "[poller.policy]\nmin_interval_s = 2.0\n")
    return topics, conf


@pytest.mark.parametrize(("outage_s", "message_timeout_ms"), [(60, ""), (45, "3000")],
                         ids=["60s", "long-15x-delivery-timeout"])
def test_poller_rides_out_a_broker_outage(outage_broker: list[KafkaBroker], tmp_path: Path, outage_s: int,
                                          message_timeout_ms: str) -> None:
    broker = outage_broker[0]
    topics, conf = _topics_and_config(broker, tmp_path)
    metrics_port = _free_port()
    with FixtureServer() as srv:
        reg = tmp_path / "feeds.toml"
        reg.write_text("".join(
            f'[[feed]]\nid = "b{p.rsplit("/", 1)[1]}"\nurl = "{srv.url(p)}"\nname = "B"\npublisher = "B"\n'
            'tier = "T3"\ncategory = "tech"\nlanguage = "en"\ninterval = "2s"\n' for p in (*CHANGING, "/bench/2")))
        cmd = [sys.executable, "-m", "newsflow.cli.main", "poll", "--registry", str(reg),
               "--brokers", broker.bootstrap, "--config", str(conf), "--state-dir", str(tmp_path / "state"),
               "--allow-private", "--snapshot-interval", "1", "--heartbeat", "1", "--no-create-topics",
               "--quiet", "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics_port)]
        log = tmp_path / "poller.log"
        proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1",
                                     **({"NEWSFLOW_KAFKA__MESSAGE_TIMEOUT_MS": message_timeout_ms}
                                        if message_timeout_ms else {})})
        try:
            # 1. it polls and delivers
            deadline = time.monotonic() + 60
            while _polls(srv) < 4 or _health(metrics_port)[0] != 200:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)

            # 2. the broker goes away: the poller stays up, says it is unhealthy and pauses
            broker.stop(remove_data=False)
            t_stop = time.monotonic()
            codes: list[int] = []
            reasons: list[str] = []
            polls_at_503: int | None = None
            last_delivery: dict = {}
            while time.monotonic() - t_stop < outage_s:
                assert proc.poll() is None, log.read_text()[-3000:]
                code, h = _health(metrics_port)
                codes.append(code)
                if code == 503:
                    reasons.append(h.get("unhealthy", ""))
                    last_delivery = h["kafka_delivery"]
                    if polls_at_503 is None:
                        polls_at_503 = _polls(srv)
                time.sleep(1.0)
            polls_during = _polls(srv) - (polls_at_503 or 0)
            assert 503 in codes, codes
            assert codes.index(503) <= 10, codes  # unhealthy within seconds
            assert codes[-1] == 503 and codes[-outage_s // 2:].count(200) == 0, codes
            assert "Kafka has not acknowledged" in reasons[-1], reasons[-1]
            # paused: at most the polls already started when the first batch got stuck
            assert polls_during <= 2, polls_during

            # 3. the broker is back on the same dir and ports: delivery and polling resume
            broker = outage_broker[0] = KafkaBroker(broker.port, controller_port=broker.controller_port,
                                                    data_dir=broker.root).start()
            before = _polls(srv)
            deadline = time.monotonic() + 90
            while _polls(srv) < before + 4 or _health(metrics_port)[0] != 200:
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text(errors="replace")
        assert "Traceback" not in text and "panicked" not in text, text[-3000:]
        served = {p: len(srv.requests_for(p)) for p in CHANGING}

    # every poll the server answered is on feeds.raw exactly once (the last one may have been
    # cut by the stop: then it is not in the saved state and is polled again on the next start)
    raw = [orjson.loads(m.value()) for m in consume_all(broker.bootstrap, topics.raw)]
    for p in CHANGING:
        i = p.rsplit("/", 1)[1]
        got = Counter(int(r["etag"].strip('"').split("-")[1]) for r in raw if r["feed_id"] == f"b{i}")
        dup = {n: c for n, c in got.items() if c > 1}
        assert not dup, (p, dup)
        assert set(got) in ({*range(1, served[p] + 1)}, {*range(1, served[p])}), (p, sorted(got), served[p])
        assert len(got) >= 4, (p, sorted(got))
    assert "polling resumes" in text, text[-3000:]
    if message_timeout_ms:  # the records did time out in the producer and were produced again
        assert last_delivery["redelivered_records"] > 0, last_delivery


def test_stop_during_an_outage_saves_no_undelivered_poll(outage_broker: list[KafkaBroker], tmp_path: Path) -> None:
    """Ctrl-C while a poll's records wait for the broker: one line, exit 0, and the saved state
    is the last delivered poll's (the next start sends that poll's ETag, not the lost one's)."""
    broker = outage_broker[0]
    topics, conf = _topics_and_config(broker, tmp_path)
    metrics_port = _free_port()
    with FixtureServer() as srv:
        reg = tmp_path / "feeds.toml"
        reg.write_text(f'[[feed]]\nid = "b1"\nurl = "{srv.url("/bench/1")}"\nname = "B"\npublisher = "B"\n'
                       'tier = "T3"\ncategory = "tech"\nlanguage = "en"\ninterval = "2s"\n')
        base = [sys.executable, "-m", "newsflow.cli.main", "poll", "--registry", str(reg), "--config", str(conf),
                "--state-dir", str(tmp_path / "state"), "--allow-private", "--snapshot-interval", "1",
                "--heartbeat", "0", "--no-create-topics", "--quiet", "--metrics-host", "127.0.0.1"]
        log = tmp_path / "poller.log"
        proc = subprocess.Popen([*base, "--brokers", broker.bootstrap, "--metrics-port", str(metrics_port)],
                                stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 60
            while len(srv.requests_for("/bench/1")) < 2 or _health(metrics_port)[0] != 200:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            broker.stop(remove_data=False)
            deadline = time.monotonic() + 30
            while _health(metrics_port)[0] != 503:  # the next poll's records are stuck
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
            served = len(srv.requests_for("/bench/1"))
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text(errors="replace")
        assert rc == 0, text[-3000:]
        assert "Traceback" not in text and "panicked" not in text, text[-3000:]
        assert text.rstrip().endswith("are polled again on the next start"), text[-3000:]

        broker = outage_broker[0] = KafkaBroker(broker.port, controller_port=broker.controller_port,
                                                data_dir=broker.root).start()
        raw = [orjson.loads(m.value()) for m in consume_all(broker.bootstrap, topics.raw)]
        delivered = sorted(int(r["etag"].strip('"').split("-")[1]) for r in raw if r["feed_id"] == "b1")
        assert delivered == list(range(1, served)), (delivered, served)  # the last poll's records were stuck
        done = subprocess.run([*base, "--brokers", broker.bootstrap, "--metrics-port", "0", "--once", "--force"],
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
        again = srv.requests_for("/bench/1")[served]
        assert again.headers.get("If-None-Match") == f'"1-{served - 1}"', again.headers
