"""The data behind a unit's declared figures (:class:`trackeval.results.PlotSpec`): rows for DVC plots and
the report. ``bar``/``line``: one row per breakdown group with its CI; ``roc``: the pooled ROC curve."""

from __future__ import annotations

import numpy as np

from trackeval.results import BenchmarkResult, PlotSpec


def breakdown_rows(result: BenchmarkResult, head: str, dim: str) -> list[dict[str, object]]:
    """Rows ``{dim, value, ci95_low, ci95_high}`` of the single-level breakdown ``<head>/by_<dim>/<group>``."""
    prefix = f"{head}/by_{dim}/"
    rows = []
    for key, s in sorted(result.aggregates.items()):
        group = key[len(prefix) :]
        if key.startswith(prefix) and "/" not in group and s.value is not None:
            rows.append({dim: group, "value": s.value, "ci95_low": s.ci95_low, "ci95_high": s.ci95_high})
    return rows


def roc_rows(result: BenchmarkResult) -> list[dict[str, object]]:
    """Micro-averaged ROC over every (case, item) pair with a 0/1 ``label`` and a ``score``: rows
    ``{fpr, tpr, threshold}`` (thresholds capped at 1; empty when no record carries labels and scores)."""
    from sklearn.metrics import roc_curve

    pairs = [
        (m["label"], m["score"])
        for case in result.cases
        for m in case.metrics.values()
        if m.get("label") in (0.0, 1.0) and m.get("score") is not None
    ]
    if not pairs:
        return []
    y, s = np.array(pairs).T
    fpr, tpr, thr = roc_curve(y, s)
    return [{"fpr": f, "tpr": t, "threshold": min(float(h), 1.0)} for f, t, h in zip(fpr, tpr, thr, strict=True)]


def plot_rows(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    """The rows of one declared plot; ``line`` plots are sorted by their (numeric) group."""
    if plot.kind == "roc":
        return roc_rows(result)
    rows = breakdown_rows(result, f"{result.unit}/{plot.metric}", plot.dimension)
    if plot.kind == "line":
        numeric = all(str(r[plot.dimension]).isdigit() for r in rows)
        rows = [{**r, plot.dimension: int(str(r[plot.dimension]))} for r in rows] if numeric else rows
        rows.sort(key=lambda r: r[plot.dimension])  # type: ignore[arg-type, return-value]
    return rows
