"""Online topics: river's incremental k-means on compact, fixed-size hashed vectors
(docs/rules.md#online-topics).

Every article becomes a 64-d signed feature-hashing vector of its title (x2) + first 200 words
(stop words removed, Porter-stemmed, stable xxh3 token hashes; L2-normalized). River's
``cluster.KMeans`` on raw bag-of-words dicts runs at ~20 docs/s (each new token adds a
coordinate to every centre); on 64 int keys it is ~1.5-3k docs/s, still the bottleneck. So
:class:`OnlineTopics` runs *river's algorithm* (``river.cluster.KMeans``: move the closest
centre by ``halflife * (x - c)``, centres drawn from ``N(mu, sigma)`` with river's own seeded
RNG) on a numpy array: the same assignments and centres as river, ~30x faster. The model can be
exported to / imported from a real ``river.cluster.KMeans`` (:meth:`OnlineTopics.to_river`,
:meth:`OnlineTopics.from_river`); a test checks both give identical assignments.

Deterministic: seeded init, sequential updates, stable hashes. State is small (k x 64 floats +
a few top terms per topic): :meth:`OnlineTopics.snapshot` is ~20 KB of bytes.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
import orjson
from river import cluster

from newsflow.text.tokenize import STOP_WORDS, TextFeatures, features_batch, words

#: what np.einsum calls without ``optimize``, minus its Python wrapper (numpy 1.x: np.einsum)
_c_einsum: Any = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "c_einsum", np.einsum)
_count_nonzero = np.count_nonzero

_SNAPSHOT_MAGIC = "newsflow.topics"
_SNAPSHOT_VERSION = 1


@dataclass(frozen=True, slots=True)
class TopicConfig:
    dim: int = 64  # power of two
    n_clusters: int = 32
    # river's step towards each new point (river's default 0.5 makes topics jump around)
    halflife: float = 0.05
    mu: float = 0.0
    # small initial centres (norm ~0.08): a centre that has learned wins only the documents
    # that really resemble it, the others go to fresh centres (with sigma=1 the first centre
    # to learn shrinks towards the origin and takes everything: dead centres)
    sigma: float = 0.01
    seed: int = 42
    title_weight: int = 2
    body_words: int = 200
    label_terms: int = 12  # top title words kept per topic (for labels)
    terms_decay_every: int = 2000  # halve a topic's term counts every N updates of it

    def __post_init__(self) -> None:
        if self.dim <= 0 or self.dim & (self.dim - 1):
            msg = f"dim must be a power of two, got {self.dim}"
            raise ValueError(msg)


def hashed_vector(features: TextFeatures, dim: int = 64) -> np.ndarray:
    """Signed feature hashing of the token stem hashes into ``dim`` floats, L2-normalized.

    bucket = low bits of the stable 64-bit token hash, sign = its top bit; term frequency is
    the raw count (the title counted twice).
    """
    h = features.hashes
    if len(h) == 0:
        return np.zeros(dim)
    signs = 1.0 - 2.0 * (h >> np.uint64(63)).astype(np.float64)
    v = np.bincount((h & np.uint64(dim - 1)).astype(np.intp), weights=signs, minlength=dim)
    norm = float(np.sqrt(v @ v))
    return v / norm if norm > 0.0 else v


def vector_to_dict(v: np.ndarray) -> dict[int, float]:
    """A dense vector as river's ``{feature: value}`` dict (int keys: deterministic order)."""
    return {i: float(x) for i, x in enumerate(v)}


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic_id: str
    cluster: int
    distance: float  # euclidean distance to the centre before the update
    terms: tuple[str, ...]  # current top words of the topic

    def to_fields(self) -> dict[str, Any]:
        return {"topic_id": self.topic_id, "topic_terms": list(self.terms)}


_LABEL_WORDS: dict[str, str] = {}


def _label_word(raw: str) -> str:
    """A raw title token as a label word ('' when it is none: stop word, digits, short)."""
    ws = words(raw)
    w = ws[0] if len(ws) == 1 else ""
    lw = w if len(w) > 2 and w not in STOP_WORDS and not w.isdigit() else ""
    if len(_LABEL_WORDS) >= 200_000:
        _LABEL_WORDS.clear()
    _LABEL_WORDS[raw] = lw
    return lw


def topic_id_of(cluster_no: int) -> str:
    return f"topic-{cluster_no:02d}"


class OnlineTopics:
    """river ``cluster.KMeans`` semantics on fixed-size vectors (see module doc)."""

    def __init__(self, config: TopicConfig | None = None) -> None:
        self.config = config or TopicConfig()
        c = self.config
        self._centers = _river_initial_centers(c)
        self._counts = np.zeros(c.n_clusters, dtype=np.int64)
        self._terms: list[dict[str, float]] = [{} for _ in range(c.n_clusters)]
        self._top: list[tuple[str, ...]] = [() for _ in range(c.n_clusters)]
        self.n_seen = 0

    # ---- river-style API -------------------------------------------------------------
    @property
    def centers(self) -> np.ndarray:
        return self._centers.copy()

    def predict_one(self, x: np.ndarray | Mapping[int, float]) -> int:
        v = self._as_vec(x)
        d = self._centers - v
        return int(np.argmin(np.einsum("ij,ij->i", d, d)))

    def learn_predict_one(self, x: np.ndarray | Mapping[int, float]) -> int:
        """Closest centre, then move it by ``halflife * (x - c)`` (river's update)."""
        v = self._as_vec(x)
        d = self._centers - v
        k = int(np.argmin(np.einsum("ij,ij->i", d, d)))
        self._centers[k] -= self.config.halflife * d[k]
        self._counts[k] += 1
        self.n_seen += 1
        return k

    def learn_one(self, x: np.ndarray | Mapping[int, float]) -> None:
        self.learn_predict_one(x)

    def learn_predict_many(self, xs: np.ndarray) -> np.ndarray:
        """Sequential updates over the rows of ``xs`` (same result as one call per row)."""
        out = np.empty(len(xs), dtype=np.int64)
        C = self._centers
        h = self.config.halflife
        for i, v in enumerate(xs):
            d = C - v
            k = int(np.argmin(np.einsum("ij,ij->i", d, d)))
            C[k] -= h * d[k]
            out[i] = k
        np.add.at(self._counts, out, 1)
        self.n_seen += len(xs)
        return out

    def _as_vec(self, x: np.ndarray | Mapping[int, float]) -> np.ndarray:
        if isinstance(x, np.ndarray):
            return x
        v = np.zeros(self.config.dim)
        for i, val in x.items():
            v[int(i)] = val
        return v

    # ---- article API -------------------------------------------------------------------
    def vectorize(self, rec: Mapping[str, Any], features: TextFeatures | None = None) -> np.ndarray:
        c = self.config
        if features is None:
            features = TextFeatures.of(
                rec.get("title") or "",
                rec.get("body_text") or "",
                title_weight=c.title_weight,
                body_words=c.body_words,
            )
        return hashed_vector(features, c.dim)

    def assign(
        self, rec: Mapping[str, Any], features: TextFeatures | None = None, *, learn: bool = True
    ) -> TopicAssignment:
        """Topic of one article record; learns from it unless ``learn=False`` or it has no
        text (an all-zero vector would drag a centre to the origin)."""
        return self.assign_vector(rec, self.vectorize(rec, features), learn=learn)

    def assign_vector(
        self, rec: Mapping[str, Any], v: np.ndarray, *, learn: bool = True
    ) -> TopicAssignment:
        """:meth:`assign` with the hashed vector already computed (see :func:`hashed_matrix`)."""
        # (numpy's C entry points: np.einsum / np.argmin / v.any() add ~7 us of Python wrapper
        # per call to ~30 us, once per article; the same values)
        d = self._centers - v
        dist = _c_einsum("ij,ij->i", d, d)
        k = int(dist.argmin())
        if learn and _count_nonzero(v):
            self._centers[k] -= self.config.halflife * d[k]
            self._counts[k] += 1
            self.n_seen += 1
            if self._counts[k] & 1 or self._counts[k] < 64:  # label words: every other article
                self._learn_terms(k, rec.get("title") or "")
        return TopicAssignment(topic_id_of(k), k, math.sqrt(dist[k]), self._top[k])

    def _learn_terms(self, k: int, title: str) -> None:
        t = self._terms[k]
        for w in set(title.split()):
            lw = _LABEL_WORDS.get(w)
            if lw is None:
                lw = _label_word(w)
            if lw:
                t[lw] = t.get(lw, 0.0) + 1.0
        cap = self.config.label_terms
        if len(t) > 4 * cap:
            self._terms[k] = dict(sorted(t.items(), key=lambda kv: (-kv[1], kv[0]))[:cap])
        n = int(self._counts[k])
        if n % self.config.terms_decay_every == 1:
            self._terms[k] = {w: c / 2 for w, c in self._terms[k].items() if c >= 1.0}
        if n < 32 or n % 32 == 1:  # refresh the cached label now and then (cheap, deterministic)
            self._top[k] = self.topic_terms(k)

    def topic_terms(self, k: int, n: int = 3) -> tuple[str, ...]:
        t = self._terms[k]
        return tuple(w for w, _ in sorted(t.items(), key=lambda kv: (-kv[1], kv[0]))[:n])

    def sizes(self) -> list[int]:
        return [int(x) for x in self._counts]

    # ---- river interop -----------------------------------------------------------------
    def to_river(self) -> cluster.KMeans:
        """A ``river.cluster.KMeans`` holding this model's centres (dict of int keys)."""
        c = self.config
        km = cluster.KMeans(
            n_clusters=c.n_clusters, halflife=c.halflife, mu=c.mu, sigma=c.sigma, p=2, seed=c.seed
        )
        for i in range(c.n_clusters):
            km.centers[i].clear()
            km.centers[i].update(vector_to_dict(self._centers[i]))
        return km

    @classmethod
    def from_river(cls, km: cluster.KMeans, config: TopicConfig | None = None) -> OnlineTopics:
        c = config or TopicConfig(
            n_clusters=km.n_clusters,
            halflife=km.halflife,
            mu=km.mu,
            sigma=km.sigma,
            seed=km.seed if km.seed is not None else 0,
        )
        self = cls(c)
        for i in range(c.n_clusters):
            center = km.centers[i]
            self._centers[i] = [center[j] for j in range(c.dim)]  # defaultdict: draws if new
        return self

    # ---- state -------------------------------------------------------------------------
    def snapshot(self) -> bytes:
        """Compact, deterministic bytes of the whole state (config, centres, counts, terms)."""
        head = {
            "magic": _SNAPSHOT_MAGIC,
            "version": _SNAPSHOT_VERSION,
            "config": asdict(self.config),
            "n_seen": self.n_seen,
            "counts": [int(x) for x in self._counts],
            "terms": [sorted(t.items()) for t in self._terms],
            "top": [list(t) for t in self._top],
            "centers": base64.b64encode(self._centers.astype("<f8").tobytes()).decode("ascii"),
        }
        return orjson.dumps(head)

    @classmethod
    def restore(cls, data: bytes) -> OnlineTopics:
        d = orjson.loads(data)
        if d.get("magic") != _SNAPSHOT_MAGIC or d.get("version") != _SNAPSHOT_VERSION:
            msg = "not a newsflow topics snapshot (or an unsupported version)"
            raise ValueError(msg)
        cfg = TopicConfig(**d["config"])
        self = cls.__new__(cls)
        self.config = cfg
        centers = np.frombuffer(base64.b64decode(d["centers"]), dtype="<f8")
        self._centers = centers.reshape(cfg.n_clusters, cfg.dim).astype(np.float64).copy()
        self._counts = np.asarray(d["counts"], dtype=np.int64)
        self._terms = [{w: float(c) for w, c in t} for t in d["terms"]]
        self._top = [tuple(t) for t in d["top"]]
        self.n_seen = int(d["n_seen"])
        return self


def _river_initial_centers(c: TopicConfig) -> np.ndarray:
    """Initial centres exactly as river draws them: ``river.cluster.KMeans(seed=...)`` fills
    each centre's coordinates lazily from its seeded ``random.Random``; touching all ``dim``
    int keys once (a prediction on the zero vector) materializes them in river's order."""
    km = cluster.KMeans(
        n_clusters=c.n_clusters, halflife=c.halflife, mu=c.mu, sigma=c.sigma, p=2, seed=c.seed
    )
    km.predict_one(dict.fromkeys(range(c.dim), 0.0))
    return np.array(
        [[km.centers[i][j] for j in range(c.dim)] for i in range(c.n_clusters)], dtype=np.float64
    )


def hashed_matrix(features: Sequence[TextFeatures], dim: int = 64) -> np.ndarray:
    """:func:`hashed_vector` of many documents at once (rows), with one ``bincount``."""
    n = len(features)
    if n == 0:
        return np.zeros((0, dim))
    lens = np.fromiter((len(f.hashes) for f in features), dtype=np.intp, count=n)
    h = np.concatenate([f.hashes for f in features]) if lens.sum() else np.zeros(0, np.uint64)
    rows = np.repeat(np.arange(n, dtype=np.intp), lens)
    signs = 1.0 - 2.0 * (h >> np.uint64(63)).astype(np.float64)
    idx = rows * dim + (h & np.uint64(dim - 1)).astype(np.intp)
    m = np.bincount(idx, weights=signs, minlength=n * dim).reshape(n, dim)
    norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    norms[norms == 0.0] = 1.0
    rows_l2: np.ndarray = m / norms[:, None]
    return rows_l2


def assign_many(
    model: OnlineTopics,
    recs: Sequence[Mapping[str, Any]],
    features: Sequence[TextFeatures] | None = None,
) -> list[TopicAssignment]:
    """:meth:`OnlineTopics.assign` over a batch, in order: the same result as one call per
    record, faster (one hashing pass; distances to all centres computed once per batch and
    only the moved centre's column refreshed after each update)."""
    c = model.config
    if features is None:
        features = [
            TextFeatures.of(
                r.get("title") or "",
                r.get("body_text") or "",
                title_weight=c.title_weight,
                body_words=c.body_words,
            )
            for r in recs
        ]
    X = hashed_matrix(features, c.dim)
    n = len(X)
    if n == 0:
        return []
    C = model._centers
    h = c.halflife
    # squared distances, computed exactly like learn_predict_one (difference, then sum)
    D = np.empty((n, c.n_clusters))
    for j in range(c.n_clusters):
        d = X - C[j]
        D[:, j] = np.einsum("ij,ij->i", d, d)
    out: list[TopicAssignment] = []
    nonempty = cast("np.ndarray", X.any(axis=1))  # a row flag per document (X is 2-D)
    for i in range(n):
        k = int(D[i].argmin())
        dist = float(np.sqrt(D[i, k]))
        if nonempty[i]:
            C[k] += h * (X[i] - C[k])
            model._counts[k] += 1
            model.n_seen += 1
            if model._counts[k] & 1 or model._counts[k] < 64:
                model._learn_terms(k, recs[i].get("title") or "")
            if i + 1 < n:
                d = X[i + 1 :] - C[k]
                D[i + 1 :, k] = np.einsum("ij,ij->i", d, d)
        out.append(TopicAssignment(topic_id_of(k), k, dist, model._top[k]))
    return out


def annotate(
    recs: Sequence[Mapping[str, Any]],
    now: int | Sequence[int] | None,
    model: OnlineTopics,
    config: Any = None,
    reliability: Mapping[str, float] | None = None,
    story_texts: Sequence[str | None] | None = None,
) -> list[dict[str, Any]]:
    """Importance (scored dispositions only) + topic fields of a batch of article records, in
    order, analyzing each text once. Every article gets a ``topic_id``; only ``unique``,
    ``revision`` and ``same_event`` articles move the centres (copies would over-weight
    repeated text). ``now`` = event time (epoch ms), one for all or one per record; ``None``:
    each record's own ``fetched_at`` (deterministic whatever the batching). ``reliability`` maps feed_id -> 0..1;
    ``story_texts``: per record, its body without the feed's boilerplate (None: none removed),
    for the depth score. Returns the fields to merge into each record."""
    from newsflow.scoring.importance import (
        DEFAULT_SCORE_CONFIG,
        importance,
        record_ms,
        should_score,
    )

    cfg = config or DEFAULT_SCORE_CONFIG
    tc = model.config
    same = cfg.title_weight == tc.title_weight and cfg.body_words == tc.body_words
    rel = reliability or {}
    feats = features_batch(
        [(r.get("title") or "", r.get("body_text") or "") for r in recs],
        title_weight=tc.title_weight,
        body_words=tc.body_words,
    )
    X = hashed_matrix(feats, tc.dim)
    texts = story_texts if story_texts is not None else [None] * len(recs)
    nows: Sequence[int | None] = [now] * len(recs) if now is None or isinstance(now, int) else now
    out = []
    for r, f, v, text, at in zip(recs, feats, X, texts, nows, strict=True):
        scored = should_score(r)
        fields: dict[str, Any]
        if scored:
            imp = importance(
                r,
                at if at is not None else record_ms(r, "fetched"),
                cfg,
                reliability=rel.get(str(r.get("feed_id"))),
                features=f if same else None,
                story_text=text,
            )
            fields = imp.to_fields()
        else:
            fields = {"importance": None}
        fields.update(model.assign_vector(r, v, learn=scored).to_fields())
        out.append(fields)
    return out
