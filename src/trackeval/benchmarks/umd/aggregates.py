"""UMD's aggregates: per-organ means and their mean, by modality, and the paired modality gap (see
:mod:`trackeval.benchmarks.umd`)."""

from __future__ import annotations

import numpy as np

from trackeval.benchmarks.summaries import clusters_of, mean_summaries
from trackeval.benchmarks.umd.cases import MODALITIES
from trackeval.benchmarks.umd.config import NAME
from trackeval.config import EvalConfig
from trackeval.results import CaseRecord, MetricSummary, item_matrix, metric_key
from trackeval.stats.reduce import nan_mean

AGG_METRICS = ("dsc", "nsd", "hd95")


def _paired_gap(records: list[CaseRecord], organs: list[str], a: str, b: str) -> np.ndarray:
    """(subjects with both modalities x organs) matrix of dsc(a) - dsc(b); NaN where either is NaN. One row per
    subject, so the gap's bootstrap resamples subjects whatever ``bootstrap.cluster``."""
    dsc = item_matrix(records, organs, "dsc")
    per: dict[str, dict[str, list[np.ndarray]]] = {}
    for r, row in zip(records, dsc, strict=True):
        per.setdefault(r.subject_id, {}).setdefault(r.groups["modality"], []).append(row)
    rows = []
    for subject in sorted(per):
        mods = per[subject]
        if a in mods and b in mods:  # an all-NaN organ column: a mean over nothing, NaN
            rows.append(nan_mean(mods[a], axis=0) - nan_mean(mods[b], axis=0))
    return np.array(rows).reshape(len(rows), len(organs))


def aggregate(records: list[CaseRecord], cfg: EvalConfig) -> dict[str, MetricSummary]:
    """Every UMD aggregate key (see :mod:`trackeval.benchmarks.umd`)."""
    organs = list(cfg.umd.labels)
    modalities = [m for m in MODALITIES if any(r.groups["modality"] == m for r in records)]
    out: dict[str, MetricSummary] = {}
    clusters = clusters_of(records, cfg.bootstrap)
    for metric in (m for m in AGG_METRICS if m in cfg.umd.metrics):
        values = item_matrix(records, organs, metric)
        out.update(mean_summaries(metric_key(NAME, metric), values, organs, "organ", cfg.bootstrap, "all", clusters))
        for mod in modalities:
            rows = [i for i, r in enumerate(records) if r.groups["modality"] == mod]
            out.update(
                mean_summaries(
                    metric_key(NAME, metric, "by_modality", mod),
                    values[rows],
                    organs,
                    "organ",
                    cfg.bootstrap,
                    f"modality={mod}",
                    None if clusters is None else clusters[rows],
                )
            )
    for a, b in cfg.umd.modality_pairs:
        gap = _paired_gap(records, organs, a, b)
        if len(gap):
            key = metric_key(NAME, "dsc_gap", f"{a}_vs_{b}")
            out.update(mean_summaries(key, gap, organs, "organ", cfg.bootstrap, f"gap={a}_vs_{b}", None))
    return out
