"""Paired bootstrap, bootstrap p-values and multiplicity adjustment against scipy and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from trackeval.stats.paired import adjust_pvalues, bootstrap_pvalue, paired_bootstrap


def test_identical_inputs_give_zero_delta_and_zero_width_ci():
    x = np.array([[0.8, 0.6], [0.7, np.nan], [0.9, 0.5]])
    d = paired_bootstrap(x, x.copy(), 300, 1)
    assert d.overall == 0.0 and d.overall_low == 0.0 and d.overall_high == 0.0
    assert d.n_pairs.tolist() == [3, 2]


def test_cells_pair_only_where_both_sides_are_valid():
    cand = np.array([[1.0, 0.5], [0.8, np.nan], [np.nan, 0.7], [0.6, 0.9]])
    base = np.array([[0.5, 0.5], [0.6, 0.4], [0.9, np.nan], [0.4, 0.6]])
    d = paired_bootstrap(cand, base, 200, 0)
    # column 0 pairs rows 0, 1, 3: deltas 0.5, 0.2, 0.2; column 1 pairs rows 0, 3: deltas 0.0, 0.3
    assert d.value.tolist() == pytest.approx([0.3, 0.15])
    assert d.candidate.tolist() == pytest.approx([0.8, 0.7])
    assert d.baseline.tolist() == pytest.approx([0.5, 0.55])
    assert d.overall == pytest.approx(0.225)
    assert d.n_pairs.tolist() == [3, 2]


def test_ci_matches_scipy_paired_percentile_bootstrap():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.5, 0.9, 40)
    cand = base + rng.normal(0.02, 0.05, 40)
    d = paired_bootstrap(cand, base, 20000, 3)
    ref = stats.bootstrap(
        (cand, base),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        paired=True,
        n_resamples=20000,
        method="percentile",
        rng=np.random.default_rng(11),
    ).confidence_interval
    assert d.overall == pytest.approx(np.mean(cand - base))
    # two Monte-Carlo estimates of the same percentiles: equal up to resampling noise (~0.1 SE)
    se = np.std(cand - base, ddof=1) / np.sqrt(40)
    assert d.overall_low == pytest.approx(ref.low, abs=0.1 * se)
    assert d.overall_high == pytest.approx(ref.high, abs=0.1 * se)


def test_bootstrap_pvalue_counts_replicates_on_the_null_side():
    s = np.array([-0.3, -0.2, -0.1, 0.0, 0.1, np.nan])
    # H1: delta < -0.05 -> replicates >= -0.05 are on H0's side: 0.0, 0.1 -> (1 + 2) / (1 + 5)
    assert bootstrap_pvalue(s, -0.05, "less") == pytest.approx(3 / 6)
    # H1: delta > -0.25 -> replicates <= -0.25: -0.3 -> (1 + 1) / 6
    assert bootstrap_pvalue(s, -0.25, "greater") == pytest.approx(2 / 6)
    assert bootstrap_pvalue(np.array([np.nan]), 0.0, "less") == 1.0


def test_holm_and_bonferroni_hand_computed():
    p = [0.01, 0.04, 0.03, 0.005]
    # Holm: ascending 0.005, 0.01, 0.03, 0.04 -> 4*0.005=0.02, 3*0.01=0.03, 2*0.03=0.06, max(0.04, 0.06)=0.06
    assert adjust_pvalues(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust_pvalues(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert adjust_pvalues(p, "none") == pytest.approx(p)
    assert adjust_pvalues([0.5, 0.9], "bonferroni") == [1.0, 1.0]
    assert adjust_pvalues([], "holm") == []
