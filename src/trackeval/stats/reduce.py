"""NaN-aware means and the headline reductions: the one statement of what NaN means in an aggregate.

**NaN is "not applicable"** (Dice of an organ absent from truth and prediction, NoC of a target without a point
sequence): it is left out of every mean, never counted as 0. **A mean over nothing is NaN** (no value that is not
NaN: an organ no case has, a resample without any case of a group), and stays NaN through every later mean that
leaves NaN out. Every mean here is ``sums / counts`` over the non-NaN values, the sums taken along the axis in array
order with NaN replaced by 0 (as ``numpy.nanmean``, without its warnings), so the same values give the same bits
wherever they are reduced: the stored aggregates, the gate's resamples and the evidence checks.

**Headline reductions** of a ``(cases x items)`` matrix (:attr:`trackeval.spec.MetricInfo.reduction`):

* ``item_mean``: the mean over items of each item's mean over cases (nnU-Net ``foreground_mean``: UMD, 3D-MIR,
  X-ray seg); an item without any value is left out.
* ``case_mean``: the mean over cases of each case's mean over its items (IMIS image level); a case without any
  value is left out. With one item per case both give the same value.

**Case weights.** Both reductions are weighted means of the case records: :func:`item_weights` and
:func:`case_weights` give each case's share of an item mean and of the headline (the bootstrap's effective number
of clusters, :func:`trackeval.stats.bootstrap.effective_units`, is computed from them).

The third reduction, ``corpus`` (AUROC, mAP, BLEU), is a unit's own function of the case records, not a mean.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = [
    "MeanReduction",
    "case_weights",
    "headline",
    "item_weights",
    "mean_over",
    "nan_mean",
    "nan_sums",
    "ratio",
    "weighted_headline",
]

#: the headline reductions that are means of the case records (see the module docstring)
MeanReduction = Literal["item_mean", "case_mean"]


def ratio(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``sums / counts`` elementwise, NaN where ``counts`` is 0 (a mean over nothing)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), np.nan)


def nan_sums(values: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """``(sums, counts)`` of the non-NaN ``values`` along ``axis`` (NaN summed as 0; counts are integers)."""
    v = np.asarray(values, dtype=np.float64)
    valid = ~np.isnan(v)
    return np.where(valid, v, 0.0).sum(axis=axis), valid.sum(axis=axis)


def nan_mean(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean along ``axis`` leaving NaN out; NaN where there is nothing else (``numpy.nanmean``'s values and bits,
    without its warnings)."""
    return ratio(*nan_sums(values, axis))


def mean_over(means: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Mean over the last axis of the columns selected by the boolean ``items``, NaN where any selected column is
    NaN or nothing is selected: a resample that misses an item of the point estimate does not average over fewer
    items (it is NaN, and left out of the percentiles)."""
    sel = means[..., items]
    if sel.shape[-1] == 0:
        return np.full(means.shape[:-1], np.nan)
    return sel.mean(axis=-1)


def headline(values: np.ndarray, reduction: MeanReduction) -> float:
    """The headline of a ``(cases x items)`` matrix (NaN = not applicable; 1D: one item) under ``reduction``; NaN
    when no value is left (see the module docstring). ``item_mean`` gives the bits of
    :func:`trackeval.stats.bootstrap.bootstrap_means`' ``overall``."""
    v = np.asarray(values, dtype=np.float64)
    v = v[:, None] if v.ndim == 1 else v
    return float(nan_mean(nan_mean(v, axis=0 if reduction == "item_mean" else 1)))


def weighted_headline(
    w: np.ndarray, filled: np.ndarray, valid: np.ndarray, items: np.ndarray, reduction: MeanReduction
) -> tuple[np.ndarray, np.ndarray]:
    """Headlines and item means of case-weighted resamples: ``(b,)`` and ``(b, k)``.

    Args:
        w: ``(b, n)`` case weights, one resample per row (a row of ones: the point estimate).
        filled: the ``(n, k)`` values with NaN replaced by 0; ``valid``: ``(n, k)`` 1.0 where a value is not NaN.
        items: ``(k,)`` booleans, the items of the point estimate; a resample missing one of them has a NaN
            ``item_mean`` headline (:func:`mean_over`).
        reduction: ``item_mean`` or ``case_mean`` (a case without any value weighs nothing).
    """
    item_means = ratio(w @ filled, w @ valid)
    if reduction == "item_mean":
        return mean_over(item_means, items), item_means
    cnt = valid.sum(axis=1)
    per_case = np.divide(filled.sum(axis=1), cnt, out=np.zeros(cnt.shape), where=cnt > 0)
    return ratio(w @ per_case, w @ (cnt > 0).astype(np.float64)), item_means


def item_weights(valid: np.ndarray) -> np.ndarray:
    """Each case's share of each item mean of a ``(cases x items)`` matrix: ``valid[i, j] / N_j``, ``N_j`` the
    item's valid cases (``(n, k)``; each column sums to 1, or is 0 where the item has no value)."""
    v = np.asarray(valid, dtype=np.float64)
    return v / np.maximum(v.sum(axis=0), 1.0)


def case_weights(valid: np.ndarray, items: np.ndarray, reduction: MeanReduction) -> np.ndarray:
    """Each case's share of the headline under ``reduction``: ``(n,)``, summing to 1 (all 0 where the headline
    has no value).

    ``item_mean``: the mean over the ``items`` (booleans, the point estimate's items) of :func:`item_weights`.
    ``case_mean``: ``1 / m`` for each of the ``m`` cases with any value, 0 for the others.
    """
    v = np.asarray(valid, dtype=np.float64)
    if reduction == "item_mean":
        w = item_weights(v[:, items])
        return w.sum(axis=1) / max(w.shape[1], 1)
    has = (v.sum(axis=1) > 0).astype(np.float64)
    return has / max(has.sum(), 1.0)
