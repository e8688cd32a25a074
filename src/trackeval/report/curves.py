"""ROC, precision-recall and reliability figures: one curve per item (thin) and the pooled curve (bold), per
version, with the 95%-sensitivity operating points on ROC and PR, and the human readers' operating points on ROC
(one marker shape per reader, named in the legend; coloured by item, or by version in an overlay).

The curves' points come from :mod:`trackeval.plotdata`: ROC and PR thinned there to at most
:data:`~trackeval.plotdata.MAX_POINTS` per curve (the operating points from every label/score pair). A legend
entry shows the item's reported value of the plot's metric (``<unit>/<metric>/by_<dim>/<item>`` in results.json:
the number every other view shows); an item without one, and the pooled curve (micro-averaged: not a reported
metric), show none. Nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from trackeval import plotdata
from trackeval.io.escape import escape_mathtext
from trackeval.report.labels import metric_label
from trackeval.results import BenchmarkResult, PlotSpec

#: one colour per version (A, B) in overlays and single-series plots
VERSION_COLOURS = ("#4c72b0", "#dd8452")


@dataclass(frozen=True)
class _Axes:
    """The columns and axis labels of one curve kind."""

    x: str
    y: str
    x_label: str
    y_label: str


_KINDS = {
    "roc": _Axes("fpr", "tpr", "false positive rate (1 − specificity)", "true positive rate (sensitivity)"),
    "pr": _Axes("recall", "precision", "recall (sensitivity)", "precision (PPV)"),
    "reliability": _Axes(
        "mean_predicted", "observed_frequency", "mean predicted probability", "observed frequency of positives"
    ),
}


def _rows(result: BenchmarkResult, plot: PlotSpec) -> list[dict[str, object]]:
    if plot.kind == "roc":
        return plotdata.roc_curve_rows(result, plot.dimension)
    if plot.kind == "pr":
        return plotdata.pr_rows(result, plot.dimension)
    return plotdata.reliability_rows(result, plot.dimension, metric=plot.metric)


def _reported(result: BenchmarkResult, plot: PlotSpec, item: str) -> str:
    """`` (<label> 0.812)`` with the item's reported value of the plot's metric, or "" when it has none."""
    if item == plotdata.POOLED:
        return ""
    s = result.aggregates.get(f"{result.unit}/{plot.metric}/by_{plot.dimension}/{item}")
    if s is None or s.value is None:
        return ""
    return f" ({metric_label(result.unit, plot.metric)} {s.value:.3f})"


def _draw_item(
    ax: Axes, plot: PlotSpec, run: tuple[int, str, BenchmarkResult], item: str, sub: list, style: dict
) -> Line2D:
    """One curve; returns its line. ``run``: (version index, legend label, result); ``style``: the item colours
    (one version), or empty (an overlay, coloured by version)."""
    i, label, result = run
    kind = _KINDS[plot.kind]
    x = [float(r[kind.x]) for r in sub]
    y = [float(r[kind.y]) for r in sub]
    pooled = item == plotdata.POOLED
    extra = {"marker": "o" if plot.kind == "reliability" else None}
    if plot.kind == "pr":
        extra["drawstyle"] = "steps-post"  # sklearn's PR display
    value = _reported(result, plot, item)
    if style:
        colour, width = ("#000000", 2.0) if pooled else (style[item], 1.0)
        name = ("pooled" if pooled else escape_mathtext(item)) + value
        return ax.plot(x, y, color=colour, linewidth=width, markersize=3, label=name, **extra)[0]
    width, alpha = (2.0, 1.0) if pooled else (0.8, 0.4)
    name = f"{label}: pooled" if pooled else f"_{label}: {item}{value}"
    return ax.plot(x, y, color=VERSION_COLOURS[i], linewidth=width, alpha=alpha, markersize=2, label=name, **extra)[0]


def _operating_points(ax: Axes, plot: PlotSpec, run: tuple[int, str, BenchmarkResult], style: dict) -> bool:
    """The 95%-sensitivity operating points of ROC/PR; whether any was drawn."""
    i, label, result = run
    if plot.kind not in ("roc", "pr"):
        return False
    points = plotdata.operating_point_rows(result, plot.dimension)
    xs, ys = ("fpr", "tpr") if plot.kind == "roc" else ("tpr", "precision")
    ok = [p for p in points if p[xs] is not None and p[ys] is not None]
    if not ok:
        return False
    face = [style[str(p[plot.dimension])] for p in ok] if style else VERSION_COLOURS[i]
    ax.scatter(
        [p[xs] for p in ok], [p[ys] for p in ok], s=22, c=face, edgecolors="#000000", linewidths=0.6, zorder=3,
        label=f"_{label}: operating points",
    )  # fmt: skip
    return True


#: one marker shape per human reader (cycled beyond ten readers)
READER_MARKERS = ("s", "^", "D", "v", "P", "X", "*", "<", ">", "h")


def _readers(ax: Axes, plot: PlotSpec, run: tuple[int, str, list], style: dict, markers: dict[str, str]) -> None:
    """The human readers' points of one version (``run``: version index, legend label, its rows of
    :func:`trackeval.plotdata.reader_point_rows`); ``markers``: each reader's marker shape."""
    i, label, points = run
    for reader, marker in markers.items():
        mine = [p for p in points if p["reader"] == reader]
        if not mine:
            continue
        face = [style.get(str(p[plot.dimension]), "#ffffff") for p in mine] if style else VERSION_COLOURS[i]
        ax.scatter(
            [p["fpr"] for p in mine], [p["tpr"] for p in mine], s=34, c=face, marker=marker, edgecolors="#000000",
            linewidths=0.8, zorder=4, label=f"_{label}: reader {reader}",
        )  # fmt: skip


def _reader_markers(plot: PlotSpec, runs: list[tuple[str, BenchmarkResult]]) -> tuple[list[list], dict[str, str]]:
    """Each version's reader points (ROC only) and one marker shape per reader over all versions."""
    points = [plotdata.reader_point_rows(result, plot.dimension) if plot.kind == "roc" else [] for _, result in runs]
    names = sorted({str(p["reader"]) for rows in points for p in rows})
    return points, {name: READER_MARKERS[k % len(READER_MARKERS)] for k, name in enumerate(names)}


def _reader_keys(markers: dict[str, str]) -> list[Line2D]:
    """One legend entry per reader (its marker, its name as written)."""
    return [
        Line2D([], [], linestyle="", marker=marker, markerfacecolor="#ffffff", markeredgecolor="#000000",
               label=f"reader {escape_mathtext(reader)}")
        for reader, marker in markers.items()
    ]  # fmt: skip


def _frame(ax: Axes, plot: PlotSpec, handles: list, marked: bool) -> None:
    """Operating-point key, the reference diagonal, limits and axis labels."""
    if marked:
        handles.append(
            Line2D([], [], linestyle="", marker="o", markerfacecolor="#ffffff", markeredgecolor="#000000",
                   label="operating point (95% sensitivity threshold)")
        )  # fmt: skip
    if plot.kind in ("roc", "reliability"):
        name = "chance" if plot.kind == "roc" else "perfect calibration"
        handles += ax.plot([0, 1], [0, 1], color="#888888", linewidth=0.7, linestyle="--", label=name)
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_aspect("equal")
    ax.set_xlabel(_KINDS[plot.kind].x_label)
    ax.set_ylabel(_KINDS[plot.kind].y_label)


def draw_curves(
    ax: Axes, plot: PlotSpec, runs: list[tuple[str, BenchmarkResult]], palette: Callable[[int], list[str]]
) -> list | None:
    """Draw the curves of ``runs`` (one version, or two overlaid); the legend handles, or None when there is
    nothing to draw. ``palette(n)``: n colours, one per item (used for a single version)."""
    per_run = [_rows(result, plot) for _, result in runs]
    if not any(per_run):
        return None
    items = sorted({str(r[plot.dimension]) for rows in per_run for r in rows} - {plotdata.POOLED})
    style = dict(zip(items, palette(len(items)), strict=True)) if len(runs) == 1 else {}
    handles: list = []
    marked = False
    reader_points, markers = _reader_markers(plot, runs)
    for i, ((label, result), rows) in enumerate(zip(runs, per_run, strict=True)):
        for item in [*items, plotdata.POOLED]:
            sub = [r for r in rows if r[plot.dimension] == item]
            if sub:
                line = _draw_item(ax, plot, (i, label, result), item, sub, style)
                if style or item == plotdata.POOLED:
                    handles.append(line)
        marked = _operating_points(ax, plot, (i, label, result), style) or marked
        _readers(ax, plot, (i, label, reader_points[i]), style, markers)
    handles += _reader_keys(markers)
    _frame(ax, plot, handles, marked)
    return handles
