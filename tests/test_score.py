"""Importance scoring (docs/rules.md#importance): the tables of the rules as cases."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from newsflow.scoring.importance import (
    DEFAULT_SCORE_CONFIG,
    InterestProfile,
    ScoreConfig,
    authority_score,
    corroboration_score,
    depth_score,
    depth_signals,
    idf_from_documents,
    importance,
    recency_score,
    relevance_score,
    score_record,
    severity_importance,
    weighted_importance,
)
from newsflow.scoring.severity import SeverityProfile, has_historical_marker, severity_level
from newsflow.text.tokenize import TextFeatures, analyze

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def rec(**kw):
    base = {
        "article_id": "0123456789abcdef",
        "title": "Central bank raises rates",
        "body_text": "The central bank raised its key rate on Tuesday.",
        "body_html": "",
        "publisher": "Reuters",
        "feed_id": "reuters-world",
        "tier": "T1",
        "published_at": NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "date_uncertain": False,
        "word_count": 1200,
        "partial_content": False,
        "disposition": "unique",
        "publishers_seen": 1,
    }
    base.update(kw)
    return base


# ---- recency table (lambda = 0.03, docs/rules.md#recency) ------------------------------
@pytest.mark.parametrize(
    ("hours", "expected"), [(0, 100), (6, 84), (12, 70), (24, 49), (48, 24), (72, 12)]
)
def test_recency_table(hours, expected):
    assert round(recency_score(hours)) == expected


def test_recency_uncertain_penalty_and_lambda():
    assert recency_score(0, date_uncertain=True) == pytest.approx(80.0)
    assert recency_score(6, 0.03, True) == pytest.approx(0.8 * recency_score(6))
    assert recency_score(24, lam=0.01) > recency_score(24, lam=0.05)
    assert recency_score(-5) == 100.0  # future dates count as 0 h


# ---- tiers: T1..T5 -> 95/80/65/50/30 x reliability -------------------------------------
@pytest.mark.parametrize(
    ("tier", "expected"), [("T1", 95), ("T2", 80), ("T3", 65), ("T4", 50), ("T5", 30)]
)
def test_authority_tiers(tier, expected):
    assert authority_score(tier) == expected
    assert authority_score(tier, 0.5) == pytest.approx(expected / 2)


def test_authority_unknown_and_clamped():
    assert authority_score(None) == 50.0  # unknown tier = T4 (docs/rules.md#authority)
    assert authority_score("T1", 1.7) == 95.0
    assert authority_score("T1", -1) == 0.0


# ---- corroboration: min(100, 25 x publishers) + 10 for 3+ tiers -----------------------
@pytest.mark.parametrize(
    ("pubs", "tiers", "expected"),
    [(1, 1, 25), (2, 1, 50), (3, 2, 75), (3, 3, 85), (4, 1, 100), (4, 3, 100), (9, 5, 100)],
)
def test_corroboration(pubs, tiers, expected):
    assert corroboration_score(pubs, tiers) == expected


# ---- depth: buckets 20/50/75/100, +15/+10/+10, cap 100, cap 40 partial -----------------
@pytest.mark.parametrize(
    ("wc", "expected"),
    [(0, 20), (199, 20), (200, 50), (499, 50), (500, 75), (999, 75), (1000, 100)],
)
def test_depth_buckets(wc, expected):
    assert depth_score(wc) == expected


def test_depth_bonuses_and_caps():
    assert depth_score(300, True, False, False) == 65
    assert depth_score(300, True, True, True) == 85
    assert depth_score(1000, True, True, True) == 100
    assert depth_score(1000, True, True, True, partial=True) == 40
    assert depth_score(100, False, False, False, partial=True) == 20


def test_depth_signals():
    data, struct, _cites = depth_signals("Sales rose 5.5% to $3 billion.", "", None)
    assert data and not struct
    assert not depth_signals("It happened in 2014.", "", None)[0]
    html = "<ul><li>a</li><li>b</li><li>c</li></ul><a href='https://www.bbc.co.uk/x'>bbc</a>"
    assert depth_signals("x", html, "https://reuters.com/a") == (False, True, True)
    # a link to the article's own site is not a citation
    own = "<a href='https://www.reuters.com/other'>more</a>"
    assert depth_signals("x", own, "https://reuters.com/a")[2] is False
    assert depth_signals("- one\n- two\n- three\n", "", None)[1]


# ---- relevance: cosine x 100 vs interest profile, 50 when none -------------------------
def test_relevance_default_and_profile():
    assert relevance_score("anything", None) == 50.0
    p = InterestProfile.from_terms({"climate change": 1.0, "renewable energy": 1.0})
    on = relevance_score("Climate change: renewable energy investment soars", p)
    off = relevance_score("Football club signs a new striker", p)
    assert 0 <= off < 5 < on <= 100
    assert off == 0.0
    # stemming: "changes"/"changing" match "change"
    assert relevance_score("changing climates", p) > 0


def test_relevance_profile_from_texts_and_idf():
    docs = ["the market rallied", "stocks rallied", "the market fell", "rain fell in spain"]
    idf = idf_from_documents(docs)
    assert idf["market"] < idf["spain"]
    p = InterestProfile.from_texts(["stock market rally"], idf)
    assert relevance_score("Stocks rally as market climbs", p) > relevance_score("Rain in Spain", p)
    f = TextFeatures.of("Stocks rally", "market climbs")
    assert relevance_score(f, p) == pytest.approx(relevance_score(f, p))


# ---- text analysis -------------------------------------------------------------------
def test_analyze_stopwords_and_porter():
    assert analyze("The runners were running quickly") == ["runner", "run", "quickli"]
    assert analyze("Generalizations, caresses and ponies!") == ["gener", "caress", "poni"]


def test_token_hashes_are_stable_across_processes():
    code = (
        "from newsflow.text.tokenize import TextFeatures;"
        "print(TextFeatures.of('Apple unveils iPhone', 'New chips and cameras').hashes.tolist())"
    )
    root = Path(__file__).resolve().parent.parent
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1


def test_title_weighted_twice_first_200_words():
    f = TextFeatures.of("alpha", " ".join(["beta"] * 300))
    _u, c = f.unique_counts()
    counts = sorted(c.tolist())
    assert counts == [2, 200]


# ---- final score --------------------------------------------------------------------
def test_weights_sum_and_formula():
    assert sum(DEFAULT_SCORE_CONFIG.weights) == pytest.approx(1.0)
    comps = {"authority": 95, "recency": 100, "corroboration": 25, "relevance": 50, "depth": 100}
    assert weighted_importance(comps) == pytest.approx(73.75)


def test_importance_record():
    imp = importance(rec(), NOW)
    assert imp.components == {
        "authority": 95.0,
        "recency": 100.0,
        "corroboration": 25.0,
        "relevance": 50.0,
        "depth": 100.0,
    }
    assert imp.score == 73.75
    # "now" is event time; 24 h later the recency is 49
    later = importance(rec(), NOW + timedelta(hours=24))
    assert round(later.components["recency"]) == 49
    # epoch ms works too
    assert importance(rec(), NOW_MS).score == imp.score


def test_importance_story_corroboration_and_reliability():
    r = rec(
        story_publishers=["Reuters", "BBC", "TechCrunch"],
        story_tiers=["T1", "T2", "T3"],
        word_count=150,
        partial_content=True,
    )
    imp = importance(r, NOW, reliability=0.5)
    assert imp.components["corroboration"] == 85.0
    assert imp.components["authority"] == 47.5
    assert imp.components["depth"] == 20.0
    fields = imp.to_fields()
    assert set(fields) >= {"importance", "importance_components", "importance_weights"}


def test_depth_is_measured_without_the_feeds_boilerplate():
    """Real Fox News videos: 339 and 511 words of description, most of them the channel's
    lines and links, scored depth 65 and 90 and pushed single-outlet videos above a story three
    publishers carried (Kraftwerk) in the labelled day's morning brief. Depth reads the story
    text (the body without its feed's boilerplate) when the feed had some."""
    channel = " ".join(["FOX News Channel (FNC) is a 24-hour all-encompassing news service."] * 40)
    body = "Judge Justin Walker will appear before the Senate. Subscribe: https://bit.ly/2vBUvAS " + channel
    r = rec(body_text=body, word_count=len(body.split()))
    assert importance(r, NOW).components["depth"] >= 50  # the channel's text counted as depth
    lean = importance(r, NOW, story_text="Judge Justin Walker will appear before the Senate.")
    assert lean.components["depth"] == 20.0
    # the flow's scoring step passes each record's story text
    from newsflow.clustering.topics import OnlineTopics, TopicConfig, annotate
    fields = annotate([r, r], NOW_MS, OnlineTopics(TopicConfig()),
                      story_texts=[None, "Judge Justin Walker will appear before the Senate."])
    assert [f["importance_components"]["depth"] for f in fields] == [
        importance(r, NOW).components["depth"], 20.0]


def test_importance_uncertain_date():
    a = importance(rec(date_uncertain=True), NOW)
    assert a.components["recency"] == 80.0


def test_naive_datetime_rejected():
    with pytest.raises(ValueError, match="naive"):
        importance(rec(), datetime(2026, 3, 10, 12, 0))


def test_score_record_dispositions():
    assert score_record(rec(), NOW)["importance"] == 73.75
    for d in ("revision", "same_event"):
        assert score_record(rec(disposition=d), NOW)["importance"] is not None
    for d in ("exact_duplicate", "near_duplicate"):
        assert score_record(rec(disposition=d), NOW)["importance"] is None


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        DEFAULT_SCORE_CONFIG.lam = 0.1  # type: ignore[misc]


def test_profile_in_config():
    cfg = ScoreConfig(profile=InterestProfile.from_terms({"central bank rates": 1.0}))
    hit = importance(rec(), NOW, cfg).components["relevance"]
    miss = importance(rec(title="Cat video", body_text="A cat."), NOW, cfg).components["relevance"]
    assert hit > 50 > miss


# ---- severity profile (docs/rules.md#severity-profile) ---------------------------------
@pytest.mark.parametrize(
    ("title", "level"),
    [
        ("Russia launches invasion of neighbour", "critical"),
        ("Missile attack on port kills 12", "high"),
        ("Thousands protest over pension reform", "medium"),
        ("Leaders to hold summit next week", "low"),
        ("Local bakery opens second shop", "info"),
    ],
)
def test_severity_levels(title, level):
    assert severity_level(title).level == level


def test_severity_lifestyle_exclusion_substring():
    r = severity_level("Celebrity war of words over wedding photos")
    assert r.level == "info" and r.excluded
    # substring, not word boundary: "sports" inside "esports"
    assert severity_level("Esports team faces attack claims").excluded


@pytest.mark.parametrize(
    "title",
    [
        "Throwback: the war that changed Europe",
        "Flashback: earthquake devastates city",
        "On this day in 1914 war broke out",
        "This day in history: bombing of the harbour",
        "Ten years since the tsunami",
        "Anniversary of the attack remembered",
    ],
)
def test_historical_marker_downgrade(title):
    r = severity_level(title, now=NOW)
    assert r.level == "info" and r.historical_downgrade


def test_historical_full_date_two_years():
    assert has_historical_marker("Earthquake of March 3, 2011 remembered", NOW)
    assert has_historical_marker("Bombing on 12 June 2020 revisited", NOW)
    assert not has_historical_marker("Earthquake on March 3, 2026 hits coast", NOW)
    assert severity_level("Earthquake of March 3, 2011", now=NOW).level == "info"
    assert severity_level("Earthquake of March 3, 2026", now=NOW).level == "high"


def test_severity_importance_weights():
    r = rec(title="Nuclear attack warning issued", tier="T1", story_publishers=list("abcde"))
    s = severity_importance(r, NOW)
    assert s.level == "critical"
    assert s.components == {
        "severity": 100.0,
        "tier": 100.0,
        "corroboration": 100.0,
        "recency": 100.0,
    }
    assert s.score == 100.0
    s2 = severity_importance(rec(title="Bakery opens", tier="T4"), NOW + timedelta(hours=12))
    # 0.55*0 + 0.20*25 + 0.15*20 + 0.10*50
    assert s2.score == pytest.approx(13.0)
    s3 = severity_importance(rec(title="Bakery opens"), NOW + timedelta(hours=30))
    assert s3.components["recency"] == 0.0


def test_severity_profile_in_importance():
    cfg = ScoreConfig(severity=SeverityProfile())
    imp = importance(rec(title="Earthquake strikes coast"), NOW, cfg)
    assert imp.severity is not None and imp.severity.level == "high"
    assert imp.to_fields()["severity"]["level"] == "high"


def test_severity_whole_words_with_inflections():
    assert severity_level("Investors ignore warning signs").keyword == "warning"
    assert severity_level("Investors ignore warning signs").level == "low"
    assert severity_level("Wars rage on").level == "high"
    assert severity_level("Company attacked by hackers").level == "high"
    assert severity_level("Nuclear attack warning issued").level == "critical"
    assert severity_level("Swarm of bees in town").level == "info"  # not "war"


def test_story_phases():
    from newsflow.scoring.importance import story_phase

    t0 = NOW
    assert story_phase(1, t0, t0 + timedelta(hours=5)) == "breaking"
    assert story_phase(3, t0, t0 + timedelta(hours=1)) == "developing"
    assert story_phase(3, t0, t0 + timedelta(hours=3)) == "sustained"
    assert story_phase(6, t0, t0 + timedelta(hours=1)) == "sustained"
    assert story_phase(9, t0, t0 + timedelta(hours=1), current_score=30, peak_score=70) == "fading"
    assert (
        story_phase(9, t0, t0 + timedelta(hours=1), current_score=0, peak_score=70) == "sustained"
    )
    late = t0 + timedelta(hours=40)
    assert story_phase(4, t0, late, last_seen=t0 + timedelta(hours=10)) == "fading"
