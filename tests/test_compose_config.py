"""The registry docker-compose mounts is valid (the same check users run)."""

from __future__ import annotations

from pathlib import Path

from newsflow.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def test_compose_registry_passes_feeds_check() -> None:
    assert main(["feeds", "check", "--registry", str(ROOT / "config" / "feeds.toml")]) == 0


def test_compose_runs_the_commands_the_tests_run() -> None:
    compose = (ROOT / "docker-compose.yml").read_text()
    assert '"run", "--brokers", "kafka:9092"' in compose  # tests/test_kafka_e2e.py runs `newsflow run`
    assert '"poll", "--registry", "/config/feeds.toml"' in compose  # tests/test_poller_kafka.py runs `poll`
