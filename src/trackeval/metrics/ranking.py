"""Ranked-retrieval metrics over binary relevance matrices (P@k, AP@k with both denominators, MAP).

Every function takes a ``relevance`` matrix of shape ``(n_queries, depth)`` in **rank order** (column 0 is
rank 1): ``True``/``1`` where the item retrieved at that rank is relevant to the query, ``False``/``0``
otherwise (non-zero counts as relevant, like trec_eval's ``relevance_level=1``). Lists shorter than ``depth``
are padded with ``False`` by the caller; a padded position is simply a non-relevant one. When ``k`` exceeds
``depth`` the missing ranks count as non-relevant (implicit padding), so ``precision_at_k`` still divides by
``k``. All functions are vectorised over queries (no Python loop) and return ``float64`` arrays.

Average precision (``rel_i`` the relevance at rank ``i``, ``P@i`` the precision at rank ``i``)::

    AP@k = (1 / D) * sum_{i <= k, rel_i = 1} P@i

with the denominator ``D`` chosen by the caller:

* ``n_relevant=None`` -- ``D`` = number of relevant items **in the top k**. This is what
  ``sklearn.metrics.average_precision_score(rel_top_k, descending_scores)`` computes on the truncated list,
  and so what the 3D-MIR notebooks report ("retrieved_in_topk"). One hit at rank 1 gives 1.0.
* ``n_relevant`` given -- ``D`` = the query's total number of relevant items in the index (trec_eval ``map`` /
  ``map_cut_k``, "total_in_index"). Relevant items never retrieved pull AP down.

Edge cases: ``D == 0`` (no hit in the top k, or nothing relevant in the index) gives AP ``0.0`` (the 3D-MIR
notebook maps sklearn's NaN/warning to 0; trec_eval also reports 0). ``n_queries == 0`` gives empty arrays and
:func:`mean_average_precision` returns NaN.
"""

from __future__ import annotations

import numpy as np


def _top_k(relevance: np.ndarray, k: int | None) -> np.ndarray:
    """Return the first ``k`` columns of ``relevance`` as float64, zero-padded on the right up to ``k``.

    Raises:
        ValueError: ``relevance`` is not 2-D, or ``k`` is not a positive integer.
    """
    rel = np.asarray(relevance)
    if rel.ndim != 2:
        raise ValueError(f"relevance must be a 2-D (n_queries, depth) array, got shape {rel.shape}")
    rel = (rel != 0).astype(np.float64)
    if k is None:
        return rel
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    k = int(k)
    if rel.shape[1] >= k:
        return rel[:, :k]
    return np.pad(rel, ((0, 0), (0, k - rel.shape[1])))


def precision_at_k(relevance: np.ndarray, k: int) -> np.ndarray:
    """Precision at cut-off ``k`` per query: hits in the top ``k`` divided by ``k``.

    Args:
        relevance: ``(n_queries, depth)`` bool/0-1 matrix in rank order.
        k: cut-off rank (>= 1). Ranks beyond ``depth`` count as non-relevant, so the divisor is always ``k``.

    Returns:
        ``(n_queries,)`` float64 in [0, 1].

    Examples:
        Query 0 finds relevant items at ranks 1 and 3, query 1 at rank 2:

        >>> import numpy as np
        >>> from trackeval.metrics.ranking import precision_at_k
        >>> relevance = np.array([[1, 0, 1], [0, 1, 0]])
        >>> precision_at_k(relevance, 2).tolist()
        [0.5, 0.5]
        >>> np.round(precision_at_k(relevance, 3), 4).tolist()
        [0.6667, 0.3333]
        >>> precision_at_k(relevance, 4).tolist()  # rank 4 is missing: counts as non-relevant
        [0.5, 0.25]
    """
    return _top_k(relevance, k).sum(axis=1) / k


def precision_at_10_original_quirk(relevance: np.ndarray) -> np.ndarray:
    """The P@10 that the 3D-MIR notebooks print: per query ``(10 * P@10 + P@5) / 11``.

    The notebook reuses its ``RowMean`` column: when it computes the row mean over ``Top 1..Top 10`` that
    column still holds the query's P@5 and is averaged in as an eleventh value. Use this only to reproduce
    the published numbers; :func:`precision_at_k` with ``k=10`` is the correct metric.

    Returns:
        ``(n_queries,)`` float64 in [0, 1]. Example: relevance ``[1,1,1,0,0,0,0,0,0,0]`` gives
        ``(3 + 0.6) / 11 = 0.32727...`` instead of 0.3.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.ranking import precision_at_10_original_quirk, precision_at_k
        >>> relevance = np.array([[1, 1, 1, 0, 0, 0, 0, 0, 0, 0]])
        >>> np.round(precision_at_10_original_quirk(relevance), 4).tolist()
        [0.3273]
        >>> precision_at_k(relevance, 10).tolist()
        [0.3]
    """
    return (10.0 * precision_at_k(relevance, 10) + precision_at_k(relevance, 5)) / 11.0


def average_precision(relevance: np.ndarray, k: int | None = None, n_relevant: np.ndarray | None = None) -> np.ndarray:
    """Average precision over the top ``k`` ranks, per query.

    Args:
        relevance: ``(n_queries, depth)`` bool/0-1 matrix in rank order.
        k: cut-off rank (>= 1); ``None`` uses all ``depth`` ranks.
        n_relevant: ``(n_queries,)`` total number of relevant items per query in the whole index
            (trec_eval denominator). ``None`` divides by the number of hits in the top ``k`` instead
            (sklearn on the truncated list, the 3D-MIR original).

    Returns:
        ``(n_queries,)`` float64 in [0, 1]; 0.0 where the denominator is 0.

    Raises:
        ValueError: bad shapes, a negative ``n_relevant``, or ``n_relevant`` smaller than the hits found in the
            top ``k`` (the relevance and the relevant counts then disagree).

    Examples:
        Query 0 has hits at ranks 1 and 3 (``P@1 = 1``, ``P@3 = 2/3``), query 1 at rank 2 (``P@2 = 1/2``):

        >>> import numpy as np
        >>> from trackeval.metrics.ranking import average_precision
        >>> relevance = np.array([[1, 0, 1], [0, 1, 0]])
        >>> np.round(average_precision(relevance), 4).tolist()  # (1 + 2/3) / 2 and 0.5 / 1
        [0.8333, 0.5]
        >>> np.round(average_precision(relevance, n_relevant=[3, 1]), 4).tolist()  # (1 + 2/3) / 3
        [0.5556, 0.5]
        >>> average_precision(relevance, k=1).tolist()  # query 1 has no hit in the top 1
        [1.0, 0.0]
    """
    rel = _top_k(relevance, k)
    hits = np.cumsum(rel, axis=1)
    ranks = np.arange(1, rel.shape[1] + 1, dtype=np.float64)
    precision_sum = (rel * hits / ranks).sum(axis=1)
    found = hits[:, -1] if rel.shape[1] else np.zeros(rel.shape[0])
    if n_relevant is None:
        denom = found
    else:
        denom = np.asarray(n_relevant, dtype=np.float64)
        if denom.shape != (rel.shape[0],):
            raise ValueError(f"n_relevant must have shape ({rel.shape[0]},), got {denom.shape}")
        if np.any(denom < 0) or np.any(denom < found):
            raise ValueError("n_relevant must be >= 0 and >= the number of relevant items found in the top k")
    out = np.zeros(rel.shape[0], dtype=np.float64)
    np.divide(precision_sum, denom, out=out, where=denom > 0)
    return out


def mean_average_precision(relevance: np.ndarray, k: int | None = None, n_relevant: np.ndarray | None = None) -> float:
    """Mean of :func:`average_precision` over queries (MAP@k); NaN when there are no queries.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.ranking import mean_average_precision
        >>> relevance = np.array([[1, 0, 1], [0, 1, 0]])
        >>> round(mean_average_precision(relevance), 4)  # (5/6 + 1/2) / 2
        0.6667
        >>> mean_average_precision(relevance, k=1)
        0.5
        >>> mean_average_precision(np.zeros((0, 3)))
        nan
    """
    ap = average_precision(relevance, k=k, n_relevant=n_relevant)
    return float(ap.mean()) if ap.size else float("nan")


def label_relevance(query_labels: np.ndarray, ranked_labels: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Same-label relevance matrix: ``ranked_labels[q, i] == query_labels[q]`` where ``valid[q, i]``.

    Args:
        query_labels: ``(n_queries,)`` label of each query (any comparable dtype, e.g. int lesion group with
            -1 for "no lesion": -1 matches -1).
        ranked_labels: ``(n_queries, depth)`` label of the item retrieved at each rank (padding: any value).
        valid: ``(n_queries, depth)`` bool, ``False`` at padded positions (forced non-relevant); ``None`` =
            all valid.

    Returns:
        ``(n_queries, depth)`` bool relevance matrix in rank order.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.ranking import label_relevance
        >>> query_labels = np.array([2, -1])
        >>> ranked_labels = np.array([[2, 1, 2], [-1, 3, -1]])  # query 1 retrieved 2 items, padded with -1
        >>> valid = np.array([[True, True, True], [True, True, False]])
        >>> label_relevance(query_labels, ranked_labels, valid).tolist()
        [[True, False, True], [True, False, False]]
    """
    q = np.asarray(query_labels)
    r = np.asarray(ranked_labels)
    if r.ndim != 2 or q.shape != (r.shape[0],):
        raise ValueError(f"expected query_labels (n,) and ranked_labels (n, depth), got {q.shape} and {r.shape}")
    rel = r == q[:, None]
    if valid is not None:
        rel &= np.asarray(valid, dtype=bool)
    return rel
