"""The data behind a unit's declared figures (:class:`trackeval.results.PlotSpec`): tidy rows for DVC plots and
the report, one rows function per kind; :func:`plot_rows` dispatches on the kind.

=============  ==============================================================  =====================================
kind           rows                                                            source
=============  ==============================================================  =====================================
bar            ``{dim, value, ci95_low, ci95_high}``                           ``<metric>/by_<dim>/<group>``
line           the same, sorted by the (numeric) group; with ``series``:       aggregates, or the case records
               ``{series, dim, value, ci95_low, ci95_high, n_valid}``          (``case_metric`` template)
roc            ``{fpr, tpr, threshold}`` pooled (:func:`roc_rows`, the DVC      ``label``/``score`` of the records
               ``plot.csv``); per item: :func:`roc_curve_rows`
pr             ``{dim, recall, precision, threshold}`` per item + pooled        ``label``/``score`` of the records
reliability    ``{dim, bin, bin_low, bin_high, n, mean_predicted,               ``label``/``score`` of the records
               observed_frequency}`` per item + pooled (non-empty bins)
box            ``{dim, case_id, subject_id, value}``                           a per-case metric of the records
curve_k        ``{dim, k, value, ci95_low, ci95_high}``                        ``<metric at k>/by_<dim>/<group>``
=============  ==============================================================  =====================================

The records are read through the case table's column accessors (:class:`~trackeval.case_table.CaseTable`:
``sorted_items``, ``matrix``, ``field``), never record by record. ROC and PR curves are computed on every
label/score pair with numpy (one point per distinct score, the points of sklearn's curves) and thinned to at
most :data:`MAX_POINTS` per curve for drawing (:func:`thin_curve`); the operating points use the full data.

Human readers' operating points (:func:`reader_point_rows`, drawn on the ``roc`` figure) come from the
aggregates the unit recorded for them (names in :mod:`trackeval.metrics.readers`).

The pooled rows of ``roc``/``pr``/``reliability`` carry the group :data:`POOLED` (not a metric-key token, so it
never collides with an item).
"""

from __future__ import annotations

import heapq
import math
import re

import numpy as np

from trackeval.metrics.classification import calibration_bins
from trackeval.metrics.readers import READER_DIMENSION, READER_SENSITIVITY, READER_SPECIFICITY
from trackeval.registry import metric_info, units
from trackeval.results import BenchmarkResult, PlotSpec, config_value
from trackeval.stats.reduce import nan_mean

#: the group of the pooled (micro-averaged) rows of the label/score kinds
POOLED = "(pooled)"
#: reliability bins when the result's config has no ``ece_bins``
DEFAULT_BINS = 10
#: the most points a drawn ROC or PR curve keeps (:func:`thin_curve`)
MAX_POINTS = 1000
#: thinning stops adding points once none is farther than this off (axis units: a tenth of a pixel at 1,000)
TOLERANCE = 1e-4


def breakdown_rows(result: BenchmarkResult, head: str, dim: str) -> list[dict[str, object]]:
    """Rows ``{dim, value, ci95_low, ci95_high}`` of the single-level breakdown ``<head>/by_<dim>/<group>``."""
    prefix = f"{head}/by_{dim}/"
    rows = []
    for key, s in sorted(result.aggregates.items()):
        group = key[len(prefix) :]
        if key.startswith(prefix) and "/" not in group and s.value is not None:
            rows.append({dim: group, "value": s.value, "ci95_low": s.ci95_low, "ci95_high": s.ci95_high})
    return rows


def label_score_pairs(result: BenchmarkResult) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{item: (labels, scores)}`` over the cases whose record of the item has a 0/1 ``label`` and a ``score``
    (uncertain labels, ``null``, are left out); items sorted by name, cases in record order; an item without
    such a pair is absent."""
    cases = result.cases
    items = cases.sorted_items()
    labels, scores = cases.matrix("label", items), cases.matrix("score", items)
    ok = ((labels == 0.0) | (labels == 1.0)) & ~np.isnan(scores)
    return {item: (labels[ok[:, j], j], scores[ok[:, j], j]) for j, item in enumerate(items) if ok[:, j].any()}


def _pooled(pairs: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Labels and scores of every item, item after item (the curves do not depend on the order)."""
    return np.concatenate([y for y, _ in pairs.values()]), np.concatenate([s for _, s in pairs.values()])


def _counts(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fps, tps, thresholds)``: the false and true positives (float counts) of the rule ``score >= t`` at
    each distinct score ``t``, highest first (sklearn's ``confusion_matrix_at_thresholds``; ``y`` holds 0/1)."""
    order = np.argsort(s)[::-1]  # not stable: the counts at the end of a run of equal scores do not depend on it
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # the last sample of each run of equal scores
    tps = np.cumsum(y, dtype=np.float64)[last]
    return 1 + last - tps, tps, s[last]


def roc_points(
    y: np.ndarray, s: np.ndarray, drop_intermediate: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr, tpr, thresholds)`` of the full ROC curve of 0/1 labels ``y`` and scores ``s``: one point per
    distinct score plus the origin (threshold ``inf``), the values and bits of ``sklearn.metrics.roc_curve``
    with the same ``drop_intermediate`` (True drops the vertices in the middle of equal steps: the same
    polyline). ``y`` must hold both classes (otherwise a rate divides by zero)."""
    fps, tps, thr = _counts(y, s)
    if drop_intermediate and fps.size > 2:
        corner = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
        fps, tps, thr = fps[corner], tps[corner], thr[corner]
    fps, tps = np.r_[0.0, fps], np.r_[0.0, tps]
    return fps / fps[-1], tps / tps[-1], np.r_[np.inf, thr]


def pr_points(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(precision, recall, thresholds)`` of the full precision-recall curve, recall decreasing, ending at
    recall 0 / precision 1 (one threshold fewer than points): the values and bits of
    ``sklearn.metrics.precision_recall_curve``. ``y`` must hold a positive."""
    fps, tps, thr = _counts(y, s)
    precision, recall = tps / (tps + fps), tps / tps[-1]  # tps + fps >= 1: every threshold calls a sample
    return np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0], thr[::-1]


def _worst(x: np.ndarray, y: np.ndarray, a: int, b: int, step: bool) -> tuple[float, int, int, int]:
    """``(-error, a, b, split)`` of the span between kept points ``a < b - 1`` (a heap entry).

    The error is the largest vertical distance from a point strictly inside to what is drawn from ``a`` to
    ``b``: the chord (``step`` False; a vertical chord: the distance outside its y range) or the level ``y[a]``
    held until ``b`` (``step``: matplotlib's ``steps-post``). The split is the farthest point for the chord
    (Ramer-Douglas-Peucker) and, for a step, the first point at least half the error away (the farthest is
    often the last one of a trend, which would split one point off at a time)."""
    inside = y[a + 1 : b]
    if step:
        err = np.abs(inside - y[a])
    elif x[b] == x[a]:
        err = np.maximum(np.maximum(inside - max(y[a], y[b]), min(y[a], y[b]) - inside), 0.0)
    else:
        err = np.abs(inside - (y[a] + (x[a + 1 : b] - x[a]) * ((y[b] - y[a]) / (x[b] - x[a]))))
    worst = float(err.max())
    j = int(np.argmax(err >= worst / 2)) if step else int(np.argmax(err))
    return -worst, a, b, a + 1 + j


def thin_curve(
    x: np.ndarray, y: np.ndarray, step: bool = False, max_points: int = MAX_POINTS, tolerance: float = TOLERANCE
) -> np.ndarray:
    """Indices (increasing) of the points of the curve ``(x, y)`` (``x`` monotone) to draw: all of them when there
    are at most ``max_points``; otherwise the first, the last and, split after split, the point of the span whose
    drawing is farthest off (:func:`_worst`; ``step``: drawn as ``steps-post``), until ``max_points`` are kept
    or no point is more than ``tolerance`` (in y units) off. At 10^5 label/score pairs and 1,000 points the drawn
    ROC stays within 2e-3 of the full one vertically (its trapezoid AUC within 1e-3 of sklearn's) and the PR
    steps within 2e-3: under a pixel of the report's figures (``tests/test_plot_thinning.py``). Cost: one numpy
    pass over a span per split, ~30 ms for a curve of 10^6 points."""
    n = len(x)
    if n <= max_points:
        return np.arange(n)
    keep = [0, n - 1]
    spans = [_worst(x, y, 0, n - 1, step)]
    while spans and len(keep) < max_points:
        neg_error, a, b, j = heapq.heappop(spans)
        if -neg_error <= tolerance:
            break
        keep.append(j)
        for lo, hi in ((a, j), (j, b)):
            if hi - lo > 1:
                heapq.heappush(spans, _worst(x, y, lo, hi, step))
    return np.sort(np.array(keep))


def _both_classes(y: np.ndarray) -> bool:
    return bool(y.size) and 0 < y.sum() < y.size


def _roc_drawn(y: np.ndarray, s: np.ndarray) -> tuple[list[float], list[float], list[float]]:
    """The drawn ROC curve: :func:`roc_points` without intermediate vertices, thinned by :func:`thin_curve`, as
    ``(fpr, tpr, threshold)`` lists (thresholds capped at 1)."""
    fpr, tpr, thr = roc_points(y, s, drop_intermediate=True)
    keep = thin_curve(fpr, tpr)
    return fpr[keep].tolist(), tpr[keep].tolist(), np.minimum(thr[keep], 1.0).tolist()


def roc_rows(result: BenchmarkResult) -> list[dict[str, object]]:
    """Micro-averaged ROC over every (case, item) pair with a 0/1 ``label`` and a ``score``: rows
    ``{fpr, tpr, threshold}`` (the pooled curve of :func:`roc_curve_rows`: thinned to at most
    :data:`MAX_POINTS`, thresholds capped at 1); empty when no record carries labels and scores of both
    classes. This is a ``roc`` plot's ``plot.csv``."""
    pairs = label_score_pairs(result)
    y, s = _pooled(pairs) if pairs else (np.zeros(0), np.zeros(0))
    if not _both_classes(y):
        return []
    return [{"fpr": f, "tpr": t, "threshold": h} for f, t, h in zip(*_roc_drawn(y, s), strict=True)]


def roc_curve_rows(result: BenchmarkResult, dim: str = "finding") -> list[dict[str, object]]:
    """ROC per item, then pooled (group :data:`POOLED`): rows ``{dim, fpr, tpr, threshold}``, the points of
    ``sklearn.metrics.roc_curve`` (thresholds capped at 1) thinned to at most :data:`MAX_POINTS` per curve
    (:func:`thin_curve`: a curve with fewer is whole); an item without both classes has no curve."""
    pairs = label_score_pairs(result)
    if not pairs:
        return []
    rows: list[dict[str, object]] = []
    for item, (y, s) in [*pairs.items(), (POOLED, _pooled(pairs))]:
        if _both_classes(y):
            rows += [{dim: item, "fpr": f, "tpr": t, "threshold": h} for f, t, h in zip(*_roc_drawn(y, s), strict=True)]
    return rows


def pr_rows(result: BenchmarkResult, dim: str = "finding") -> list[dict[str, object]]:
    """Precision-recall per item, then pooled: rows ``{dim, recall, precision, threshold}`` in the order of
    ``sklearn.metrics.precision_recall_curve`` (the last point, recall 0 and precision 1, has no threshold:
    ``None``), thinned to at most :data:`MAX_POINTS` per curve for a ``steps-post`` drawing
    (:func:`thin_curve`: a curve with fewer is whole; the pooled rows in ``plots/`` are these); an item without
    a positive has no curve."""
    pairs = label_score_pairs(result)
    if not pairs:
        return []
    rows: list[dict[str, object]] = []
    for item, (y, s) in [*pairs.items(), (POOLED, _pooled(pairs))]:
        if not y.sum():
            continue
        precision, recall, thr = pr_points(y, s)
        keep = thin_curve(recall, precision, step=True)
        thresholds = [*thr[keep[:-1]].tolist(), None]  # the last point (kept) has none
        rows += [
            {dim: item, "recall": r, "precision": p, "threshold": h}
            for r, p, h in zip(recall[keep].tolist(), precision[keep].tolist(), thresholds, strict=True)
        ]
    return rows


def operating_point_rows(result: BenchmarkResult, dim: str = "finding") -> list[dict[str, object]]:
    """The operating point of each item whose ``<unit>/<threshold>/by_<dim>/<item>`` aggregate holds a threshold
    (``<threshold>``: the unit's metric declared with ``operating_point=True``, X-ray's ``threshold_at_sens95``):
    rows ``{dim, threshold, fpr, tpr, precision}`` of the rule ``score >= threshold`` on the records (precision
    None when nothing is called); none for a unit that declares no threshold or is not registered here."""
    spec = units().get(result.unit)
    names = [m.name for m in spec.metrics if m.operating_point] if spec is not None else []
    if not names:
        return []
    pairs = label_score_pairs(result)
    rows: list[dict[str, object]] = []
    for item, (y, s) in pairs.items():
        agg = result.aggregates.get(f"{result.unit}/{names[0]}/by_{dim}/{item}")
        if agg is None or agg.value is None or not _both_classes(y):
            continue
        called = s >= agg.value
        pos = y == 1
        rows.append(
            {
                dim: item,
                "threshold": agg.value,
                "fpr": float(called[~pos].mean()),
                "tpr": float(called[pos].mean()),
                "precision": float(y[called].mean()) if called.any() else None,
            }
        )
    return rows


def _reader_pattern(result: BenchmarkResult, metric: str, dim: str) -> re.Pattern[str]:
    return re.compile(
        rf"^{re.escape(result.unit)}/{re.escape(metric)}/by_{READER_DIMENSION}/(?P<r>[a-z0-9_]+)"
        rf"/by_{re.escape(dim)}/(?P<item>[a-z0-9_]+)$"
    )


def reader_point_rows(result: BenchmarkResult, dim: str = "finding") -> list[dict[str, object]]:
    """Each human reader's operating point per item, as the result records it: rows ``{reader, dim, fpr, tpr,
    fpr_low, fpr_high, tpr_low, tpr_high}`` (sorted by reader, then item) from the aggregates
    ``<unit>/<reader sensitivity>/by_reader/<r>/by_<dim>/<item>`` and the specificity alike (names:
    :mod:`trackeval.metrics.readers`); ``fpr`` is ``1 - specificity`` (its bounds the specificity's, flipped;
    None without a CI). Only points with both values; none for a result without readers."""
    spec = {
        (m["r"], m["item"]): s
        for key, s in result.aggregates.items()
        if (m := _reader_pattern(result, READER_SPECIFICITY, dim).match(key)) and s.value is not None
    }
    rows: list[dict[str, object]] = []
    for key, sens in sorted(result.aggregates.items()):
        m = _reader_pattern(result, READER_SENSITIVITY, dim).match(key)
        sp = spec.get((m["r"], m["item"])) if m else None
        if m is None or sp is None or sens.value is None or sp.value is None:
            continue
        rows.append(
            {
                READER_DIMENSION: m["r"],
                dim: m["item"],
                "fpr": 1.0 - sp.value,
                "tpr": sens.value,
                "fpr_low": None if sp.ci95_high is None else 1.0 - sp.ci95_high,
                "fpr_high": None if sp.ci95_low is None else 1.0 - sp.ci95_low,
                "tpr_low": sens.ci95_low,
                "tpr_high": sens.ci95_high,
            }
        )
    return rows


def reader_metric_rows(result: BenchmarkResult, dim: str = "finding") -> tuple[list[str], list[dict[str, object]]]:
    """The metrics the result records per human reader and item (``<unit>/<metric>/by_reader/<r>/by_<dim>/
    <item>``: sensitivity, specificity, the model's sensitivity at the reader's specificity...) and one row per
    reader and item ``{reader, dim, <metric>: MetricSummary or None}``, sorted by reader then item; ``([], [])``
    for a result without readers."""
    pattern = re.compile(
        rf"^{re.escape(result.unit)}/(?P<metric>[a-z0-9_/]+?)/by_{READER_DIMENSION}/(?P<r>[a-z0-9_]+)"
        rf"/by_{re.escape(dim)}/(?P<item>[a-z0-9_]+)$"
    )
    cells: dict[tuple[str, str], dict[str, object]] = {}
    metrics: list[str] = []
    for key, s in sorted(result.aggregates.items()):
        if (m := pattern.match(key)) is None:
            continue
        if m["metric"] not in metrics:
            metrics.append(m["metric"])
        cells.setdefault((m["r"], m["item"]), {READER_DIMENSION: m["r"], dim: m["item"]})[m["metric"]] = s
    rows = [{**{name: None for name in metrics}, **cells[k]} for k in sorted(cells)]
    return metrics, rows


def reliability_bins(result: BenchmarkResult, metric: str) -> int:
    """The number of equal-width bins of the calibration metric ``metric`` (relative to the unit): the config
    value its :class:`~trackeval.spec.MetricInfo` names in ``bins`` (``xray.cls.ece_bins``), else
    :data:`DEFAULT_BINS` (an undeclared metric, or a config without that value)."""
    info = metric_info(result.unit, metric)
    if info is None or info.bins is None:
        return DEFAULT_BINS
    bins = config_value(result.config, info.bins)
    return bins if isinstance(bins, int) and not isinstance(bins, bool) else DEFAULT_BINS


def reliability_rows(
    result: BenchmarkResult, dim: str = "finding", n_bins: int | None = None, metric: str = ""
) -> list[dict[str, object]]:
    """Calibration per item, then pooled: one row per non-empty bin ``{dim, bin, bin_low, bin_high, n,
    mean_predicted, observed_frequency}``. Bins are ``n_bins`` (default: :func:`reliability_bins` of
    ``metric``) equal-width intervals ``(lo, hi]`` of the score, the first closed: the binning of
    :func:`trackeval.metrics.classification.calibration_bins`, so ``sum n/N * |observed - predicted|`` over an
    item's rows is its ECE."""
    n_bins = n_bins or reliability_bins(result, metric)
    pairs = label_score_pairs(result)
    if not pairs:
        return []
    rows: list[dict[str, object]] = []
    for item, (y, s) in [*pairs.items(), (POOLED, _pooled(pairs))]:
        count, pred, obs = calibration_bins(y, s, n_bins)
        for b in np.flatnonzero(count):
            rows.append(
                {
                    dim: item,
                    "bin": int(b),
                    "bin_low": b / n_bins,
                    "bin_high": (b + 1) / n_bins,
                    "n": int(count[b]),
                    "mean_predicted": float(pred[b] / count[b]),
                    "observed_frequency": float(obs[b] / count[b]),
                }
            )
    return rows


def box_rows(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """Per-case values of ``plot.case_metric`` (default ``plot.metric``): rows ``{dim, case_id, subject_id,
    value}``. Per item (sorted; cases in record order) when ``plot.dimension`` is the result's ``item_kind``;
    otherwise per value of the case group ``plot.dimension`` (cases sorted by it, stably), a case's value being
    its mean over items. Null values, and cases without the group or any value, are left out."""
    dim, cases = plot.dimension, result.cases
    items = cases.sorted_items()
    values = cases.matrix(plot.case_metric or plot.metric, items)
    ids, subjects = cases.field("case_id"), cases.field("subject_id")
    if dim == result.item_kind:
        at = np.nonzero(~np.isnan(values.T))  # item by item, cases in order
        return [
            {dim: items[j], "case_id": ids[i], "subject_id": subjects[i], "value": v}
            for j, i, v in zip(at[0].tolist(), at[1].tolist(), values.T[at].tolist(), strict=True)
        ]
    groups, means = cases.field(dim), nan_mean(values, axis=1)
    shown = [i for i in np.flatnonzero(~np.isnan(means)).tolist() if groups[i] is not None]
    return [
        {dim: groups[i], "case_id": ids[i], "subject_id": subjects[i], "value": means[i].item()}
        for i in sorted(shown, key=lambda i: groups[i])  # type: ignore[arg-type, return-value]
    ]


def _k_pattern(metric: str) -> str:
    if not metric.endswith("_k"):
        raise ValueError(f"a curve_k plot's metric must end in '_k' (e.g. 'p_at_k'), got {metric!r}")
    return re.escape(metric[:-1]) + r"(?P<k>\d+)"


def curve_k_rows(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """``<unit>/<metric with k>/by_<dim>/<group>`` for every k found: rows ``{dim, k, value, ci95_low,
    ci95_high}`` sorted by group, then k."""
    pattern = re.compile(
        rf"^{re.escape(result.unit)}/{_k_pattern(plot.metric)}/by_{re.escape(plot.dimension)}/(?P<g>[a-z0-9_]+)$"
    )
    rows: list[dict[str, object]] = []
    for key, s in result.aggregates.items():
        m = pattern.match(key)
        if m and s.value is not None:
            rows.append(
                {
                    plot.dimension: m["g"],
                    "k": int(m["k"]),
                    "value": s.value,
                    "ci95_low": s.ci95_low,
                    "ci95_high": s.ci95_high,
                }
            )
    rows.sort(key=lambda r: (r[plot.dimension], r["k"]))  # type: ignore[arg-type, return-value]
    return rows


def curve_k_headline(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """The headline ``<unit>/<metric with k>`` for every k: rows ``{k, value, ci95_low, ci95_high}`` by k."""
    pattern = re.compile(rf"^{re.escape(result.unit)}/{_k_pattern(plot.metric)}$")
    rows = [
        {"k": int(m["k"]), "value": s.value, "ci95_low": s.ci95_low, "ci95_high": s.ci95_high}
        for key, s in result.aggregates.items()
        if (m := pattern.match(key)) and s.value is not None
    ]
    return sorted(rows, key=lambda r: r["k"])  # type: ignore[arg-type, return-value]


def _as_number(group: str) -> int | str:
    return int(group) if group.isdigit() else group


def _sorted_line(rows: list[dict[str, object]], dim: str) -> list[dict[str, object]]:
    numeric = all(str(r[dim]).isdigit() for r in rows)
    rows = [{**r, dim: int(str(r[dim]))} for r in rows] if numeric else rows
    rows.sort(key=lambda r: r[dim])  # type: ignore[arg-type, return-value]
    return rows


def _series_from_aggregates(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    pattern = re.compile(
        rf"^{re.escape(result.unit)}/{re.escape(plot.metric)}/by_{re.escape(plot.series)}/(?P<s>[a-z0-9_]+)"
        rf"/by_{re.escape(plot.dimension)}/(?P<x>[a-z0-9_]+)$"
    )
    return [
        {
            plot.series: m["s"],
            plot.dimension: _as_number(m["x"]),
            "value": s.value,
            "ci95_low": s.ci95_low,
            "ci95_high": s.ci95_high,
            "n_valid": s.n_valid,
        }
        for key, s in result.aggregates.items()
        if (m := pattern.match(key)) and s.value is not None
    ]


def _metric_names(result: BenchmarkResult) -> set[str]:
    """Every per-item metric name of the records (the case table's metric columns)."""
    return set(result.cases.metric_names())


def _record_columns(result: BenchmarkResult, plot: PlotSpec) -> dict[tuple[str, str], str]:
    """``{(series value, x value): per-case metric name}`` of the records' metrics that match
    ``plot.case_metric`` (``dice_{prompt}_{click}``)."""
    series, dim = plot.series, plot.dimension
    if f"{{{series}}}" not in plot.case_metric or f"{{{dim}}}" not in plot.case_metric:
        raise ValueError(f"case_metric {plot.case_metric!r} must hold the placeholders {{{series}}} and {{{dim}}}")
    parts = re.split(r"(\{[a-z0-9_]+\})", plot.case_metric)
    regex = "".join(
        f"(?P<{p[1:-1]}>[a-z0-9]+)" if p in (f"{{{series}}}", f"{{{dim}}}") else re.escape(p) for p in parts
    )
    pattern = re.compile(f"^{regex}$")
    return {(hit[series], hit[dim]): name for name in _metric_names(result) if (hit := pattern.match(name)) is not None}


def _series_from_records(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """Series rows from the case records, when the result has no nested aggregates: the mean over cases of each
    case's item mean, with the result's own bootstrap (its clusters, resamples, seed and interval), over the
    cases with a value of at least one of the series' metrics."""
    from trackeval.stats.bootstrap import bootstrap_means, cluster_codes, group_seed

    columns = _record_columns(result, plot)
    if not columns:
        return []
    keys = sorted(columns, key=lambda sx: (sx[0], _as_number(sx[1]) if sx[1].isdigit() else 0, sx[1]))
    items = result.cases.sorted_items()
    # (n_cases, len(keys)): each case's mean over its items of each series metric (NaN: none valid)
    means = np.stack([nan_mean(result.cases.matrix(columns[k], items), axis=1) for k in keys], axis=1)
    shown = ~np.isnan(means).all(axis=1)
    if not shown.any():
        return []
    boot = result.config.get("bootstrap", {})
    cluster, interval = result.resampling
    subjects = result.cases.field("subject_id")
    ci = bootstrap_means(
        means[shown],
        int(boot.get("n_resamples", 1000)),
        group_seed(int(boot.get("seed", 0)), ""),
        float(boot.get("confidence", 0.95)),
        cluster_codes([subjects[i] for i in np.flatnonzero(shown)]) if cluster == "subject_id" else None,
        interval,
    )
    return [
        {
            plot.series: s,
            plot.dimension: _as_number(x),
            "value": float(ci.value[j]),
            "ci95_low": None if math.isnan(ci.low[j]) else float(ci.low[j]),
            "ci95_high": None if math.isnan(ci.high[j]) else float(ci.high[j]),
            "n_valid": int(ci.n_valid[j]),
        }
        for j, (s, x) in enumerate(keys)
        if not math.isnan(ci.value[j])
    ]


def series_rows(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """A ``line`` plot with ``series``: rows ``{series, dim, value, ci95_low, ci95_high, n_valid}`` sorted by
    series, then dimension; from the nested aggregates when they exist, else from the records through
    ``case_metric`` (see :class:`~trackeval.results.PlotSpec`)."""
    rows = _series_from_aggregates(result, plot)
    if not rows and plot.case_metric:
        rows = _series_from_records(result, plot)
    rows.sort(key=lambda r: (r[plot.series], r[plot.dimension]))  # type: ignore[arg-type, return-value]
    return rows


def line_rows(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """A ``line`` plot: :func:`breakdown_rows` sorted by the (numeric) group, or :func:`series_rows`."""
    if plot.series:
        return series_rows(result, plot)
    return _sorted_line(breakdown_rows(result, f"{result.unit}/{plot.metric}", plot.dimension), plot.dimension)


def plot_rows(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """The rows of one declared plot (what the DVC pipeline writes as ``plot.csv``), by kind: see the module
    docstring. ``roc`` gives the pooled curve (:func:`roc_rows`); ``line`` plots are sorted by their group."""
    if plot.kind == "roc":
        return roc_rows(result)
    if plot.kind == "pr":
        return pr_rows(result, plot.dimension)
    if plot.kind == "reliability":
        return reliability_rows(result, plot.dimension, metric=plot.metric)
    if plot.kind == "box":
        return box_rows(result, plot)
    if plot.kind == "curve_k":
        return curve_k_rows(result, plot)
    if plot.kind == "line":
        return line_rows(result, plot)
    return breakdown_rows(result, f"{result.unit}/{plot.metric}", plot.dimension)
