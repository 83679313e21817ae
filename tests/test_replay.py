"""Backtests: ``newsflow replay`` and the comparison of two runs (``newsflow.replay.compare``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from newsflow.cli.main import main as cli_main
from newsflow.connectors.files import write_archive
from newsflow.replay.compare import RunOutputs, compare, diff_items, run_outputs, story_stats
from newsflow.replay.report import to_html, to_markdown
from newsflow.samples.demo import demo_payloads

# configuration files of the two runs (the format of newsflow.config.load_settings)
BASE_TOML = "[digests]\nrolling_minutes = 60\n"
#: 10 minutes of dedup and story memory instead of 72 h: near duplicates of items published
#: earlier are no longer recognised (a short dedup window alone changes no disposition: dedup
#: keeps an article as long as the story state may know it)
SHORT_DEDUP_TOML = ("[dedup]\nwindow_hours = 0.16666666666666666\n"
                    "[stories]\nwindow_hours = 0.16666666666666666\n")


def item(aid: str, score: float, stories: list[str] | None = None, title: str | None = None) -> dict[str, Any]:
    return {"label": aid, "score": score, "story_ids": stories or [f"s-{aid}"],
            "lead": {"article_id": aid, "title": title or f"title {aid}"}}


def digest(did: str, top: list[dict[str, Any]], noteworthy: list[dict[str, Any]] | None = None,
           **counts: int) -> dict[str, Any]:
    kind, start = did.split(":", 1)
    return {"digest_id": did, "digest_type": kind, "window_start": start, "window_end": start + "+1h",
            "article_count": counts.get("article_count", len(top)), "selected_count": len(top),
            "cluster_count": len(top), "duplicates_removed": 0,
            "sections": [{"name": "Noteworthy", "items": noteworthy or []}, {"name": "Top Stories", "items": top}]}


def art(key: str, disposition: str, story: str, importance: float, publisher: str = "P") -> dict[str, Any]:
    return {"key": key, "disposition": disposition, "story_id": story, "importance": importance,
            "publisher": publisher, "title": f"t-{key}"}


# ------------------------------------------------------------------------------ unit
def test_items_added_removed_reranked_with_score_deltas() -> None:
    a = digest("rolling:W1", [item("x", 50), item("y", 40)], [item("z", 10)])
    b = digest("rolling:W1", [item("y", 45), item("x", 50)], [item("w", 12)])
    got = {c.article_id: c for c in diff_items(a, b)}
    # rank runs over all sections in the digest's section order (Top Stories before Noteworthy)
    assert (got["x"].rank_a, got["x"].rank_b, got["x"].kind) == (1, 2, "re-ranked")
    assert (got["y"].rank_a, got["y"].rank_b, got["y"].kind, got["y"].score_delta) == (2, 1, "re-ranked", 5.0)
    assert (got["z"].kind, got["z"].rank_a, got["z"].rank_b) == ("removed", 3, None)
    assert (got["w"].kind, got["w"].rank_b) == ("added", 3)
    assert got["x"].score_delta == 0.0


def test_item_with_another_lead_in_the_same_story_is_the_same_item() -> None:
    a = digest("rolling:W1", [item("x", 50, ["s1"])])
    b = digest("rolling:W1", [item("x2", 55, ["s0", "s1"])])
    (c,) = diff_items(a, b)
    assert c.lead_changed and c.kind == "same" and c.article_id == "x2" and c.score_delta == 5.0


def test_last_version_of_a_key_wins_as_under_compaction() -> None:
    r = run_outputs("a", [art("k1", "unique", "s1", 1.0), art("k2", "unique", "s2", 2.0),
                          art("k1", "revision", "s1", 3.0)],
                    [digest("rolling:W1", [item("x", 1)]), digest("rolling:W1", [item("y", 2)])])
    assert [x["key"] for x in r.articles] == ["k1", "k2"]
    assert r.articles[0]["disposition"] == "revision"
    assert len(r.digests) == 1 and r.digests[0]["sections"][1]["items"][0]["lead"]["article_id"] == "y"


def test_dispositions_transitions_stories_and_scores() -> None:
    a = run_outputs("A", [art("1", "unique", "s1", 50, "P1"), art("2", "near_duplicate", "s1", 40, "P2"),
                          art("3", "unique", "s3", 30), art("4", "unique", "s4", 20)], [], deadletters=2)
    b = run_outputs("B", [art("1", "unique", "s1", 50, "P1"), art("2", "unique", "s2", 44, "P2"),
                          art("3", "unique", "s3", 30), art("5", "unique", "s5", 10)], [], deadletters=3)
    c = compare(a, b)
    assert c.articles == (4, 4) and c.deadletters == (2, 3)
    assert (c.only_a, c.only_b) == (1, 1)
    assert c.dispositions == (("near_duplicate", 1, 0), ("unique", 3, 4))
    assert c.transitions == (("near_duplicate", "unique", 1),)
    # articles 1 and 2 were one story in A, two in B; article 3 is alone in both
    assert c.regrouped == 2
    sa, sb = c.stories
    assert (sa.stories, sa.buckets[:2], sa.multi_publisher) == (3, (2, 1), 1)
    assert (sb.stories, sb.buckets[:2], sb.multi_publisher) == (4, (4, 0), 0)
    assert c.score_matched == 3 and c.score_changed == 1
    assert [(s.key, s.delta) for s in c.score_changes] == [("2", 4.0)]


def test_story_size_buckets() -> None:
    arts = [art(f"{i}", "unique", "big", 1) for i in range(12)] + [art("x", "unique", "mid", 1)] * 1 + \
           [art(f"m{i}", "unique", "mid", 1) for i in range(3)]
    st = story_stats(arts)
    assert st.buckets == (0, 0, 1, 0, 1)  # 4 articles -> 3–5; 12 -> 11+
    assert st.largest[0][:2] == (12, "big")


def test_identical_runs_report_no_change() -> None:
    arts = [art("1", "unique", "s1", 5.0)]
    ds = [digest("morning_brief:W1", [item("1", 5.0)])]
    c = compare(run_outputs("A", arts, ds), run_outputs("B", arts, ds))
    assert not c.windows_changed and not c.transitions and not c.score_changes
    md = to_markdown(c)
    assert "Every digest window has the same items" in md
    assert "No article present in both runs changed disposition." in md


def test_report_escapes_feed_text_and_is_deterministic() -> None:
    evil = '<script>alert(1)</script> | *bold* [x](javascript:y)'
    a = run_outputs("A", [art("1", "unique", "s1", 5.0)], [digest("rolling:W1", [item("1", 5.0)])])
    b = run_outputs("B", [art("1", "unique", "s1", 6.0)], [digest("rolling:W1", [item("1", 6.0, title=evil)])])
    c = compare(a, b)
    page = to_html(c)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    md = to_markdown(c)
    assert "<script>" not in md and "\\[x\\]" in md and "\\|" in md
    # the same inputs in another order of construction -> the same bytes
    assert to_markdown(compare(a, b)) == md and to_html(compare(a, b)) == page
    assert "| same | 1 | 1 | 5.00 | 6.00 | +1.00 |" in md


def test_run_outputs_is_a_value() -> None:
    r = RunOutputs("x", (), ())
    assert compare(r, r).windows == ()


# ------------------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def demo_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("replay")
    write_archive(demo_payloads(), d / "feeds.raw.jsonl")
    (d / "base.toml").write_text(BASE_TOML)
    (d / "short-dedup.toml").write_text(SHORT_DEDUP_TOML)
    return d


def test_replay_compare_on_the_demo_sample(demo_archive: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    d = demo_archive
    args = ["replay", str(d / "feeds.raw.jsonl"), "--config", str(d / "base.toml"),
            "--compare", str(d / "short-dedup.toml"), "--no-progress"]
    assert cli_main([*args, "--out", str(tmp_path / "one")]) == 0
    out = capsys.readouterr().out
    assert "base: 97 payloads" in out and "short-dedup: 97 payloads" in out
    for sub in ("a", "b"):
        for topic in ("articles", "digests", "feed-health", "deadletter"):
            assert (tmp_path / "one" / sub / f"{topic}.jsonl").stat().st_size > 0
    md = (tmp_path / "one" / "compare.md").read_text()
    page = (tmp_path / "one" / "compare.html").read_text()
    assert md.startswith("# Replay comparison: base vs short-dedup")
    # 10 minutes of dedup and story memory instead of 72 h change dispositions and digest windows
    assert "Articles in both runs whose disposition changed:" in md
    assert "| near\\_duplicate | unique |" in md
    assert "Digest windows (matched by the time they cover):" in md and "Every digest window has the same" not in md
    assert "<table>" in page and "short-dedup" in page

    # deterministic: a second backtest (2 workers this time) writes byte-identical reports
    assert cli_main([*args, "--out", str(tmp_path / "two"), "--workers", "2"]) == 0
    assert (tmp_path / "two" / "compare.md").read_text() == md
    assert (tmp_path / "two" / "compare.html").read_text() == page


def test_replay_one_config_shows_progress_and_writes_outputs(demo_archive: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["replay", str(demo_archive / "feeds.raw.jsonl"), "--out", str(tmp_path)]) == 0
    cap = capsys.readouterr()
    assert "replay: 97 payloads, 41 article records (41 distinct)" in cap.out
    # the progress bar goes to stderr: payloads done of the total, articles, articles/s, ETA
    assert "97/97" in cap.err and "articles/s" in cap.err and "ETA" in cap.err
    assert (tmp_path / "articles.jsonl").read_bytes().count(b"\n") == 41
    assert not (tmp_path / "compare.md").exists()


def test_replay_on_two_processes_writes_the_same_bytes_and_counts(demo_archive: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--processes 2``: two local processes (a Bytewax cluster on loopback) write what one
    writes, byte for byte; the summary and the progress bar count both processes' work."""
    archive = str(demo_archive / "feeds.raw.jsonl")
    assert cli_main(["replay", archive, "--out", str(tmp_path / "one"), "--no-progress"]) == 0
    one = capsys.readouterr().out
    assert cli_main(["replay", archive, "--out", str(tmp_path / "two"), "--processes", "2"]) == 0
    cap = capsys.readouterr()
    assert "replay: 97 payloads, 41 article records" in one and "replay: 97 payloads, 41 article records" in cap.out
    assert "on 2 processes" in cap.out and " on " not in one  # (auto: a small archive, one)
    assert "97/97" in cap.err and "41 articles" in cap.err
    for topic in ("articles", "digests", "feed-health", "deadletter", "stories"):
        assert (tmp_path / "two" / f"{topic}.jsonl").read_bytes() == (tmp_path / "one" / f"{topic}.jsonl").read_bytes()
    # a comparison on two processes: the same report as on one
    args = ["replay", archive, "--config", str(demo_archive / "base.toml"), "--compare",
            str(demo_archive / "short-dedup.toml"), "--no-progress"]
    assert cli_main([*args, "--out", str(tmp_path / "c1")]) == 0
    assert cli_main([*args, "--out", str(tmp_path / "c2"), "--processes", "2"]) == 0
    assert (tmp_path / "c2" / "compare.md").read_text() == (tmp_path / "c1" / "compare.md").read_text()


def test_processes_auto_runs_one_per_core_on_large_archives_only(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``replay``'s default ``--processes auto``: one process per usable core, at most one per
    input partition, for an archive of at least ``AUTO_MIN_BYTES`` of payloads; one below (a
    second process costs what it saves there). A number is taken as given; anything else is a
    one-line error."""
    import argparse

    from newsflow.cli import main as cli

    monkeypatch.setattr(cli, "usable_cores", lambda: 2)
    auto = argparse.Namespace(processes="auto")
    assert cli.processes_of(auto, archive_bytes=cli.AUTO_MIN_BYTES, partitions=4) == 2
    assert cli.processes_of(auto, archive_bytes=cli.AUTO_MIN_BYTES - 1, partitions=4) == 1
    assert cli.processes_of(auto, archive_bytes=10 * cli.AUTO_MIN_BYTES, partitions=1) == 1
    monkeypatch.setattr(cli, "usable_cores", lambda: 64)
    assert cli.processes_of(auto, archive_bytes=cli.AUTO_MIN_BYTES, partitions=4) == 4
    assert cli.processes_of(argparse.Namespace(processes="3"), archive_bytes=1, partitions=4) == 3
    write_archive(demo_payloads()[:3], tmp_path / "a.jsonl")
    assert cli_main(["replay", str(tmp_path / "a.jsonl"), "--no-progress", "--processes", "many"]) != 0
    err = capsys.readouterr().err
    assert "--processes must be a number >= 1 or auto, not 'many'" in err
