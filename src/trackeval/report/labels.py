"""The words a figure or a table shows for a metric, a breakdown dimension, a plot and a model version.

Metric labels are the unit's own declarations (:class:`trackeval.spec.MetricInfo`: ``Dice``, ``HD95 (mm)``,
``P@10 (lesion-group relevance)``), and dimension labels its ``dimension_labels``; the report names no metric
itself. A result of a unit that is not registered here (a plug-in not installed) gets the metric's last token
with spaces for underscores.
"""

from __future__ import annotations

from trackeval.registry import metric_info, units
from trackeval.results import BenchmarkResult, PlotSpec

#: the ``curve_k`` kind's own axis: a report concept, not a unit's dimension
_K = "k (top-k retrieved)"


def metric_label(unit: str, metric: str) -> str:
    """The declared label of ``metric`` (a path relative to ``unit``) with its unit of measurement:
    ``metric_label("umd", "hd95")`` -> ``HD95 (mm)``; an undeclared metric: its last token, ``_`` -> space."""
    info = metric_info(unit, metric)
    if info is None:
        return metric.rsplit("/", 1)[-1].replace("_", " ")
    return info.display(metric.split("/by_", 1)[0])


def dimension_label(unit: str, dimension: str) -> str:
    """The unit's declared label of a breakdown dimension (IMIS ``click`` -> ``clicks``); ``k`` -> ``k (top-k
    retrieved)``; others with spaces for underscores."""
    if dimension == "k":
        return _K
    spec = units().get(unit)
    declared = dict(spec.dimension_labels) if spec is not None else {}
    return declared.get(dimension, dimension.replace("_", " "))


def version_label(result: BenchmarkResult) -> str:
    """``name/version`` of the evaluated model (either part may be absent), or ``unnamed model``.

    A label starting with ``_`` gets a leading zero-width space: matplotlib silently drops legend entries whose
    label starts with an underscore (a model named ``_model`` would vanish from every legend).

    >>> version_label(BenchmarkResult.model_construct(model={"name": "_m", "version": "1"}))
    '\u200b_m/1'
    """
    label = "/".join(v for v in (result.model.get("name"), result.model.get("version")) if v) or "unnamed model"
    return "\u200b" + label if label.startswith("_") else label


def default_title(unit: str, plot: PlotSpec) -> str:
    """The title of a plot that declares none."""
    label, dim = metric_label(unit, plot.metric), dimension_label(unit, plot.dimension)
    return {
        "bar": f"{label} by {dim}",
        "line": f"{label} vs {dim}" + (f" per {dimension_label(unit, plot.series)}" if plot.series else ""),
        "roc": f"ROC per {dim}",
        "pr": f"Precision-recall per {dim}",
        "reliability": f"Reliability diagram per {dim}",
        "box": f"Per-case {label} by {dim}",
        "curve_k": f"{label} by {dim}",
    }[plot.kind]
