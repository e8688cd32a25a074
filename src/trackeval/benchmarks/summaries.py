"""Aggregate summaries shared by the benchmark adapters: means with case-level bootstrap CIs."""

from __future__ import annotations

import math

import numpy as np

from trackeval.config.base import BootstrapConfig
from trackeval.results import MetricSummary, metric_key
from trackeval.stats.bootstrap import bootstrap_means, group_seed


def summary(value: float, n: int, n_valid: int, low: float = math.nan, high: float = math.nan) -> MetricSummary:
    """A :class:`MetricSummary`; NaN bounds mean "no interval" and are stored as null."""
    return MetricSummary(
        value=float(value),
        ci95_low=None if math.isnan(low) else float(low),
        ci95_high=None if math.isnan(high) else float(high),
        n=n,
        n_valid=n_valid,
    )


def mean_summaries(
    prefix: str, values: np.ndarray, items: list[str], dim: str, boot: BootstrapConfig, group: str
) -> dict[str, MetricSummary]:
    """Headline (mean over items of the per-item means) and ``prefix/by_<dim>/<item>`` summaries.

    ``values``: ``(n_cases, n_items)``, NaN = not applicable. CIs: case-level bootstrap, every item mean of a
    resample recomputed from the same resampled cases.
    """
    ci = bootstrap_means(values, boot.n_resamples, group_seed(boot.seed, group), boot.confidence)
    n = values.shape[0]
    valid_rows = int((~np.isnan(values)).any(axis=1).sum()) if values.size else 0
    out = {prefix: summary(ci.overall, n, valid_rows, ci.overall_low, ci.overall_high)}
    for j, item in enumerate(items):
        out[metric_key(prefix, f"by_{dim}", item)] = summary(
            ci.value[j], n, int(ci.n_valid[j]), float(ci.low[j]), float(ci.high[j])
        )
    return out


def column_summary(values: np.ndarray, boot: BootstrapConfig, group: str) -> MetricSummary:
    """Mean of per-case ``values`` (NaN = not applicable) with its case-level bootstrap CI."""
    v = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    ci = bootstrap_means(v, boot.n_resamples, group_seed(boot.seed, group), boot.confidence)
    return summary(float(ci.value[0]), v.shape[0], int(ci.n_valid[0]), float(ci.low[0]), float(ci.high[0]))
