"""Metrics, health and logs of ``newsflow run`` and ``newsflow poll``: scraped over HTTP on
127.0.0.1 from real subprocess runs on the real broker (and the local HTTP fixture server)."""

from __future__ import annotations

import io
import logging
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from newsflow.cli.main import build_parser
from newsflow.cli.main import main as cli_main
from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.observability import JsonFormatter, serve, setup_logging
from newsflow.connectors.topics import ensure_topics, produce_values
from newsflow.flows import metrics
from newsflow.model.vocab import SUCCESS_STATUSES
from newsflow.polling.registry import FeedSpec, dump_registry
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from tests.http_fixture_server import FixtureServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    _, text = get(f"http://127.0.0.1:{port}/metrics")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def wait_for(pred: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen[bytes]) -> Any:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"process ended ({proc.returncode}) while waiting for {what}: "
                                 f"{proc.stderr.read().decode()[-3000:] if proc.stderr else ''}")
        try:
            v = pred()
        except (urllib.error.URLError, ConnectionError):
            v = None
        if v:
            return v
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen[bytes]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.stderr.read().decode() if proc.stderr else ""


def by_name(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


# ------------------------------------------------------------------------------ unit
def test_health_endpoint_and_metrics_on_one_port() -> None:
    state = {"ok": True}
    srv = serve(free_port(), "127.0.0.1", lambda: {"ok": state["ok"], "payloads": 3})
    assert srv is not None
    try:
        code, body = get(f"{srv.url}/healthz")
        assert code == 200 and orjson.loads(body) == {"ok": True, "payloads": 3}
        state["ok"] = False
        assert get(f"{srv.url}/healthz")[0] == 503
        assert cli_main(["health", "--port", str(srv.port)]) == 1
        state["ok"] = True
        assert cli_main(["health", "--port", str(srv.port)]) == 0
        code, text = get(f"{srv.url}/metrics")
        assert code == 200 and "# TYPE newsflow_deadletters_total counter" in text
        assert get(f"{srv.url}/nope")[0] == 404
    finally:
        srv.close()
    assert cli_main(["health", "--port", str(srv.port)]) == 1  # nobody listening


def test_busy_port_is_one_warning_not_a_crash(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert serve(s.getsockname()[1], "127.0.0.1") is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: metrics not served")
    assert serve(0) is None  # 0 = off


def test_json_logs_one_object_per_line() -> None:
    buf = io.StringIO()
    setup_logging("json", stream=buf)
    logging.getLogger("newsflow").info("flow starting", extra={"metrics_port": 9400})
    logging.getLogger("newsflow.x").warning("odd %s", "thing")
    recs = [orjson.loads(x) for x in buf.getvalue().splitlines()]
    assert [(r["level"], r["logger"], r["msg"]) for r in recs] == [
        ("info", "newsflow", "flow starting"), ("warning", "newsflow.x", "odd thing")]
    assert recs[0]["metrics_port"] == 9400 and recs[0]["ts"].endswith("Z")
    assert isinstance(JsonFormatter().format(logging.makeLogRecord({"msg": "x"})), str)


def test_poll_metrics_broken_feeds_gauge() -> None:
    class Ev:
        def __init__(self, feed_id: str, status: str) -> None:
            self.feed_id, self.status = feed_id, status

    pm = metrics.PollMetrics(SUCCESS_STATUSES)
    before = metrics.total(metrics.POLLS)
    for ev in (Ev("a", "ok"), Ev("b", "timeout"), Ev("c", "dead"), Ev("b", "not_modified"), Ev("~", "tick")):
        pm(ev)
    assert metrics.total(metrics.BROKEN_FEEDS) == 1  # c; b recovered
    assert metrics.total(metrics.FEEDS_KNOWN) == 3
    assert metrics.total(metrics.POLLS) - before == 4


def test_lag_is_end_offset_minus_next_offset_read() -> None:
    metrics.input_read(7, 41)  # read offset 41 -> next is 42
    metrics.set_lag({7: 50, 8: 10})
    s = {(m.name, tuple(sorted(m.labels.items()))): m.value
         for fam in metrics.CONSUMER_LAG.collect() for m in fam.samples}
    assert s[("newsflow_consumer_lag", (("partition", "7"),))] == 8
    assert ("newsflow_consumer_lag", (("partition", "8"),)) not in s  # never read: unknown, not 10


def test_run_and_poll_document_their_metrics_ports() -> None:
    p = build_parser()
    assert p.parse_args(["run", "--brokers", "k:9092"]).metrics_port == 9400
    assert p.parse_args(["poll", "--brokers", "k:9092"]).metrics_port == 9401
    assert p.parse_args(["run", "--brokers", "k:9092", "--metrics-port", "0"]).metrics_port == 0


# ------------------------------------------------------------------------------ subprocess runs
@pytest.mark.kafka
def test_run_serves_metrics_health_and_json_logs(kafka_bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    settings = Settings(kafka=KafkaSettings(topics=topics))
    ensure_topics([kafka_bootstrap], settings)
    cfg = tmp_path / "settings.toml"
    cfg.write_text("[kafka.topics]\n" + "".join(
        f'{name} = "{getattr(topics, name)}"\n' for name in ("raw", "articles", "digests", "feed_health", "deadletter")))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", "run", "--brokers", kafka_bootstrap,
                             "--config", str(cfg), "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
                             "--log-format", "json", "--status-interval", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 60, "/healthz", proc)
        payloads = demo_payloads()
        n = produce_values([kafka_bootstrap], topics.raw, [encode_raw(p)[1] for p in payloads])

        def caught_up() -> Any:
            s = scrape(port)
            lag = by_name(s, "newsflow_consumer_lag")
            read = sum(by_name(s, "newsflow_payloads_total").values())
            return s if read == n and lag and all(v == 0 for v in lag.values()) else None

        s = wait_for(caught_up, 120, "the flow to read every payload with lag 0", proc)
        assert sum(by_name(s, "newsflow_articles_total").values()) > 0
        text = get(f"http://127.0.0.1:{port}/metrics")[1]  # only the flow's own metrics
        assert "newsflow_payloads" in text and not [m for m in ("newsflow_polls", "newsflow_broken_feeds",
                                                               "newsflow_feeds_polled", "newsflow_heartbeats") if m in text]
        dls = by_name(s, "newsflow_deadletters_total")
        assert any(dict(k)["reason"] == "html_instead_of_feed" and v > 0 for k, v in dls.items())
        assert by_name(s, "newsflow_input_high_watermark")[(("partition", "0"),)] == n
        assert max(by_name(s, "newsflow_event_time_seconds").values()) > 1.7e9  # a 2026 fetch time
        # digest windows closed (they close once every story shard has released the last ticks)
        def digests_closed() -> Any:
            x = scrape(port)
            return x if sum(by_name(x, "newsflow_digests_total").values()) > 0 else None

        s = wait_for(digests_closed, 60, "digest windows to close", proc)
        code, body = get(f"http://127.0.0.1:{port}/healthz")
        h = orjson.loads(body)
        assert code == 200 and h["ok"] is True and h["service"] == "flow" and h["payloads"] == n
        assert h["consumer_lag"] == 0
        hp = subprocess.run([sys.executable, "-m", "newsflow.cli.main", "health", "--port", str(port)],
                            capture_output=True, timeout=30)
        assert hp.returncode == 0 and orjson.loads(hp.stdout)["ok"] is True
        time.sleep(1.5)  # one status line
    finally:
        err = stop(proc)
    logs = [orjson.loads(x) for x in err.splitlines() if x.startswith("{")]
    msgs = [r["msg"] for r in logs]
    assert msgs[0].startswith("flow starting; metrics at http://127.0.0.1:") and logs[0]["level"] == "info"
    status = [r for r in logs if r["msg"].startswith("status ")]
    assert status and status[-1]["payloads"] == n


@pytest.mark.kafka
@pytest.mark.http
def test_poll_serves_polls_by_status_and_broken_feeds(kafka_bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    raw, health = f"feeds.raw.{suffix}", f"feed-health.{suffix}"
    conf = tmp_path / "poller.toml"
    conf.write_text(f'[kafka.topics]\nraw = "{raw}"\nfeed_health = "{health}"\n'
                    "[poller.fetch]\ntimeout_s = 3.0\nretry_backoff_s = [0.01, 0.02]\n"
                    'allowed_networks = ["127.0.0.1/32"]\n')
    port = free_port()
    with FixtureServer() as srv:
        feeds = [FeedSpec("wire", srv.url("/feeds/rss20.xml"), "Wire", "Wire Co", "T1", "world", "en"),
                 FeedSpec("cf", srv.url("/html/cloudflare.html"), "CF", "CF", "T4", "misc", "en"),
                 FeedSpec("gone", srv.url("/status/410"), "Gone", "G", "T4", "misc", "en")]
        reg = tmp_path / "feeds.toml"
        reg.write_text(dump_registry(feeds))
        proc = subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", "poll", "--registry", str(reg),
                                 "--brokers", kafka_bootstrap, "--config", str(conf), "--no-state", "--quiet",
                                 "--metrics-port", str(port), "--metrics-host", "127.0.0.1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            def polled() -> Any:
                s = scrape(port)
                return s if sum(by_name(s, "newsflow_polls_total").values()) >= 3 else None

            s = wait_for(polled, 90, "three polls", proc)
            polls = {dict(k)["status"]: v for k, v in by_name(s, "newsflow_polls_total").items()}
            assert polls == {"ok": 1, "html_instead_of_feed": 1, "dead": 1}
            assert by_name(s, "newsflow_broken_feeds")[()] == 2
            # only the poller's own metrics: none of the flow's would move here
            text = get(f"http://127.0.0.1:{port}/metrics")[1]
            assert not [m for m in ("newsflow_payloads", "newsflow_repolls_unchanged", "newsflow_late_for_digest",
                                    "newsflow_consumer_lag") if m in text], text
            code, body = get(f"http://127.0.0.1:{port}/healthz")
            h = orjson.loads(body)
            assert code == 200 and h["broken_feeds"] == 2
            assert h["broken_feed_ids"] == {"cf": "html_instead_of_feed", "gone": "dead"}  # by name
        finally:
            err = stop(proc)
    assert "poller starting; metrics at http://127.0.0.1:" in err


def test_labelled_metric_children_count_in_the_registry_as_labels_does() -> None:
    """The hot path's memoized ``labels()`` (``metrics.labelled``) hands out the child the
    registry exports: its increments show up under the label values, and a gauge keeps its value."""
    from prometheus_client import REGISTRY

    from newsflow.flows import metrics

    value = f"test-{uuid.uuid4().hex[:8]}"
    before = REGISTRY.get_sample_value("newsflow_articles_total", {"disposition": value}) or 0.0
    child = metrics.labelled(metrics.ARTICLES, value)
    assert child is metrics.labelled(metrics.ARTICLES, value) is metrics.ARTICLES.labels(value)
    child.inc()
    metrics.labelled(metrics.ARTICLES, value).inc(2)
    assert REGISTRY.get_sample_value("newsflow_articles_total", {"disposition": value}) == before + 3
    metrics.labelled(metrics.EVENT_TIME, value).set(42.5)
    assert REGISTRY.get_sample_value("newsflow_event_time_seconds", {"partition": value}) == 42.5
    assert metrics.labelled(metrics.PAYLOADS, value) is not metrics.labelled(metrics.ARTICLES, value)
