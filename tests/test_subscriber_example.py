"""``examples/subscriber.py``, the README's subscriber, on the real broker: it keeps waiting
through silence, skips another contract version, stops cleanly on SIGTERM and SIGINT, and a
restart in the same group goes on after the last message it processed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest

from newsflow.connectors.topics import create_topics
from newsflow.wire.contracts import headers_for

pytestmark = pytest.mark.kafka

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "subscriber.py"


def produce_digests(bootstrap: str, topic: str, numbers: range) -> list[str]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    lines = []
    for i in numbers:
        d = {"schema": "digests", "schema_version": 1, "digest_id": f"rolling:2026-03-0{i}T08:00:00Z",
             "title": "Rolling Digest", "article_count": i, "a_field_from_the_future": True}
        p.produce(topic, orjson.dumps(d), d["digest_id"].encode(), headers=list(headers_for("digests")))
        lines.append(f"{d['digest_id']} {d['title']} {d['article_count']}")
    # a message of another contract version is skipped
    p.produce(topic, b'{"digest_id": "v2"}', b"v2", headers=[("schema", b"digests"), ("schema_version", b"2")])
    assert p.flush(30) == 0
    return lines


def read_lines(proc: subprocess.Popen[str], n: int, timeout: float = 60) -> list[str]:
    assert proc.stdout is not None
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline and proc.poll() is None, got
        got.append(proc.stdout.readline().rstrip("\n"))
    return got


def stop(proc: subprocess.Popen[str], sig: signal.Signals) -> str:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == "", out  # nothing processed after the signal
    return err


def test_the_subscriber_example_is_a_service_loop(kafka_bootstrap: str) -> None:
    topic = f"digests.{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, [topic])
    first = produce_digests(kafka_bootstrap, topic, range(1, 4))
    cmd = [sys.executable, str(SCRIPT), "--brokers", kafka_bootstrap, "--topic", topic,
           "--group", f"g-{uuid.uuid4().hex[:8]}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        assert read_lines(proc, 3) == first
        time.sleep(6)  # silence longer than the old example's 5 s: a service keeps waiting
        assert proc.poll() is None
        assert stop(proc, signal.SIGTERM).strip() == "stopped by SIGTERM"

        # a restart in the same group processes only what came after the last commit
        later = produce_digests(kafka_bootstrap, topic, range(4, 6))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        assert read_lines(proc, 2) == later
        assert stop(proc, signal.SIGINT).strip() == "stopped by SIGINT"
    finally:
        if proc.poll() is None:
            proc.kill()
