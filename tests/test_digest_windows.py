"""Digests assembled per window (``newsflow.flows.digest_windows``): a window's key drafts the
same digest whatever order its entries, seals and close arrive in; the routing by hour is the
hour range a window's assembly reads; the per-window steps give the same bytes as the single
key per digest type on whole replays."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import orjson
import pytest
from bytewax.operators import StatefulLogic

from newsflow.cli.main import run_file_flow
from newsflow.config import Settings
from newsflow.connectors.files import write_archive
from newsflow.core.timeutil import HOUR_MS, ms_to_iso
from newsflow.digest.assemble import draft_digest
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.entries import digest_entries
from newsflow.digest.schedule import DigestSchedule, DigestWindow
from newsflow.flows.digest_windows import (
    CoverageAt,
    WindowClose,
    WindowDraft,
    WindowEntry,
    WindowSeal,
    WindowSkip,
    windows_touching_hour,
)
from newsflow.flows.steps.digest_window import WindowLogic
from newsflow.samples.demo import demo_payloads
from newsflow.scoring.importance import score_record

START = 1_700_006_400_000  # a Wednesday, 00:00 UTC
WORDS = ["Apple", "unveils", "iPhone", "rates", "crisis", "deal", "outbreak", "flight", "earnings",
         "sanctions", "Ukraine", "Fed", "Google", "Samsung", "Ebola", "court", "vote", "storm"]
TOPICS = ("articles", "digests", "feed-health", "deadletter", "stories")


def _records(n: int, w: DigestWindow, seed: int = 5) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = w.start_ms + rng.randrange(w.end_ms - w.start_ms - 120_000)
        rec = {
            "key": f"a{i:04d}", "article_id": f"a{i:04d}", "feed_id": f"f{i % 4}",
            "publisher": f"Pub {i % 6}", "tier": f"T{1 + i % 5}", "url": f"https://p{i % 6}.example/{i}",
            "title": " ".join(rng.choice(WORDS) for _ in range(7)),
            "body_text": ". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(8)) + ".",
            "published_at": ms_to_iso(t), "fetched_at": ms_to_iso(t + 60_000),
            "disposition": "unique", "revision_no": 0, "story_id": f"s{i % 5}",
            "story_publishers": [f"Pub {i % 6}"], "story_tiers": [f"T{1 + i % 5}"], "word_count": 300,
            "seen_in": [],
        }
        out.append(score_record(rec, t + 60_000))
    return out


def _coverage_at(cov: StoryCoverage, recs: list[dict], end: int) -> tuple[dict, dict]:
    stories = {r["story_id"]: cov.as_of(r["story_id"], end) for r in recs}
    feeds = {r["feed_id"]: cov.reliability_of(r["feed_id"], end) for r in recs}
    return stories, feeds


def test_a_window_drafts_the_same_digest_whatever_order_its_messages_come_in() -> None:
    s = Settings()
    w = DigestWindow("rolling", START, START + HOUR_MS)
    recs = _records(24, w)
    entries = digest_entries(recs)
    cov = StoryCoverage().extend(recs)
    cov.add_health({"feed_id": "f1", "at": ms_to_iso(START), "reliability": 0.5})
    a, b = entries[:15], entries[15:]  # two story shards' parts, in their order
    seals = []
    for shard, part, part_recs in (("sa", a, recs[:15]), ("sb", b, recs[15:])):
        stories, feeds = _coverage_at(cov, part_recs, w.end_ms)
        seals.append(WindowSeal(w, shard, tuple(e.article_id for e in part), {}, stories, feeds))
    close = WindowClose(w, ("sa", "sb"), {}, True, None)
    configs = (s.digests.schedule(), s.digests.to_config(), s.scoring.to_config())
    want = draft_digest(entries, w, schedule=configs[0], feed_health={}, config=configs[1], final=True,
                        coverage=CoverageAt(w.end_ms, *_coverage_at(cov, recs, w.end_ms)),  # type: ignore[arg-type]
                        score_config=configs[2])
    assert want.digest["article_count"] > 0
    msgs = [WindowEntry(e) for e in entries] + seals + [close]
    rng = random.Random(1)
    for _ in range(6):
        rng.shuffle(msgs)
        logic = WindowLogic(s, None, {"rolling": "dt:rolling"}, configs)
        drafts = []
        for i, m in enumerate(msgs):
            out, discard = logic.on_item(m)
            out = list(out)
            last = i == len(msgs) - 1
            assert (discard == StatefulLogic.DISCARD) == last  # the key ends with its draft
            assert bool(out) == last
            drafts.extend(out)
        ((key, d),) = drafts
        assert key == "dt:rolling" and isinstance(d, WindowDraft)
        assert orjson.dumps(d.draft.digest) == orjson.dumps(want.digest)
        assert d.draft.candidates == want.candidates


@pytest.mark.parametrize("chunk", [4, 512])
def test_a_window_resumed_from_its_snapshots_at_any_point_drafts_the_same_digest(
        chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With recovery, a window key's snapshot carries its entries as frozen chunks (frozen
    once full, then carried as bytes), not re-pickled whole: an epoch's arrivals join the last
    chunk until it holds ``CHUNK_ENTRIES``, then start a new one. A key resumed from a
    snapshot taken after any message drafts the digest of an uninterrupted key."""
    from newsflow.core.snapshot import restore
    from newsflow.flows.steps import digest_window

    monkeypatch.setattr(digest_window, "CHUNK_ENTRIES", chunk)

    s = Settings()
    w = DigestWindow("rolling", START, START + HOUR_MS)
    recs = _records(30, w)
    entries = digest_entries(recs)
    cov = StoryCoverage().extend(recs)
    stories, feeds = _coverage_at(cov, recs, w.end_ms)
    seal = WindowSeal(w, "sa", tuple(e.article_id for e in entries), {}, stories, feeds)
    configs = (s.digests.schedule(), s.digests.to_config(), s.scoring.to_config())
    want = draft_digest(entries, w, schedule=configs[0], feed_health={}, config=configs[1], final=True,
                        coverage=CoverageAt(w.end_ms, stories, feeds),  # type: ignore[arg-type]
                        score_config=configs[2])
    msgs = [WindowEntry(e) for e in entries] + [seal, WindowClose(w, ("sa",), {}, True, None)]
    rng = random.Random(3)
    for _ in range(4):
        rng.shuffle(msgs)
        logic = WindowLogic(s, None, {"rolling": "dt:rolling"}, configs, recovery=True)
        drafts = []
        before: list[bytes] = []
        for i, m in enumerate(msgs):
            drafts.extend(logic.on_item(m)[0])
            if i < len(msgs) - 1 and rng.random() < 0.4:  # an epoch ends: snapshot, crash, resume
                snap = logic.snapshot()
                fields = restore("digest_window", snap)
                assert fields["state"].entries == {}  # the entries travel only as chunks
                got = fields["entry_chunks"]
                assert got[:len(before) - 1] == before[:-1]  # all but the last chunk as they were
                assert len(got) - len(before) <= 1  # at most one new chunk
                assert all(len(c) >= chunk for c in logic.chunk_entries[:-1])
                before = list(got)
                logic = WindowLogic(s, snap, {"rolling": "dt:rolling"}, configs, recovery=True)
        ((_, d),) = drafts
        assert orjson.dumps(d.draft.digest) == orjson.dumps(want.digest)
        assert len(before) <= len(entries) // chunk + 1


def test_a_skipped_window_ends_once_its_seals_are_in_without_a_draft() -> None:
    s = Settings()
    w = DigestWindow("rolling", START, START + HOUR_MS)
    (e,) = digest_entries(_records(1, w))
    seal = WindowSeal(w, "sa", (e.article_id,), {}, {}, {})
    configs = (s.digests.schedule(), s.digests.to_config(), s.scoring.to_config())
    for msgs in itertools.permutations([WindowEntry(e), seal, WindowSkip(("sa",))]):
        logic = WindowLogic(s, None, {}, configs)
        results = [logic.on_item(m) for m in msgs]
        assert all(not list(out) for out, _ in results)
        assert [d for _, d in results] == [StatefulLogic.RETAIN, StatefulLogic.RETAIN, StatefulLogic.DISCARD]


@pytest.mark.parametrize("tz", ["UTC", "America/New_York", "Asia/Kolkata"])
@pytest.mark.parametrize("rolling", [60, 15, 180])
def test_an_hour_goes_to_every_window_whose_assembly_reads_it(tz: str, rolling: int) -> None:
    """The windows of an hour are those whose hour range (``start // HOUR ..= end // HOUR``, what
    assembly reads) contains it: checked against every window closing over three weeks, across
    a daylight-saving change."""
    import dataclasses

    from newsflow.digest.schedule import DEFAULT_TYPES

    sched = DigestSchedule(tz=tz, types=tuple(dataclasses.replace(t, every_minutes=rolling)
                                              if t.kind == "rolling" else t for t in DEFAULT_TYPES))
    t0 = 1_699_000_000_000  # 2023-11-03: New York leaves daylight saving on the 5th
    every = sched.closing(t0 - 30 * 86_400_000, t0 + 30 * 86_400_000)
    types = tuple(t.name for t in sched.types)
    for h in range(t0 // HOUR_MS, t0 // HOUR_MS + 21 * 24, 5):
        want = {w for w in every if w.start_ms // HOUR_MS <= h <= w.end_ms // HOUR_MS}
        assert set(windows_touching_hour(sched, h, types)) == want


def _replay(archive: Path, out: Path, **kw: object) -> dict[str, bytes]:
    run_file_flow(str(archive), str(out), settings=Settings(), **kw)  # type: ignore[arg-type]
    return {t: (out / f"{t}.jsonl").read_bytes() if (out / f"{t}.jsonl").exists() else b"" for t in TOPICS}


def test_the_digests_are_the_same_for_any_number_of_workers_and_processes(tmp_path: Path) -> None:
    archive = tmp_path / "demo.jsonl"
    write_archive(demo_payloads(), archive)
    one = _replay(archive, tmp_path / "one")
    assert one["digests"]
    assert _replay(archive, tmp_path / "w2", workers=2) == one
    assert _replay(archive, tmp_path / "p2", processes=2) == one


@pytest.mark.corpus
@pytest.mark.slow
def test_the_digests_of_the_labelled_real_day_are_the_same_with_two_processes(tmp_path: Path, shared_dir: Path) -> None:
    """Real feeds (24 feeds, one uncategorised story shard, re-polls, feed-health gaps)."""
    archive = shared_dir / "data" / "real-feeds" / "headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz"
    one = _replay(archive, tmp_path / "one")
    assert one["digests"].count(b"\n") > 50
    assert _replay(archive, tmp_path / "p2", processes=2) == one


def test_a_store_from_before_the_per_window_digests_is_refused() -> None:
    """Its digests' state sits under steps the flow no longer has: resuming would lose open windows."""
    from newsflow.core.snapshot import SnapshotFormatError, make_snapshot
    from newsflow.flows.steps.stories import STEP_STORIES, StoriesLogic

    old = make_snapshot(STEP_STORIES, {}, freeze=False)
    old["version"] = 4
    with pytest.raises(SnapshotFormatError, match="new recovery directory"):
        StoriesLogic(Settings(), old, False)


def test_a_jump_over_a_quiet_stretch_skips_the_windows_between(tmp_path: Path) -> None:
    """The demo, then the demo again 40 days later: the windows between the two are empty and
    skipped (not thousands of empty digests); the windows that read the hour the new data
    starts in but end before it are skipped too, and their keys end (``WindowSkip``)."""
    from dataclasses import replace

    later = [replace(p, fetched_at_ms=p.fetched_at_ms + 40 * 86_400_000) for p in demo_payloads()]
    archive = tmp_path / "gap.jsonl"
    write_archive([*demo_payloads(), *later], archive)
    one = _replay(archive, tmp_path / "one")
    n = one["digests"].count(b"\n")
    assert 0 < n < 40 * 24  # fewer than the 40 days' hourly rolling windows alone
    assert _replay(archive, tmp_path / "p2", processes=2) == one


def test_an_article_late_for_a_sealed_window_is_counted_and_not_sent_to_it() -> None:
    """A shard's feeder seals a window when the shard's watermark passes its end: an article of
    that window arriving later is counted late (``metrics.LATE``, per type) and its entry goes
    only to the windows still open."""
    from prometheus_client import REGISTRY

    from newsflow.flows.digest_windows import FeederTick
    from newsflow.flows.steps.digest_feeder import FeederLogic
    from newsflow.model.messages import FromShard, ScoredArticle, ShardWatermark

    def late() -> float:
        return REGISTRY.get_sample_value("newsflow_late_for_digest_total") or 0.0

    s = Settings()
    w = DigestWindow("rolling", START, START + HOUR_MS)
    rec = _records(1, w)[0]
    (entry,) = digest_entries([rec])
    feeder = FeederLogic(s, None, "clock")
    feeder.on_item(FromShard("st00", ShardWatermark(START - HOUR_MS)))
    before = late()
    out, _ = feeder.on_item(FromShard("st00", ScoredArticle(rec, entry)))  # on time
    sent = {k for k, _ in out}
    assert f"dw:rolling:{START}" in sent and late() == before
    out, _ = feeder.on_item(FromShard("st00", ShardWatermark(START + 30 * HOUR_MS)))  # seals them
    seals = [m for _, m in out if isinstance(m, WindowSeal)]
    assert {m.window.digest_type for m in seals} == {"rolling", "morning_brief", "midday_update", "evening_recap"}
    assert all(m.ids == (entry.article_id,) for m in seals if m.window.contains(entry.fetched_ms))
    (tick,) = [m for _, m in out if isinstance(m, FeederTick)]
    assert set(tick.sealed) == {m.window for m in seals}
    out, _ = feeder.on_item(FromShard("st00", ScoredArticle(rec, entry)))  # the same fetch time again
    assert late() == before + 4  # the rolling window and the three daily ones are closed
    assert {k for k, _ in out} == {k for k in sent if k.startswith("dw:weekly_roundup:")}


def test_the_clock_holds_a_profiles_weights_only_while_a_window_waits_for_them() -> None:
    """The profile step reports its weights at every window end; the clock keeps those of the
    windows of the profile's types until their closes are sent, and drops the others once its
    watermark has passed them."""
    from newsflow.flows.digest_windows import FeederTick, ProfileClose
    from newsflow.flows.steps.digest_clock import DigestClockLogic
    from newsflow.model.messages import ProfileAt

    s = Settings(stories={"shards": 1})
    clock = DigestClockLogic(s, None, {t.name: f"dt:{t.name}" for t in s.digests.schedule().types},
                             profile_types={"p": frozenset({"evening_recap"})})
    evening = START + 18 * HOUR_MS  # 18:00 UTC: the evening recap's end, and a rolling window's
    at = {t: ProfileAt("p", t, ((1, 1.0),), (("term", 1.0),)) for t in (START + 3 * HOUR_MS, evening)}
    clock.on_item(FeederTick("s0", START, (), ()))
    for p in at.values():
        assert list(clock.on_item(p)[0]) == []  # no window of its types has closed yet
    out, _ = clock.on_item(FeederTick("s0", START + 4 * HOUR_MS, (), ()))
    assert not any(isinstance(m, ProfileClose) for _, m in out)
    assert set(clock.profile_at["p"]) == {evening}  # 03:00 ends no window of the profile's types
    out, _ = clock.on_item(FeederTick("s0", evening, (), ()))
    (pc,) = [m for _, m in out if isinstance(m, ProfileClose)]
    assert pc.window.digest_type == "evening_recap" and pc.window.end_ms == evening and pc.at == at[evening]
    assert clock.profile_at["p"] == {}


def test_feeder_slims_pickle_as_field_tuples_and_read_older_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every feeder is pickled each epoch with recovery on, thousands of slim entries each:
    they go as field tuples (``fast_pickle``), and a pickle of before (slot dicts) still loads."""
    import pickle

    from newsflow.flows.digest_windows import SlimEntry

    s = SlimEntry("a1", "s1", "f1", START, False)
    assert SlimEntry.__reduce__(s)[0] is SlimEntry
    assert pickle.loads(pickle.dumps([s, s])) == [s, s]
    with monkeypatch.context() as m:  # pickled as before: pickle's default for a slotted class
        m.setattr(SlimEntry, "__reduce__", object.__reduce__)
        before = pickle.dumps([s], protocol=pickle.HIGHEST_PROTOCOL)
    assert len(before) > len(pickle.dumps([s], protocol=pickle.HIGHEST_PROTOCOL))
    assert pickle.loads(before) == [s]
