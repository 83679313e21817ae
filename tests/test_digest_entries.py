"""The digest's compact entries (analyzed once on arrival) and the window-time fast paths."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import pickle
import random
from pathlib import Path

import numpy as np
import orjson

from newsflow.clustering.window import tfidf_from_counts, tfidf_matrix
from newsflow.core.timeutil import iso_to_ms, ms_to_iso
from newsflow.digest import entries
from newsflow.digest.assemble import assemble_digest
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.entries import (
    BODY_WORDS_KEPT,
    DigestEntry,
    body_text,
    digest_entries,
    term_counts,
)
from newsflow.digest.schedule import DigestWindow
from newsflow.scoring.importance import score_record
from newsflow.text.tokenize import features_batch

START = iso_to_ms("2026-03-09T07:00:00Z")
WIN = DigestWindow("weekly_roundup", START, START + 7 * 86_400_000)
WORDS = ["Apple", "unveils", "iPhone", "rates", "crisis", "deal", "outbreak", "flight", "earnings", "sanctions", "Ukraine", "Fed", "Google", "Samsung", "Ebola", "Malaysia", "court", "vote", "storm", "market", "bank", "strike", "talks"]


def _records(n: int, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = START + rng.randrange(7 * 86_400_000)
        title = " ".join(rng.choice(WORDS) for _ in range(7))
        body = ". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(25)) + "."
        rec = {
            "key": f"a{i:04d}", "article_id": f"a{i:04d}", "feed_id": f"f{i % 7}",
            "publisher": f"Pub {i % 9}", "tier": f"T{1 + i % 5}", "url": f"https://p{i % 9}.example/{i}",
            "title": title, "body_text": body, "published_at": ms_to_iso(t), "fetched_at": ms_to_iso(t + 60_000),
            "disposition": "unique", "revision_no": 0, "story_id": f"s{i % 23}",
            "story_publishers": [f"Pub {i % 9}"], "story_tiers": [f"T{1 + i % 5}"], "word_count": 300,
            "seen_in": [],
        }
        out.append(score_record(rec, t + 3_600_000))
    return out


def test_tfidf_from_counts_equals_tfidf_matrix_when_nothing_is_cut() -> None:
    recs = _records(60)
    docs = [(r["title"], r["body_text"]) for r in recs]
    X0, v0 = tfidf_matrix(features_batch(docs))
    tv = term_counts(docs, keep=10_000)
    X1, v1 = tfidf_from_counts([h for h, _ in tv], [c for _, c in tv])
    assert np.array_equal(v0, v1)
    assert abs(X0 - X1).max() < 1e-12


def test_term_counts_keep_the_most_frequent_stems_title_first() -> None:
    (h, c), = term_counts([("Zebra crossing", "alpha beta gamma delta " * 3)], keep=3)
    counts = np.frombuffer(c, dtype=np.uint8)
    assert len(np.frombuffer(h, dtype=np.uint64)) == 3
    assert sorted(counts.tolist()) == [3, 3, 3]  # the body words (3x) beat the title's (2x)
    (h, c), = term_counts([("Zebra crossing", "alpha beta")], keep=2)
    assert sorted(np.frombuffer(c, dtype=np.uint8).tolist()) == [2, 2]  # title words count twice


def test_entries_are_idempotent_compact_and_keep_the_summary_body() -> None:
    recs = _records(40)
    ents = digest_entries(recs)
    assert digest_entries(ents) == ents
    assert {"body_text", "seen_in"}.isdisjoint(f.name for f in dataclasses.fields(DigestEntry))
    assert body_text(ents[0]).split() == recs[0]["body_text"].split()[:BODY_WORDS_KEPT]
    assert len(pickle.dumps(ents)) < 0.5 * len(pickle.dumps(recs))


def test_entries_and_full_records_give_the_same_digest() -> None:
    recs = _records(200)
    a = orjson.dumps(assemble_digest(recs, WIN))
    b = orjson.dumps(assemble_digest(digest_entries(recs), WIN, coverage=StoryCoverage().extend(recs)))
    assert a == b


def test_entries_keep_what_profile_ranking_reads() -> None:
    """A profile digest ranks entries (not records): category is kept, and with profile_terms
    the relevance of an entry equals the full record's although the entry keeps only 120 body
    words (the profile vector reads title x2 + 200 body words + category/publisher terms)."""
    from newsflow.digest.entries import entry_relevance, with_relevance
    from newsflow.profiles import rank
    from newsflow.profiles.vectors import interest_profile, relevance
    from newsflow.text.tokenize import token_hash

    recs = _records(30)
    for i, r in enumerate(recs):
        r["category"] = "science" if i % 2 else "sports"
        # words 121..200 of the body carry the profile's term: only the full text sees it
        r["body_text"] = " ".join(["filler"] * 130) + " exoplanet telescope " * 20
    ip = interest_profile({token_hash("exoplanet"): 1.0, token_hash("category:science"): 0.5})
    full = [relevance(r, ip) for r in recs]
    entries = digest_entries(recs, profile_terms=True)
    assert [e.category for e in entries] == [r["category"] for r in recs]
    assert [entry_relevance(e, ip) for e in entries] == full
    assert [with_relevance(e, ip).importance for e in entries] == [rank.with_relevance(r, ip)["importance"] for r in recs]
    plain = digest_entries(recs)  # without the packed features: only the title and meta terms are read
    assert plain[0].profile_hashes is None and [entry_relevance(e, ip) for e in plain] != full
    # idempotent, and the packed features survive a snapshot
    assert digest_entries(entries, profile_terms=True) == entries
    assert [entry_relevance(e, ip) for e in pickle.loads(pickle.dumps(entries))] == full


def test_digest_views_count_the_same_publishers_as_full_records() -> None:
    """The flow's digest view carries the publisher families looked up once upstream; the
    coverage it gives is the one the full records give (families, sightings included)."""
    from newsflow.feeds.tiers import BUILTIN_TIERS
    from newsflow.flows.digest_windows import digest_view

    recs = _records(60)
    for i, r in enumerate(recs):
        r["publisher"] = ["CNN", "CNN International", "NYT U.S.", "Fox News latest", "BBC News Home"][i % 5]
        r["url"] = ["https://www.youtube.com/watch?v=1", "https://cnn.it/x", "https://www.nytimes.com/a",
                    "https://fxn.ws/b", "https://www.bbc.co.uk/news/c"][i % 5]
        r["seen_in"] = [{"feed_id": "g", "publisher": "NYT World", "url": "https://nyti.ms/q",
                         "fetched_at": r["fetched_at"], "article_id": "z"}, {"feed_id": "h"}] if i % 3 == 0 else []
    family = BUILTIN_TIERS.family
    full = StoryCoverage().extend(recs, family)
    views = [digest_view(r, family) for r in recs]
    assert all("url" not in v and "family" in v for v in views)
    from_views = StoryCoverage().extend(views)  # no table passed: the views' families count
    assert from_views.stories == full.stories
    assert {p for st in full.stories.values() for p in st.publishers} == {"cnn.com", "nytimes.com", "foxnews.com", "bbc.co.uk"}


def test_coverage_expire_skips_only_calls_that_change_nothing():
    """``StoryCoverage.expire`` returns at once when its horizon has not moved since the last
    sweep, no story fell below it and no merge came; random adds (some late), merges, reliability
    and expiries give the same stories, merges and answers as a coverage that sweeps every time."""
    rnd = random.Random(5)
    fast, full = StoryCoverage(), StoryCoverage()
    hour = 3_600_000
    now = 100 * hour
    skipped = 0
    for step in range(3000):
        r = rnd.random()
        if r < 0.6:
            now += rnd.randrange(0, 20 * 60_000)
            t = now - (rnd.randrange(0, 200) * hour if rnd.random() < 0.05 else 0)  # a late one
            rec = {"story_id": f"s{rnd.randrange(60)}", "fetched_ms": t, "publisher": f"P{rnd.randrange(9)}",
                   "tier": f"T{rnd.randrange(1, 5)}", "feed_id": "f"}
            fast.add(rec)
            full.add(rec)
        elif r < 0.65:
            gone, into = f"s{rnd.randrange(60)}", f"s{rnd.randrange(60)}"
            fast.merge(gone, into, now)
            full.merge(gone, into, now)
        elif r < 0.7:
            h = {"feed_id": "f", "reliability": rnd.random(), "at": ms_to_iso(now)}
            fast.add_health(h)
            full.add_health(h)
        else:
            horizon = (now - 48 * hour) // hour * hour
            full._dirty = True  # the reference sweeps every time
            skipped += horizon == fast._horizon and fast._low >= horizon and not fast._dirty
            assert fast.expire(horizon) == full.expire(horizon)
            assert fast.stories.keys() == full.stories.keys() and fast.merged == full.merged, step
            for sid in (f"s{i}" for i in range(60)):
                assert fast.as_of(sid, now) == full.as_of(sid, now)
            assert fast.reliability_of("f", now) == full.reliability_of("f", now)
    assert skipped > 100  # (most calls change nothing)
    # resumed from a snapshot, it knows its last sweep
    again = pickle.loads(pickle.dumps(fast))
    assert (again._horizon, again._low, again._dirty) == (fast._horizon, fast._low, fast._dirty)


def test_coverage_expire_by_hour_buckets_equals_a_full_scan():
    """``expire`` reads only the hour buckets below its horizon: random adds (late ones, stories
    that come back after expiring), horizons on and off the hour, and a resume from a snapshot
    drop exactly the stories a scan of every story drops."""
    rnd = random.Random(11)
    cov = StoryCoverage()
    last: dict[str, int] = {}  # the reference: each story's last fetch time
    hour = 3_600_000
    now = 500 * hour
    for step in range(5000):
        if rnd.random() < 0.75:
            now += rnd.randrange(0, 15 * 60_000)
            t = now - (rnd.randrange(0, 100) * hour if rnd.random() < 0.05 else 0)
            sid = f"s{rnd.randrange(80)}"
            cov.add({"story_id": sid, "fetched_ms": t, "publisher": f"P{rnd.randrange(5)}", "feed_id": "f"})
            last[sid] = max(last.get(sid, 0), t)
        else:
            horizon = now - 24 * hour - (0 if rnd.random() < 0.5 else rnd.randrange(hour))
            dead = [s for s, t in last.items() if t < horizon]
            for s in dead:
                del last[s]
            assert cov.expire(horizon) == len(dead), step
            assert cov.stories.keys() == last.keys(), step
            assert all(cov.stories[s].last_ms == t for s, t in last.items())
        if step == 2500:  # resumed from a snapshot
            cov = pickle.loads(pickle.dumps(cov))
    assert 20 < len(last) < 80


def test_term_counts_of_a_batch_equal_one_document_at_a_time(shared_dir: Path) -> None:
    """A batch is counted and cut together: each document's terms equal its own count (the
    per-document path, :func:`_top_terms`), for real bodies, UCI headlines, empty documents,
    ties and counts above 255, whatever the batch size and ``keep``."""
    from newsflow.connectors.files import iter_archive
    from newsflow.feeds.normalize import normalize_payload
    from newsflow.wire.codec import decode_raw

    day = shared_dir / "data" / "real-feeds" / "headlines-24feeds_2020-05-03_06.feeds.raw.jsonl.gz"
    docs = [(a.title or "", a.body_text or "") for raw in itertools.islice(iter_archive(day), 40)
            for a in normalize_payload(decode_raw(raw)).articles]
    uci = shared_dir / "data" / "uci-news" / "uci_news_2014-03_05.daily_shuffled.jsonl.gz"
    with gzip.open(uci) as fh:
        docs += [(orjson.loads(line)["title"], "") for line in itertools.islice(fh, 2000)]
    docs[5:5] = [("", ""), ("Tie tie beta alpha", "gamma delta"), ("", "word " * 300), ("A", "")]
    assert len(docs) > 2500 and sum(bool(b) for _, b in docs) > 300
    for keep in (20, 3, 1):
        want = [entries._top_terms(*f.unique_counts(), keep) for f in features_batch(docs, body_words=500)]
        for size in (len(docs), 64, entries._BATCHED, 1):
            got = [tv for i in range(0, len(docs), size)
                   for tv in term_counts(docs[i:i + size], body_words=500, keep=keep)]
            assert got == want, (keep, size)
    assert entries._BATCHED <= 64
