"""``newsflow import-snapshots``: a folder of timestamped feed files, or a git history of a feed
file, -> a ``feeds.raw`` archive that replays through the flow. Real feed documents from
``../shared/data/parser-corpora`` are copied into temporary folders at test time."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import feedparser
import orjson
import pytest

from newsflow.cli.main import main as cli_main
from newsflow.connectors.files import iter_archive
from newsflow.core.timeutil import iso_to_ms
from newsflow.wire.codec import decode_raw

pytestmark = pytest.mark.corpus

CORPUS = "data/parser-corpora"
HEISE = "rss-parser/test/input/heise.atom"  # Atom, 15 entries
HN = "feedjira/spec/sample_feeds/RSSWithComments.xml"  # RSS 2.0, 30 items
A10 = "feedjira/spec/sample_feeds/a10.xml"  # RSS 2.0, 5 items


def corpus(shared_dir: Path, rel: str) -> Path:
    return shared_dir / CORPUS / rel


def titles(body: bytes) -> set[str]:
    return {" ".join(e.title.split()) for e in feedparser.parse(body).entries}


def read_jsonl(p: Path) -> list[dict]:
    return [orjson.loads(x) for x in p.read_bytes().splitlines() if x.strip()]


def replay(archive: Path, out: Path) -> list[dict]:
    assert cli_main(["replay", str(archive), "--out", str(out), "--no-progress"]) == 0
    assert read_jsonl(out / "deadletter.jsonl") == []
    return read_jsonl(out / "articles.jsonl")


@pytest.fixture
def crawl(shared_dir: Path, tmp_path: Path) -> Path:
    """A crawl folder: timestamps in several spellings, a per-feed folder, one file dated by its
    modification time, two bad files and a file that is no snapshot at all."""
    d = tmp_path / "crawl"
    (d / "hn").mkdir(parents=True)
    shutil.copy(corpus(shared_dir, HEISE), d / "heise_2026-02-08T12-00-00Z.atom")
    shutil.copy(corpus(shared_dir, HEISE), d / "heise_20260208-130000.xml")  # a re-poll, unchanged
    (d / "hn" / "2026-02-08T12:30:00+01:00.xml.gz").write_bytes(
        gzip.compress(corpus(shared_dir, HN).read_bytes()))
    shutil.copy(corpus(shared_dir, A10), d / "a10.rss")
    os.utime(d / "a10.rss", ns=(1_770_560_000_123_000_000,) * 2)  # 2026-02-08T14:13:20.123Z
    (d / "wgrz-20260208-120000.xml").write_bytes(b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>")
    (d / "ars-20260208-120000.xml").write_bytes(b"")
    (d / "2026-02-08T15-00-00Z").mkdir()  # a crawl's folder per round
    shutil.copy(corpus(shared_dir, A10), d / "2026-02-08T15-00-00Z" / "a10.xml")  # a10 again, later
    (d / "notes.md").write_text("not a snapshot")
    (d / ".hidden.xml").write_bytes(corpus(shared_dir, A10).read_bytes())
    return d


def test_a_folder_of_snapshots_becomes_an_archive_that_replays(crawl: Path, tmp_path: Path, shared_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "feeds.raw.jsonl.gz"
    assert cli_main(["import-snapshots", str(crawl), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    # each bad file: one line saying why; the summary counts them and the file dated by mtime
    assert sorted(cap.err.splitlines()) == [
        "newsflow: skipped ars-20260208-120000.xml: empty file",
        "newsflow: skipped wgrz-20260208-120000.xml: not a feed document: the root element is <html>",
    ]
    assert "wrote 5 polls of 3 feeds" in cap.out and "2 skipped" in cap.out
    assert "1 dated by their file's modification time" in cap.out
    polls = [decode_raw(x) for x in iter_archive(out)]
    assert [(p.feed_id, p.fetched_at_ms) for p in polls] == [
        ("hn", iso_to_ms("2026-02-08T11:30:00Z")),
        ("heise", iso_to_ms("2026-02-08T12:00:00Z")),
        ("heise", iso_to_ms("2026-02-08T13:00:00Z")),
        ("a10", 1_770_560_000_123),
        ("a10", iso_to_ms("2026-02-08T15:00:00Z")),  # the time in its folder's name
    ]
    assert polls[0].body == corpus(shared_dir, HN).read_bytes()  # the .gz snapshot, decompressed
    assert all(p.status == 200 for p in polls)

    # deterministic: the same folder gives the same bytes (also the gzip header: no mtime in it)
    again = tmp_path / "again.jsonl.gz"
    assert cli_main(["import-snapshots", str(crawl), "-o", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()

    # the archive replays: every item of every snapshot is an article of its feed, once
    arts = replay(out, tmp_path / "replay")
    by_feed: dict[str, set[str]] = {}
    for a in arts:
        by_feed.setdefault(a["feed_id"], set()).add(" ".join(a["title"].split()))
    assert by_feed == {"heise": titles(corpus(shared_dir, HEISE).read_bytes()),
                       "hn": titles(corpus(shared_dir, HN).read_bytes()),
                       "a10": titles(corpus(shared_dir, A10).read_bytes())}
    assert len(arts) == 15 + 30 + 5  # the unchanged re-polls of heise and a10 add nothing


def test_feed_ids_are_mapped_and_registry_fields_copied(crawl: Path, tmp_path: Path) -> None:
    reg = tmp_path / "feeds.toml"
    reg.write_text('[[feeds]]\nid = "hackernews"\nurl = "https://news.ycombinator.com/rss"\n'
                   'publisher = "Hacker News"\ntier = "T3"\ncategory = "technology"\n')
    out = tmp_path / "a.jsonl"
    assert cli_main(["import-snapshots", str(crawl), "-o", str(out), "--feed-id", "hn=hackernews",
                     "--registry", str(reg)]) == 0
    polls = [decode_raw(x) for x in iter_archive(out)]
    hn = [p for p in polls if p.feed_id == "hackernews"]
    assert len(hn) == 1 and {p.feed_id for p in polls} == {"hackernews", "heise", "a10"}
    assert (hn[0].url, hn[0].publisher, hn[0].tier, hn[0].category) == (
        "https://news.ycombinator.com/rss", "Hacker News", "T3", "technology")
    # one id for all: heise's two snapshots and the others are one feed's polls
    assert cli_main(["import-snapshots", str(crawl), "-o", str(out), "--feed-id", "x"]) == 0
    assert {decode_raw(x).feed_id for x in iter_archive(out)} == {"x"}


def test_two_snapshots_of_a_feed_at_one_time_keep_the_first(shared_dir: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "dup"
    d.mkdir()
    shutil.copy(corpus(shared_dir, A10), d / "a10_2026-02-08T12-00-00Z.xml")
    shutil.copy(corpus(shared_dir, A10), d / "a10_20260208T120000Z.rss")
    (d / "2026-02-08T12-00-00Z.xml").write_bytes(corpus(shared_dir, A10).read_bytes())
    assert cli_main(["import-snapshots", str(d), "-o", str(tmp_path / "a.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert sorted(err) == [
        "newsflow: skipped 2026-02-08T12-00-00Z.xml: no feed id: the file name is only a timestamp (use --feed-id)",
        "newsflow: skipped a10_20260208T120000Z.rss: feed 'a10' has another snapshot at this time "
        "(a10_2026-02-08T12-00-00Z.xml)",
    ]
    assert len(list(iter_archive(tmp_path / "a.jsonl"))) == 1


def test_too_large_snapshots_are_skipped_without_being_read(shared_dir: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from newsflow.replay.snapshots import MAX_BODY_BYTES

    d = tmp_path / "big"
    d.mkdir()
    with (d / "huge-20260208-120000.xml").open("wb") as fh:  # sparse: its size, no bytes
        fh.truncate(MAX_BODY_BYTES + 1)
    # a small .gz that inflates past the limit
    (d / "bomb-20260208-120000.xml.gz").write_bytes(gzip.compress(b"<rss>" + b" " * MAX_BODY_BYTES))
    shutil.copy(corpus(shared_dir, A10), d / "a10-20260208-120000.xml")
    assert cli_main(["import-snapshots", str(d), "-o", str(tmp_path / "a.jsonl")]) == 0
    assert sorted(capsys.readouterr().err.splitlines()) == [
        f"newsflow: skipped bomb-20260208-120000.xml.gz: larger than {MAX_BODY_BYTES} bytes",
        f"newsflow: skipped huge-20260208-120000.xml: larger than {MAX_BODY_BYTES} bytes",
    ]
    assert [decode_raw(x).feed_id for x in iter_archive(tmp_path / "a.jsonl")] == ["a10"]


def test_no_good_snapshot_is_exit_2_and_a_missing_folder_one_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert cli_main(["import-snapshots", str(tmp_path / "empty"), "-o", str(tmp_path / "a.jsonl")]) == 2
    assert cli_main(["import-snapshots", str(tmp_path / "nope"), "-o", str(tmp_path / "a.jsonl")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert cli_main(["import-snapshots", str(tmp_path / "empty"), "-o", str(tmp_path / "a.txt")]) == 2
    assert "must end in .jsonl or .jsonl.gz" in capsys.readouterr().err


# ------------------------------------------------------------------------------ git history
def git(repo: Path, *args: str, when: str | None = None) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "scraper", "GIT_AUTHOR_EMAIL": "s@example.org",
           "GIT_COMMITTER_NAME": "scraper", "GIT_COMMITTER_EMAIL": "s@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if when:
        # the author date is a day off: the poll's time is the commit's (committer) time
        env |= {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def first_items(doc: bytes, n: int) -> bytes:
    """The RSS document with only its first ``n`` items (a feed as it was earlier)."""
    items = list(re.finditer(rb"<item>.*?</item>\s*", doc, re.S))
    return doc[:items[n].start()] + doc[items[-1].end():] if n < len(items) else doc


def test_a_git_history_of_a_feed_file_becomes_one_poll_per_commit(shared_dir: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "scraped"
    (repo / "feeds").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    doc = corpus(shared_dir, HN).read_bytes()
    times = ["2022-04-07T06:00:00Z", "2022-04-07T07:00:00Z", "2022-04-07T08:00:00Z"]
    for n, when in zip((10, 20, 30), times, strict=True):
        (repo / "feeds" / "hn.xml").write_bytes(first_items(doc, n))
        (repo / "README.md").write_text(f"scraped {when}")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"scrape {when}", when=when)
    (repo / "README.md").write_text("no feed changed")  # a commit without a feed file: no poll
    git(repo, "commit", "-q", "-am", "docs", when="2022-04-07T09:00:00Z")
    git(repo, "rm", "-q", "feeds/hn.xml")  # a deletion: no poll
    git(repo, "commit", "-q", "-m", "stop", when="2022-04-07T10:00:00Z")

    out = tmp_path / "hn.jsonl"
    assert cli_main(["import-snapshots", str(repo), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert "wrote 3 polls of 1 feeds" in cap.out and "from git" in cap.out and cap.err == ""
    polls = [decode_raw(x) for x in iter_archive(out)]
    assert [(p.feed_id, p.fetched_at_ms) for p in polls] == [("hn", iso_to_ms(t)) for t in times]
    assert [len(titles(p.body or b"")) for p in polls] == [10, 20, 30]
    again = tmp_path / "again.jsonl"
    assert cli_main(["import-snapshots", str(repo), "-o", str(again), "--source", "git"]) == 0
    assert again.read_bytes() == out.read_bytes()

    # replayed: each item is one article, first seen in the commit that added it
    arts = replay(out, tmp_path / "replay")
    assert len(arts) == 30
    order = [" ".join(e.title.split()) for e in feedparser.parse(doc).entries]
    for a in arts:
        i = order.index(" ".join(a["title"].split()))
        assert iso_to_ms(a["fetched_at"]) == iso_to_ms(times[i // 10]), a["title"]


def test_a_too_large_version_in_git_is_skipped_and_the_next_ones_read(shared_dir: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from newsflow.replay.snapshots import MAX_BODY_BYTES

    repo = tmp_path / "scraped"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "big.xml").write_bytes(b"<rss>" + b" " * MAX_BODY_BYTES)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "big", when="2022-04-07T06:00:00Z")
    (repo / "a10.xml").write_bytes(corpus(shared_dir, A10).read_bytes())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a10", when="2022-04-07T07:00:00Z")
    assert cli_main(["import-snapshots", str(repo), "-o", str(tmp_path / "a.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].endswith(f":big.xml: larger than {MAX_BODY_BYTES} bytes")
    (poll,) = [decode_raw(x) for x in iter_archive(tmp_path / "a.jsonl")]
    assert poll.feed_id == "a10" and poll.body == corpus(shared_dir, A10).read_bytes()
