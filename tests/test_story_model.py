"""The learned story decision (a bench experiment): its coefficients, the pair model, the learned assigner."""

from __future__ import annotations

import json
import pickle
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from newsflow.dedup.story_config import HOUR_MS, StoryConfig
from newsflow.dedup.story_features import StoryInput, featurize_batch

# the learned decision is a bench experiment (bench/learned_stories), not a package module
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from learned_stories.story_learned import LearnedStoryAssigner
from learned_stories.story_model import (
    DEFAULT_MODEL,
    FEATURES,
    MODEL_VERSION,
    StoryModel,
    load_model,
)

#: the flow's story configuration (the defaults)
CONFIG = StoryConfig()

T0 = 1_588_000_000_000
BODY_FERGUSON = ("Professor Neil Ferguson, whose modelling shaped the lockdown, resigned from the government's "
                 "advisory group after breaking social distancing rules.")

ITEMS = [
    StoryInput("f1", "Prof Neil Ferguson quits government role after breaking lockdown", "https://bbc.example/f1",
               "BBC", T0, BODY_FERGUSON),
    StoryInput("f2", "Neil Ferguson resigns as government adviser over lockdown breach", "https://dm.example/f2",
               "Daily Mail", T0 + HOUR_MS, "Neil Ferguson quit his government advisory role on Tuesday."),
    StoryInput("c1", "Orange County beaches reopen after surfers defy closure", "https://lat.example/c1",
               "LA Times", T0 + 2 * HOUR_MS, "Beaches in Orange County reopened for walking and surfing."),
    StoryInput("f3", "Lockdown architect Neil Ferguson steps down after visits", "https://tel.example/f3",
               "Telegraph", T0 + 3 * HOUR_MS, "Neil Ferguson stepped down from SAGE after visits broke rules."),
    StoryInput("k1", "Kim Jong Un reappears at fertiliser factory opening", "https://cnn.example/k1",
               "CNN", T0 + 4 * HOUR_MS, "North Korean leader Kim Jong Un appeared in public for the first time."),
]


WORDS = ("budget", "harbour", "orchestra", "vaccine", "election", "museum", "railway", "drought", "festival",
         "tariff", "glacier", "stadium", "bakery", "satellite", "library", "wildfire", "ferry", "senate")
#: a day of unrelated headlines before the items, so that the IDF is a window's, not five documents'
FILLER = [StoryInput(f"z{i}", f"{WORDS[i % 18]} {WORDS[(i * 7 + 3) % 18]} report number {i}",
                     f"https://p{i % 9}.example/z{i}", f"P{i % 9}", T0 - 20 * HOUR_MS + i * 60_000)
          for i in range(300)]


def run(sa: LearnedStoryAssigner, items: list[StoryInput]) -> list[str]:
    return [sa.assign(f).story_id for f in featurize_batch(FILLER + items, CONFIG)][len(FILLER):]


def test_shipped_model_loads_and_matches_the_features() -> None:
    model = load_model()
    doc = json.loads(DEFAULT_MODEL.read_text())
    assert doc["version"] == MODEL_VERSION and doc["features"] == list(FEATURES)
    assert len(model.coef) == len(FEATURES) and 0.0 < model.threshold < 1.0
    assert set(doc["trained_on"]) == {"2020-04-28", "2020-05-06", "2020-07-15"}
    assert StoryModel.from_json(model.to_json()) == StoryModel.from_json(doc)


def test_a_model_file_of_other_features_or_version_is_refused(tmp_path: Path) -> None:
    doc = load_model().to_json()
    with pytest.raises(ValueError, match="version"):
        StoryModel.from_json({**doc, "version": MODEL_VERSION + 1})
    with pytest.raises(ValueError, match="features"):
        StoryModel.from_json({**doc, "features": list(FEATURES[:-1]), "coef": doc["coef"][:-1]})  # type: ignore[index]
    own = tmp_path / "model.json"
    own.write_text(json.dumps({**doc, "threshold": 0.9}))
    assert load_model(str(own)).threshold == 0.9


def test_reports_of_one_event_join_and_others_do_not() -> None:
    ids = run(LearnedStoryAssigner(CONFIG), ITEMS)
    assert ids[0] == ids[1] == ids[3], ids
    assert len({ids[0], ids[2], ids[4]}) == 3, ids


def test_the_threshold_decides() -> None:
    never = replace(load_model(), threshold=1.0)
    assert len(set(run(LearnedStoryAssigner(CONFIG, model=never), ITEMS))) == len(ITEMS)


def test_same_stories_for_any_shard_count_and_after_a_pickled_resume() -> None:
    items = [it._replace(article_id=f"{it.article_id}-{k}", published_ms=it.published_ms + k * 30 * HOUR_MS)
             for k in range(4) for it in ITEMS]
    one = run(LearnedStoryAssigner(CONFIG), items)
    assert run(LearnedStoryAssigner(CONFIG, band_shards=3), items) == one
    assert len(set(one)) < len(one) - 8  # (stories were joined: the comparison says something)
    sa = LearnedStoryAssigner(CONFIG)
    feats = featurize_batch(FILLER + items, CONFIG)
    cut = len(FILLER) + 9
    for f in feats[:cut]:
        sa.assign(f)
    resumed = pickle.loads(pickle.dumps(sa))
    assert [resumed.assign(f).story_id for f in feats[cut:]] == one[9:]
