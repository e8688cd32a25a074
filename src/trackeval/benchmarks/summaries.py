"""Aggregate summaries shared by the benchmark adapters: means with cluster-bootstrap CIs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from trackeval.config.base import BootstrapConfig
from trackeval.results import CaseRecord, MetricSummary, metric_key
from trackeval.stats.bootstrap import bootstrap_means, cluster_codes, group_seed


def clusters_of(rows: Sequence[CaseRecord | str], boot: BootstrapConfig) -> np.ndarray | None:
    """The resampling cluster of each row (a case record, or its subject id) under ``bootstrap.cluster``:
    subject codes, or None (every case its own cluster)."""
    if boot.cluster == "case":
        return None
    return cluster_codes([r if isinstance(r, str) else r.subject_id for r in rows])


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
    prefix: str,
    values: np.ndarray,
    items: list[str],
    dim: str,
    boot: BootstrapConfig,
    group: str,
    clusters: np.ndarray | None,
) -> dict[str, MetricSummary]:
    """Headline (mean over items of the per-item means) and ``prefix/by_<dim>/<item>`` summaries.

    ``values``: ``(n_cases, n_items)``, NaN = not applicable; ``clusters``: each row's cluster code
    (:func:`clusters_of`). CIs: cluster bootstrap, every item mean of a resample recomputed from the same
    resampled clusters.
    """
    ci = bootstrap_means(
        values, boot.n_resamples, group_seed(boot.seed, group), boot.confidence, clusters, boot.interval
    )
    n = values.shape[0]
    valid_rows = int((~np.isnan(values)).any(axis=1).sum()) if values.size else 0
    out = {prefix: summary(ci.overall, n, valid_rows, ci.overall_low, ci.overall_high)}
    for j, item in enumerate(items):
        out[metric_key(prefix, f"by_{dim}", item)] = summary(
            ci.value[j], n, int(ci.n_valid[j]), float(ci.low[j]), float(ci.high[j])
        )
    return out


def column_summary(values: np.ndarray, boot: BootstrapConfig, group: str, clusters: np.ndarray | None) -> MetricSummary:
    """Mean of per-case ``values`` (NaN = not applicable) with its cluster-bootstrap CI."""
    v = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    ci = bootstrap_means(v, boot.n_resamples, group_seed(boot.seed, group), boot.confidence, clusters, boot.interval)
    return summary(float(ci.value[0]), v.shape[0], int(ci.n_valid[0]), float(ci.low[0]), float(ci.high[0]))
