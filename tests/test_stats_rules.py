"""The statistics the gate's rules read, pinned at their boundaries (issue 19, section 6): the bootstrap p-value's
tie rule, NaN resamples in percentiles, the expanded-percentile levels and their inverse, and the cluster weights.

Intervals are checked against a direct recomputation from the same weights (:func:`weight_blocks` with the same
seed), so a change in how replicates, levels or resampling units are formed shows up as a different number.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy.stats import norm, t

from trackeval.stats import bootstrap
from trackeval.stats.bootstrap import (
    bootstrap_means,
    cluster_codes,
    expanded_pvalue,
    group_seed,
    interval_levels,
    mean_over,
    n_clusters,
    nanmean_cols,
    nanmean_rows,
    percentiles,
    units_per_column,
    weight_blocks,
)
from trackeval.stats.paired import adjust_pvalues, bootstrap_pvalue, normal_pvalue, paired_delong, paired_headlines

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
    # every replicate on the H1 side: 0 (the bound excludes the threshold at every level); none: 1
    assert bootstrap_pvalue(s, 0.5, "less", 6, "expanded_percentile") == 0.0
    assert bootstrap_pvalue(s, 0.5, "greater", 6, "expanded_percentile") == 1.0


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
    # two units are enough to expand (the rule is n >= 2); fewer, or an unknown count, use the plain levels
    lo2, hi2 = interval_levels(0.95, 2, "expanded_percentile")
    assert lo2 == pytest.approx(norm.cdf(math.sqrt(2) * t.ppf(0.025, 1)), rel=1e-12) and hi2 == pytest.approx(1 - lo2)
    assert lo2 < 0.025
    assert interval_levels(0.95, 2 - TINY, "expanded_percentile") == pytest.approx((0.025, 0.975))
    assert interval_levels(0.95, NAN, "expanded_percentile") == pytest.approx((0.025, 0.975))
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
    assert expanded_pvalue(0.01, 2 - TINY, "expanded_percentile") == 0.01
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
    np.testing.assert_array_equal(nanmean_cols(np.array([1.0, 2.0, 3.0]), np.array([2.0, 0.0, 1.0])), [0.5, NAN, 3])
    np.testing.assert_array_equal(nanmean_rows(np.array([[1.0, NAN, 4.0], [NAN, NAN, NAN]])), [2.5, NAN])
    m = np.array([[1.0, 2.0, NAN], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(mean_over(m, np.array([True, True, False])), [1.5, 1.5])
    np.testing.assert_array_equal(mean_over(m, np.array([True, False, True])), [NAN, 2.0])
    assert np.isnan(mean_over(m, np.zeros(3, bool))).all() and mean_over(m, np.zeros(3, bool)).shape == (2,)
    valid = np.array([[True, False], [True, False], [False, True]])
    np.testing.assert_array_equal(units_per_column(valid, None), [2.0, 1.0])
    np.testing.assert_array_equal(units_per_column(valid, np.array([0, 0, 1])), [1.0, 1.0])
    assert units_per_column(valid, np.array([0, 1, 1])).dtype == np.float64


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
    # column 1 has values in clusters 0, 1, 2: three units expand its interval, column 0 has four
    for j, units in enumerate([4, 3]):
        col = reps[:, j][~np.isnan(reps[:, j])]
        want = np.quantile(col, interval_levels(0.9, units, "expanded_percentile"))
        assert (ci.low[j], ci.high[j]) == pytest.approx(tuple(want), rel=1e-12)
    # the overall mean uses all four clusters, and only resamples that have both columns
    both = reps.mean(axis=1)
    want = np.quantile(both[~np.isnan(both)], interval_levels(0.9, 4, "expanded_percentile"))
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
    want = np.quantile(delta[~np.isnan(delta)], interval_levels(0.9, 3, "expanded_percentile"))
    assert (d.low, d.high) == pytest.approx(tuple(want), rel=1e-12) and d.n_units == 3
    item = _replicates(cand, w) - _replicates(base, w)
    np.testing.assert_allclose(d.item_samples, item, rtol=0, atol=1e-15)
    assert d.item_units.tolist() == [3.0, 3.0]
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
