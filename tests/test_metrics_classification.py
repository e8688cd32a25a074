"""Classification kernels against sklearn, MONAI's vector and a direct O(n^2) DeLong implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from trackeval.metrics.classification import (
    _poisson_binomial_pmf,
    auroc,
    delong,
    delong_influence,
    ece_reference,
    expected_calibration_error,
    logit_interval,
    operating_point,
    threshold_at_sensitivity,
    wald_interval,
)


def _delong_direct(y: np.ndarray, s: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
    """DeLong et al. (1988) written out: the kernel psi over all (positive, negative) pairs."""
    pos, neg = s[y == 1], s[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    auc = psi.mean()
    s10 = ((v10 - auc) ** 2).sum() / (len(pos) - 1)
    s01 = ((v01 - auc) ** 2).sum() / (len(neg) - 1)
    return auc, s10 / len(pos) + s01 / len(neg), v10, v01


def _cases(n_cases: int = 40):
    rng = np.random.default_rng(7)
    for _ in range(n_cases):
        n = int(rng.integers(4, 80))
        y = rng.integers(0, 2, n)
        y[:2] = [0, 1]
        y[2:4] = [0, 1]
        s = np.round(rng.normal(size=n) + 0.8 * y, 1)  # rounding makes many ties
        yield y, s


def test_monai_vector_ties_half_credit():
    assert auroc(np.array([0, 1, 0, 1]), np.array([0.5, 0.5, 0.2, 8.3])) == 0.875


@pytest.mark.parametrize(("y", "s"), list(_cases()))
def test_auroc_and_delong_against_sklearn_and_direct(y, s):
    d = delong(y, s)
    assert d.auc == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    auc, var, v10, v01 = _delong_direct(y, s)
    assert d.auc == pytest.approx(auc, abs=1e-12)
    assert d.variance == pytest.approx(var, rel=1e-10, abs=1e-15)
    np.testing.assert_allclose(d.v10, v10, atol=1e-12)
    np.testing.assert_allclose(d.v01, v01, atol=1e-12)
    assert (delong_influence(y, d) ** 2).sum() == pytest.approx(var, rel=1e-10, abs=1e-15)


def test_influence_covariance_equals_delong_covariance_on_shared_classes():
    """Two scores of the same images: sum phi_a phi_b = S10_ab / m + S01_ab / n (DeLong 1988, eq. for L=2)."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 60)
    a, b = rng.normal(size=60) + y, rng.normal(size=60) + 0.5 * y
    da, db = delong(y, a), delong(y, b)
    _, _, v10a, v01a = _delong_direct(y, a)
    _, _, v10b, v01b = _delong_direct(y, b)
    m, n = (y == 1).sum(), (y == 0).sum()
    cov = np.cov(v10a, v10b)[0, 1] / m + np.cov(v01a, v01b)[0, 1] / n
    assert (delong_influence(y, da) * delong_influence(y, db)).sum() == pytest.approx(cov, rel=1e-10)


def test_single_class_and_singletons():
    d = delong(np.array([1, 1, 1]), np.array([0.1, 0.2, 0.3]))
    assert math.isnan(d.auc) and math.isnan(d.variance)
    one_pos = delong(np.array([1, 0, 0]), np.array([0.9, 0.2, 0.3]))
    assert one_pos.auc == 1.0 and math.isnan(one_pos.variance)
    assert wald_interval(0.99, 0.01**2) == pytest.approx((0.99 - 1.959964 * 0.01, 1.0), abs=1e-6)  # clipped at 1


@pytest.mark.parametrize(("y", "s"), list(_cases(25)))
def test_operating_point_matches_roc_curve(y, s):
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=False)
    i = int(np.argmax(tpr >= 0.95))
    t = threshold_at_sensitivity(y, s, 0.95)
    assert t == thresholds[i]
    op = operating_point(y, s, t)
    assert op.sensitivity == pytest.approx(tpr[i]) and op.specificity == pytest.approx(1 - fpr[i])
    assert op.ppv == pytest.approx(op.tp / ((s >= t).sum()))


def test_threshold_exact_fraction_is_not_lost_to_rounding():
    y = np.array([1] * 20 + [0] * 5)
    s = np.r_[np.linspace(0.99, 0.2, 20), np.full(5, 0.1)]
    # 0.95 * 20 = 19.000000000000004 in floating point: the 19th positive already reaches 95%
    assert threshold_at_sensitivity(y, s, 0.95) == s[18]


def test_ece_hand_computed():
    # 3 bins: (0, 1/3] holds 0.1, 0.3 (labels 0, 1); (1/3, 2/3] holds 0.5 (1); (2/3, 1] holds 0.9, 1.0 (1, 1)
    y = np.array([0, 1, 1, 1, 1])
    p = np.array([0.1, 0.3, 0.5, 0.9, 1.0])
    expected = (2 * abs(0.5 - 0.2) + 1 * abs(1 - 0.5) + 2 * abs(1 - 0.95)) / 5
    assert expected_calibration_error(y, p, n_bins=3) == pytest.approx(expected, abs=1e-15)
    assert expected_calibration_error(np.array([0]), np.array([0.0]), 15) == 0.0  # 0 is in the first bin
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        expected_calibration_error(y, p + 0.1)


# ------------------------------------------------------------------ logit-scale CI of one AUC (issue 19, section 3)


def test_logit_interval_hand_computed():
    # A = 0.9, se = 0.05: logit ln 9 = 2.197225, half-width 1.959964 * 0.05 / (0.9 * 0.1) = 1.088869 on the logit
    # scale, bounds expit(1.108356) = 0.751822 and expit(3.286093) = 0.963949
    assert logit_interval(0.9, 0.05**2) == pytest.approx((0.751822, 0.963949), abs=1e-6)
    # A = 0.8, se = 0.1: ln 4 = 1.386294 -/+ 1.959964 * 0.1 / 0.16 = 1.224977 -> expit(0.161317), expit(2.611272)
    assert logit_interval(0.8, 0.1**2) == pytest.approx((0.540242, 0.931584), abs=1e-6)
    # 90% level: z = 1.644854, half-width 1.644854 * 0.05 / 0.09 = 0.913808 -> expit(1.283417), expit(3.111033)
    assert logit_interval(0.9, 0.05**2, 0.90) == pytest.approx((0.783031, 0.957345), abs=1e-6)


def test_delong_ci_is_the_logit_interval_of_the_delong_variance():
    # the docstring example: AUC 0.75, DeLong variance 0.125 (placements by hand in delong's docstring):
    # ln 3 = 1.098612 -/+ 1.959964 * sqrt(0.125) / (0.75 * 0.25) = 3.695744 -> expit(-2.597131), expit(4.794356)
    d = delong(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    assert (d.auc, d.variance) == (0.75, 0.125)
    assert d.ci() == pytest.approx((0.069323, 0.991792), abs=1e-6)
    assert wald_interval(d.auc, d.variance) == pytest.approx((0.75 - 1.959964 * math.sqrt(0.125), 1.0), abs=1e-6)


def test_logit_interval_shape_and_bounds():
    # mirror image: the interval of 1 - A is 1 minus the interval of A
    low, high = logit_interval(0.85, 0.04**2)
    assert logit_interval(0.15, 0.04**2) == pytest.approx((1 - high, 1 - low), abs=1e-12)
    # asymmetric near 1 (shorter towards 1), never outside (0, 1) even where Wald would clip
    assert high - 0.85 < 0.85 - low
    assert 0.0 < logit_interval(0.99, 0.05**2)[0] and logit_interval(0.99, 0.05**2)[1] < 1.0
    # 0.5 is the centre of the logit scale: symmetric, expit(-/+ 1.959964 * 0.05 / 0.25) = expit(-/+ 0.391993)
    assert logit_interval(0.5, 0.05**2) == pytest.approx((0.403238, 0.596762), abs=1e-6)
    # A = 0 or 1: the logit is infinite -> the Wald interval clipped to [0, 1]
    assert logit_interval(1.0, 0.0) == (1.0, 1.0)
    assert logit_interval(0.0, 0.01**2) == pytest.approx((0.0, 1.959964 * 0.01), abs=1e-6)
    assert all(math.isnan(b) for b in logit_interval(math.nan, 0.01) + logit_interval(0.7, math.nan))


def test_perfect_separation_has_zero_variance_and_a_point_interval():
    d = delong(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.3, 0.4]))
    assert d.auc == 1.0 and d.variance == 0.0 and d.ci() == (1.0, 1.0)


# ------------------------------------------------------------------ ECE of a perfectly calibrated model


def test_ece_reference_hand_computed():
    # one score per bin: E|y - p| = p (1 - p) + (1 - p) p = 2 p (1 - p)
    assert ece_reference(np.array([0.1, 0.9]), n_bins=2) == pytest.approx((0.18 + 0.18) / 2, abs=1e-15)
    assert ece_reference(np.array([0.3]), n_bins=15) == pytest.approx(2 * 0.3 * 0.7, abs=1e-15)
    # 0.5, 0.5 in one bin: K = 0, 1, 2 with 1/4, 1/2, 1/4 -> E|K - 1| = 1/2, over N = 2
    assert ece_reference(np.array([0.5, 0.5]), n_bins=1) == pytest.approx(0.25, abs=1e-15)
    # 0.2, 0.4 in one bin (mu = 0.6): K = 0 w.p. 0.48, 1 w.p. 0.44, 2 w.p. 0.08 -> 0.48*0.6 + 0.44*0.4 + 0.08*1.4
    assert ece_reference(np.array([0.2, 0.4]), n_bins=2) == pytest.approx((0.288 + 0.176 + 0.112) / 2, abs=1e-15)
    assert ece_reference(np.array([0.0, 1.0, 1.0])) == 0.0  # certain scores: a calibrated model makes no error
    assert math.isnan(ece_reference(np.array([])))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ece_reference(np.array([0.5, 1.2]))
    with pytest.raises(ValueError, match="n_bins"):
        ece_reference(np.array([0.5]), n_bins=0)


def test_ece_reference_is_the_exact_expectation_over_all_label_vectors():
    """Brute force: the ECE of every one of the 2^12 label vectors, weighted by its Bernoulli(p) probability."""
    rng = np.random.default_rng(4)
    p = np.round(rng.uniform(size=12), 2)
    exact = 0.0
    for code in range(2**12):
        y = (code >> np.arange(12)) & 1
        exact += float(np.prod(np.where(y == 1, p, 1 - p))) * expected_calibration_error(y, p, n_bins=4)
    assert ece_reference(p, n_bins=4) == pytest.approx(exact, rel=1e-12)


def test_poisson_binomial_pmf_matches_the_recursion():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=777)
    pmf = np.array([1.0])
    for q in p:  # P_k <- P_k (1 - q) + P_{k-1} q
        pmf = np.r_[pmf * (1 - q), 0.0] + np.r_[0.0, pmf * q]
    np.testing.assert_allclose(_poisson_binomial_pmf(p), pmf, atol=1e-14)
    assert _poisson_binomial_pmf(np.array([0.3])).tolist() == pytest.approx([0.7, 0.3])


def test_calibrated_model_ece_is_near_the_reference_and_a_miscalibrated_one_far_above():
    """Seeded: y ~ Bernoulli(p) is calibrated by construction. N = 50, 15 bins (the issue's case): the reference
    is about 0.17 (uniform scores) and the mean ECE of 2000 calibrated label draws is within 0.005 of it (its
    Monte Carlo standard error is about 0.001). A model whose scores are p**3 (overconfident negatives) on the
    same labels has an ECE of several times the reference of its own scores."""
    rng = np.random.default_rng(19)
    p = rng.uniform(size=50)
    reference = ece_reference(p, 15)
    assert 0.15 < reference < 0.19
    draws = [expected_calibration_error((rng.uniform(size=50) < p).astype(int), p, 15) for _ in range(2000)]
    assert np.mean(draws) == pytest.approx(reference, abs=0.005)
    # large N: one calibrated draw is close to the (small) reference; the miscalibrated model is far above its own
    p = rng.uniform(size=20_000)
    y = (rng.uniform(size=p.size) < p).astype(int)
    assert expected_calibration_error(y, p, 15) == pytest.approx(ece_reference(p, 15), abs=0.01)
    bad = p**3
    assert expected_calibration_error(y, bad, 15) > 10 * ece_reference(bad, 15)
