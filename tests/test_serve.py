"""The live desk (``newsflow serve``) on a demo run of the bundled sample (``--from DIR``), in a
real headless chromium: the board and its filters, a story page, the digests, feed health; the
security headers and the token; and the store's rules for replaced, expired and merged stories."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from newsflow.cli.main import main as cli_main
from newsflow.core.timeutil import iso_to_ms
from newsflow.serve.app import CSP
from newsflow.serve.store import Filters, Store, article_of, as_of
from tests.serve_browser import browser, serving


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("desk-demo")
    assert cli_main(["demo", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def desk(demo_dir: Path) -> Iterator[str]:
    with serving("--from", str(demo_dir)) as base:
        yield base


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    with browser() as d:
        yield d


def current_stories(out: Path) -> dict[str, dict[str, Any]]:
    """The latest record of every story that is still active (the compacted topic's state)."""
    latest: dict[str, dict[str, Any]] = {}
    for line in (out / "stories.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        latest[rec["story_id"]] = rec
    return {sid: r for sid, r in latest.items() if r["status"] == "active"}


def as_of_clock(out: Path, stories: dict[str, dict[str, Any]]) -> dict[str, tuple[str, float]]:
    """Each current story's (phase, importance) at the latest event time of the stories topic,
    its lead article from the articles topic."""
    recs = [orjson.loads(line) for line in (out / "stories.jsonl").read_bytes().splitlines()]
    clock = iso_to_ms(max(r["updated_at"] for r in recs))
    arts = {a["article_id"]: a for a in map(orjson.loads, (out / "articles.jsonl").read_bytes().splitlines())}
    return {sid: as_of(r, article_of(arts[r["lead"]["article_id"]]) if r["lead"]["article_id"] in arts else None,
                       clock) for sid, r in stories.items()}


def submitted(d: Any, action: Any) -> None:
    """Run ``action`` (a click, a submit) and wait until the next page replaced this one."""
    old = d.find_element(By.TAG_NAME, "html")
    action()
    WebDriverWait(d, 10).until(expected_conditions.staleness_of(old))


def cards(d: Any) -> list[Any]:
    return d.find_elements(By.CSS_SELECTOR, "#board > li")


def field(el: Any, name: str) -> str:
    return str(el.find_element(By.CSS_SELECTOR, f'[data-f="{name}"]').text)


def test_the_board_shows_the_current_stories_ranked_by_importance(demo_dir: Path, desk: str, chrome: Any) -> None:
    stories = current_stories(demo_dir)
    now = as_of_clock(demo_dir, stories)
    chrome.get(desk + "/")
    shown = cards(chrome)
    # every story as of the same moment: an hours-old story is not ranked by its freshness then
    assert any(now[sid][1] < round(r["importance"], 1) for sid, r in stories.items())
    assert [c.get_attribute("data-story-id") for c in shown] == [
        sid for sid, _ in sorted(now.items(), key=lambda kv: (-kv[1][1], kv[0]))]
    top_id = shown[0].get_attribute("data-story-id")
    top = stories[top_id]
    assert field(shown[0], "label") == top["label"]
    assert field(shown[0], "phase") == now[top_id][0].upper()  # (the badge's CSS upper-cases it)
    assert field(shown[0], "lead_publisher") == top["lead"]["publisher"]
    assert field(shown[0], "publisher_count") == str(top["publisher_count"])
    assert field(shown[0], "publishers") == ", ".join(top["publishers"])
    assert field(shown[0], "article_count") == str(top["member_count"])
    assert shown[0].find_element(By.CSS_SELECTOR, '[data-f="lead_link"]').get_attribute("href") == \
        top["lead"]["canonical_url"]
    bars = shown[0].find_elements(By.CSS_SELECTOR, "svg.timeline rect")
    assert len(bars) == 16 and sum(int(b.find_element(By.TAG_NAME, "title").get_attribute("textContent"))
                                   for b in bars) >= top["member_count"]
    WebDriverWait(chrome, 10).until(  # the stream of changes is open
        lambda d: d.execute_script("return document.getElementById('live').className") == "live on")


def test_the_filters_narrow_the_board(demo_dir: Path, desk: str, chrome: Any) -> None:
    stories = current_stories(demo_dir)
    now = as_of_clock(demo_dir, stories)
    phases = sorted({p for p, _ in now.values()})
    assert len(phases) >= 2
    chrome.get(desk + "/")
    Select(chrome.find_element(By.NAME, "phase")).select_by_value(phases[0])
    submitted(chrome, chrome.find_element(By.CSS_SELECTOR, ".filters button").click)
    assert f"phase={phases[0]}" in chrome.current_url
    got = {c.get_attribute("data-story-id") for c in cards(chrome)}
    assert got == {sid for sid, (p, _) in now.items() if p == phases[0]} and got

    chrome.get(desk + "/")
    box = chrome.find_element(By.NAME, "q")
    box.send_keys("EARTHQUAKE")
    submitted(chrome, box.submit)
    assert [field(c, "label") for c in cards(chrome)] == [r["label"] for r in stories.values()
                                                          if "earthquake" in r["label"].lower()]
    for name, value, want in (
            ("tier", "T5", {s for s, r in stories.items() if "T5" in r["tiers"]}),
            ("publisher", "portal.example", {s for s, r in stories.items() if "portal.example" in r["publishers"]})):
        chrome.get(f"{desk}/?{name}={value}")
        assert {c.get_attribute("data-story-id") for c in cards(chrome)} == want and want, name
    arts = [orjson.loads(x) for x in (demo_dir / "articles.jsonl").read_bytes().splitlines()]
    business = {a["story_id"] for a in arts if "business" in a["categories"]} & set(stories)
    chrome.get(desk + "/?category=business")
    assert {c.get_attribute("data-story-id") for c in cards(chrome)} == business and business
    chrome.get(desk + "/?q=no+such+story+anywhere")
    assert not cards(chrome) and chrome.find_element(By.ID, "empty").is_displayed()


def test_the_story_page_lists_members_sources_importance_and_phases(demo_dir: Path, desk: str, chrome: Any) -> None:
    stories = current_stories(demo_dir)
    chrome.get(desk + "/")
    first = cards(chrome)[0]
    sid = first.get_attribute("data-story-id")
    submitted(chrome, first.find_element(By.CSS_SELECTOR, '[data-f="label"]').click)
    assert chrome.current_url == f"{desk}/story/{sid}"
    assert chrome.find_element(By.ID, "story-label").text == stories[sid]["label"]
    arts = [orjson.loads(x) for x in (demo_dir / "articles.jsonl").read_bytes().splitlines()]
    mine = {a["article_id"]: a for a in arts if a["story_id"] == sid or a["article_id"] in stories[sid]["members"]}
    rows = chrome.find_elements(By.CSS_SELECTOR, "table.members tbody tr")
    assert len(rows) == len(mine)
    dispositions = sorted(r.find_elements(By.TAG_NAME, "td")[3].text for r in rows)
    assert dispositions == sorted(a["disposition"].replace("_", " ") for a in mine.values())
    lead = mine[stories[sid]["lead"]["article_id"]]
    comps = chrome.find_elements(By.CSS_SELECTOR, "table.components tbody tr")
    assert [r.find_element(By.TAG_NAME, "td").text for r in comps] == list(lead["importance_components"])
    assert chrome.find_elements(By.CSS_SELECTOR, "ol.history li")
    sources = [li.text for li in chrome.find_elements(By.CSS_SELECTOR, "ul.sources li")]
    assert {s.rsplit(" ", 1)[0] for s in sources} == {a["publisher"] for a in mine.values()}
    chrome.get(desk + "/story/sno-such-story")
    assert "No such story" in chrome.find_element(By.TAG_NAME, "h1").text


def test_the_digests_page_renders_the_latest_of_each_type_with_the_digest_renderer(
        demo_dir: Path, desk: str, chrome: Any) -> None:
    digests = [orjson.loads(x) for x in (demo_dir / "digests.jsonl").read_bytes().splitlines()]
    chrome.get(desk + "/digests")
    latest = chrome.find_elements(By.CSS_SELECTOR, ".digest-card .label")
    assert len(latest) == len({d["digest_type"] for d in digests})
    assert chrome.find_elements(By.CSS_SELECTOR, ".digest-card .trend.EMERGING")  # trend indicators
    morning = next(a for a in latest if a.text == "Morning Brief")
    submitted(chrome, morning.click)
    brief = max((d for d in digests if d["digest_type"] == "morning_brief"), key=lambda d: d["window_start"])
    assert chrome.current_url.endswith(brief["digest_id"].replace(":", "%3A"))
    assert [h.text for h in chrome.find_elements(By.CSS_SELECTOR, "section > h2")][:1] == ["TOP STORIES"]
    # the renderer's own stylesheet applies (allowed by its hash in the page's CSP)
    assert chrome.execute_script(
        "return getComputedStyle(document.querySelector('header.digest')).borderBottomStyle") == "solid"
    chrome.get(desk + "/digests")
    archive = chrome.find_elements(By.CSS_SELECTOR, "table.archive tbody tr")
    assert len(archive) == sum(1 for d in digests if d["article_count"] or d["digest_type"] != "rolling")


def test_the_feeds_page_puts_broken_and_unhealthy_feeds_first(demo_dir: Path, desk: str, chrome: Any) -> None:
    chrome.get(desk + "/feeds")
    rows = chrome.find_elements(By.CSS_SELECTOR, "table.feeds tbody tr")
    classes = [r.get_attribute("class") for r in rows]
    assert len(rows) == 12 and classes[0] in ("broken", "unhealthy") and classes[-1] == "ok"
    assert classes == sorted(classes, key=("broken", "unhealthy", "ok").index)
    assert rows[0].find_element(By.TAG_NAME, "td").text == "broken-feed"


def test_phone_width_has_no_horizontal_scroll(desk: str) -> None:
    with browser(390, 844) as d:
        for path in ("/", "/digests", "/feeds"):
            d.get(desk + path)
            assert d.execute_script("return document.documentElement.scrollWidth") <= 390, path


def test_every_response_carries_the_csp_and_healthz_and_metrics_answer(desk: str) -> None:
    for path in ("/", "/feeds", "/digests", "/healthz", "/metrics", "/static/desk.js", "/story/nope"):
        try:
            r = urllib.request.urlopen(desk + path, timeout=10)
        except urllib.error.HTTPError as e:
            r = e
        assert r.headers["content-security-policy"].startswith(CSP), path
        assert r.headers["x-content-type-options"] == "nosniff"
    health = orjson.loads(urllib.request.urlopen(desk + "/healthz", timeout=10).read())
    assert health["status"] == "ok" and health["stories"] > 0
    metrics = urllib.request.urlopen(desk + "/metrics", timeout=10).read().decode()
    assert f"newsflow_serve_stories {float(health['stories'])}" in metrics


def test_off_loopback_the_desk_refuses_to_start_without_a_token(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["serve", "--from", str(demo_dir), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--token" in err and "NEWSFLOW_SERVE_TOKEN" in err
    assert cli_main(["serve", "--from", str(demo_dir / "nope")]) == 2


def test_the_compose_service_runs_serve_with_a_token_on_the_mapped_port() -> None:
    import yaml

    from newsflow.cli.main import build_parser

    root = Path(__file__).resolve().parents[1]
    svc = yaml.safe_load((root / "docker-compose.yml").read_text())["services"]["serve"]
    args = build_parser().parse_args(svc["command"])
    assert args.cmd == "serve" and args.brokers == "kafka:9092" and args.host == "0.0.0.0"
    assert f"127.0.0.1:{args.port}:{args.port}" in svc["ports"]
    assert "NEWSFLOW_SERVE_TOKEN" in svc["environment"]  # (off loopback the command needs it)
    assert f"127.0.0.1:{args.port}/healthz" in " ".join(svc["healthcheck"]["test"])


def test_with_a_token_every_request_must_carry_it(demo_dir: Path) -> None:
    with serving("--from", str(demo_dir), "--token", "s3cret-token") as base:
        for path in ("/", "/healthz", "/static/desk.css", "/story/x", "/?token=wrong"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path, timeout=10)
            assert e.value.code == 401, path
        req = urllib.request.Request(base + "/healthz", headers={"X-Newsflow-Token": "s3cret-token"})
        assert urllib.request.urlopen(req, timeout=10).status == 200
        import http.client

        conn = http.client.HTTPConnection(base.removeprefix("http://"), timeout=10)
        conn.request("GET", "//evil.example/x?token=s3cret-token&q=a")
        r = conn.getresponse()
        assert r.status == 303 and r.getheader("location") == "/evil.example/x?q=a"  # (stays on the desk)
        assert "HttpOnly" in (r.getheader("set-cookie") or "")
        conn.close()
        with browser() as d:  # ?token= once: a cookie, and the token leaves the address bar
            d.get(base + "/feeds?token=s3cret-token")
            assert d.current_url == base + "/feeds"
            assert d.find_element(By.TAG_NAME, "h1").text == "Feed health"
            d.get(base + "/")
            assert cards(d)


def test_the_profile_selector_ranks_by_the_profiles_digest_scores(tmp_path: Path) -> None:
    cfg = tmp_path / "profiles.toml"
    cfg.write_text('[profiles.profile.reader]\ndigests = ["morning_brief", "rolling"]\ncategories = ["business"]\n')
    assert cli_main(["demo", "--config", str(cfg), "--out", str(tmp_path / "out")]) == 0
    scores: dict[str, float] = {}
    digests = [orjson.loads(x) for x in (tmp_path / "out" / "digests.jsonl").read_bytes().splitlines()]
    for d in sorted((d for d in digests if (d.get("profile") or {}).get("id") == "reader"),
                    key=lambda d: (d["window_start"], d["digest_id"])):
        for sec in d["sections"]:
            for it in sec["items"]:
                scores.update(dict.fromkeys(it["story_ids"], it["score"]))
    with serving("--from", str(tmp_path / "out")) as base, browser() as d:
        d.get(base + "/")
        Select(d.find_element(By.NAME, "profile")).select_by_value("reader")
        submitted(d, d.find_element(By.CSS_SELECTOR, ".filters button").click)
        ranked = [c.get_attribute("data-story-id") for c in cards(d)]
        listed = [s for s in ranked if s in scores]
        assert listed and ranked[:len(listed)] == listed  # the profile's stories first
        assert [scores[s] for s in listed] == sorted((scores[s] for s in listed), reverse=True)
        assert "relevance to reader" in d.find_element(By.CSS_SELECTOR, "p.summary").text
        d.get(base + "/digests")
        assert any("reader" in a.text for a in d.find_elements(By.CSS_SELECTOR, ".digest-card .label"))


def test_the_store_replaces_removes_and_follows_merged_stories() -> None:
    def rec(sid: str, imp: float, **kw: Any) -> dict[str, Any]:
        return {"story_id": sid, "status": "active", "updated_at": "2026-03-02T07:00:00Z", "phase": "breaking",
                "first_seen": "2026-03-02T06:00:00Z", "last_seen": "2026-03-02T06:30:00Z", "member_count": 1,
                "members": ["a1"], "publishers": ["x.example"], "publisher_count": 1, "tiers": ["T2"],
                "lead": {"article_id": "a1", "title": "T", "canonical_url": "javascript:alert(1)",
                         "publisher": "P", "importance": imp}, "label": sid, "importance": imp, "peak_importance": imp,
                **kw}

    s = Store()
    s.apply("stories", rec("s1", 40))
    s.apply("stories", rec("s2", 50))
    v = s.version
    s.apply("stories", rec("s1", 60, phase="developing", updated_at="2026-03-02T08:00:00Z"))
    board = s.matching(Filters())
    assert [c["id"] for c in board] == ["s1", "s2"] and board[0]["importance"] == 60
    assert board[0]["lead_url"] is None  # (not http(s): shown as text)
    assert s.changes_since(v) == ["s1"]
    assert [h.phase for h in s.story("s1")["history"]] == ["breaking", "developing"]  # type: ignore[index]
    v = s.version
    s.apply("stories", rec("s2", 50, status="expired", merged_into="s1"))
    assert [c["id"] for c in s.matching(Filters())] == ["s1"] and s.resolve("s2") == "s1"
    assert s.changes_since(v) == ["s1", "s2"]
    s.apply("articles", {"article_id": "a9", "story_id": "s2", "title": "merged member", "publisher": "Q",
                         "published_at": "2026-03-02T06:10:00Z", "disposition": "unique"})
    assert "merged member" in [a.title for a in s.story("s1")["members"]]  # type: ignore[index]
    s.apply("stories", None, key="s1")  # a tombstone: the story and what it held leave
    assert s.matching(Filters()) == [] and s.story("s1") is None and s.counts()["articles"] == 0


def test_the_open_board_follows_changes_expiries_and_merges_without_a_reload(demo_dir: Path) -> None:
    """The desk's app on a real uvicorn server, its store fed here record by record (as the
    Kafka reader does): the page moves a story that rose to the top, drops one that expired
    and one merged into another, and never reloads."""
    import threading
    import time

    import uvicorn

    from newsflow.config import Settings
    from newsflow.serve.app import create_app
    from newsflow.serve.sources import load_dir
    from tests.serve_browser import free_port

    store = Store()
    load_dir(store, demo_dir, Settings())
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(store, source="test"), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        stories = current_stories(demo_dir)
        with browser() as d:
            d.get(f"http://127.0.0.1:{port}/")
            ids = [c.get_attribute("data-story-id") for c in cards(d)]
            d.execute_script("window.__kept = 1;")

            def shown_ids() -> list[str]:  # (read in one script: the live page replaces cards meanwhile)
                return list(d.execute_script(
                    "return [...document.querySelectorAll('#board > li')].map(e => e.dataset.storyId)"))

            def wait_for(pred: Any) -> None:
                deadline = time.monotonic() + 5
                while not pred():
                    assert time.monotonic() < deadline
                    time.sleep(0.05)

            last, top = ids[-1], ids[0]
            store.apply("stories", {**stories[last], "importance": 99.0, "phase": "developing",
                                    "label": "Risen <b>story</b>"})
            wait_for(lambda: shown_ids()[:1] == [last])
            risen = next(c for c in store.matching(Filters()) if c["id"] == last)  # (99, aged to the clock)
            assert field(cards(d)[0], "label") == "Risen <b>story</b>"
            assert field(cards(d)[0], "importance") == f"{risen['importance']:.0f}"
            store.apply("stories", {**stories[ids[1]], "status": "expired"})
            wait_for(lambda: ids[1] not in shown_ids())
            store.apply("stories", {**stories[ids[2]], "status": "expired", "merged_into": top})
            wait_for(lambda: ids[2] not in shown_ids())
            assert shown_ids() == [last, top, *ids[3:-1]]
            assert d.find_element(By.ID, "shown").text == str(len(ids) - 2)
            assert d.execute_script("return window.__kept") == 1
            d.get(f"http://127.0.0.1:{port}/story/{ids[2]}")  # the merged story's page follows its merge
            assert d.current_url.endswith(f"/story/{top}")
    finally:
        server.should_exit = True
        thread.join(10)
