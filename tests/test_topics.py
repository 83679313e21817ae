"""Online topics: river k-means semantics on 64-d hashed vectors."""

from __future__ import annotations

import random

import numpy as np
import pytest
from river import cluster

from newsflow.clustering.topics import (
    OnlineTopics,
    TopicConfig,
    assign_many,
    hashed_matrix,
    hashed_vector,
    vector_to_dict,
)
from newsflow.text.tokenize import TextFeatures

SUBJECTS = {
    "apple": "Apple iPhone chip camera Cupertino smartphone launch sales display battery",
    "ukraine": "Ukraine Russia Crimea Kyiv troops sanctions Putin border referendum Moscow",
    "ebola": "Ebola outbreak virus Guinea health workers vaccine WHO patients epidemic",
    "fed": "Federal Reserve interest rates Yellen inflation bond markets stimulus economy",
}


def docs(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    out = []
    names = sorted(SUBJECTS)
    for i in range(n):
        s = names[i % len(names)]
        w = SUBJECTS[s].split()
        title = " ".join(rng.sample(w, 5))
        body = " ".join(rng.choice(w) for _ in range(60))
        out.append({"title": title, "body_text": body, "subject": s})
    return out


def unit_vectors(n: int, dim: int = 64, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, dim))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_same_as_river_kmeans():
    """The numpy model runs river's algorithm: same initial centres (river's own seeded RNG),
    same assignments, same centres as ``river.cluster.KMeans`` on dicts of int keys."""
    cfg = TopicConfig(n_clusters=8, halflife=0.3, sigma=0.5, seed=7)
    ours = OnlineTopics(cfg)
    km = cluster.KMeans(n_clusters=8, halflife=0.3, mu=0.0, sigma=0.5, p=2, seed=7)
    X = unit_vectors(400)
    a = [km.learn_predict_one(vector_to_dict(x)) for x in X]
    b = [ours.learn_predict_one(x) for x in X]
    assert a == b
    theirs = np.array([[km.centers[i][j] for j in range(64)] for i in range(8)])
    np.testing.assert_allclose(ours.centers, theirs, rtol=0, atol=1e-12)
    # and river can take over the state
    km2 = ours.to_river()
    assert [km2.predict_one(vector_to_dict(x)) for x in X[:50]] == [
        ours.predict_one(x) for x in X[:50]
    ]
    back = OnlineTopics.from_river(km2, cfg)
    np.testing.assert_array_equal(back.centers, ours.centers)


def test_hashed_vector_fixed_size_normalized():
    f = TextFeatures.of("Apple unveils iPhone", "The new iPhone has a faster chip.")
    v = hashed_vector(f)
    assert v.shape == (64,)
    assert np.linalg.norm(v) == pytest.approx(1.0)
    assert not hashed_vector(TextFeatures.of("", "")).any()
    M = hashed_matrix([f, TextFeatures.of("", ""), f])
    np.testing.assert_allclose(M[0], v)
    np.testing.assert_allclose(M[2], v)
    assert not M[1].any()


def test_deterministic_and_topical():
    ds = docs(800)
    a, b = OnlineTopics(), OnlineTopics()
    ra = [a.assign(d).topic_id for d in ds]
    rb = [b.assign(d).topic_id for d in ds]
    assert ra == rb
    assert a.snapshot() == b.snapshot()
    # each subject ends up mostly in its own topic
    late = list(zip(ds[400:], ra[400:], strict=True))
    for s in SUBJECTS:
        ids = [t for d, t in late if d["subject"] == s]
        top = max(set(ids), key=ids.count)
        assert ids.count(top) / len(ids) > 0.8, s
    tops = {
        max(set(x), key=x.count)
        for x in ([t for d, t in late if d["subject"] == s] for s in SUBJECTS)
    }
    # sequential k-means may merge two subjects that both arrive before any centre has
    # specialized; most subjects still get their own topic
    assert len(tops) >= len(SUBJECTS) - 1


def test_topic_terms_label():
    m = OnlineTopics()
    last = None
    for d in docs(400):
        last = m.assign(d)
    assert last is not None and len(last.terms) == 3
    assert last.to_fields()["topic_id"].startswith("topic-")
    assert set(last.terms) <= {w.lower() for w in " ".join(SUBJECTS.values()).split()}


def test_snapshot_restore_continues_identically():
    ds = docs(600)
    whole = OnlineTopics()
    r1 = [whole.assign(d).cluster for d in ds]
    part = OnlineTopics()
    r2 = [part.assign(d).cluster for d in ds[:300]]
    snap = part.snapshot()
    assert isinstance(snap, bytes) and len(snap) < 64_000
    restored = OnlineTopics.restore(snap)
    r2 += [restored.assign(d).cluster for d in ds[300:]]
    assert r1 == r2
    assert restored.snapshot() == whole.snapshot()
    with pytest.raises(ValueError, match="snapshot"):
        OnlineTopics.restore(b'{"magic": "nope"}')


def test_assign_many_equals_one_by_one():
    ds = docs(300, seed=9)
    a, b = OnlineTopics(), OnlineTopics()
    one = [a.assign(d) for d in ds]
    many = assign_many(b, ds[:130]) + assign_many(b, ds[130:])
    assert [x.cluster for x in one] == [x.cluster for x in many]
    assert a.snapshot() == b.snapshot()


def test_empty_text_does_not_learn():
    m = OnlineTopics()
    before = m.centers
    res = m.assign({"title": "", "body_text": ""})
    assert res.topic_id.startswith("topic-")
    np.testing.assert_array_equal(before, m.centers)
    assert m.n_seen == 0


def test_no_dead_centres_on_spread_data():
    m = OnlineTopics(TopicConfig(n_clusters=8))
    for d in docs(400):
        m.assign(d)
    assert sum(1 for s in m.sizes() if s > 0) >= len(SUBJECTS) - 1


def test_dim_must_be_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        TopicConfig(dim=60)


def test_annotate_batch():
    from newsflow.clustering.topics import annotate

    ds = docs(50)
    for i, d in enumerate(ds):
        d.update(
            published_at="2026-03-10T10:00:00Z",
            tier="T2",
            word_count=300,
            feed_id="f",
            disposition="exact_duplicate" if i % 10 == 0 else "unique",
        )
    m = OnlineTopics()
    out = annotate(ds, 1_773_140_400_000, m, reliability={"f": 0.5})
    assert len(out) == 50
    assert out[0]["importance"] is None and out[0]["topic_id"].startswith("topic-")
    assert out[1]["importance_components"]["authority"] == 40.0
    assert m.n_seen == 45  # duplicates do not move the centres


def test_annotate_now_defaults_to_fetched_time():
    from newsflow.clustering.topics import annotate

    ds = docs(3)
    for d in ds:
        d.update(
            published_at="2026-03-10T10:00:00Z",
            fetched_at="2026-03-10T16:00:00Z",
            tier="T2",
            word_count=300,
            feed_id="f",
            disposition="unique",
        )
    out = annotate(ds, None, OnlineTopics())
    assert round(out[0]["importance_components"]["recency"]) == 84  # 6 h old


def _assign_reference(m: OnlineTopics, rec: dict, v: np.ndarray, learn: bool) -> tuple:
    """OnlineTopics.assign_vector as first written (numpy's Python-level entry points)."""
    empty = not v.any()
    d = m._centers - v
    dist = np.einsum("ij,ij->i", d, d)
    k = int(np.argmin(dist))
    if learn and not empty:
        m._centers[k] -= m.config.halflife * d[k]
        m._counts[k] += 1
        m.n_seen += 1
        if m._counts[k] & 1 or m._counts[k] < 64:
            m._learn_terms(k, rec.get("title") or "")
    return k, float(np.sqrt(dist[k])), m._top[k]


def test_assign_vector_same_as_numpy_entry_points():
    """The assignment through numpy's C entry points against the same arithmetic through
    np.einsum / np.argmin / v.any(): the same centre, the same distance bits and the same
    centres after learning, for text, empty and non-learning articles."""
    ds = docs(400, seed=4)
    X = hashed_matrix([TextFeatures.of(d["title"], d["body_text"]) for d in ds], 64)
    X[::37] = 0.0  # no text: assigned, never learnt
    a, b = OnlineTopics(), OnlineTopics()
    for i, (d, v) in enumerate(zip(ds, X, strict=True)):
        learn = i % 5 != 0
        got = a.assign_vector(d, v, learn=learn)
        k, dist, top = _assign_reference(b, d, v, learn)
        assert (got.cluster, got.distance, got.terms) == (k, dist, top)
        assert type(got.distance) is float
    assert a._centers.tobytes() == b._centers.tobytes()
    assert a.snapshot() == b.snapshot() and a.n_seen == b.n_seen < len(ds)
