"""Golden outputs: the flow's records on the demo sample and on 20k UCI rows, by SHA-256.

A refactoring must leave these byte-identical. A change that is *meant* to change outputs
regenerates them (and says so in its commit, with what changed and why)::

    NEWSFLOW_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import run_file_flow
from newsflow.connectors.files import write_archive
from newsflow.samples.demo import demo_payloads
from newsflow.samples.uci import uci_payloads

GOLDEN = Path(__file__).resolve().parent / "golden" / "outputs.json"
TOPICS = ("articles", "digests", "feed-health", "deadletter", "stories")
UPDATE = os.environ.get("NEWSFLOW_UPDATE_GOLDEN") == "1"


def _digests(out: Path, *, sort: bool = False) -> dict[str, str]:
    """Per topic: record count and SHA-256 of the file (``sort``: of its lines sorted: the
    records whatever their order)."""
    res = {}
    for t in TOPICS:
        f = out / f"{t}.jsonl"
        data = f.read_bytes() if f.exists() else b""  # a sink writes no file for a topic without records
        if sort:
            data = b"\n".join(sorted(data.splitlines()))
        res[t] = f"{len(data.splitlines())} {hashlib.sha256(data).hexdigest()}"
    return res


def _check(name: str, got: dict[str, str]) -> None:
    golden = orjson.loads(GOLDEN.read_bytes()) if GOLDEN.exists() else {}
    if UPDATE:
        golden[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_bytes(orjson.dumps(golden, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
        return
    assert name in golden, f"no golden outputs for {name}: run with NEWSFLOW_UPDATE_GOLDEN=1"
    assert got == golden[name], (
        f"{name}: outputs differ from tests/golden/outputs.json (records, sha256). If the change is "
        "intended, regenerate with NEWSFLOW_UPDATE_GOLDEN=1 and say why in the commit"
    )


def test_demo_outputs_are_golden(tmp_path: Path) -> None:
    archive = tmp_path / "demo.jsonl"
    write_archive(demo_payloads(), archive)
    run_file_flow(str(archive), str(tmp_path / "out"))
    _check("demo", _digests(tmp_path / "out"))


@pytest.mark.corpus
@pytest.mark.slow
def test_uci_20k_outputs_are_golden(tmp_path: Path, shared_dir: Path) -> None:
    src = shared_dir / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
    archive = tmp_path / "uci.jsonl.gz"
    write_archive(uci_payloads(src, limit=20_000), archive)
    run_file_flow(str(archive), str(tmp_path / "out"))
    _check("uci_20k", _digests(tmp_path / "out"))
    _check("uci_20k_sorted", _digests(tmp_path / "out", sort=True))


@pytest.mark.corpus
@pytest.mark.slow
def test_uci_20k_outputs_are_golden_with_two_workers(tmp_path: Path, shared_dir: Path) -> None:
    """The same bytes with 2 workers: UCI's dense stream has late story merges (hundreds in 20k
    rows), which the digests follow as of each window's end (``StoryMerge``)."""
    src = shared_dir / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
    archive = tmp_path / "uci.jsonl.gz"
    write_archive(uci_payloads(src, limit=20_000), archive)
    run_file_flow(str(archive), str(tmp_path / "out"), workers=2)
    _check("uci_20k", _digests(tmp_path / "out"))  # the same files as with one worker, byte for byte
    _check("uci_20k_sorted", _digests(tmp_path / "out", sort=True))
