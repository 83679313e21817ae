"""Exact dedup (layers 1–2, docs/rules.md#deduplication) on the pure shard state, without Bytewax or Kafka."""

from __future__ import annotations

from dataclasses import replace

from newsflow.core.hashing import stable_id
from newsflow.core.timeutil import HOUR_MS, ms_to_iso
from newsflow.dedup.exact import DedupShard, dedup_shard_key, state_key, story_margin_ms
from newsflow.feeds.normalize import content_hash
from newsflow.model.records import Article

T0 = 1_700_000_000_000


def art(feed: str, guid: str, url: str | None, title: str = "Title", body: str = "body text", t: int = T0,
        publisher: str | None = None) -> Article:
    return Article(
        article_id=stable_id(feed, guid), feed_id=feed, publisher=publisher or feed, tier="T2", guid=guid, url=url,
        canonical_url=url, title=title, author=None, published_at=ms_to_iso(t), published_ms=t,
        date_uncertain=False, date_source="pubDate", fetched_at=ms_to_iso(t), fetched_ms=t, body_html=body,
        body_text=body, categories=(), media=(), word_count=len(body.split()), reading_time_min=0.0,
        partial_content=False, content_hash=content_hash(title, body), feed_format="rss20", language=None,
        category=None, item_index=0,
    )


def test_first_sighting_is_unique() -> None:
    s = DedupShard(72 * HOUR_MS)
    info = s.process(art("f1", "g1", "https://a.com/1"))
    assert info.disposition == "unique" and info.duplicate_of is None and len(info.seen_in) == 1


def test_repoll_of_unchanged_item_is_counted_not_emitted() -> None:
    s = DedupShard(72 * HOUR_MS)
    s.process(art("f1", "g1", "https://a.com/1"))
    assert s.process(art("f1", "g1", "https://a.com/1", t=T0 + HOUR_MS)) is None
    assert s.counters["repoll_unchanged"] == 1


def test_same_guid_same_content_other_feed_is_exact_duplicate_and_linked() -> None:
    s = DedupShard(72 * HOUR_MS)
    first = art("wire", "g1", "https://a.com/1")
    s.process(first)
    info = s.process(art("portal", "g1", "https://portal.com/x", publisher="Portal"))
    assert info.disposition == "exact_duplicate" and info.layer == "guid"
    assert info.duplicate_of == first.article_id
    assert [x.feed_id for x in info.seen_in] == ["wire", "portal"]


def test_same_guid_changed_content_is_revision_with_changed_fields() -> None:
    s = DedupShard(72 * HOUR_MS)
    s.process(art("f1", "g1", "https://a.com/1", title="Quake 7.1", body="magnitude 7.1"))
    info = s.process(art("f1", "g1", "https://a.com/1", title="Quake 7.3", body="magnitude 7.3", t=T0 + HOUR_MS))
    assert info.disposition == "revision" and info.changed[:2] == ("title", "body") and info.revision_no == 1
    # the old version served again by a lagging mirror is not a new revision
    again = s.process(art("f1", "g1", "https://a.com/1", title="Quake 7.1", body="magnitude 7.1", t=T0 + 2 * HOUR_MS))
    assert again is None


def test_same_canonical_url_is_duplicate_keep_more_content() -> None:
    s = DedupShard(72 * HOUR_MS)
    first = art("f1", "g1", "https://a.com/1", body="short")
    s.process(first)
    info = s.process(art("f2", "other-guid", "https://a.com/1", body="a much longer body with more words"))
    assert info.disposition == "exact_duplicate" and info.layer == "url" and info.preferred
    assert info.duplicate_of == first.article_id
    less = s.process(art("f3", "third", "https://a.com/1", body="tiny"))
    assert less.disposition == "exact_duplicate" and not less.preferred and len(less.seen_in) == 3


def test_state_expires_on_event_time_only() -> None:
    s = DedupShard(72 * HOUR_MS)
    s.process(art("f1", "g1", "https://a.com/1"))
    s.advance(T0 + 71 * HOUR_MS)
    assert len(s) == 1
    s.advance(T0 + 92 * HOUR_MS)
    assert len(s) == 1  # the story layer may still hold it (publication time + 72 h + two 12 h slabs)
    s.advance(T0 + 100 * HOUR_MS)
    assert len(s) == 0 and not s.by_url
    assert s.process(art("f1", "g1", "https://a.com/1", t=T0 + 101 * HOUR_MS)).disposition == "unique"


def test_the_publication_margin_covers_the_story_memory_whatever_the_window() -> None:
    assert story_margin_ms(72 * HOUR_MS, 72 * HOUR_MS, 12 * HOUR_MS) == 24 * HOUR_MS
    assert story_margin_ms(12 * HOUR_MS, 72 * HOUR_MS, 12 * HOUR_MS) == 84 * HOUR_MS
    assert story_margin_ms(200 * HOUR_MS, 72 * HOUR_MS, 12 * HOUR_MS) == 0
    s = DedupShard(12 * HOUR_MS, story_margin_ms=story_margin_ms(12 * HOUR_MS, 72 * HOUR_MS, 12 * HOUR_MS))
    s.process(art("f1", "g1", "https://a.com/1"))
    s.advance(T0 + 90 * HOUR_MS)  # the dedup window is long gone, the story layer may still know it
    assert s.process(art("f1", "g1", "https://a.com/1", t=T0 + 91 * HOUR_MS)) is None  # a re-poll


def test_resighting_keeps_state_alive() -> None:
    s = DedupShard(72 * HOUR_MS)
    s.process(art("f1", "g1", "https://a.com/1"))
    s.process(art("f1", "g1", "https://a.com/1", t=T0 + 60 * HOUR_MS))  # still in the feed
    s.advance(T0 + 100 * HOUR_MS)
    assert len(s) == 1


def test_shard_key_is_stable_and_groups_guid_and_url_matches() -> None:
    a = art("wire", "https://wire.com/story", "https://wire.com/story")
    b = art("portal", "https://wire.com/story", "https://portal.com/copy")  # wire GUID kept
    c = art("other", "own-guid", "https://www.wire.com/story")
    keys = {dedup_shard_key(x, 64) for x in (a, b, c)}
    assert len(keys) == 1
    assert dedup_shard_key(replace(a), 64) == dedup_shard_key(a, 64)


def test_edited_syndicated_copy_is_a_duplicate_not_a_revision() -> None:
    s = DedupShard(72 * HOUR_MS)
    orig = art("wire", "g1", "https://wire.com/1", title="Quake 7.1", body="magnitude 7.1", publisher="Wire")
    s.process(orig)
    info = s.process(art("portal", "g1", "https://portal.com/1", title="Quake 7.1", body="magnitude 7.1 (Portal)",
                         publisher="Portal"))
    assert info.disposition == "exact_duplicate" and info.layer == "guid" and "body" in info.changed
    assert info.duplicate_of == orig.article_id
    # the original publisher's own update is still a revision
    assert s.process(art("wire", "g1", "https://wire.com/1", title="Quake 7.3", body="magnitude 7.3",
                         publisher="Wire")).disposition == "revision"


def _refetch(a: Article, fetched_ms: int) -> Article:
    return replace(a, fetched_ms=fetched_ms, fetched_at=ms_to_iso(fetched_ms))


def test_unchanged_item_reserved_72_to_84h_later_is_not_a_new_article() -> None:
    """Dedup forgot the item on fetch time while the story layer (publication
    time, 72 h + a 12 h slab) still knew it, so the re-served copy became a fake revision with
    the original's key. Dedup now keeps it until the story layer has let it go."""
    from newsflow.dedup.story_assigner import StoryAssigner
    from newsflow.dedup.story_features import featurize_batch

    s = DedupShard(72 * HOUR_MS)
    stories = StoryAssigner()
    orig = art("f1", "g1", "https://a.com/1", title="Quake hits northern Chile coast", t=T0)
    assert s.process(orig).disposition == "unique"
    stories.assign(featurize_batch([orig])[0])
    later = T0 + 78 * HOUR_MS
    # the feed moved on: other items kept the clocks going
    for i in range(1, 79):
        other = art("f1", f"o{i}", f"https://a.com/o{i}", title=f"Unrelated item number {i}", t=T0 + i * HOUR_MS)
        s.process(other)
        s.advance(T0 + i * HOUR_MS)
        stories.assign(featurize_batch([other])[0])
    info = s.process(_refetch(orig, later))
    # before the fix: 'unique' here, and the story layer then called it a revision of itself
    assert info is None  # an unchanged re-poll of a known item: counted, not emitted
    assert s.counters["repoll_unchanged"] == 1


def test_dedup_state_still_expires_after_the_story_horizon() -> None:
    s = DedupShard(72 * HOUR_MS)
    a = art("f1", "g1", "https://a.com/1", t=T0)
    s.process(a)
    s.advance(T0 + 100 * HOUR_MS)  # 72 h + two 12 h slabs after publication, and a sweep
    assert len(s) == 0 and s.by_url == {}
    assert s.process(_refetch(a, T0 + 100 * HOUR_MS)).disposition == "unique"


def test_entries_keep_fingerprints_and_resume_from_snapshots_that_kept_the_values() -> None:
    """An entry keeps an 8-byte fingerprint of each compared field (not the title, URL, body
    hash, ...); a snapshot of before, which kept the values, resumes into the same decisions."""
    import pickle

    from newsflow.dedup.exact import COMPARED, Cluster, GuidEntry

    a = replace(art("f1", "g1", "https://a.com/1", title="Old title", body="first body"), author="A. Writer",
                categories=("world",))
    s = DedupShard(72 * HOUR_MS)
    s.process(a)
    e = s.by_guid[state_key("g1")]
    assert len(e.fps) == 8 * len(COMPARED) and not hasattr(e, "title")
    # the layout of before: the values themselves, and a cluster with its stored version's fields
    c_old = Cluster.__new__(Cluster)
    c_old.__setstate__((None, {"root_id": e.cluster.root_id, "title": a.title, "url": a.url, "publisher": "f1",
                               "feed_id": "f1", "tier": "T2", "published_ms": T0, "first_ms": T0, "last_ms": T0,
                               "word_count": 2, "sightings": list(e.cluster.sightings), "revisions": 0}))
    old = GuidEntry.__new__(GuidEntry)
    old.__setstate__((None, {"article_id": e.article_id, "publisher": "f1", "content_hash": e.content_hash,
                             "known_hashes": e.known_hashes, "title": a.title, "body_hash": stable_id(a.body_text),
                             "url": a.canonical_url, "published_at": a.published_at, "author": a.author,
                             "categories": a.categories, "media": (), "feeds": {"f1"}, "cluster": c_old,
                             "revision_no": 0, "last_ms": T0, "copies": {}, "published_ms": T0}))
    assert old.fps == e.fps
    resumed = pickle.loads(pickle.dumps(s))
    resumed.by_guid[state_key("g1")] = old
    rev = replace(a, title="New title", body_text="second body", content_hash="h2", fetched_ms=T0 + HOUR_MS,
                  fetched_at=ms_to_iso(T0 + HOUR_MS))
    got, want = resumed.process(rev), s.process(rev)
    assert got == want and want.disposition == "revision" and want.changed == ("title", "body")


def test_shard_keys_guids_and_urls_by_digest_and_resumes_string_keyed_snapshots() -> None:
    """The shard keeps 16-byte digests of GUIDs and canonical URLs, not the strings; a snapshot
    of before (string keys) resumes into the same decisions."""
    import pickle

    url = "https://www.example.com/news/2014/03/11/a-rather-long-article-slug-as-real-feeds-have.html"
    a = replace(art("f1", "https://www.example.com/?p=123456", url), url=url + "?utm_source=rss&utm_medium=feed")
    s = DedupShard(72 * HOUR_MS)
    assert s.process(a).disposition == "unique"
    assert set(s.by_guid) == {state_key(a.guid)} and set(s.by_url) == {state_key(a.canonical_url)}
    assert all(isinstance(k, bytes) and len(k) == 16 for k in [*s.by_guid, *s.by_url])
    legacy = DedupShard.__new__(DedupShard)
    slots = {k: getattr(s, k) for k in DedupShard.__slots__}
    slots["by_guid"] = {a.guid: s.by_guid[state_key(a.guid)]}
    slots["by_url"] = {a.canonical_url: s.by_url[state_key(a.canonical_url)]}
    now = {k: getattr(s, k) for k in DedupShard.__slots__}
    assert len(pickle.dumps(now)) < len(pickle.dumps(slots)) - 80
    legacy.__setstate__((None, slots))
    assert set(legacy.by_guid) == set(s.by_guid) and set(legacy.by_url) == set(s.by_url)
    resumed = pickle.loads(pickle.dumps(legacy))
    copy_other_guid = art("f2", "other-guid", url, t=T0 + HOUR_MS)
    refetch = _refetch(a, T0 + 2 * HOUR_MS)
    assert [resumed.process(x) for x in (copy_other_guid, refetch)] == [s.process(x) for x in (copy_other_guid, refetch)]


def test_shard_entries_pickle_as_columns_sharing_their_clusters() -> None:
    """Recovery pickles every shard each epoch: its GUID entries go as columns (one list per
    field), its clusters as field tuples (``fast_pickle``); an entry and the URL table still
    share one cluster after a round trip, a snapshot of before (entries as objects) loads, and
    the resumed shards decide alike."""
    import pickle

    from newsflow.dedup.exact import Cluster, GuidEntry

    s = DedupShard(72 * HOUR_MS)
    for i in range(20):
        s.process(art(f"f{i % 3}", f"g{i}", f"https://a.com/{i % 12}", title=f"T{i}", body=f"body {i}",
                      t=T0 + i * 60_000))
    g = s.by_guid[state_key("g1")]
    assert GuidEntry.__reduce__(g)[0] is GuidEntry and Cluster.__reduce__(g.cluster)[0] is Cluster
    _, slots = s.__getstate__()  # the entries as columns, in the table's order
    assert "by_guid" not in slots and slots["by_guid_columns"][0] == list(s.by_guid)
    back = pickle.loads(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL))
    assert list(back.by_guid) == list(s.by_guid) and list(back.by_url) == list(s.by_url)
    legacy = DedupShard.__new__(DedupShard)  # a snapshot of before: the entries as objects
    legacy.__setstate__(pickle.loads(pickle.dumps((None, {k: getattr(s, k) for k in DedupShard.__slots__}))))
    assert legacy.by_guid == s.by_guid
    for k, e in s.by_guid.items():
        b = back.by_guid[k]
        assert b == e
        url_keys = [u for u, c in s.by_url.items() if c is e.cluster]
        assert all(back.by_url[u] is b.cluster for u in url_keys)
    later = [art("f9", "g1", "https://a.com/1", title="T1", body="body 1", t=T0 + HOUR_MS),
             art("f1", "g5", "https://a.com/5", title="T5 new", body="body 5 edited", t=T0 + HOUR_MS),
             art("f2", "g99", "https://a.com/3", t=T0 + HOUR_MS)]
    want = [s.process(a) for a in later]
    assert [back.process(a) for a in later] == want and [legacy.process(a) for a in later] == want
