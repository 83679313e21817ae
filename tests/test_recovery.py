"""Nothing lost across restarts: a run stopped part-way and resumed from Bytewax recovery
snapshots emits the same articles as one uninterrupted run (at-least-once, idempotent keys)."""

from __future__ import annotations

from pathlib import Path

import orjson

from newsflow.cli.main import run_file_flow
from newsflow.connectors.files import write_archive
from newsflow.samples.demo import demo_payloads


def articles(path: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for line in path.read_bytes().splitlines():
        out[orjson.loads(line)["key"]] = line  # by idempotent key: a re-emit overwrites
    return out


def test_resume_from_recovery_equals_one_run(tmp_path: Path) -> None:
    payloads = demo_payloads()
    archive = tmp_path / "raw.jsonl"
    write_archive(payloads, archive)
    run_file_flow(str(archive), str(tmp_path / "once"))
    expected = articles(tmp_path / "once" / "articles.jsonl")

    # first run sees only the first 40 payloads (the archive grows later, like a topic)
    write_archive(payloads[:40], archive)
    rec = tmp_path / "recovery"
    run_file_flow(str(archive), str(tmp_path / "resumed"), recovery_dir=str(rec))
    first = articles(tmp_path / "resumed" / "articles.jsonl")
    assert 0 < len(first) < len(expected)
    # the rest arrives; the second run resumes from the snapshot (input offset and state). The
    # first 40 lines are overwritten with junk: a run that re-read them would dead-letter them.
    write_archive(payloads, archive)
    lines = archive.read_bytes().splitlines()
    archive.write_bytes(b"\n".join([b"junk"] * 40 + lines[40:]) + b"\n")
    run_file_flow(str(archive), str(tmp_path / "resumed"), recovery_dir=str(rec))
    dead = (tmp_path / "resumed" / "deadletter.jsonl").read_bytes()
    assert b"bad_envelope" not in dead
    got = articles(tmp_path / "resumed" / "articles.jsonl")
    assert set(got) == set(expected)
    assert got == expected
