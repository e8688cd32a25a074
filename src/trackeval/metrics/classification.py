"""Binary classification metrics for one finding: AUROC with its DeLong variance and CI, operating points, ECE.

Pure functions: 1D arrays in (``y`` in {0, 1}, ``scores`` finite floats, higher = more likely positive), numbers
out. Every function works on one finding; multi-label tasks call them per column (entries whose label is
unknown are left out by the caller).

AUROC is the Mann-Whitney statistic with **midranks**: a tied (positive, negative) pair counts 1/2, exactly
what ``sklearn.metrics.roc_auc_score`` gets from the trapezoidal ROC. Its variance follows DeLong et al.
(1988) with the fast algorithm of Sun & Xu (2014): one sort gives the midranks of the pooled scores and of each
class; the structural components (placements) are

* ``V10[i] = (R[i] - R_pos[i]) / n`` for the ``m`` positives: the fraction of negatives scored below positive
  ``i`` (ties 1/2),
* ``V01[j] = 1 - (R[j] - R_neg[j]) / m`` for the ``n`` negatives: the fraction of positives scored above,

and ``var(AUC) = S10 / m + S01 / n`` with ``S10``, ``S01`` the sample variances (``ddof=1``) of the placements.
The same placements give the covariance of several AUCs on the same images, see :func:`delong_influence`.

The CI of one AUC (or of a macro mean of AUCs) is :func:`logit_interval`: a Wald interval on the logit scale,
mapped back, so that it stays inside (0, 1) and is asymmetric near 1, where the sampling distribution of an AUC
is skewed (coverage measured by ``benchmarks/bench_auroc_coverage.py``, see docs/metrics.md).
:func:`wald_interval` stays for differences of AUCs, whose distribution is not bounded the same way.

:func:`ece_reference` is the ECE a perfectly calibrated model would get in expectation with the same scores and
bins, the yardstick to read an ECE against at small ``N``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trackeval.metrics.checks import check_binary, check_finite, check_paired_1d

#: Default number of equal-width probability bins of the expected calibration error.
ECE_BINS = 15


@dataclass(frozen=True)
class DeLong:
    """AUROC with its DeLong variance and structural components.

    Attributes:
        auc: area under the ROC curve in [0, 1]; NaN when either class is empty.
        variance: DeLong variance of ``auc``; NaN when either class is empty, and also when a class has a
            single member (the sample variance needs two).
        v10: placements of the positives (in input order of the positives), shape ``(m,)``.
        v01: placements of the negatives (in input order of the negatives), shape ``(n,)``.
    """

    auc: float
    variance: float
    v10: np.ndarray
    v01: np.ndarray

    def ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """The logit-scale interval of ``auc`` (:func:`logit_interval`; the Wald interval clipped to [0, 1],
        as pROC gives it, is ``wald_interval(auc, variance)``)."""
        return logit_interval(self.auc, self.variance, confidence)


def _quantile(confidence: float, df: int | None) -> float:
    """``z_{(1+confidence)/2}``, or the Student t quantile with ``df`` degrees of freedom (NaN below 1 df)."""
    # scipy.special's functions, which scipy.stats' norm.ppf and t.ppf return (the same floats), at a third of
    # scipy.stats' import time; imported here, not at import: the CLI's start stays light
    from scipy.special import ndtri, stdtrit

    if df is None:
        return float(ndtri(0.5 + confidence / 2.0))
    return float(stdtrit(df, 0.5 + confidence / 2.0)) if df >= 1 else math.nan


def wald_interval(
    value: float,
    variance: float,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (0.0, 1.0),
    df: int | None = None,
) -> tuple[float, float]:
    """``value -/+ z_{(1+confidence)/2} * sqrt(variance)`` clipped to ``bounds`` ([0, 1] for an AUC, [-1, 1] for
    a difference of two AUCs); NaNs propagate. ``df``: read the quantile off a Student t with ``df`` degrees of
    freedom instead of the normal (:func:`auc_df`); below 1 there is no interval (NaN).

    Examples:
        With a standard error of 0.05 the 95% half-width is ``1.96 * 0.05 = 0.098``:

        >>> from trackeval.metrics.classification import wald_interval
        >>> [round(b, 4) for b in wald_interval(0.5, 0.05**2)]
        [0.402, 0.598]
        >>> [round(b, 4) for b in wald_interval(0.95, 0.05**2)]  # clipped at 1
        [0.852, 1.0]
        >>> wald_interval(float("nan"), 0.01)
        (nan, nan)
    """
    q = _quantile(confidence, df)
    if math.isnan(value) or math.isnan(variance) or math.isnan(q):
        return math.nan, math.nan
    half = q * math.sqrt(max(variance, 0.0))
    return max(bounds[0], value - half), min(bounds[1], value + half)


def _expit(x: float) -> float:
    """``1 / (1 + exp(-x))`` without overflow for large ``|x|``."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def logit_interval(
    value: float, variance: float, confidence: float = 0.95, df: int | None = None
) -> tuple[float, float]:
    """Interval of a proportion-like ``value`` in [0, 1] (an AUC, a macro mean of AUCs) on the logit scale.

    By the delta method ``se(logit A) = se(A) / (A (1 - A))``, so the interval is
    ``expit(logit(A) -/+ z * sqrt(variance) / (A (1 - A)))`` with ``z = z_{(1+confidence)/2}``: inside (0, 1)
    without clipping, and asymmetric near the bounds (shorter towards 1 when ``A`` is near 1), where the
    sampling distribution of an AUC is skewed. At ``A = 0`` or ``A = 1`` the logit is infinite; there the
    interval falls back to :func:`wald_interval` (clipped to [0, 1]). DeLong's variance is 0 at a perfect
    separation (every placement is 1), so ``A = 1`` gives ``[1, 1]``: no interval can be formed from the
    data's variance, as with the Wald interval. NaNs propagate. ``df``: a Student t quantile with ``df`` degrees
    of freedom instead of ``z`` (:func:`auc_df`; below 1: NaN).

    Examples:
        ``A = 0.9``, standard error 0.05: ``logit(0.9) = ln 9 = 2.1972``, half-width on the logit scale
        ``1.96 * 0.05 / (0.9 * 0.1) = 1.0889``, so the bounds are ``expit(1.1084)`` and ``expit(3.2861)``:

        >>> from trackeval.metrics.classification import logit_interval
        >>> [round(b, 4) for b in logit_interval(0.9, 0.05**2)]
        [0.7518, 0.9639]
        >>> [round(b, 4) for b in logit_interval(0.5, 0.05**2)]  # expit(-/+ 0.392): symmetric about 0.5
        [0.4032, 0.5968]
        >>> logit_interval(1.0, 0.0), logit_interval(float("nan"), 0.01)
        ((1.0, 1.0), (nan, nan))
    """
    if math.isnan(value) or math.isnan(variance):
        return math.nan, math.nan
    if not 0.0 < value < 1.0:
        return wald_interval(value, variance, confidence, df=df)
    q = _quantile(confidence, df)
    if math.isnan(q):
        return math.nan, math.nan
    half = q * math.sqrt(max(variance, 0.0)) / (value * (1.0 - value))
    centre = math.log(value / (1.0 - value))
    return _expit(centre - half), _expit(centre + half)


def _check(y: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y)
    s = np.asarray(scores, dtype=np.float64)
    check_paired_1d(("y", "scores"), y, s)
    check_binary("y", y)
    check_finite("scores", s)
    return y.astype(bool), s


def _midranks_sorted(s: np.ndarray) -> np.ndarray:
    """1-based midranks of an already sorted 1D array (ties share the mean of their ranks)."""
    n = s.size
    if n == 0:
        return np.zeros(0)
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    ends = np.r_[starts[1:], n]
    return np.repeat((starts + ends + 1) / 2.0, ends - starts)


def delong(y: np.ndarray, scores: np.ndarray) -> DeLong:
    """AUROC, DeLong variance and placements in O(N log N) (one sort; Sun & Xu 2014).

    Args:
        y: ``(N,)`` labels in {0, 1} (bool or integer).
        scores: ``(N,)`` finite scores; ties are allowed and count 1/2 per tied pair.

    Returns:
        :class:`DeLong`. With no positive or no negative, ``auc`` and ``variance`` are NaN (sklearn raises).

    Raises:
        ValueError: shapes differ, labels other than 0/1, or non-finite scores.

    Examples:
        Positive 0.35 beats one negative of two (placement 0.5), positive 0.8 both (1.0); negative 0.1 is below
        both positives (1.0), negative 0.4 below one (0.5). The variance is
        ``var([0.5, 1]) / 2 + var([1, 0.5]) / 2 = 0.125 / 2 + 0.125 / 2``.

        >>> from trackeval.metrics.classification import delong
        >>> r = delong([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        >>> r.auc, r.variance
        (0.75, 0.125)
        >>> r.v10.tolist(), r.v01.tolist()
        ([0.5, 1.0], [1.0, 0.5])
        >>> [round(b, 4) for b in r.ci()]  # expit(ln 3 -/+ 1.96 * sqrt(0.125) / (0.75 * 0.25))
        [0.0693, 0.9918]
    """
    pos, s = _check(y, scores)
    m = int(pos.sum())
    n = pos.size - m
    if m == 0 or n == 0:
        return DeLong(math.nan, math.nan, np.full(m, np.nan), np.full(n, np.nan))
    order = np.argsort(s)  # ties need no stable order: midranks do not depend on it
    s_sorted, pos_sorted = s[order], pos[order]
    r_all = _midranks_sorted(s_sorted)
    placement = np.empty(pos.size)  # V10 for positives, V01 for negatives, in score order
    r_pos = r_all[pos_sorted]
    placement[pos_sorted] = (r_pos - _midranks_sorted(s_sorted[pos_sorted])) / n
    placement[~pos_sorted] = 1.0 - (r_all[~pos_sorted] - _midranks_sorted(s_sorted[~pos_sorted])) / m
    auc = float((r_pos.sum() - m * (m + 1) / 2.0) / (m * n))
    in_input_order = np.empty(pos.size)
    in_input_order[order] = placement
    v10, v01 = in_input_order[pos], in_input_order[~pos]
    variance = math.nan
    if m > 1 and n > 1:
        variance = float(np.var(v10, ddof=1) / m + np.var(v01, ddof=1) / n)
    return DeLong(auc, variance, v10, v01)


def auroc(y: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (ties count 1/2, as sklearn's ``roc_auc_score``); NaN if a class is empty.

    Examples:
        Of the 4 (positive, negative) pairs, 3 are ordered correctly (0.35 < 0.4 is the miss):

        >>> from trackeval.metrics.classification import auroc
        >>> auroc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        0.75
        >>> auroc([0, 1], [0.5, 0.5])  # a tie counts 1/2
        0.5
        >>> auroc([1, 1], [0.2, 0.9])  # no negative
        nan
    """
    return delong(y, scores).auc


def delong_influence(y: np.ndarray, result: DeLong) -> np.ndarray:
    """Per-sample terms ``phi`` whose sum of squares is the DeLong variance of ``result.auc``.

    ``phi[i] = (V10[i] - auc) / sqrt(m (m - 1))`` for a positive and ``(V01[j] - auc) / sqrt(n (n - 1))`` for a
    negative, so ``sum(phi**2) == result.variance``. For several AUCs on the same samples (one per finding),
    ``sum_i phi_f[i] * phi_g[i]`` is DeLong's covariance when both findings share positives and negatives, and
    the influence-function covariance in general; the variance of a macro mean over K findings is then
    ``sum_i (mean_f phi_f[i])**2``. Entries are NaN when the variance is undefined.

    Examples:
        Here ``m = n = 2``, so ``phi = (placement - 0.75) / sqrt(2)`` for every sample:

        >>> from trackeval.metrics.classification import delong, delong_influence
        >>> y, scores = [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]
        >>> phi = delong_influence(y, delong(y, scores))
        >>> [round(float(v), 4) for v in phi]
        [0.1768, -0.1768, -0.1768, 0.1768]
        >>> round(float((phi**2).sum()), 4)  # the DeLong variance
        0.125
    """
    pos = np.asarray(y).astype(bool)
    m, n = result.v10.size, result.v01.size
    phi = np.full(pos.size, np.nan)
    if m > 1 and n > 1:
        phi[pos] = (result.v10 - result.auc) / math.sqrt(m * (m - 1))
        phi[~pos] = (result.v01 - result.auc) / math.sqrt(n * (n - 1))
    return phi


def clustered_variance(phi: np.ndarray, clusters: np.ndarray | None = None) -> float:
    """The DeLong variance of an AUC (or of a macro mean of AUCs, or of a difference of two) from per-image
    influence terms ``phi`` (:func:`delong_influence`), with the images grouped in clusters (a patient's studies).

    ``sum_c (sum_{i in c} phi[i])**2``: the terms of one cluster are summed before squaring (the clustered DeLong
    variance of Obuchowski 1997), so that a patient's correlated images do not count as independent ones; every
    image its own cluster (``clusters`` None) gives ``sum(phi**2)``, DeLong's variance. ``clusters``: an integer
    code ``0..G-1`` per image. NaN when any term is NaN (the variance is undefined: a single positive or
    negative).

    Examples:
        Each image twice as two studies of one patient: counted as independent images the variance roughly
        halves; as 4 clusters of two it is ``(2 phi)**2`` per patient:

        >>> import numpy as np
        >>> from trackeval.metrics.classification import clustered_variance
        >>> phi = np.array([0.25, -0.25, -0.25, 0.25])
        >>> clustered_variance(phi), clustered_variance(np.repeat(phi, 2), np.repeat(np.arange(4), 2))
        (0.25, 1.0)
    """
    values = np.asarray(phi, dtype=np.float64)
    if np.isnan(values).any():
        return math.nan
    sums = values if clusters is None else np.bincount(np.asarray(clusters), weights=values)
    return float((sums**2).sum())


def auc_df(y: np.ndarray, clusters: np.ndarray | None = None) -> int:
    """Degrees of freedom of the t reference of a (clustered) DeLong interval: ``min(G_pos, G_neg) - 1``, with
    ``G_pos`` the clusters holding a positive and ``G_neg`` those holding a negative (every image its own
    cluster: ``min(m, n) - 1``).

    DeLong's variance of an AUC is a sum of two sample variances, of the positives' placements and of the
    negatives'; with few positives (or few patients holding them) the first is estimated from few
    independent units, and a normal quantile makes the interval too short: with 20 positives in patients of 1-6
    studies the 95% interval covered 91-92% and the paired non-inferiority test passed 3.7-4.2% of candidates
    at the margin (nominal 2.5%). A t quantile with the smaller class's clusters - 1 brings these to about 95%
    and 2.0-2.7% (``benchmarks/bench_gate_calibration.py``), and is the normal quantile again from a few hundred
    positives.

    Examples:
        >>> from trackeval.metrics.classification import auc_df
        >>> auc_df([0, 0, 1, 1, 0, 1])
        2
        >>> auc_df([0, 0, 1, 1, 0, 1], [0, 0, 1, 1, 2, 2])  # positives in 2 patients, negatives in 2
        1
    """
    pos = np.asarray(y).astype(bool)
    if clusters is None:
        return int(min(pos.sum(), (~pos).sum())) - 1
    codes = np.asarray(clusters)
    return int(min(np.unique(codes[pos]).size, np.unique(codes[~pos]).size)) - 1


def auroc_interval(
    y: np.ndarray, result: DeLong, clusters: np.ndarray | None = None, confidence: float = 0.95
) -> tuple[float, float]:
    """The interval every AUROC of trackeval reports: DeLong's influence terms summed within clusters
    (:func:`clustered_variance`), on the logit scale (:func:`logit_interval`), with a t quantile of
    :func:`auc_df` degrees of freedom. ``y``: the labels ``result`` was computed from; ``clusters``: a code per
    label (a patient), None: every image its own cluster. NaN where the variance is undefined.

    Examples:
        >>> from trackeval.metrics.classification import auroc_interval, delong
        >>> y, scores = [0, 0, 1, 1, 0, 1, 0, 1], [0.1, 0.4, 0.35, 0.8, 0.2, 0.9, 0.5, 0.6]
        >>> [round(b, 4) for b in auroc_interval(y, delong(y, scores))]
        [0.095, 0.9979]
    """
    phi = delong_influence(y, result)
    variance = clustered_variance(phi, clusters)
    return logit_interval(result.auc, variance, confidence, auc_df(y, clusters))


@dataclass(frozen=True)
class OperatingPoint:
    """Confusion counts and rates of the rule ``score >= threshold`` -> positive.

    ``sensitivity``, ``specificity`` and ``ppv`` are NaN when their denominator is 0.
    """

    threshold: float
    tp: int
    fp: int
    tn: int
    fn: int

    @property
    def sensitivity(self) -> float:
        """TP / (TP + FN)."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else math.nan

    @property
    def specificity(self) -> float:
        """TN / (TN + FP)."""
        return self.tn / (self.tn + self.fp) if self.tn + self.fp else math.nan

    @property
    def ppv(self) -> float:
        """Positive predictive value TP / (TP + FP)."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else math.nan


def threshold_at_sensitivity(y: np.ndarray, scores: np.ndarray, target: float = 0.95) -> float:
    """The highest threshold ``t`` (one of the scores) with sensitivity of ``score >= t`` at least ``target``.

    This is the first point of ``sklearn.metrics.roc_curve(y, scores, drop_intermediate=False)`` whose TPR
    reaches ``target``: the most specific rule that still finds ``target`` of the positives. NaN when there is
    no positive.

    Examples:
        >>> from trackeval.metrics.classification import threshold_at_sensitivity
        >>> y, scores = [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]
        >>> threshold_at_sensitivity(y, scores, target=0.5)  # 1 of 2 positives: the top positive score
        0.8
        >>> threshold_at_sensitivity(y, scores, target=0.95)  # both positives needed
        0.35
    """
    pos, s = _check(y, scores)
    m = int(pos.sum())
    if m == 0:
        return math.nan
    pos_scores = np.sort(s[pos])[::-1]  # descending: the k-th highest positive score catches k positives
    need = min(m, max(1, math.ceil(round(target * m, 9))))  # round: 0.95 * 20 is 19.000000000000004
    return float(pos_scores[need - 1])


def undefined_roc_point(y: np.ndarray) -> str:
    """Why no ROC operating point can be chosen from the labels ``y``, ``""`` when one can.

    An operating point is a (sensitivity, specificity) pair of the ROC curve: it needs both classes. Without a
    positive, ``sklearn.metrics.roc_curve``'s TPR is NaN (``"no positive"``); without a negative, its FPR is
    NaN (``"no negative"``); no label at all gives ``"no label"``.

    Examples:
        >>> from trackeval.metrics.classification import undefined_roc_point
        >>> [undefined_roc_point(y) for y in ([0, 1, 0], [0, 0], [1], [])]
        ['', 'no positive', 'no negative', 'no label']
    """
    pos = np.asarray(y).astype(bool)
    if pos.size == 0:
        return "no label"
    if not pos.any():
        return "no positive"
    return "" if not pos.all() else "no negative"


def operating_point(y: np.ndarray, scores: np.ndarray, threshold: float) -> OperatingPoint:
    """Confusion counts of ``score >= threshold`` (a NaN threshold calls nothing positive).

    Examples:
        >>> from trackeval.metrics.classification import operating_point
        >>> op = operating_point([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], threshold=0.35)
        >>> op
        OperatingPoint(threshold=0.35, tp=2, fp=1, tn=1, fn=0)
        >>> op.sensitivity, op.specificity, round(op.ppv, 4)
        (1.0, 0.5, 0.6667)
    """
    pos, s = _check(y, scores)
    called = s >= threshold  # False everywhere for a NaN threshold
    tp = int((called & pos).sum())
    fp = int((called & ~pos).sum())
    return OperatingPoint(threshold, tp, fp, int((~pos).sum()) - fp, int(pos.sum()) - tp)


def expected_calibration_error(y: np.ndarray, probs: np.ndarray, n_bins: int = ECE_BINS) -> float:
    """ECE of one binary finding: ``sum_b (N_b / N) * |mean(y in b) - mean(p in b)|``.

    Bins are ``n_bins`` equal-width intervals ``(lo, hi]`` of the predicted probability of the positive class,
    the first one closed, ``[0, 1/n_bins]``, so that every probability in [0, 1] lands in exactly one bin.
    Empty bins contribute 0. NaN for an empty input.

    Raises:
        ValueError: probabilities outside [0, 1], or ``n_bins < 1``.

    Examples:
        Two bins: ``[0, 0.5]`` holds 0.2 and 0.4 (both negative: gap ``|0 - 0.3|``), ``(0.5, 1]`` holds 0.7
        and 0.9 (both positive: gap ``|1 - 0.8|``); ECE = ``2/4 * 0.3 + 2/4 * 0.2``.

        >>> from trackeval.metrics.classification import expected_calibration_error
        >>> round(expected_calibration_error([0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4], n_bins=2), 4)
        0.25
    """
    count, predicted, observed = calibration_bins(y, probs, n_bins)
    if not count.any():
        return math.nan
    return float(np.abs(observed - predicted).sum() / count.sum())


def calibration_bins(y: np.ndarray, probs: np.ndarray, n_bins: int = ECE_BINS) -> tuple[np.ndarray, ...]:
    """Per bin of :func:`expected_calibration_error`'s binning: ``(count, sum of probabilities, number of
    positives)``, three ``(n_bins,)`` arrays (``count`` int64, the sums float64; zeros for an empty bin).

    The reliability diagram's points are ``sum / count`` of the non-empty bins; ECE is
    ``sum_b |positives_b - probabilities_b| / N``.

    Raises:
        ValueError: probabilities outside [0, 1], or ``n_bins < 1``.

    >>> count, p_sum, pos = calibration_bins([0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4], n_bins=2)
    >>> count.tolist(), p_sum.round(2).tolist(), pos.tolist()
    ([2, 2], [0.6, 1.6], [0.0, 2.0])
    """
    pos, p = _check(y, probs)
    idx = _ece_bin_index(p, n_bins)
    count = np.bincount(idx, minlength=n_bins)
    return (
        count,
        np.bincount(idx, weights=p, minlength=n_bins),
        np.bincount(idx, weights=pos.astype(np.float64), minlength=n_bins),
    )


def _ece_bin_index(p: np.ndarray, n_bins: int) -> np.ndarray:
    """0-based ECE bin of each probability: ``(lo, hi]`` of ``n_bins`` equal-width bins, the first closed."""
    if n_bins < 1:
        raise ValueError("n_bins must be >= 1")
    if p.size and (p.min() < 0.0 or p.max() > 1.0):
        raise ValueError("probabilities must lie in [0, 1]")
    return np.clip(np.ceil(p * n_bins).astype(np.int64) - 1, 0, n_bins - 1)


def _poisson_binomial_pmf(p: np.ndarray) -> np.ndarray:
    """``P(K = k)`` for ``k = 0..n``, ``K`` the number of successes of independent Bernoulli(``p_i``) trials.

    The coefficients of ``prod_i (1 - p_i + p_i x)``, multiplied pairwise level by level with batched real FFTs
    (O(n log^2 n)); exact up to rounding (round-off below 0 is set to 0).
    """
    n = p.size
    width = 1 << max(n - 1, 0).bit_length()  # a power of two >= n; the padding trials have p = 0 (factor 1)
    polys = np.zeros((width, 2))
    polys[:, 0] = 1.0
    polys[:n, 0] = 1.0 - p
    polys[:n, 1] = p
    while polys.shape[0] > 1:
        length = 2 * polys.shape[1] - 1
        nfft = 1 << (length - 1).bit_length()
        f = np.fft.rfft(polys, nfft, axis=1)
        polys = np.fft.irfft(f[0::2] * f[1::2], nfft, axis=1)[:, :length]
    return np.clip(polys[0, : n + 1], 0.0, None)


def ece_reference(probs: np.ndarray, n_bins: int = ECE_BINS) -> float:
    """Expected ECE of a perfectly calibrated model with these predicted probabilities and bins.

    With labels drawn ``y_i ~ Bernoulli(p_i)`` independently (the model is calibrated by construction), the bins
    depend on the scores only, so ``ECE = sum_b |K_b - mu_b| / N`` with ``K_b`` the positives in bin ``b`` and
    ``mu_b = sum_{i in b} p_i``, and

        ``E[ECE] = (1 / N) sum_b sum_k P(K_b = k) |k - mu_b|``,

    with ``K_b`` Poisson-binomial (:func:`_poisson_binomial_pmf`): an exact expectation, no simulation and no
    seed. It is > 0 whenever a score is strictly between 0 and 1: an ECE near this value is what sampling noise
    alone gives at this ``N``; an ECE well above it is miscalibration. NaN for an empty input.

    Raises:
        ValueError: probabilities outside [0, 1], non-finite, or ``n_bins < 1``.

    Examples:
        One score per bin: ``E|y - p| = p (1 - p) + (1 - p) p = 2 p (1 - p)``; two scores 0.5 in one bin:
        ``K`` is 0, 1, 2 with probabilities 1/4, 1/2, 1/4, so ``E|K - 1| = 1/2`` over ``N = 2``.

        >>> from trackeval.metrics.classification import ece_reference
        >>> round(ece_reference([0.1, 0.9], n_bins=2), 4)  # (2 * 0.1 * 0.9 + 2 * 0.9 * 0.1) / 2
        0.18
        >>> round(ece_reference([0.5, 0.5], n_bins=2), 4)
        0.25
        >>> ece_reference([0.0, 1.0, 1.0])  # certain scores: a calibrated model makes no error
        0.0
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"probs must be 1D, got shape {p.shape}")
    check_finite("probabilities", p)
    idx = _ece_bin_index(p, n_bins)
    if p.size == 0:
        return math.nan
    order = np.argsort(idx, kind="stable")
    p_sorted, idx_sorted = p[order], idx[order]
    starts = np.flatnonzero(np.r_[True, idx_sorted[1:] != idx_sorted[:-1]])
    total = 0.0
    for members in np.split(p_sorted, starts[1:]):
        pmf = _poisson_binomial_pmf(members)
        total += float(np.abs(np.arange(members.size + 1) - members.sum()) @ pmf)
    return total / p.size


def cohen_kappa(y: np.ndarray, scores: np.ndarray, threshold: float = 0.5) -> float:
    """Cohen's kappa between the labels ``y`` and the decisions ``score >= threshold`` (MURA's leaderboard
    statistic): ``(p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed agreement and ``p_e`` the agreement
    expected from the two marginals, as ``sklearn.metrics.cohen_kappa_score`` computes it.

    Edge cases: no entry gives NaN; labels and decisions both constant and equal (``p_e == 1``) give NaN, where
    sklearn warns and returns NaN too.

    Examples:
        >>> from trackeval.metrics.classification import cohen_kappa
        >>> cohen_kappa([0, 0, 1, 1], [0.2, 0.6, 0.7, 0.9])  # one disagreement in four
        0.5
    """
    op = operating_point(y, scores, threshold)
    n = op.tp + op.fp + op.tn + op.fn
    if n == 0:
        return math.nan
    observed = (op.tp + op.tn) / n
    expected = ((op.tp + op.fn) * (op.tp + op.fp) + (op.tn + op.fp) * (op.tn + op.fn)) / (n * n)
    if expected == 1.0:
        return math.nan
    return (observed - expected) / (1.0 - expected)
