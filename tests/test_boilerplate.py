"""Feed boilerplate is not content: the real 24-feed replay's YouTube channels (GMA News, Fox
News, ABS-CBN News, CNN, 1News) put the channel's description under every video, and 127 of
136 content near-duplicates were distinct videos of one channel matched on that text (removed
from the digests as copies). Sentences that 3+ items of one feed document share are left out
of what story matching reads; a copy whose own text matches is still a near-duplicate."""

from __future__ import annotations

from dataclasses import replace

from newsflow.core.timeutil import iso_to_ms
from newsflow.dedup.story_assigner import StoryAssigner
from newsflow.dedup.story_config import StoryConfig
from newsflow.dedup.story_decision import decide
from newsflow.dedup.story_features import featurize_batch
from newsflow.feeds.normalize import DEFAULT_NORMALIZE_CONFIG, RepollMemory, normalize_payload
from newsflow.model.records import RawPayload
from newsflow.text.boilerplate import shared_sentences, without_sentences

CFG = StoryConfig()
FETCH = iso_to_ms("2020-05-06T12:00:00Z")
BLURB = ("24 Oras is GMA Network's flagship newscast, anchored by Mike Enriquez, Mel Tiangco and Vicky "
         "Morales. It airs on GMA-7 Mondays to Fridays at 6:30 PM (PHL Time) and on weekends at 5:30 PM. "
         "For more videos from 24 Oras, visit the show's page. Subscribe to our YouTube channel for "
         "updates and more news every day of the week.")
VIDEOS = [
    ("24 Oras: Prusisyon, dinumog ng mga deboto", "Daan-daang deboto ang dumalo sa prusisyon."),
    ("24 Oras: Pinay sa Amerika, gumawa ng sarili niyang face mask", "Isang Pinay ang gumawa ng face mask."),
    ("24 Oras: COVID-19 cases sa Pilipinas, umabot na sa 9223", "Umabot na sa 9223 ang kaso."),
    ("24 Oras: Mga OFW nagwelga", "Nagwelga ang mga OFW dahil sa kontribusyon."),
]


def _feed(videos: list[tuple[str, str]], blurb: str = BLURB) -> bytes:
    items = "".join(  # a video's id and time follow from its title (the same on every poll)
        f"<item><title>{t}</title><link>https://www.youtube.com/watch?v=id{len(t)}</link><guid>{t}</guid>"
        f"<pubDate>Wed, 06 May 2020 11:{len(t):02d}:00 GMT</pubDate><description>{lead} {blurb}</description></item>"
        for t, lead in videos)
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>GMA News</title>'
            f"<link>https://www.youtube.com/gmanews</link>{items}</channel></rss>").encode()


def test_shared_sentences_need_three_items_and_compare_without_case_or_punctuation() -> None:
    bodies = ["Storm hits coast. Subscribe now!", "Rates rise. Subscribe NOW.", "Votes counted. Subscribe now"]
    assert shared_sentences(bodies) == frozenset({"subscribe now"})
    assert shared_sentences(bodies[:2]) == frozenset()  # two items: a pair of copies, not a template
    assert shared_sentences(bodies, min_items=0) == frozenset()
    assert without_sentences(bodies[1], shared_sentences(bodies)) == "Rates rise."
    assert without_sentences("Nothing shared.", frozenset({"subscribe now"})) == "Nothing shared."


def test_videos_of_one_channel_are_not_near_duplicates_through_its_description() -> None:
    res = normalize_payload(RawPayload("gma", "https://www.youtube.com/feeds/gma", FETCH, 200, _feed(VIDEOS)))
    arts = res.articles
    assert len(arts) == 4 and all(BLURB.split(".")[0] in a.body_text for a in arts)  # the record keeps it
    assert all(a.story_text is not None and "flagship" not in a.story_text for a in arts)
    feats = featurize_batch(arts, CFG)
    for i, f in enumerate(feats):
        d = decide(f, feats[:i], CFG)
        assert d.disposition != "near_duplicate", (arts[i].title, d)
    sa = StoryAssigner(CFG)
    assert len({sa.assign(f).story_id for f in feats}) == 4  # four videos, four stories

    # without the rule (what the flow did): every video a content near-duplicate of the first
    off = replace(DEFAULT_NORMALIZE_CONFIG, boilerplate_min_items=0)
    raw = normalize_payload(RawPayload("gma", "https://www.youtube.com/feeds/gma", FETCH, 200, _feed(VIDEOS)), off)
    rfeats = featurize_batch(raw.articles, CFG)
    assert all(a.story_text is None for a in raw.articles)
    assert [decide(f, rfeats[:i], CFG).layer for i, f in enumerate(rfeats)][1:] == ["content"] * 3


def test_a_real_copy_still_matches_on_its_own_text() -> None:
    """The same video's text re-served by another feed (a syndicated copy) keeps its match."""
    story = ("Daan-daang deboto ang dumalo sa prusisyon sa kabila ng quarantine sa lungsod ngayong Linggo "
             "ng hapon. Nagbabala ang pulisya na huhulihin ang mga lalabag sa mga patakaran ng lockdown.")
    videos = [(t, story if i == 0 else lead) for i, (t, lead) in enumerate(VIDEOS)]
    gma = normalize_payload(RawPayload("gma", "https://www.youtube.com/feeds/gma", FETCH, 200, _feed(videos))).articles
    copy = normalize_payload(RawPayload("other", "https://ex.com/feed", FETCH, 200, _feed(
        [("Deboto dumagsa sa prusisyon", story)]))).articles[0]
    f_gma = featurize_batch(gma, CFG)
    f_copy = featurize_batch([copy], CFG)[0]
    d = decide(f_copy, f_gma, CFG)
    assert (d.disposition, d.layer, d.matched_ref) == ("near_duplicate", "content", gma[0].article_id)


def test_the_repoll_memory_gives_the_same_articles() -> None:
    mem = RepollMemory()
    first = normalize_payload(RawPayload("gma", "https://www.youtube.com/feeds/gma", FETCH, 200, _feed(VIDEOS)), memory=mem)
    # the next poll: one new video on top, the rest re-served unchanged (re-stamped from memory)
    more = [("24 Oras: Bagong video", "Isang bagong balita ngayong araw."), *VIDEOS]
    again = normalize_payload(RawPayload("gma", "https://www.youtube.com/feeds/gma", FETCH + 60_000, 200, _feed(more)),
                              memory=mem)
    fresh = normalize_payload(RawPayload("gma", "https://www.youtube.com/feeds/gma", FETCH + 60_000, 200, _feed(more)))
    assert mem.item_hits >= 1
    assert again.articles == fresh.articles
    assert [a.story_text for a in first.articles] == [a.story_text for a in again.articles[1:]]


def test_digest_entries_read_the_body_without_the_boilerplate() -> None:
    """The digests cluster and summarize what a video is about, not its channel's description:
    on the real replay ten Fox News videos were one digest item ("9 more from Fox News") through
    their shared description, and a 24 Oras blurb was a Top Story's summary."""
    from newsflow.config import Settings
    from newsflow.core.timeutil import ms_to_iso
    from newsflow.digest.entries import body_text
    from newsflow.flows.digest_windows import digest_inputs
    from newsflow.model.messages import ScoredArticle

    arts = normalize_payload(RawPayload("gma", "https://www.youtube.com/feeds/gma", FETCH, 200, _feed(VIDEOS))).articles
    recs = [{"article_id": a.article_id, "key": a.article_id, "title": a.title, "body_text": a.body_text,
             "fetched_at": ms_to_iso(FETCH), "published_at": a.published_at, "story_id": "s1",
             "publisher": a.publisher, "feed_id": a.feed_id} for a in arts]
    out = digest_inputs(Settings())([("st00", ScoredArticle(r, story_text=a.story_text))
                                    for r, a in zip(recs, arts, strict=True)])
    assert len(out) == len(arts)  # one digest message per article
    for (_, msg), a in zip(out, arts, strict=True):
        assert isinstance(msg.message, ScoredArticle)
        kept = body_text(msg.message.entry)
        assert "flagship" not in kept and kept.split()[:3] == (a.story_text or "").split()[:3]
    plain = digest_inputs(Settings())([("st00", ScoredArticle(recs[0]))])[0][1].message.entry
    assert "flagship" in body_text(plain)  # a record without story_text: its own body


FOX_TAIL = ("Subscribe to Fox News! https://bit.ly/2vBUvAS Watch more Fox News Video: http://video.foxnews.com "
            "Watch Fox News Channel Live: http://www.foxnewsgo.com/ FOX News Channel (FNC) is a 24-hour "
            "all-encompassing news service delivering breaking news as well as political and business news.")


def test_a_channel_template_without_full_stops_is_found_line_by_line() -> None:
    """The real Fox News channel feed: each description ends "Read more about it here:
    https://fxn.ws/…" and then the channel's lines, flattened without full stops. Split as
    sentences only, the item's own link and the template were one run, different in every item:
    nothing was shared, and a podcast's 511 words of channel text made it the deepest article
    of the day (depth 90) and joined it to another story."""
    videos = [("Senate questions Judge Justin Walker", "Judge Justin Walker will appear before the Senate. "
               "Read more about Judge Justin Walker here: https://fxn.ws/3dq2l1t"),
              ("US denies coup attempt", "Gen. Jack Keane explains the detention of two soldiers. "
               "Read more here: https://fxn.ws/2xyz"),
              ("House GOP accuse Schiff", "Republicans accuse Adam Schiff of blocking transcripts. "
               "Read more: https://fxn.ws/3abc")]
    arts = normalize_payload(RawPayload("fox", "https://www.youtube.com/feeds/fox", FETCH, 200,
                                        _feed([(t, f"{lead} {FOX_TAIL}") for t, lead in videos], ""))).articles
    assert [a.story_text for a in arts] == [lead.split(" Read more")[0] for _, lead in videos]


def test_a_written_out_link_is_not_the_story_even_in_two_items() -> None:
    """1News shows share "Join the 6pm team … Get more at: https://www.tvnz.co.nz/one-news" in
    two items of a document (under the three that make a template): the two items matched as
    one story on it. A sentence with a web address in it is a pointer, not what happened."""
    bodies = ["Dave Letele helps his community. Join the 6pm team Daily at 6pm Get more at: https://www.tvnz.co.nz/one-news",
              "Economist Rodney Jones provided key modelling. Join the 6pm team Daily at 6pm Get more at: https://www.tvnz.co.nz/one-news"]
    arts = normalize_payload(RawPayload("1news", "https://www.youtube.com/feeds/1news", FETCH, 200,
                                        _feed([("Former Auckland boxer helps", bodies[0]),
                                               ("Level 2.5 should be considered", bodies[1])], ""))).articles
    assert [a.story_text for a in arts] == ["Dave Letele helps his community.", "Economist Rodney Jones provided key modelling."]
    assert all("tvnz" in a.body_text for a in arts)  # the record keeps its text
    plain = normalize_payload(RawPayload("x", "https://ex.com/feed", FETCH, 200, _feed([("A", "No link here. None.")], "")))
    assert plain.articles[0].story_text is None
