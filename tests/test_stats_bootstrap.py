import numpy as np
import pytest
from scipy import stats

from trackeval.stats.bootstrap import bootstrap_means


def test_point_estimates_are_nan_aware_means():
    v = np.array([[0.5, np.nan, 1.0], [0.7, np.nan, 0.0], [0.9, np.nan, np.nan]])
    ci = bootstrap_means(v, n_resamples=200, seed=1)
    np.testing.assert_allclose(ci.value[[0, 2]], [0.7, 0.5])
    assert np.isnan(ci.value[1]) and np.isnan(ci.low[1]) and np.isnan(ci.high[1])
    assert ci.n_valid.tolist() == [3, 0, 2]
    assert ci.overall == pytest.approx((0.7 + 0.5) / 2)  # mean over organs that have values


def test_same_seed_same_interval_other_seed_differs():
    v = np.random.default_rng(0).random((40, 3))
    a, b = bootstrap_means(v, 500, seed=7), bootstrap_means(v, 500, seed=7)
    c = bootstrap_means(v, 500, seed=8)
    assert np.array_equal(a.low, b.low) and a.overall_high == b.overall_high
    assert not np.array_equal(a.low, c.low)


def test_degenerate_cases():
    one = bootstrap_means(np.array([[0.3, 0.6]]), 100, seed=0)
    np.testing.assert_allclose(one.low, [0.3, 0.6])
    np.testing.assert_allclose(one.high, [0.3, 0.6])
    const = bootstrap_means(np.full((10, 1), 0.8), 100, seed=0)
    assert const.low[0] == pytest.approx(0.8) and const.high[0] == pytest.approx(0.8)
    empty = bootstrap_means(np.zeros((0, 2)), 100, seed=0)
    assert np.isnan(empty.overall) and np.isnan(empty.low).all()
    with pytest.raises(ValueError):
        bootstrap_means(np.zeros((3, 2, 2)))


def test_matches_scipy_percentile_bootstrap():
    x = np.random.default_rng(3).normal(0.8, 0.1, size=60)
    ours = bootstrap_means(x, n_resamples=20000, seed=0)
    ref = stats.bootstrap((x,), np.mean, n_resamples=20000, method="percentile", rng=np.random.default_rng(1))
    assert ours.low[0] == pytest.approx(ref.confidence_interval.low, abs=2e-3)
    assert ours.high[0] == pytest.approx(ref.confidence_interval.high, abs=2e-3)


def test_overall_ci_resamples_cases_jointly():
    # Organs perfectly correlated within a case: the CI of the mean over organs equals each organ's CI.
    x = np.random.default_rng(5).random(30)
    ci = bootstrap_means(np.stack([x, x], axis=1), 1000, seed=2)
    assert ci.overall_low == pytest.approx(ci.low[0]) and ci.overall_high == pytest.approx(ci.high[0])


def test_coverage_close_to_nominal():
    rng = np.random.default_rng(11)
    hits = 0
    reps = 300
    for i in range(reps):
        x = rng.normal(0.5, 0.2, size=50)
        ci = bootstrap_means(x, 400, seed=i)
        hits += ci.low[0] <= 0.5 <= ci.high[0]
    assert 0.89 <= hits / reps <= 0.985


def test_a_constant_value_lies_inside_its_own_interval():
    # Dice 2/3 in all 20 cases: the point estimate (a sum / count) and the resample means can round apart
    v = np.full((20, 1), 2 / 3)
    for method in ("percentile", "expanded_percentile"):
        ci = bootstrap_means(v, 500, seed=3, method=method)
        assert ci.low[0] <= ci.value[0] <= ci.high[0]
        assert ci.overall_low <= ci.overall <= ci.overall_high
    # near-constant and single-case inputs too
    near = np.full((7, 2), 0.1) + np.arange(7)[:, None] * 1e-17
    ci = bootstrap_means(near, 300, seed=0, method="expanded_percentile")
    assert (ci.low <= ci.value).all() and (ci.value <= ci.high).all()
    one = bootstrap_means(np.array([[1 / 3]]), 50, seed=0, method="expanded_percentile")
    assert one.low[0] <= one.value[0] <= one.high[0]
    # no valid value: no interval, not a widened one
    none = bootstrap_means(np.full((4, 1), np.nan), 50, seed=0)
    assert np.isnan(none.low[0]) and np.isnan(none.high[0])
