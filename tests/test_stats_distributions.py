"""The scipy-free normal and Student t functions behind the expanded intervals, against scipy.stats."""

from __future__ import annotations

import pytest
from scipy import stats

from trackeval.stats.distributions import normal_cdf, normal_ppf, t_cdf, t_ppf


@pytest.mark.parametrize("x", [-8.0, -2.5, -0.3, 0.0, 1.0, 4.2])
def test_normal_matches_scipy(x):
    assert normal_cdf(x) == pytest.approx(stats.norm.cdf(x), rel=1e-12, abs=1e-300)
    p = stats.norm.cdf(x)
    assert normal_ppf(p) == pytest.approx(x, abs=1e-9)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 11, 29, 99, 1000, 2000])
@pytest.mark.parametrize("x", [-30.0, -2.571, -0.5, 0.0, 0.7, 3.0])
def test_t_cdf_exact_series_matches_scipy(df, x):
    assert t_cdf(x, df) == pytest.approx(stats.t.cdf(x, df), rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("df", [2001, 5000, 100000])
def test_t_cdf_beyond_the_series_is_within_1e7(df):
    for x in (-4.0, -1.96, 0.5, 2.5):
        assert t_cdf(x, df) == pytest.approx(stats.t.cdf(x, df), abs=1e-7)


@pytest.mark.parametrize("df", [1, 5, 11, 99, 3000])
@pytest.mark.parametrize("p", [1e-6, 0.0024, 0.025, 0.5, 0.9])
def test_t_ppf_inverts_the_cdf(df, p):
    assert t_ppf(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-6, abs=1e-9)


def test_edges_and_bad_degrees_of_freedom():
    assert normal_ppf(0.0) == float("-inf") and normal_ppf(1.0) == float("inf")
    assert t_ppf(0.0, 3) == float("-inf") and t_ppf(1.0, 3) == float("inf")
    with pytest.raises(ValueError, match="positive integer"):
        t_cdf(0.0, 0)
