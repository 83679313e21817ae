"""Digest assembly (docs/rules.md#topics-and-digests) and the event-time schedule."""

from __future__ import annotations

import random
from datetime import UTC, datetime, time

import numpy as np
import orjson
import pytest
import scipy.sparse as sp
from sklearn.cluster import DBSCAN

from newsflow.clustering.window import (
    blocked_radius_graph,
    dbscan_labels,
    dbscan_precomputed,
    linked_labels,
    radius_graph,
    tfidf_matrix,
)
from newsflow.core.hashing import stable_id
from newsflow.core.timeutil import HOUR_MS, iso_to_ms, ms_to_iso
from newsflow.digest.assemble import assemble_digest, draft_digest
from newsflow.digest.config import DigestConfig
from newsflow.digest.health import FeedHealthAccumulator
from newsflow.digest.labels import extractive_summary
from newsflow.digest.schedule import (
    ALSO_MENTIONED,
    MIDDAY,
    MORNING,
    NOTEWORTHY,
    TOP_STORIES,
    WEEKLY,
    DigestSchedule,
    DigestType,
    DigestWindow,
    SectionLimits,
)
from newsflow.digest.trends import apply_trends, digest_memory, next_memory
from newsflow.text.entities import capitalized_phrases
from newsflow.text.titles import short_headline
from newsflow.text.tokenize import TextFeatures
from newsflow.wire.contracts import validate

START = iso_to_ms("2026-03-09T07:00:00Z")
END = START + 24 * HOUR_MS
WIN = DigestWindow("morning_brief", START, END)

TOPICS = {
    "apple": (
        "Apple unveils iPhone with faster chip",
        "Apple presented the new iPhone in Cupertino on Tuesday. The iPhone gets a faster chip, "
        "a brighter display and a better camera, Apple said. Analysts at Morgan Stanley expect "
        "strong iPhone sales in the holiday quarter. The iPhone will cost 999 dollars and ships "
        "next week in forty countries. Apple shares rose two percent after the iPhone event. "
        "Tim Cook called the iPhone the best Apple has ever made. Rivals Samsung and Google "
        "are expected to answer with their own phones later this year.",
    ),
    "ukraine": (
        "Ukraine and Russia hold ceasefire talks in Geneva",
        "Negotiators from Ukraine and Russia met in Geneva for ceasefire talks on Monday. The "
        "Geneva talks focus on prisoner exchanges and a ceasefire line in eastern Ukraine, "
        "officials said. Russia wants sanctions relief while Ukraine demands a full withdrawal. "
        "European diplomats described the Geneva ceasefire talks as difficult but serious. A "
        "second round of talks between Ukraine and Russia is planned for next month in Geneva.",
    ),
    "ebola": (
        "Ebola outbreak spreads in Guinea, health workers warn",
        "The Ebola outbreak in Guinea has spread to three more districts, health workers warned. "
        "Doctors Without Borders said the Ebola virus outbreak is unprecedented in Guinea. The "
        "World Health Organization sent experts to Guinea to trace contacts of Ebola patients. "
        "Neighbouring Liberia and Sierra Leone closed border crossings with Guinea. Health "
        "workers in Guinea need protective equipment to stop the Ebola outbreak.",
    ),
    "fed": (
        "Federal Reserve keeps interest rates unchanged",
        "The Federal Reserve kept interest rates unchanged on Wednesday. Fed chair Janet Yellen "
        "said the Federal Reserve will watch inflation and jobs data before moving interest "
        "rates. Bond markets rallied after the Federal Reserve decision on interest rates. "
        "Economists expect the Federal Reserve to raise interest rates next year if inflation "
        "stays near two percent.",
    ),
}
PUBS = [("Reuters", "T1"), ("BBC", "T2"), ("TechCrunch", "T3"), ("Blog", "T4"), ("Rumours", "T5")]


def rec(
    topic: str,
    i: int,
    score: float,
    *,
    pub: int = 0,
    hours: float = 1.0,
    disposition: str = "unique",
    story: str | None = None,
    variant: str = "",
    url: bool = True,
    **kw,
) -> dict:
    title, body = TOPICS[topic]
    publisher, tier = PUBS[pub % len(PUBS)]
    aid = stable_id(topic, str(i), variant)
    r = {
        "schema": "articles",
        "schema_version": 1,
        "key": aid,
        "article_id": aid,
        "seq": f"0:{i}:0",
        "feed_id": f"{publisher.lower()}-feed",
        "publisher": publisher,
        "tier": tier,
        "guid": aid,
        "url": f"https://{publisher.lower()}.example/{topic}/{i}" if url else None,
        "title": f"{title} {variant}".strip(),
        "published_at": ms_to_iso(START + int(hours * HOUR_MS)),
        "date_uncertain": False,
        "fetched_at": ms_to_iso(START + int(hours * HOUR_MS) + 60_000),
        "body_text": f"{body} Report number {i} {variant}.",
        "body_html": "",
        "word_count": 120,
        "partial_content": False,
        "content_hash": aid,
        "disposition": disposition,
        "duplicate_of": None,
        "seen_in": [],
        "story_id": story if story is not None else f"{topic}-story",
        "story_publishers": [publisher],
        "story_tiers": [tier],
        "importance": score,
    }
    r.update(kw)
    return r


def standard_records() -> list[dict]:
    recs = []
    for i in range(4):  # top story cluster (>= 70)
        recs.append(rec("apple", i, 80 - i, pub=i))
    for i in range(3):  # noteworthy (40-69)
        recs.append(rec("ukraine", i, 55 - i, pub=i + 1))
    recs.append(rec("ebola", 0, 20, pub=3))  # also mentioned (15-39)
    recs.append(rec("fed", 0, 10, pub=2))  # below 15: not selected
    recs.append(rec("apple", 99, 0, disposition="exact_duplicate"))
    recs.append(rec("apple", 98, 0, disposition="near_duplicate"))
    return recs


def items(d: dict, name: str) -> list[dict]:
    return next(s["items"] for s in d["sections"] if s["name"] == name)


# ---- assembly ---------------------------------------------------------------------------
def test_text_memos_never_change_a_digest():
    """Labels, key stems, entities and summaries are memoized across windows (keyed by the
    texts they read): a warm memo gives the bytes of a cold one, also when the same titles
    come back with other bodies (the memo must not answer from the first bodies)."""
    from newsflow.digest.labels import clear_memos

    def bodies(tag: str) -> list[dict]:  # the same titles; bodies as given or sentences reversed
        out = []
        for r in standard_records():
            sents = [x.strip() for x in r["body_text"].split(". ") if x.strip()]
            body = ". ".join(sents[::-1] if tag == "reversed" else sents)
            out.append({**r, "body_text": body})
        return out

    cold = {}
    for tag in ("as given", "reversed"):
        clear_memos()
        cold[tag] = orjson.dumps(assemble_digest(bodies(tag), WIN))
    assert cold["as given"] != cold["reversed"]  # the bodies do reach the digest (summaries)
    clear_memos()
    for tag in ("as given", "reversed", "as given"):  # warm: the other bodies already memoized
        assert orjson.dumps(assemble_digest(bodies(tag), WIN)) == cold[tag]


def test_sections_thresholds_and_header():
    d = assemble_digest(standard_records(), WIN)
    validate("digests", d)
    assert d["digest_id"] == "morning_brief:2026-03-09T07:00:00Z"
    assert d["generated_at"] == d["window_end"] == "2026-03-10T07:00:00Z"
    assert d["article_count"] == 9  # unique articles in the window (duplicates excluded)
    assert d["duplicates_removed"] == 2
    assert d["selected_count"] == 8
    assert [s["name"] for s in d["sections"]] == [TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED]
    top, note, also = (items(d, n) for n in (TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED))
    assert len(top) == 1 and len(note) == 1 and len(also) == 1
    assert top[0]["score"] == 80 and note[0]["score"] == 55 and also[0]["score"] == 20
    assert top[0]["related_count"] == 3  # its 2 duplicate copies are from the lead's own publisher
    assert top[0]["related_sources"] == ["BBC", "TechCrunch", "Blog"]  # by tier, then name
    assert note[0]["related_count"] == 2
    lead = top[0]["lead"]
    assert set(lead) >= {"article_id", "title", "url", "publisher", "tier", "published_at"}
    assert lead["url"].startswith("https://")
    fh = d["feed_health"]
    assert fh["new_articles"] == 9 and fh["duplicates_removed"] == 2


def test_label_entity_and_terms():
    d = assemble_digest(standard_records(), WIN)
    it = items(d, TOP_STORIES)[0]
    assert it["entity"] == "Apple"
    assert len(it["terms"]) == 3 and "iPhone" in it["terms"]
    # the headline names the entity: the label is the lead's headline, words a reader knows
    assert it["label"] == "Apple unveils iPhone with faster chip" == it["lead"]["title"]


def test_summary_50_75_words_extractive():
    d = assemble_digest(standard_records(), WIN)
    for it in items(d, TOP_STORIES) + items(d, NOTEWORTHY):
        n = len(it["summary"].replace(" …", "").split())
        assert 50 <= n <= 75, (n, it["summary"])
        # extractive: every sentence comes from the lead's body
        body = TOPICS["apple"][1] + TOPICS["ukraine"][1]
        first = it["summary"].split(". ")[0]
        assert first in body
    # midday update: 30-50 words (docs/rules.md#digest-types-and-windows)
    r = rec("apple", 1, 80)
    s = extractive_summary(r["title"], r["body_text"], (), MIDDAY.summary_words)
    assert 30 <= len(s.replace(" …", "").split()) <= 50


def test_limits_per_type():
    recs = []
    # 40 distinct standalone topics per band: vocabulary made unique per article
    rng = random.Random(4)
    vocab = [f"w{j}x" for j in range(4000)]
    for band, base in (("t", 90), ("n", 50), ("a", 20)):
        for i in range(40):
            words = " ".join(rng.sample(vocab, 40))
            r = rec("apple", i, base - i * 0.1, variant=f"{band}{i}", story=f"{band}{i}")
            r["title"] = f"Story {band} {i} {words[:60]}"
            r["body_text"] = words
            recs.append(r)
    for dtype, limits in ((MORNING, (15, 10, 10)), (MIDDAY, (10, 5, 5)), (WEEKLY, (30, 15, 15))):
        w = DigestWindow(dtype.name, START, END)
        d = assemble_digest(recs, w)
        validate("digests", d)
        got = tuple(len(items(d, n)) for n in (TOP_STORIES, NOTEWORTHY, ALSO_MENTIONED))
        assert got == limits, dtype.name
        assert any(c["check"] == "limits" and not c["ok"] for c in d["self_checks"])
        # trimmed from the bottom: the kept items are the best ones
        assert items(d, TOP_STORIES)[0]["score"] == 90


def test_clusters_ordered_by_best_score():
    recs = [rec("apple", 0, 75), rec("apple", 1, 72), rec("ebola", 0, 95), rec("ebola", 1, 71)]
    recs += [rec("fed", 0, 88)]
    d = assemble_digest(recs, WIN)
    assert [it["score"] for it in items(d, TOP_STORIES)] == [95, 88, 75]


def test_lead_closest_to_centroid_then_importance_then_tier():
    # identical texts: equal similarity -> higher importance leads
    recs = [rec("fed", 0, 60, pub=2, story="s"), rec("fed", 1, 65, pub=1, story="s")]
    for r in recs:
        r["body_text"] = TOPICS["fed"][1]
    d = assemble_digest(recs, WIN)
    assert items(d, NOTEWORTHY)[0]["lead"]["publisher"] == "BBC"
    # equal importance -> higher tier (T1) leads
    recs = [rec("fed", 0, 60, pub=2, story="s"), rec("fed", 1, 60, pub=0, story="s")]
    for r in recs:
        r["body_text"] = TOPICS["fed"][1]
    d = assemble_digest(recs, WIN)
    assert items(d, NOTEWORTHY)[0]["lead"]["tier"] == "T1"
    # an off-topic article in the cluster does not lead, even with the top score
    recs = [rec("ebola", i, 50, story="e") for i in range(3)]
    odd = rec("ebola", 9, 58, story="e")
    odd["body_text"] = TOPICS["ebola"][1][:200] + " " + TOPICS["fed"][1]
    d = assemble_digest([*recs, odd], WIN)
    it = items(d, NOTEWORTHY)[0]
    assert it["lead"]["article_id"] != odd["article_id"]
    assert it["score"] == 58  # the cluster's best score still ranks it


def test_dbscan_groups_similar_and_leaves_noise_standalone():
    recs = [rec("apple", i, 80, story=f"a{i}") for i in range(3)]  # different stories
    recs += [rec("fed", 0, 75, story="f0")]
    d = assemble_digest(recs, WIN)
    top = items(d, TOP_STORIES)
    assert len(top) == 2
    assert sorted(it["size"] for it in top) == [1, 3]


def test_ward_fixed_number_of_topics():
    recs = [rec(t, i, 80, story=f"{t}{i}") for t in TOPICS for i in range(3)]
    d = assemble_digest(recs, WIN, config=DigestConfig(n_topics=4))
    assert d["clustering"] == "ward" and d["cluster_count"] == 4
    assert sorted(it["size"] for it in items(d, TOP_STORIES)) == [3, 3, 3, 3]
    d2 = assemble_digest(recs, WIN, config=DigestConfig(n_topics=2))
    assert d2["cluster_count"] == 2


def test_trends_against_previous_window():
    prev_recs = [rec("apple", i, 80, story="apple-s") for i in range(2)]
    prev_recs += [rec("ukraine", i, 60, story="ukr-s") for i in range(6)]
    prev_recs += [rec("fed", i, 60, story="fed-s") for i in range(3)]
    prev_win = DigestWindow("morning_brief", START - 24 * HOUR_MS, START)
    for r in prev_recs:
        r["published_at"] = ms_to_iso(iso_to_ms(r["published_at"]) - 24 * HOUR_MS)
    prev = assemble_digest(prev_recs, prev_win)
    cur = [rec("apple", 10 + i, 80, story="apple-s") for i in range(4)]  # 2 -> 4: TRENDING
    cur += [rec("ukraine", 10 + i, 60, story="ukr-s") for i in range(2)]  # 6 -> 2: FADING
    cur += [rec("ebola", i, 75, story="ebola-s") for i in range(3)]  # new, 3: EMERGING
    cur += [rec("fed", 10 + i, 60, story="fed-s") for i in range(3)]  # 3 -> 3: none
    d = assemble_digest(cur, WIN, previous=digest_memory(prev))
    validate("digests", d)
    by = {it["lead"]["title"].split()[0]: it["trend"] for s in d["sections"] for it in s["items"]}
    assert by == {"Apple": "TRENDING", "Ukraine": "FADING", "Ebola": "EMERGING", "Federal": None}
    fh = d["feed_health"]
    assert len(fh["emerging_topics"]) == 1 and "Ebola" in fh["emerging_topics"][0]
    assert any("Ukraine" in x for x in fh["declining_topics"])
    # without a previous digest: no trend flags at all
    d0 = assemble_digest(cur, WIN)
    assert all(it["trend"] is None for s in d0["sections"] for it in s["items"])


def test_a_draft_assembled_before_its_previous_window_gets_the_same_trends():
    """A window's digest without trends (draft_digest) does not wait for the previous window:
    drafted first, the previous window assembled after it, then apply_trends, it is the
    digest assemble_digest makes with that previous window, byte for byte (flags, emerging
    and declining topics, checks); with no previous window, the one without trend flags."""
    prev_recs = [rec("apple", i, 80, story="apple-s") for i in range(2)]
    prev_recs += [rec("ukraine", i, 60, story="ukr-s") for i in range(6)]
    for r in prev_recs:
        r["published_at"] = ms_to_iso(iso_to_ms(r["published_at"]) - 24 * HOUR_MS)
    cur = [rec("apple", 10 + i, 80, story="apple-s") for i in range(4)]
    cur += [rec("ukraine", 10 + i, 60, story="ukr-s") for i in range(2)]
    cur += [rec("ebola", i, 75, story="ebola-s") for i in range(3)]
    drafts = [draft_digest(cur, WIN) for _ in range(2)]
    memory = digest_memory(assemble_digest(prev_recs, DigestWindow("morning_brief", START - 24 * HOUR_MS, START)))
    want = assemble_digest(cur, WIN, previous=memory)
    assert {it["trend"] for s in want["sections"] for it in s["items"]} == {"TRENDING", "FADING", "EMERGING"}
    assert want["feed_health"]["emerging_topics"] and want["feed_health"]["declining_topics"]
    assert orjson.dumps(apply_trends(drafts[0], memory)) == orjson.dumps(want)
    assert orjson.dumps(apply_trends(drafts[1], None)) == orjson.dumps(assemble_digest(cur, WIN))
    gap = apply_trends(draft_digest([], WIN, feed_health=[]), memory)  # a gap: no decline, a check
    assert orjson.dumps(gap) == orjson.dumps(assemble_digest([], WIN, previous=memory, feed_health=[]))
    assert gap["self_checks"][-1]["action"].startswith("no poll in this window")


def test_a_window_without_polls_is_a_gap_not_a_decline():
    """Real 24-feed replay: the archive was not polled from 05-04 10:00 to 05-05 20:00, and the
    empty evening recap of 05-04 listed ten "declining topics"; the next recap, compared with
    that empty window, flagged nearly everything EMERGING. A window with no poll and no article
    reports no decline, and the window before it stays the one the next compares with."""
    prev_recs = [rec("ukraine", i, 60, story="ukr-s") for i in range(6)]
    for r in prev_recs:
        r["published_at"] = ms_to_iso(iso_to_ms(r["published_at"]) - 24 * HOUR_MS)
    prev = assemble_digest(prev_recs, DigestWindow("morning_brief", START - 24 * HOUR_MS, START))
    memory = digest_memory(prev)
    gap = assemble_digest([], WIN, previous=memory, feed_health=[])
    validate("digests", gap)
    assert gap["feed_health"]["polls"] == 0 and gap["feed_health"]["declining_topics"] == []
    assert next_memory(memory, gap) is memory
    quiet = {"feed_id": "f", "at": ms_to_iso(START + HOUR_MS), "status": "not_modified", "success": True}
    polled = assemble_digest([], WIN, previous=memory, feed_health=[quiet])  # polled, nothing new: a decline
    assert polled["feed_health"]["polls"] == 1 and any("Ukraine" in x for x in polled["feed_health"]["declining_topics"])
    assert next_memory(memory, polled) == digest_memory(polled)


def test_trend_matching_by_terms_without_story_ids():
    prev_recs = [rec("ebola", i, 60, story=f"p{i}", hours=-2) for i in range(2)]
    prev = assemble_digest(prev_recs, DigestWindow("morning_brief", START - 86_400_000, START))
    assert prev["topic_index"][0]["size"] == 2
    cur = [rec("ebola", 10 + i, 60, story=f"c{i}") for i in range(4)]
    d = assemble_digest(cur, WIN, previous=prev)
    assert items(d, NOTEWORTHY)[0]["trend"] == "TRENDING"


def test_deterministic_any_order_and_reemits():
    recs = standard_records() + [rec("ebola", i, 45 + i, pub=i) for i in range(1, 5)]
    a = orjson.dumps(assemble_digest(recs, WIN))
    shuffled = [*recs, dict(recs[0]), dict(recs[3])]  # at-least-once re-emits
    random.Random(7).shuffle(shuffled)
    b = orjson.dumps(assemble_digest(shuffled, WIN))
    assert a == b


def test_revisions_keep_latest():
    r0 = rec("apple", 0, 80)
    r1 = dict(r0, key=r0["article_id"] + "#r1", revision_no=1, disposition="revision")
    r1["title"] = "Apple unveils iPhone with faster chip (updated)"
    d = assemble_digest([r1, r0], WIN)
    assert d["article_count"] == 1
    assert items(d, TOP_STORIES)[0]["lead"]["title"].endswith("(updated)")


def test_window_membership_by_event_time():
    inside = rec("apple", 0, 80, hours=23.9)
    outside = rec("apple", 1, 80, hours=24.0)  # == window end: next window
    before = rec("apple", 2, 80, hours=-0.1)
    d = assemble_digest([inside, outside, before], WIN)
    assert d["article_count"] == 1
    d2 = assemble_digest([inside, outside], WIN, config=DigestConfig(time_basis="fetched"))
    assert d2["article_count"] == 1


def test_empty_window_is_valid():
    d = assemble_digest([], WIN)
    validate("digests", d)
    assert d["article_count"] == 0 and all(not s["items"] for s in d["sections"])


def test_self_check_t5_rerank_and_attribution():
    rumour = rec("ebola", 0, 90, pub=4, story="r")  # T5, no corroboration
    solid = rec("apple", 0, 85, pub=0, story="a")
    d = assemble_digest([rumour, solid], WIN)
    top = items(d, TOP_STORIES)
    assert [it["lead"]["tier"] for it in top] == ["T1", "T5"]
    assert any(c["check"] == "t5_top" and not c["ok"] for c in d["self_checks"])
    # corroborated T5 stays on top
    rumour2 = dict(rumour, story_tiers=["T5", "T1"])
    d = assemble_digest([rumour2, solid], WIN)
    assert items(d, TOP_STORIES)[0]["lead"]["tier"] == "T5"
    # a lead without URL is replaced by a cluster member with one
    a = rec("fed", 0, 60, url=False, story="f")
    b = rec("fed", 1, 50, story="f")
    for r in (a, b):
        r["body_text"] = TOPICS["fed"][1]
    d = assemble_digest([a, b], WIN)
    assert items(d, NOTEWORTHY)[0]["lead"]["url"] is not None
    check = next(c for c in d["self_checks"] if c["check"] == "attribution")
    assert check["ok"] and "re-ranked" in check["action"]


def test_feed_health_report():
    acc = FeedHealthAccumulator()
    base = {"schema": "feed-health", "schema_version": 1, "source": "poller"}
    for i, st in enumerate(["ok", "ok", "timeout", "ok", "not_modified"]):
        acc.add(dict(base, record_id=f"a{i}", feed_id="a", at=f"2026-03-09T0{i}:00:00Z", status=st))
    for i in range(3):
        acc.add(dict(base, record_id=f"b{i}", feed_id="b", at=f"2026-03-09T0{i}:00:00Z", status="http_error"))  # fmt: skip
    acc.add(dict(base, record_id="b0", feed_id="b", at="2026-03-09T00:00:00Z", status="http_error"))
    s = acc.summary()
    assert s["feeds_polled"] == 2 and s["polls"] == 8 and s["errors"] == 4
    assert s["successful"] == 4 and s["success_rate"] == 0.5
    assert s["unhealthy_feeds"] == ["b"]
    d = assemble_digest(standard_records(), WIN, feed_health=s)
    validate("digests", d)
    assert d["feed_health"]["unhealthy_feeds"] == ["b"]


# ---- clustering internals --------------------------------------------------------------
def _topic_docs(n: int, topics: int, extra: int, seed: int) -> list[TextFeatures]:
    """``n`` documents of ``topics`` topics (5 words each, x3) and ``extra`` random words."""
    rng = random.Random(seed)
    vocab = [f"t{j}" for j in range(5 * topics)]
    feats = []
    for i in range(n):
        k = i % topics
        words = vocab[k * 5 : k * 5 + 5] * 3 + rng.sample(vocab, extra)
        feats.append(TextFeatures.of("", " ".join(words)))
    return feats


def test_radius_graph_equals_sklearn_dbscan_cosine():
    X, _ = tfidf_matrix(_topic_docs(300, 12, 4, seed=3))
    ref = DBSCAN(eps=0.4, min_samples=2, metric="cosine").fit_predict(X)
    for G in (radius_graph(X, 0.4), blocked_radius_graph(X, 0.4, block_size=1000)):
        got = DBSCAN(eps=0.4, min_samples=2, metric="precomputed").fit_predict(G)
        assert (got == ref).all()
    # identical documents (distance 0) are neighbours too
    X2, _ = tfidf_matrix([TextFeatures.of("same words", "")] * 2)
    G = radius_graph(X2, 0.4)
    assert G.nnz == 2 and sp.issparse(G)


def test_dbscan_precomputed_equals_sklearn():
    """Our DBSCAN on a sparse distance graph gives scikit-learn's labels exactly: symmetric and
    asymmetric graphs, integer sample weights, several min_samples, points within eps of two
    clusters (border assignment), entries just above eps, stored diagonals."""
    rng = np.random.default_rng(11)
    for trial in range(60):
        n = int(rng.integers(1, 120))
        m = int(rng.integers(0, 4 * n))
        r = rng.integers(0, n, m)
        c = rng.integers(0, n, m)
        d = rng.choice([0.0, 1e-12, 0.1, 0.39, 0.4, 0.4 + 1e-10, 0.5, 0.9], m)
        if trial % 2 == 0:  # symmetric, as the radius graphs
            r, c, d = np.concatenate([r, c]), np.concatenate([c, r]), np.concatenate([d, d])
        G = sp.csr_matrix((d, (r, c)), shape=(n, n))
        G.sum_duplicates()
        G.data = np.minimum(G.data, 0.9)
        if trial % 3 == 0:  # no stored self distances, as the radius graphs
            G.setdiag(0.0)
            G.eliminate_zeros()
        w = rng.integers(1, 4, n).astype(np.float64) if trial % 4 < 2 else None
        for ms in (1, 2, 3, 5):
            ref = DBSCAN(eps=0.4, min_samples=ms, metric="precomputed").fit_predict(G, sample_weight=w)
            got = dbscan_precomputed(G, 0.4, ms, w)
            assert got.tolist() == ref.tolist(), (trial, ms)


def test_linked_labels_equal_sklearn_dbscan():
    """With min_samples <= 2 and weights >= 1 (the digest's), DBSCAN's clusters are the connected
    components holding a core: the labels from edges read in pieces, without the graph, are
    scikit-learn's on the graph (symmetric, no stored self distances, as the radius graphs;
    entries just above eps; pieces in any order, pairs given twice)."""
    rng = np.random.default_rng(12)
    for trial in range(60):
        n = int(rng.integers(1, 150))
        m = int(rng.integers(0, 3 * n))
        r, c = rng.integers(0, n, m), rng.integers(0, n, m)
        off = r != c
        r, c = r[off], c[off]
        d = rng.choice([1e-12, 0.1, 0.39, 0.4, 0.4 + 1e-10, 0.5], len(r))
        _, first = np.unique(np.minimum(r, c) * n + np.maximum(r, c), return_index=True)  # a pair once
        r, c, d = r[first], c[first], d[first]
        G = sp.csr_matrix((np.concatenate([d, d]), (np.concatenate([r, c]), np.concatenate([c, r]))), shape=(n, n))
        w = rng.integers(1, 4, n).astype(np.float64) if trial % 2 else np.ones(n)
        cut = sorted(rng.integers(0, len(r) + 1, 3).tolist())
        pieces = [(r[a:b], c[a:b], d[a:b]) for a, b in zip([0, *cut], [*cut, len(r)], strict=True)]
        pieces += [(c, r, d), *pieces[:1]]  # the other direction, and a piece again
        rng.shuffle(pieces)
        for ms in (1, 2):
            ref = DBSCAN(eps=0.4, min_samples=ms, metric="precomputed").fit_predict(G, sample_weight=w)
            assert linked_labels(pieces, n, 0.4, ms, w).tolist() == ref.tolist(), (trial, ms)


def test_dbscan_labels_without_the_graph_are_the_graphs():
    feats = _topic_docs(700, 16, 5, seed=4)
    feats += [TextFeatures.of("", "same template words here")] * 300  # near-copies: dense
    X, _ = tfidf_matrix(feats)
    w = np.array([1 + i % 3 for i in range(X.shape[0])], dtype=np.float64)
    for weights in (None, w):
        for exact_max, G in ((100_000, radius_graph(X, 0.4)), (400, blocked_radius_graph(X, 0.4, block_size=300))):
            ref = dbscan_precomputed(G, 0.4, 2, weights)
            got = dbscan_labels(X, 0.4, 2, sample_weight=weights, exact_max=exact_max, block_size=300)
            assert got.tolist() == ref.tolist()
            assert len(set(ref.tolist())) > 10


def test_tfidf_matches_sklearn_idf():
    from sklearn.feature_extraction.text import TfidfVectorizer

    docs = ["apple iphone chip", "apple pie recipe", "iphone sales chip chip"]
    X, _ = tfidf_matrix([TextFeatures.of("", d) for d in docs])
    ref = TfidfVectorizer(analyzer=lambda s: s.split()).fit_transform(
        ["appl iphon chip", "appl pie recip", "iphon sale chip chip"]
    )
    assert np.allclose(
        np.sort((X @ X.T).toarray().ravel()), np.sort((ref @ ref.T).toarray().ravel())
    )


def test_capitalized_phrases():
    assert capitalized_phrases("Talks between Barack Obama and Angela Merkel in Berlin") == [
        "Barack Obama",
        "Angela Merkel",
        "Berlin",
    ]
    assert "NSA" in capitalized_phrases("The NSA spied on allies")
    # a possessive ends a name: the real day's label "New Zealand Covid-19: New Zealand's
    # Covid-19 cases could have risen ..." came from one phrase glued across the "'s"
    assert capitalized_phrases("New Zealand's Covid-19 cases could have risen") == ["New Zealand", "Covid-19"]
    assert capitalized_phrases("Police say Kim Yo Jong’s rise is fast") == ["Kim Yo Jong"]  # (a lone initial word: skipped)


# ---- schedule ---------------------------------------------------------------------------
def ms(s: str) -> int:
    return iso_to_ms(s)


def test_schedule_daily_windows_local_time():
    sch = DigestSchedule(tz="Europe/Berlin")
    # 07:00 Berlin (CET, UTC+1) = 06:00Z
    got = sch.closing(ms("2026-01-10T05:00:00Z"), ms("2026-01-10T06:00:00Z"))
    assert [(w.digest_type, ms_to_iso(w.start_ms), ms_to_iso(w.end_ms)) for w in got] == [
        ("morning_brief", "2026-01-09T06:00:00Z", "2026-01-10T06:00:00Z"),
        ("rolling", "2026-01-10T05:00:00Z", "2026-01-10T06:00:00Z"),
    ]
    assert got[0].digest_id == "morning_brief:2026-01-09T06:00:00Z"
    # not yet: the end is exclusive of prev, inclusive of cur
    assert sch.closing(ms("2026-01-10T06:00:00Z"), ms("2026-01-10T06:30:00Z")) == []
    assert sch.closing(None, ms("2026-01-10T06:30:00Z")) == []


def test_schedule_dst_day_is_23_hours():
    sch = DigestSchedule(tz="Europe/Berlin", types=(MORNING,))
    got = sch.closing(ms("2026-03-29T00:00:00Z"), ms("2026-03-29T12:00:00Z"))
    assert len(got) == 1
    w = got[0]
    assert ms_to_iso(w.end_ms) == "2026-03-29T05:00:00Z"  # 07:00 CEST
    assert (w.end_ms - w.start_ms) == 23 * HOUR_MS


def test_quiet_stream_ticks_close_all_windows():
    """A watermark that jumps (replay, or ticks on a quiet stream) closes every window it
    passes, in order — the same set live and in replay."""
    sch = DigestSchedule(tz="UTC", types=(MORNING, MIDDAY, WEEKLY))
    a = ms("2026-03-02T00:00:00Z")  # a Monday
    b = ms("2026-03-09T00:00:00Z")
    jump = sch.closing(a, b)
    steps = []
    t = a
    while t < b:  # hourly ticks
        steps += sch.closing(t, t + HOUR_MS)
        t += HOUR_MS
    assert jump == steps
    assert [w.digest_type for w in jump].count("morning_brief") == 7
    assert [w.digest_type for w in jump].count("weekly_roundup") == 1
    wk = next(w for w in jump if w.digest_type == "weekly_roundup")
    assert datetime.fromtimestamp(wk.end_ms / 1000, tz=UTC).weekday() == 6
    assert wk.end_ms - wk.start_ms == 7 * 24 * HOUR_MS
    ends = [w.end_ms for w in jump]
    assert ends == sorted(ends)


def test_rolling_windows_and_membership():
    roll = DigestType("rolling", "Rolling", "rolling", SectionLimits(5, 5, 5), every_minutes=15)
    sliding = DigestType(
        "monitor", "Monitor", "rolling", SectionLimits(5, 5, 5), every_minutes=15, length_minutes=60
    )
    sch = DigestSchedule(types=(roll, sliding, MORNING))
    got = sch.closing(ms("2026-03-09T10:00:00Z"), ms("2026-03-09T10:45:00Z"))
    assert [ms_to_iso(w.end_ms) for w in got if w.digest_type == "rolling"] == [
        "2026-03-09T10:15:00Z",
        "2026-03-09T10:30:00Z",
        "2026-03-09T10:45:00Z",
    ]
    mon = [w for w in got if w.digest_type == "monitor"]
    assert all(w.end_ms - w.start_ms == HOUR_MS for w in mon)
    t = ms("2026-03-09T10:20:00Z")
    cont = sch.windows_containing(t)
    assert [w.digest_type for w in cont].count("monitor") == 4
    assert all(w.contains(t) for w in cont)
    morning = next(w for w in cont if w.digest_type == "morning_brief")
    assert ms_to_iso(morning.end_ms) == "2026-03-10T07:00:00Z"
    assert sch.next_close_ms(t) == ms("2026-03-09T10:30:00Z")


def test_custom_delivery_time_and_unknown_type():
    evening = DigestType("evening_recap", "Evening", "daily", SectionLimits(15, 10, 10), local_time=time(19, 30))  # fmt: skip
    sch = DigestSchedule(tz="America/New_York", types=(evening,))
    got = sch.closing(ms("2026-07-01T00:00:00Z"), ms("2026-07-02T00:00:00Z"))
    assert [ms_to_iso(w.end_ms) for w in got] == ["2026-07-01T23:30:00Z"]
    with pytest.raises(KeyError):
        sch.type("nope")


def _digest_bytes_in_subprocess(seed: str, shuffle: int) -> bytes:
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import random, sys, orjson\n"
        "from tests.test_digest import standard_records, rec, WIN\n"
        "from newsflow.digest.assemble import assemble_digest\n"
        "recs = standard_records() + [rec('ebola', i, 45 + i, pub=i) for i in range(1, 5)]\n"
        f"random.Random({shuffle}).shuffle(recs)\n"
        "sys.stdout.buffer.write(orjson.dumps(assemble_digest(recs, WIN)))\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONHASHSEED": seed}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, cwd=root, env=env
    ).stdout


def test_deterministic_across_processes():
    """Two worker processes (different hash seeds, different arrival order) produce
    byte-identical digests."""
    recs = standard_records() + [rec("ebola", i, 45 + i, pub=i) for i in range(1, 5)]
    here = orjson.dumps(assemble_digest(recs, WIN))
    assert _digest_bytes_in_subprocess("1", 3) == here
    assert _digest_bytes_in_subprocess("2", 8) == here


def test_ward_micro_clusters_above_ward_max_points():
    recs = [rec(t, i, 80, story=f"{t}{i}", variant=str(i)) for t in TOPICS for i in range(30)]
    cfg = DigestConfig(n_topics=4, ward_max_points=40, group_by_story=False)
    d = assemble_digest(recs, WIN, config=cfg)
    validate("digests", d)
    assert d["cluster_count"] == 4
    assert sorted(it["size"] for it in items(d, TOP_STORIES)) == [30, 30, 30, 30]
    assert orjson.dumps(d) == orjson.dumps(assemble_digest(recs[::-1], WIN, config=cfg))


def test_duplicate_copies_from_other_publishers_count_as_related_coverage():
    recs = standard_records()
    # the top story syndicated by two other outlets (exact and near duplicates)
    recs.append(rec("apple", 97, 0, pub=1, disposition="exact_duplicate"))
    recs.append(rec("apple", 96, 0, pub=2, disposition="near_duplicate"))
    top = items(assemble_digest(recs, WIN), TOP_STORIES)
    base = items(assemble_digest(standard_records(), WIN), TOP_STORIES)
    assert top[0]["related_count"] == base[0]["related_count"] + 2
    assert set(top[0]["related_sources"]) >= {PUBS[1][0], PUBS[2][0]}


# ---- digests a reader can trust -------------------------------------------------


def _all_items(d: dict) -> list[dict]:
    return [it for s in d["sections"] for it in s["items"]]


def test_digest_links_have_no_tracking_parameters():
    recs = standard_records()
    for r in recs:
        r["url"] += "?utm_source=rss&utm_medium=feed&fbclid=abc&id=7"
    d = assemble_digest(recs, WIN)
    urls = [it["lead"]["url"] for it in _all_items(d)] + [x["url"] for it in _all_items(d) for x in it["related"]]
    assert urls and all(u.endswith("?id=7") and "utm_" not in u and "fbclid" not in u for u in urls)


def test_preferred_url_duplicate_is_what_the_digest_shows():
    recs = standard_records()
    root = recs[0]
    longer = rec("apple", 0, 0, pub=0, variant="full", disposition="exact_duplicate",
                 duplicate_of=root["article_id"], preferred=True, word_count=900,
                 url=True)
    longer["title"] = "Apple unveils iPhone with faster chip, full story"
    longer["url"] = "https://reuters.example/apple/0-full"
    d = assemble_digest([*recs, longer], WIN)
    shown = [it["lead"] for it in _all_items(d)] + [x for it in _all_items(d) for x in it["related"]]
    mine = [x for x in shown if x["article_id"] == root["article_id"]]
    assert mine and mine[0]["title"] == longer["title"] and mine[0]["url"] == longer["url"]


def test_sizes_and_related_counts_are_distinct_articles_from_distinct_publishers():
    base = standard_records()
    copies = [rec("apple", 97, 0, pub=1, disposition="exact_duplicate"),
              rec("apple", 96, 0, pub=2, disposition="near_duplicate")]
    # a later version of the same syndicated copy: the same article, not one more
    again = dict(copies[0], key=copies[0]["key"] + "#r1", revision_no=1)
    d = assemble_digest([*base, *copies, again], WIN)
    top = items(d, TOP_STORIES)[0]
    plain = items(assemble_digest(base, WIN), TOP_STORIES)[0]
    assert top["related_count"] == plain["related_count"] + 2
    assert top["size"] == top["related_count"] + 1  # trend size and "N more" agree
    assert len(top["related_sources"]) == len(set(top["related_sources"]))
    idx = next(t for t in d["topic_index"] if t["key"] == top["topic_key"])
    assert idx["size"] == top["size"]


def test_scores_follow_the_story_as_of_the_window_end():
    # an article scored alone when first seen; 3 more publishers of 3 more tiers join its
    # story later in the window: the digest scores it with corroboration 100 (+10 tiers capped)
    first = rec("ebola", 0, 0, pub=0, story="s-ebola")
    first["importance_components"] = {"authority": 95.0, "recency": 100.0, "corroboration": 25.0,
                                      "relevance": 50.0, "depth": 20.0}
    first["importance"] = 0.25 * 95 + 0.2 * 100 + 0.2 * 25 + 0.2 * 50 + 0.15 * 20
    joiners = [rec("ebola", i, 0, pub=i, story="s-ebola", hours=2, disposition="exact_duplicate")
               for i in (1, 2, 3)]
    d = assemble_digest([first, *joiners], WIN)
    [it] = _all_items(d)
    assert it["score"] == round(0.25 * 95 + 0.2 * 100 + 0.2 * 100 + 0.2 * 50 + 0.15 * 20, 2)
    # as of an earlier end (before the joiners) it keeps its first score
    early = DigestWindow("rolling", START, START + int(1.5 * HOUR_MS))
    [it0] = _all_items(assemble_digest([first, *joiners], early))
    assert it0["score"] == round(first["importance"], 2)


def test_reliability_as_of_the_window_end_scales_authority():
    from newsflow.digest.coverage import StoryCoverage

    r = rec("ebola", 0, 0, pub=0, story="s-ebola")
    r["importance_components"] = {"authority": 95.0, "recency": 100.0, "corroboration": 25.0,
                                  "relevance": 50.0, "depth": 20.0}
    cov = StoryCoverage().extend([r])
    cov.add_health({"feed_id": r["feed_id"], "reliability": 0.5, "at": ms_to_iso(START)})
    [it] = _all_items(assemble_digest([r], WIN, coverage=cov))
    assert it["score"] == round(0.25 * 47.5 + 0.2 * 100 + 0.2 * 25 + 0.2 * 50 + 0.15 * 20, 2)


def test_labels_are_entity_and_headline_words_or_a_short_headline():
    d = assemble_digest(standard_records(), WIN)
    top = items(d, TOP_STORIES)[0]
    assert top["entity"] == "Apple"
    # terms: surface words of the headlines ("unveils", not the stem "unveil"), in headline order
    title_words = TOPICS["apple"][0].split()
    assert all(t in title_words for t in top["terms"])
    assert [title_words.index(t) for t in top["terms"]] == sorted(title_words.index(t) for t in top["terms"])
    # no entity in 2+ titles: a short form of the lead headline, never cut mid-phrase silently
    from newsflow.text.titles import short_headline

    assert short_headline("Why are we waiting? Ardern v Bridges - pressure on to lift lockdown early, Peters "
                          "enters fray") == "Why are we waiting? Ardern v Bridges"
    assert short_headline("Face off: Trump tours mask factory - BBC News") == "Face off: Trump tours mask factory"
    # a sentence ends a clause; a cut never ends on a dangling word ("… so far. And", "… costing a …")
    assert short_headline("Tim Cook to step down as Apple CEO. In letter, he names John Ternus as his "
                          "successor", 14) == "Tim Cook to step down as Apple CEO"
    assert short_headline("1 year in, National Guard became a part of D.C. life. Residents are split on "
                          "whether it should stay", 14) == "1 year in, National Guard became a part of D.C. life"
    assert short_headline("Inflation jumps as gas prices rise and here are 3 things now costing a lot "
                          "more than last year", 14) == "Inflation jumps as gas prices rise and here are 3 things now costing …"


def test_label_names_the_entity_the_lead_headline_leaves_out():
    """Labels read as headlines, never as strung-together terms ("meat mental
    Hotline"); a lead headline that does not name the story's entity gets it in front."""
    titles = ["White House to wind down virus task force", "White House says virus task force will wind down",
              "US looks at winding down virus task force", "US looks at winding down virus task force soon",
              "Officials look at winding down the virus task force"]
    body = ("The White House is planning to wind down the coronavirus task force by the end of the month, "
            "officials said. The task force has led the federal response to the virus outbreak.")
    recs = [rec("apple", i, 80, pub=i, title=t, body_text=body, story="s-task") for i, t in enumerate(titles)]
    [it] = _all_items(assemble_digest(recs, WIN))
    assert it["entity"] == "White House"
    assert it["label"] == "White House: US looks at winding down virus task force" == f"White House: {it['lead']['title']}"
    assert set(it["terms"]) <= {w for t in titles for w in t.split()}
    # a lead headline naming the entity is the label as it is
    [it] = _all_items(assemble_digest(recs[:3], WIN))
    assert it["label"] == it["lead"]["title"] == "White House to wind down virus task force"


def test_label_never_cuts_inside_a_quotation():
    """Real day (5 digests): the " - " inside the quotation was cut as a publisher suffix, and
    the label, "Emotional abuse: ‘My fiance seemed perfect", said the opposite of the quote. A
    label keeps the whole quotation, or closes what its cut leaves open."""
    title = "Emotional abuse: ‘My fiance seemed perfect - but he wanted to control me’"
    body = ("Emotional abuse can start with small things, a charity said. Her fiance checked her phone "
            "and chose her friends.")
    [it] = _all_items(assemble_digest([rec("apple", 0, 80, title=title, body_text=body)], WIN))
    assert it["label"] == title
    def label_headline(title: str) -> str:  # as digest labels shorten headlines
        return short_headline(title, max_words=14)

    # clause and word cuts too: never inside a quotation (nor brackets)
    assert label_headline("Second deadly coronavirus peak CAN be stopped with UK's new 'test, track and "
                          "trace' app") == "Second deadly coronavirus peak CAN be stopped with UK's new 'test, track and trace' …"
    assert label_headline("'I love the battle, I have no fear' - Bess on England, the Ashes and enjoying "
                          "on-field backchat") == "'I love the battle, I have no fear'"
    assert label_headline("Florida preps for phase one of reopening amid coronavirus as DeSantis cites 'light "
                          "at the end of the tunnel'") == ("Florida preps for phase one of reopening amid "
                                                           "coronavirus as DeSantis cites 'light …'")
    # a quotation or brackets that end within 3 words of the cut are finished rather than elided
    assert label_headline("Trump says the US will have a COVID-19 vaccine 'by the end of the year'") == (
        "Trump says the US will have a COVID-19 vaccine 'by the end of the year'")
    assert label_headline("Twisting British thriller is the stuff of any parent's nightmares (and it's really, "
                          "really good)").endswith("(and it's really, really good)")


def test_label_never_ends_on_a_verb_whose_object_it_cuts_off():
    """Real day: "What Kim Yo Jong's rise to the top says" (cut at " -- ") reads broken; the
    headline is shortened by the other rules instead (the dashed aside left out, not the object
    of "says"). An attribution after a comma ("…, OFWs say") is a whole clause."""
    title = "What Kim Yo Jong's rise to the top says -- and doesn't say -- about being a woman in North Korea"
    body = ("Kim Yo Jong, the sister of North Korean leader Kim Jong Un, has risen fast. Few women in North "
            "Korea hold power.")
    [it] = _all_items(assemble_digest([rec("apple", 0, 80, title=title, body_text=body)], WIN))
    assert it["label"] == "What Kim Yo Jong's rise to the top says about being a woman …"
    def label_headline(title: str) -> str:  # as digest labels shorten headlines
        return short_headline(title, max_words=14)

    assert label_headline("Virus peak has passed, health officials say - live updates") == (
        "Virus peak has passed, health officials say")
    assert label_headline("What the jobs report means - for workers, for the Fed and for the markets this "
                          "week and next") == "What the jobs report means - for workers"


def test_new_york_is_one_entity():
    assert "New York City" in capitalized_phrases("Children in New York City fall ill")


def test_summaries_leave_out_links_hashtags_and_calls_to_action():
    """Real video-channel leads (YouTube feeds of news channels): the summary is the prose, never
    "Subscribe to our channel: http://aje.io/... #AlJazeeraEnglish"."""
    body = ("Venezuela's President Nicolas Maduro says 13 people have been captured following what he says "
            "was a coup attempt. Maduro says the group arrived in speedboats on Sunday. - Subscribe to our "
            "channel: http://aje.io/AJSubscribe - Follow us on Twitter: https://twitter.com/AJEnglish "
            "#AlJazeeraEnglish #Venezuela")
    s = extractive_summary("Americans captured in failed coup plot", body)
    assert s.startswith("Venezuela's President Nicolas Maduro says 13 people")
    assert "http" not in s and "#" not in s and "Subscribe" not in s and "aje.io" not in s
    junk = ("To watch TV Patrol videos, click the links below: http://bit.ly/TVPatrol2019 To watch more "
            "breaking news, click the links below: https://www.youtube.com/x #ABSCBNNews")
    assert extractive_summary("ABS-CBN goes off air", junk) == "ABS-CBN goes off air"


def test_digests_follow_late_story_merges_as_of_the_window_end():
    """A story merged into another (dense stream, ``stories`` topic ``merged_into``) is one
    digest item with the other in windows that end after the merge, with both stories'
    publishers; windows that ended before it keep two."""
    from newsflow.dedup.story_state import publisher_family
    from newsflow.digest.coverage import StoryCoverage

    a = [rec("apple", i, 80, pub=i, story="s-a") for i in range(2)]
    b = [rec("ukraine", i, 78, pub=i + 2, story="s-b") for i in range(2)]
    recs = a + b
    cov = StoryCoverage().extend(recs)
    before = _all_items(assemble_digest(cov.aliased(recs, WIN.end_ms), WIN, coverage=cov))
    assert len(before) == 2
    cov.merge("s-b", "s-a", WIN.end_ms)  # at the end: not before it, nothing changes yet
    assert cov.aliased(recs, WIN.end_ms) is recs or cov.aliased(recs, WIN.end_ms) == recs
    cov.merge("s-b", "s-a", WIN.start_ms + 1)
    merged = cov.aliased(recs, WIN.end_ms)
    assert {r["story_id"] for r in merged} == {"s-a"} and {r["story_id"] for r in recs} == {"s-a", "s-b"}
    [item] = _all_items(assemble_digest(merged, WIN, coverage=cov))
    assert item["story_ids"] == ["s-a"] and item["size"] == 4
    # (publisher families: each test publisher has its own domain)
    assert cov.as_of("s-a", WIN.end_ms)[0] == sorted({publisher_family(r["publisher"], r["url"]) for r in recs})
    assert len(cov.as_of("s-a", WIN.end_ms)[0]) == len({r["publisher"] for r in recs})
    assert cov.as_of("s-a", WIN.start_ms)[0] == []  # nobody carried either before the window


def test_equal_scores_rank_the_fresher_lead_first():
    """Most new articles score recency 100 (as of their feed's previous poll), so equal scores
    are common in a brief: between clusters of equal score and size, the fresher lead comes
    first (the lead's id, a hash, decided before)."""
    for first, second in (("ebola", "fed"), ("fed", "ebola")):
        recs = [rec(first, 0, 60, hours=2.0), rec(second, 0, 60, hours=9.0)]
        d = assemble_digest(recs, WIN)
        assert [it["lead"]["title"] for it in items(d, NOTEWORTHY)] == [TOPICS[second][0], TOPICS[first][0]]


def test_a_topic_of_several_stories_is_corroborated_by_all_their_publishers():
    """Two reports of one event that the story step kept apart (two stories of two publishers
    each) are one digest item (DBSCAN over story centroids): the item ranks with the topic's
    four publishers (corroboration 100), not the best story's two (50)."""
    comps = {"authority": 80.0, "recency": 100.0, "corroboration": 50.0, "relevance": 50.0, "depth": 20.0}
    score = 0.25 * 80 + 0.2 * 100 + 0.2 * 50 + 0.2 * 50 + 0.15 * 20
    recs = [rec("ebola", i, score, pub=i, story="s-a" if i < 2 else "s-b", tier="T2", story_tiers=["T2"],
                importance_components=dict(comps)) for i in range(4)]
    [item] = _all_items(assemble_digest(recs, WIN))
    assert sorted(item["story_ids"]) == ["s-a", "s-b"]
    assert item["score"] == round(0.25 * 80 + 0.2 * 100 + 0.2 * 100 + 0.2 * 50 + 0.15 * 20, 2)
    # one story of the same two publishers keeps its own corroboration
    [alone] = _all_items(assemble_digest(recs[:2], WIN))
    assert alone["score"] == round(score, 2)


def test_a_partial_digest_is_generated_at_the_event_time_reached():
    """``final: false`` (the window still open at the end of the input): ``generated_at`` is the
    event time the flow had reached (clamped to the window), not the window end after the data."""
    reached = START + 15 * HOUR_MS
    d = assemble_digest(standard_records(), WIN, final=False, as_of_ms=reached)
    assert d["final"] is False and d["generated_at"] == ms_to_iso(reached)
    validate("digests", d)
    assert assemble_digest([], WIN, final=False, as_of_ms=END + HOUR_MS)["generated_at"] == ms_to_iso(END)
    assert assemble_digest([], WIN, final=False, as_of_ms=START - HOUR_MS)["generated_at"] == ms_to_iso(START)
    # a final digest (and a caller that does not know the time reached): the window end
    assert assemble_digest([], WIN, as_of_ms=reached)["generated_at"] == ms_to_iso(END)
    assert assemble_digest([], WIN, final=False)["generated_at"] == ms_to_iso(END)
    # the rest of the record is the same
    full = assemble_digest(standard_records(), WIN, final=False)
    assert {**d, "generated_at": full["generated_at"]} == full
