"""Poison messages: a raw message on which the process dies (here: kill -9 while it is being
parsed, as an out-of-memory kill would) is dead-lettered on a resumed run instead of killing
the process again; everything around it comes out as in an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import run_file_flow
from newsflow.config import Settings
from newsflow.connectors.files import partition_of, write_archive
from newsflow.connectors.inflight import InflightJournal
from newsflow.core.timeutil import ms_to_iso
from newsflow.model.records import RawPayload
from newsflow.samples.demo import demo_payloads


def _articles(out: Path) -> dict[str, bytes]:
    return {orjson.loads(x)["key"]: x for x in (out / "articles.jsonl").read_bytes().splitlines()}


def _start(archive: Path, out: Path, rec: Path) -> subprocess.Popen[bytes]:
    code = f"from newsflow.cli.main import run_file_flow; run_file_flow({str(archive)!r}, {str(out)!r}, recovery_dir={str(rec)!r})"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_when_parsing(archive: Path, out: Path, rec: Path, journal: Path, seq: str, timeout_s: float = 120) -> None:
    """Start the flow; kill -9 it while it parses ``seq`` (the journal names it as current)."""
    proc = _start(archive, out, rec)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            st = orjson.loads(journal.read_bytes())
            if st.get("pid") == proc.pid and st.get("current") == seq:  # not a dead run's file
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)
                return
        except (OSError, orjson.JSONDecodeError):
            pass
        assert proc.poll() is None, f"the flow ended before it reached {seq}: {proc.stderr.read()[-2000:]!r}"  # type: ignore[union-attr]
        time.sleep(0.01)
    pytest.fail(f"the flow never started parsing {seq}")


@pytest.mark.slow
def test_a_message_that_kills_the_process_is_dead_lettered_on_resume(tmp_path: Path) -> None:
    good = demo_payloads()
    # a payload whose parse takes long enough to be caught in the act (deeply nested XML)
    poison = RawPayload("poison-feed", "https://poison.example/rss", good[29].fetched_at_ms + 1, 200,
                        b"<rss><channel>" + b"<a>" * 100_000 + b"</a>" * 100_000 + b"</channel></rss>")
    payloads = [*good[:30], poison, *good[30:]]
    archive, plain = tmp_path / "raw.jsonl", tmp_path / "plain.jsonl"
    write_archive(payloads, archive)
    write_archive(good, plain)
    run_file_flow(str(plain), str(tmp_path / "expected"))
    expected = _articles(tmp_path / "expected")

    rec, out = tmp_path / "recovery", tmp_path / "out"
    part = partition_of("poison-feed", Settings().flow.file_partitions)  # the file source's split by feed
    seq = f"{part}:{30:012d}"  # the file source's position of the poison payload
    journal = rec / "inflight" / f"{part}.json"
    for _ in range(2):  # poison_after_crashes = 2: two processes die on it
        _kill_when_parsing(archive, out, rec, journal, seq)
    p = _start(archive, out, rec)
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()[-3000:]

    dead = [orjson.loads(x) for x in (out / "deadletter.jsonl").read_bytes().splitlines()]
    poison_dls = [d for d in dead if d["reason"] == "poison_message"]
    assert len(poison_dls) == 1 and "2 runs died" in poison_dls[0]["detail"]
    assert poison_dls[0]["feed_id"] == "poison-feed" and poison_dls[0]["fetched_at"] == ms_to_iso(poison.fetched_at_ms)
    assert _articles(out).keys() == expected.keys()
    st = orjson.loads(journal.read_bytes())
    assert st["current"] is None and st["suspects"] == {} and st["pid"] == p.pid


def test_journal_counts_deaths_and_forgives_a_suspect_parsed_without_one(tmp_path: Path) -> None:
    j = InflightJournal(tmp_path, "0000")
    j.begin("0000:1")
    j = InflightJournal(tmp_path, "0000")  # the process died while parsing 0000:1
    assert j.crashes("0000:1") == 1 and j.crashes("0000:2") == 0
    j.begin("0000:1")
    j = InflightJournal(tmp_path, "0000")  # and again
    assert j.crashes("0000:1") == 2
    j.done("0000:1")
    assert InflightJournal(tmp_path, "0000").crashes("0000:1") == 0
    (tmp_path / "inflight" / "0000.json").write_bytes(b'{"current": "0000:')  # torn write
    assert InflightJournal(tmp_path, "0000").suspects == {}


def test_journal_overwrites_its_file_in_place_leaving_no_old_bytes(tmp_path: Path) -> None:
    """One file per partition, written in place: a shorter record after a longer one leaves
    none of the longer one's bytes (padding), and the file is never replaced (the same inode)."""
    j = InflightJournal(tmp_path, "0000")
    path = tmp_path / "inflight" / "0000.json"
    inode = path.stat().st_ino
    j.suspects = {f"0000:{i:012d}": 1 for i in range(50)}  # a long record
    j.begin("0000:000000000077")
    long = path.stat().st_size
    j.suspects = {}
    j.done("0000:000000000077")
    assert orjson.loads(path.read_bytes()) == {"pid": os.getpid(), "current": None, "suspects": {}}
    assert path.stat().st_size == long and path.stat().st_ino == inode
    assert not list(path.parent.glob("*.tmp"))
    j.begin("0000:000000000078")
    assert InflightJournal(tmp_path, "0000").crashes("0000:000000000078") == 1


def test_the_poison_dead_letter_names_the_feed_and_fetch_time_of_its_message(tmp_path: Path) -> None:
    """Read off the envelope's head without parsing the message (parsing it is what killed)."""
    from newsflow.flows.steps.parse import ParseLogic
    from newsflow.wire.codec import encode_raw

    at = 1_772_431_200_000
    raw = encode_raw(RawPayload("poison-feed", "https://poison.example/rss", at, 200, b"<rss>" + b"<a>" * 1000))[1]
    seq = "0000:000000000007"
    for _ in range(2):  # two runs died while parsing it
        InflightJournal(tmp_path, "0000").begin(seq)
    parse = ParseLogic(Settings(), None, False, str(tmp_path))
    out, _ = parse.on_item((seq, raw))
    dls = [orjson.loads(o.value) for o in out]  # type: ignore[attr-defined]
    assert [(d["reason"], d["feed_id"], d["fetched_at"]) for d in dls] == [
        ("poison_message", "poison-feed", "2026-03-02T06:00:00Z")]
    # an envelope whose head names no feed still gives its dead letter, with nulls
    for _ in range(2):
        InflightJournal(tmp_path, "0000").begin("0000:000000000008")
    parse = ParseLogic(Settings(), None, False, str(tmp_path))
    out, _ = parse.on_item(("0000:000000000008", b'{"x": 1, "fetched_at": "not a time"}'))
    assert [(d["reason"], d["feed_id"], d["fetched_at"]) for d in (orjson.loads(o.value) for o in out)] == [  # type: ignore[attr-defined]
        ("poison_message", None, None)]
