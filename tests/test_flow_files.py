"""The whole dataflow on the bundled demo sample in file mode (Bytewax, no Kafka)."""

from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import run_file_flow
from newsflow.config import FlowSettings, Settings
from newsflow.connectors.files import write_archive
from newsflow.samples.demo import demo_payloads
from newsflow.wire.contracts import validate

TOPICS = ("articles", "digests", "feed-health", "deadletter", "stories")


@pytest.fixture(scope="module")
def demo_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("in") / "feeds.raw.jsonl"
    payloads = demo_payloads()
    write_archive(payloads, p)
    for line in p.read_bytes().splitlines():
        validate("feeds.raw", line)
    return p


def run(archive: Path, out: Path, workers: int = 1) -> dict[str, list[bytes]]:
    run_file_flow(str(archive), str(out), workers=workers)
    return {t: (out / f"{t}.jsonl").read_bytes().splitlines() for t in TOPICS}


@pytest.fixture(scope="module")
def outputs(demo_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[bytes]]:
    return run(demo_archive, tmp_path_factory.mktemp("out1"))


def test_every_message_validates_against_its_schema(outputs: dict[str, list[bytes]]) -> None:
    for topic, lines in outputs.items():
        assert lines, topic
        for line in lines:
            validate(topic, line)


def test_dispositions_and_links(outputs: dict[str, list[bytes]]) -> None:
    arts = [orjson.loads(x) for x in outputs["articles"]]
    disp = Counter(a["disposition"] for a in arts)
    assert disp["unique"] >= 8 and disp["exact_duplicate"] >= 5 and disp["revision"] >= 1
    assert disp["near_duplicate"] + disp["same_event"] >= 5  # the publishers' own takes on wire stories
    # every record has a story; copies share the original's story; scores where the spec wants them
    by_id = {a["article_id"]: a for a in arts}
    for a in arts:
        assert a["story_id"] and a["topic_id"] and a["story_publishers"] >= 1
        if a["duplicate_of"] in by_id:
            assert a["story_id"] == by_id[a["duplicate_of"]]["story_id"]
        scored = a["disposition"] in ("unique", "revision", "same_event")
        assert (a["importance"] is not None) == scored
    quake = {a["story_id"] for a in arts if "earthquake" in a["title"].lower()}
    assert len(quake) == 1  # the wire story, its revision, copies and rewrites: one story
    # the revised quake story says what changed
    rev = [a for a in arts if a["disposition"] == "revision" and a["feed_id"] == "wire-world"]
    assert rev and set(rev[0]["changed"]) >= {"title", "body"} and rev[0]["key"].endswith("#r1")
    # syndicated wire copies are linked to the wire original, listing every feed seen
    dup = [a for a in arts if a["disposition"] == "exact_duplicate" and a["feed_id"] == "portal-news"]
    assert dup and all(d["duplicate_of"] for d in dup)
    assert all(len(d["seen_in"]) >= 2 for d in dup)
    # tracking-parameter variants collapse onto one canonical URL
    stadium = [a for a in arts if a["feed_id"] == "aggregator" and "stadium" in a["canonical_url"]]
    assert stadium[0]["dedup_layer"] == "url" and "utm_" not in stadium[0]["canonical_url"]
    # keys are unique: at-least-once re-emits overwrite, distinct records never collide
    keys = [a["key"] for a in arts]
    assert len(keys) == len(set(keys))


def test_bad_input_goes_to_deadletter_with_reason_and_bytes(outputs: dict[str, list[bytes]]) -> None:
    dls = [orjson.loads(x) for x in outputs["deadletter"]]
    reasons = Counter(d["reason"] for d in dls)
    assert reasons["html_instead_of_feed"] == 4 and reasons["no_title_no_body"] >= 1
    assert all(d["original_b64"] for d in dls)
    health = [orjson.loads(x) for x in outputs["feed-health"]]
    assert any(h["status"] == "html_instead_of_feed" for h in health)
    assert any(h["malformed"] for h in health if h["feed_id"] == "city-blog")


def test_digest_closes_windows_on_event_time(outputs: dict[str, list[bytes]]) -> None:
    digests = [orjson.loads(x) for x in outputs["digests"]]
    finals = {d["digest_id"]: d for d in digests if d["final"]}
    # the sample runs 2026-03-02 06:00 -> 03-04 06:00 (a closing heartbeat): the morning briefs
    # of the 3rd and 4th close on event time, the hourly rolling digests too
    assert "morning_brief:2026-03-02T07:00:00Z" in finals and "morning_brief:2026-03-03T07:00:00Z" in finals
    assert sum(d["digest_type"] == "rolling" for d in finals.values()) >= 40
    brief = finals["morning_brief:2026-03-02T07:00:00Z"]
    assert brief["generated_at"] == brief["window_end"]  # event time, not the wall clock
    assert brief["article_count"] > 0
    fh = brief["feed_health"]  # the Feed Health Report of the window
    assert fh["feeds_seen"] == 12 and fh["polls"] > 0 and "broken-feed" in fh["unhealthy_feeds"]
    top = [it for s in brief["sections"] if s["name"] != "Feed Health Report" for it in s["items"]]
    assert top and top[0]["lead"]["publisher"] and top[0]["lead"]["url"]


def test_replay_is_byte_identical_twice_and_with_two_workers(demo_archive: Path, outputs: dict[str, list[bytes]],
                                                             tmp_path: Path) -> None:
    again = run(demo_archive, tmp_path / "again")
    assert again == outputs  # same bytes, same order
    two = run(demo_archive, tmp_path / "two", workers=2)
    for t in TOPICS:  # the same bytes in the same order: the files are put in canonical order
        assert two[t] == outputs[t], t


def test_the_size_of_file_reads_changes_no_byte(demo_archive: Path, outputs: dict[str, list[bytes]],
                                              tmp_path: Path) -> None:
    """One payload per read, or every partition in one read, on two workers: the default's bytes."""
    for batch in (1, 100_000):
        settings = Settings(flow=FlowSettings(read_batch=batch))
        run_file_flow(str(demo_archive), str(tmp_path / str(batch)), settings, workers=2)
        for t in TOPICS:
            assert (tmp_path / str(batch) / f"{t}.jsonl").read_bytes().splitlines() == outputs[t], (batch, t)


def test_bad_envelopes_do_not_stop_the_flow(tmp_path: Path, demo_archive: Path) -> None:
    mixed = tmp_path / "mixed.jsonl"
    lines = demo_archive.read_bytes().splitlines()
    mixed.write_bytes(b"\n".join([b"not json", lines[0], b'{"feed_id": 1}', b"[1,2]", *lines[1:5]]) + b"\n")
    out = run(mixed, tmp_path / "out")
    dls = [orjson.loads(x) for x in out["deadletter"]]
    assert sum(d["reason"] == "bad_envelope" for d in dls) == 3
    assert out["articles"]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_truncated_archive_keeps_what_was_read_and_dead_letters_the_break(
        tmp_path: Path, demo_archive: Path, workers: int) -> None:
    """A cut-off ``.gz`` (an interrupted download) stopped the flow with a panic and wrote
    nothing. Now the lines before the break are read, the break is one dead letter (which file,
    after which line, what broke), and the archive's next file is read as usual."""
    import gzip

    lines = demo_archive.read_bytes().splitlines()
    half = len(lines) // 2
    d = tmp_path / "archive"
    d.mkdir()
    whole = gzip.compress(b"\n".join(lines[:half]) + b"\n")
    (d / "a.jsonl.gz").write_bytes(whole[: len(whole) * 2 // 3])
    (d / "b.jsonl").write_bytes(b"\n".join(lines[half:]) + b"\n")
    out = run(d, tmp_path / "out", workers=workers)
    dls = [orjson.loads(x) for x in out["deadletter"]]
    [cut] = [x for x in dls if x["reason"] == "unreadable_archive"]
    validate("deadletter", cut)
    assert cut["stage"] == "envelope" and cut["detail"].startswith("a.jsonl.gz: unreadable after line ")
    read = int(cut["detail"].split("after line ")[1].split(":")[0])
    assert 0 < read < half
    fed = {orjson.loads(x)["feed_id"] for x in out["feed-health"]} | {"__tick__"}  # (heartbeats: no record)
    assert {orjson.loads(x)["feed_id"] for x in lines[:read]} <= fed  # the lines before the break
    assert {orjson.loads(x)["feed_id"] for x in lines[half:]} <= fed  # the next file


def test_body_stored_aside_by_the_poller_is_read_back(tmp_path: Path) -> None:
    from dataclasses import replace

    p = next(x for x in demo_payloads() if x.feed_id == "wire-world" and x.body and b"<item>" in x.body)
    blob = tmp_path / "blob.xml"
    blob.write_bytes(p.body)
    ref = replace(p, body=None, body_ref=blob.as_uri())
    missing = replace(p, body=None, body_ref=(tmp_path / "gone.xml").as_uri(), fetched_at_ms=p.fetched_at_ms + 1)
    # the poller's blob directory is the only place a body_ref is read from
    outside = replace(p, body=None, body_ref="file:///etc/passwd", fetched_at_ms=p.fetched_at_ms + 2)
    archive = tmp_path / "in.jsonl"
    write_archive([ref, missing, outside], archive)
    run_file_flow(str(archive), str(tmp_path / "out"), settings=Settings(flow=FlowSettings(blob_dir=str(tmp_path))))
    out = {t: (tmp_path / "out" / f"{t}.jsonl").read_bytes().splitlines() for t in TOPICS}
    assert len(out["articles"]) >= 1
    dls = [orjson.loads(x) for x in out["deadletter"]]
    assert [d["reason"] for d in dls].count("body_ref_unreadable") == 1
    [refused] = [d for d in dls if d["reason"] == "body_ref_refused"]
    assert b"root:" not in base64.b64decode(refused["original_b64"])  # the envelope, never the file


def test_two_worker_processes_give_the_same_records(demo_archive: Path, outputs: dict[str, list[bytes]],
                                                    tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "NEWSFLOW_INPUT": str(demo_archive), "NEWSFLOW_OUT": str(tmp_path / "p2")}
    subprocess.run([sys.executable, "-m", "bytewax.testing", "flows.entry:file_flow()", "-p", "2"],
                   env=env, check=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    for t in TOPICS:
        assert (tmp_path / "p2" / f"{t}.jsonl").read_bytes().splitlines() == outputs[t], t


def test_without_placement_the_same_bytes_on_one_or_two_workers_and_processes(
        demo_archive: Path, outputs: dict[str, list[bytes]], tmp_path: Path) -> None:
    """``flow.placement = false`` (plain key names, placed by Bytewax's hash alone): the bytes of
    the placed one-worker run, on one worker, two workers and two processes."""
    off = Settings(flow=FlowSettings(placement=False))
    for name, kw in (("w1", {}), ("w2", {"workers": 2}), ("p2", {"processes": 2})):
        run_file_flow(str(demo_archive), str(tmp_path / name), off, **kw)
        for t in TOPICS:
            assert (tmp_path / name / f"{t}.jsonl").read_bytes().splitlines() == outputs[t], (name, t)


def test_the_archive_splits_by_feed_into_partitions_that_each_end_with_a_marker(demo_archive: Path) -> None:
    from newsflow.connectors.files import (
        END_OF_PARTITION,
        RawArchiveSource,
        line_feed,
        partition_of,
    )

    src = RawArchiveSource(demo_archive, batch_size=7, partitions=4)
    assert src.list_parts() == ["0000", "0001", "0002", "0003"]
    seen: dict[str, str] = {}
    for part in src.list_parts():
        p = src.build_part("raw_in", part, None)
        items: list[tuple[str, bytes]] = []
        try:
            while True:
                items.extend(p.next_batch())
        except StopIteration:
            pass
        assert items[-1] == (f"{part}:{END_OF_PARTITION}", b"")  # even a partition without lines ends
        for seq, line in items[:-1]:
            assert seq.startswith(part + ":") and partition_of(line_feed(line), 4) == part
            seen[seq.split(":")[1]] = part
    lines = demo_archive.read_bytes().splitlines()
    assert sorted(seen) == [f"{i:012d}" for i in range(len(lines))]  # every line once, numbered globally
    assert len(set(seen.values())) >= 2  # the demo's 12 feeds really are split


def test_two_machines_joined_by_addresses_give_the_same_records(demo_archive: Path, outputs: dict[str, list[bytes]],
                                                                tmp_path: Path) -> None:
    """The README's several-machines command (``bytewax.run -i N -a "host:port;host:port"``), both
    processes on this machine: every record equals the one-process run's."""
    import os
    import subprocess
    import sys

    from tests.cluster_addresses import loopback_addresses

    addresses = loopback_addresses(2)
    env = {**os.environ, "NEWSFLOW_INPUT": str(demo_archive), "NEWSFLOW_OUT": str(tmp_path / "two")}
    root = Path(__file__).resolve().parents[1]
    procs = [subprocess.Popen([sys.executable, "-m", "bytewax.run", "flows.entry:file_flow", "-i", str(i),
                               "-a", addresses], env=env, cwd=root) for i in range(2)]
    try:
        assert [p.wait(timeout=300) for p in procs] == [0, 0]
    finally:
        for p in procs:
            p.kill()
    for t in TOPICS:
        assert (tmp_path / "two" / f"{t}.jsonl").read_bytes().splitlines() == outputs[t], t


def test_a_flow_process_runs_the_garbage_collector_less_often(demo_archive: Path, tmp_path: Path) -> None:
    """Building the flow raises the collector's generation-0 threshold and freezes what was
    imported (flow.gc_young_threshold); 0 leaves Python's defaults."""
    import os
    import subprocess
    import sys

    code = ("import gc, os; from newsflow.flows.entry import file_flow; file_flow(); "
            "print(gc.get_threshold()[0], gc.get_freeze_count() > 0)")
    env = {**os.environ, "NEWSFLOW_INPUT": str(demo_archive), "NEWSFLOW_OUT": str(tmp_path / "o")}
    def probe(**extra: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", code], env={**env, **extra}, check=True, timeout=120,
                              capture_output=True, text=True).stdout.split()
    assert probe() == ["50000", "True"]
    assert probe(NEWSFLOW_FLOW__GC_YOUNG_THRESHOLD="0") == ["700", "False"]


def test_local_processes_write_the_same_bytes_and_report_their_counts(
        demo_archive: Path, outputs: dict[str, list[bytes]], tmp_path: Path) -> None:
    """``run_file_flow(processes=2)`` (``--processes`` of ``newsflow demo`` / ``replay``): the
    1-process bytes, and the payloads and articles summed over the processes, as one counts."""
    counts = run_file_flow(str(demo_archive), str(tmp_path / "one"))
    seen: list[tuple[int, int]] = []
    assert run_file_flow(str(demo_archive), str(tmp_path / "two"), processes=2,
                         progress=lambda p, a: seen.append((p, a))) == counts
    assert counts[0] == len(demo_archive.read_bytes().splitlines()) and counts[1] > 0
    assert seen[-1] == counts and seen == sorted(seen)  # progress only grows, to the totals
    for t in TOPICS:
        assert (tmp_path / "two" / f"{t}.jsonl").read_bytes().splitlines() == outputs[t], t


def test_a_failing_process_fails_the_run_and_stops_the_others(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    import time

    from newsflow.cli.processes import FileRun, ProcessFailed, run_processes

    t0 = time.monotonic()
    with pytest.raises(ProcessFailed, match="exited with status"):
        run_processes(FileRun(str(tmp_path / "missing.jsonl"), str(tmp_path / "out"),
                              Settings().model_dump_json().encode()), 2)
    assert time.monotonic() - t0 < 120
    assert "FileNotFoundError: no *.jsonl or *.jsonl.gz" in capfd.readouterr().err  # the child's error, shown
