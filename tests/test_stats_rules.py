"""The statistics the gate's rules read, pinned at their boundaries (issue 19, section 6): the bootstrap p-value's
tie rule, NaN resamples in percentiles, the expanded-percentile levels and their inverse, and the cluster weights.

Intervals are checked against a direct recomputation from the same weights (:func:`weight_blocks` with the same
seed), so a change in how replicates, levels or resampling units are formed shows up as a different number.
"""

from __future__ import annotations

import math
import warnings
import zlib

import numpy as np
import pytest
from scipy.stats import norm, t

from trackeval.stats import bootstrap
from trackeval.stats.bootstrap import (
    bootstrap_means,
    cluster_codes,
    effective_units,
    expanded_pvalue,
    group_seed,
    interval_levels,
    n_clusters,
    percentiles,
    units_per_column,
    weight_blocks,
)
from trackeval.stats.paired import (
    adjust_pvalues,
    bootstrap_pvalue,
    normal_pvalue,
    paired_corpus,
    paired_delong,
    paired_headlines,
    resamples_for,
)
from trackeval.stats.reduce import case_weights, headline, item_weights, mean_over, nan_mean, ratio

TINY = 2.0**-20
NAN = math.nan


# ------------------------------------------------------------------ bootstrap p-values


def test_a_replicate_exactly_at_the_threshold_counts_on_the_null_side():
    s = np.array([-0.5, -0.25, -0.25, 0.0])
    # H1 "delta < -0.25": the H0 side is s >= -0.25 (three replicates) -> (1 + 3) / (1 + 4)
    assert bootstrap_pvalue(s, -0.25, "less") == pytest.approx(4 / 5)
    assert bootstrap_pvalue(s, -0.25 + TINY, "less") == pytest.approx(2 / 5)
    # H1 "delta > -0.25": the H0 side is s <= -0.25 (three replicates)
    assert bootstrap_pvalue(s, -0.25, "greater") == pytest.approx(4 / 5)
    assert bootstrap_pvalue(s, -0.25 - TINY, "greater") == pytest.approx(2 / 5)


def test_expanded_bootstrap_pvalue_maps_the_raw_level():
    s = np.array([-0.5, -0.25, -0.25, 0.0])
    # 3 of 4 on the H0 side: the raw level 3/4, mapped with 6 clusters
    want = float(t.cdf(norm.ppf(0.75) / math.sqrt(6 / 5), 5))
    assert bootstrap_pvalue(s, -0.25, "less", 6, "expanded_percentile") == pytest.approx(want, rel=1e-12)
    assert bootstrap_pvalue(s, -0.25, "greater", 6, "expanded_percentile") == pytest.approx(want, rel=1e-12)
    # 1 of 4: the level 1/4
    quarter = float(t.cdf(norm.ppf(0.25) / math.sqrt(6 / 5), 5))
    assert bootstrap_pvalue(s, -0.25 + TINY, "less", 6, "expanded_percentile") == pytest.approx(quarter, rel=1e-12)
    # every replicate on the H1 side: the level is floored at 1/B (here 1/4), never 0; none on it: 1
    assert bootstrap_pvalue(s, 0.5, "less", 6, "expanded_percentile") == pytest.approx(quarter, rel=1e-12)
    assert bootstrap_pvalue(s, -1.0, "greater", 6, "expanded_percentile") == pytest.approx(quarter, rel=1e-12)
    assert bootstrap_pvalue(s, 0.5, "greater", 6, "expanded_percentile") == 1.0


@pytest.mark.parametrize("n_units", [2, 6, 12, 30, 100])
@pytest.mark.parametrize("n_resamples", [19, 1000, 2000])
def test_expanded_bootstrap_pvalue_is_never_zero(n_units, n_resamples):
    # every replicate far beyond the threshold: the level is 1/B, expanded with n clusters (t with n - 1 df)
    s = np.full(n_resamples, -10.0)
    p = bootstrap_pvalue(s, 0.0, "less", n_units, "expanded_percentile")
    want = float(t.cdf(norm.ppf(1 / n_resamples) / math.sqrt(n_units / (n_units - 1)), n_units - 1))
    assert p == pytest.approx(want, rel=1e-9) and p > 1 / n_resamples
    # one replicate on the H0 side gives the same level: the floor is the resolution of B replicates
    s[0] = 1.0
    assert bootstrap_pvalue(s, 0.0, "less", n_units, "expanded_percentile") == pytest.approx(want, rel=1e-12)


def test_bootstrap_pvalue_drops_nan_replicates():
    s = np.array([NAN, -0.5, NAN, 0.0, 0.5])
    assert bootstrap_pvalue(s, -0.25, "less") == pytest.approx((1 + 2) / (1 + 3))
    assert bootstrap_pvalue(s, -0.25, "less", 6, "expanded_percentile") == pytest.approx(
        expanded_pvalue(2 / 3, 6, "expanded_percentile")
    )
    assert bootstrap_pvalue(np.array([NAN, NAN]), 0.0, "greater") == 1.0
    assert bootstrap_pvalue(np.array([]), 0.0, "less", 6, "expanded_percentile") == 1.0
    assert bootstrap_pvalue([-1.0, -1.0, -1.0], 0.0, "less") == pytest.approx(1 / 4)  # a plain list works too


def test_normal_pvalue_with_zero_standard_error_needs_the_estimate_strictly_on_the_h1_side():
    assert normal_pvalue(-0.25, 0.0, -0.25, "less") == 1.0
    assert normal_pvalue(-0.25 - TINY, 0.0, -0.25, "less") == 0.0
    assert normal_pvalue(-0.25, 0.0, -0.25, "greater") == 1.0
    assert normal_pvalue(-0.25 + TINY, 0.0, -0.25, "greater") == 0.0
    assert normal_pvalue(-0.5, 0.0, -0.25, "greater") == 1.0
    assert normal_pvalue(0.0, 0.0, -0.25, "less") == 1.0
    # at the threshold the z statistic is 0: p = 1/2 either way
    assert normal_pvalue(-0.25, 0.125, -0.25, "less") == 0.5 and normal_pvalue(-0.25, 0.125, -0.25, "greater") == 0.5


def test_holm_steps_down_with_ties_and_keeps_the_input_order():
    assert adjust_pvalues([0.02, 0.01, 0.02, 0.5], "holm") == pytest.approx([0.06, 0.04, 0.06, 0.5])
    assert adjust_pvalues([0.3, 0.2], "holm") == pytest.approx([0.4, 0.4])  # the running maximum
    assert adjust_pvalues([0.4, 0.1], "holm") == pytest.approx([0.4, 0.2])
    assert adjust_pvalues([0.6, 0.7], "holm") == [1.0, 1.0]
    assert adjust_pvalues([0.25], "bonferroni") == [0.25] and adjust_pvalues([0.25], "holm") == [0.25]
    assert adjust_pvalues([], "bonferroni") == [] and adjust_pvalues([], "none") == []


# ------------------------------------------------------------------ interval levels and their inverse


def test_interval_levels_plain_and_expanded():
    assert interval_levels(0.9, 10, "percentile") == pytest.approx((0.05, 0.95))
    # more than one unit expands (the rule is n > 1: an effective number of clusters may lie between 1 and 2,
    # with 1 degree of freedom); one unit, or an unknown count, uses the plain levels
    lo2, hi2 = interval_levels(0.95, 2, "expanded_percentile")
    assert lo2 == pytest.approx(norm.cdf(math.sqrt(2) * t.ppf(0.025, 1)), rel=1e-12) and hi2 == pytest.approx(1 - lo2)
    assert lo2 < 0.025
    lo16, hi16 = interval_levels(0.95, 1.6, "expanded_percentile")  # sqrt(1.6 / 0.6), df 1
    assert lo16 == pytest.approx(norm.cdf(math.sqrt(1.6 / 0.6) * t.ppf(0.025, 1)), rel=1e-12)
    assert hi16 == pytest.approx(1 - lo16) and lo16 < lo2
    assert interval_levels(0.95, 1, "expanded_percentile") == pytest.approx((0.025, 0.975))
    assert interval_levels(0.95, NAN, "expanded_percentile") == pytest.approx((0.025, 0.975))
    # an effective n between whole numbers: the factor sqrt(n / (n - 1)) with floor(n) - 1 degrees of freedom
    lo, hi = interval_levels(0.95, 9.4, "expanded_percentile")
    assert lo == pytest.approx(norm.cdf(math.sqrt(9.4 / 8.4) * t.ppf(0.025, 8)), rel=1e-12) and hi == 1 - lo
    lo, hi = interval_levels(0.8, 5, "expanded_percentile")
    assert lo == pytest.approx(norm.cdf(math.sqrt(5 / 4) * t.ppf(0.1, 4)), rel=1e-12) and hi == pytest.approx(1 - lo)


@pytest.mark.parametrize("n_units", [2, 3, 6, 30])
@pytest.mark.parametrize("confidence", [0.8, 0.95])
def test_expanded_pvalue_inverts_interval_levels(n_units, confidence):
    lo, hi = interval_levels(confidence, n_units, "expanded_percentile")
    assert expanded_pvalue(lo, n_units, "expanded_percentile") == pytest.approx((1 - confidence) / 2, rel=1e-9)
    if hi < 1.0:  # at 2 units and 95% the upper level rounds to 1 (p = 1 is returned unchanged)
        assert expanded_pvalue(hi, n_units, "expanded_percentile") == pytest.approx((1 + confidence) / 2, rel=1e-9)


def test_expanded_pvalue_edges():
    assert expanded_pvalue(0.0, 6, "expanded_percentile") == 0.0
    assert expanded_pvalue(1.0, 6, "expanded_percentile") == 1.0
    assert expanded_pvalue(0.5, 6, "expanded_percentile") == pytest.approx(0.5)
    assert expanded_pvalue(0.01, 1, "expanded_percentile") == 0.01
    assert expanded_pvalue(0.01, 1.6, "expanded_percentile") == pytest.approx(
        t.cdf(norm.ppf(0.01) / math.sqrt(1.6 / 0.6), 1), rel=1e-12
    )
    assert expanded_pvalue(0.01, 9.4, "expanded_percentile") == pytest.approx(
        t.cdf(norm.ppf(0.01) / math.sqrt(9.4 / 8.4), 8), rel=1e-12
    )
    assert expanded_pvalue(0.01, NAN, "expanded_percentile") == 0.01
    assert expanded_pvalue(0.01, 6, "percentile") == 0.01
    two = expanded_pvalue(0.01, 2, "expanded_percentile")
    assert two == pytest.approx(t.cdf(norm.ppf(0.01) / math.sqrt(2), 1), rel=1e-12) and two > 0.01


# ------------------------------------------------------------------ percentiles ignore NaN resamples


def test_percentiles_ignore_nan_resamples_in_1d():
    s = np.array([NAN, 0.0, 1.0, NAN, 2.0, 3.0, 4.0])
    lo, hi = percentiles(s, 0.5)  # the 25th and 75th percentiles of 0..4
    assert lo.shape == () and float(lo) == 1.0 and float(hi) == 3.0
    lo, hi = percentiles(s, 0.95, 6, "expanded_percentile")
    want = np.quantile([0.0, 1.0, 2.0, 3.0, 4.0], interval_levels(0.95, 6, "expanded_percentile"))
    assert (float(lo), float(hi)) == pytest.approx(tuple(want), rel=1e-12)
    assert percentiles(s, 0.95, None, "expanded_percentile") == pytest.approx((0.1, 3.9))  # no units: plain
    lo, hi = percentiles(np.array([NAN, NAN]), 0.95)
    assert np.isnan(lo) and np.isnan(hi)


def test_percentiles_ignore_nan_resamples_per_column_in_2d():
    s = np.array(
        [
            [0.0, 10.0, NAN],
            [1.0, NAN, NAN],
            [NAN, 20.0, NAN],
            [2.0, NAN, NAN],
            [3.0, 30.0, NAN],
            [4.0, NAN, NAN],
        ]
    )
    lo, hi = percentiles(s, 0.5)
    np.testing.assert_array_equal(lo, [1.0, 15.0, NAN])
    np.testing.assert_array_equal(hi, [3.0, 25.0, NAN])
    lo, hi = percentiles(s, 0.9, np.array([6.0, 3.0, 1.0]), "expanded_percentile")
    for j, (col, units) in enumerate([([0, 1, 2, 3, 4], 6), ([10, 20, 30], 3)]):
        want = np.quantile(np.array(col, float), interval_levels(0.9, units, "expanded_percentile"))
        assert (lo[j], hi[j]) == pytest.approx(tuple(want), rel=1e-12)
    assert np.isnan(lo[2]) and np.isnan(hi[2])
    one = percentiles(s, 0.9, 6.0, "expanded_percentile")  # one number for every column
    want = np.quantile([10.0, 20.0, 30.0], interval_levels(0.9, 6, "expanded_percentile"))
    assert (one[0][1], one[1][1]) == pytest.approx(tuple(want), rel=1e-12)


# ------------------------------------------------------------------ cluster weights


def _weights(n, n_resamples, seed, clusters=None) -> np.ndarray:
    return np.concatenate(list(weight_blocks(n, n_resamples, seed, clusters)), axis=0)


def test_case_weights_are_multinomial_counts_summing_to_n():
    w = _weights(5, 40, 3)
    assert w.shape == (40, 5) and w.dtype == np.float64
    np.testing.assert_array_equal(w.sum(axis=1), 5.0)
    assert np.array_equal(w, np.round(w)) and w.min() >= 0 and w.max() > 1
    assert np.array_equal(w, _weights(5, 40, 3)) and not np.array_equal(w, _weights(5, 40, 4))
    # every case is drawn with the same probability: about n_resamples / 1 times each on average over cases
    assert np.allclose(_weights(4, 4000, 0).mean(axis=0), 1.0, atol=0.06)


def test_cluster_weights_are_equal_within_a_cluster_and_count_clusters():
    codes = np.array([7, 3, 7, 9, 3, 3])  # any codes, unequal cluster sizes
    w = _weights(6, 50, 1, codes)
    assert w.shape == (50, 6)
    np.testing.assert_array_equal(w[:, 0], w[:, 2])
    np.testing.assert_array_equal(w[:, 1], w[:, 4])
    np.testing.assert_array_equal(w[:, 1], w[:, 5])
    # one count per cluster; the three counts sum to the three clusters drawn
    np.testing.assert_array_equal(w[:, [1, 0, 3]].sum(axis=1), 3.0)
    assert len({tuple(r) for r in w[:, [1, 0, 3]]}) > 3
    # with equal cluster sizes every row sums to n
    pairs = _weights(6, 50, 1, np.array([0, 0, 1, 1, 2, 2]))
    np.testing.assert_array_equal(pairs.sum(axis=1), 6.0)
    np.testing.assert_array_equal(pairs[:, 0], pairs[:, 1])
    with pytest.raises(ValueError, match=r"one code per case \(6\)"):
        next(weight_blocks(6, 5, 0, np.zeros(5, dtype=np.int64)))


def test_weight_blocks_split_the_resamples_and_stay_deterministic(monkeypatch):
    whole = _weights(5, 7, 2)
    monkeypatch.setattr(bootstrap, "_BLOCK_ENTRIES", 10)  # two rows of 5 cases per block
    blocks = list(weight_blocks(5, 7, 2))
    assert [b.shape for b in blocks] == [(2, 5), (2, 5), (2, 5), (1, 5)]
    np.testing.assert_array_equal(np.concatenate(blocks), whole)
    monkeypatch.setattr(bootstrap, "_BLOCK_ENTRIES", 3)  # fewer entries than cases: still one row per block
    assert [b.shape for b in weight_blocks(5, 3, 2)] == [(1, 5)] * 3


def test_cluster_codes_seeds_and_counts():
    np.testing.assert_array_equal(cluster_codes(["b", "a", "b", "c"]), [1, 0, 1, 2])
    assert cluster_codes(["b", "a"]).dtype == np.int64
    np.testing.assert_array_equal(cluster_codes(["10", "9", 10]), [0, 1, 0])  # labels compared as strings
    assert cluster_codes(None) is None
    assert group_seed(3, "liver") == (3, zlib.crc32(b"liver"))
    assert n_clusters(5, None) == 5 and n_clusters(5, np.array([4, 4, 1, 1, 1])) == 2


def test_nan_aware_means():
    np.testing.assert_array_equal(ratio(np.array([1.0, 2.0, 3.0]), np.array([2.0, 0.0, 1.0])), [0.5, NAN, 3])
    np.testing.assert_array_equal(nan_mean(np.array([[1.0, NAN, 4.0], [NAN, NAN, NAN]])), [2.5, NAN])
    m = np.array([[1.0, 2.0, NAN], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(mean_over(m, np.array([True, True, False])), [1.5, 1.5])
    np.testing.assert_array_equal(mean_over(m, np.array([True, False, True])), [NAN, 2.0])
    assert np.isnan(mean_over(m, np.zeros(3, bool))).all() and mean_over(m, np.zeros(3, bool)).shape == (2,)
    valid = np.array([[True, False], [True, False], [False, True]])
    np.testing.assert_array_equal(units_per_column(valid, None), [2.0, 1.0])
    np.testing.assert_array_equal(units_per_column(valid, np.array([0, 0, 1])), [1.0, 1.0])
    assert units_per_column(valid, np.array([0, 1, 1])).dtype == np.float64


# ------------------------------------------------------------------ the effective number of clusters


def test_effective_units_of_equal_clusters_is_their_count_exactly():
    # three subjects of two cases, each case 1/6 of the estimate
    assert float(effective_units(np.full(6, 1 / 6), np.array([0, 0, 1, 1, 2, 2]))) == 3.0
    # equal up to the rounding of their sums (0.1 + 0.2 != 0.3 in floating point): still exactly the count
    assert float(effective_units(np.array([0.1, 0.2, 0.2, 0.1, 0.3]), np.array([0, 0, 1, 1, 2]))) == 3.0
    assert float(effective_units(np.full(5, 0.2), None)) == 5.0  # every case its own cluster
    # a cluster of no weight is no unit; nothing weighs anything: 0
    assert float(effective_units(np.array([0.5, 0.5, 0.0]), np.array([7, 3, 5]))) == 2.0
    assert float(effective_units(np.zeros(4), np.array([0, 0, 1, 1]))) == 0.0
    assert float(effective_units(np.zeros(0), np.zeros(0, dtype=np.int64))) == 0.0  # no case at all
    # Kish's own formula rounds beside the count here: (3 x 0.1)^2 / (3 x 0.01) = 3.0000000000000004
    assert float(effective_units(np.array([0.1, 0.1, 0.1, 0.0]), np.array([0, 1, 2, 3]))) == 3.0
    # per column: each column's clusters are compared among themselves
    assert effective_units(np.array([[0.1, 0.5], [0.1, 0.5], [0.1, 0.0]]), None).tolist() == [3.0, 2.0]
    # (Kish's own formula gives 2.999999999999999 for three 0.3s: the count comes from the comparison per column)
    assert effective_units(np.array([[0.001, 0.3]] * 3), None).tolist() == [3.0, 3.0]
    assert effective_units(np.full(6, 1 / 6), np.array([0, 0, 1, 1, 2, 2])).shape == ()


def test_effective_units_of_unequal_clusters_is_kish():
    # sizes 1 and 3 of equal cases: (1 + 3)^2 / (1^2 + 3^2) = 16 / 10
    assert float(effective_units(np.full(4, 0.25), np.array([0, 1, 1, 1]))) == pytest.approx(1.6, rel=1e-12)
    labels = np.array(["b", "a", "a", "a"], dtype=object)
    assert float(effective_units(np.full(4, 0.25), labels)) == pytest.approx(1.6, rel=1e-12)
    # sizes 1, 2, 3: 36 / 14; weights need not sum to 1 (Kish is scale free)
    codes = np.array([0, 1, 1, 2, 2, 2])
    assert float(effective_units(np.full(6, 5.0), codes)) == pytest.approx(36 / 14, rel=1e-12)
    # unequal cases without clusters: (1/2, 1/4, 1/4) -> 1 / (1/4 + 1/16 + 1/16) = 8/3
    assert float(effective_units(np.array([0.5, 0.25, 0.25]), None)) == pytest.approx(8 / 3, rel=1e-12)
    # beyond rounding (1e-6 apart) the clusters are unequal: Kish, 2 - (a - b)^2 / (a^2 + b^2), a hair below 2
    near = float(effective_units(np.array([0.5, 0.5 + 1e-6]), None))
    assert 2.0 - near == pytest.approx(1e-12 / 0.500001000001, rel=1e-3)
    # per column: (n, k) -> (k,); column 1's cluster 0 weighs nothing, its other two the same
    w = np.array([[0.25, 0.0], [0.25, 0.0], [0.25, 0.5], [0.25, 0.5]])
    got = effective_units(w, np.array([0, 0, 1, 2]))
    assert got.shape == (2,) and got[0] == pytest.approx(8 / 3, rel=1e-12) and got[1] == 2.0
    assert effective_units(w, None).tolist() == [4.0, 2.0]


def test_case_and_item_weights_are_each_cases_share_of_the_estimate():
    valid = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    want = [[1 / 3, 0, 0], [1 / 3, 1 / 3, 0], [0, 1 / 3, 0], [1 / 3, 1 / 3, 0]]  # an item without value: 0
    np.testing.assert_allclose(item_weights(valid), want, rtol=1e-15)
    items = np.array([True, True, False])
    # item_mean: the mean over the items of the item shares
    np.testing.assert_allclose(case_weights(valid, items, "item_mean"), [1 / 6, 1 / 3, 1 / 6, 1 / 3], rtol=1e-15)
    first = case_weights(valid, np.array([True, False, False]), "item_mean")
    np.testing.assert_allclose(first, [1 / 3, 1 / 3, 0, 1 / 3], rtol=1e-15)
    assert case_weights(valid, np.zeros(3, bool), "item_mean").tolist() == [0.0] * 4
    # case_mean: each case with any value weighs the same
    with_none = np.vstack([valid, np.zeros(3)])
    assert case_weights(with_none, items, "case_mean").tolist() == [0.25, 0.25, 0.25, 0.25, 0.0]
    assert case_weights(np.zeros((2, 3)), items, "case_mean").tolist() == [0.0, 0.0]
    # a single value carries the whole estimate
    assert item_weights(np.array([[1.0], [0.0]])).tolist() == [[1.0], [0.0]]
    assert case_weights(np.array([[0.0], [1.0]]), np.array([True]), "case_mean").tolist() == [0.0, 1.0]
    assert case_weights(np.array([[0.0], [1.0]]), np.array([True]), "item_mean").tolist() == [0.0, 1.0]


def test_resamples_for_a_level_and_none_where_the_expanded_level_underflows():
    # at 6 clusters Holm's first step over 5 groups (0.01) needs B = 8783 (test_gate_rules scans scipy for it)
    assert resamples_for(0.01, 6, "expanded_percentile") == 8783
    assert resamples_for(0.01, 6, "percentile") == 99  # (1 + 0) / (1 + B) <= 0.01
    # 1 degree of freedom (an effective 1.6 clusters, or 2): Phi(sqrt(n/(n-1)) t_1) of 0.05/15 is 0.0 in floats
    assert resamples_for(0.05 / 15, 1.6, "expanded_percentile") == math.inf
    assert resamples_for(0.05 / 15, 2, "expanded_percentile") == math.inf


def test_ratio_is_nan_over_nothing_and_never_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ratio(np.array([np.inf, 1.0, 3.0]), np.array([np.inf, 0.0, 2.0]))
    assert np.isnan(out[:2]).all() and out[2] == 1.5


def test_a_corpus_comparison_expands_with_the_count_of_clusters():
    # no case weights for a corpus function: its n_effective is its n_units, and it has no items
    def fn(w):
        return w @ np.array([1.0, 2.0, 4.0]) / w.sum(axis=1)

    d = paired_corpus(fn, fn, 3, n_resamples=5, clusters=np.array([0, 0, 1]))
    assert d.n_units == 2 and d.n_effective == 2.0 and isinstance(d.n_effective, float)
    assert d.item_effective.shape == (0,)


def test_equal_clusters_with_every_value_expand_with_their_count():
    # two scans per subject, every organ present: the intervals of bootstrap_means and paired_headlines are those
    # of the cluster count (what they were before the effective number), bit for bit
    rng = np.random.default_rng(4)
    v, u = rng.uniform(size=(8, 3)), rng.uniform(size=(8, 3))
    codes = np.repeat(np.arange(4), 2)
    ci = bootstrap_means(v, 200, seed=1, clusters=codes, method="expanded_percentile")
    reps = _replicates(v, _weights(8, 200, 1, codes))
    levels = interval_levels(0.95, 4, "expanded_percentile")
    assert ci.low.tolist() == [np.quantile(reps[:, j], levels)[0] for j in range(3)]
    d = paired_headlines(v, u, reduction="item_mean", best=1.0, n_resamples=200, seed=1, clusters=codes)
    assert d.n_effective == 4.0 and d.item_effective.tolist() == [4.0] * 3
    assert d.low == np.quantile(d.samples, levels)[0]


# ------------------------------------------------------------------ intervals recomputed from the same weights


def _replicates(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    valid = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (w @ np.where(valid, values, 0.0)) / (w @ valid)


def test_bootstrap_means_interval_from_the_cluster_resamples():
    v = np.array([[0.5, NAN], [0.75, 0.25], [0.25, NAN], [1.0, 0.5], [0.5, 1.0], [0.0, NAN]])
    codes = np.array([0, 0, 1, 1, 2, 3])
    ci = bootstrap_means(v, 300, seed=5, confidence=0.9, clusters=codes, method="expanded_percentile")
    w = _weights(6, 300, 5, codes)
    reps = _replicates(v, w)
    # column 1 has one value in each of clusters 0, 1, 2: three equal units expand its interval; column 0 has
    # values in four clusters of 2, 2, 1, 1 cases: Kish's effective number 6^2 / (4 + 4 + 1 + 1) = 3.6
    for j, units in enumerate([3.6, 3]):
        col = reps[:, j][~np.isnan(reps[:, j])]
        want = np.quantile(col, interval_levels(0.9, units, "expanded_percentile"))
        assert (ci.low[j], ci.high[j]) == pytest.approx(tuple(want), rel=1e-12)
    # the overall mean: a case weighs (1/6 + [has column 1]/3) / 2, so the clusters weigh 1/3, 1/3, 1/4, 1/12:
    # 1 / (1/9 + 1/9 + 1/16 + 1/144) = 144/42 effective clusters; only resamples that have both columns count
    both = reps.mean(axis=1)
    want = np.quantile(both[~np.isnan(both)], interval_levels(0.9, 144 / 42, "expanded_percentile"))
    assert (ci.overall_low, ci.overall_high) == pytest.approx(tuple(want), rel=1e-12)
    assert np.isnan(both).any()  # some resamples miss column 1 entirely; they are left out
    assert ci.value.tolist() == pytest.approx([0.5, 7 / 12]) and ci.n_valid.tolist() == [6, 3]
    assert ci.overall == pytest.approx((0.5 + 7 / 12) / 2)


def test_bootstrap_means_one_column_and_argument_checks():
    x = np.array([0.25, 0.5, 1.0])
    ci = bootstrap_means(x, 50, seed=1)
    assert ci.value.shape == (1,) and ci.value[0] == pytest.approx(7 / 12)
    reps = _replicates(x[:, None], _weights(3, 50, 1))[:, 0]
    assert (ci.low[0], ci.high[0]) == pytest.approx(tuple(np.quantile(reps, (0.025, 0.975))), rel=1e-12)
    assert ci.overall_low == pytest.approx(ci.low[0]) and ci.overall_high == pytest.approx(ci.high[0])
    assert bootstrap_means(x, 1, seed=1).low.shape == (1,)  # one resample is allowed
    for kw in ({"n_resamples": 0}, {"confidence": 0.0}, {"confidence": 1.0}):
        with pytest.raises(ValueError):
            bootstrap_means(x, **{"n_resamples": 10, **kw})
    all_nan = bootstrap_means(np.full((3, 1), NAN), 20, seed=0, method="expanded_percentile")
    assert np.isnan(all_nan.overall_low) and all_nan.n_valid.tolist() == [0]


def test_paired_headlines_interval_from_the_same_resamples_for_both_sides():
    cand = np.array([[0.5, 1.0], [0.75, NAN], [1.0, 0.5], [0.25, 0.75], [0.5, 0.5]])
    base = np.array([[0.25, 1.0], [0.5, 0.5], [0.75, NAN], [0.25, 0.25], [0.5, 0.75]])
    codes = np.array([0, 0, 1, 2, 2])
    d = paired_headlines(
        cand, base, reduction="item_mean", best=1.0, n_resamples=400, seed=9, confidence=0.9, clusters=codes
    )
    w = _weights(5, 400, 9, codes)
    delta = _replicates(cand, w).mean(axis=1) - _replicates(base, w).mean(axis=1)
    np.testing.assert_allclose(d.samples, delta, rtol=0, atol=1e-15)
    # both sides' case weights (item 0: 1/5 each, item 1: 1/4 on its four valid cases, halved) summed: cases
    # 18, 13, 13, 18, 18 (/40), clusters 31, 13, 36: 80^2 / (31^2 + 13^2 + 36^2) = 6400 / 2426 effective clusters
    want = np.quantile(delta[~np.isnan(delta)], interval_levels(0.9, 6400 / 2426, "expanded_percentile"))
    assert (d.low, d.high) == pytest.approx(tuple(want), rel=1e-12) and d.n_units == 3
    assert d.n_effective == pytest.approx(6400 / 2426, rel=1e-12)
    item = _replicates(cand, w) - _replicates(base, w)
    np.testing.assert_allclose(d.item_samples, item, rtol=0, atol=1e-15)
    assert d.item_units.tolist() == [3.0, 3.0]
    # item 0: clusters of 2, 1, 2 cases: 5^2 / 9 = 25/9; item 1: cases 1/2, 1/4, 1/4, 1/2, 1/2 -> clusters 3/4,
    # 1/4, 1: 4 / (26/16) = 32/13
    np.testing.assert_allclose(d.item_effective, [25 / 9, 32 / 13], rtol=1e-12)
    for j, units in enumerate([25 / 9, 32 / 13]):
        col = item[:, j][~np.isnan(item[:, j])]
        want = np.quantile(col, interval_levels(0.9, units, "expanded_percentile"))
        lo, hi = min(want[0], d.item_delta[j]), max(want[1], d.item_delta[j])
        assert (d.item_low[j], d.item_high[j]) == pytest.approx((lo, hi), rel=1e-12)
    assert d.candidate == pytest.approx((0.6 + 2.75 / 4) / 2) and d.baseline == pytest.approx((0.45 + 2.5 / 4) / 2)
    # case_mean: every case's own mean first, then the mean over cases
    cm = paired_headlines(cand, base, reduction="case_mean", best=1.0, n_resamples=400, seed=9, clusters=codes)
    per_case = np.nanmean(cand, axis=1) @ w.T / w.sum(axis=1) - np.nanmean(base, axis=1) @ w.T / w.sum(axis=1)
    np.testing.assert_allclose(cm.samples, per_case, rtol=0, atol=1e-14)
    assert cm.candidate == pytest.approx(np.mean(np.nanmean(cand, axis=1)))


def test_paired_headlines_edges_and_argument_checks():
    empty = paired_headlines(np.zeros((0, 2)), np.zeros((0, 2)), reduction="item_mean", best=1.0, n_resamples=5)
    assert np.isnan(empty.delta) and np.isnan(empty.low) and empty.samples.shape == (5,)
    assert empty.item_samples.shape == (5, 2) and empty.n_units == 0
    with pytest.raises(ValueError, match="matching"):
        paired_headlines(np.zeros((3, 2)), np.zeros((3, 1)), reduction="item_mean", best=1.0)
    with pytest.raises(ValueError, match="confidence"):
        paired_headlines(np.zeros(3), np.zeros(3), reduction="item_mean", best=1.0, confidence=1.0)
    # an item one side has no value for at all counts as the best value there (a distance: 0)
    d = paired_headlines(
        np.array([[1.0, 2.0], [3.0, 4.0]]),
        np.array([[1.0, NAN], [3.0, NAN]]),
        reduction="item_mean",
        best=0.0,
        n_resamples=20,
    )
    assert d.item_delta.tolist() == pytest.approx([0.0, 3.0]) and np.isnan(d.item_baseline[1])
    assert np.isnan(
        paired_headlines(
            np.array([[NAN]]), np.array([[NAN]]), reduction="item_mean", best=1.0, n_resamples=3
        ).item_delta[0]
    )


def test_paired_delong_argument_checks():
    y = np.array([0.0, 1.0, 0.0, 1.0])
    s = np.array([0.1, 0.9, 0.4, 0.6])
    one = paired_delong(y, s, s[::-1].copy())
    assert one.value.shape == (1,) and one.n_pairs.tolist() == [4]
    with pytest.raises(ValueError, match="matching"):
        paired_delong(y, s, s[:3])
    with pytest.raises(ValueError, match="confidence"):
        paired_delong(y, s, s, confidence=0.0)
    undefined = paired_delong(np.zeros(4), s, s)
    assert np.isnan(undefined.overall) and np.isnan(undefined.overall_candidate) and undefined.n_pairs.tolist() == [0]


def test_percentiles_widen_to_contain_the_point_estimate():
    same = np.array([0.25, 0.25, 0.25, NAN])
    lo, hi = percentiles(same, 0.95, point=0.25 + TINY)  # a point rounded just above every replicate
    assert (float(lo), float(hi)) == (0.25, 0.25 + TINY)
    lo, hi = percentiles(same, 0.95, point=0.125)
    assert (float(lo), float(hi)) == (0.125, 0.25)
    assert tuple(map(float, percentiles(same, 0.95, point=NAN))) == (0.25, 0.25)
    assert tuple(map(float, percentiles(same, 0.95, point=0.25))) == (0.25, 0.25)
    # no replicate: no interval, whatever the point
    lo, hi = percentiles(np.array([NAN, NAN]), 0.95, point=0.5)
    assert np.isnan(lo) and np.isnan(hi)
    cols = np.array([[0.0, 1.0, NAN], [1.0, 1.0, NAN], [2.0, 1.0, NAN]])
    lo, hi = percentiles(cols, 0.5, point=np.array([NAN, 2.0, 0.5]))
    np.testing.assert_array_equal(lo, [0.5, 1.0, NAN])
    np.testing.assert_array_equal(hi, [1.5, 2.0, NAN])


# ------------------------------------------------------------------ contracts the survivors of `make mutation` showed


def test_nan_mean_averages_each_row_of_a_matrix():
    np.testing.assert_array_equal(nan_mean(np.array([[1.0, 3.0], [5.0, NAN]])), [2.0, 5.0])
    assert float(nan_mean(np.array([1.0, NAN, 4.0]))) == 2.5


def test_mean_over_takes_the_last_axis_of_any_rank():
    items = np.array([True, False, True])
    assert float(mean_over(np.array([1.0, 9.0, 3.0]), items)) == 2.0
    cube = np.arange(12.0).reshape(2, 2, 3)
    np.testing.assert_array_equal(mean_over(cube, items), [[1.0, 4.0], [7.0, 10.0]])
    assert mean_over(cube, np.zeros(3, bool)).shape == (2, 2)
    assert mean_over(np.array([1.0, 2.0]), np.zeros(2, bool)).shape == ()


def test_percentiles_default_to_plain_levels_even_with_units():
    s = np.arange(11.0)
    assert tuple(map(float, percentiles(s, 0.8, 6))) == pytest.approx((1.0, 9.0))


def test_paired_headlines_contain_their_point_estimate_when_every_resample_rounds_beside_it():
    # nearly every resample of ten equal deltas gives 0.1 (or 0.1 + 1 ulp); the point's own sum rounds just below
    d = paired_headlines(
        np.full(10, 0.2), np.full(10, 0.1), reduction="item_mean", best=1.0, n_resamples=50, method="percentile"
    )
    assert d.delta < 0.1 and np.quantile(d.samples, 0.025) > d.delta  # the raw interval misses the point
    assert d.low == d.delta and d.low <= d.delta <= d.high
    assert d.item_low[0] == d.item_delta[0] and d.item_low[0] <= d.item_delta[0] <= d.item_high[0]


def test_paired_headlines_item_intervals_use_each_items_units_and_the_method():
    cand = np.array([[0.5, 1.0], [0.75, NAN], [1.0, 0.5], [0.25, 0.75], [0.5, 0.5], [0.0, NAN]])
    base = np.array([[0.25, 1.0], [0.5, NAN], [0.75, NAN], [0.25, 0.25], [0.5, 0.75], [0.25, NAN]])
    w = _weights(6, 300, 2)
    item = _replicates(cand, w) - _replicates(base, w)
    # item 1: the candidate's four valid cases weigh 1/4, the baseline's three 1/3: cases 7/12, 3/12, 7/12, 7/12
    # together, 2^2 / (3 * 49 + 9) * 144 = 48/13 effective cases (4 cases have a value)
    for method, units in (("expanded_percentile", [6, 48 / 13]), ("percentile", [6, 4])):
        d = paired_headlines(cand, base, reduction="item_mean", best=1.0, n_resamples=300, seed=2, method=method)
        assert d.item_units.tolist() == [6.0, 4.0]
        for j in range(2):
            col = item[:, j][~np.isnan(item[:, j])]
            want = np.quantile(col, interval_levels(0.95, units[j], method))
            lo, hi = min(want[0], d.item_delta[j]), max(want[1], d.item_delta[j])
            assert (d.item_low[j], d.item_high[j]) == pytest.approx((lo, hi), rel=1e-12)


def test_defaults_of_the_bootstrap_functions():
    x = np.random.default_rng(2).uniform(size=30)
    assert bootstrap_means(x).low == bootstrap_means(x, 1000, 0, 0.95, None, "percentile").low
    assert bootstrap_means(x).low != bootstrap_means(x, 1001, 0).low
    assert bootstrap_means(x).low != bootstrap_means(x, 1000, 1).low
    c, b = np.array([0.5, 1.0, 0.25, 0.75]), np.array([0.25, 0.5, 0.5, 0.5])
    d = paired_headlines(c, b, reduction="item_mean", best=1.0)
    e = paired_headlines(c, b, reduction="item_mean", best=1.0, n_resamples=2000, seed=0, method="expanded_percentile")
    assert d.samples.shape == (2000,) and np.array_equal(d.samples, e.samples) and (d.low, d.high) == (e.low, e.high)


def test_blocks_of_resamples_give_the_same_intervals(monkeypatch):
    v = np.array([[0.5, 0.25], [0.75, NAN], [1.0, 0.5], [0.25, 0.75], [0.5, 1.0]])
    one = bootstrap_means(v, 9, seed=3)
    pair = paired_headlines(v, v[::-1].copy(), reduction="item_mean", best=1.0, n_resamples=9, seed=3)
    monkeypatch.setattr(bootstrap, "_BLOCK_ENTRIES", 10)  # two resamples per block
    np.testing.assert_array_equal(bootstrap_means(v, 9, seed=3).low, one.low)
    again = paired_headlines(v, v[::-1].copy(), reduction="item_mean", best=1.0, n_resamples=9, seed=3)
    np.testing.assert_array_equal(again.item_samples, pair.item_samples)
    np.testing.assert_array_equal(again.samples, pair.samples)


def test_bootstrap_means_of_no_case_and_expanded_overall_without_clusters():
    empty = bootstrap_means(np.zeros((0, 2)), 10, seed=0)
    assert empty.value.shape == (2,) and np.isnan(empty.value).all()
    assert np.isnan(empty.low).all() and np.isnan(empty.high).all() and empty.high is not empty.low
    assert empty.n_valid.tolist() == [0, 0] and np.isnan(empty.overall_low) and np.isnan(empty.overall_high)
    x = np.array([0.25, 0.5, 1.0, 0.75, 0.0])
    ci = bootstrap_means(x, 200, seed=4, method="expanded_percentile")
    reps = _replicates(x[:, None], _weights(5, 200, 4))[:, 0]
    want = np.quantile(reps, interval_levels(0.95, 5, "expanded_percentile"))
    assert (ci.overall_low, ci.overall_high) == pytest.approx(tuple(want), rel=1e-12)


def test_argument_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"values must be \(n_cases, k\), got shape \(2, 2, 2\)"):
        bootstrap_means(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="^n_resamples must be >= 1$"):
        bootstrap_means(np.zeros(3), 0)
    with pytest.raises(ValueError, match=r"^confidence must be in \(0, 1\)$"):
        bootstrap_means(np.zeros(3), 10, confidence=1.0)
    for bad in (0.0, 1.0):
        with pytest.raises(ValueError, match=r"^confidence must be in \(0, 1\)$"):
            paired_headlines(np.zeros(3), np.zeros(3), reduction="item_mean", best=1.0, confidence=bad)
        with pytest.raises(ValueError, match=r"^confidence must be in \(0, 1\)$"):
            paired_delong(np.array([0.0, 1.0]), np.array([0.1, 0.9]), np.array([0.2, 0.8]), confidence=bad)


def test_case_mean_leaves_out_cases_without_any_value():
    cand = np.array([[1.0, 0.0], [NAN, NAN], [0.5, NAN]])
    base = np.array([[1.0, 1.0], [NAN, NAN], [1.0, NAN]])
    d = paired_headlines(cand, base, reduction="case_mean", best=1.0, n_resamples=100, seed=1, method="percentile")
    assert d.candidate == pytest.approx(0.5) and d.baseline == pytest.approx(1.0)
    w = _weights(3, 100, 1)
    per_case_c, per_case_b = np.array([0.5, 0.0, 0.5]), np.array([1.0, 0.0, 1.0])
    has = np.array([1.0, 0.0, 1.0])
    with np.errstate(invalid="ignore", divide="ignore"):
        want = (w @ per_case_c - w @ per_case_b) / (w @ has)
    np.testing.assert_allclose(d.samples, want, rtol=0, atol=1e-15)  # NaN where a resample drew only case 2


def _auc_pair():
    y = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    good = np.array([0.9, 0.8, 0.6, 0.7, 0.2, 0.1])  # AUC 8/9
    bad = np.array([0.2, 0.3, 0.55, 0.5, 0.8, 0.9])  # AUC 1/9
    return y, good, bad


def test_paired_delong_intervals_are_clipped_to_minus_one_and_one():
    y, good, bad = _auc_pair()
    worse = paired_delong(y, bad, good)
    assert worse.value[0] == pytest.approx(-7 / 9) and worse.low[0] == -1.0 and worse.overall_low == -1.0
    assert worse.high[0] > -7 / 9
    better = paired_delong(y, good, bad)
    assert better.high[0] == 1.0 and better.overall_high == 1.0 and better.low[0] < 7 / 9


def test_paired_delong_leaves_out_a_cell_with_a_score_missing_on_either_side():
    y, good, bad = _auc_pair()
    holed = good.copy()
    holed[2] = NAN
    d = paired_delong(y, holed, bad)
    ref = paired_delong(np.delete(y, 2), np.delete(good, 2), np.delete(bad, 2))
    assert d.n_pairs.tolist() == [5] and d.value[0] == pytest.approx(ref.value[0])
    assert d.variance[0] == pytest.approx(ref.variance[0])
    other = paired_delong(y, good, np.where(np.arange(6) == 2, NAN, bad))
    assert other.n_pairs.tolist() == [5] and other.value[0] == pytest.approx(ref.value[0])


def test_paired_delong_skips_an_undefined_finding_and_goes_on():
    y, good, bad = _auc_pair()
    labels = np.column_stack([np.zeros(6), y])  # finding 0 has no positive: AUC undefined
    d = paired_delong(labels, np.column_stack([good, good]), np.column_stack([bad, bad]))
    assert np.isnan(d.value[0]) and np.isnan(d.candidate[0]) and np.isnan(d.baseline[0]) and d.n_pairs[0] == 0
    assert d.value[1] == pytest.approx(7 / 9) and d.overall == pytest.approx(7 / 9)
    assert d.candidate[1] == pytest.approx(8 / 9) and d.baseline[1] == pytest.approx(1 / 9)


# ------------------------------------------------------------------ beyond 2000 degrees of freedom


@pytest.mark.parametrize("df", [2001, 2500])
@pytest.mark.parametrize("p", [0.6, 0.75, 0.85])
def test_t_quantile_beyond_the_series_agrees_with_scipy_to_rounding(df, p):
    # at moderate levels the Cornish-Fisher terms to 1/df^3 leave an error far below 1e-14 at these df
    from trackeval.stats.distributions import t_cdf, t_ppf

    assert t_ppf(p, df) == pytest.approx(t.ppf(p, df), abs=2e-15)
    x = float(t.ppf(p, df))
    assert t_cdf(x, df) == pytest.approx(p, abs=2e-15)
    assert t_cdf(-x, df) == pytest.approx(1 - p, abs=2e-15)


def test_t_cdf_far_tails_beyond_the_series():
    from trackeval.stats.distributions import t_cdf

    assert t_cdf(-40.0, 5000) == 0.0 and t_cdf(40.0, 5000) == 1.0
    assert t_cdf(-31.0, 2001) == 0.0 and t_cdf(31.0, 2001) == 1.0


# ------------------------------------------------------------------ the corpus bootstrap


def _mean_of(x: np.ndarray):
    return lambda w: (w @ x) / w.sum(axis=1)


def test_paired_corpus_of_a_mean_is_the_paired_bootstrap_of_that_mean():
    rng = np.random.default_rng(8)
    c, b = rng.uniform(size=12), rng.uniform(size=12)
    d = paired_corpus(_mean_of(c), _mean_of(b), 12)  # defaults: 2000 resamples, seed 0, expanded percentile
    ref = paired_headlines(c, b, reduction="item_mean", best=1.0, n_resamples=2000, seed=0)
    assert d.samples.shape == (2000,)
    np.testing.assert_allclose(d.samples, ref.samples, rtol=0, atol=1e-14)
    assert (d.low, d.high) == pytest.approx((ref.low, ref.high), abs=1e-14)
    assert d.candidate == pytest.approx(c.mean()) and d.delta == pytest.approx(c.mean() - b.mean())
    codes = np.repeat(np.arange(4), 3)
    dc = paired_corpus(_mean_of(c), _mean_of(b), 12, n_resamples=300, seed=5, confidence=0.8, clusters=codes)
    rc = paired_headlines(
        c, b, reduction="item_mean", best=1.0, n_resamples=300, seed=5, confidence=0.8, clusters=codes
    )
    np.testing.assert_allclose(dc.samples, rc.samples, rtol=0, atol=1e-14)
    assert (dc.low, dc.high) == pytest.approx((rc.low, rc.high), abs=1e-14) and dc.n_units == 4
    plain = paired_corpus(_mean_of(c), _mean_of(b), 12, n_resamples=300, seed=5, method="percentile")
    want = np.quantile(plain.samples, (0.025, 0.975))
    assert (plain.low, plain.high) == pytest.approx(tuple(want), abs=1e-14)
    # no items: the item arrays are empty
    assert d.item_units.shape == d.item_low.shape == d.item_high.shape == d.item_delta.shape == (0,)
    assert d.item_baseline.shape == d.item_candidate.shape == (0,) and d.item_samples.shape == (2000, 0)


def test_paired_corpus_edges():
    empty = paired_corpus(
        lambda w: np.full(w.shape[0], np.nan), lambda w: np.full(w.shape[0], np.nan), 0, n_resamples=7
    )
    assert empty.samples.shape == (7,) and np.isnan(empty.samples).all() and np.isnan(empty.low)
    # every resample rounds beside the point: the interval still contains it
    tenth = paired_corpus(
        _mean_of(np.full(10, 0.2)), _mean_of(np.full(10, 0.1)), 10, n_resamples=50, method="percentile"
    )
    assert tenth.low <= tenth.delta <= tenth.high and tenth.low == tenth.delta
    for bad in (0.0, 1.0):
        with pytest.raises(ValueError, match=r"^confidence must be in \(0, 1\)$"):
            paired_corpus(_mean_of(np.ones(3)), _mean_of(np.ones(3)), 3, confidence=bad)


def test_nan_mean_has_the_bits_of_numpy_nanmean_and_a_mean_over_nothing_is_nan():
    rng = np.random.default_rng(3)
    m = rng.random((37, 5))
    m[rng.random(m.shape) < 0.3] = NAN
    m[:, 2] = NAN
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for axis in (0, 1):
            ours, numpy = nan_mean(m, axis), np.nanmean(m, axis=axis)
            np.testing.assert_array_equal(np.isnan(ours), np.isnan(numpy))
            assert ours[~np.isnan(ours)].tobytes() == numpy[~np.isnan(numpy)].tobytes()  # the same bits
    assert np.isnan(nan_mean(np.zeros((0, 3)), 0)).all()


def test_headline_rules_item_mean_and_case_mean():
    # case 0 has one item, case 1 two: the item means are (1 + 3) / 2 = 2 and 5 -> 3.5; the case means 1 and 4 -> 2.5
    m = np.array([[1.0, NAN], [3.0, 5.0]])
    assert headline(m, "item_mean") == 3.5
    assert headline(m, "case_mean") == 2.5
    assert headline(np.array([2.0, NAN, 4.0]), "case_mean") == headline(np.array([2.0, NAN, 4.0]), "item_mean") == 3.0
    assert math.isnan(headline(np.full((2, 2), NAN), "item_mean"))
    assert math.isnan(headline(np.zeros((0, 2)), "case_mean"))


# ------------------------------------------------------------------ the t reference of the DeLong rows (issue 33)


def test_normal_pvalue_on_a_t_reference_at_its_smallest_degrees_of_freedom():
    z = (-0.375 + 0.25) / 0.125  # -1
    assert normal_pvalue(-0.375, 0.125, -0.25, "less", 1) == pytest.approx(t.cdf(z, 1), rel=1e-12)  # 0.25
    assert normal_pvalue(-0.375, 0.125, -0.25, "greater", 2) == pytest.approx(t.sf(z, 2), rel=1e-12)
    assert normal_pvalue(-0.375, 0.125, -0.25, "less") == pytest.approx(norm.cdf(z), rel=1e-12)
    # no degree of freedom: no evidence, whatever the estimate
    assert normal_pvalue(-0.375, 0.125, -0.25, "less", 0) == 1.0
    assert normal_pvalue(-5.0, 0.125, -0.25, "less", -1) == 1.0


def test_paired_delong_reads_every_interval_off_the_t_reference():
    # finding 0: 3 positives, 5 negatives (df 2); finding 1: 4 and 4 (df 3); finding 2: no positive (undefined)
    y = np.array([[1, 1, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 1, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]], float)
    a = np.array([[0.9, 0.8, 0.1], [0.7, 0.2, 0.5], [0.4, 0.9, 0.3], [0.5, 0.6, 0.2]] + [[0.3, 0.4, 0.6]] * 4)
    a[4:, 0], a[4:, 1] = [0.2, 0.6, 0.1, 0.35], [0.7, 0.3, 0.1, 0.5]
    b = np.clip(a + np.array([[0.1, -0.2, 0.0], [-0.3, 0.1, 0.0]] * 4), 0, 1)
    d = paired_delong(y, a, b)
    assert d.df.tolist() == [2, 3, -1] and d.df.dtype == np.int64 and d.overall_df == 2
    for j, df in ((0, 2), (1, 3)):
        half = t.ppf(0.975, df) * math.sqrt(d.variance[j])
        assert (d.low[j], d.high[j]) == pytest.approx(
            (max(-1.0, d.value[j] - half), min(1.0, d.value[j] + half)), abs=1e-12
        )
    assert math.isnan(d.low[2]) and math.isnan(d.value[2])
    # the macro row: the smallest df of its findings
    half = t.ppf(0.975, 2) * math.sqrt(d.overall_variance)
    assert (d.overall_low, d.overall_high) == pytest.approx(
        (max(-1.0, d.overall - half), min(1.0, d.overall + half)), abs=1e-12
    )
    # with every positive of finding 0 in one patient, it has 0 df: no interval for it nor for the macro row
    one = paired_delong(y, a, b, clusters=np.array([0, 0, 0, 1, 2, 3, 4, 5]))
    assert one.df[0] == 0 and math.isnan(one.low[0]) and math.isnan(one.overall_low) and one.overall_df == 0
