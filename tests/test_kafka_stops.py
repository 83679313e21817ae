"""``newsflow run`` stops cleanly on Ctrl-C and SIGTERM (exit 0, one line, no Rust panic, no
traceback) and a restart with the same recovery directory goes on where it stopped; the real CLI
as a subprocess on the real broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.topics import ensure_topics, produce_values
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from tests.test_kafka_delivery import topic_count

pytestmark = pytest.mark.kafka


def topics_config(path: Path) -> Topics:
    """Topics unique to the test, written as a configuration file at ``path``."""
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    path.write_text("[kafka.topics]\n" + "".join(f'{r} = "{n}"\n' for r, n in topics.roles().items()))
    return topics


def start_run(bootstrap: str, cfg: Path, rec: Path, *extra: str,
              env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "newsflow.cli.main", "run", "--brokers", bootstrap, "--config", str(cfg),
           "--recovery-dir", str(rec), "--metrics-port", "0", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "RUST_BACKTRACE": "1", **(env or {})})


def wait_for_output(bootstrap: str, topic: str, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while topic_count(bootstrap, topic) == 0:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"no records on {topic}"
        time.sleep(0.3)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_run_stops_cleanly_on_a_signal(sig: signal.Signals, kafka_bootstrap: str, tmp_path: Path) -> None:
    cfg = tmp_path / "newsflow.toml"
    topics = topics_config(cfg)
    ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
    values = [encode_raw(p)[1] for p in demo_payloads()]
    produce_values([kafka_bootstrap], topics.raw, values)
    rec = tmp_path / "recovery"
    proc = start_run(kafka_bootstrap, cfg, rec)
    try:
        wait_for_output(kafka_bootstrap, topics.articles, proc)
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "panicked" not in text and "Traceback" not in text and "BytewaxRuntimeError" not in text, text
    lines = [x for x in text.splitlines() if x.strip()]
    stops = [x for x in lines if "flow stopped" in x]
    assert len(stops) == 1 and f"flow stopped by {sig.name}; a restart with --recovery-dir" in stops[0], lines
    assert lines[-1] == stops[0], lines
    assert len(lines) == 2, lines  # "flow starting ..." and the stop
    assert took < 30, took


def test_the_status_line_measures_consumer_lag_without_a_metrics_port(kafka_bootstrap: str, tmp_path: Path) -> None:
    import re

    cfg = tmp_path / "newsflow.toml"
    topics = topics_config(cfg)
    ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
    n = 20_000  # read one at a time (each a dead letter, delivered before the next read), the
    # flow needs longer than the lag monitor's 5 s for them
    produce_values([kafka_bootstrap], topics.raw, [b'{"feed_id": "f", "i": %d}' % i for i in range(n)])
    proc = start_run(kafka_bootstrap, cfg, tmp_path / "recovery", "--status-interval", "1",
                     env={"NEWSFLOW_FLOW__READ_BATCH": "1"})
    lags: list[int] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 90
        while not any(x > 0 for x in lags):
            assert time.monotonic() < deadline, lags
            line = proc.stderr.readline().decode(errors="replace")
            assert line or proc.poll() is None, lags
            m = re.search(r" status .*consumer_lag=(\d+)", line)
            if m:
                lags.append(int(m[1]))
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"status lines' consumer_lag while reading a backlog of {n}: {lags}")
    assert 0 < max(lags) <= n, lags


def test_config_show_lists_the_producer_timeout_and_the_cluster_check(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from newsflow.cli.main import main

    monkeypatch.setenv("NEWSFLOW_KAFKA__MESSAGE_TIMEOUT_MS", "5000")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "message_timeout_ms = 5000  # env NEWSFLOW_KAFKA__MESSAGE_TIMEOUT_MS" in out
    assert "cluster_check_s = 30.0  # default" in out
    assert Settings().kafka.message_timeout_ms == 300_000


def test_the_stderr_forwarder_drops_rust_panics_and_keeps_everything_else(tmp_path: Path) -> None:
    from newsflow.cli.ops import _forward_without_panics

    text = (b"2026-12-01 23:00:00,000 INFO newsflow: flow starting; metrics off\n"
            b"thread '<unnamed>' panicked at src/run.rs:133:25:\n"
            b"Box<dyn Any>\n"
            b"stack backtrace:\n"
            b"   0: std::panicking::begin_panic\n"
            b"             at /rustc/library/std/src/panicking.rs:1:1\n"
            b"  17: cfunction_vectorcall_FASTCALL_KEYWORDS\n"
            b"note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n"
            b"WARNING newsflow.kafka: FAIL [rdkafka#producer-1] Connect to a:1 failed\n"
            b"thread '<unnamed>' panicked at src/inputs.rs:446:37:\n"
            b"Box<dyn Any>\n"
            b"note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
            b"\n"
            b"Traceback (most recent call last):\n"
            b"  File \"x.py\", line 1, in <module>\n")
    src_r, src_w = os.pipe()
    out = tmp_path / "out"
    with out.open("wb") as f:
        os.write(src_w, text)
        os.close(src_w)
        _forward_without_panics(src_r, f.fileno())
    assert out.read_bytes() == (b"2026-12-01 23:00:00,000 INFO newsflow: flow starting; metrics off\n"
                                b"WARNING newsflow.kafka: FAIL [rdkafka#producer-1] Connect to a:1 failed\n"
                                b"Traceback (most recent call last):\n"
                                b"  File \"x.py\", line 1, in <module>\n")
