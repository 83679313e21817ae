"""The user-facing commands: normalize (debug a feed) and import-uci (replay real data)."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import main
from newsflow.connectors.files import iter_archive
from newsflow.feeds.normalize import normalize_payload
from newsflow.wire.codec import decode_raw
from newsflow.wire.contracts import validate

FEED = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>'
        b"<item><title>One</title><link>/a/1?utm_source=x</link></item>"
        b"<item><description></description></item></channel></rss>")


def test_normalize_prints_one_json_line_per_article_or_deadletter(tmp_path: Path, capsysbinary) -> None:
    f = tmp_path / "feed.xml"
    f.write_bytes(FEED)
    assert main(["normalize", str(f), "--base-url", "https://ex.com/feed", "--fetched-at", "2026-03-02T12:00:00Z"]) == 0
    lines = capsysbinary.readouterr().out.splitlines()
    recs = [orjson.loads(x) for x in lines]
    assert [r["schema"] for r in recs] == ["articles", "deadletter"]
    validate("articles", lines[0])
    validate("deadletter", lines[1])
    assert recs[0]["canonical_url"] == "https://ex.com/a/1" and recs[1]["reason"] == "no_title_no_body"


def test_normalize_without_fetched_at_uses_the_files_mtime(tmp_path: Path, capsysbinary) -> None:
    import os

    f = tmp_path / "feed.xml"
    f.write_bytes(FEED)  # item "One" has no date: its published_at is the fetch time
    os.utime(f, (1_770_000_000, 1_770_000_000))  # 2026-02-02T02:40:00Z
    assert main(["normalize", str(f), "--base-url", "https://ex.com/feed"]) == 0
    rec = orjson.loads(capsysbinary.readouterr().out.splitlines()[0])
    assert rec["fetched_at"] == rec["published_at"] == "2026-02-02T02:40:00Z"
    assert rec["date_uncertain"] is True


@pytest.mark.corpus
def test_import_uci_renders_rows_as_rss_with_row_id_guids(shared_dir: Path, tmp_path: Path) -> None:
    uci = shared_dir / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
    assert main(["import-uci", str(uci), "--out", str(tmp_path), "--limit", "300"]) == 0
    with gzip.open(uci, "rb") as fh:
        rows = [orjson.loads(next(fh)) for _ in range(300)]
    guids: list[str] = []
    for line in iter_archive(tmp_path):
        validate("feeds.raw", line)
        p = decode_raw(line)
        guids += [a.guid for a in normalize_payload(p).articles]
    assert sorted(guids) == sorted(str(r["id"]) for r in rows)  # every row, once, GUID = row id
