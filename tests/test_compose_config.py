"""docker-compose.yml runs the commands the tests run: its service commands and health checks
parse with the real CLI parser, the registry it mounts is valid, and the flow command (with the
test broker) resumes from its recovery directory on restart instead of replaying."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from newsflow.cli.main import build_parser, main
from newsflow.connectors.observability import POLL_METRICS_PORT, RUN_METRICS_PORT
from newsflow.connectors.topics import produce_values
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw
from tests.kafka_fixture import consume_all

ROOT = Path(__file__).resolve().parents[1]


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_registry_passes_feeds_check() -> None:
    assert main(["feeds", "check", "--registry", str(ROOT / "config" / "feeds.toml")]) == 0


def test_compose_commands_parse_with_the_real_cli() -> None:
    c = compose()
    parser = build_parser()
    services = c["services"]
    flow = parser.parse_args(services["flow"]["command"])
    poll = parser.parse_args(services["poller"]["command"])
    assert flow.cmd == "run" and poll.cmd == "poll"  # tests/test_kafka_e2e.py, test_poller_kafka.py
    assert (flow.metrics_port, poll.metrics_port) == (RUN_METRICS_PORT, POLL_METRICS_PORT)
    assert flow.metrics_host == poll.metrics_host == "0.0.0.0"  # reachable through the port mapping
    for name, args in (("flow", flow), ("poller", poll)):
        svc = services[name]
        assert f"127.0.0.1:{args.metrics_port}:{args.metrics_port}" in svc["ports"]
        check = svc["healthcheck"]["test"]
        assert check[:2] == ["CMD", "newsflow"]
        h = parser.parse_args(check[2:])
        assert h.cmd == "health" and h.port == args.metrics_port
        assert svc["restart"] == "unless-stopped" and svc["depends_on"]["kafka"]["condition"] == "service_healthy"
    # state across restarts lives in named volumes mounted where the commands keep it
    mounts = {m.split(":")[1]: m.split(":")[0] for m in services["flow"]["volumes"]}
    assert mounts[flow.recovery_dir] in c["volumes"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in services["poller"]["volumes"]}
    assert mounts[poll.state_dir] in c["volumes"]
    assert services["flow"]["command"][services["flow"]["command"].index("--brokers") + 1] == "kafka:9092"


def compose_flow_command(bootstrap: str, recovery: Path, config: Path) -> list[str]:
    """The compose flow service's command, pointed at the test broker and a temp recovery dir."""
    cmd = list(compose()["services"]["flow"]["command"])
    swap = {"kafka:9092": bootstrap, "/recovery": str(recovery), str(RUN_METRICS_PORT): "0"}
    return [swap.get(x, x) for x in cmd] + ["--config", str(config), "--until-eof"]


@pytest.mark.kafka
def test_compose_flow_restart_resumes_instead_of_replaying(kafka_bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    names = {"raw": "feeds.raw", "articles": "articles", "digests": "digests", "feed_health": "feed-health",
             "deadletter": "deadletter"}
    topics = {k: f"{v}.{suffix}" for k, v in names.items()}
    cfg = tmp_path / "settings.toml"
    cfg.write_text("[kafka.topics]\n" + "".join(f'{k} = "{v}"\n' for k, v in topics.items()))
    recovery = tmp_path / "recovery"  # does not exist yet: a fresh Docker volume is empty too
    cmd = compose_flow_command(kafka_bootstrap, recovery, cfg)
    assert "--recovery-dir" in cmd

    values = [encode_raw(p)[1] for p in demo_payloads()]
    produce_values([kafka_bootstrap], topics["raw"], values[:40])
    assert main(cmd) == 0
    first = [m.value() for m in consume_all(kafka_bootstrap, topics["articles"])]
    assert first and any(recovery.glob("part-*.sqlite3"))

    # a restart with nothing new: no article is emitted again
    assert main(cmd) == 0
    assert [m.value() for m in consume_all(kafka_bootstrap, topics["articles"])] == first

    # new payloads after the restart: only their articles are added, each key once
    produce_values([kafka_bootstrap], topics["raw"], values[40:])
    assert main(cmd) == 0
    after = [orjson.loads(m.value()) for m in consume_all(kafka_bootstrap, topics["articles"])]
    assert after[:len(first)] == [orjson.loads(v) for v in first]
    keys = [a["key"] for a in after]
    assert len(after) > len(first) and len(keys) == len(set(keys))
