"""IMIS aggregates of the per-target records, image level (the original: targets averaged within an image, then
over images) as ``imis/...`` and mask level (mean over all masks) as ``imis/mask_level/...``:

* ``dice/by_prompt/<point|box|text>``: Dice after turn 1 of each initial prompt type;
* ``dice/by_click/<n>``, ``noc_<85|90>``, ``dice_auc``: from the point sequences (click n = turn n); NoC counts
  clicks to reach ``imis.noc_metric`` (Dice, or IoU) >= t, not reached = ``max_clicks + 1`` or ``max_clicks``
  (``imis.noc_not_reached``); the keys do not change with these switches, which are logged as params;
* breakdowns ``/by_target/<t>`` (image level only: one mask per target and image, so both levels agree),
  ``/by_modality/<m>``, ``/by_region/<r>``.

CIs: image-level (``bootstrap.cluster``) expanded percentile bootstrap; at mask level the ratio (sum of Dice /
number of masks) is recomputed on each resample of images, with the same resamples as the image level.
"""

from __future__ import annotations

import math

import numpy as np

from trackeval.benchmarks.imis.config import NAME, IMISConfig
from trackeval.benchmarks.imis.protocol import noc_key
from trackeval.benchmarks.summaries import clusters_of
from trackeval.config import EvalConfig
from trackeval.results import CaseRecord, MetricSummary, metric_key
from trackeval.stats.bootstrap import bootstrap_means, group_seed, n_clusters, percentiles, weight_blocks
from trackeval.stats.reduce import nan_mean, nan_sums, ratio


def metric_columns(cfg: IMISConfig, prompt_types: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    """``(key tokens after the prefix, per-record metric name)`` of every aggregated metric."""
    cols = [(("dice", "by_prompt", p), f"dice_{p}_1") for p in prompt_types]
    if "point" in prompt_types:
        cols += [(("dice", "by_click", str(n)), f"dice_point_{n}") for n in range(1, cfg.max_clicks + 1)]
        cols += [((noc_key(t),), noc_key(t)) for t in cfg.noc_thresholds]
        cols.append((("dice_auc",), "dice_auc"))
    return cols


def _ratio_ci(
    sums: np.ndarray, counts: np.ndarray, cfg: EvalConfig, seed: tuple[int, int], clusters: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mask-level means ``sum(sums) / sum(counts)`` per column with a percentile CI over image resamples.

    The resamples are :func:`weight_blocks` of the same seed as the image level, so both levels share them.
    """
    b = cfg.bootstrap
    n = sums.shape[0]
    blocks = [ratio(w @ sums, w @ counts) for w in weight_blocks(n, b.n_resamples, seed, clusters)]
    value = ratio(sums.sum(axis=0), counts.sum(axis=0))
    low, high = percentiles(np.concatenate(blocks, axis=0), b.confidence, n_clusters(n, clusters), b.interval, value)
    return value, low, high


def _summaries(
    prefix: str,
    suffix: tuple[str, ...],
    cols: list[tuple[tuple[str, ...], str]],
    per_image: list[np.ndarray],
    cfg: EvalConfig,
    mask_level: bool,
    clusters: np.ndarray | None,
) -> dict[str, MetricSummary]:
    """Summaries of every column over the images in ``per_image`` (each a ``(masks, k)`` array; ``clusters``: the
    images' cluster codes)."""
    seed = group_seed(cfg.bootstrap.seed, "/".join(suffix))
    k = len(cols)
    out = {}
    if mask_level:
        parts = [nan_sums(v, axis=0) for v in per_image]
        sums = np.array([total for total, _ in parts]).reshape(-1, k)
        counts = np.array([count for _, count in parts], dtype=float).reshape(-1, k)
        value, low, high = _ratio_ci(sums, counts, cfg, seed, clusters)
        n, n_valid = int(sum(len(v) for v in per_image)), counts.sum(axis=0)
    else:
        # an image whose targets are all NaN for a column: a mean over nothing, NaN, left out over images
        means = np.array([nan_mean(v, axis=0) for v in per_image]).reshape(-1, k)
        b = cfg.bootstrap
        ci = bootstrap_means(means, b.n_resamples, seed, b.confidence, clusters, b.interval)
        value, low, high, n, n_valid = ci.value, ci.low, ci.high, len(per_image), ci.n_valid
    for j, (tokens, _) in enumerate(cols):
        out[metric_key(prefix, *tokens, *suffix)] = MetricSummary(
            value=float(value[j]),
            ci95_low=float(low[j]),
            ci95_high=float(high[j]),
            n=n,
            n_valid=int(n_valid[j]),
        )
    return out


def _case_rows(r: CaseRecord, names: list[str], target: str | None = None) -> np.ndarray:
    """``(targets, columns)`` array of one case's values, targets in sorted order and columns in ``names`` order
    (NaN where a target lacks a column); ``target``: that target's row alone (none when the case lacks it)."""
    items = [m for t, m in sorted(r.metrics.items()) if target is None or t == target]
    vals = [[math.nan if m.get(c) is None else m[c] for c in names] for m in items]
    return np.array(vals, dtype=float).reshape(len(items), len(names))


def _level_summaries(
    usable: list[CaseRecord], cols: list[tuple[tuple[str, ...], str]], cfg: EvalConfig, level: bool, prefix: str
) -> dict[str, MetricSummary]:
    """Summaries at one level (``level``: mask level, else image level) over every case, then by modality and by
    region (each value in sorted order)."""
    names = [name for _, name in cols]
    rows = [_case_rows(r, names) for r in usable]
    out = _summaries(prefix, (), cols, rows, cfg, level, clusters_of(usable, cfg.bootstrap))
    for dim in ("modality", "region"):
        for value in sorted({r.groups[dim] for r in usable}):
            subset = [r for r in usable if r.groups[dim] == value]
            sub_rows = [_case_rows(r, names) for r in subset]
            out.update(
                _summaries(prefix, (f"by_{dim}", value), cols, sub_rows, cfg, level, clusters_of(subset, cfg.bootstrap))
            )
    return out


def _target_summaries(
    usable: list[CaseRecord], cols: list[tuple[tuple[str, ...], str]], cfg: EvalConfig
) -> dict[str, MetricSummary]:
    """Image-level summaries per target (sorted), each over the cases that have the target."""
    names = [name for _, name in cols]
    out: dict[str, MetricSummary] = {}
    for target in sorted({t for r in usable for t in r.metrics}):
        subset = [r for r in usable if target in r.metrics]
        sub_rows = [_case_rows(r, names, target) for r in subset]
        out.update(
            _summaries(NAME, ("by_target", target), cols, sub_rows, cfg, False, clusters_of(subset, cfg.bootstrap))
        )
    return out


def aggregate(records: list[CaseRecord], cfg: EvalConfig, prompt_types: tuple[str, ...]) -> dict[str, MetricSummary]:
    """Every IMIS aggregate key (see the module docstring)."""
    cols = metric_columns(cfg.imis, prompt_types)
    usable = [r for r in records if r.metrics]
    out: dict[str, MetricSummary] = {}
    for level, prefix in ((False, NAME), (True, metric_key(NAME, "mask_level"))):
        out.update(_level_summaries(usable, cols, cfg, level, prefix))
    out.update(_target_summaries(usable, cols, cfg))
    return out
