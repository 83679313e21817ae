"""A new, empty cluster at the running flow's broker address: ``newsflow run`` notices it within
``kafka.cluster_check_s`` and exits 2 with one line instead of reading on past it, and a restart
with the old recovery directory is refused in one line too. A dedicated broker (its own ports and
data dir) is replaced by a freshly formatted one on the same ports."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka_local import KafkaBroker

from newsflow.config import KafkaSettings, Settings
from newsflow.connectors.topics import ensure_topics, produce_values
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from tests.test_kafka_stops import start_run, topics_config, wait_for_output

pytestmark = pytest.mark.kafka

CHECK_S = 2.0


def one_error_line(err: bytes) -> str:
    text = err.decode(errors="replace")
    assert "panicked" not in text and "Traceback" not in text and "BytewaxRuntimeError" not in text, text
    lines = [x for x in text.splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("newsflow: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    return errors[0]


def wait_for_commit(rec: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until the running flow has committed an epoch (a row in Bytewax's ``commits`` table):
    its recovery state then names the old cluster."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()
        with contextlib.closing(sqlite3.connect(rec / "part-0.sqlite3")) as db:
            if db.execute("select count(*) from commits").fetchone()[0]:
                return
        assert time.monotonic() < deadline, "no epoch committed"
        time.sleep(0.5)


def test_a_replaced_cluster_stops_the_running_flow_in_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "newsflow.toml"
    topics = topics_config(cfg)
    settings = Settings(kafka=KafkaSettings(topics=topics))
    values = [encode_raw(p)[1] for p in demo_payloads()]
    rec = tmp_path / "recovery"
    env = {"NEWSFLOW_KAFKA__CLUSTER_CHECK_S": str(CHECK_S), "RUST_BACKTRACE": "1"}
    old = KafkaBroker(data_dir=tmp_path / "old")
    old.start()
    new: KafkaBroker | None = None
    proc: subprocess.Popen[bytes] | None = None
    try:
        bootstrap = old.bootstrap
        ensure_topics([bootstrap], settings)
        produce_values([bootstrap], topics.raw, values[:40])
        proc = start_run(bootstrap, cfg, rec, env=env)
        wait_for_output(bootstrap, topics.articles, proc)
        wait_for_commit(rec, proc)

        # the same address now serves a new, empty cluster, which gets records of its own
        old.stop(remove_data=True)
        new = KafkaBroker(port=old.port, controller_port=old.controller_port, data_dir=tmp_path / "new")
        new.start()
        assert new.cluster_id != old.cluster_id
        ready = time.monotonic()
        ensure_topics([bootstrap], settings)
        produce_values([bootstrap], topics.raw, values)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - ready
        print(f"the running flow stopped {took:.1f} s after the new cluster answered (check every {CHECK_S} s)")
        assert proc.returncode == 2, err.decode(errors="replace")
        line = one_error_line(err)
        assert line.startswith("newsflow: error: KafkaClusterChanged: Kafka cluster changed under the running "
                               f"flow: {topics.raw}[0] was read from cluster {old.cluster_id}"), line
        assert f"the broker now serves cluster {new.cluster_id}" in line, line
        # one schedule after the new cluster answers (and a check's own wait), not a restart later
        assert took < CHECK_S + 10, took

        # a restart with the old recovery directory is refused in one line as well
        again = subprocess.run([sys.executable, "-m", "newsflow.cli.main", "run", "--brokers", bootstrap,
                                "--config", str(cfg), "--recovery-dir", str(rec), "--metrics-port", "0",
                                "--until-eof"], capture_output=True, timeout=120, env={**os.environ, **env})
        assert again.returncode == 2, again.stderr.decode(errors="replace")
        line = one_error_line(again.stderr)
        assert line.startswith("newsflow: error: KafkaClusterChanged: Kafka cluster changed: the recovery state "
                               f"of {topics.raw}[0] is from cluster {old.cluster_id}"), line
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        old.stop(remove_data=True)
        if new is not None:
            new.stop(remove_data=True)
