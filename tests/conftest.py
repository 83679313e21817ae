"""Shared fixtures. The Kafka fixture starts a real broker (or uses ``KAFKA_BOOTSTRAP``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# the local Kafka launcher is a dev tool beside its pom.xml, not part of the installed package
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "kafka"))

pytest_plugins = ["tests.kafka_fixture"]

SHARED = Path(os.environ.get("NEWSFLOW_SHARED", Path(__file__).resolve().parents[2] / "shared"))
if not SHARED.exists():  # CI clones next to shared/ too, but be lenient about the layout
    SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared (read-only real data). Its absence is an error in CI, never a skip."""
    if not SHARED.exists():
        raise FileNotFoundError(f"shared data not found at {SHARED} (set NEWSFLOW_SHARED)")
    return SHARED
