"""Unit tests of each stateful step of the dataflow, run through ``bytewax.testing``.

Each test builds a one-step dataflow around the logic class with typed input messages, so a
step's contract (what it takes, what it emits, what it snapshots) is checked on its own.
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

import bytewax.operators as op
import orjson
import pytest
import zstandard
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSink, TestingSource, run_main

from newsflow.config import DedupSettings, Settings, StorySettings
from newsflow.core.alignment import END
from newsflow.core.snapshot import (
    ZSTD_MAGIC,
    SnapshotFormatError,
    make_snapshot,
    pickled_size,
    restore,
    thaw,
)
from newsflow.core.timeutil import iso_to_ms, ms_to_iso
from newsflow.feeds.normalize import normalize_payload
from newsflow.flows.keys import route_to_stories, shard_keys, story_key, story_keys
from newsflow.flows.steps.dedup import STEP_DEDUP, DedupLogic
from newsflow.flows.steps.parse import STEP_PARSE, ParseLogic
from newsflow.flows.steps.stories import STEP_STORIES, StoriesLogic
from newsflow.model.messages import (
    Deduped,
    FromShard,
    HealthReport,
    Output,
    ParsedArticle,
    ScoredArticle,
    ShardWatermark,
    StoryUpdate,
    Tick,
    ToShard,
)
from newsflow.model.records import Article
from newsflow.runtime.placement import key_name
from newsflow.samples.demo import demo_payloads
from newsflow.wire.codec import encode_raw, story_record
from newsflow.wire.contracts import validate

SETTINGS = Settings(dedup=DedupSettings(shards=2), stories=StorySettings(shards=1))
HOUR = 3_600_000


def run_step(step: str, logic: Any, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    flow = Dataflow(f"test_{step}")
    src = op.input("in", flow, TestingSource(items))
    out = op.stateful(step, src, logic)
    got: list[tuple[str, Any]] = []
    op.output("out", out, TestingSink(got))
    run_main(flow)
    return got


def demo_articles(n_payloads: int = 4) -> list[tuple[int, Article]]:
    out = []
    for p in demo_payloads()[:n_payloads]:
        out.extend((p.fetched_at_ms, a) for a in normalize_payload(p, SETTINGS.normalize.to_config()).articles)
    return out


def test_parse_logic_routes_articles_emits_health_deadletters_and_ticks() -> None:
    allp = demo_payloads()
    # two payloads in different event-time minutes: each crossing sends one tick to every shard
    payloads = [allp[0], next(p for p in allp if p.fetched_at_ms // 60_000 > allp[0].fetched_at_ms // 60_000)]
    raw = [("p0", (f"0000:{i:012d}", encode_raw(p)[1])) for i, p in enumerate(payloads)]
    raw.insert(1, ("p0", ("0000:000000000000x", b"{not json")))
    got = [v for _, v in run_step("parse", lambda r: ParseLogic(SETTINGS, r, False), raw)]
    outputs = [m for m in got if isinstance(m, Output)]
    routed = [m for m in got if isinstance(m, ToShard)]
    assert {o.topic for o in outputs} == {"deadletter", "feed-health"}
    for o in outputs:
        validate(o.topic, o.value)
    assert any(orjson.loads(o.value)["reason"] == "bad_envelope" for o in outputs if o.topic == "deadletter")
    arts = [m.item for m in routed if isinstance(m.item, ParsedArticle)]
    dd = shard_keys(SETTINGS)  # placed keys of the shards dd000 and dd001
    assert [key_name(k) for k in dd] == ["dd000", "dd001"]
    assert arts and all(m.shard in dd for m in routed)
    # one tick per shard per crossed minute, before the payload's items (whose epoch is that
    # minute), and one END tick per shard at the end of the partition
    ticks = [m for m in routed if isinstance(m.item, Tick) and m.item.bucket != END]
    assert len(ticks) == 2 * len(payloads) and {m.shard for m in ticks} == set(dd)
    assert [m.shard for m in routed[-2:] if isinstance(m.item, Tick) and m.item.bucket == END] == dd
    first = [m.item for m in routed[:4]]
    assert all(isinstance(x, Tick) for x in first[:2]) and isinstance(first[2], ParsedArticle)
    assert first[2].epoch == first[0].bucket == payloads[0].fetched_at_ms // 60_000
    assert [m for m in routed if isinstance(m.item, HealthReport)]


def test_dedup_logic_flags_a_repeated_guid_and_passes_ticks() -> None:
    (t, a), *_ = demo_articles(1)
    items: list[tuple[str, Any]] = [
        ("dd000", ParsedArticle("0:1", a, 7)),
        ("dd000", ParsedArticle("0:2", a, 7)),  # the same item re-served: a repoll, counted, not emitted
        ("dd000", Tick(8, t, "p0000")),
    ]
    got = [v for _, v in run_step(STEP_DEDUP, lambda r: DedupLogic(SETTINGS, r, False), items)]
    assert isinstance(got[0], Deduped) and got[0].info.disposition == "unique" and got[0].epoch == 7
    assert got[1:] == [Tick(8, t)]  # one tick per boundary; the wiring names the shard


def test_dedup_logic_merges_partitions_on_event_time_whatever_the_arrival_order() -> None:
    """Two input partitions: a copy seen first in event time is the original, however the
    partitions' messages interleave; nothing is released before both partitions passed it."""
    (t, a), *_ = demo_articles(1)
    late = ParsedArticle("0001:000000000005:00000", replace(a, feed_id="another-feed"), 9)
    early = ParsedArticle("0000:000000000009:00000", a, 8)
    tick0, tick1 = Tick(10, t, "p0000"), Tick(10, t, "p0001")
    for order in ([late, tick1, early, tick0], [early, tick0, late, tick1], [early, late, tick1, tick0]):
        logic = DedupLogic(SETTINGS, None, False, ("p0000", "p0001"))
        out: list[Any] = []
        for i, m in enumerate(order):
            got = list(logic.on_item(m)[0])
            if i < 3:
                assert got == []
            out.extend(got)
        got_d = [(x.seq, x.info.disposition) for x in out if isinstance(x, Deduped)]
        assert got_d[0] == (early.seq, "unique") and got_d[1][0] == late.seq and got_d[1][1] != "unique"
        assert out[-1] == Tick(10, t)


def _deduped(arts: list[tuple[int, Article]]) -> tuple[list[tuple[str, Any]], int]:
    dedup = DedupLogic(SETTINGS, None, False)
    items: list[tuple[str, Any]] = []
    for i, (_, a) in enumerate(arts):
        info = dedup.shard.process(a)
        if info is not None:
            items.append(("st00", Deduped(f"0000:{i:012d}:00000", a, info)))
    wm = max(t for t, _ in arts)
    return items, wm


def _ticks(wm: int) -> tuple[Tick, Tick]:
    """The same boundary forwarded by each of SETTINGS' two dedup shards."""
    b = wm // 60_000 + 1
    return Tick(b, wm, "dd000"), Tick(b, wm, "dd001")


def test_stories_logic_releases_only_when_every_dedup_shard_ticked() -> None:
    arts = demo_articles()
    items, wm = _deduped(arts)
    tick, tick2 = _ticks(wm)
    logic = StoriesLogic(SETTINGS, None, False)
    for _, v in items:
        assert list(logic.on_item(v)[0]) == []
    assert list(logic.on_item(tick)[0]) == []  # only one of the two dedup shards passed the tick
    released = list(logic.on_item(tick2)[0])
    scored = [m for m in released if isinstance(m, ScoredArticle)]
    updates = [m for m in released if isinstance(m, StoryUpdate)]
    assert len(scored) == len(items) and released[-1] == ShardWatermark(wm)
    # one stories record per story touched by the released batch, after its articles
    assert sorted(u.story.story_id for u in updates) == sorted({m.record["story_id"] for m in scored})
    assert len(scored) + len(updates) + 1 == len(released)
    for u in updates:
        validate("stories", orjson.dumps(story_record(u.story)))
    # and through Bytewax: the same records, in the same order
    both = run_step(STEP_STORIES, lambda r: StoriesLogic(SETTINGS, r, False),
                    [*items, ("st00", tick), ("st00", tick2)])
    assert [v for _, v in both] == released
    recs = [v.record for _, v in both if isinstance(v, ScoredArticle)]
    assert len(recs) == len(items) and isinstance(both[-1][1], ShardWatermark)
    for r in recs:
        validate("articles", orjson.dumps(r))
        assert r["topic_id"].startswith(key_name(story_key(next(a for _, a in arts if a.article_id == r["article_id"]),
                                                           SETTINGS)) + "/")


def test_route_to_stories_broadcasts_ticks_and_keys_articles_by_category() -> None:
    route = route_to_stories(Settings(stories=StorySettings(shards=4)))
    tick = Tick(1, 1)
    got = route(("dd001@5", tick))  # a placed key: the tick names its source by the shard's name
    assert got == [(k, Tick(1, 1, "dd001")) for k in story_keys(Settings(stories=StorySettings(shards=4)))]
    assert [key_name(k) for k, _ in got] == ["st00", "st01", "st02", "st03"]
    (_, a), *_ = demo_articles(1)
    items, _ = _deduped([(0, a)])
    [(k, v)] = route(("dd001", items[0][1]))
    assert k == story_key(a, Settings(stories=StorySettings(shards=4))) and v is items[0][1]


def test_feed_reliability_reaches_articles_in_every_story_shard() -> None:
    """Health records went to story shard st00 only, so a feed's reliability
    scored articles of that shard alone. Now every shard gets it; one reports it onward."""
    settings = Settings(dedup=DedupSettings(shards=1), stories=StorySettings(shards=4))
    (t, a), *_ = demo_articles(1)
    health = HealthReport("0000:000000000000:~", {"feed_id": a.feed_id, "reliability": 0.5, "at": "x"})
    routed = route_to_stories(settings)(("dd000", health))
    assert sorted(key_name(k) for k, _ in routed) == ["st00", "st01", "st02", "st03"]
    assert [key_name(k) for k, v in routed if v.report] == ["st00"]
    dedup = DedupLogic(settings, None, False)
    art = Deduped("0000:000000000001:00000", a, dedup.shard.process(a))
    for k, h in routed:
        logic = StoriesLogic(settings, None, False)
        logic.on_item(h)
        logic.on_item(art)
        out, _ = logic.on_item(Tick(t // 60_000 + 1, t, "dd000"))
        [rec] = [m.record for m in out if isinstance(m, ScoredArticle)]
        full = {"T1": 95.0, "T2": 80.0, "T3": 65.0, "T4": 50.0, "T5": 30.0}.get(a.tier, 50.0)
        assert rec["importance_components"]["authority"] == full * 0.5, k
        # every shard hands the report to its digest feeder; only one reports it onward
        [h] = [m for m in out if isinstance(m, HealthReport)]
        assert h.report == (key_name(k) == "st00")


def test_a_title_layer_revision_says_what_changed() -> None:
    """A user audit found 10 title-layer revisions on the real day with ``changed: []`` though
    their title or body differed from the item they revise (a consumer refreshing on ``changed``
    skipped them). Now: ``title`` when the normalized titles differ, and always ``body``."""
    (t, a), *_ = [x for x in demo_articles() if len(x[1].body_text.split()) > 40]
    other = ("An entirely rewritten article body about something else, with new quotes from officials, "
             "new numbers, and no sentence shared with the first version of the story at all. ") * 3
    same_title = replace(a, article_id="00000000000000aa", guid="00000000000000aa", url="https://wire.example.com/news/rev-a",
                         canonical_url="https://wire.example.com/news/rev-a", body_text=other, content_hash="h-rev-a",
                         fetched_ms=t + 60_000, fetched_at=ms_to_iso(t + 60_000))
    new_title = replace(same_title, article_id="00000000000000bb", guid="00000000000000bb", url="https://wire.example.com/news/rev-b",
                        canonical_url="https://wire.example.com/news/rev-b", title=a.title + " (update)",
                        body_text=("A third version: the ministry now gives a later timetable, with figures that "
                                   "differ from both earlier reports and quotes from a new spokesperson. ") * 3,
                        content_hash="h-rev-b")
    dedup = DedupLogic(SETTINGS, None, False)
    stories = StoriesLogic(SETTINGS, None, False)
    for i, x in enumerate((a, same_title, new_title)):
        stories.on_item(Deduped(f"0000:{i:012d}:00000", x, dedup.shard.process(x)))
    out = [m for tk in _ticks(t + 60_000) for m in stories.on_item(tk)[0]]
    recs = {m.record["article_id"]: m.record for m in out if isinstance(m, ScoredArticle)}
    ra, rb = recs["00000000000000aa"], recs["00000000000000bb"]
    assert (ra["disposition"], ra["dedup_layer"], ra["changed"]) == ("revision", "title", ["body"])
    assert (rb["disposition"], rb["dedup_layer"], rb["changed"]) == ("revision", "title", ["title", "body"])
    validate("articles", orjson.dumps(rb))


def test_snapshots_resume_identically() -> None:
    arts = demo_articles()
    items, wm = _deduped(arts)
    first, rest = items[: len(items) // 2], items[len(items) // 2:]
    a = StoriesLogic(SETTINGS, None, True)
    for _, v in first:
        a.on_item(v)
    b = StoriesLogic(SETTINGS, a.snapshot(), True)  # pickled snapshot, as Bytewax stores it
    for logic in (a, b):
        for _, v in rest:
            logic.on_item(v)
    t1, t2 = _ticks(wm)
    out_a = [*a.on_item(t1)[0], *a.on_item(t2)[0]]
    out_b = [*b.on_item(t1)[0], *b.on_item(t2)[0]]
    assert out_a == out_b and any(isinstance(m, ScoredArticle) for m in out_a)


def test_parse_snapshots_leave_out_the_repoll_cache_and_resume_identically() -> None:
    """The re-poll memory (each feed's last payload, normalized) is a cache: a snapshot does not
    carry it, and a parse step resumed from that snapshot emits what one that kept it emits."""
    polls = [replace(p, fetched_at_ms=p.fetched_at_ms + k * 10 * 60_000) for k in range(3)
             for p in demo_payloads()[:4]]
    a = ParseLogic(SETTINGS, None, True)
    for i, p in enumerate(polls[:4]):
        a._item(f"0000:{i:012d}", encode_raw(p)[1])
    assert a.repolls.feeds
    snap = a.snapshot()
    assert "repolls" not in restore(STEP_PARSE, snap)
    b = ParseLogic(SETTINGS, snap, True)
    assert not b.repolls.feeds
    for i, p in enumerate(polls[4:], start=4):
        raw = encode_raw(p)[1]
        assert a._item(f"0000:{i:012d}", raw) == b._item(f"0000:{i:012d}", raw)
    assert a.repolls.payload_hits == 8 and b.repolls.payload_hits == 4  # b parsed each feed once


def test_frozen_snapshots_are_compressed_and_plain_pickles_still_restore() -> None:
    """With recovery on, a snapshot is its pickle compressed (zstd): a story step's state takes
    fewer bytes; a store written before compression (a plain pickle of the
    same dict) resumes to the same state."""
    arts = demo_articles()
    items, _ = _deduped(arts)
    a = StoriesLogic(SETTINGS, None, True)
    for _, v in items:
        a.on_item(v)
    frozen = a.snapshot()
    assert isinstance(frozen, bytes) and frozen[:4] == ZSTD_MAGIC
    fields = restore(STEP_STORIES, frozen)
    plain = zstandard.ZstdDecompressor().decompress(frozen)  # the pickle that was compressed
    assert pickle.dumps(pickle.loads(plain)) == pickle.dumps(thaw(frozen))
    assert pickled_size(frozen) == len(plain) and pickled_size(plain) == len(plain)
    assert len(frozen) * 1.25 < len(plain)  # (mostly hash arrays here; 1.6x on 100k UCI rows)
    assert pickle.dumps(restore(STEP_STORIES, plain)) == pickle.dumps(fields)
    b, c = StoriesLogic(SETTINGS, frozen, True), StoriesLogic(SETTINGS, plain, True)
    assert b.snapshot() == c.snapshot()  # the same state, compressed the same way


def test_old_positional_snapshots_are_refused_with_a_clear_message() -> None:
    old = pickle.dumps((object.__class__, {}, None))
    with pytest.raises(SnapshotFormatError, match="start from a new recovery directory"):
        StoriesLogic(SETTINGS, old, True)
    with pytest.raises(SnapshotFormatError, match="belongs to step 'dedup'"):
        restore(STEP_STORIES, make_snapshot(STEP_DEDUP, {}, freeze=True))
    newer = make_snapshot(STEP_DEDUP, {}, freeze=False)
    newer["version"] = 99
    with pytest.raises(SnapshotFormatError, match="upgrade newsflow"):
        DedupLogic(SETTINGS, newer, False)
    older = make_snapshot(STEP_STORIES, {}, freeze=False)
    older["version"] = 1  # the release before the event-time merge of partitions
    with pytest.raises(SnapshotFormatError, match=r"earlier release.*new recovery directory"):
        StoriesLogic(SETTINGS, older, False)
    for version in (3, 4, 5):  # only the current layout is read, by every step
        previous = make_snapshot(STEP_STORIES, {}, freeze=False)
        previous["version"] = version
        with pytest.raises(SnapshotFormatError, match=r"^step 'stories': .*start from a new recovery directory"):
            StoriesLogic(SETTINGS, previous, False)
        previous = make_snapshot(STEP_DEDUP, {}, freeze=False)
        previous["version"] = version
        with pytest.raises(SnapshotFormatError, match="new recovery directory"):
            DedupLogic(SETTINGS, previous, False)
    assert StoriesLogic(SETTINGS, make_snapshot(STEP_STORIES, {}, freeze=False), False).assigner.articles == {}


def test_a_story_carried_by_one_organisations_feeds_has_one_publisher() -> None:
    """Distinct publishers are publisher families, not feeds. A CNN YouTube
    video and the CNN International article on one story were two publishers (corroboration
    50 at story time and at digest time); with the BBC's article the story has two."""
    from newsflow.model.records import RawPayload

    t0 = iso_to_ms("2020-05-06T12:00:00Z")

    def feed(publisher: str, link: str, title: str, t: int) -> list[tuple[int, Article]]:
        body = (f'<rss version="2.0"><channel><title>{publisher}</title><item><title>{title}</title>'
                f"<link>{link}</link><guid>{link}</guid><pubDate>Wed, 06 May 2020 11:00:00 GMT</pubDate>"
                f"<description>{publisher} reports on the visit.</description></item></channel></rss>").encode()
        payload = RawPayload(publisher.lower().replace(" ", "-"), f"https://feeds.example/{len(title)}", t, 200,
                             body, publisher=publisher)
        return [(t, a) for a in normalize_payload(payload, SETTINGS.normalize.to_config()).articles]

    arts = (feed("BBC News", "https://www.bbc.co.uk/news/world-us-canada-1", "Trump tours mask factory without mask", t0)
            + feed("CNN", "https://www.youtube.com/watch?v=Kz1", "Trump visits mask factory without wearing a mask",
                   t0 + 60_000)
            + feed("CNN International", "https://www.cnn.com/2020/05/06/politics/trump-mask-factory",
                   "Trump tours mask factory, does not wear a mask", t0 + 120_000))
    items, wm = _deduped(arts)
    stories = StoriesLogic(SETTINGS, None, False)
    for _, v in items:
        stories.on_item(v)
    out = [m for t in _ticks(wm) for m in stories.on_item(t)[0]]
    recs = [m.record for m in out if isinstance(m, ScoredArticle)]
    assert len(recs) == 3 and len({r["story_id"] for r in recs}) == 1, [r["disposition"] for r in recs]
    assert [r["story_publishers"] for r in recs] == [1, 2, 2]
    assert recs[2]["importance_components"]["corroboration"] == 50.0  # (three feeds, two publishers)
    [story] = [story_record(m.story) for m in out if isinstance(m, StoryUpdate)]
    assert story["publishers"] == ["bbc.co.uk", "cnn.com"] and story["publisher_count"] == 2


def test_a_gap_between_polls_does_not_age_the_news_it_brings() -> None:
    """Real 24-feed replay: the archive polled each feed a few times a day, so an article
    published at 17:25 and fetched at 22:08 scored recency 87 (4.7 h old at its fetch) while one
    fetched minutes after publication scored 99; widely covered stories (Kraftwerk, the closest
    black hole, Adele) fell below the morning brief's cut behind items of luckier polls. Now an
    article is scored as of the latest time it can have first appeared in its feed: its
    publication when that came after the feed's previous poll, else that poll."""
    from newsflow.model.records import RawPayload

    t0 = iso_to_ms("2020-05-06T08:00:00Z")

    def rss(items: list[tuple[str, str, str]]) -> bytes:
        return ('<rss version="2.0"><channel><title>Example News</title>' + "".join(
            f"<item><title>{title}</title><link>https://news.example/{g}</link><guid isPermaLink='false'>{g}</guid>"
            f"<pubDate>{date}</pubDate><description>{title}, reported today.</description></item>"
            for g, title, date in items) + "</channel></rss>").encode()

    old = ("old", "Harbour bridge closed for repairs", "Wed, 06 May 2020 07:00:00 GMT")  # 1 h before poll 1
    new = ("new", "Museum reopens with timed tickets", "Wed, 06 May 2020 09:00:00 GMT")  # after poll 1
    late = ("late", "Council approves new stadium plan", "Wed, 06 May 2020 05:00:00 GMT")  # surfaced after poll 1
    polls = [RawPayload("example", "https://news.example/rss", t0, 200, rss([old])),
             RawPayload("example", "https://news.example/rss", t0 + 5 * HOUR, 500, b""),  # an error shows nothing
             RawPayload("example", "https://news.example/rss", t0 + 10 * HOUR, 200, rss([new, late, old]))]
    parse = ParseLogic(SETTINGS, None, False)
    parsed = [m.item for i, p in enumerate(polls) for m in parse._item(f"0000:{i:012d}", encode_raw(p)[1])
              if isinstance(m, ToShard) and isinstance(m.item, ParsedArticle)]
    assert [(x.article.guid, x.previous_poll_ms) for x in parsed] == [
        ("old", None), ("new", t0), ("late", t0), ("old", t0)]
    dedup = DedupLogic(SETTINGS, None, False)
    items = [d for d in dedup._run(parsed) if isinstance(d, Deduped)]  # (the re-served "old" is no news)
    assert [(d.article.guid, d.previous_poll_ms) for d in items] == [("old", None), ("new", t0), ("late", t0)]
    wm = t0 + 10 * HOUR
    stories = StoriesLogic(SETTINGS, None, False)
    for v in items:
        stories.on_item(v)
    out = [m for t in _ticks(wm) for m in stories.on_item(t)[0]]
    recency = {m.record["guid"]: m.record["importance_components"]["recency"]
               for m in out if isinstance(m, ScoredArticle) and m.record["importance_components"]}
    # old: 1 h at its fetch; new: as of its publication (was 9 h at the fetch: 76.34);
    # late: 3 h at the previous poll (was 15 h at the fetch: 63.76)
    assert recency == {"old": 97.04, "new": 100.0, "late": 91.39}
    # a parse snapshot keeps the feeds' last polls
    assert restore(STEP_PARSE, parse.snapshot())["polls"] == {"example": t0 + 10 * HOUR}


def test_digest_steps_get_the_health_fields_they_read_and_report_the_same():
    """A ``feed-health`` record reaches the five digest steps as the fields their report reads
    (``digest.health.report_view``): each step keeps a week of them, one per poll. The report of
    random records is the same from the views as from the whole records."""
    import random

    from newsflow.digest.health import REPORT_FIELDS, FeedHealthAccumulator, report_view
    from newsflow.flows.digest_windows import digest_inputs
    from newsflow.model.messages import HealthReport
    from newsflow.wire.codec import health_record

    rnd = random.Random(3)
    recs = [health_record(f"feed-{rnd.randrange(5)}", 1_700_000_000_000 + i * 60_000,
                          rnd.choice(["ok", "partial_undated", "all_undated", "no_items", "http_error"]),
                          source=rnd.choice(["flow", "poller", "other"]), items=rnd.randrange(30), etag="x",
                          reliability=rnd.choice([None, rnd.random()]), alert=rnd.choice([None, "stale"]))
            for i in range(400)]
    full, slim = FeedHealthAccumulator(), FeedHealthAccumulator()
    for r in recs + recs[:50]:  # (re-emits too)
        full.add(r)
        slim.add(report_view(r))
    assert full.summary() == slim.summary()
    [(_, sent)] = digest_inputs(Settings())([("st00", HealthReport("0:1", recs[0]))])
    assert isinstance(sent, FromShard) and isinstance(sent.message, HealthReport)
    assert sent.message.record == {k: recs[0][k] for k in REPORT_FIELDS if k in recs[0]}
    assert "etag" in recs[0] and "etag" not in sent.message.record
