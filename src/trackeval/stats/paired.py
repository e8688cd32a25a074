"""Paired comparisons of two model versions on the same cases: paired bootstrap, p-values, multiplicity.

The unit of resampling is the case (patient): one resample draws case indices with replacement and applies
them to BOTH models, so the per-case correlation between the two versions is kept (Efron & Tibshirani's
paired bootstrap; ``scipy.stats.bootstrap(..., paired=True)`` semantics, vectorised with the same
multinomial weights as :mod:`trackeval.stats.bootstrap`).

Differences are formed cell by cell (case x item, e.g. case x organ): a cell counts only where both
versions have a value (NaN = not applicable on either side is left out), so every delta is a like-for-like
pair. The headline delta is the mean over items of the per-item mean deltas (nnU-Net ``foreground_mean`` of
the paired differences).

AUROC is not a mean of per-case values, so it is compared with DeLong's test for two correlated AUCs on the
same images instead (:func:`paired_delong`; DeLong, DeLong & Clarke-Pearson 1988, as ``pROC::roc.test(...,
method="delong", paired=TRUE)``): a Wald interval of the difference from the structural components of both
models on the same positives and negatives, with normal p-values (:func:`normal_pvalue`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import norm

from trackeval.metrics.classification import delong, delong_influence, wald_interval
from trackeval.stats.bootstrap import nanmean_cols, nanmean_rows, percentiles, weight_blocks


@dataclass(frozen=True)
class PairedDelta:
    """Paired differences (candidate - baseline) with percentile CIs and the bootstrap samples.

    Per item (shape ``(k,)``): ``value``, ``low``, ``high``, ``n_pairs`` (cells valid on both sides),
    ``candidate`` and ``baseline`` (the two means over the same paired cells). ``overall*``: the mean over
    items (items without pairs excluded). ``samples`` ``(B, k)`` and ``overall_samples`` ``(B,)`` are the
    bootstrap replicates (NaN where a resample held no pair), for p-values.
    """

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_pairs: np.ndarray
    candidate: np.ndarray
    baseline: np.ndarray
    overall: float
    overall_low: float
    overall_high: float
    overall_candidate: float
    overall_baseline: float
    samples: np.ndarray
    overall_samples: np.ndarray


def paired_bootstrap(
    candidate: np.ndarray,
    baseline: np.ndarray,
    n_resamples: int = 2000,
    seed: int | Sequence[int] = 0,
    confidence: float = 0.95,
) -> PairedDelta:
    """Paired case-level bootstrap of ``candidate - baseline``.

    Args:
        candidate, baseline: ``(n_cases, k)`` arrays (a 1D array is one column) with rows matched by case
            (same case order); NaN marks a not-applicable cell.
        n_resamples: bootstrap resamples ``B``.
        seed: resampling seed; same inputs + seed give bit-identical results.
        confidence: two-sided level of the percentile intervals.

    Returns:
        :class:`PairedDelta`. With no pairs in a column its value and CI are NaN; with zero cases everything
        is NaN. Identical inputs give a delta of exactly 0 with a CI of [0, 0].
    """
    c = np.asarray(candidate, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if c.ndim == 1:
        c, b = c[:, None], b[:, None]
    if c.shape != b.shape or c.ndim != 2:
        raise ValueError(f"candidate and baseline must be matching (n_cases, k) arrays, got {c.shape} and {b.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    n, k = c.shape
    pair = ~(np.isnan(c) | np.isnan(b))
    pf = pair.astype(np.float64)
    diff = np.where(pair, c - b, 0.0)
    n_pairs = pair.sum(axis=0)
    cnt = n_pairs.astype(np.float64)
    value = nanmean_cols(diff.sum(axis=0), cnt)
    cand_mean = nanmean_cols(np.where(pair, c, 0.0).sum(axis=0), cnt)
    base_mean = nanmean_cols(np.where(pair, b, 0.0).sum(axis=0), cnt)
    if n == 0:
        samples = np.full((n_resamples, k), np.nan)
    else:
        samples = np.concatenate([nanmean_cols(w @ diff, w @ pf) for w in weight_blocks(n, n_resamples, seed)], axis=0)
    overall_samples = nanmean_rows(samples)
    low, high = percentiles(samples, confidence)
    o_low, o_high = percentiles(overall_samples, confidence)
    return PairedDelta(
        value=value,
        low=low,
        high=high,
        n_pairs=n_pairs,
        candidate=cand_mean,
        baseline=base_mean,
        overall=float(nanmean_rows(value)),
        overall_low=float(o_low),
        overall_high=float(o_high),
        overall_candidate=float(nanmean_rows(cand_mean)),
        overall_baseline=float(nanmean_rows(base_mean)),
        samples=samples,
        overall_samples=overall_samples,
    )


@dataclass(frozen=True)
class PairedAUC:
    """DeLong comparison of two AUROCs on the same images (candidate - baseline), per finding and macro.

    Per finding (shape ``(k,)``): ``value`` (AUC difference), ``variance`` (its DeLong variance
    ``var(A) + var(B) - 2 cov(A, B)``), ``low``/``high`` (Wald interval clipped to [-1, 1]), ``candidate`` and
    ``baseline`` (the two AUCs), ``n_pairs`` (labelled images scored by both; 0 where a class is empty and the
    AUC undefined). ``overall*``: the macro mean over findings with a defined AUC, its variance from the
    per-image influence terms of all those findings (NaN if any of them has an undefined variance, i.e. a
    single positive or negative).
    """

    value: np.ndarray
    variance: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_pairs: np.ndarray
    candidate: np.ndarray
    baseline: np.ndarray
    overall: float
    overall_variance: float
    overall_low: float
    overall_high: float
    overall_candidate: float
    overall_baseline: float


def paired_delong(
    labels: np.ndarray, candidate: np.ndarray, baseline: np.ndarray, confidence: float = 0.95
) -> PairedAUC:
    """DeLong's paired comparison of the AUROCs of two models scored on the same images.

    For finding ``f`` with ``m`` positives and ``n`` negatives, the influence terms of
    :func:`~trackeval.metrics.classification.delong_influence` of both models are subtracted image by image,
    ``psi[i] = phi_A[i] - phi_B[i]``; ``sum(psi**2) = S10_AA/m + S01_AA/n + S10_BB/m + S01_BB/n
    - 2 (S10_AB/m + S01_AB/n)`` is DeLong's ``var(A - B)`` (``S`` the ``ddof=1`` covariances of the placements).
    The macro difference is the mean of the per-finding differences; its variance is
    ``sum_i (mean_f psi_f[i])**2`` over images, which keeps the correlation between findings of one image.

    Args:
        labels: ``(n_images, k)`` 1/0 labels, NaN where unknown (that cell is left out of that finding).
        candidate, baseline: ``(n_images, k)`` scores of the two models, rows matched by image; a NaN score
            leaves the cell out for both models.
        confidence: two-sided level of the Wald intervals.

    Returns:
        :class:`PairedAUC`. Identical scores give a difference of exactly 0 with variance 0.

    Raises:
        ValueError: shapes differ, labels other than 0/1/NaN, or infinite scores.
    """
    y = np.asarray(labels, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if y.ndim == 1:
        y, c, b = y[:, None], c[:, None], b[:, None]
    if not (y.shape == c.shape == b.shape) or y.ndim != 2:
        raise ValueError(
            f"labels and scores must be matching (n_images, k) arrays, got {y.shape}, {c.shape}, {b.shape}"
        )
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    k = y.shape[1]
    ok = ~(np.isnan(y) | np.isnan(c) | np.isnan(b))
    psi = np.zeros(y.shape)
    value, variance, low, high = (np.full(k, np.nan) for _ in range(4))
    cand_auc, base_auc = np.full(k, np.nan), np.full(k, np.nan)
    n_pairs = np.zeros(k, dtype=np.int64)
    for j in range(k):
        rows = ok[:, j]
        yj = y[rows, j]
        da, db = delong(yj, c[rows, j]), delong(yj, b[rows, j])
        if math.isnan(da.auc):
            continue
        cand_auc[j], base_auc[j], value[j] = da.auc, db.auc, da.auc - db.auc
        n_pairs[j] = yj.size
        psi[rows, j] = delong_influence(yj, da) - delong_influence(yj, db)
        variance[j] = float((psi[rows, j] ** 2).sum())
        low[j], high[j] = wald_interval(value[j], variance[j], confidence, (-1.0, 1.0))
    defined = ~np.isnan(value)
    overall = overall_variance = math.nan
    if defined.any():
        overall = float(value[defined].mean())
        overall_variance = float((psi[:, defined].mean(axis=1) ** 2).sum())
    o_low, o_high = wald_interval(overall, overall_variance, confidence, (-1.0, 1.0))
    return PairedAUC(
        value=value,
        variance=variance,
        low=low,
        high=high,
        n_pairs=n_pairs,
        candidate=cand_auc,
        baseline=base_auc,
        overall=overall,
        overall_variance=overall_variance,
        overall_low=o_low,
        overall_high=o_high,
        overall_candidate=float(cand_auc[defined].mean()) if defined.any() else math.nan,
        overall_baseline=float(base_auc[defined].mean()) if defined.any() else math.nan,
    )


def normal_pvalue(
    estimate: float, std_error: float, threshold: float, alternative: Literal["less", "greater"]
) -> float:
    """One-sided Wald p-value of ``H1: delta < threshold`` (``less``) or ``delta > threshold`` (``greater``).

    ``Phi((estimate - threshold) / std_error)`` for ``less`` and its complement for ``greater``; below ``alpha``
    exactly when the one-sided ``1 - alpha`` Wald bound excludes ``threshold``. A zero standard error gives 0
    when the estimate lies strictly on the H1 side, else 1. A NaN estimate or standard error -> 1.0 (no
    evidence).
    """
    if math.isnan(estimate) or math.isnan(std_error):
        return 1.0
    if std_error == 0.0:
        on_h1 = estimate < threshold if alternative == "less" else estimate > threshold
        return 0.0 if on_h1 else 1.0
    z = (estimate - threshold) / std_error
    return float(norm.cdf(z) if alternative == "less" else norm.sf(z))


def bootstrap_pvalue(samples: np.ndarray, threshold: float, alternative: Literal["less", "greater"]) -> float:
    """One-sided bootstrap p-value of ``H1: delta < threshold`` (``less``) or ``delta > threshold`` (``greater``).

    ``p = (1 + #{replicates on the H0 side}) / (1 + B)`` over the non-NaN replicates (the +1 keeps p > 0, as
    in Davison & Hinkley); it is below ``alpha`` exactly when the one-sided ``1 - alpha`` percentile bound
    excludes ``threshold``. No valid replicate -> 1.0 (no evidence).
    """
    s = np.asarray(samples, dtype=np.float64)
    s = s[~np.isnan(s)]
    if s.size == 0:
        return 1.0
    on_h0 = np.count_nonzero(s >= threshold) if alternative == "less" else np.count_nonzero(s <= threshold)
    return float((1 + on_h0) / (1 + s.size))


def adjust_pvalues(pvalues: Sequence[float], method: Literal["holm", "bonferroni", "none"]) -> list[float]:
    """Family-wise error adjusted p-values (reject where adjusted p <= alpha).

    ``bonferroni``: ``min(1, m p)``. ``holm``: step-down, ``p_(i) -> max_{j<=i} min(1, (m - j + 1) p_(j))``
    over the ascending order (uniformly more powerful than Bonferroni, same FWER control, no independence
    assumption). ``none``: unchanged. An empty family returns ``[]``.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if method == "none" or m == 0:
        return p.tolist()
    if method == "bonferroni":
        return np.minimum(1.0, p * m).tolist()
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return out.tolist()
