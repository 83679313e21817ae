"""``replay --compare``'s report: windows matched by overlap, honest counts, why digests are
empty, a bounded HTML page with contents, anchors and charts (checked in headless Chromium),
on real data (a slice of the NPR/Ars/WGRZ archive) and on made-up runs."""

from __future__ import annotations

import gzip
import re
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest

from newsflow.cli.main import main as cli_main
from newsflow.cli.main import topic_files
from newsflow.cli.replay import load_run
from newsflow.config import load_settings
from newsflow.replay.compare import compare, digest_health, run_outputs
from newsflow.replay.report import to_html, to_markdown
from newsflow.replay.windows import match_windows
from newsflow.wire.contracts import ROLE_RECORD_FIELDS
from tests.test_render_html import dump_dom, find_chromium

ARCHIVE = "data/real-feeds/npr-ars-wgrz_2026-02_08.feeds.raw.jsonl.gz"
#: the archive's first polls: 26 days of three feeds (~20 s for both replays)
SLICE_LINES = 150
#: the backtest of the report's example: a 12 h dedup window and 180-minute rolling digests
CANDIDATE_TOML = "[dedup]\nwindow_hours = 12\n[digests]\nrolling_minutes = 180\n"
MAX_HTML_BYTES = 1_000_000


def iso(h: float) -> str:
    from newsflow.core.timeutil import ms_to_iso

    return ms_to_iso(1_771_200_000_000 + int(h * 3_600_000))  # 2026-02-16T00:00:00Z + h hours


def item(aid: str, score: float, stories: list[str] | None = None, title: str | None = None) -> dict[str, Any]:
    return {"label": aid, "score": score, "story_ids": stories or [f"s-{aid}"],
            "lead": {"article_id": aid, "title": title or f"title {aid}"}}


def window(kind: str, start_h: float, hours: float, noteworthy: list[dict[str, Any]] | None = None,
           top: list[dict[str, Any]] | None = None, articles: int | None = None) -> dict[str, Any]:
    items = (top or []) + (noteworthy or [])
    n = len(items) if articles is None else articles
    return {"digest_id": f"{kind}:{iso(start_h)}", "digest_type": kind, "window_start": iso(start_h),
            "window_end": iso(start_h + hours), "article_count": n, "selected_count": len(items),
            "cluster_count": len(items), "duplicates_removed": 0,
            "sections": [{"name": "Top Stories", "items": top or []},
                         {"name": "Noteworthy", "items": noteworthy or []}]}


# ------------------------------------------------------------------------------ matching
def test_windows_of_other_lengths_are_matched_by_the_time_they_cover() -> None:
    """Three 60-minute windows against one 180-minute window: one group, whichever run has the
    short windows; matched by start, two of the three would be "only in A" and the item of the
    second hour "removed"."""
    a = [window("rolling", 0, 1, [item("x", 50)]), window("rolling", 1, 1, [item("y", 45)]),
         window("rolling", 2, 1), window("rolling", 3, 1, [item("z", 20)])]
    b = [window("rolling", 0, 3, [item("y", 45), item("x", 50)]), window("rolling", 3, 3, [item("z", 20)])]
    groups = match_windows(a, b)
    assert [(g.ids_a, g.ids_b) for g in groups] == [
        (tuple(f"rolling:{iso(h)}" for h in (0, 1, 2)), (f"rolling:{iso(0)}",)),
        ((f"rolling:{iso(3)}",), (f"rolling:{iso(3)}",)),
    ]
    g = groups[0]
    assert (g.start, g.end) == (iso(0), iso(3))
    # each item at its best rank over the group's windows: x 1 -> 2, y 1 -> 1
    assert {it.article_id: it.kind for it in g.items} == {"x": "re-ranked", "y": "same"}
    assert g.counts_a == (2, 2, 2, 0) and g.counts_b == (2, 2, 2, 0)
    # the mirror image: the short windows in run B
    back = match_windows(b, a)
    assert [(g.ids_a, g.ids_b) for g in back] == [(y, x) for x, y in ((g.ids_a, g.ids_b) for g in groups)]
    # equal windows: one to one; a window that overlaps nothing is alone
    c = match_windows(a, [*a[:2], window("rolling", 9, 1)])
    assert [(len(g.ids_a), len(g.ids_b)) for g in c] == [(1, 1), (1, 1), (1, 0), (1, 0), (0, 1)]
    assert not c[0].changed and c[2].changed and c[2].counts_b is None  # only in A: a change


def test_a_window_between_two_goes_with_the_one_it_overlaps_most() -> None:
    a = [window("rolling", 0, 1.5), window("rolling", 1.5, 1.5)]
    b = [window("rolling", 0, 1), window("rolling", 1, 1), window("rolling", 2, 1)]
    # B has the shorter windows: 0-1 -> A 0-1.5; 1-2 overlaps both A windows by 30 min (tie:
    # the earlier); 2-3 -> A 1.5-3
    assert [(len(g.ids_a), len(g.ids_b)) for g in match_windows(a, b)] == [(1, 2), (1, 1)]


def test_empty_digests_and_top_stories_say_why() -> None:
    ds = [window("rolling", 0, 1, articles=0), window("rolling", 1, 1, articles=3),
          window("rolling", 2, 1, [item("x", 68.0)]), window("morning_brief", 0, 24, [item("y", 61.5)])]
    (brief, rolling) = digest_health(ds)
    assert (rolling.digests, rolling.empty, rolling.empty_no_articles, rolling.empty_below_min,
            rolling.top_empty, rolling.best_score, rolling.window_minutes) == (3, 2, 1, 1, 3, 68.0, 60)
    assert (brief.digests, brief.empty, brief.top_empty, brief.window_minutes) == (1, 0, 1, 1440)
    r = run_outputs("A", [], ds)
    md = to_markdown(compare(r, r))
    assert "A: 2 of 3 rolling digests are empty: 1 had no article in their 60-minute window; 1 had articles " \
           "but none scored at least 15 (digests.min\\_importance)." in md
    assert "A: Top Stories is empty in all 4 digests: the best item score is 68.00 \\< the threshold 70 " \
           "(digests.top\\_threshold)." in md


def test_stories_gained_lost_merged_split() -> None:
    def art(key: str, story: str) -> dict[str, Any]:
        return {"key": key, "disposition": "unique", "story_id": story, "importance": 10.0, "title": f"t{key}"}

    a = run_outputs("A", [art("1", "s1"), art("2", "s2"), art("3", "s3"), art("4", "s3"), art("5", "s5"),
                          art("9", "s9")], [])
    b = run_outputs("B", [art("1", "t1"), art("2", "t1"), art("3", "t3"), art("4", "t4"), art("5", "t5"),
                          art("7", "t7")], [])
    sc = compare(a, b).story_changes
    # s1+s2 -> t1 (merged); s3 -> t3, t4 (split); s5 = t5; s9 lost; t7 gained
    assert (sc.same, sc.gained, sc.lost, sc.merged, sc.split) == (1, 1, 1, 1, 1)
    assert sorted((e.kind, e.story, e.parts) for e in sc.examples) == [("merged", "t1", 2), ("split", "s3", 2)]


def test_the_page_is_bounded_whatever_the_number_of_changed_windows() -> None:
    """1,000 changed windows of 40 items with 300-character titles: the page stays under 1 MB
    (details for the most changed windows only, long tables cut)."""
    long = "Headline " * 33
    a = [window("rolling", h, 1, [item(f"a{h}-{i}", 50 - i, title=long) for i in range(40)]) for h in range(1000)]
    b = [window("rolling", h, 1, [item(f"b{h}-{i}", 50 - i, title=long) for i in range(40)]) for h in range(1000)]
    c = compare(run_outputs("A", [], a), run_outputs("B", [], b))
    assert len(c.windows_changed) == 1000
    page = to_html(c)
    assert len(page.encode()) < MAX_HTML_BYTES
    assert "… 60 more rows" in page  # (a window's 80 rows, cut at 20)


# ------------------------------------------------------------------------------ real data
@pytest.fixture(scope="module")
def backtest(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    d = tmp_path_factory.mktemp("backtest")
    with gzip.open(shared_dir / ARCHIVE, "rb") as fh:
        lines = [next(fh) for _ in range(SLICE_LINES)]
    (d / "slice.jsonl").write_bytes(b"".join(lines))
    (d / "candidate.toml").write_text(CANDIDATE_TOML)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli_main(["replay", str(d / "slice.jsonl"), "--compare", str(d / "candidate.toml"),
                       "--out", str(d / "bt"), "--no-progress", "--processes", "1"])
    assert rc == 0
    return d / "bt", out.getvalue()


def file_counts(run_dir: Path, settings: Any) -> dict[str, tuple[int, int]]:
    out = {}
    for role, name in topic_files(settings).items():
        recs = [orjson.loads(x) for x in (run_dir / name).read_bytes().splitlines() if x.strip()]
        key = ROLE_RECORD_FIELDS[role.replace("-", "_")][0]
        out[role] = (len(recs), len({orjson.dumps(r.get(key)) for r in recs}))
    return out


@pytest.mark.corpus
def test_the_summary_counts_are_the_files_counts(backtest: tuple[Path, str]) -> None:
    bt, printed = backtest
    base, cand = load_settings(None), load_settings(str(bt.parent / "candidate.toml"))
    ca, cb = file_counts(bt / "a", base), file_counts(bt / "b", cand)
    md = (bt / "compare.md").read_text()
    # the per-topic table: records and distinct keys of each run, as in the files
    for role in ca:
        row = f"| {role} | {ca[role][0]} | {ca[role][1]} | {cb[role][0]} | {cb[role][1]} |"
        assert row in md, row
    (ra, ka), (rb, kb) = ca["articles"], cb["articles"]
    assert rb > kb  # the candidate re-emits keys: records and keys differ, and both are said
    def delta(x: int) -> str:  # as the report writes a difference: "+3", "-2", "0"
        return f"{x:+d}" if x else "0"

    assert f"Articles: {ka} → {kb} ({delta(kb - ka)}) distinct" in md
    assert f"article records written: {ra} → {rb} ({delta(rb - ra)}), of which {ra - ka} and {rb - kb} repeat a key" in md
    assert f"defaults: {SLICE_LINES} payloads, {ra} article records ({ka} distinct)" in printed
    assert f"candidate: {SLICE_LINES} payloads, {rb} article records ({kb} distinct)" in printed
    # the reader's section comes first, right after the contents
    assert md.index("## What changed for a reader") < md.index("## Records and keys per topic") < md.index("## Stories")
    assert "Top Stories is empty in all" in md and "(digests.top\\_threshold)" in md


@pytest.mark.corpus
def test_real_rolling_windows_of_60_and_180_minutes_are_matched_by_overlap(backtest: tuple[Path, str]) -> None:
    bt, _ = backtest
    a = load_run("defaults", bt / "a", load_settings(None))
    b = load_run("candidate", bt / "b", load_settings(str(bt.parent / "candidate.toml")))
    c = compare(a, b)
    rolling = [g for g in c.windows if g.digest_type == "rolling"]
    a_ids = [d["digest_id"] for d in a.digests if d["digest_type"] == "rolling"]
    b_ids = [d["digest_id"] for d in b.digests if d["digest_type"] == "rolling"]
    # every 60-minute window of A is in exactly one group, every 180-minute window of B too
    assert sorted(i for g in rolling for i in g.ids_a) == sorted(a_ids)
    assert sorted(i for g in rolling for i in g.ids_b) == sorted(b_ids)
    by_start = {d["digest_id"]: (d["window_start"], d["window_end"]) for d in a.digests + b.digests}
    for g in rolling:
        assert len(g.ids_b) == 1 and 1 <= len(g.ids_a) <= 3
        lo, hi = by_start[g.ids_b[0]]
        assert all(lo <= by_start[i][0] and by_start[i][1] <= hi for i in g.ids_a)
    assert sum(len(g.ids_a) == 3 for g in rolling) > 0.9 * len(rolling)
    # the briefs' windows are the same in both runs: one to one
    briefs = [g for g in c.windows if g.digest_type != "rolling"]
    assert briefs and all(g.ids_a == g.ids_b for g in briefs)


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.toc: list[str] = []
        self.tags: dict[str, int] = {}
        self._nav = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "nav":
            self._nav = True
        if tag == "a" and self._nav:
            self.toc.append(str(a.get("href") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._nav = False


@pytest.mark.corpus
def test_the_html_report_in_headless_chromium(backtest: tuple[Path, str]) -> None:
    bt, _ = backtest
    page = bt / "compare.html"
    assert page.stat().st_size < MAX_HTML_BYTES
    dom = Dom()
    dom.feed(dump_dom(page))
    # a table of contents whose every link is an anchor of the page
    assert len(dom.toc) == 8 and all(h.startswith("#") for h in dom.toc)
    assert {h[1:] for h in dom.toc} <= dom.ids
    # charts drawn as inline SVG (bars and a line), no script, long lists collapsed
    assert dom.tags.get("svg", 0) >= 2 and dom.tags.get("rect", 0) > 8 and dom.tags.get("polyline", 0) == 2
    assert dom.tags.get("script", 0) == 0 and dom.tags.get("details", 0) >= 3
    # the screenshot of the page as Chromium lays it out
    shot = Path(tempfile.gettempdir()) / "newsflow-compare.png"
    exe = find_chromium()
    assert exe is not None
    with tempfile.TemporaryDirectory() as profile:
        res = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                              "--no-first-run", f"--user-data-dir={profile}", "--window-size=1200,2000",
                              f"--screenshot={shot}", page.resolve().as_uri()],
                             capture_output=True, text=True, timeout=180, check=False)
    assert res.returncode == 0 and shot.stat().st_size > 10_000, res.stderr[-1000:]


def test_feed_text_is_escaped_everywhere_in_the_page(tmp_path: Path) -> None:
    evil = '<script>alert(1)</script><img src=x onerror=alert(2)> & "q"'
    arts = [{"key": "1", "disposition": "unique", "story_id": "s1", "importance": 5.0, "title": evil},
            {"key": "2", "disposition": "unique", "story_id": "s1", "importance": 4.0, "title": evil}]
    arts_b = [{**arts[0], "story_id": "t1"}, {**arts[1], "story_id": "t2"}]
    a = run_outputs("A<b>", arts, [window("morning_brief", 0, 24, [item("1", 5.0, title=evil)])])
    b = run_outputs("B", arts_b, [window("morning_brief", 0, 24, [item("2", 6.0, title=evil)])])
    c = compare(a, b)
    html = to_html(c)
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert re.search(r"<b>", html) is None
    page = tmp_path / "evil.html"
    page.write_text(html, encoding="utf-8")
    dom = Dom()
    dom.feed(dump_dom(page))
    assert dom.tags.get("script", 0) == 0 and dom.tags.get("img", 0) == 0
    assert to_html(compare(a, b)) == html  # deterministic
