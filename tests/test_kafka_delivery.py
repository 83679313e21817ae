"""Kafka failures reach the user as one line and exit status 2, and nothing is lost silently:
``newsflow produce`` under a broker that freezes, a healthy ``produce``, ``newsflow run`` on a
fresh cluster with an old recovery directory. Every test runs the real CLI as a subprocess on
a real broker (a dedicated one where the test freezes or replaces it)."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest
from kafka_local import KafkaBroker

pytestmark = pytest.mark.kafka


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def topic_count(bootstrap: str, topic: str) -> int:
    """Records on every partition of ``topic`` (0 while it does not exist)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "log_level": 0})
    try:
        t = c.list_topics(topic, timeout=10).topics.get(topic)
        if t is None or t.error is not None:
            return 0
        n = 0
        for p in t.partitions:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            n += high - low
        return n
    finally:
        c.close()


def write_lines(path: Path, n: int) -> None:
    """``n`` envelope-shaped lines of ~1 kB (``produce`` does not parse them beyond the key)."""
    with gzip.open(path, "wb") as f:
        for i in range(n):
            f.write(orjson.dumps({"feed_id": f"f{i % 50}", "i": i, "pad": "x" * 1000}) + b"\n")


def error_lines(stderr: bytes) -> list[str]:
    return [x for x in stderr.decode(errors="replace").splitlines() if x.strip()]


def test_a_frozen_broker_fails_produce_and_run_in_one_line_exit_2(tmp_path: Path) -> None:
    n = 60_000
    archive = tmp_path / "big.jsonl.gz"
    write_lines(archive, n)
    broker = KafkaBroker(data_dir=tmp_path / "broker")
    broker.start()
    try:
        bootstrap = broker.bootstrap
        proc = cli("produce", str(archive), "--brokers", bootstrap,
                   env={"NEWSFLOW_KAFKA__MESSAGE_TIMEOUT_MS": "3000"})
        try:
            deadline = time.monotonic() + 60
            while topic_count(bootstrap, "feeds.raw") == 0:  # the first records are on the topic
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "produce delivered nothing"
                time.sleep(0.05)
            assert broker.pid is not None
            os.kill(broker.pid, signal.SIGSTOP)  # the broker stalls mid-run
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        # the frozen broker never answers again: kill it and read its log from the same dir
        os.kill(broker.pid, signal.SIGKILL)
        port, controller_port = broker.port, broker.controller_port
        broker.stop(remove_data=False)
        broker = KafkaBroker(port=port, controller_port=controller_port, data_dir=tmp_path / "broker")
        broker.start()
        on_topic = topic_count(broker.bootstrap, "feeds.raw")
        lines = error_lines(err)
        assert proc.returncode == 2, lines
        assert len(lines) == 1, lines
        line = lines[0]
        assert line.startswith("newsflow: error: KafkaDeliveryFailed: Kafka did not acknowledge "), line
        failed = int(line.split("acknowledge ", 1)[1].split(" ", 1)[0])
        assert f" of {n} records" in line, line
        assert 0 < failed <= n, line
        # every record not acknowledged is counted; of those, only the ones in flight at the
        # freeze can be on the topic all the same (written, the answer never sent): at most
        # the producer's 5 requests in flight (idempotence) of a 1 MB batch each
        missing = n - on_topic
        print(f"produce under a frozen broker: {n} records, {failed} not acknowledged, {missing} missing")
        assert missing <= failed <= missing + 5 * (1_000_000 // 1000), (on_topic, failed, line)

        # the flow on what reached the topic (each line a dead letter: not an envelope); the
        # broker freezes while it writes them: its delivery failure is one line, exit 2
        proc = cli("run", "--brokers", bootstrap, "--recovery-dir", str(tmp_path / "recovery"),
                   "--metrics-port", "0", env={"NEWSFLOW_KAFKA__MESSAGE_TIMEOUT_MS": "3000", "RUST_BACKTRACE": "1"})
        try:
            deadline = time.monotonic() + 90
            while topic_count(bootstrap, "deadletter") == 0:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the flow wrote nothing"
                time.sleep(0.05)
            assert broker.pid is not None
            os.kill(broker.pid, signal.SIGSTOP)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        os.kill(broker.pid, signal.SIGKILL)
    finally:
        broker.stop(remove_data=True)
    text = err.decode(errors="replace")
    assert proc.returncode == 2, text
    assert "panicked" not in text and "Traceback" not in text and "BytewaxRuntimeError" not in text, text
    lines = [x for x in error_lines(err) if " newsflow.kafka: " not in x]  # (librdkafka's lines, throttled)
    assert lines[0].endswith("INFO newsflow: flow starting; metrics off"), lines
    assert len(lines) == 2, lines
    assert lines[1].startswith("newsflow: error: KafkaDeliveryFailed: Kafka did not acknowledge "), lines
    assert "the epoch is not committed" in lines[1], lines


def test_produce_to_a_healthy_broker_exits_0_with_every_record_on_the_topic(kafka_bootstrap: str,
                                                                            tmp_path: Path) -> None:
    n = 5_000
    archive = tmp_path / "a.jsonl.gz"
    write_lines(archive, n)
    topic = f"feeds.raw.{uuid.uuid4().hex[:8]}"
    proc = cli("produce", str(archive), "--brokers", kafka_bootstrap, env={"NEWSFLOW_KAFKA__TOPICS__RAW": topic})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.decode().strip() == f"produced {n} raw payloads to {topic}"
    assert topic_count(kafka_bootstrap, topic) == n


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("cmd", ["run", "produce", "poll"])
def test_an_unreachable_broker_is_one_line_exit_2(cmd: str, tmp_path: Path) -> None:
    archive = tmp_path / "a.jsonl"
    write_lines(archive, 1)
    reg = tmp_path / "feeds.toml"
    reg.write_text('[[feed]]\nid = "wire"\nurl = "http://127.0.0.1:9/feed.xml"\nname = "Wire"\n'
                   'publisher = "Wire Co"\ntier = "T1"\ncategory = "world"\nlanguage = "en"\n')
    where = {"run": ["--metrics-port", "0"], "produce": [str(archive)],
             "poll": ["--registry", str(reg), "--allow-private", "--metrics-port", "0"]}[cmd]
    brokers = f"127.0.0.1:{closed_port()}"
    proc = cli(cmd, *where, "--brokers", brokers, "--broker-timeout", "1")
    _, err = proc.communicate(timeout=60)
    lines = error_lines(err)
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith(f"newsflow: error: Kafka broker {brokers} unreachable after 1 s"), lines


def test_librdkafka_lines_of_the_pollers_producer_go_through_the_throttled_logger() -> None:
    """A producer built as the poller builds it, for a port nobody listens on: librdkafka's
    connection errors are log records of ``newsflow.kafka`` (each distinct line once a minute),
    never its raw ``%3|...|FAIL|`` lines on stderr."""
    code = (
        "import logging, time\n"
        "logging.basicConfig(level=logging.WARNING, format='LOG %(name)s: %(message)s')\n"
        "from newsflow.connectors.poller.sink import KafkaRecordSink\n"
        f"part = KafkaRecordSink(['127.0.0.1:{closed_port()}']).build('s', 0, 1)\n"
        "part._p.produce('t', b'x')\n"
        "t0 = time.monotonic()\n"
        "while time.monotonic() - t0 < 4:\n"
        "    part._p.poll(0.1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    text = out.stderr.decode(errors="replace")
    assert out.returncode == 0, text
    assert "%3|" not in text and "|FAIL|" not in text, text
    fails = [x for x in text.splitlines() if x.startswith("LOG newsflow.kafka: FAIL ")]
    assert len(fails) == 1 and "Connection refused" in fails[0], text
