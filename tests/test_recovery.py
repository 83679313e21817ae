"""Nothing lost across restarts: a run stopped part-way and resumed from Bytewax recovery
snapshots emits the same articles as one uninterrupted run (at-least-once, idempotent keys)."""

from __future__ import annotations

import os
import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from newsflow.cli.main import run_file_flow
from newsflow.connectors.files import write_archive
from newsflow.core.snapshot import ZSTD_MAGIC
from newsflow.samples.demo import demo_payloads


def articles(path: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for line in path.read_bytes().splitlines():
        out[orjson.loads(line)["key"]] = line  # by idempotent key: a re-emit overwrites
    return out


def _one_run(tmp_path: Path) -> tuple[list[Any], Path, dict[str, bytes]]:
    """The demo payloads, their archive holding only the first 40 (it grows later, like a
    topic), and the articles of one uninterrupted run over all of them."""
    payloads = demo_payloads()
    archive = tmp_path / "raw.jsonl"
    write_archive(payloads, archive)
    run_file_flow(str(archive), str(tmp_path / "once"))
    run_file_flow(str(archive), str(tmp_path / "once-rec"), recovery_dir=str(tmp_path / "once-recovery"))
    write_archive(payloads[:40], archive)
    return payloads, archive, articles(tmp_path / "once" / "articles.jsonl")


def _by_key(path: Path, field: str) -> dict[str, bytes]:
    return {orjson.loads(x)[field]: x for x in path.read_bytes().splitlines()}


def _same_digests_and_stories(tmp_path: Path, out: Path) -> None:
    """The resumed run's digests and stories, by key, are an uninterrupted run's with recovery:
    there the end of the input is a pause, so the windows still open at the end are drafted
    when a rerun goes on, not in progress at the end (an in-progress draft ended its window's
    key, and every later digest of its type waited for that window for good)."""
    once = tmp_path / "once-rec"
    for name, field in (("digests", "digest_id"), ("stories", "story_id"), ("feed-health", "feed_id")):
        want = _by_key(once / f"{name}.jsonl", field)
        assert want and _by_key(out / f"{name}.jsonl", field) == want, name


def _grow(archive: Path, payloads: list[Any], first: int) -> None:
    """The whole archive, its first ``first`` lines overwritten with junk: a run that re-read them
    would dead-letter them (``bad_envelope``)."""
    write_archive(payloads, archive)
    lines = archive.read_bytes().splitlines()
    archive.write_bytes(b"\n".join([b"junk"] * first + lines[first:]) + b"\n")


def _stored_snapshots(rec: Path) -> dict[str, set[str]]:
    """step -> the kinds of its latest snapshots in the recovery store ("frozen": our compressed
    pickle; else the type Bytewax pickled)."""
    kinds: dict[str, set[str]] = {}
    for db in rec.glob("part-*.sqlite3"):
        with sqlite3.connect(db) as con:
            for step, ser in con.execute("SELECT step_id, ser_change FROM snaps"):
                if ser is None:
                    continue
                v = pickle.loads(ser)
                kind = "frozen" if isinstance(v, bytes) and v[:4] == ZSTD_MAGIC else type(v).__name__
                kinds.setdefault(step.split(".")[1], set()).add(kind)
    return kinds


@pytest.mark.parametrize("processes", [1, 2])
def test_resume_from_recovery_equals_one_run(tmp_path: Path, processes: int) -> None:
    """A run on the first 40 payloads snapshots its state (frozen: pickled and compressed) and
    input offsets; a rerun on the grown archive resumes from them: the articles of one
    uninterrupted run, none re-read. With ``processes`` 2 (``newsflow demo --processes 2
    --recovery-dir``) both processes share the directory."""
    payloads, archive, expected = _one_run(tmp_path)
    rec = tmp_path / "recovery"
    run_file_flow(str(archive), str(tmp_path / "resumed"), recovery_dir=str(rec), processes=processes)
    first = articles(tmp_path / "resumed" / "articles.jsonl")
    assert 0 < len(first) < len(expected)
    kinds = _stored_snapshots(rec)
    assert kinds["stories"] == kinds["dedup"] == kinds["parse"] == {"frozen"}
    _grow(archive, payloads, 40)
    run_file_flow(str(archive), str(tmp_path / "resumed"), recovery_dir=str(rec), processes=processes)
    assert b"bad_envelope" not in (tmp_path / "resumed" / "deadletter.jsonl").read_bytes()
    got = articles(tmp_path / "resumed" / "articles.jsonl")
    assert set(got) == set(expected)
    assert got == expected
    assert articles(tmp_path / "once-rec" / "articles.jsonl") == expected
    _same_digests_and_stories(tmp_path, tmp_path / "resumed")


def test_bytewax_launcher_with_a_recovery_directory_freezes_snapshots_and_resumes(tmp_path: Path) -> None:
    """``python -m bytewax.testing flows.entry:file_flow() -p 2 -r DIR`` (the several-machine
    launcher, ``bytewax.run -i/-a -r``, on one host): the flow sees the recovery directory, so
    each step's snapshot is frozen when taken (an unfrozen one is pickled by Bytewax later, from
    state that has moved on), and a rerun resumes: the articles of one uninterrupted run."""
    payloads, archive, expected = _one_run(tmp_path)
    rec = tmp_path / "recovery"
    rec.mkdir()
    subprocess.run([sys.executable, "-m", "bytewax.recovery", str(rec), "1"], check=True)
    env = {**os.environ, "NEWSFLOW_INPUT": str(archive), "NEWSFLOW_OUT": str(tmp_path / "out")}
    cmd = [sys.executable, "-m", "bytewax.testing", "flows.entry:file_flow()", "-p", "2",
           "-r", str(rec), "-s", "1", "-b", "0"]
    root = Path(__file__).resolve().parents[1]
    subprocess.run(cmd, env=env, cwd=root, check=True, timeout=300, capture_output=True)
    kinds = _stored_snapshots(rec)
    assert kinds["stories"] == kinds["dedup"] == kinds["parse"] == kinds["digest_feeders"] == {"frozen"}
    _grow(archive, payloads, 40)
    subprocess.run(cmd, env=env, cwd=root, check=True, timeout=300, capture_output=True)
    assert b"bad_envelope" not in (tmp_path / "out" / "deadletter.jsonl").read_bytes()
    assert articles(tmp_path / "out" / "articles.jsonl") == expected
    _same_digests_and_stories(tmp_path, tmp_path / "out")


def test_two_machines_with_their_own_recovery_directories_resume(tmp_path: Path) -> None:
    """The README's several machines with recovery, on one host: the partitions are created once
    (``python -m bytewax.recovery DIR 2``) and each machine gets one of them in its own
    directory (``bytewax.run -i N -a ... -r DIR_N``); a rerun of both on the grown archive
    resumes from them: the articles, digests and stories of one uninterrupted run, none re-read."""
    import shutil

    from tests.cluster_addresses import loopback_addresses

    payloads, archive, expected = _one_run(tmp_path)
    made = tmp_path / "made"
    made.mkdir()
    subprocess.run([sys.executable, "-m", "bytewax.recovery", str(made), "2"], check=True)
    parts = sorted(made.glob("part-*.sqlite3"))
    assert len(parts) == 2
    dirs = [tmp_path / "machine0", tmp_path / "machine1"]
    for d, part in zip(dirs, parts, strict=True):
        d.mkdir()
        shutil.move(str(part), d / part.name)
    env = {**os.environ, "NEWSFLOW_INPUT": str(archive), "NEWSFLOW_OUT": str(tmp_path / "out")}
    root = Path(__file__).resolve().parents[1]

    def run_both() -> None:
        addresses = loopback_addresses(2)
        procs = [subprocess.Popen([sys.executable, "-m", "bytewax.run", "flows.entry:file_flow", "-i", str(i),
                                   "-a", addresses, "-r", str(dirs[i]), "-s", "1", "-b", "0"],
                                  env=env, cwd=root) for i in range(2)]
        try:
            assert [p.wait(timeout=300) for p in procs] == [0, 0]
        finally:
            for p in procs:
                p.kill()

    run_both()
    first = articles(tmp_path / "out" / "articles.jsonl")
    assert 0 < len(first) < len(expected)
    for d in dirs:  # each machine wrote snapshots to the partition it holds
        assert _stored_snapshots(d), d
    _grow(archive, payloads, 40)
    run_both()
    assert b"bad_envelope" not in (tmp_path / "out" / "deadletter.jsonl").read_bytes()
    assert articles(tmp_path / "out" / "articles.jsonl") == expected
    _same_digests_and_stories(tmp_path, tmp_path / "out")
