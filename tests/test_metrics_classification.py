"""Classification kernels against sklearn, MONAI's vector and a direct O(n^2) DeLong implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from trackeval.metrics.classification import (
    auroc,
    delong,
    delong_influence,
    expected_calibration_error,
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
