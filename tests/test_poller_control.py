"""Operating a running poller, on the real broker with a real HTTP server on 127.0.0.1: one
poller per state directory (a second ``newsflow poll``, ``--once`` too, says so in one line and
exits 2), ``newsflow poll --now FEED_ID`` makes the running poller poll that feed at once, and
a feed the address policy refused is polled at the next start once the operator allowed it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from newsflow.cli.main import main as cli_main
from newsflow.config import KafkaSettings, Settings, Topics
from newsflow.connectors.topics import ensure_topics
from tests.http_fixture_server import FixtureServer

pytestmark = [pytest.mark.kafka, pytest.mark.http]


def _setup(kafka_bootstrap: str, tmp_path: Path, srv: FixtureServer) -> tuple[list[str], Path]:
    suffix = uuid.uuid4().hex[:8]
    topics = Topics(**{r: f"{n}.{suffix}" for r, n in Topics().roles().items()})
    ensure_topics([kafka_bootstrap], Settings(kafka=KafkaSettings(topics=topics)))
    conf = tmp_path / "newsflow.toml"
    conf.write_text("[kafka.topics]\n" + "".join(f'{n} = "{getattr(topics, n)}"\n' for n in topics.roles()))
    reg = tmp_path / "feeds.toml"
    reg.write_text("".join(
        f'[[feed]]\nid = "{fid}"\nurl = "{srv.url(path)}"\nname = "{fid}"\npublisher = "P"\ntier = "T3"\n'
        'category = "world"\nlanguage = "en"\n' for fid, path in (("wire", "/feeds/rss20.xml"),
                                                                   ("atom", "/feeds/atom.xml"))))
    state = tmp_path / "state"
    args = ["poll", "--registry", str(reg), "--brokers", kafka_bootstrap, "--config", str(conf),
            "--state-dir", str(state), "--no-create-topics", "--quiet", "--metrics-port", "0"]
    return args, state


def test_one_poller_per_state_dir_and_poll_now(kafka_bootstrap: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with FixtureServer() as srv:
        args, state = _setup(kafka_bootstrap, tmp_path, srv)
        proc = subprocess.Popen([sys.executable, "-m", "newsflow.cli.main", *args, "--allow-private",
                                 "--snapshot-interval", "0.5", "--heartbeat", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            deadline = time.monotonic() + 60
            while not (srv.requests_for("/feeds/rss20.xml") and srv.requests_for("/feeds/atom.xml")):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
            capsys.readouterr()

            # a second poller on the same state directory: one line, exit 2, nothing polled
            n = len(srv.requests)
            for extra in ([], ["--once", "--force"]):
                assert cli_main([*args, "--allow-private", *extra]) == 2
                err = capsys.readouterr().err
                assert err.count("\n") == 1 and f"pid {proc.pid}" in err and str(state) in err, err
            assert len(srv.requests) == n

            # --now: the running poller polls that feed at once (its interval is minutes)
            assert cli_main([*args, "--now", "wire"]) == 0
            assert f"pid {proc.pid}" in capsys.readouterr().out
            t0 = time.monotonic()
            while len(srv.requests_for("/feeds/rss20.xml")) < 2:
                assert time.monotonic() - t0 < 5, "the --now request was not answered"
                time.sleep(0.05)
            assert len(srv.requests_for("/feeds/atom.xml")) == 1  # only the feed asked for
            assert "If-None-Match" in srv.requests_for("/feeds/rss20.xml")[-1].headers
            assert cli_main([*args, "--now", "nosuch"]) == 2
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            finally:
                if proc.poll() is None:
                    proc.kill()
        # no poller any more: --now says so; the directory is free again
        assert cli_main([*args, "--now", "wire"]) == 2
        assert "no poller is running" in capsys.readouterr().err
        assert cli_main([*args, "--allow-private", "--once"]) == 0


def test_blocked_feed_is_polled_at_the_next_start_once_allowed(kafka_bootstrap: str, tmp_path: Path) -> None:
    with FixtureServer() as srv:
        args, _state = _setup(kafka_bootstrap, tmp_path, srv)
        assert cli_main([*args, "--once"]) == 0  # loopback refused: both polls blocked
        assert not srv.requests
        assert cli_main([*args, "--once", "--allow-private"]) == 0  # the operator allowed it
        assert len(srv.requests_for("/feeds/rss20.xml")) == 1 and len(srv.requests_for("/feeds/atom.xml")) == 1
