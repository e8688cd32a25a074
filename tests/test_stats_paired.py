"""Paired bootstrap, bootstrap p-values and multiplicity adjustment against scipy and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from trackeval.stats.bootstrap import expanded_pvalue, interval_levels
from trackeval.stats.paired import adjust_pvalues, bootstrap_pvalue, paired_headlines


def _paired(cand, base, n_resamples=300, seed=1, **kw):
    kw.setdefault("method", "percentile")
    return paired_headlines(cand, base, reduction="item_mean", best=1.0, n_resamples=n_resamples, seed=seed, **kw)


def test_identical_inputs_give_zero_delta_and_zero_width_ci():
    x = np.array([[0.8, 0.6], [0.7, np.nan], [0.9, 0.5]])
    d = _paired(x, x.copy(), method="expanded_percentile")
    assert d.delta == 0.0 and d.low == 0.0 and d.high == 0.0
    assert d.item_delta.tolist() == [0.0, 0.0]


def test_each_side_keeps_its_own_cells():
    cand = np.array([[1.0, 0.5], [0.8, np.nan], [np.nan, 0.7], [0.6, 0.9]])
    base = np.array([[0.5, 0.5], [0.6, 0.4], [0.9, np.nan], [0.4, 0.6]])
    d = _paired(cand, base)
    # candidate: column 0 rows 0, 1, 3 -> 0.8; column 1 rows 0, 2, 3 -> 0.7; headline 0.75
    # baseline: column 0 rows 0, 1, 2, 3 -> 0.6; column 1 rows 0, 1, 3 -> 0.5; headline 0.55
    assert d.item_candidate.tolist() == pytest.approx([0.8, 0.7])
    assert d.item_baseline.tolist() == pytest.approx([0.6, 0.5])
    assert d.candidate == pytest.approx(0.75) and d.baseline == pytest.approx(0.55)
    assert d.delta == pytest.approx(0.2)
    assert d.item_delta.tolist() == pytest.approx([0.2, 0.2])


def test_a_hallucinated_item_lowers_the_candidate_and_counts_best_on_the_other_side():
    # 20 cases without a brain: the champion predicts none (NaN: not applicable), the candidate paints one (Dice 0)
    cand = np.tile([0.93, 0.0], (20, 1))
    base = np.tile([0.93, np.nan], (20, 1))
    d = _paired(cand, base, method="expanded_percentile")
    assert d.candidate == pytest.approx(0.465) and d.baseline == pytest.approx(0.93)
    assert d.delta == pytest.approx(-0.465) and d.high == pytest.approx(-0.465)
    assert np.isnan(d.item_baseline[1])
    assert d.item_delta[1] == pytest.approx(-1.0)  # the champion's "no value" counts as Dice 1


def test_case_mean_reduction_averages_each_case_first():
    cand = np.array([[1.0, 0.0], [0.5, np.nan]])
    base = np.array([[1.0, 1.0], [1.0, np.nan]])
    d = paired_headlines(cand, base, reduction="case_mean", best=1.0, n_resamples=50, seed=0, method="percentile")
    # case means: candidate 0.5 and 0.5 -> 0.5; baseline 1.0 and 1.0 -> 1.0
    assert d.candidate == pytest.approx(0.5) and d.baseline == pytest.approx(1.0)


def test_ci_matches_scipy_paired_percentile_bootstrap():
    rng = np.random.default_rng(7)
    base = rng.uniform(0.5, 0.9, 40)
    cand = base + rng.normal(0.02, 0.05, 40)
    d = _paired(cand, base, n_resamples=20000, seed=3)
    ref = stats.bootstrap(
        (cand, base),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        paired=True,
        n_resamples=20000,
        method="percentile",
        rng=np.random.default_rng(11),
    ).confidence_interval
    assert d.delta == pytest.approx(np.mean(cand - base))
    # two Monte-Carlo estimates of the same percentiles: equal up to resampling noise (~0.1 SE)
    se = np.std(cand - base, ddof=1) / np.sqrt(40)
    assert d.low == pytest.approx(ref.low, abs=0.1 * se)
    assert d.high == pytest.approx(ref.high, abs=0.1 * se)


def test_clusters_are_drawn_whole():
    # two cases per subject with identical deltas inside a subject: a cluster resample's delta is the mean over
    # an even number of cases drawn in pairs, so resampling subjects equals resampling one case per subject
    rng = np.random.default_rng(2)
    per_subject = rng.normal(0.0, 0.1, 10)
    delta = np.repeat(per_subject, 2)
    clusters = np.repeat(np.arange(10), 2)
    by_subject = _paired(delta + 0.5, np.full(20, 0.5), n_resamples=4000, seed=5, clusters=clusters)
    one_each = _paired(per_subject + 0.5, np.full(10, 0.5), n_resamples=4000, seed=5)
    assert by_subject.n_units == 10
    assert by_subject.low == pytest.approx(one_each.low, abs=1e-12)
    assert by_subject.high == pytest.approx(one_each.high, abs=1e-12)
    # treated as 20 independent cases the interval would be about sqrt(2) narrower
    naive = _paired(delta + 0.5, np.full(20, 0.5), n_resamples=4000, seed=5)
    assert (naive.high - naive.low) < 0.8 * (by_subject.high - by_subject.low)


def test_expanded_levels_and_pvalues_hand_computed():
    # Hesterberg's expanded percentile: alpha' = Phi(sqrt(n/(n-1)) * t_{alpha/2, n-1})
    lo, hi = interval_levels(0.95, 6, "expanded_percentile")
    assert lo == pytest.approx(stats.norm.cdf(np.sqrt(6 / 5) * stats.t.ppf(0.025, 5)))
    assert lo == pytest.approx(0.002432, abs=1e-6) and hi == pytest.approx(1 - lo)
    assert interval_levels(0.95, 6, "percentile") == pytest.approx((0.025, 0.975))
    assert interval_levels(0.95, 1, "expanded_percentile") == pytest.approx((0.025, 0.975))
    # the p-value map is the inverse: the raw level at the 2.5% expanded bound maps back to 0.025
    assert expanded_pvalue(lo, 6, "expanded_percentile") == pytest.approx(0.025)
    assert expanded_pvalue(0.3, 6, "percentile") == 0.3
    assert expanded_pvalue(0.01, 12, "expanded_percentile") > 0.01


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
