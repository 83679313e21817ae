"""Interest profiles in the flow: a simulated reader who reads science and skips
sports for a week; the profile's own digests re-rank, the default digests do not move, and a
replay is byte-identical (also with 2 workers)."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest

from newsflow.cli.main import run_file_flow
from newsflow.config import ProfilesSettings
from newsflow.connectors.files import write_archive
from newsflow.samples.reader_week import reader_interactions, week_payloads
from newsflow.wire.contracts import validate

TOPICS = ("articles", "digests", "feed-health", "deadletter")
SUBSCRIPTIONS = {"digests": ["evening_recap"],
                 "topics": {"science": {"keywords": ["research", "scientists", "study"], "weight": 1.0},
                            "sports": {"keywords": ["match", "league", "goal", "striker"], "weight": 2.0}}}
PROFILES_SECTION = ProfilesSettings.model_validate({"profile": {
    "reader": SUBSCRIPTIONS,
    "twin": SUBSCRIPTIONS,  # the same subscriptions, no interactions: what the reader had before
    "other": {"digests": ["evening_recap"], "categories": ["news"]},
}})
PROFILES = PROFILES_SECTION.to_config()


def _read(out: Path) -> dict[str, list[bytes]]:
    return {t: (out / f"{t}.jsonl").read_bytes().splitlines() if (out / f"{t}.jsonl").exists() else []
            for t in TOPICS}


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("week")
    archive = d / "feeds.raw.jsonl"
    write_archive(week_payloads(), archive)
    run_file_flow(str(archive), str(d / "plain"))
    plain = _read(d / "plain")
    arts = [orjson.loads(x) for x in plain["articles"]]
    ix = reader_interactions(arts)
    bad = [b'{"not json', orjson.dumps({**ix[0], "action": "like"}),
           orjson.dumps({**ix[0], "profile_id": "nobody"}), orjson.dumps({**ix[0], "article_id": "no-such-article"})]
    ix_path = d / "interactions.jsonl"
    ix_path.write_bytes(b"\n".join([orjson.dumps(r) for r in ix] + bad) + b"\n")
    run_file_flow(str(archive), str(d / "learn"), interactions_path=str(ix_path), profiles=PROFILES)
    return {"dir": d, "archive": archive, "ix": ix_path, "plain": plain, "learn": _read(d / "learn"),
            "category": {a["article_id"]: a["category"] for a in arts}, "n_ix": len(ix)}


def _digests(lines: list[bytes], prefix: str | None) -> list[dict]:
    ds = [orjson.loads(x) for x in lines]
    if prefix is None:
        return [d for d in ds if "profile" not in d]
    return [d for d in ds if d.get("profile", {}).get("id") == prefix]


def _top(d: dict, category: dict[str, str], n: int = 5) -> list[str]:
    """Categories of the first ``n`` leads of a digest."""
    return [category[it["lead"]["article_id"]] for s in d["sections"] for it in s["items"]][:n]


def test_every_record_validates_and_interactions_validate(week: dict) -> None:
    for topic, lines in week["learn"].items():
        for line in lines:
            validate(topic, line)
    for line in Path(week["ix"]).read_bytes().splitlines()[: week["n_ix"]]:
        validate("interactions", line)


def test_default_digests_are_unchanged_by_interactions(week: dict) -> None:
    assert _digests(week["learn"]["digests"], None) == _digests(week["plain"]["digests"], None)
    assert week["learn"]["articles"] == week["plain"]["articles"]


def test_reader_profile_learns_science_up_sports_down(week: dict) -> None:
    mine = [d for d in _digests(week["learn"]["digests"], "reader") if d["final"]]
    assert len(mine) >= 6
    assert all(d["digest_id"].startswith("reader:evening_recap:") for d in mine)
    twin = [d for d in _digests(week["learn"]["digests"], "twin") if d["final"]]
    assert [d["window_start"] for d in twin] == [d["window_start"] for d in mine]
    cat = week["category"]
    # without clicks, the subscriptions rank sports first every day
    assert all(_top(d, cat)[0] == "sports" for d in twin), [_top(d, cat) for d in twin]
    # the reader's clicks: science rises, sports falls out of the top five
    assert _top(mine[-1], cat) == ["science"] * 5, _top(mine[-1], cat)
    science = [_top(d, cat).count("science") for d in mine]
    sports = [_top(d, cat).count("sports") for d in mine]
    assert science[-1] > science[0] and sports[-1] < sports[0], (science, sports)
    for d, t in zip(mine, twin, strict=True):
        assert _top(d, cat).count("science") >= _top(t, cat).count("science")
    rel = {c: [it["relevance"] for s in mine[-1]["sections"] for it in s["items"]
               if week["category"][it["lead"]["article_id"]] == c] for c in ("science", "sports")}
    rel0 = {c: [it["relevance"] for s in twin[-1]["sections"] for it in s["items"]
                if week["category"][it["lead"]["article_id"]] == c] for c in ("science", "sports")}
    assert min(rel["science"]) > max(rel["sports"])
    assert sum(rel["sports"]) / len(rel["sports"]) < sum(rel0["sports"]) / len(rel0["sports"])
    terms = [t["term"] for t in mine[-1]["profile"]["top_terms"]]
    assert "research" in terms[:5] or "scientist" in terms[:5], terms


def test_other_profile_gets_a_different_digest(week: dict) -> None:
    reader = {d["window_start"]: d for d in _digests(week["learn"]["digests"], "reader")}
    other = {d["window_start"]: d for d in _digests(week["learn"]["digests"], "other")}
    assert reader.keys() == other.keys()
    last = max(reader)
    lead = lambda d: [it["lead"]["article_id"] for s in d["sections"] for it in s["items"]]  # noqa: E731
    assert lead(reader[last]) != lead(other[last])
    assert week["category"][lead(other[last])[0]] == "news"


def test_bad_interactions_become_dead_letters(week: dict) -> None:
    dls = [orjson.loads(x) for x in week["learn"]["deadletter"]]
    reasons = sorted(d["reason"] for d in dls if d["stage"] == "interactions")
    assert reasons == ["malformed_interaction", "malformed_interaction", "unknown_article", "unknown_profile"]


def test_replay_with_interactions_is_byte_identical_with_two_workers(week: dict, tmp_path: Path) -> None:
    run_file_flow(str(week["archive"]), str(tmp_path / "w2"), workers=2, interactions_path=str(week["ix"]),
                  profiles=PROFILES)
    two = _read(tmp_path / "w2")
    for t in TOPICS:
        assert sorted(two[t]) == sorted(week["learn"][t]), t


def test_replay_with_interactions_on_two_processes_writes_the_same_bytes(week: dict, tmp_path: Path) -> None:
    """``--processes 2`` with profiles learning from interactions (pickled for the processes)."""
    run_file_flow(str(week["archive"]), str(tmp_path / "p2"), interactions_path=str(week["ix"]),
                  profiles=PROFILES, processes=2)
    two = _read(tmp_path / "p2")
    for t in TOPICS:
        assert two[t] == week["learn"][t], t
    assert any(b'"profile"' in line for line in two["digests"])  # the profiles' own digests are there


def test_profile_show_prints_configured_and_learned_top_terms(week: dict, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from newsflow.cli.main import main

    toml = tmp_path / "profiles.toml"
    toml.write_text("""
[profiles.profile.reader]
digests = ["evening_recap"]
categories = ["science"]
[profiles.profile.reader.topics]
science = { keywords = ["research", "scientists", "study"], weight = 1.0 }
sports = { keywords = ["match", "league", "goal", "striker"], weight = 2.0 }
""")
    assert main(["profile", "show", "reader", "--config", str(toml)]) == 0
    out = capsys.readouterr().out
    assert "profile reader (configured)" in out and out.index("leagu") < out.index("research")
    digests = Path(week["dir"]) / "learn" / "digests.jsonl"
    assert main(["profile", "show", "reader", "--config", str(toml), "--digests", str(digests)]) == 0
    out = capsys.readouterr().out
    assert "learned, as of 2026-03-10T18:00:00Z" in out
    assert out.index("research") < out.index("leagu")
    assert main(["profile", "show", "ghost", "--config", str(toml)]) == 2


def test_an_exception_in_a_profile_step_is_a_dead_letter_and_the_flow_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One interaction that makes the interactions step raise and one that makes the profile
    step raise: two ``internal_error`` dead letters (counted), every other interaction applied."""
    import newsflow.flows.profiles as fp
    from newsflow.flows import metrics
    from newsflow.profiles.state import ProfileState

    archive = tmp_path / "feeds.raw.jsonl"
    write_archive(week_payloads(days=2), archive)
    run_file_flow(str(archive), str(tmp_path / "plain"))
    arts = [orjson.loads(x) for x in (tmp_path / "plain" / "articles.jsonl").read_bytes().splitlines()]
    ix = reader_interactions(arts)
    assert len(ix) > 10
    bad_parse, bad_apply = ix[3], ix[5]
    parse, apply = fp.parse_interaction, ProfileState.apply
    applied: list[str] = []
    raised: list[int] = []

    def flaky_parse(seq: str, raw: bytes, known: frozenset[str]) -> object:
        if orjson.loads(raw) == bad_parse:
            raise RuntimeError("bug in checking")
        return parse(seq, raw, known)

    def flaky_apply(self: ProfileState, action: str, vector: dict, at_ms: int, *a: object, **k: object) -> None:
        if at_ms == fp.iso_to_ms(bad_apply["at"]) and self.name == "reader" and not raised:
            raised.append(at_ms)
            raise RuntimeError("bug in learning")
        applied.append(self.name)
        apply(self, action, vector, at_ms, *a, **k)

    monkeypatch.setattr(fp, "parse_interaction", flaky_parse)
    monkeypatch.setattr(ProfileState, "apply", flaky_apply)
    ix_path = tmp_path / "interactions.jsonl"
    ix_path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in ix))
    before = {st: metrics.DEADLETTERS.labels(st, "internal_error")._value.get() for st in ("interactions", "profiles")}
    run_file_flow(str(archive), str(tmp_path / "out"), interactions_path=str(ix_path), profiles=PROFILES)
    out = _read(tmp_path / "out")
    dls = [orjson.loads(x) for x in out["deadletter"]]
    got = sorted((d["stage"], d["reason"], d["detail"]) for d in dls if d["reason"] == "internal_error")
    assert got == [("interactions", "internal_error", "RuntimeError: bug in checking"),
                   ("profiles", "internal_error", "RuntimeError: bug in learning")]
    import base64

    kept = {d["stage"]: orjson.loads(base64.b64decode(d["original_b64"])) for d in dls if d["reason"] == "internal_error"}
    # the original records, to replay (the first interaction at bad_apply's time raised)
    assert kept["interactions"] == bad_parse and kept["profiles"]["at"] == bad_apply["at"]
    assert kept["profiles"] in ix
    for st in ("interactions", "profiles"):
        assert metrics.DEADLETTERS.labels(st, "internal_error")._value.get() == before[st] + 1
    assert len(applied) == len(ix) - 2  # every other interaction was learned
    assert _digests(out["digests"], "reader"), "the reader's digests still come"


def test_demo_takes_the_profiles_from_the_configuration(week: dict, tmp_path: Path) -> None:
    from newsflow.cli.main import main
    from newsflow.config import Settings, show

    cfg = tmp_path / "newsflow.toml"
    cfg.write_text(show(Settings(profiles=PROFILES_SECTION), {}))
    out = tmp_path / "demo"
    assert main(["demo", "--input", str(week["archive"]), "--config", str(cfg), "--interactions", str(week["ix"]),
                 "--out", str(out)]) == 0
    assert _read(out)["digests"] == week["learn"]["digests"]  # the same profiles as in code
    # profiles configured, no interactions: their digests from the subscriptions alone
    assert main(["demo", "--input", str(week["archive"]), "--config", str(cfg), "--out", str(tmp_path / "d2")]) == 0
    twin = _digests(_read(tmp_path / "d2")["digests"], "reader")
    assert [d["sections"] for d in twin] == [d["sections"] for d in _digests(week["learn"]["digests"], "twin")]


# ------------------------------------------------------------------ live relevance
LIVE_SECTION = ProfilesSettings.model_validate({"profile": {"default": {"topics": SUBSCRIPTIONS["topics"]},
                                                            "reader": SUBSCRIPTIONS}})
LIVE = LIVE_SECTION.to_config()


@pytest.fixture(scope="module")
def live(week: dict, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("live")
    arts = [orjson.loads(x) for x in week["plain"]["articles"]]
    ix = d / "interactions.jsonl"  # the default profile's reader: science read, sports skipped
    ix.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in reader_interactions(arts, profile="default")))
    run_file_flow(str(week["archive"]), str(d / "live"), interactions_path=str(ix), profiles=LIVE)
    run_file_flow(str(week["archive"]), str(d / "still"), profiles=LIVE)  # subscriptions only, no clicks
    return {"ix": ix, "live": _read(d / "live"), "still": _read(d / "still")}


def _mean_relevance(lines: list[bytes], category: str, since: str = "") -> float:
    xs = [r["importance_components"]["relevance"] for r in map(orjson.loads, lines)
          if r["category"] == category and r["fetched_at"] >= since and r.get("importance_components")]
    assert xs, category
    return sum(xs) / len(xs)


def test_live_default_profile_sets_relevance_in_every_article_record(week: dict, live: dict) -> None:
    from newsflow.scoring.importance import COMPONENTS, weighted_importance

    plain = [orjson.loads(x) for x in week["plain"]["articles"]]
    for run in ("live", "still"):
        got = [orjson.loads(x) for x in live[run]["articles"]]
        assert sorted(r["key"] for r in got) == sorted(r["key"] for r in plain)
        by_key = {r["key"]: r for r in plain}
        for r in got:
            validate("articles", r)
            before = by_key[r["key"]]
            comps = r["importance_components"]
            # only the relevance (and the importance it weighs into) changed
            assert {k: v for k, v in r.items() if k not in ("importance", "importance_components")} == \
                {k: v for k, v in before.items() if k not in ("importance", "importance_components")}
            assert {c: comps[c] for c in COMPONENTS if c != "relevance"} == \
                {c: before["importance_components"][c] for c in COMPONENTS if c != "relevance"}
            weights = tuple(r["importance_weights"][c] for c in COMPONENTS)
            assert r["importance"] == round(weighted_importance(comps, weights), 2)
        assert all(r["importance_components"]["relevance"] != 50 for r in got if r["category"] in ("science", "sports"))
    # subscriptions only: sports (weight 2) ranks above science all week
    assert _mean_relevance(live["still"]["articles"], "sports") > _mean_relevance(live["still"]["articles"], "science")
    # learned from the clicks: by the last days science is the more relevant, sports fell
    last = "2026-03-08"
    assert _mean_relevance(live["live"]["articles"], "science", last) > _mean_relevance(live["live"]["articles"], "sports", last)
    assert _mean_relevance(live["live"]["articles"], "sports", last) < _mean_relevance(live["still"]["articles"], "sports", last)


def test_live_relevance_reaches_the_default_digests(week: dict, live: dict) -> None:
    cat = week["category"]
    dl = [d for d in _digests(live["live"]["digests"], None) if d["final"] and d["digest_type"] == "evening_recap"]
    still = [d for d in _digests(live["still"]["digests"], None) if d["final"] and d["digest_type"] == "evening_recap"]
    assert [d["window_start"] for d in dl] == [d["window_start"] for d in still]
    assert _top(dl[-1], cat).count("science") > _top(still[-1], cat).count("science")
    # every item of the default digests carries its lead's live relevance
    rel = {a["article_id"]: a["importance_components"]["relevance"] for a in map(orjson.loads, live["live"]["articles"])}
    items = [it for d in _digests(live["live"]["digests"], None) for s in d["sections"] for it in s["items"]]
    assert items and all(it["relevance"] == rel[it["lead"]["article_id"]] for it in items)
    assert all("relevance" not in it for d in _digests(week["plain"]["digests"], None)
               for s in d["sections"] for it in s["items"])  # without a default profile: as before


def test_live_relevance_is_byte_identical_with_two_workers(week: dict, live: dict, tmp_path: Path) -> None:
    run_file_flow(str(week["archive"]), str(tmp_path / "w2"), workers=2, interactions_path=str(live["ix"]),
                  profiles=LIVE)
    two = _read(tmp_path / "w2")
    for t in TOPICS:
        assert sorted(two[t]) == sorted(live["live"][t]), t


def test_an_article_the_relevance_stage_cannot_score_is_a_dead_letter_not_a_stall(
        week: dict, live: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import newsflow.flows.profiles as fp

    victim = orjson.loads(week["plain"]["articles"][0])["article_id"]
    real = fp.with_relevance

    def flaky(rec: dict, profile: object) -> object:
        if rec["article_id"] == victim:
            raise RuntimeError("bug in scoring")
        return real(rec, profile)  # type: ignore[arg-type]

    monkeypatch.setattr(fp, "with_relevance", flaky)
    run_file_flow(str(week["archive"]), str(tmp_path / "out"), interactions_path=str(live["ix"]), profiles=LIVE)
    out = _read(tmp_path / "out")
    dls = [orjson.loads(x) for x in out["deadletter"] if b"internal_error" in x]
    assert [(d["stage"], d["detail"]) for d in dls] == [("relevance", "RuntimeError: bug in scoring")]
    assert dls[0]["feed_id"] == orjson.loads(week["plain"]["articles"][0])["feed_id"]
    want = sorted(x for x in live["live"]["articles"] if orjson.loads(x)["article_id"] != victim)
    assert sorted(out["articles"]) == want  # every other article, as without the failure


def test_a_neglected_interest_decays_back_toward_neutral_in_the_flow(week: dict, tmp_path: Path) -> None:
    """The reader clicks for two days, then not at all: every learned weight of the reader's
    digests fades by exactly 10 % per week of event time from then on (toward 0, neutral)."""
    from newsflow.samples.reader_week import DAY_MS, START_MS

    arts = [orjson.loads(x) for x in week["plain"]["articles"]]
    ix = tmp_path / "interactions.jsonl"
    clicks = reader_interactions(arts, until_ms=START_MS + 2 * DAY_MS)
    ix.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in clicks))
    run_file_flow(str(week["archive"]), str(tmp_path / "out"), interactions_path=str(ix), profiles=PROFILES)
    last_click = max(fp_ms(r["at"]) for r in clicks)
    mine = [d for d in _digests(_read(tmp_path / "out")["digests"], "reader")
            if d["final"] and fp_ms(d["window_end"]) > last_click]
    assert len(mine) >= 4
    for a, b in itertools.pairwise(mine):
        wa = {t["term"]: t["weight"] for t in a["profile"]["top_terms"]}
        wb = {t["term"]: t["weight"] for t in b["profile"]["top_terms"]}
        factor = 0.9 ** ((fp_ms(b["window_end"]) - fp_ms(a["window_end"])) / (7 * DAY_MS))
        common = [t for t in wa if t in wb and abs(wa[t]) > 0.05]
        assert common
        for t in common:
            assert abs(wb[t]) < abs(wa[t]) and wb[t] == pytest.approx(wa[t] * factor, abs=2e-4), (t, wa[t], wb[t])
    first = {t["term"]: t["weight"] for t in mine[0]["profile"]["top_terms"]}
    end = {t["term"]: t["weight"] for t in mine[-1]["profile"]["top_terms"]}
    span = (fp_ms(mine[-1]["window_end"]) - fp_ms(mine[0]["window_end"])) / (7 * DAY_MS)
    assert all(abs(end[t]) == pytest.approx(abs(first[t]) * 0.9 ** span, abs=2e-4) for t in first if t in end)


def fp_ms(iso: str) -> int:
    from newsflow.core.timeutil import iso_to_ms

    return iso_to_ms(iso)


def test_weights_are_reported_at_every_window_end_however_late_the_interactions_clock_arrives() -> None:
    """The digest steps' clock starts at the story shards' first watermark; the profile's first
    clock needs the interactions clock too, which may arrive later (live: a heartbeat). Window
    ends in between used to get no weights, and that profile's digests stalled forever (a CI run
    of test_live_run_with_a_quiet_interactions_topic_does_not_stall)."""
    from newsflow.config import DigestSettings, Settings
    from newsflow.flows.profiles import ProfileLogic
    from newsflow.model.messages import FromShard, InteractionClock, ProfileAt, ShardWatermark

    profiles = ProfilesSettings.model_validate({"profile": {"reader": {"digests": ["rolling"],
                                                                        "categories": ["science"]}}})
    settings = Settings(profiles=profiles, digests=DigestSettings(rolling_minutes=1))
    shards = [f"st{i:02d}" for i in range(settings.stories.shards)]
    t0 = 1_772_431_200_000
    for late in (False, True):
        logic = ProfileLogic(settings, profiles.to_config(), 1, None, False)
        got: list[object] = []
        msgs: list[object] = [FromShard(s, ShardWatermark(t0)) for s in shards]
        if not late:
            msgs.insert(0, InteractionClock("ix0000", t0))
        msgs += [FromShard(s, ShardWatermark(t0 + 5 * 60_000)) for s in shards]
        msgs.append(InteractionClock("ix0000", t0 + 5 * 60_000))
        for m in msgs:
            got.extend(logic.on_item(("reader", m))[0])  # type: ignore[arg-type]
        ends = [m.as_of for m in got if isinstance(m, ProfileAt)]
        assert ends == [t0 + k * 60_000 for k in range(1, 6)], (late, ends)


def test_live_relevance_digests_are_the_same_for_one_and_two_workers(week: dict, live: dict, tmp_path: Path) -> None:
    """A default profile and no profile digests: the digests' items carry the live relevance of
    their leads, the same with one worker as with two."""
    from newsflow.config import Settings

    only_default = ProfilesSettings.model_validate({"profile": {"default": {"topics": SUBSCRIPTIONS["topics"]}}}).to_config()
    assert only_default.live_relevance and not only_default.with_digests
    outs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        run_file_flow(str(week["archive"]), str(out), Settings(), workers=workers,
                      interactions_path=str(live["ix"]), profiles=only_default)
        outs[workers] = _read(out)
    assert outs[2] == outs[1]
    items = [it for d in map(orjson.loads, outs[2]["digests"]) for s in d["sections"] for it in s["items"]]
    assert items and all(isinstance(it.get("relevance"), float) for it in items)


@pytest.mark.parametrize("profiles_name", ["PROFILES", "LIVE"])
def test_profile_digests_are_the_same_for_one_and_two_workers(week: dict, live: dict, tmp_path: Path,
                                                              profiles_name: str) -> None:
    """Profiles with their own digests (each waits for the profile's weights at the window's end;
    their trends chain per profile), with and without live relevance: the same records with one
    worker as with two."""
    from newsflow.config import Settings

    profiles = {"PROFILES": PROFILES, "LIVE": LIVE}[profiles_name]
    ix = week["ix"] if profiles_name == "PROFILES" else live["ix"]
    assert profiles.with_digests
    outs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        run_file_flow(str(week["archive"]), str(out), Settings(), workers=workers,
                      interactions_path=str(ix), profiles=profiles)
        outs[workers] = _read(out)
    assert outs[2] == outs[1]
    ids = [orjson.loads(d)["digest_id"] for d in outs[2]["digests"]]
    assert any(i.startswith("reader:") for i in ids) and any(not i.startswith(("reader:", "twin:", "other:")) for i in ids)
