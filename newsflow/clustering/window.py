"""Step 5 batch clustering of one window: TF-IDF rows, DBSCAN over a cosine radius graph, Ward.

Exact DBSCAN (cosine, eps 0.4, min_samples 2) on a sparse radius graph blocked by k-means so
large windows stay sub-quadratic; Ward with ``n_topics`` as the alternative.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

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
    lens = np.fromiter((len(h) // 8 for h in hashes), dtype=np.int64, count=n)
    allh = np.frombuffer(b"".join(hashes), dtype=np.uint64)
    allc = np.frombuffer(b"".join(counts), dtype=np.uint8).astype(np.float64)
    vocab, cols = np.unique(allh, return_inverse=True)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    X = sp.csr_matrix((allc, cols.ravel().astype(np.int64), indptr), shape=(n, len(vocab)))
    X.sort_indices()
    df = np.bincount(X.indices, minlength=len(vocab))
    idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
    X.data *= idf[X.indices]
    norms = np.sqrt(np.bincount(np.repeat(np.arange(n), lens), weights=X.data * X.data, minlength=n))
    norms[norms == 0.0] = 1.0
    X.data /= np.repeat(norms, lens)
    return X, vocab


_DMIN = 1e-12  # stored instead of a 0 distance (sparse graphs drop explicit zeros)


def radius_graph(X: sp.csr_matrix, eps: float, chunk: int = 512) -> sp.csr_matrix:
    """Exact sparse cosine-distance graph of all pairs ``i != j`` with distance <= ``eps``
    (rows of ``X`` L2-normalized): the neighbourhoods DBSCAN(metric="cosine") uses, from
    chunked sparse products instead of a dense n x n matrix. O(n^2) pairs: for n up to
    ``DigestConfig.exact_max``."""
    n = X.shape[0]
    XT = X.T.tocsr()
    thr = 1.0 - eps - 1e-9
    rs, cs, vs = [], [], []
    for s in range(0, n, chunk):
        S = (X[s : s + chunk] @ XT).tocoo()
        r = S.row.astype(np.int64) + s
        keep = (S.data >= thr) & (r != S.col)
        rs.append(r[keep])
        cs.append(S.col[keep].astype(np.int64))
        vs.append(np.maximum(1.0 - S.data[keep], _DMIN))
    return _graph(n, rs, cs, vs)


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
    never share a block are missed (measured pair recall: bench/README-digest.md).
    Deterministic: fixed seeds."""
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    Z = np.asarray(X @ rng.standard_normal((X.shape[1], 64)))
    Z /= np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-12)
    rs, cs, vs = [], [], []
    todo: list[tuple[np.ndarray, int]] = [(np.arange(n), overlap)]
    while todo:
        idx, ov = todo.pop()
        if len(idx) <= block_size:
            G = radius_graph(X[idx], eps).tocoo()
            rs.append(idx[G.row])
            cs.append(idx[G.col])
            vs.append(G.data)
            continue
        k = max(2, int(np.ceil(len(idx) / block_size)))
        d = _kmeans_distances(Z[idx], k, seed)
        near = np.argsort(d, axis=1, kind="stable")[:, : max(1, min(ov, k))]
        parts = [idx[(near == j).any(axis=1)] for j in range(k)]
        parts = [p for p in parts if len(p)]
        if max(len(p) for p in parts) >= len(idx):  # cannot split: cut in order
            parts = [idx[i : i + block_size] for i in range(0, len(idx), block_size)]
        todo.extend((p, 1) for p in parts)
    r = np.concatenate(rs) if rs else np.zeros(0, np.int64)
    c = np.concatenate(cs) if cs else np.zeros(0, np.int64)
    v = np.concatenate(vs) if vs else np.zeros(0)
    _, first = np.unique(r.astype(np.int64) * n + c, return_index=True)  # pairs found twice
    return _graph(n, [r[first]], [c[first]], [v[first]])


def _graph(n: int, rs: list[Any], cs: list[Any], vs: list[Any]) -> sp.csr_matrix:
    r = np.concatenate(rs) if rs else np.zeros(0, np.int64)
    c = np.concatenate(cs) if cs else np.zeros(0, np.int64)
    v = np.concatenate(vs) if vs else np.zeros(0)
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
    G = radius_graph(X, eps) if n <= exact_max else blocked_radius_graph(X, eps, block_size)
    return dbscan_precomputed(G, eps, min_samples, sample_weight)


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
    gid: dict[str, int] = {}
    out = np.empty(len(sel), dtype=np.int64)
    for i, r in enumerate(sel):
        sid = r.get("story_id")
        key = f"s:{sid}" if sid else f"a:{r.get('article_id')}"
        g = gid.get(key)
        if g is None:
            g = gid[key] = len(gid)
        out[i] = g
    return out, len(gid)


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
    X: sp.csr_matrix, sel: Sequence[Mapping[str, Any]], config: ClusteringParams
) -> np.ndarray:
    """Topic labels of the window's articles (-1 = standalone).

    DBSCAN (cosine, ``eps``, ``min_samples``) runs on *story* rows when ``group_by_story``:
    each story's articles (already matched as duplicates/same event upstream) are one point,
    its centroid, weighted by its article count, so a story is never split and DBSCAN sees
    far fewer points. ``n_topics`` switches to Agglomerative Ward.
    """
    if config.n_topics:
        if config.group_by_story:
            group, ng = story_groups(sel)
            if ng < len(sel):
                per_story = ward_labels(group_rows(X, group, ng), config.n_topics, config)
                per_member: np.ndarray = per_story[group]
                return per_member
        return ward_labels(X, config.n_topics, config)
    if config.group_by_story:
        group, ng = story_groups(sel)
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
