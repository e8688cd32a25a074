"""The readers' kernel (:mod:`trackeval.metrics.readers`) against sklearn's ROC curve, numpy's interpolation, an
exact rational reference and hand-computed cases (ties, vertical segments, points exactly on the curve)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_curve

from trackeval.metrics.readers import (
    reader_below_curve,
    reader_rates,
    roc_vertices,
    sensitivity_at_fpr,
    sensitivity_at_reader,
)

NAN = math.nan


def _tied(seed: int, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    y[:2] = (0, 1)
    return y, rng.integers(0, 6, n) / 5.0  # many ties, across classes


def _exact_curve(y, s, x: Fraction) -> Fraction:
    """The curve's highest sensitivity at ``x`` in rationals: the vertices from counts, max at a vertex rate,
    else the segment between the neighbouring vertices (an independent statement of the definition)."""
    y, s = np.asarray(y), np.asarray(s)
    p, n = int(y.sum()), int((1 - y).sum())
    pts = [(Fraction(0), Fraction(0))]
    pts += [(Fraction(int(((s >= t) & (y == 0)).sum()), n), Fraction(int(((s >= t) & (y == 1)).sum()), p))
            for t in sorted(set(s.tolist()), reverse=True)]  # fmt: skip
    at = [t for f, t in pts if f == x]
    if at:
        return max(at)
    (f0, t0) = max((f, t) for f, t in pts if f < x)
    (f1, t1) = min((f, t) for f, t in pts if f > x)
    return t0 + (t1 - t0) * (x - f0) / (f1 - f0)


@pytest.mark.parametrize("seed", range(8))
def test_vertices_are_sklearns(seed):
    y, s = _tied(seed)
    fpr, tpr, thr = roc_vertices(y, s)
    ref = roc_curve(y, s, drop_intermediate=False)
    for mine, theirs in zip((fpr, tpr, thr), ref, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_weighted_vertices_are_those_of_the_repeated_images():
    y, s = _tied(3, 25)
    w = np.random.default_rng(0).integers(0, 4, (5, 25)).astype(float)
    fpr, tpr, thr = roc_vertices(y, s, w)
    for b in range(5):
        rep = np.repeat(np.arange(25), w[b].astype(int))
        f, t, th = roc_curve(y[rep], s[rep], drop_intermediate=False)
        at = np.isin(thr, th)  # a score that lost all its images repeats the previous vertex
        np.testing.assert_allclose(fpr[b][at], f, rtol=0, atol=1e-15)
        np.testing.assert_allclose(tpr[b][at], t, rtol=0, atol=1e-15)
        assert set(zip(fpr[b], tpr[b], strict=True)) == set(zip(f, t, strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_sensitivity_at_fpr_is_numpy_interp_between_vertices_and_the_highest_at_one(seed):
    y, s = _tied(seed)
    f, t, _ = roc_curve(y, s)  # sklearn's default (collinear vertices dropped): the same curve
    fpr, tpr, _ = roc_vertices(y, s)
    for x in np.random.default_rng(seed).random(50):
        assert sensitivity_at_fpr(fpr, tpr, x) == pytest.approx(np.interp(x, f, t), abs=1e-12)
    for x in np.unique(f):
        assert sensitivity_at_fpr(fpr, tpr, x) == t[f == x].max()  # vertical segment: its top


def test_hand_cases_vertical_segment_and_ties():
    # negatives 0.9 and 0.1, positives 0.8 and 0.7: (0,0) (0.5,0) (0.5,0.5) (0.5,1) (1,1)
    y, s = [0, 1, 1, 0], [0.9, 0.8, 0.7, 0.1]
    fpr, tpr, _ = roc_vertices(y, s)
    assert fpr.tolist() == [0, 0.5, 0.5, 0.5, 1] and tpr.tolist() == [0, 0, 0.5, 1, 1]
    assert [sensitivity_at_fpr(fpr, tpr, x) for x in (0.0, 0.25, 0.5, 0.75, 1.0)] == [0, 0, 1, 1, 1]
    # the curve's sensitivity at 0.5 is the top of the vertical segment: (0.5, 0.5) on it lies below, (0.5, 1) not
    assert reader_below_curve(y, s, [1, 1, 0, 0]) is True
    assert reader_below_curve(y, s, [1, 1, 1, 0]) is False
    assert reader_below_curve(y, s, [1, 0, 0, 0]) is True  # (0.5, 0)
    assert reader_below_curve(y, s, [0, 0, 0, 0]) is False  # (0, 0): a vertex
    # all scores tied: the diagonal; (1/3, 1/3) lies on it exactly, (1/3, 0) below it
    y3, s3 = [0, 0, 0, 1, 1, 1], [0.5] * 6
    assert reader_below_curve(y3, s3, [1, 0, 0, 1, 0, 0]) is False
    assert reader_below_curve(y3, s3, [1, 0, 0, 0, 0, 0]) is True
    assert reader_below_curve(y3, s3, [0, 0, 0, 1, 0, 0]) is False  # above the curve


def test_a_reader_equal_to_a_threshold_of_the_model_lies_on_or_under_its_vertex():
    y, s = [0, 1, 1, 0, 1, 0], [0.9, 0.8, 0.7, 0.4, 0.4, 0.1]  # a vertical run at FPR 1/3, a tie at 0.4
    for t in np.unique(s):
        d = (s >= t).astype(float)
        model, (_, sens) = sensitivity_at_reader(y, s, d), reader_rates(y, d)
        assert model >= sens
        assert reader_below_curve(y, s, d) is (model > sens)
    assert reader_below_curve(y, s, (np.array(s) >= 0.8).astype(float)) is True  # under the run's top (t=0.7)
    assert reader_below_curve(y, s, (np.array(s) >= 0.7).astype(float)) is False


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 4), st.sampled_from([0.0, 1.0, NAN])), min_size=1, max_size=14)
)
def test_below_agrees_with_the_exact_rational_reference(rows):
    y, s, d = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    got = reader_below_curve(y, s, d)
    keep = ~np.isnan(d)
    yk, sk, dk = y[keep], s[keep], d[keep]
    if not (yk == 1).any() or not (yk == 0).any():
        assert got is None
        assert math.isnan(sensitivity_at_reader(y, s, d))
        return
    x = Fraction(int(dk[yk == 0].sum()), int((yk == 0).sum()))
    sens = Fraction(int(dk[yk == 1].sum()), int((yk == 1).sum()))
    curve = _exact_curve(yk, sk, x)
    assert got is (sens < curve)
    assert sensitivity_at_reader(y, s, d) == pytest.approx(float(curve), abs=1e-12)


def test_sensitivity_at_reader_uses_the_decided_images_and_weights_repeat_them():
    y, s = _tied(7, 30)
    rng = np.random.default_rng(1)
    d = np.where(rng.random(30) < 0.2, np.nan, rng.integers(0, 2, 30).astype(float))
    keep = ~np.isnan(d)
    f, t, _ = roc_curve(y[keep], s[keep])
    x, _ = reader_rates(y, d)
    assert sensitivity_at_reader(y, s, d) == pytest.approx(np.interp(x, f, t), abs=1e-12)
    w = rng.integers(0, 3, (4, 30)).astype(float)
    many = sensitivity_at_reader(y, s, d, w)
    for b in range(4):
        rep = np.repeat(np.arange(30), w[b].astype(int))
        assert many[b] == pytest.approx(sensitivity_at_reader(y[rep], s[rep], d[rep]), abs=1e-12, nan_ok=True)


def test_undefined_cases_are_nan_or_none():
    assert np.isnan(roc_vertices([0, 0], [0.1, 0.2])[1]).all()  # no positive: TPR NaN (sklearn's convention)
    assert np.isnan(roc_vertices([1, 1], [0.1, 0.2])[0]).all()
    assert reader_below_curve([0, 0], [0.1, 0.2], [1, 0]) is None
    assert reader_below_curve([0, 1], [0.1, 0.2], [NAN, NAN]) is None  # no decision
    assert all(math.isnan(v) for v in reader_rates([0, 1], [NAN, NAN]))
    assert math.isnan(sensitivity_at_reader([0, 1], [0.1, 0.2], [NAN, NAN]))
    assert math.isnan(sensitivity_at_fpr([0.0, 1.0], [0.0, 1.0], NAN))
    assert math.isnan(sensitivity_at_fpr([0.0, 1.0], [0.0, 1.0], 1.5))
    assert reader_below_curve([], [], []) is None
    with pytest.raises(ValueError, match="decisions must hold only 0, 1 and NaN"):
        reader_below_curve([0, 1], [0.1, 0.2], [0.5, 1])
    with pytest.raises(ValueError, match="labels must hold only 0 and 1"):
        roc_vertices([0, 2], [0.1, 0.2])
