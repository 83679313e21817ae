"""A replay never dead-letters real input for a gap in time.

An archive's order is its time order: a feed whose polls have gaps longer than the clock-jump
tolerance (a poller that was down, a scraper that missed days) is real input. The clock-fault
guard stays for live input (``tests/test_eventclock.py``) and, in an archive, still catches a
payload far ahead of the archive's clock that the archive's next payloads contradict (the
bad-input corpus' ``year-ahead`` / ``week-ahead`` cases).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import run_file_flow
from newsflow.config import Settings
from newsflow.connectors.files import partition_of, write_archive
from newsflow.model.records import RawPayload

HOUR = 3_600_000
T0 = 1_772_431_200_000  # 2026-03-02T06:00:00Z
#: poll times (hours after T0) of the lone feed: gaps of 25 h, 26 h (twice in a row) and a last
#: poll after a 26 h gap
GAPPY = (0, 6, 12, 37, 63, 69, 75, 101)
STEADY = tuple(range(0, 102, 6))


def _rss(feed: str, n: int, at_h: int) -> bytes:
    from email.utils import formatdate

    return (f'<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>{feed}</title>'
            f"<item><title>{feed} report {n}: the river level at the weir</title>"
            f"<link>https://{feed}.example/{n}</link><guid>https://{feed}.example/{n}</guid>"
            f"<description>&lt;p&gt;Measured level number {n} of the {feed} river.&lt;/p&gt;</description>"
            f"<pubDate>{formatdate((T0 + at_h * HOUR - 600_000) / 1000, usegmt=True)}</pubDate></item>"
            "</channel></rss>").encode()


def _archive(path: Path) -> None:
    polls = [RawPayload(f, f"https://{f}.example/rss", T0 + h * HOUR, 200, _rss(f, i, h), publisher=f.title())
             for f, hours in (("gappy", GAPPY), ("steady", STEADY)) for i, h in enumerate(hours)]
    polls.sort(key=lambda p: p.fetched_at_ms)  # the archive's order: its time order
    write_archive(polls, path)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_feed_alone_in_its_partition_with_gaps_over_a_day_loses_nothing(tmp_path: Path, workers: int) -> None:
    settings = Settings()
    parts = settings.flow.file_partitions
    assert partition_of("gappy", parts) != partition_of("steady", parts)  # alone in its partition
    _archive(tmp_path / "in.jsonl")
    run_file_flow(str(tmp_path / "in.jsonl"), str(tmp_path / "out"), settings, workers=workers)
    dls = [orjson.loads(x) for x in (tmp_path / "out" / "deadletter.jsonl").read_bytes().splitlines()]
    assert not dls, [(d["reason"], d["detail"]) for d in dls]
    arts = [orjson.loads(x) for x in (tmp_path / "out" / "articles.jsonl").read_bytes().splitlines()]
    got = sorted(a["guid"] for a in arts if a["feed_id"] == "gappy")
    assert got == sorted(f"https://gappy.example/{i}" for i in range(len(GAPPY)))
    health = [orjson.loads(x) for x in (tmp_path / "out" / "feed-health.jsonl").read_bytes().splitlines()]
    assert sum(h["feed_id"] == "gappy" for h in health) == len(GAPPY)  # every poll reached the flow


def test_the_same_replay_on_two_processes_gives_the_same_bytes(tmp_path: Path) -> None:
    _archive(tmp_path / "in.jsonl")
    outs = []
    for n in (1, 2):
        run_file_flow(str(tmp_path / "in.jsonl"), str(tmp_path / f"out{n}"), Settings(), processes=n)
        outs.append({t: (tmp_path / f"out{n}" / f"{t}.jsonl").read_bytes()
                     for t in ("articles", "deadletter", "digests", "feed-health", "stories")})
    assert outs[0] == outs[1]


def test_a_payload_the_archive_goes_back_from_is_a_dead_letter_that_says_so(tmp_path: Path) -> None:
    _archive(tmp_path / "ok.jsonl")
    lines = (tmp_path / "ok.jsonl").read_bytes().splitlines()
    year = 365 * 24 * HOUR
    bad = RawPayload("steady", "https://steady.example/rss", T0 + 30 * HOUR + year, 200, _rss("steady", 99, 30),
                     publisher="Steady")
    write_archive([bad], tmp_path / "bad.jsonl")
    mid = len(lines) // 2
    (tmp_path / "in.jsonl").write_bytes(b"\n".join([*lines[:mid], (tmp_path / "bad.jsonl").read_bytes().strip(),
                                                    *lines[mid:]]) + b"\n")
    run_file_flow(str(tmp_path / "in.jsonl"), str(tmp_path / "out"), Settings())
    dls = [orjson.loads(x) for x in (tmp_path / "out" / "deadletter.jsonl").read_bytes().splitlines()]
    assert [(d["reason"], d["feed_id"]) for d in dls] == [("future_fetched_at", "steady")]
    assert "a clock fault inside the archive" in dls[0]["detail"]
