"""Paired comparisons of two model versions on the same cases: paired bootstrap, p-values, multiplicity.

The unit of resampling is the case (patient): one resample draws case indices with replacement and applies
them to BOTH models, so the per-case correlation between the two versions is kept (Efron & Tibshirani's
paired bootstrap; ``scipy.stats.bootstrap(..., paired=True)`` semantics, vectorised with the same
multinomial weights as :mod:`trackeval.stats.bootstrap`).

Differences are formed cell by cell (case x item, e.g. case x organ): a cell counts only where both
versions have a value (NaN = not applicable on either side is left out), so every delta is a like-for-like
pair. The headline delta is the mean over items of the per-item mean deltas (nnU-Net ``foreground_mean`` of
the paired differences).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

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
