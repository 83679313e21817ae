"""The ``stories`` topic's state (newsflow.dedup.story_state) and its record (wire.codec)."""

from __future__ import annotations

import pickle
from typing import Any

import orjson

from newsflow.core.timeutil import iso_to_ms, ms_to_iso
from newsflow.dedup.story_state import MemberRecords, StoryTracker, publisher_family, story_entity
from newsflow.wire.codec import story_record
from newsflow.wire.contracts import validate

H = 3_600_000
T0 = 1_588_723_200_000  # 2020-05-06T00:00:00Z


def rec(aid: str, sid: str, t: int, *, title: str = "A title", pub: str = "BBC News",
        url: str | None = None, tier: str | None = None, imp: float = 50.0) -> dict[str, Any]:
    return {"article_id": aid, "story_id": sid, "published_at": ms_to_iso(t), "title": title,
            "publisher": pub, "canonical_url": url or f"https://www.bbc.co.uk/news/{aid}", "url": None,
            "tier": tier, "importance": imp, "body_text": ""}


def test_changes_are_coalesced_once_per_story_per_flush_in_id_order() -> None:
    tr = StoryTracker()
    tr.observe(rec("a1", "s2", T0))
    tr.observe(rec("a2", "s1", T0 + 60_000))
    tr.observe(rec("a3", "s2", T0 + 120_000, pub="CNN", url="https://edition.cnn.com/x"))
    views = tr.flush()
    assert [v.story_id for v in views] == ["s1", "s2"]
    s2 = views[1]
    assert s2.members == ("a1", "a3") and s2.member_count == 2
    assert s2.publishers == ("bbc.co.uk", "cnn.com")
    assert tr.flush() == []  # nothing changed since
    tr.observe(rec("a1", "s2", T0 + 180_000))  # a revision of a member: not a new member
    (again,) = tr.flush()
    assert again.member_count == 2 and again.last_ms == T0 + 180_000


def test_publisher_families_not_feeds() -> None:
    assert publisher_family("NYT U.S.", "https://www.nytimes.com/2020/05/06/us/a.html") == \
        publisher_family("NYT World", "https://www.nytimes.com/2020/05/06/world/b.html") == "nytimes.com"
    assert publisher_family("Local Radio", None) == "local radio"


def test_lead_phase_label_and_schema() -> None:
    tr = StoryTracker()
    tr.observe(rec("a1", "s", T0, title="Neil Ferguson quits Sage role", imp=40.0))
    (one,) = tr.flush()
    assert one.phase == "breaking" and one.lead.article_id == "a1"
    tr.observe(rec("a2", "s", T0 + H // 2, title="Prof Neil Ferguson resigns after lockdown breach",
                   pub="Daily Mail", url="https://www.dailymail.co.uk/news/a2", tier="T2", imp=61.5))
    (v,) = tr.flush()
    assert v.phase == "developing"  # 2 mentions, under 2 h old (docs/rules.md#story-phases)
    assert v.lead.article_id == "a2" and v.importance == 61.5 and v.peak_importance == 61.5
    # the label names the recurring entity (here already in the lead headline, so: the headline)
    assert "Neil Ferguson" in v.label and v.tiers == ("T2",)
    r = story_record(v)
    validate("stories", orjson.dumps(r))
    assert r["publisher_count"] == 2 and r["first_seen"] == "2020-05-06T00:00:00Z"
    assert r["lead"]["canonical_url"] == "https://www.dailymail.co.uk/news/a2"


def test_a_long_lead_headline_is_labelled_by_its_first_clause_or_sentence() -> None:
    """The stories topic's label reads as a headline (the digests' short form): a long lead
    headline is cut at a clause or sentence end, never on a dangling word ("… meet his …")."""
    tr = StoryTracker()
    tr.observe(rec("a1", "s", T0, title="She posted about ICE. Five months later, she was detained "
                                        "at an airport and held for weeks"))
    tr.observe(rec("b1", "t", T0, title="Lockdown professor steps down after breaking rules to meet "
                                        "his married lover at home"))
    labels = {v.story_id: v.label for v in tr.flush()}
    assert labels == {"s": "She posted about ICE",
                      "t": "Lockdown professor steps down after breaking rules to meet …"}


def test_a_label_entity_keeps_its_of_name() -> None:
    """The name scanner stops at "of" ("Isle of Wight" -> "Isle", "Wight"); the label's entity
    is the name as the titles write it, and the label never ends on a bare "--"."""
    assert story_entity(["Isle of Wight to test contact-tracing app",
                         "Isle of Wight residents asked to download NHS app"]) == "Isle of Wight"
    tr = StoryTracker()
    tr.observe(rec("a1", "s", T0, title="What Kim Yo Jong's rise to the top says -- and doesn't say"))
    (v,) = tr.flush()
    # (a cut right after "says" cuts off its object: shown as a cut, "…", never as a sentence)
    assert v.label == "What Kim Yo Jong's rise to the top says …"


def test_story_expires_on_the_publication_clock_with_a_last_record() -> None:
    tr = StoryTracker(window_ms=72 * H)
    tr.observe(rec("a1", "old", T0))
    tr.flush()
    tr.observe(rec("b1", "new", T0 + 72 * H + 1))  # the clock passes old's window
    views = tr.flush()
    assert [(v.story_id, v.status) for v in views] == [("new", "active"), ("old", "expired")]
    validate("stories", orjson.dumps(story_record(views[1])))
    assert len(tr) == 1 and tr.flush() == []


def test_tracker_pickles_for_snapshots() -> None:
    tr = StoryTracker()
    tr.observe(rec("a1", "s", T0))
    tr2 = pickle.loads(pickle.dumps(tr))
    assert [story_record(v) for v in tr2.flush()] == [story_record(v) for v in tr.flush()]


def test_story_entity_needs_two_titles_and_skips_publisher_names() -> None:
    titles = ["ABS-CBN forced off air by NTC order", "Palace defends NTC chair over ABS-CBN closure (Rappler)"]
    assert story_entity(titles) == "ABS-CBN"
    assert story_entity(["City council approves stadium (Daily Herald)"] * 2, {"daily herald"}) is None
    assert story_entity(["Only one title names Kraftwerk"]) is None


def test_a_story_merged_into_another_leaves_with_merged_into_and_the_other_takes_its_members() -> None:
    """The story assigner's late merges (dense regime) reach the stories topic: the merged-away
    story's last record names the story to follow; that story now counts both fragments."""
    tr = StoryTracker()
    tr.observe(rec("a1", "sa", T0, imp=40.0))
    tr.observe(rec("b1", "sb", T0 + 60_000, pub="CNN", url="https://edition.cnn.com/b1", tier="T1", imp=70.0))
    tr.observe(rec("b2", "sb", T0 + 120_000, pub="Reuters", url="https://www.reuters.com/b2"))
    tr.flush()
    tr.merge("sb", "sa")
    gone, sa = tr.flush()
    assert (gone.story_id, gone.status, gone.merged_into) == ("sb", "expired", "sa")
    assert sa.story_id == "sa" and sa.merged_into is None and sa.member_count == 3
    assert sa.members == ("a1", "b1", "b2") and sa.publishers == ("bbc.co.uk", "cnn.com", "reuters.com")
    assert sa.lead.article_id == "b1" and sa.tiers == ("T1",) and sa.last_ms == T0 + 120_000
    for v in (gone, sa):
        r = story_record(v)
        validate("stories", orjson.dumps(r))
        assert ("merged_into" in r) == (v is gone)
    tr.merge("sb", "sa")  # already gone: nothing happens
    assert tr.flush() == []


def test_a_late_merge_gives_back_the_merged_away_storys_records_under_the_story_it_joined() -> None:
    """The ``articles`` topic is compacted by key: after a merge its latest record of each
    member of the merged-away story must name the story it joined (chains followed)."""
    mr = MemberRecords()
    a1, b1, c1 = (dict(rec(a, s, T0), key=a) for a, s in (("a1", "sa"), ("b1", "sb"), ("c1", "sc")))
    b1r = dict(rec("b1", "sb", T0 + H, title="Revised"), key="b1")  # the same key again: replaces
    b2 = dict(rec("b2", "sb", T0 + 2 * H), key="b2#r1")
    for r in (a1, b1, c1, b1r, b2):
        mr.add(r)
    moved = mr.merge("sb", "sa")
    assert [(r["key"], r["story_id"], r["title"]) for r in moved] == [
        ("b1", "sa", "Revised"), ("b2#r1", "sa", "A title")]
    assert {k: v for k, v in moved[1].items() if k != "story_id"} == {k: v for k, v in b2.items() if k != "story_id"}
    assert mr.merge("sb", "sa") == []  # already merged: nothing twice
    moved = mr.merge("sa", "sc")  # a chain: sa now holds b1 and b2 too
    assert [(r["key"], r["story_id"]) for r in moved] == [("a1", "sc"), ("b1", "sc"), ("b2#r1", "sc")]
    assert mr.merge("sc", "sc") == [] and len(mr) == 4  # a story never merges into itself
    assert pickle.loads(pickle.dumps(mr)).by_story == mr.by_story  # part of the shard's snapshot
    # event time: 72 h after a record's publication it is gone (an older member keeps its record)
    mr.add(dict(rec("d1", "sd", T0 + 73 * H), key="d1"))
    assert mr.expire() == 2 and list(mr.by_story) == ["sc", "sd"] and len(mr) == 3  # a1, c1 (T0) left
    assert [r["key"] for r in mr.merge("sc", "sd")] == ["b1", "b2#r1"]


def test_publishers_on_a_shared_platform_are_told_apart_by_name() -> None:
    """Real 24-feed replay: the YouTube channels of CNN, Al Jazeera, ABS-CBN, GMA and Fox News
    all link to youtube.com; a story they all carry has five publishers, not one."""
    fams = {publisher_family(p, "https://www.youtube.com/watch?v=b0tXaZq5q-w")
            for p in ("CNN", "Al Jazeera English", "ABS-CBN News", "GMA News", "Fox News")}
    assert len(fams) == 5 and "youtube.com" not in fams
    assert publisher_family("Someone", "https://someone.tumblr.com/post/1") == "someone"
    assert publisher_family(None, "https://www.youtube.com/watch?v=1") == "youtube.com"  # no name: the domain
    assert publisher_family("BBC News Home", "https://www.bbc.co.uk/news/1") == "bbc.co.uk"


def test_story_entity_equals_the_grams_by_publisher_definition() -> None:
    """The memoized grams and the joined-names test give what the definition says: the 1-3 word
    runs of each title's entities, counted once per title unless inside a publisher name."""
    import random

    from newsflow.text.entities import extract_entities

    def reference(titles: list[str], skip: set[str]) -> str | None:
        counts: dict[str, int] = {}
        for t in titles:
            grams: dict[str, None] = {}
            for phrase in extract_entities(t):
                w = phrase.split()
                for n in (3, 2, 1):
                    for i in range(len(w) - n + 1):
                        grams[" ".join(w[i:i + n])] = None
            for g in grams:
                if not any(g in p for p in skip):
                    counts[g] = counts.get(g, 0) + 1
        best = sorted(counts.items(), key=lambda kv: (-kv[1], -len(kv[0].split())))
        if not best or best[0][1] < 2:
            return None
        key = best[0][0]
        return next((t[t.lower().find(key):t.lower().find(key) + len(key)] for t in titles if key in t.lower()), key)

    rnd = random.Random(3)
    words = ["Obama", "Merkel", "Berlin", "New", "York", "Times", "Apple", "Daily", "Herald", "says", "the", "in",
             "Fed", "rates", "ABS-CBN", "NTC", "Google", "Android"]
    for _ in range(400):
        titles = [" ".join(rnd.choice(words) for _ in range(rnd.randint(2, 9))) for _ in range(rnd.randint(1, 6))]
        skip = {" ".join(rnd.choice(words) for _ in range(rnd.randint(1, 3))).lower() for _ in range(rnd.randint(0, 4))}
        assert story_entity(titles, skip) == reference(titles, skip), (titles, skip)


class _PlainMemberRecords:
    """The member-record store as it was before the compressed blocks (every record as its own
    JSON bytes): the reference the blocks must equal."""

    def __init__(self, window_ms: int = 72 * H) -> None:
        self.window_ms, self.now_ms, self.swept = window_ms, -(1 << 62), -(1 << 62)
        self.by_story: dict[str, dict[str, tuple[int, bytes]]] = {}

    def add(self, r: dict[str, Any]) -> None:
        t = iso_to_ms(r["published_at"])
        self.now_ms = max(self.now_ms, t)
        self.by_story.setdefault(r["story_id"], {})[r["key"]] = (t, orjson.dumps(r))

    def merge(self, gone: str, into: str) -> list[dict[str, Any]]:
        recs = self.by_story.pop(gone, None) if gone != into else None
        out = []
        for key, (t, raw) in (recs or {}).items():
            r = orjson.loads(raw)
            r["story_id"] = into
            self.by_story.setdefault(into, {})[key] = (t, orjson.dumps(r))
            out.append(r)
        return out

    def expire(self) -> int:
        if self.now_ms // H <= self.swept:
            return 0
        self.swept = self.now_ms // H
        n = 0
        for sid in list(self.by_story):
            old = [k for k, (t, _) in self.by_story[sid].items() if t < self.now_ms - self.window_ms]
            for k in old:
                del self.by_story[sid][k]
            n += len(old)
            if not self.by_story[sid]:
                del self.by_story[sid]
        return n


def test_compressed_member_records_give_back_the_bytes_they_were_given() -> None:
    """Records are packed into zlib blocks of many records at each batch end (``expire``); every
    add / merge / expire / snapshot sequence gives what the plain store gives, byte for byte:
    the records a merge emits again, and each story's kept records in order."""
    import random

    from newsflow.dedup.story_state import BLOCK_RECORDS

    rnd = random.Random(7)
    mr, ref = MemberRecords(), _PlainMemberRecords()
    hour, packed = 0, 0
    for step in range(3000):
        op = rnd.random()
        if op < 0.8:  # stories of every size; keys re-emitted (revisions); text with newlines
            sid = f"s{min(rnd.randint(0, 40), rnd.randint(0, 40))}"
            r = dict(rec(f"a{rnd.randint(0, 900)}", sid, T0 + hour * H, title=f"T {step}\n\"x\" é 😀 " * rnd.randint(1, 4),
                         imp=rnd.random() * 100), key=f"k{rnd.randint(0, 1200)}")
            mr.add(r)
            ref.add(r)
        elif op < 0.9:
            a, b = f"s{rnd.randint(0, 40)}", f"s{rnd.randint(0, 40)}"
            assert mr.merge(a, b) == ref.merge(a, b)
        elif op < 0.98:  # a batch ends
            hour += rnd.choice((0, 0, 1, 5))
            assert mr.expire() == ref.expire()
            packed += 1
        else:  # the shard's snapshot, restored
            mr = pickle.loads(pickle.dumps(mr))
        assert len(mr) == sum(len(v) for v in ref.by_story.values())
    assert packed > 100 and hour > 72  # records were packed, merged from blocks, and expired
    assert list(mr.by_story) == list(ref.by_story)
    for sid, recs in ref.by_story.items():
        assert list(mr.by_story[sid]) == list(recs)
        assert mr.records(sid) == [raw for _, raw in recs.values()]
    mr.expire()
    kept = [e for recs in mr.by_story.values() for e in recs.values()]
    assert kept and all(len(e) == 3 for e in kept)  # every record in a block after a batch end
    blocks = {id(e[1]): e[1] for e in kept}
    assert len(blocks) < len(kept) / 4 and max(e[2] for e in kept) < BLOCK_RECORDS
    assert sum(map(len, blocks.values())) < sum(len(raw) for recs in ref.by_story.values() for _, raw in recs.values()) / 3


def test_member_records_of_an_older_snapshot_are_packed_at_the_next_batch() -> None:
    """A snapshot of the store before the blocks (every record as JSON bytes, no pending list)
    restores, merges as before and is packed at its next batch end."""
    ref = _PlainMemberRecords()
    for i in range(10):
        ref.add(dict(rec(f"a{i}", f"s{i % 3}", T0 + i * H), key=f"k{i}"))
    old = MemberRecords()
    old.by_story = {sid: dict(recs) for sid, recs in ref.by_story.items()}
    old.now_ms = ref.now_ms
    state = dict(old.__dict__)
    del state["_fresh"]
    mr = MemberRecords.__new__(MemberRecords)
    mr.__setstate__(state)
    assert mr.merge("s1", "s0") == ref.merge("s1", "s0")
    mr.expire()
    assert all(len(e) == 3 for recs in mr.by_story.values() for e in recs.values())
    assert [mr.records(s) for s in ref.by_story] == [[raw for _, raw in recs.values()] for recs in ref.by_story.values()]
