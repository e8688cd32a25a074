"""Paired comparisons of two model versions on the same cases: paired bootstrap, p-values, multiplicity.

The unit of resampling is the cluster (a subject, or a case): one resample draws clusters with replacement and
applies them to BOTH models, so the correlation between the two versions is kept (Efron & Tibshirani's paired
bootstrap, vectorised with the weights of :mod:`trackeval.stats.bootstrap`).

What is compared is each version's own headline (:func:`paired_headlines`): on every resample both headlines are
recomputed from each side's own cells, exactly as their results compute them, and differenced. A corpus metric
(mAP, corpus BLEU: not a mean of per-case values) is recomputed the same way by the unit's own function of case
weights (:func:`paired_corpus`). A cell that is not
applicable on one side (NaN) never hides the other side's value: a candidate that paints an organ the truth lacks
(Dice 0 where the champion had "not applicable") lowers its own headline, and so the delta.

AUROC is not a mean of per-case values, so it is compared with DeLong's test for two correlated AUCs on the
same images instead (:func:`paired_delong`; DeLong, DeLong & Clarke-Pearson 1988, as ``pROC::roc.test(...,
method="delong", paired=TRUE)``): a Wald interval of the difference from the structural components of both
models on the same positives and negatives, with normal p-values (:func:`normal_pvalue`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from trackeval.metrics.classification import auc_df, clustered_variance, delong, delong_influence, wald_interval
from trackeval.stats.bootstrap import (
    IntervalMethod,
    effective_units,
    expanded_pvalue,
    interval_levels,
    n_clusters,
    percentiles,
    units_per_column,
    weight_blocks,
)
from trackeval.stats.reduce import MeanReduction as Reduction
from trackeval.stats.reduce import case_weights, item_weights, weighted_headline


@dataclass(frozen=True)
class PairedHeadline:
    """Candidate and baseline headlines on the same resamples, their difference and its interval.

    ``candidate``/``baseline``: each side's own headline (exactly what its results report); ``delta`` their
    difference with the interval ``[low, high]``; ``samples`` ``(B,)``: the replicates of ``delta`` (NaN where a
    resample lacked an item of either point estimate), for p-values. Per item (shape ``(k,)``): ``item_candidate``,
    ``item_baseline`` (NaN where that side has no value at all), ``item_delta`` (the side without a value counts as
    the metric's ``best`` value), ``item_low``/``item_high``, ``item_samples`` ``(B, k)``, ``item_units`` (clusters
    with a value on either side). ``n_units``: clusters among the cases. ``n_effective`` and ``item_effective``
    ``(k,)``: the effective numbers of clusters the expansions of the intervals used
    (:func:`~trackeval.stats.bootstrap.effective_units`; the counts when the clusters weigh the same), which the
    p-values of the same rows must use.
    """

    candidate: float
    baseline: float
    delta: float
    low: float
    high: float
    samples: np.ndarray
    n_units: int
    item_candidate: np.ndarray
    item_baseline: np.ndarray
    item_delta: np.ndarray
    item_low: np.ndarray
    item_high: np.ndarray
    item_samples: np.ndarray
    item_units: np.ndarray
    n_effective: float
    item_effective: np.ndarray


def paired_headlines(
    candidate: np.ndarray,
    baseline: np.ndarray,
    *,
    reduction: Reduction,
    best: float,
    n_resamples: int = 2000,
    seed: int | Sequence[int] = 0,
    confidence: float = 0.95,
    clusters: np.ndarray | None = None,
    method: IntervalMethod = "expanded_percentile",
) -> PairedHeadline:
    """Paired cluster bootstrap of ``headline(candidate) - headline(baseline)``.

    Each side's headline is computed from its own cells, as its own results report it: a cell that is NaN on one
    side only (not applicable there: the champion never painted an organ the truth lacks) does not remove the
    other side's cell. Every resample draws clusters once and recomputes BOTH headlines on them, so the
    correlation between the versions (and within a cluster) is kept. An item that one side has no value for at
    all counts as ``best`` on that side in the item deltas (the other side introduced errors there). The
    expansion of an interval uses the effective number of clusters of the case weights of both sides together
    (:func:`~trackeval.stats.bootstrap.effective_units` of the sum of each side's
    :func:`~trackeval.stats.reduce.case_weights`, or ``item_weights`` for an item).

    Args:
        candidate, baseline: ``(n_cases, k)`` arrays with rows matched by case (a 1D array is one column), NaN =
            not applicable.
        reduction: how the headline is built (:data:`trackeval.stats.reduce.MeanReduction`).
        best: the metric's best value (1 for Dice, 0 for a distance).
        n_resamples, seed, confidence: resamples ``B``, their seed, the two-sided level.
        clusters: cluster code per case (:func:`~trackeval.stats.bootstrap.cluster_codes`); None: cases.
        method: interval method (:mod:`trackeval.stats.bootstrap`).

    Returns:
        :class:`PairedHeadline`; identical inputs give a delta of exactly 0 with the interval [0, 0].
    """
    c, b = _matching(candidate, baseline, confidence)
    n = c.shape[0]
    sides = [_side(c), _side(b)]
    ones = np.ones((1, n))
    (hc, ic), (hb, ib) = (weighted_headline(ones, f, v, items, reduction) for f, v, items in sides)
    has_c, has_b = sides[0][2], sides[1][2]
    samples, item_samples = _replicates(sides, reduction, best, n_resamples, seed, clusters)
    either = (sides[0][1] + sides[1][1]) > 0
    item_units = units_per_column(either, clusters)
    units = n_clusters(n, clusters)
    effective = float(effective_units(sum(case_weights(v, it, reduction) for _, v, it in sides), clusters))
    item_effective = effective_units(sum(item_weights(v) for _, v, _ in sides), clusters)
    delta_items = _item_delta(ic[0], ib[0], has_c, has_b, best)
    low, high = percentiles(samples, confidence, effective, method, hc[0] - hb[0])
    item_low, item_high = percentiles(item_samples, confidence, item_effective, method, delta_items)
    return PairedHeadline(
        candidate=float(hc[0]),
        baseline=float(hb[0]),
        delta=float(hc[0] - hb[0]),
        low=float(low),
        high=float(high),
        samples=samples,
        n_units=units,
        item_candidate=ic[0],
        item_baseline=ib[0],
        item_delta=np.where(has_c | has_b, delta_items, np.nan),
        item_low=item_low,
        item_high=item_high,
        item_samples=item_samples,
        item_units=item_units,
        n_effective=effective,
        item_effective=item_effective,
    )


def _matching(candidate: np.ndarray, baseline: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Both sides as matching ``(n_cases, k)`` float arrays (1D: one column); ValueError otherwise."""
    c = np.asarray(candidate, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if c.ndim == 1:
        c, b = c[:, None], b[:, None]
    if c.shape != b.shape or c.ndim != 2:
        raise ValueError(f"candidate and baseline must be matching (n_cases, k) arrays, got {c.shape} and {b.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    return c, b


_Side = tuple[np.ndarray, np.ndarray, np.ndarray]


def _side(m: np.ndarray) -> _Side:
    """``(values with NaN as 0, 1.0 where valid, items with any value)`` of one side."""
    valid = ~np.isnan(m)
    return np.where(valid, m, 0.0), valid.astype(np.float64), valid.any(axis=0)


def _item_delta(cand: np.ndarray, base: np.ndarray, has_c: np.ndarray, has_b: np.ndarray, best: float) -> np.ndarray:
    """Item deltas, an item a side has no value for counting as ``best`` on that side."""
    return np.where(has_c, cand, best) - np.where(has_b, base, best)


def _replicates(
    sides: list[_Side],
    reduction: Reduction,
    best: float,
    n_resamples: int,
    seed: int | Sequence[int],
    clusters: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(B,)`` headline-delta and ``(B, k)`` item-delta replicates, both sides on the same resamples (all NaN
    without cases)."""
    (filled, _, has_c), (_, _, has_b) = sides
    n, k = filled.shape
    heads, items = [], []
    for w in weight_blocks(n, n_resamples, seed, clusters) if n else ():
        (rc, rci), (rb, rbi) = (weighted_headline(w, f, v, it, reduction) for f, v, it in sides)
        heads.append(rc - rb)
        items.append(_item_delta(rci, rbi, has_c, has_b, best))
    samples = np.concatenate(heads) if heads else np.full(n_resamples, np.nan)
    item_samples = np.concatenate(items, axis=0) if items else np.full((n_resamples, k), np.nan)
    return samples, item_samples


def paired_corpus(
    candidate: Callable[[np.ndarray], np.ndarray],
    baseline: Callable[[np.ndarray], np.ndarray],
    n_cases: int,
    *,
    n_resamples: int = 2000,
    seed: int | Sequence[int] = 0,
    confidence: float = 0.95,
    clusters: np.ndarray | None = None,
    method: IntervalMethod = "expanded_percentile",
) -> PairedHeadline:
    """Paired cluster bootstrap of a corpus headline (mAP, corpus BLEU): ``headline(candidate) -
    headline(baseline)``, both recomputed by the unit's own function on every resample.

    Args:
        candidate, baseline: each side's headline as a function of case weights ``(b, n_cases)`` -> ``(b,)``
            (NaN where a resample has none); a row of ones gives the point estimate.
        n_cases: cases (the weights' columns, matched between the sides).
        n_resamples, seed, confidence, clusters, method: as :func:`paired_headlines`, which draws the same
            resamples for the same arguments.

    Returns:
        :class:`PairedHeadline` without items (the item arrays are empty); identical functions give a delta of
        exactly 0 with the interval [0, 0]. A corpus headline has no case weights: its expansion uses the
        number of clusters (``n_effective = n_units``).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    ones = np.ones((1, n_cases))
    hc, hb = float(candidate(ones)[0]), float(baseline(ones)[0])
    heads = [candidate(w) - baseline(w) for w in weight_blocks(n_cases, n_resamples, seed, clusters)] if n_cases else []
    samples = np.concatenate(heads) if heads else np.full(n_resamples, np.nan)
    units = n_clusters(n_cases, clusters)
    low, high = percentiles(samples, confidence, units, method, hc - hb)
    none = np.zeros(0)
    return PairedHeadline(
        candidate=hc,
        baseline=hb,
        delta=hc - hb,
        low=float(low),
        high=float(high),
        samples=samples,
        n_units=units,
        item_candidate=none,
        item_baseline=none,
        item_delta=none,
        item_low=none,
        item_high=none,
        item_samples=np.zeros((samples.size, 0)),
        item_units=none,
        n_effective=float(units),
        item_effective=none,
    )


@dataclass(frozen=True)
class PairedAUC:
    """DeLong comparison of two AUROCs on the same images (candidate - baseline), per finding and macro.

    Per finding (shape ``(k,)``): ``value`` (AUC difference), ``variance`` (its DeLong variance
    ``var(A) + var(B) - 2 cov(A, B)``), ``low``/``high`` (Wald interval clipped to [-1, 1], with a Student t
    quantile of ``df`` degrees of freedom), ``candidate`` and ``baseline`` (the two AUCs), ``n_pairs`` (labelled
    images scored by both; 0 where a class is empty and the AUC undefined), ``df`` (``min(clusters with a
    positive, clusters with a negative) - 1``, :func:`~trackeval.metrics.classification.auc_df`; -1 where
    undefined). ``overall*``: the macro mean over findings with a defined AUC, its variance from the per-image
    influence terms of all those findings (NaN if any of them has an undefined variance, i.e. a single positive
    or negative), its interval with the smallest ``df`` of those findings (``overall_df``).
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
    df: np.ndarray
    overall_df: int


def paired_delong(
    labels: np.ndarray,
    candidate: np.ndarray,
    baseline: np.ndarray,
    confidence: float = 0.95,
    clusters: np.ndarray | None = None,
) -> PairedAUC:
    """DeLong's paired comparison of the AUROCs of two models scored on the same images.

    For finding ``f`` with ``m`` positives and ``n`` negatives, the influence terms of
    :func:`~trackeval.metrics.classification.delong_influence` of both models are subtracted image by image,
    ``psi[i] = phi_A[i] - phi_B[i]``; ``sum(psi**2) = S10_AA/m + S01_AA/n + S10_BB/m + S01_BB/n
    - 2 (S10_AB/m + S01_AB/n)`` is DeLong's ``var(A - B)`` (``S`` the ``ddof=1`` covariances of the placements).
    The macro difference is the mean of the per-finding differences; its variance is
    ``sum_i (mean_f psi_f[i])**2`` over images, which keeps the correlation between findings of one image.
    Intervals are Wald intervals with a Student t quantile of ``min(clusters with a positive, clusters with a
    negative) - 1`` degrees of freedom (:func:`~trackeval.metrics.classification.auc_df`): with a normal
    quantile the non-inferiority test at 20 positives passed 3.7-4.2% of candidates exactly at the margin
    (nominal 2.5%); with the t quantile 2.0-2.3% (docs/gate.md).

    Args:
        labels: ``(n_images, k)`` 1/0 labels, NaN where unknown (that cell is left out of that finding).
        candidate, baseline: ``(n_images, k)`` scores of the two models, rows matched by image; a NaN score
            leaves the cell out for both models.
        confidence: two-sided level of the Wald intervals.
        clusters: cluster code per image (a patient's images); the variances then sum the influence terms within
            each cluster before squaring (the clustered DeLong variance of Obuchowski 1997), so correlated images
            of one patient do not count as independent. None: every image its own cluster.

    Returns:
        :class:`PairedAUC`. Identical scores give a difference of exactly 0 with variance 0.

    Raises:
        ValueError: shapes differ, labels other than 0/1/NaN, or infinite scores.
    """
    y, c, b = _matching_scores(labels, candidate, baseline, confidence)
    per = _per_finding(y, c, b, confidence, clusters)
    value, cand_auc, base_auc = per["value"], per["candidate"], per["baseline"]
    defined = ~np.isnan(value)
    overall = overall_variance = math.nan
    overall_df = -1
    if defined.any():
        overall = float(value[defined].mean())
        overall_variance = clustered_variance(per["psi"][:, defined].mean(axis=1), clusters)
        overall_df = int(per["df"][defined].min())
    o_low, o_high = wald_interval(overall, overall_variance, confidence, (-1.0, 1.0), overall_df)
    return PairedAUC(
        value=value,
        variance=per["variance"],
        low=per["low"],
        high=per["high"],
        n_pairs=per["n_pairs"].astype(np.int64),
        candidate=cand_auc,
        baseline=base_auc,
        overall=overall,
        overall_variance=overall_variance,
        overall_low=o_low,
        overall_high=o_high,
        overall_candidate=float(cand_auc[defined].mean()) if defined.any() else math.nan,
        overall_baseline=float(base_auc[defined].mean()) if defined.any() else math.nan,
        df=per["df"].astype(np.int64),
        overall_df=overall_df,
    )


def _matching_scores(
    labels: np.ndarray, candidate: np.ndarray, baseline: np.ndarray, confidence: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels and both sides' scores as matching ``(n_images, k)`` float arrays (1D: one finding)."""
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
    return y, c, b


def _per_finding(
    y: np.ndarray, c: np.ndarray, b: np.ndarray, confidence: float, clusters: np.ndarray | None
) -> dict[str, np.ndarray]:
    """Per finding: ``value``, ``variance``, ``low``, ``high``, ``candidate``, ``baseline`` and ``n_pairs``
    (``(k,)``, NaN / 0 where the AUC is undefined) and ``psi``, the ``(n_images, k)`` influence differences."""
    k = y.shape[1]
    ok = ~(np.isnan(y) | np.isnan(c) | np.isnan(b))
    out = {name: np.full(k, np.nan) for name in ("value", "variance", "low", "high", "candidate", "baseline")}
    out["n_pairs"], out["psi"], out["df"] = np.zeros(k), np.zeros(y.shape), np.full(k, -1.0)
    for j in range(k):
        rows = ok[:, j]
        yj = y[rows, j]
        da, db = delong(yj, c[rows, j]), delong(yj, b[rows, j])
        if math.isnan(da.auc):
            continue
        out["candidate"][j], out["baseline"][j], out["value"][j] = da.auc, db.auc, da.auc - db.auc
        out["n_pairs"][j] = yj.size
        out["psi"][rows, j] = delong_influence(yj, da) - delong_influence(yj, db)
        out["variance"][j] = clustered_variance(out["psi"][:, j], clusters)
        out["df"][j] = df = auc_df(yj, None if clusters is None else clusters[rows])
        out["low"][j], out["high"][j] = wald_interval(out["value"][j], out["variance"][j], confidence, (-1.0, 1.0), df)
    return out


def normal_pvalue(
    estimate: float,
    std_error: float,
    threshold: float,
    alternative: Literal["less", "greater"],
    df: int | None = None,
) -> float:
    """One-sided Wald p-value of ``H1: delta < threshold`` (``less``) or ``delta > threshold`` (``greater``).

    ``Phi((estimate - threshold) / std_error)`` for ``less`` and its complement for ``greater`` (with ``df``:
    the Student t CDF with ``df`` degrees of freedom instead of ``Phi``, as the DeLong rows' intervals); below
    ``alpha`` exactly when the one-sided ``1 - alpha`` Wald bound excludes ``threshold``. A zero standard error
    gives 0 when the estimate lies strictly on the H1 side, else 1. A NaN estimate or standard error, or fewer
    than 1 degree of freedom -> 1.0 (no evidence).
    """
    if math.isnan(estimate) or math.isnan(std_error) or (df is not None and df < 1):
        return 1.0
    if std_error == 0.0:
        on_h1 = estimate < threshold if alternative == "less" else estimate > threshold
        return 0.0 if on_h1 else 1.0
    z = (estimate - threshold) / std_error
    dist = norm if df is None else student_t(df)
    return float(dist.cdf(z) if alternative == "less" else dist.sf(z))


def bootstrap_pvalue(
    samples: np.ndarray,
    threshold: float,
    alternative: Literal["less", "greater"],
    n_units: float = math.nan,
    method: IntervalMethod = "percentile",
) -> float:
    """One-sided bootstrap p-value of ``H1: delta < threshold`` (``less``) or ``delta > threshold`` (``greater``).

    ``percentile``: ``p = (1 + #{replicates on the H0 side}) / (1 + B)`` over the non-NaN replicates (the +1 keeps
    p > 0, as in Davison & Hinkley); it is below ``alpha`` exactly when the one-sided ``1 - alpha`` percentile
    bound excludes ``threshold``. ``expanded_percentile``: the level ``max(#{H0 side}, 1) / B`` mapped by
    :func:`~trackeval.stats.bootstrap.expanded_pvalue` with ``n_units`` clusters, below ``alpha`` exactly when
    the one-sided expanded bound excludes ``threshold``. The level is floored at ``1 / B``, the resolution of
    ``B`` replicates: when every replicate lies on the H1 side the data say only that the level is below
    ``1 / B``, and that resolution goes through the same expansion (at 6 clusters and ``B = 2000``, ``p =
    0.015``), so a p-value is never 0 for a finite ``B`` (a level of 0 would reject at every alpha, whatever the
    number of clusters, and made the worst-group guard refuse at its null at small n). No valid replicate ->
    1.0 (no evidence).
    """
    s = np.asarray(samples, dtype=np.float64)
    s = s[~np.isnan(s)]
    if s.size == 0:
        return 1.0
    on_h0 = np.count_nonzero(s >= threshold) if alternative == "less" else np.count_nonzero(s <= threshold)
    return count_pvalue(int(on_h0), s.size, n_units, method)


def count_pvalue(on_h0: int, n: int, n_units: float = math.nan, method: IntervalMethod = "percentile") -> float:
    """:func:`bootstrap_pvalue` from its counts: ``on_h0`` of ``n`` valid replicates on the H0 side. With
    ``on_h0 = 0`` it is the smallest p-value ``n`` replicates can give (their resolution)."""
    if method == "expanded_percentile":
        return expanded_pvalue(max(on_h0, 1) / n, n_units, method)
    return float((1 + on_h0) / (1 + n))


def resamples_for(level: float, n_units: float, method: IntervalMethod) -> int | float:
    """The fewest replicates whose smallest p-value (:func:`count_pvalue` with none on the H0 side) is at most
    ``level``: the inverse of the expansion is the one-sided level of :func:`interval_levels`. ``math.inf`` where
    no number does: at 1 degree of freedom (2 clusters, or an effective number below 3) the expanded level of a
    small ``level`` is below the smallest float."""
    if method == "expanded_percentile":
        raw = interval_levels(1.0 - 2.0 * level, n_units, method)[0]
        return math.ceil(1.0 / raw) if raw > 0.0 else math.inf
    return math.ceil(1.0 / level) - 1


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
