"""Ranking kernels against sklearn, a direct trec_eval-style loop, and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from trackeval.metrics.ranking import (
    average_precision,
    label_relevance,
    mean_average_precision,
    precision_at_10_original_quirk,
    precision_at_k,
)

# Hand-computed cases (top-10 relevance, AP with hits-in-top-10 denominator, AP with R=20 in the index); the
# first column is what the original 3D-MIR notebook's sklearn call gives (docs/benchmarks/mir3d.md).
TABLE = [
    ([1, 0, 1, 0, 0, 0, 0, 0, 0, 1], 0.655556, 0.098333),
    ([0, 1, 0, 0, 0, 0, 0, 0, 0, 0], 0.5, 0.025),
    ([1, 1, 0, 0, 0, 0, 0, 0, 0, 0], 1.0, 0.1),
    ([1] * 10, 1.0, 0.5),
    ([0] * 10, 0.0, 0.0),
]


def _trec_eval_ap(rel: list[int], num_rel: int, cutoff: int | None = None) -> float:
    """trec_eval ``map`` / ``map_cut_k`` for one query, written as its loop: sum of P@rank at each relevant
    retrieved document (ranks <= cutoff) divided by the number of relevant documents for the query."""
    if num_rel == 0:
        return 0.0
    hits, total = 0, 0.0
    for i, r in enumerate(rel[:cutoff] if cutoff else rel, start=1):
        if r:
            hits += 1
            total += hits / i
    return total / num_rel


def test_reference_table_both_denominators() -> None:
    rel = np.array([row for row, _, _ in TABLE], dtype=bool)
    np.testing.assert_allclose(average_precision(rel, k=10), [t for _, t, _ in TABLE], atol=1e-6)
    got = average_precision(rel, k=10, n_relevant=np.full(len(TABLE), 20))
    np.testing.assert_allclose(got, [t for _, _, t in TABLE], atol=1e-6)


def test_torchmetrics_published_vector() -> None:
    # torchmetrics docs: retrieval_average_precision(preds=[0.2, 0.3, 0.5], target=[True, False, True]) = 0.8333
    preds, target = np.array([0.2, 0.3, 0.5]), np.array([True, False, True])
    rel = target[np.argsort(-preds)][None, :]
    assert average_precision(rel)[0] == pytest.approx(5 / 6)
    assert average_precision(rel, n_relevant=np.array([2]))[0] == pytest.approx(5 / 6)


def test_matches_sklearn_on_truncated_list_and_trec_eval_loop() -> None:
    rng = np.random.default_rng(0)
    rel = rng.random((300, 15)) < rng.random((300, 1))  # varied hit rates, including all-miss rows
    n_rel = rel.sum(axis=1) + rng.integers(0, 30, 300)  # relevant items beyond the retrieved list
    for k in (1, 3, 10, 15):
        top = rel[:, :k]
        expected = [
            average_precision_score(row, np.arange(k, 0, -1)) if row.any() else 0.0  # notebook: no hit -> 0
            for row in top
        ]
        np.testing.assert_allclose(average_precision(rel, k=k), expected, atol=1e-12)
        trec = [_trec_eval_ap(list(row), int(n), k) for row, n in zip(rel, n_rel, strict=True)]
        np.testing.assert_allclose(average_precision(rel, k=k, n_relevant=n_rel), trec, atol=1e-12)
    assert mean_average_precision(rel, k=10) == pytest.approx(np.mean(average_precision(rel, k=10)))


def test_precision_at_k_hand_computed_and_padding() -> None:
    rel = np.array([[1, 1, 1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]])
    np.testing.assert_allclose(precision_at_k(rel, 1), [1.0, 0.0])
    np.testing.assert_allclose(precision_at_k(rel, 3), [1.0, 0.0])
    np.testing.assert_allclose(precision_at_k(rel, 5), [0.6, 0.0])
    np.testing.assert_allclose(precision_at_k(rel, 10), [0.3, 0.5])
    # a list shorter than k: the missing ranks count as misses, the divisor stays k
    np.testing.assert_allclose(precision_at_k(np.array([[1, 1]]), 10), [0.2])
    assert average_precision(np.array([[1, 1]]), k=10)[0] == 1.0


def test_original_quirk_hand_computed() -> None:
    # protocols 1.3: the notebook prints P@3=0.5, P@5=0.3, "P@10"=0.3909 on these two rows; true P@10 = 0.4
    rel = np.array([[1, 1, 1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]])
    np.testing.assert_allclose(precision_at_10_original_quirk(rel), [(3 + 0.6) / 11, 5 / 11])
    assert precision_at_10_original_quirk(rel).mean() == pytest.approx(0.390909, abs=1e-6)
    assert precision_at_k(rel, 10).mean() == pytest.approx(0.4)


def test_edge_cases_and_errors() -> None:
    empty = np.zeros((0, 10), dtype=bool)
    assert average_precision(empty, k=10).shape == (0,)
    assert np.isnan(mean_average_precision(empty, k=10))
    assert average_precision(np.zeros((1, 10)), k=10, n_relevant=np.array([0]))[0] == 0.0
    with pytest.raises(ValueError, match="2-D"):
        precision_at_k(np.ones(5), 3)
    with pytest.raises(ValueError, match="positive integer"):
        precision_at_k(np.ones((1, 5)), 0)
    with pytest.raises(ValueError, match="n_relevant"):
        average_precision(np.ones((1, 5)), k=5, n_relevant=np.array([2]))  # 5 hits but only 2 relevant


def test_label_relevance_group_minus_one_matches() -> None:
    q = np.array([-1, 2])
    ranked = np.array([[-1, 2, -1], [2, 2, 3]])
    valid = np.array([[True, True, False], [True, True, True]])
    np.testing.assert_array_equal(label_relevance(q, ranked, valid), [[True, False, False], [True, True, False]])


def test_quirk_replays_the_notebook_pandas_cell() -> None:
    """The 3D-MIR evaluation cell (Method-2 notebook), replayed with pandas on random top-10 relevance rows."""
    import pandas as pd

    rel = np.random.default_rng(1).integers(0, 2, size=(40, 10))
    df = pd.DataFrame({"query": [f"q{i}" for i in range(40)], **{f"Top {i + 1}": rel[:, i] for i in range(10)}})
    df["RowMean"] = df.iloc[:, 1:4].mean(axis=1)
    p3 = df["RowMean"].mean()
    df["RowMean"] = df.iloc[:, 1:6].mean(axis=1)
    p5 = df["RowMean"].mean()
    df["RowMean"] = df.iloc[:, 1:].mean(axis=1)  # includes the stale RowMean (P@5) column
    np.testing.assert_allclose(precision_at_10_original_quirk(rel), df["RowMean"].to_numpy(), atol=1e-15)
    assert precision_at_k(rel, 3).mean() == pytest.approx(p3) and precision_at_k(rel, 5).mean() == pytest.approx(p5)
