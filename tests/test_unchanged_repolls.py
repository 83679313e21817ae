"""An item whose content did not change is never a revision, whatever the dedup window.

Feeds keep items for days; with a dedup window shorter than the story layer's memory the
GUID entry of an unchanged item expired in dedup while the story layer still knew the
article, and the re-served item came out as a ``revision`` with ``changed=[]`` and
``duplicate_of`` pointing at itself.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from newsflow.cli.main import run_file_flow
from newsflow.config import Settings
from newsflow.connectors.files import write_archive
from newsflow.model.records import RawPayload

HOUR = 3_600_000
T0 = 1_772_431_200_000  # 2026-03-02T06:00:00Z
REAL = "data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz"


def _rss(items: list[int]) -> bytes:
    from email.utils import formatdate

    body = "".join(
        f"<item><title>Council votes on the harbour budget, part {n}</title>"
        f"<link>https://ex.org/{n}</link><guid>https://ex.org/{n}</guid>"
        f"<description>&lt;p&gt;Report number {n} on the harbour budget vote.&lt;/p&gt;</description>"
        f"<pubDate>{formatdate((T0 + n * 6 * HOUR) / 1000, usegmt=True)}</pubDate></item>"
        for n in items)
    return (f'<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Ex</title>{body}'
            "</channel></rss>").encode()


def _articles(out: Path) -> list[dict[str, object]]:
    return [orjson.loads(x) for x in (out / "articles.jsonl").read_bytes().splitlines()]


def _assert_no_fake_revisions(recs: list[dict[str, object]]) -> None:
    empty = [r["key"] for r in recs if r["disposition"] == "revision" and not r["changed"]]
    self_ref = [r["key"] for r in recs if r["duplicate_of"] == r["article_id"]]
    assert not empty, f"{len(empty)} revisions with nothing changed"
    assert not self_ref, f"{len(self_ref)} records whose duplicate_of is themselves"


def test_items_re_served_for_days_with_a_12h_window_are_never_revisions(tmp_path: Path) -> None:
    # one feed polled every 13 h for 4 days; item n is published at T0 + 6n h, and each poll
    # serves the six newest items published by then (each one re-served for a day and a half)
    polls, served = [], set()
    for k in range(8):
        at = T0 + k * 13 * HOUR
        items = [n for n in range(at // (6 * HOUR) - T0 // (6 * HOUR), -1, -1)][:6]
        served.update(items)
        polls.append(RawPayload("ex", "https://ex.org/feed", at, 200, _rss(items), publisher="Ex"))
    write_archive(polls, tmp_path / "in.jsonl")
    settings = Settings.model_validate({"dedup": {"window_hours": 12}})
    run_file_flow(str(tmp_path / "in.jsonl"), str(tmp_path / "out"), settings)
    recs = _articles(tmp_path / "out")
    _assert_no_fake_revisions(recs)
    assert {r["guid"] for r in recs} == {f"https://ex.org/{n}" for n in served}


def test_a_real_archive_of_re_polls_with_a_12h_window_has_no_fake_revisions(tmp_path: Path,
                                                                            shared_dir: Path) -> None:
    with gzip.open(shared_dir / REAL, "rb") as fh:
        lines = [fh.readline() for _ in range(90)]  # ~10 days of three feeds
    (tmp_path / "in.jsonl").write_bytes(b"".join(lines))
    settings = Settings.model_validate({"dedup": {"window_hours": 12}})
    run_file_flow(str(tmp_path / "in.jsonl"), str(tmp_path / "out"), settings)
    recs = _articles(tmp_path / "out")
    assert len(recs) > 500
    _assert_no_fake_revisions(recs)
    # a real revision still says what changed
    assert all(r["changed"] for r in recs if r["disposition"] == "revision")


def test_a_story_clock_that_stands_still_makes_no_revision_of_an_item_dedup_forgot(tmp_path: Path) -> None:
    """The story state forgets on publication time: when nothing new is published, it keeps an
    article as long as it likes, while dedup, on fetch time, let it go. The item re-served then is
    the same article again, never a revision of itself."""
    items = [0, 1, 2]
    polls = [RawPayload("ex", "https://ex.org/feed", T0 + 13 * HOUR + k * 2 * HOUR, 200, _rss(items), publisher="Ex")
             for k in range(10)]  # the same three items for 20 hours, nothing new published
    write_archive(polls, tmp_path / "in.jsonl")
    settings = Settings.model_validate({"dedup": {"window_hours": 0.5},
                                        "stories": {"window_hours": 1}})
    run_file_flow(str(tmp_path / "in.jsonl"), str(tmp_path / "out"), settings)
    recs = _articles(tmp_path / "out")
    _assert_no_fake_revisions(recs)
    assert {r["guid"] for r in recs} == {f"https://ex.org/{n}" for n in items}
