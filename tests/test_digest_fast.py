"""The digest's column-wise fast paths give the very bytes of the record-by-record code: the
one-pass window selection, re-scoring on columns (``sum()`` and ``round()`` emulated), the
radius graph from candidate pairs, the TF-IDF vocabulary lookup, cluster keys, and the garbage
collector pause around an assembly."""

from __future__ import annotations

import dataclasses
import gc
import math
import random
import struct

import numpy as np
import orjson
import pytest
import scipy.sparse as sp

import newsflow.clustering.window as W
import newsflow.digest.assemble as A
import newsflow.digest.rescore as R
import newsflow.digest.selection as S
import newsflow.digest.topics as T
from newsflow.core.gctune import gc_paused
from newsflow.core.hashing import stable_id
from newsflow.core.timeutil import ms_to_iso
from newsflow.digest.config import DigestConfig
from newsflow.digest.coverage import StoryCoverage
from newsflow.digest.entries import DigestEntry, digest_entries
from newsflow.scoring.importance import COMPONENTS, DEFAULT_SCORE_CONFIG, rescore_components
from tests.test_digest_entries import START, WIN, _records


def _bits(xs: list[float]) -> list[bytes]:
    return [struct.pack("<d", x) for x in xs]  # tells -0.0 from 0.0, compares NaN


# ---- sum() and round() on columns ----------------------------------------------------------
def test_py_round_is_round() -> None:
    rng = random.Random(7)
    xs = [rng.uniform(-1, 1) * 10 ** rng.randint(-12, 14) for _ in range(20_000)]
    xs += [k / 8 for k in range(-200, 200)] + [k / 1000 + 0.0005 for k in range(2000)]  # ties
    xs += [2.675, 1.005, 0.125, 0.375, -0.0, 0.0, 1e300, -1e-300, 2.0**52 + 0.5, 2.0**60,
           math.inf, -math.inf, math.nan, 99.995, 100.0, 14.995]
    for nd in (0, 1, 2, 9, 15, 17):
        got = R.py_round(np.array(xs), nd)
        want = [round(x, nd) for x in xs]
        assert _bits(got) == _bits(want), nd


def test_builtin_sum_is_sum() -> None:
    """The same floats as the running interpreter's ``sum()`` (plain on 3.11, compensated from
    3.12), with mixed magnitudes and cancellations."""
    rng = random.Random(11)
    cols = []
    for _ in range(5):
        col = [rng.choice([rng.uniform(0, 100), rng.uniform(-1e16, 1e16), rng.uniform(-1, 1) * 1e-9,
                           float(rng.randint(-3, 3)), 1e308, -1e308, 0.1, -0.0]) for _ in range(20_000)]
        cols.append(col)
    got = R._builtin_sum([np.array(c) for c in cols]).tolist()
    want = [sum(t) for t in zip(*cols, strict=True)]
    assert _bits(got) == _bits(want)


# ---- window selection and re-scoring ------------------------------------------------------
def _window_mix(seed: int = 5) -> list[dict]:
    """Scored articles with revisions and re-emits, URL duplicates (one preferred), near
    duplicates, articles outside the window, records without components."""
    recs = _records(300, seed)
    rng = random.Random(seed)
    out = list(recs)
    for r in rng.sample(recs, 40):  # later revisions and re-emits of the same article
        out.append({**r, "revision_no": 1, "title": r["title"] + " (updated)", "importance": 50.0})
        out.append(dict(r))
    for k, r in enumerate(rng.sample(recs, 30)):
        d = {**r, "key": f"dup{k}", "article_id": f"dup{k}", "disposition": "exact_duplicate",
             "duplicate_of": r["article_id"], "preferred": k % 2 == 0, "word_count": 900,
             "title": "Preferred copy " + r["title"], "url": f"https://copy.example/{k}", "publisher": f"Copy {k % 4}"}
        out.append(d)
        if k % 3 == 0:
            out.append({**d, "key": f"near{k}", "article_id": f"near{k}", "disposition": "near_duplicate"})
    for k, r in enumerate(rng.sample(recs, 20)):  # outside the window / unusual records
        if k % 2:
            out.append({**r, "key": f"old{k}", "article_id": f"old{k}", "published_at": ms_to_iso(START - 10)})
        else:
            out.append({**r, "key": f"nc{k}", "article_id": f"nc{k}", "importance_components": None})
    rng.shuffle(out)
    return out


def test_window_columns_equal_the_record_by_record_pass() -> None:
    ents = digest_entries(_window_mix())
    cfg = DigestConfig()
    fast = S._window_columns(ents, WIN, cfg)
    assert fast is not None
    slow = S._window_pass(ents, WIN, cfg, range(len(ents)), scored_too=True)
    assert fast.aids == slow.aids and fast.arts == slow.arts
    assert (fast.duplicates, fast.copies) == (slow.duplicates, slow.copies)
    for k in S._COLUMNS:
        assert getattr(fast.cols, k) == [getattr(r, k) for r in slow.arts], k
    # a scored entry without a time takes the record-by-record pass
    assert S._window_columns(_timeless(ents), WIN, cfg) is None


def _timeless(ents: list[DigestEntry]) -> list[DigestEntry]:
    """The entries with the first scored one's times gone."""
    i = next(i for i, e in enumerate(ents) if e.disposition in S.SCORED_DISPOSITIONS)
    return [*ents[:i], dataclasses.replace(ents[i], published_ms=None, fetched_ms=None), *ents[i + 1:]]


def _reference_select(records, window, config, adjust):
    """select_records and story_copies as they were before the one-pass selection (the spec)."""
    preferred = {}
    for r in records:
        if r.disposition != "exact_duplicate" or not r.preferred:
            continue
        root = r.duplicate_of
        if not root:
            continue
        cur = preferred.get(root)
        k = (int(r.word_count or 0), str(r.key or ""))
        if cur is None or k > (int(cur.word_count or 0), str(cur.key or "")):
            preferred[root] = r
    latest, dup_keys = {}, set()
    for r in records:
        try:
            t = S.article_time_ms(r, config.time_basis)
        except (KeyError, TypeError, ValueError):
            continue
        if not window.start_ms <= t < window.end_ms:
            continue
        disp = r.disposition
        if disp not in S.SCORED_DISPOSITIONS:
            if disp in S.DUPLICATE_DISPOSITIONS:
                dup_keys.add(str(r.key or r.article_id or ""))
            continue
        aid = r.article_id
        if not aid:
            continue
        aid = str(aid)
        cur = latest.get(aid)
        if cur is None or S.record_key(r) > S.record_key(cur):
            latest[aid] = r
    arts = [latest[a] for a in sorted(latest)]
    for i, r in enumerate(arts):
        p = preferred.get(str(r.article_id))
        if p is not None:
            arts[i] = dataclasses.replace(r, **{f: getattr(p, f) for f in S._SHOWN_FIELDS if getattr(p, f) is not None})
    arts = [adjust(r) for r in arts]
    sel = [r for r in arts if S.importance_of(r) >= config.min_importance]
    seen, copies = set(), {}
    for r in records:
        if r.disposition not in S.DUPLICATE_DISPOSITIONS or not r.story_id:
            continue
        key = str(r.article_id or r.key or "")
        if key in seen:
            continue
        try:
            if not window.contains(S.article_time_ms(r, config.time_basis)):
                continue
        except (KeyError, TypeError, ValueError):
            continue
        seen.add(key)
        pub = str(r.publisher or r.feed_id or "")
        copies.setdefault(str(r.story_id), []).append((pub, r.tier))
    return sel, len(arts), len(dup_keys), copies


@pytest.mark.parametrize("time_basis", ["published", "fetched"])
def test_selection_on_columns_equals_select_records(time_basis: str) -> None:
    recs = _window_mix()
    cov = StoryCoverage().extend(recs)
    for k in range(7):
        cov.add_health({"feed_id": f"f{k}", "at": ms_to_iso(START + k * 3_600_000), "reliability": 0.5 + k / 14})
    cfg = DigestConfig(time_basis=time_basis, min_importance=58.0)
    ents = digest_entries(recs)
    for given in (ents, _timeless(ents)):  # on columns, and one by one
        def adjust(r: DigestEntry) -> DigestEntry:
            return _rescored_as_of(r, cov, WIN.end_ms)

        want, n, dups, copies = _reference_select(given, WIN, cfg, adjust)
        assert S.select_records(given, WIN, cfg, adjust=adjust) == (want, n, dups)
        assert S.story_copies(given, WIN, cfg) == copies
        w = S.window_records(given, WIN, cfg)
        sel = R.select_rescored(w, cov, WIN.end_ms, cfg, DEFAULT_SCORE_CONFIG)
        assert (len(w.arts), w.duplicates, w.copies) == (n, dups, copies)
        assert list(sel) == want
        assert sel.scores == [S.importance_of(r) for r in want]
        assert sel.aids == [r.article_id for r in want]
        assert 0 < len(sel) < n and copies


def _rescored_as_of(rec: DigestEntry, cov: StoryCoverage, end_ms: int) -> DigestEntry:
    """The reference: the record re-scored on its own by the scoring rule
    (:func:`newsflow.scoring.importance.rescore_components`) with its story's publishers and
    tiers and its feed's reliability as of ``end_ms``; unchanged without every component."""
    comps = rec.importance_components
    if not isinstance(comps, dict) or not all(c in comps for c in COMPONENTS):
        return rec
    pubs, tiers = cov.as_of(rec.story_id, end_ms)
    imp = rescore_components(comps, rec.tier, rec.story_counts, publishers=len(pubs), tiers=len(tiers),
                             reliability=cov.reliability_of(rec.feed_id, end_ms), config=DEFAULT_SCORE_CONFIG)
    return dataclasses.replace(rec, importance=imp.score, importance_components=None,
                               story_publishers=pubs or rec.story_publishers, story_tiers=tiers or rec.story_tiers)


def test_rescore_columns_equals_the_scoring_rule() -> None:
    recs = _records(400, seed=9)
    cov = StoryCoverage().extend(recs)
    for k in range(7):
        cov.add_health({"feed_id": f"f{k}", "at": ms_to_iso(START + k * 3_600_000), "reliability": 0.3 + k / 10})
    w = S.window_records(digest_entries(recs), WIN, DigestConfig())
    for end in (START + 86_400_000, WIN.end_ms):
        scores, covs = R._rescore_columns(w, cov, end, DEFAULT_SCORE_CONFIG)
        want = [_rescored_as_of(r, cov, end) for r in w.arts]
        assert _bits(scores) == _bits([S.importance_of(r) for r in want])
        assert [c[1] if c else None for c in covs] == [r.story_tiers for r in want]
    # ints, bools and ints beyond int64 among the floats compute as the builtin float * int
    # does; an article without components keeps its importance; a string or None is an error
    for k, v in ((0, 100), (1, True), (2, 2**62 + 1), (3, 2**70)):
        w.cols.importance_components[k] = c = {**w.cols.importance_components[k], "recency": v}
        w.arts[k] = dataclasses.replace(w.arts[k], importance_components=c)
        scores, covs = R._rescore_columns(w, cov, WIN.end_ms, DEFAULT_SCORE_CONFIG)
        want = [_rescored_as_of(r, cov, WIN.end_ms) for r in w.arts]
        assert _bits(scores) == _bits([S.importance_of(r) for r in want])
    w.cols.importance_components[4] = None
    w.arts[4] = dataclasses.replace(w.arts[4], importance_components=None)
    scores, covs = R._rescore_columns(w, cov, WIN.end_ms, DEFAULT_SCORE_CONFIG)
    assert scores[4] == S.importance_of(w.arts[4]) and covs[4] is None
    assert _bits(scores) == _bits([S.importance_of(_rescored_as_of(r, cov, WIN.end_ms)) for r in w.arts])
    for v in ("5", None):
        odd = [dict(c) if c else None for c in w.cols.importance_components]
        odd[5]["depth"] = v  # type: ignore[index]
        cols = dataclasses.replace(w.cols, importance_components=odd)
        with pytest.raises(TypeError):
            R._rescore_columns(S.WindowRecords(w.arts, w.aids, cols, 0, {}), cov, WIN.end_ms, DEFAULT_SCORE_CONFIG)


# ---- clustering ------------------------------------------------------------------------
def _rows(n: int, seed: int) -> sp.csr_matrix:
    """L2-normalized rows: topics of shared terms (some in most rows), rare terms, copies."""
    rng = np.random.default_rng(seed)
    rows, cols, vals = [], [], []
    for i in range(n - 1):
        topic = int(rng.integers(0, 25))
        terms = set(rng.choice(40, 6).tolist())  # common terms: dense in the product
        terms |= set((100 + topic * 30 + rng.choice(30, 12)).tolist())
        terms |= set((2000 + rng.choice(5000, 5)).tolist())  # rare terms
        for t in sorted(terms):
            rows.append(i)
            cols.append(t)
            vals.append(float(rng.uniform(0.1, 2.0)))
    first = [k for k, r in enumerate(rows) if r == 0]
    rows += [n - 1] * len(first)  # identical documents: distance 0
    cols += [cols[k] for k in first]
    vals += [vals[k] for k in first]
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, 7000))
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X)
    X.sort_indices()
    return X


def _same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr)
            and np.array_equal(a.indices, b.indices) and _bits(a.data.tolist()) == _bits(b.data.tolist()))


@pytest.mark.parametrize("eps", [0.2, 0.4, 0.6])
def test_radius_graph_from_candidates_is_the_sparse_products_graph(eps: float, monkeypatch) -> None:
    X = _rows(700, seed=int(eps * 10))
    ref = W._radius_graph_sparse(X, eps)
    assert ref.nnz > 0
    assert _same(W.radius_graph(X, eps), ref)
    big = sp.csr_matrix(X * 1.5)  # rows not unit: the float64 approximate product
    assert _same(W.radius_graph(big, eps), W._radius_graph_sparse(big, eps))
    monkeypatch.setattr(W, "_ONE_CHUNK", 100)  # chunked approximate products
    assert _same(W.radius_graph(X, eps, chunk=128), ref)
    monkeypatch.setattr(W, "_DENSE_BUDGET", 0)  # no dense part
    assert _same(W.radius_graph(X, eps), ref)


def test_row_centroid_dots() -> None:
    """X[i] . C[cid[i]] with C the clusters' sums (the sort) and any C (the binary search)."""
    X = _rows(400, seed=4)
    cid = np.random.default_rng(2).integers(0, 30, 400)
    M = sp.csr_matrix((np.ones(400), (cid, np.arange(400))), shape=(30, 400))
    keep = sp.diags((np.arange(7000) < 3000).astype(np.float64))
    for C in (sp.csr_matrix(M @ X), sp.csr_matrix(M @ X @ keep)):  # all terms / some dropped
        C.eliminate_zeros()
        C.sort_indices()
        want = [float(X[i].multiply(C[int(cid[i])]).sum()) for i in range(400)]
        assert np.allclose(T._row_centroid_dots(X, C, cid), want, rtol=1e-12, atol=1e-15)


def test_exact_dots_are_the_sparse_products() -> None:
    X = _rows(300, seed=3)
    S = (X @ X.T.tocsr()).toarray()
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, 300, 5000), rng.integers(0, 300, 5000)
    assert _bits(W._exact_dots(X, i, j).tolist()) == _bits(S[i, j].tolist())


def test_exact_dots_in_blocks_are_the_same_floats(monkeypatch) -> None:
    X = _rows(300, seed=5)
    rng = np.random.default_rng(1)
    i, j = rng.integers(0, 300, 4000), rng.integers(0, 300, 4000)
    whole = _bits(W._exact_dots(X, i, j).tolist())
    monkeypatch.setattr(W, "_PAIR_TERMS", 997)  # ~20 pairs per block, cut anywhere
    assert _bits(W._exact_dots(X, i, j).tolist()) == whole


def test_radius_graph_of_near_copies_takes_the_sparse_product(monkeypatch) -> None:
    """A window of near-copies (one template, every pair within eps): the candidates' exact dots
    would copy both rows of ~n^2/2 pairs; the graph comes from the plain sparse product, the
    same graph."""
    n = 600
    rng = np.random.default_rng(7)
    rows, cols, vals = [], [], []
    for i in range(n):
        for t in sorted({*range(12), *(12 + rng.choice(6, 2)).tolist()}):  # 12 shared terms + 2 of 6
            rows.append(i)
            cols.append(t)
            vals.append(float(rng.uniform(0.9, 1.1)))
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n, 18))
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X)
    X.sort_indices()
    ref = W._radius_graph_sparse(X, 0.4)
    assert ref.nnz == n * (n - 1)  # every pair
    monkeypatch.setattr(W, "_exact_dots", lambda *a: pytest.fail("exact dots of every pair"))
    assert _same(W.radius_graph(X, 0.4), ref)
    monkeypatch.setattr(W, "_PIECE_PAIRS", 5000)  # pieces of 8 rows: the same graph
    assert _same(W.radius_graph(X, 0.4), ref)
    assert W.dbscan_labels(X, 0.4, 2).tolist() == [0] * n


def test_vocabulary_positions_are_uniques_inverse() -> None:
    rng = np.random.default_rng(1)
    for vals in (rng.integers(0, 2**63, 50_000, dtype=np.uint64).repeat(3),
                 rng.integers(0, 2000, 50_000).astype(np.uint64),  # skewed: binary search
                 np.array([5], dtype=np.uint64), np.zeros(0, dtype=np.uint64)):
        rng.shuffle(vals)
        v, inv = np.unique(vals, return_inverse=True)
        got = W._sorted_unique(vals)
        assert np.array_equal(got, v)
        assert np.array_equal(W._positions(got, vals), inv.ravel())


def test_story_groups_of_columns() -> None:
    sel = [{"story_id": s, "article_id": f"a{i}"} for i, s in enumerate(["x", "y", None, "x", "", "z", "y"])]
    got, n = W.story_groups(sel)
    assert (got.tolist(), n) == ([0, 1, 2, 0, 3, 4, 1], 5)
    got, n = W.story_groups([{"story_id": s, "article_id": "a"} for s in ["b", "a", "b"]])
    assert (got.tolist(), n) == ([0, 1, 0], 2)


def test_joined_id_is_stable_id() -> None:
    for parts in ([], ["a"], ["a", "b"], ["ab"], ["x\ud800y", "é", ""], [f"id{i}" for i in range(500)]):
        assert T._joined_id(parts) == stable_id(*parts)


# ---- the garbage collector pause -------------------------------------------------------
def test_gc_is_paused_during_assembly_and_restored() -> None:
    seen = []
    orig = A._assemble

    def spy(*a, **k):
        seen.append(gc.isenabled())
        with gc_paused():  # re-entrant
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())
        return orig(*a, **k)

    recs = _records(50)
    try:
        A._assemble = spy
        assert gc.isenabled()
        d1 = A.assemble_digest(recs, WIN)
        assert gc.isenabled() and seen == [False, False, False]
        gc.disable()  # a caller that paused it itself keeps it paused
        A.assemble_digest(recs, WIN)
        assert not gc.isenabled()
    finally:
        gc.enable()
        A._assemble = orig
    assert orjson.dumps(A.assemble_digest(recs, WIN)) == orjson.dumps(d1)


def test_scores_rescored_from_entries_and_records_agree() -> None:
    """A whole digest: records with every unusual case give the same bytes as their entries
    (columns), and entries with one that has no time (record by record) the same bytes as
    the entries without it."""
    recs = _window_mix(seed=8)
    cov = StoryCoverage().extend(recs)
    a = orjson.dumps(A.assemble_digest(recs, WIN, coverage=cov))
    ents = digest_entries(recs)
    b = orjson.dumps(A.assemble_digest(ents, WIN, coverage=cov))
    assert a == b
    odd = _timeless(ents)
    i = next(i for i, (e, o) in enumerate(zip(ents, odd, strict=True)) if e is not o)
    c = orjson.dumps(A.assemble_digest(odd, WIN, coverage=cov))
    assert c == orjson.dumps(A.assemble_digest([*ents[:i], *ents[i + 1:]], WIN, coverage=cov))
