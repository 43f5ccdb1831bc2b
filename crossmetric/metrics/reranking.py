"""Re-ranking of a retrieval: k-reciprocal encoding and average query expansion.

* :func:`re_ranking` -- k-reciprocal re-ranking (Zhong, Zheng, Cao and Li, "Re-ranking person
  re-identification with k-reciprocal encoding", CVPR 2017): the distance between a query and
  a gallery item becomes a blend of the original distance and the Jaccard distance of their
  (expanded) k-reciprocal neighbour sets.
* :func:`query_expansion` -- average query expansion (Chum et al., ICCV 2007): each query
  embedding is replaced by the mean of itself and its ``k`` nearest gallery embeddings.

Both take plain arrays; :func:`crossmetric.protocols.reid.refine_distances` applies them to a fitted
model's embeddings. They are re-exported by :mod:`crossmetric.metrics`.

Memory: the sets are sparse matrices with O(k1²) entries per item, the combined
``(n_query + n_gallery)``-square distance matrix is only ever seen one row block at a time, and
the Jaccard distances are accumulated per query block, so apart from the inputs and the output
the working memory is O((n_query + n_gallery) · k1²).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils import gen_batches

from crossmetric._utils.checks import as_float_array, check_positive_int

__all__ = ["re_ranking", "query_expansion"]

#: float64 values in one row block of the combined distance matrix (4 Mi = 32 MiB)
_BLOCK = 1 << 22
#: (query, shared item, gallery) triples accumulated per Jaccard block
_TRIPLES = 1 << 23


def _check_square(a, name: str, n: int) -> np.ndarray:
    a = as_float_array(a, name, ndim=2)
    if a.shape != (n, n):
        raise ValueError(f"{name} must have shape ({n}, {n}) to match q_g, got {a.shape}.")
    return a


def _combined_rows(Dqg, Dqq, Dgg, sl: slice) -> np.ndarray:
    """Rows ``sl`` of the combined distance matrix [[q_q, q_g], [q_gᵀ, g_g]]."""
    n_q = Dqq.shape[0]
    a, b = sl.start, sl.stop
    parts = []
    if a < n_q:
        qs = slice(a, min(b, n_q))
        parts.append(np.hstack([Dqq[qs], Dqg[qs]]))
    if b > n_q:
        gs = slice(max(a, n_q) - n_q, b - n_q)
        parts.append(np.hstack([Dqg[:, gs].T, Dgg[gs]]))
    return np.vstack(parts).astype(np.float64, copy=False)


def _neighbour_matrix(neigh: np.ndarray, k: int, n: int) -> sp.csr_matrix:
    """Boolean ``A[i, j]``: j is among the ``k + 1`` nearest items of i (i itself first)."""
    cols = neigh[:, :k + 1]
    rows = np.repeat(np.arange(n), cols.shape[1])
    return sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols.ravel())), shape=(n, n))


def _reciprocal(neigh: np.ndarray, k: int, n: int) -> sp.csr_matrix:
    """R(i, k) = {j ∈ N(i, k) : i ∈ N(j, k)} (Eq. 4) as a boolean sparse matrix."""
    A = _neighbour_matrix(neigh, k, n)
    return A.multiply(A.T).tocsr().astype(bool)


def re_ranking(q_g, q_q, g_g, *, k1: int = 20, k2: int = 6,
               lambda_value: float = 0.3) -> np.ndarray:
    """k-reciprocal re-ranking of query-to-gallery distances (Zhong et al., CVPR 2017).

    Queries and gallery items together form one set of ``N = n_query + n_gallery`` items with
    the distances ``[[q_q, q_g], [q_gᵀ, g_g]]``, *squared* and each row divided by its maximum
    (so every ``d`` lies in [0, 1]) -- as the authors' release does, and torchreid after it, so
    that the same distances give the same re-ranked distances here and there. Then, for every
    item ``p``:

    1. ``N(p, k)`` is the ``k + 1`` nearest items, ``p`` itself first; the k-reciprocal set is
       ``R(p, k) = {g ∈ N(p, k) : p ∈ N(g, k)}`` (Eq. 4).
    2. It is expanded (Eq. 6): ``R*(p) = R(p, k1) ∪ R(q, ⌊k1/2⌉)`` for every ``q ∈ R(p, k1)``
       with ``|R(p, k1) ∩ R(q, ⌊k1/2⌉)| > ⅔ |R(q, ⌊k1/2⌉)|`` (``⌊k1/2⌉``: ``k1/2`` rounded
       half to even, at least 1; the strict ``>`` and the rounding are the release's).
    3. ``V_p[g] = exp(−d(p, g))`` on ``R*(p)`` and 0 elsewhere (Eq. 7), normalised to sum to 1
       (as in the authors' release).
    4. Local query expansion (Eq. 11): ``V_p`` becomes the mean of ``V_g`` over the ``k2``
       nearest items ``g`` of ``p`` (``p`` itself included; ``k2=1`` leaves V unchanged).
    5. Jaccard distance (Eq. 10): ``d_J(p, g) = 1 − Σ_j min(V_p[j], V_g[j]) / Σ_j max(V_p[j],
       V_g[j])``, and the result is ``(1 − λ) d_J + λ d`` (Eq. 12).

    Gallery items at equal distance at the edge of a neighbour list are taken in index order.

    Parameters
    ----------
    q_g : array-like of shape (n_query, n_gallery)
        Query-to-gallery distances (smaller = more alike; non-negative, e.g. a model's
        ``cross_distance``).
    q_q : array-like of shape (n_query, n_query)
        Query-to-query distances in the same metric.
    g_g : array-like of shape (n_gallery, n_gallery)
        Gallery-to-gallery distances in the same metric.
    k1 : int, default=20
        Size of the k-reciprocal neighbourhoods (capped at ``N − 1``).
    k2 : int, default=6
        Neighbours averaged by the local query expansion (capped at ``N``).
    lambda_value : float, default=0.3
        Weight λ of the original distance, in [0, 1].

    Returns
    -------
    ndarray of shape (n_query, n_gallery)
        Re-ranked distances (smaller = more alike), in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics.pairwise import euclidean_distances as ed
    >>> from crossmetric.metrics import re_ranking
    >>> rng = np.random.RandomState(0)
    >>> Q, G = rng.rand(3, 2), rng.rand(8, 2)
    >>> R = re_ranking(ed(Q, G), ed(Q, Q), ed(G, G), k1=4, k2=2)
    >>> R.shape, bool((R >= 0).all() and (R <= 1).all())
    ((3, 8), True)
    """
    Dqg = as_float_array(q_g, "q_g", ndim=2)
    n_q, n_g = Dqg.shape
    if n_q == 0 or n_g == 0:
        raise ValueError(f"q_g must be a non-empty matrix, got shape {Dqg.shape}.")
    Dqq = _check_square(q_q, "q_q", n_q)
    Dgg = _check_square(g_g, "g_g", n_g)
    for a, name in ((Dqg, "q_g"), (Dqq, "q_q"), (Dgg, "g_g")):
        if a.min() < 0:
            raise ValueError(f"{name} must hold non-negative distances, got a minimum of "
                             f"{a.min():.4g}.")
    Dqg, Dqq, Dgg = Dqg ** 2, Dqq ** 2, Dgg ** 2          # the release squares its input
    k1 = check_positive_int(k1, "k1")
    k2 = check_positive_int(k2, "k2")
    lam = float(lambda_value)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda_value must be in [0, 1], got {lambda_value!r}.")
    n = n_q + n_g
    k1 = min(k1, n - 1)
    k2 = min(k2, n)
    kh = max(1, int(np.around(k1 / 2.0)))                 # the release's rounding
    kmax = max(k1 + 1, k2)
    # pass 1: row maxima and the kmax nearest items of every item (itself first)
    neigh = np.empty((n, kmax), dtype=np.int64)
    row_max = np.empty(n)
    rows_per = max(1, _BLOCK // n)
    for sl in gen_batches(n, rows_per):
        B = _combined_rows(Dqg, Dqq, Dgg, sl)
        mx = B.max(axis=1)
        row_max[sl] = np.where(mx > 0, mx, 1.0)
        B = B / row_max[sl, None]
        B[np.arange(B.shape[0]), np.arange(sl.start, sl.stop)] = -1.0  # itself first
        top = np.argpartition(B, kmax - 1, axis=1)[:, :kmax] if kmax < n else (
            np.broadcast_to(np.arange(n), B.shape))
        d_top = np.take_along_axis(B, top, axis=1)
        order = np.lexsort((top, d_top), axis=1)  # by distance, ties in index order
        neigh[sl] = np.take_along_axis(top, order, axis=1)
    # k-reciprocal sets and their expansion (Eqs. 4-6), as sparse boolean matrices
    R = _reciprocal(neigh, k1, n)
    Rh = _reciprocal(neigh, kh, n)
    size_h = np.asarray(Rh.sum(axis=1)).ravel()
    overlap = (R.astype(np.int32) @ Rh.T.astype(np.int32)).multiply(R).tocoo()
    keep = 3 * overlap.data > 2 * size_h[overlap.col]    # strictly more than 2/3
    S = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.int32),
                       (overlap.row[keep], overlap.col[keep])), shape=(n, n))
    Rstar = (R.astype(np.int32) + S @ Rh.astype(np.int32)).tocsr()
    Rstar.sort_indices()
    # pass 2: Gaussian weights on R*(p), rows normalised (Eq. 7)
    data = np.empty(Rstar.nnz, dtype=np.float32)
    for sl in gen_batches(n, rows_per):
        B = _combined_rows(Dqg, Dqq, Dgg, sl) / row_max[sl, None]
        a, b = Rstar.indptr[sl.start], Rstar.indptr[sl.stop]
        local = np.repeat(np.arange(sl.stop - sl.start), np.diff(Rstar.indptr[sl.start:
                                                                               sl.stop + 1]))
        data[a:b] = np.exp(-B[local, Rstar.indices[a:b]])
    V = sp.csr_matrix((data, Rstar.indices, Rstar.indptr), shape=(n, n))
    V = sp.diags(1.0 / np.asarray(V.sum(axis=1), dtype=np.float64).ravel()).astype(
        np.float32) @ V
    # local query expansion (Eq. 11)
    if k2 > 1:
        rows = np.repeat(np.arange(n), k2)
        M = sp.csr_matrix((np.full(rows.size, 1.0 / k2, dtype=np.float32),
                           (rows, neigh[:, :k2].ravel())), shape=(n, n))
        V = (M @ V).tocsr()
    Vq = V[:n_q].tocsr()
    Vg = V[n_q:].tocsc()
    s_q = np.asarray(Vq.sum(axis=1), dtype=np.float64).ravel()
    s_g = np.asarray(Vg.sum(axis=1), dtype=np.float64).ravel()
    out = np.empty((n_q, n_g))
    for a, b in _jaccard_blocks(Vq, np.diff(Vg.indptr), n_g):
        smin = _shared_min(Vq[a:b], Vg, n_g)
        dj = 1.0 - smin / (s_q[a:b, None] + s_g[None, :] - smin)  # Σmax = ΣVp + ΣVg − Σmin
        out[a:b] = (1.0 - lam) * dj + lam * (Dqg[a:b] / row_max[a:b, None])
    return out


def _jaccard_blocks(Vq: sp.csr_matrix, col_count: np.ndarray, n_g: int):
    """Query row ranges whose (query, item, gallery) triples and dense block stay bounded."""
    cost = np.add.reduceat(np.r_[col_count[Vq.indices], 0], Vq.indptr[:-1]) if Vq.nnz else (
        np.zeros(Vq.shape[0], dtype=np.int64))
    cost = np.where(np.diff(Vq.indptr) > 0, cost, 0) + n_g
    a = 0
    while a < Vq.shape[0]:
        b = a + max(1, int(np.searchsorted(np.cumsum(cost[a:]), _TRIPLES, side="right")))
        yield a, min(b, Vq.shape[0])
        a = b


def _shared_min(Vb: sp.csr_matrix, Vg: sp.csc_matrix, n_g: int) -> np.ndarray:
    """``Σ_j min(Vb[p, j], Vg[g, j])`` for every row p of ``Vb`` and g of ``Vg`` (sparse)."""
    n_b = Vb.shape[0]
    row = np.repeat(np.arange(n_b), np.diff(Vb.indptr))
    cnt = np.diff(Vg.indptr)[Vb.indices]
    total = int(cnt.sum())
    if total == 0:
        return np.zeros((n_b, n_g))
    first = np.repeat(Vg.indptr[Vb.indices] - (np.cumsum(cnt) - cnt), cnt)
    pos = first + np.arange(total)
    mins = np.minimum(np.repeat(Vb.data, cnt), Vg.data[pos])
    flat = np.repeat(row, cnt) * n_g + Vg.indices[pos]
    return np.bincount(flat, weights=mins, minlength=n_b * n_g).reshape(n_b, n_g)


def query_expansion(query, gallery, k: int = 5) -> np.ndarray:
    """Average query expansion: each query becomes the mean of itself and its k nearest
    gallery items (Chum et al., "Total recall", ICCV 2007).

    Neighbours are found by squared Euclidean distance, one block of queries at a time.

    Parameters
    ----------
    query : array-like of shape (n_query, dim)
        Query embeddings.
    gallery : array-like of shape (n_gallery, dim)
        Gallery embeddings in the same space.
    k : int, default=5
        Gallery neighbours averaged in (capped at ``n_gallery``).

    Returns
    -------
    ndarray of shape (n_query, dim)
        The expanded queries; rank the gallery by their distance to it.

    Examples
    --------
    >>> import numpy as np
    >>> from crossmetric.metrics import query_expansion
    >>> q = np.array([[0.0, 0.0]])
    >>> g = np.array([[1.0, 0.0], [0.0, 3.0], [9.0, 9.0]])
    >>> query_expansion(q, g, k=2).tolist()   # mean of q, g[0] and g[1]
    [[0.3333333333333333, 1.0]]
    """
    Q = as_float_array(query, "query", ndim=2)
    G = as_float_array(gallery, "gallery", ndim=2)
    if Q.shape[1] != G.shape[1]:
        raise ValueError(f"query and gallery must have the same number of columns, got "
                         f"{Q.shape[1]} and {G.shape[1]}.")
    if G.shape[0] == 0:
        raise ValueError("gallery is empty.")
    k = min(check_positive_int(k, "k"), G.shape[0])
    sq_g = np.einsum("ij,ij->i", G, G)
    out = np.empty(Q.shape, dtype=np.result_type(Q, G))
    for sl in gen_batches(Q.shape[0], max(1, _BLOCK // G.shape[0])):
        D = sq_g[None, :] - 2.0 * (Q[sl] @ G.T)   # + ‖q‖², constant per row
        top = np.argpartition(D, k - 1, axis=1)[:, :k] if k < G.shape[0] else (
            np.broadcast_to(np.arange(G.shape[0]), D.shape))
        out[sl] = (Q[sl] + G[top].sum(axis=1)) / (k + 1)
    return out
