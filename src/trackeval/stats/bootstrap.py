"""Cluster-level bootstrap with small-sample corrected percentile intervals, vectorised.

**What is resampled.** Clusters of cases are drawn with replacement, never voxels or organs: a cluster is a
subject (UMD pairs a PET and a CT scan of one subject; both are drawn together) or, without cluster labels, a
case. Every per-organ mean of one resample is recomputed from the same resampled cases, so the CI of a mean
over organs keeps the correlation between organs of one patient and between the scans of one subject. A
resample is represented by case weights ``W`` of shape ``(B, n)`` (the multinomial count of each case's
cluster); weighted sums are then one matrix product, ``W @ values``, instead of a Python loop.

**Intervals.** The plain percentile interval is too narrow at small n (it covers about 87% at 6 subjects for a
nominal 95%), so the default is Hesterberg's *expanded percentile* interval (Hesterberg 2015, "What teachers
should know about the bootstrap", section 5): the percentiles are taken at ``alpha' = Phi(sqrt(n / (n - 1)) *
t_{alpha, n - 1})`` instead of ``alpha``, ``n`` the number of clusters, which widens the interval by the factor a
t interval with the unbiased variance would have over a normal one, while keeping the bootstrap's skewness.
The coverage it reaches is measured by ``benchmarks/bench_gate_calibration.py`` (table in docs/gate.md).

**Unequal clusters.** A mean over cases weighs a cluster by its cases' share of the estimate (a subject with ten
scans weighs ten times one with one; an organ present in few scans puts more weight on them), and unequal weights
carry less information than as many equal ones. The ``n`` of the expansion of a mean's interval
(:func:`bootstrap_means`, and the gate's :func:`trackeval.stats.paired.paired_headlines`) is therefore Kish's
effective number of clusters, ``(sum_g w_g)^2 / sum_g w_g^2`` over the cluster weights ``w_g`` of the estimate
(:func:`effective_units`, from the case weights of :mod:`trackeval.stats.reduce`): exactly the number of clusters
when their weights are equal, so intervals of equal clusters are unchanged, and fewer when they are not. It is
the effective sample size of a weighted mean (Kish 1965, section 11.7) and the Welch-Satterthwaite degrees of
freedom plus one of its variance when the cases are independent; a non-integer ``n`` gives ``floor(n) - 1``
degrees of freedom (at least 1).

NaN values (not applicable: organ absent from truth and prediction) are excluded from each mean, exactly as the
point estimate excludes them (the NaN rules and the means: :mod:`trackeval.stats.reduce`). A resample in which an
item (organ) has no valid case leaves that item's mean NaN; the mean over items of such a resample is NaN too (the
headline is always the mean over the same items as the point estimate), and percentiles ignore NaN resamples.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from trackeval.stats.distributions import normal_cdf, normal_ppf, t_cdf, t_ppf
from trackeval.stats.reduce import case_weights, item_weights, mean_over, nan_mean, ratio

#: how an interval is read off the bootstrap replicates (``bootstrap.interval``)
IntervalMethod = Literal["expanded_percentile", "percentile"]

#: Largest number of entries in one block of the (B, n) weight matrix; bounds memory for huge n.
_BLOCK_ENTRIES = 1 << 23


@dataclass(frozen=True)
class MeanCI:
    """Point estimates and percentile CIs for k columns, plus the overall mean over columns.

    ``value``, ``low``, ``high``, ``n_valid`` have shape ``(k,)``; ``overall*`` are the mean over columns
    (NaN columns excluded) of the per-column means, with its own CI from the same resamples.
    """

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_valid: np.ndarray
    overall: float
    overall_low: float
    overall_high: float


def group_seed(seed: int, group: str) -> tuple[int, int]:
    """Seed of one aggregate's resamples: the config seed plus a stable hash (crc32) of the group's name.

    Every metric of the same group of cases shares its resamples; different groups get independent ones.
    """
    return (seed, zlib.crc32(group.encode()))


def cluster_codes(labels: Sequence[str] | None) -> np.ndarray | None:
    """Integer cluster code per case (``0..G-1`` in sorted label order) from one label per case; None -> None
    (every case its own cluster)."""
    if labels is None:
        return None
    return np.unique(np.asarray(list(labels), dtype=object).astype(str), return_inverse=True)[1].astype(np.int64)


def n_clusters(n: int, clusters: np.ndarray | None) -> int:
    """Number of resampling units among ``n`` cases: distinct cluster codes, or ``n``."""
    return n if clusters is None else int(np.unique(clusters).size)


def weight_blocks(
    n: int, n_resamples: int, seed: int | Sequence[int], clusters: np.ndarray | None = None
) -> Iterator[np.ndarray]:
    """Yield case weights of cluster resamples in blocks of rows, ``(b, n)`` float64.

    Without ``clusters`` a row is the multinomial count of each case (cases resampled with replacement); with
    ``clusters`` (a code per case, :func:`cluster_codes`) the ``G`` clusters are drawn with replacement and every
    case carries its cluster's count. The blocks concatenate to ``(n_resamples, n)``; deterministic in ``seed``.
    Any statistic that is a function of weighted sums over cases is then bootstrapped with matrix products,
    block by block.
    """
    rng = np.random.default_rng(seed)
    rows = max(1, _BLOCK_ENTRIES // max(n, 1))
    if clusters is not None:
        if clusters.shape != (n,):
            raise ValueError(f"clusters must hold one code per case ({n}), got shape {clusters.shape}")
        _, codes = np.unique(clusters, return_inverse=True)
        g = int(codes.max()) + 1 if n else 0
    else:
        codes, g = None, n
    p = np.full(g, 1.0 / max(g, 1))
    done = 0
    while done < n_resamples:
        b = min(rows, n_resamples - done)
        w = rng.multinomial(g, p, size=b).astype(np.float64)
        yield w if codes is None else np.take(w, codes, axis=1)  # the values of w[:, codes], 2x faster
        done += b


def interval_levels(confidence: float, n_units: float, method: IntervalMethod) -> tuple[float, float]:
    """Lower and upper quantile levels of a two-sided interval from ``n_units`` resampling units.

    ``percentile``: ``alpha/2`` and ``1 - alpha/2``. ``expanded_percentile``: ``Phi(sqrt(n/(n-1)) t_{alpha/2,
    df})`` and its complement (module docstring), ``df = n - 1`` for a whole ``n`` and ``max(floor(n) - 1, 1)``
    for an effective one; with at most 1 unit there is no spread to expand and the plain levels are used.
    """
    alpha = (1.0 - confidence) / 2.0
    if method == "percentile" or not n_units > 1:
        return alpha, 1.0 - alpha
    lo = normal_cdf(math.sqrt(n_units / (n_units - 1.0)) * t_ppf(alpha, _df(n_units)))
    return lo, 1.0 - lo


def _df(n_units: float) -> int:
    """Degrees of freedom of the expansion at ``n_units > 1`` units: ``floor(n) - 1``, at least 1."""
    return max(math.floor(n_units) - 1, 1)


def expanded_pvalue(p: float, n_units: float, method: IntervalMethod) -> float:
    """The one-sided p-value that matches an expanded percentile bound: ``p`` is the raw bootstrap level at which
    the threshold sits; the result is below ``alpha`` exactly when the one-sided ``1 - alpha`` expanded bound
    excludes the threshold (the inverse of :func:`interval_levels`' map). ``percentile`` or at most 1 unit:
    ``p`` unchanged."""
    if method == "percentile" or not n_units > 1 or p <= 0.0 or p >= 1.0:
        return p
    return t_cdf(normal_ppf(p) / math.sqrt(n_units / (n_units - 1.0)), _df(n_units))


def percentiles(
    samples: np.ndarray,
    confidence: float,
    n_units: float | np.ndarray | None = None,
    method: IntervalMethod = "percentile",
    point: float | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided interval of bootstrap ``samples`` (per column for 2D), ignoring NaN resamples.

    ``n_units``: resampling units behind the estimate (one number, or one per column for 2D), which the
    ``expanded_percentile`` method needs (:func:`interval_levels`); None with that method means no expansion.
    ``point``: the point estimate(s); the interval is widened to contain it, so ``low <= value <= high`` holds
    even where every resample gives the same value and the point's summation order rounds it outside.
    """
    lo, hi = _raw_percentiles(samples, confidence, n_units, method)
    if point is None:
        return lo, hi
    p = np.asarray(point, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # NaN stays NaN: no interval is not widened into one
        return np.minimum(lo, np.where(np.isnan(p), lo, p)), np.maximum(hi, np.where(np.isnan(p), hi, p))


def _raw_percentiles(
    samples: np.ndarray, confidence: float, n_units: float | np.ndarray | None, method: IntervalMethod
) -> tuple[np.ndarray, np.ndarray]:
    ok = ~np.isnan(samples)
    units = np.broadcast_to(np.asarray(np.nan if n_units is None else n_units, dtype=np.float64), samples.shape[1:])
    if samples.ndim == 1:
        if not ok.any():
            return np.array(np.nan), np.array(np.nan)
        lo, hi = np.quantile(samples[ok], interval_levels(confidence, float(units), method))
        return np.array(lo), np.array(hi)
    with np.errstate(all="ignore"):
        lo = np.full(samples.shape[1], np.nan)
        hi = np.full(samples.shape[1], np.nan)
        for j in np.flatnonzero(ok.any(axis=0)):
            lo[j], hi[j] = np.quantile(samples[ok[:, j], j], interval_levels(confidence, float(units[j]), method))
    return lo, hi


def effective_units(weights: np.ndarray, clusters: np.ndarray | None) -> np.ndarray:
    """Kish's effective number of clusters of a weighted mean over cases: ``(sum_g w_g)^2 / sum_g w_g^2``, ``w_g``
    the sum of the case ``weights`` of cluster ``g`` (every case its own cluster without ``clusters``).

    ``weights``: ``(n,)`` (one estimate: a 0-d array comes back) or ``(n, k)`` (one per column: ``(k,)``), each
    case's share of the estimate (:func:`trackeval.stats.reduce.case_weights`, ``item_weights``). Exactly the
    number of clusters with a positive weight when those weights are equal (to 1e-12, the rounding of their
    sums), so equal clusters give the count whatever the summation order; fewer when they are unequal (module
    docstring); 0 without any weight.
    """
    w = np.asarray(weights, dtype=np.float64)
    g = w
    if clusters is not None:
        _, codes = np.unique(clusters, return_inverse=True)
        g = np.zeros((int(codes.max()) + 1 if codes.size else 0, *w.shape[1:]))
        np.add.at(g, codes, w)
    positive = g > 0
    largest = np.where(positive, g, 0.0).max(axis=0, initial=0.0)
    smallest = np.where(positive, g, np.inf).min(axis=0, initial=np.inf)
    equal = smallest >= largest * (1.0 - 1e-12)
    kish = ratio(g.sum(axis=0) ** 2, (g * g).sum(axis=0))
    return np.where(equal, positive.sum(axis=0).astype(np.float64), kish)


def units_per_column(valid: np.ndarray, clusters: np.ndarray | None) -> np.ndarray:
    """Resampling units with at least one valid value, per column of the ``(n_cases, k)`` boolean ``valid``."""
    if clusters is None:
        return valid.sum(axis=0).astype(np.float64)
    return np.array([np.unique(clusters[valid[:, j]]).size for j in range(valid.shape[1])], dtype=np.float64)


def bootstrap_means(
    values: np.ndarray,
    n_resamples: int = 1000,
    seed: int | Sequence[int] = 0,
    confidence: float = 0.95,
    clusters: np.ndarray | None = None,
    method: IntervalMethod = "percentile",
) -> MeanCI:
    """Column means of ``values`` (cases x columns, NaN = not applicable) with cluster-bootstrap CIs.

    Args:
        values: ``(n_cases, k)`` float array; a 1D array is treated as one column.
        n_resamples: bootstrap resamples ``B`` (cost is one ``(B, n) @ (n, k)`` product).
        seed: seed (or entropy sequence) of the resampling; the same seed gives bit-identical intervals.
            Pass the same seed for metrics of the same cases so they share resamples.
        confidence: two-sided level of the interval.
        clusters: cluster code per case (:func:`cluster_codes`, e.g. of subject ids); None: cases.
        method: ``percentile`` or ``expanded_percentile`` (module docstring); the expansion uses the effective
            number of clusters (:func:`effective_units`) of each column's mean and of the overall mean: the
            number of clusters with a valid value when their weights are equal.

    Returns:
        :class:`MeanCI`. With zero cases, or a column without valid values, the value and CI are NaN.
        With one valid cluster, the CI collapses to the point estimate. The overall mean of a resample is over
        the same columns as the point estimate's (NaN, hence left out, when the resample misses one).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2:
        raise ValueError(f"values must be (n_cases, k), got shape {v.shape}")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    n, k = v.shape
    valid = ~np.isnan(v)
    filled = np.where(valid, v, 0.0)
    n_valid = valid.sum(axis=0)
    point = ratio(filled.sum(axis=0), n_valid.astype(np.float64))
    overall = float(nan_mean(point))
    if n == 0:
        nan_k = np.full(k, np.nan)
        return MeanCI(point, nan_k, nan_k.copy(), n_valid, overall, np.nan, np.nan)
    col_samples, counts = [], valid.astype(np.float64)
    for w in weight_blocks(n, n_resamples, seed, clusters):
        col_samples.append(ratio(w @ filled, w @ counts))
    samples = np.concatenate(col_samples, axis=0)
    low, high = percentiles(samples, confidence, effective_units(item_weights(valid), clusters), method, point)
    items = ~np.isnan(point)
    units = effective_units(case_weights(valid, items, "item_mean"), clusters)
    o_low, o_high = percentiles(mean_over(samples, items), confidence, units, method, overall)
    return MeanCI(point, low, high, n_valid, overall, float(o_low), float(o_high))
