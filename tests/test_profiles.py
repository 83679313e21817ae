"""Pure profile logic (newsflow.profiles): subscriptions -> vector, update rules, decay, the
relevance rules (docs/rules.md#relevance), interaction checking."""

from __future__ import annotations

import orjson
import pytest

from newsflow.config import ProfilesSettings
from newsflow.profiles.config import (
    WEEK_MS,
    ProfileRates,
    ProfileSpec,
    TopicSubscription,
)
from newsflow.profiles.interactions import InteractionError, parse_interaction
from newsflow.profiles.rank import with_relevance
from newsflow.profiles.state import ProfileState
from newsflow.profiles.vectors import article_vector, interest_profile, relevance, seed_vector
from newsflow.text.tokenize import token_hash
from newsflow.wire.codec import interaction_record

SCI = {"title": "Astronomers detect water on a distant exoplanet", "body_text": "The telescope study ...",
       "category": "science", "publisher": "Science Daily"}
SPORT = {"title": "Rovers beat United in the league derby", "body_text": "The striker scored twice ...",
         "category": "sports", "publisher": "Sports Wire"}
RATES = ProfileRates()


def test_subscriptions_make_a_vector_in_the_articles_space() -> None:
    spec = ProfileSpec("s", topics=(TopicSubscription("space", ("exoplanet", "telescopes"), 2.0),),
                       categories=("Science",), publishers=("Science Daily",))
    vec, _names = seed_vector(spec)
    assert vec[token_hash("exoplanet")] == 2.0 and vec[token_hash("telescop")] == 2.0  # Porter stems
    assert vec[token_hash("category:science")] == 1.0 and vec[token_hash("publisher:science daily")] == 1.0
    art, _ = article_vector(SCI)
    assert token_hash("exoplanet") in art and token_hash("category:science") in art
    assert relevance(SCI, interest_profile(vec)) > relevance(SPORT, interest_profile(vec)) == 0.0


def test_relevance_rules() -> None:
    assert relevance(SCI, None) == 50.0  # no profile: neutral 50
    assert relevance(SCI, interest_profile({})) == 50.0  # an all-zero profile is no profile
    own, _ = article_vector(SCI)
    assert relevance(SCI, interest_profile(own)) == 100.0  # cosine 1 x 100
    assert relevance(SCI, interest_profile({h: -w for h, w in own.items()})) == 0.0  # clamped at 0
    half = relevance(SCI, interest_profile({next(iter(own)): 1.0}))
    assert 0.0 < half < 100.0


def test_scored_records_get_the_profile_relevance_and_a_new_importance() -> None:
    comps = {"authority": 80.0, "recency": 100.0, "corroboration": 25.0, "relevance": 50.0, "depth": 20.0}
    rec = {**SCI, "importance": 58.0, "importance_components": comps}
    p = interest_profile(article_vector(SCI)[0])
    out = with_relevance(rec, p)
    assert out["importance_components"]["relevance"] == 100.0
    assert out["importance"] == pytest.approx(58.0 + 0.2 * 50.0)  # 0.25*80 + 0.2*100 + 0.2*25 + 0.2*100 + 0.15*20
    assert with_relevance({"title": "x"}, p) == {"title": "x"}  # not scored: unchanged


def test_read_moves_toward_skip_away_with_documented_rates() -> None:
    st = ProfileState("r")
    v, names = article_vector(SCI)
    st.apply("read", v, 0, RATES, names=names)
    h = token_hash("exoplanet")
    assert st.weight_at(h, 0, RATES) == pytest.approx(RATES.read * v[h])
    st.apply("save", v, 0, RATES)
    assert st.weight_at(h, 0, RATES) == pytest.approx((RATES.read + RATES.save) * v[h])
    w, _ = article_vector(SPORT)
    st.apply("skip", w, 0, RATES)
    st.apply("hide", w, 0, RATES)
    g = token_hash("derbi")
    assert st.weight_at(g, 0, RATES) == pytest.approx(-(RATES.skip + RATES.hide) * w[g])
    long_read = ProfileState("d")
    long_read.apply("read", v, 0, RATES, dwell_s=600)
    assert long_read.weight_at(h, 0, RATES) == pytest.approx(RATES.read * 1.5 * v[h])  # dwell bonus capped
    assert next(t for t, _ in st.top_terms(0, RATES, 3)) in {"exoplanet", "astronom", "detect", "distant", "water"}


def test_unengaged_weights_decay_ten_percent_per_week_back_toward_neutral() -> None:
    st = ProfileState.from_spec(ProfileSpec("x", topics=(TopicSubscription("t", ("league",), 1.0),)))
    v, _ = article_vector(SPORT)
    st.apply("hide", v, 0, RATES)  # a hidden sport: negative weights
    g = token_hash("derbi")
    w0 = st.weight_at(g, 0, RATES)
    assert w0 < 0
    assert st.weight_at(g, WEEK_MS, RATES) == pytest.approx(0.9 * w0)
    assert st.weight_at(g, 8 * WEEK_MS, RATES) == pytest.approx(0.9**8 * w0)  # back toward 0
    # an engaged term does not decay: reading science at week 4 refreshes its terms only
    s, _ = article_vector(SCI)
    st.apply("read", s, 4 * WEEK_MS, RATES)
    h = token_hash("exoplanet")
    assert st.weight_at(h, 4 * WEEK_MS, RATES) == pytest.approx(RATES.read * s[h])
    assert st.weight_at(g, 4 * WEEK_MS, RATES) == pytest.approx(0.9**4 * w0)
    # weights that fade together keep their direction (cosine): only the neglected one loses
    # ground against what the reader keeps engaging
    share = lambda t: abs(st.weight_at(g, t, RATES)) / abs(st.weight_at(h, t, RATES))  # noqa: E731
    st.apply("read", s, 8 * WEEK_MS, RATES)
    assert share(8 * WEEK_MS) < share(4 * WEEK_MS)


def test_state_is_bounded() -> None:
    rates = ProfileRates(max_terms=5)
    st = ProfileState("b")
    st.apply("read", article_vector(SCI)[0], 0, rates)
    st.apply("read", article_vector(SPORT)[0], 1, rates)
    assert len(st.terms) == 5


def test_interactions_are_checked() -> None:
    ok = orjson.dumps(interaction_record("reader", "read", 1_000, article_id="a1", dwell_s=3.5))
    ix = parse_interaction("0:1", ok, {"reader"})
    assert (ix.profile_id, ix.target, ix.target_id, ix.action, ix.at_ms, ix.dwell_s) == (
        "reader", "article", "a1", "read", 1_000, 3.5)
    st = parse_interaction("0:2", orjson.dumps(interaction_record("reader", "hide", 0, story_id="s1")), {"reader"})
    assert (st.target, st.target_id) == ("story", "s1")
    bad = [
        (b"{", "malformed_interaction"),
        (orjson.dumps({**orjson.loads(ok), "action": "like"}), "malformed_interaction"),
        (orjson.dumps({**orjson.loads(ok), "story_id": "s"}), "malformed_interaction"),  # both ids
        (orjson.dumps({k: v for k, v in orjson.loads(ok).items() if k != "at"}), "malformed_interaction"),
        (orjson.dumps({**orjson.loads(ok), "dwell_s": -1}), "malformed_interaction"),
        (orjson.dumps({**orjson.loads(ok), "profile_id": "ghost"}), "unknown_profile"),
    ]
    for raw, reason in bad:
        with pytest.raises(InteractionError) as e:
            parse_interaction("0:3", raw, {"reader"})
        assert e.value.reason == reason, raw


def test_a_heartbeat_only_moves_the_interactions_clock() -> None:
    from newsflow.config import Settings
    from newsflow.flows.profiles import InteractionsLogic
    from newsflow.model.messages import InteractionClock
    from newsflow.profiles.interactions import Heartbeat
    from newsflow.wire.codec import interaction_heartbeat
    from newsflow.wire.contracts import validate

    hb = interaction_heartbeat(7_200_000)
    validate("interactions", hb)
    assert parse_interaction("0:1", orjson.dumps(hb), {"reader"}) == Heartbeat(7_200_000)
    for bad in ({**hb, "profile_id": "reader"}, {**hb, "article_id": "a"}, {**hb, "heartbeat": False},
                {k: v for k, v in hb.items() if k != "at"}):
        with pytest.raises(InteractionError):
            parse_interaction("0:2", orjson.dumps(bad), {"reader"})
    cfg = ProfilesSettings.model_validate({"profile": {"reader": {}}}).to_config()
    logic = InteractionsLogic(Settings(), cfg, None, False)
    out, _ = logic.on_item(("ix0000:000000000001", orjson.dumps(hb)))
    assert list(out) == [InteractionClock("ix0000", 7_200_000)]  # the clock, no interaction
    late = orjson.dumps(interaction_record("reader", "read", 3_600_000, article_id="a1"))
    [ix] = logic.on_item(("ix0000:000000000002", late))[0]
    assert ix.at_ms == 7_200_000  # behind the heartbeat: applied at the partition's clock


def test_profiles_config() -> None:
    cfg = ProfilesSettings.model_validate({
        "rates": {"read": 0.3}, "profile": {"sci": {"topics": {"space": ["nasa", "orbit"]}, "digests": ["rolling"]}}},
    ).to_config()
    assert cfg.names == ["default", "sci"] and cfg.rates.read == 0.3
    assert cfg.get("default").empty and [p.name for p in cfg.with_digests] == ["sci"]
    with pytest.raises(ValueError, match="topic"):
        ProfilesSettings.model_validate({"profile": {"x": {"topic": {}}}})


def test_relevance_stage_holds_a_shard_in_order_until_the_profile_clock() -> None:
    """An article fetched at f waits (with what is behind it) until the default profile's clock
    reaches f - lag; it is then scored with the latest version before f - lag."""
    from newsflow.config import Settings
    from newsflow.flows.profiles import RelevanceLogic
    from newsflow.model.messages import ProfileClock, ProfileVersion, ScoredArticle, ShardWatermark
    from newsflow.scoring.importance import COMPONENTS

    cfg = ProfilesSettings.model_validate({"profile": {"default": {"topics": {"sport": ["league"]}}},
                                           "relevance_lag_seconds": 60}).to_config()
    assert cfg.live_relevance and cfg.relevance_lag_ms == 60_000
    logic = RelevanceLogic(Settings(), cfg, None, False)
    comps = dict.fromkeys(COMPONENTS, 50.0)
    rec = {**SPORT, "article_id": "a1", "fetched_at": "2026-03-01T10:02:00Z", "importance": 50.0,
           "importance_components": comps, "importance_weights": dict(zip(COMPONENTS, (0.25, 0.2, 0.2, 0.2, 0.15), strict=True))}
    from newsflow.core.timeutil import iso_to_ms

    t = iso_to_ms("2026-03-01T10:01:00Z")  # fetched - lag
    assert list(logic.on_item(ScoredArticle(rec))[0]) == []
    assert list(logic.on_item(ShardWatermark(t + 60_000))[0]) == []  # behind the article: waits too
    assert list(logic.on_item(ProfileClock("default", t - 1))[0]) == []
    # the reader skipped sport before t: that version counts; one at t does not
    away = tuple((h, -w, t - 10) for h, (w, _) in ProfileState.from_spec(cfg.get("default")).terms.items())
    logic.on_item(ProfileVersion("default", t - 10, away))
    logic.on_item(ProfileVersion("default", t, tuple((h, -w, s) for h, w, s in away)))
    out = list(logic.on_item(ProfileClock("default", t))[0])
    assert [type(m) for m in out] == [ScoredArticle, ShardWatermark]
    scored = out[0].record
    assert scored["importance_components"]["relevance"] == 0.0  # moved away: cosine <= 0
    assert scored["importance"] == round(50.0 - 0.2 * 50.0, 2)
    seed = RelevanceLogic(Settings(), cfg, None, False)  # no version before t: the subscriptions
    seed.on_item(ScoredArticle(rec))
    [m] = seed.on_item(ProfileClock("default", t))[0]
    assert 0 < m.record["importance_components"]["relevance"] != 50
