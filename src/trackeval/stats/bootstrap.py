"""Case-level percentile bootstrap, vectorised.

Cases (patients, subjects) are resampled with replacement, never voxels or organs: every per-organ mean of
one resample is recomputed from the same resampled cases, so the CI of a mean over organs keeps the
correlation between organs of one patient. A resample is represented by multinomial case weights ``W`` of
shape ``(B, n)``; weighted sums are then one matrix product, ``W @ values``, instead of a Python loop.

NaN values (not applicable: organ absent from truth and prediction) are excluded from each mean, exactly as
``nanmean`` excludes them from the point estimate; a resample in which an organ has no valid case leaves that
organ's mean NaN for that resample, and percentiles ignore such resamples.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

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


def weight_blocks(n: int, n_resamples: int, seed: int | Sequence[int]) -> Iterator[np.ndarray]:
    """Yield case-resampling weights (multinomial counts) in blocks of rows, ``(b, n)`` float64.

    The blocks concatenate to ``(n_resamples, n)``; deterministic in ``seed``. Any statistic that is a
    function of weighted sums over cases is then bootstrapped with matrix products, block by block.
    """
    rng = np.random.default_rng(seed)
    rows = max(1, _BLOCK_ENTRIES // max(n, 1))
    p = np.full(n, 1.0 / n)
    done = 0
    while done < n_resamples:
        b = min(rows, n_resamples - done)
        yield rng.multinomial(n, p, size=b).astype(np.float64)
        done += b


def nanmean_cols(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``sums / counts`` elementwise, NaN where ``counts`` is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), np.nan)


def nanmean_rows(means: np.ndarray) -> np.ndarray:
    """Mean over the last axis ignoring NaN; NaN where a row has no value."""
    ok = ~np.isnan(means)
    n_ok = ok.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_ok > 0, np.where(ok, means, 0.0).sum(axis=-1) / np.maximum(n_ok, 1), np.nan)


def percentiles(samples: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided percentile interval of bootstrap ``samples`` (per column for 2D), ignoring NaN resamples."""
    alpha = (1.0 - confidence) / 2.0
    ok = ~np.isnan(samples)
    if samples.ndim == 1:
        if not ok.any():
            return np.array(np.nan), np.array(np.nan)
        lo, hi = np.quantile(samples[ok], [alpha, 1.0 - alpha])
        return np.array(lo), np.array(hi)
    with np.errstate(all="ignore"):
        lo = np.full(samples.shape[1], np.nan)
        hi = np.full(samples.shape[1], np.nan)
        for j in np.flatnonzero(ok.any(axis=0)):
            lo[j], hi[j] = np.quantile(samples[ok[:, j], j], [alpha, 1.0 - alpha])
    return lo, hi


def bootstrap_means(
    values: np.ndarray, n_resamples: int = 1000, seed: int | Sequence[int] = 0, confidence: float = 0.95
) -> MeanCI:
    """Column means of ``values`` (cases x columns, NaN = not applicable) with case-level bootstrap CIs.

    Args:
        values: ``(n_cases, k)`` float array; a 1D array is treated as one column.
        n_resamples: bootstrap resamples ``B`` (cost is one ``(B, n) @ (n, k)`` product).
        seed: seed (or entropy sequence) of the resampling; the same seed gives bit-identical intervals.
            Pass the same seed for metrics of the same cases so they share resamples.
        confidence: two-sided level of the percentile interval.

    Returns:
        :class:`MeanCI`. With zero cases, or a column without valid values, the value and CI are NaN.
        With one valid case, the CI collapses to the point estimate.
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
    point = nanmean_cols(filled.sum(axis=0), n_valid.astype(np.float64))
    overall = float(nanmean_rows(point))
    if n == 0:
        nan_k = np.full(k, np.nan)
        return MeanCI(point, nan_k, nan_k.copy(), n_valid, overall, np.nan, np.nan)
    col_samples = []
    for w in weight_blocks(n, n_resamples, seed):
        col_samples.append(nanmean_cols(w @ filled, w @ valid.astype(np.float64)))
    samples = np.concatenate(col_samples, axis=0)
    low, high = percentiles(samples, confidence)
    o_low, o_high = percentiles(nanmean_rows(samples), confidence)
    return MeanCI(point, low, high, n_valid, overall, float(o_low), float(o_high))
