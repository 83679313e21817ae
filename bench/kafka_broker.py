"""The broker a Kafka benchmark talks to: the one given (``--brokers``), or the project's own
(``scripts/kafka``) started for the benchmark and stopped at its end."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def broker_bootstrap(brokers: str | None) -> Iterator[str]:
    """``brokers`` itself, else the bootstrap address of a local broker started here."""
    if brokers:
        yield brokers
        return
    sys.path.insert(0, str(ROOT / "scripts" / "kafka"))
    from kafka_local import KafkaBroker

    broker = KafkaBroker()
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
