"""Shared fixtures. The Kafka fixture starts a real broker (or uses ``KAFKA_BOOTSTRAP``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
