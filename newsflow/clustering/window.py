"""Batch clustering of one digest window: TF-IDF rows, DBSCAN over a cosine radius graph, Ward.

Exact DBSCAN (cosine, eps 0.4, min_samples 2; docs/rules.md#topic-clustering) on a sparse
radius graph blocked by k-means so large windows stay sub-quadratic; Ward with ``n_topics`` as
the alternative.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, cast

import numpy as np
import scipy.sparse as sp

from newsflow.text.tokenize import TextFeatures


class ClusteringParams(Protocol):
    """The parameters this module reads (``newsflow.digest.config.DigestConfig`` has them)."""

    @property
    def eps(self) -> float: ...
    @property
    def min_samples(self) -> int: ...
    @property
    def n_topics(self) -> int | None: ...
    @property
    def group_by_story(self) -> bool: ...
    @property
    def exact_max(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def svd_dims(self) -> int: ...
    @property
    def ward_max_points(self) -> int: ...

# --------------------------------------------------------------------------------------
# Text features: TF-IDF over the window, built from stable token hashes
# --------------------------------------------------------------------------------------


def tfidf_matrix(feats: Sequence[TextFeatures]) -> tuple[sp.csr_matrix, np.ndarray]:
    """L2-normalized TF-IDF rows (smooth IDF ``ln((1+n)/(1+df)) + 1``, as scikit-learn) of the
    window's documents; columns are the sorted unique stem hashes (returned)."""
    n = len(feats)
    lens = np.fromiter((len(f.hashes) for f in feats), dtype=np.int64, count=n)
    allh = np.concatenate([f.hashes for f in feats]) if lens.sum() else np.zeros(0, np.uint64)
    vocab, cols = np.unique(allh, return_inverse=True)
    rows = np.repeat(np.arange(n, dtype=np.int64), lens)
    X = sp.csr_matrix(
        (np.ones(len(cols), dtype=np.float64), (rows, cols.ravel())), shape=(n, len(vocab))
    )
    X.sum_duplicates()
    X.sort_indices()
    df = np.bincount(X.indices, minlength=len(vocab))
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    X.data *= idf[X.indices]
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0.0] = 1.0
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    X.sort_indices()
    return X, vocab


def tfidf_from_counts(
    hashes: Sequence[bytes], counts: Sequence[bytes]
) -> tuple[sp.csr_matrix, np.ndarray]:
    """:func:`tfidf_matrix` from precomputed term vectors: per document, its sorted unique stem
    hashes (``uint64`` bytes) and their counts (``uint8`` bytes), e.g. the entries of
    :mod:`newsflow.digest.entries`. A few vectorized calls for the whole window: no text is
    analyzed again."""
    n = len(hashes)
    lens = np.fromiter(map(len, hashes), dtype=np.int64, count=n) // 8
    allh = np.frombuffer(b"".join(hashes), dtype=np.uint64)
    allc = np.frombuffer(b"".join(counts), dtype=np.uint8).astype(np.float64)
    vocab = _sorted_unique(allh)
    cols = _positions(vocab, allh)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    X = sp.csr_matrix((allc, cols, indptr), shape=(n, len(vocab)))
    X.sort_indices()
    df = np.bincount(X.indices, minlength=len(vocab))
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    X.data *= idf[X.indices]
    norms = np.sqrt(np.bincount(np.repeat(np.arange(n), lens), weights=X.data * X.data, minlength=n))
    norms[norms == 0.0] = 1.0
    X.data /= np.repeat(norms, lens)
    return X, vocab


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` (sorted distinct values), by one sort (SIMD for integers) and a mask."""
    if len(a) == 0:
        return a.copy()
    s = np.sort(a)
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _positions(vocab: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Index in ``vocab`` (sorted, distinct ``uint64``) of each of ``values`` (all in ``vocab``):
    ``np.searchsorted(vocab, values)``, i.e. the inverse of ``np.unique``, without a binary
    search per value. The top bits of a value pick its bucket of ``vocab`` (stem hashes are
    uniform), and each value steps from its bucket's first index to its own (a bucket holds
    ~1/4 value on average); skewed values fall back to the binary search."""
    if len(values) == 0 or len(vocab) < 2:
        return np.zeros(len(values), dtype=np.int64)
    bits = min(24, max(4, int(len(vocab) - 1).bit_length() + 2))
    shift = np.uint64(64 - bits)
    start = np.zeros((1 << bits) + 1, dtype=np.int64)
    np.cumsum(np.bincount((vocab >> shift).astype(np.int64), minlength=1 << bits), out=start[1:])
    if int(np.diff(start).max()) > 32:  # not uniform: a step loop would be long
        return np.searchsorted(vocab, values).astype(np.int64)
    pos = start[(values >> shift).astype(np.int64)]
    todo = np.flatnonzero(vocab[pos] != values)
    while len(todo):
        pos[todo] += 1
        todo = todo[vocab[pos[todo]] != values[todo]]
    return pos


_DMIN = 1e-12  # stored instead of a 0 distance (sparse graphs drop explicit zeros)
#: a piece of a radius graph's edges: rows, columns, distances
Edges = tuple[np.ndarray, np.ndarray, np.ndarray]


def radius_graph(X: sp.csr_matrix, eps: float, chunk: int = 512) -> sp.csr_matrix:
    """The graph of :func:`radius_edges`."""
    return _graph(X.shape[0], _joined(radius_edges(X, eps, chunk)))


def radius_edges(X: sp.csr_matrix, eps: float, chunk: int = 512) -> Iterator[Edges]:
    """Exact sparse cosine-distance graph of all pairs ``i != j`` with distance <= ``eps``
    (rows of ``X`` L2-normalized): the neighbourhoods DBSCAN(metric="cosine") uses, from
    chunked products instead of a dense n x n matrix. O(n^2) pairs: for n up to
    ``DigestConfig.exact_max``.

    Each kept pair's similarity is the float ``X @ X.T`` gives (scipy's sparse product: the
    same products added in the same order), so the graph is the same whichever way the pairs
    are found: from ``_HYBRID_MIN`` rows up, a cheaper approximate product (BLAS in float32
    for the terms most rows share, sparse for the rest) picks the pairs within a margin of the
    threshold larger than its worst-case error (float32 rounding of each product and sum:
    ``(terms + 8) * 2**-23``; float64 for rows not L2-normalized: 1e-9), and only those are then
    computed exactly (:func:`_exact_dots`). (On 1,714 story centroids of a weekly window the
    plain sparse product costs ~4x more: almost every pair shares some term.) When the
    candidates are so many that their exact dots would cost more than the plain product (a
    window of near-copies, every pair within ``eps``), the plain product it is.

    Yields the graph's edges in pieces (rows, columns, distances; both directions of a pair),
    so that a reader that needs no graph holds one piece at a time (:func:`dbscan_labels`)."""
    n = X.shape[0]
    thr = 1.0 - eps - 1e-9
    X = sp.csr_matrix(X)
    if n < _HYBRID_MIN or thr <= 2 * _MARGIN or not X.has_canonical_format:
        yield from _sparse_edges(X, eps, chunk)
        return
    norm2 = float(np.bincount(np.repeat(np.arange(n), np.diff(X.indptr)), weights=X.data * X.data,
                              minlength=n).max())
    df = np.bincount(X.indices, minlength=X.shape[1])
    # a term of d rows costs d^2 scattered products in the sparse product, n^2 dense ones
    # (BLAS, ~100x cheaper each): dense when d > n / 24, within a memory budget
    by_df = np.argsort(-df, kind="stable")
    n_heavy = min(int((df > n // 24).sum()), max(0, _DENSE_BUDGET // n))
    heavy = np.sort(by_df[:n_heavy])
    light = np.sort(by_df[n_heavy:][df[by_df[n_heavy:]] >= 2])  # a term of one row pairs none
    single = norm2 <= 4.0  # float32 for (near) unit rows: no overflow, a known relative error
    dtype = np.float32 if single else np.float64
    margin = ((2.0 * (n_heavy + 8) * 2.0**-24 if single else 0.0) + _MARGIN) * max(1.0, norm2)
    lo = dtype(thr - 2.0 * margin)  # (rounded to the product's type: still below thr - margin)
    D = X[:, heavy].toarray().astype(dtype, copy=False) if n_heavy else None
    L = X[:, light].tocsr() if len(light) else None
    LT = L.T.tocsr() if L is not None else None
    # the exact dots of the candidates cost ~ the terms of both rows of every pair, the plain
    # sparse product ~ df^2 per term, ~_EXACT_COST times less per unit (measured): when the
    # candidates are that many (a window of near-copies, all within eps of each other), the
    # product is the smaller job (2,133 story rows of one template: 2.3M pairs, whose copied
    # rows held 3.8 GB for 15 s; 2,400 rows of 24 terms: 4.6 s against 0.97 s). A weekly
    # window of 1,714 UCI stories spends ~1/100 of the product on its candidates.
    rn = np.diff(X.indptr)
    budget = float(np.square(df, dtype=np.float64).sum())
    spent = 0.0
    ri, ci = [], []
    step = n if n <= _ONE_CHUNK else chunk  # one chunk: D @ D.T is one symmetric BLAS product
    for s in range(0, n, step):
        e = min(n, s + step)
        S = D[s:e] @ D.T if D is not None else np.zeros((e - s, n), dtype=dtype)
        if L is not None and LT is not None:
            P = (L[s:e] @ LT).tocoo()
            S[P.row, P.col] += P.data.astype(dtype, copy=False)
        r, c = np.nonzero(lo <= S)
        r = r.astype(np.int64) + s
        c = c.astype(np.int64)
        up = r < c  # the product is symmetric (the same products in the same order): i < j
        ri.append(r[up])
        ci.append(c[up])
        spent += _EXACT_COST * float(rn[ri[-1]].sum() + rn[ci[-1]].sum())
        if spent > budget:  # (the same graph either way: the candidates only pick the pairs)
            yield from _sparse_edges(X, eps, chunk)
            return
    rows = np.concatenate(ri) if ri else np.zeros(0, np.int64)
    cols = np.concatenate(ci) if ci else np.zeros(0, np.int64)
    sims = _exact_dots(X, rows, cols)
    keep = sims >= thr
    rows, cols, dist = rows[keep], cols[keep], np.maximum(1.0 - sims[keep], _DMIN)
    yield rows, cols, dist
    yield cols, rows, dist


#: from this many rows, :func:`radius_graph` finds candidate pairs approximately first
_HYBRID_MIN = 256
#: cost of one row term of a candidate pair in :func:`_exact_dots` against one product of the
#: plain sparse product (:func:`_sparse_edges`)
_EXACT_COST = 4.0
#: candidate margin around the threshold beyond the approximate product's own error
_MARGIN = 1e-9
#: up to this many rows, the approximate product is one chunk
_ONE_CHUNK = 2048
#: dense part of the approximate product: at most this many floats (rows x dense terms)
_DENSE_BUDGET = 4_000_000


def _radius_graph_sparse(X: sp.csr_matrix, eps: float, chunk: int = 512) -> sp.csr_matrix:
    """:func:`radius_graph` from the plain product of all pairs alone (:func:`_sparse_edges`):
    the reference the hybrid path is tested against."""
    return _graph(X.shape[0], _joined(_sparse_edges(X, eps, chunk)))


def _sparse_edges(X: sp.csr_matrix, eps: float, chunk: int = 512) -> Iterator[Edges]:
    """:func:`radius_edges` by chunked sparse products of all pairs, a piece per chunk of rows
    (at most ``chunk``, fewer when ``n`` is large: a chunk's product holds up to rows x n)."""
    n = X.shape[0]
    XT = X.T.tocsr()
    thr = 1.0 - eps - 1e-9
    chunk = max(1, min(chunk, _PIECE_PAIRS // max(n, 1)))
    for s in range(0, n, chunk):
        S = (X[s : s + chunk] @ XT).tocoo()
        r = S.row.astype(np.int64) + s
        keep = (S.data >= thr) & (r != S.col)
        yield r[keep], S.col[keep].astype(np.int64), np.maximum(1.0 - S.data[keep], _DMIN)


def _exact_dots(X: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``(X @ X.T)[rows[p], cols[p]]`` for each pair ``p`` (0 when they share no term), the
    very floats scipy's sparse product gives (``X`` canonical: sorted indices, no duplicates):
    that product sums ``X[i, k] * X[j, k]`` over the shared terms ``k`` in ``X[i]``'s order.
    Here pair ``p`` is row ``p`` of ``A`` holding ``X[i, k]`` of its shared terms (in that
    order, each in a column of its own) and ``B`` maps each such column to ``X[j, k]`` in
    column ``p``: ``A @ B`` runs the same kernel on the same operands in the same order, so
    its diagonal is bit-identical (with or without fused multiply-adds)."""
    m = len(rows)
    if m == 0:
        return np.zeros(0)
    # in blocks of pairs holding at most _PAIR_TERMS terms of their rows (each pair's dot is
    # its own: the same floats however the pairs are cut), so memory stays bounded
    rn = np.diff(X.indptr)
    ends = np.cumsum(rn[rows] + rn[cols])
    if ends[-1] > _PAIR_TERMS:
        cuts = np.searchsorted(ends, np.arange(_PAIR_TERMS, int(ends[-1]), _PAIR_TERMS), side="right")
        bounds = [0, *np.unique(np.maximum(cuts, 1)).tolist(), m]
        return np.concatenate([_exact_dots_block(X, rows[a:b], cols[a:b])
                               for a, b in itertools.pairwise(bounds) if b > a])
    return _exact_dots_block(X, rows, cols)


#: at most this many row terms (both rows of each pair) per block of :func:`_exact_dots`
_PAIR_TERMS = 1 << 21
#: at most this many pairs per chunk of the plain sparse product (:func:`_sparse_edges`)
_PIECE_PAIRS = 1 << 20


def _exact_dots_block(X: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    m = len(rows)
    Xi, Xj = X[rows], X[cols]
    a = Xi.multiply(Xj != 0).tocsr()  # X[i, k] at the shared terms, in X[i]'s (sorted) order
    b = Xj.multiply(Xi != 0).tocsr()  # X[j, k] at the same terms
    a.sort_indices()
    b.sort_indices()
    if not (np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)):
        msg = "shared terms differ"  # canonical inputs: never
        raise AssertionError(msg)
    nz = len(a.data)
    A = sp.csr_matrix((a.data, np.arange(nz, dtype=np.int64), a.indptr), shape=(m, max(nz, 1)))
    B = sp.csr_matrix((b.data, np.repeat(np.arange(m, dtype=np.int64), np.diff(b.indptr)),
                       np.arange(nz + 1, dtype=np.int64)), shape=(max(nz, 1), m))
    return np.asarray((A @ B).diagonal())


def _lloyd(Z: np.ndarray, k: int, seed: int, iters: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """A small seeded Lloyd's k-means (init: k rows from a seeded permutation; empty clusters
    keep their centre): (squared distances to the centres, centres). Deterministic, BLAS."""
    rng = np.random.default_rng(seed)
    C = Z[rng.permutation(len(Z))[:k]].copy()
    zz = np.einsum("ij,ij->i", Z, Z)[:, None]
    for _ in range(iters):
        d = zz - 2.0 * (Z @ C.T) + np.einsum("ij,ij->i", C, C)[None, :]
        lab = d.argmin(axis=1)
        cnt = np.bincount(lab, minlength=k).astype(np.float64)
        S = np.zeros_like(C)
        np.add.at(S, lab, Z)
        nz = cnt > 0
        C[nz] = S[nz] / cnt[nz, None]
    return zz - 2.0 * (Z @ C.T) + np.einsum("ij,ij->i", C, C)[None, :], C


def _kmeans_distances(Z: np.ndarray, k: int, seed: int, iters: int = 12) -> np.ndarray:
    return _lloyd(Z, k, seed, iters)[0]


def blocked_radius_graph(
    X: sp.csr_matrix, eps: float, block_size: int = 3000, seed: int = 0, overlap: int = 2
) -> sp.csr_matrix:
    """Approximate :func:`radius_graph` for large n: seeded k-means on a 64-d random
    projection of the TF-IDF cuts the rows into ~``block_size`` blocks; every row joins the
    blocks of its ``overlap`` nearest centres, and neighbourhoods are computed exactly inside
    each block (blocks still too big are split again without overlap). Near neighbours that
    never share a block are missed (on 10,000 documents the blocks found 93 % of the exact
    neighbour pairs, ARI 0.985 against exact DBSCAN).
    Deterministic: fixed seeds."""
    n = X.shape[0]
    r, c, v = _joined(blocked_radius_edges(X, eps, block_size, seed, overlap))
    _, first = np.unique(r.astype(np.int64) * n + c, return_index=True)  # pairs found twice
    return _graph(n, (r[first], c[first], v[first]))


def blocked_radius_edges(
    X: sp.csr_matrix, eps: float, block_size: int = 3000, seed: int = 0, overlap: int = 2
) -> Iterator[Edges]:
    """The edges of :func:`blocked_radius_graph` in pieces, a pair found in two blocks twice."""
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    Z = np.asarray(X @ rng.standard_normal((X.shape[1], 64)))
    Z /= np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-12)
    todo: list[tuple[np.ndarray, int]] = [(np.arange(n), overlap)]
    while todo:
        idx, ov = todo.pop()
        if len(idx) <= block_size:
            for r, c, v in radius_edges(X[idx], eps):
                yield idx[r], idx[c], v
            continue
        k = max(2, int(np.ceil(len(idx) / block_size)))
        d = _kmeans_distances(Z[idx], k, seed)
        near = np.argsort(d, axis=1, kind="stable")[:, : max(1, min(ov, k))]
        parts = [idx[(near == j).any(axis=1)] for j in range(k)]
        parts = [p for p in parts if len(p)]
        if max(len(p) for p in parts) >= len(idx):  # cannot split: cut in order
            parts = [idx[i : i + block_size] for i in range(0, len(idx), block_size)]
        todo.extend((p, 1) for p in parts)


def _joined(edges: Iterable[Edges]) -> Edges:
    """The pieces of a graph's edges as one (rows, columns, distances)."""
    rs, cs, vs = [], [], []
    for r, c, v in edges:
        rs.append(r)
        cs.append(c)
        vs.append(v)
    return (np.concatenate(rs) if rs else np.zeros(0, np.int64), np.concatenate(cs) if cs else np.zeros(0, np.int64),
            np.concatenate(vs) if vs else np.zeros(0))


def _graph(n: int, edges: Edges) -> sp.csr_matrix:
    r, c, v = edges
    G = sp.csr_matrix((v, (r, c)), shape=(n, n))
    G.sort_indices()
    return G


def dbscan_labels(
    X: sp.csr_matrix,
    eps: float = 0.4,
    min_samples: int = 2,
    *,
    sample_weight: np.ndarray | None = None,
    exact_max: int = 12_000,
    block_size: int = 3000,
) -> np.ndarray:
    """DBSCAN labels (cosine distance, -1 = noise); exact neighbourhoods up to ``exact_max``
    rows, blocked above (see :func:`blocked_radius_graph`)."""
    n = X.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if min_samples <= 2 and bool((w >= 1).all()):  # (the digest's: 2, weights = article counts)
        edges = radius_edges(X, eps) if n <= exact_max else blocked_radius_edges(X, eps, block_size)
        return linked_labels(edges, n, eps, min_samples, w)
    G = radius_graph(X, eps) if n <= exact_max else blocked_radius_graph(X, eps, block_size)
    return dbscan_precomputed(G, eps, min_samples, sample_weight)


def linked_labels(edges: Iterable[Edges], n: int, eps: float, min_samples: float, w: np.ndarray) -> np.ndarray:
    """:func:`dbscan_precomputed`'s labels of the graph of ``edges`` when every point with a
    neighbour is core (``min_samples`` <= 2, weights >= 1: a point and one neighbour weigh 2),
    without the graph: the clusters are then the connected components that hold a core point
    (every point of a component of two or more, a lone point when its own weight is enough),
    numbered by their first point, as the depth-first growth from the cores in index order
    numbers them; the other points are noise. The edges are read a piece at a time and merged
    into the components found so far, so memory does not grow with the edges: a window of
    8,000 near-copies has 64M of them."""
    from scipy.sparse.csgraph import connected_components

    comp = np.arange(n)
    linked = np.zeros(n, dtype=bool)
    for r, c, v in edges:
        keep = (v <= eps) & (r != c)  # (a stored distance just above eps is no neighbour)
        r, c = r[keep], c[keep]
        if not len(r):
            continue
        linked[r] = True
        linked[c] = True
        a, b = comp[r], comp[c]
        join = a != b
        if join.any():
            J = sp.csr_matrix((np.ones(int(join.sum()), dtype=bool), (a[join], b[join])), shape=(n, n))
            comp = connected_components(J, directed=False)[1][comp]
    core = linked | (w >= min_samples)
    labels = np.full(n, -1, dtype=np.int64)
    if not core.any():
        return labels
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, comp, np.arange(n))
    with_core = np.unique(comp[core])
    rank = np.full(n, -1, dtype=np.int64)
    rank[with_core[np.argsort(first[with_core], kind="stable")]] = np.arange(len(with_core))
    out: np.ndarray = rank[comp]
    return out


def dbscan_precomputed(
    G: sp.csr_matrix, eps: float, min_samples: int, sample_weight: np.ndarray | None = None
) -> np.ndarray:
    """``sklearn.cluster.DBSCAN(eps, min_samples, metric="precomputed").fit_predict(G,
    sample_weight)`` on a sparse distance graph, the same labels (tested against it): a
    point's neighbourhood is itself (when its diagonal distance, 0 if not stored, is <= eps)
    and the stored entries of its row <= eps; core when the weights of its neighbourhood sum
    to ``min_samples`` or more; clusters grow depth-first from the cores in index order, a
    border point joining the first cluster that reaches it.

    Why not scikit-learn's: on the digest's small graphs (one window: tens to a few thousand
    story points) its fixed cost per call — parameter validation, a ``NearestNeighbors``
    model, one object array per row — was ~7 ms of every window (74 % of a replay's time was
    digest assembly), and importing it ~2.7 s at start-up. Weights are summed in row order:
    equal to scikit-learn's for integer weights (article counts, as here)."""
    n = G.shape[0]
    G = sp.csr_matrix(G)
    lens = np.diff(G.indptr)
    rows = np.repeat(np.arange(n, dtype=np.int64), lens)
    cols = G.indices.astype(np.int64)
    keep = (G.data <= eps) & (rows != cols)
    rows, cols = rows[keep], cols[keep]
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    self_in = G.diagonal() <= eps
    nn = np.where(self_in, w, 0.0) + np.bincount(rows, weights=w[cols], minlength=n)
    core = nn >= min_samples
    labels = np.full(n, -1, dtype=np.int64)
    if not core.any():
        return labels
    # neighbourhoods of the core points only (non-core points are never expanded)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=ptr[1:])
    ptr_l, nb = ptr.tolist(), cols.tolist()
    is_core = core.tolist()
    lab = labels.tolist()
    label_num = 0
    for i in np.flatnonzero(core).tolist():
        if lab[i] != -1:
            continue
        lab[i] = label_num
        stack = [i]
        while stack:
            j = stack.pop()
            for v in nb[ptr_l[j]:ptr_l[j + 1]]:
                if lab[v] == -1:
                    lab[v] = label_num
                    if is_core[v]:
                        stack.append(v)
        label_num += 1
    return np.asarray(lab, dtype=np.int64)


def story_groups(sel: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, int]:
    """Group index of each article: articles of one story (``story_id``) form one group, an
    article without a story is its own group. Groups are numbered by first appearance."""
    return story_groups_of([r.get("story_id") for r in sel], [r.get("article_id") for r in sel])


def story_groups_of(story_ids: Sequence[Any], article_ids: Sequence[Any]) -> tuple[np.ndarray, int]:
    """:func:`story_groups` of the articles' story ids and article ids (columns)."""
    sids = story_ids
    if all(sids) and set(map(type, sids)) == {str}:  # the usual case: every article has a story
        first = {k: g for g, k in enumerate(dict.fromkeys(sids))}  # numbered by first appearance
        return np.fromiter(map(first.__getitem__, sids), np.int64, len(sids)), len(first)
    gid: dict[str, int] = {}
    keys = [f"s:{sid}" if sid else f"a:{aid}" for sid, aid in zip(sids, article_ids, strict=True)]
    out = [gid.setdefault(k, len(gid)) for k in keys]
    return np.asarray(out, dtype=np.int64).reshape(len(out)), len(gid)


def group_rows(X: sp.csr_matrix, group: np.ndarray, n_groups: int) -> sp.csr_matrix:
    """L2-normalized sum (= direction of the mean) of each group's rows."""
    n = X.shape[0]
    M = sp.csr_matrix((np.ones(n), (group, np.arange(n))), shape=(n_groups, n))
    G = sp.csr_matrix(M @ X)
    norms = np.sqrt(np.asarray(G.multiply(G).sum(axis=1)).ravel())
    norms[norms == 0.0] = 1.0
    G = sp.csr_matrix(sp.diags(1.0 / norms) @ G)
    G.sort_indices()
    return G


def cluster_articles(
    X: sp.csr_matrix, sel: Sequence[object], config: ClusteringParams,
    *, groups: tuple[np.ndarray, int] | None = None,
) -> np.ndarray:
    """Topic labels of the window's articles (-1 = standalone).

    DBSCAN (cosine, ``eps``, ``min_samples``) runs on *story* rows when ``group_by_story``:
    each story's articles (already matched as duplicates/same event upstream) are one point,
    its centroid, weighted by its article count, so a story is never split and DBSCAN sees
    far fewer points. ``n_topics`` switches to Agglomerative Ward. ``groups``:
    :func:`story_groups` of ``sel`` (records) when the caller has it; without it ``sel`` are
    the articles' records.
    """
    if config.n_topics:
        if config.group_by_story:
            group, ng = groups if groups is not None else story_groups(cast(Sequence[Mapping[str, Any]], sel))
            if ng < len(sel):
                per_story = ward_labels(group_rows(X, group, ng), config.n_topics, config)
                per_member: np.ndarray = per_story[group]
                return per_member
        return ward_labels(X, config.n_topics, config)
    if config.group_by_story:
        group, ng = groups if groups is not None else story_groups(cast(Sequence[Mapping[str, Any]], sel))
        if ng < len(sel):
            G = group_rows(X, group, ng)
            w = np.bincount(group, minlength=ng).astype(np.float64)
            lab = dbscan_labels(
                G,
                config.eps,
                config.min_samples,
                sample_weight=w,
                exact_max=config.exact_max,
                block_size=config.block_size,
            )
            # a multi-article story that DBSCAN left as noise is still one topic
            nxt = int(lab.max()) + 1 if len(lab) else 0
            for g in np.flatnonzero((lab < 0) & (w >= 2)):
                lab[g] = nxt
                nxt += 1
            per_article: np.ndarray = lab[group]
            return per_article
    return dbscan_labels(
        X,
        config.eps,
        config.min_samples,
        exact_max=config.exact_max,
        block_size=config.block_size,
    )


def ward_labels(X: sp.csr_matrix, k: int, config: ClusteringParams) -> np.ndarray:
    """Agglomerative clustering (Ward) into ``k`` topics on an SVD reduction of the TF-IDF
    (rows: articles, or story centroids); above ``ward_max_points`` rows, a seeded k-means
    first reduces them to that many micro-clusters, which Ward then merges."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.decomposition import TruncatedSVD

    n = X.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    k = max(1, min(k, n))
    if k == n:
        return np.arange(n)
    dims = min(config.svd_dims, X.shape[1] - 1, n - 1)
    Z = (
        TruncatedSVD(n_components=dims, random_state=0).fit_transform(X)
        if dims >= 2
        else X.toarray()
    )
    if n <= config.ward_max_points:
        ward: np.ndarray = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(Z)
        return ward
    m = max(k, config.ward_max_points)
    d, C = _lloyd(Z, m, 0, iters=8)
    micro = d.argmin(axis=1)
    used = np.unique(micro)
    if len(used) <= k:
        dense: np.ndarray = np.searchsorted(used, micro)
        return dense
    top = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(C[used])
    merged: np.ndarray = top[np.searchsorted(used, micro)]
    return merged
