"""Matplotlib figures of a result: the unit's declared plots first, then one bar chart per other breakdown.

Declared plots (:class:`trackeval.results.PlotSpec`) are drawn by kind: ``bar`` (95% CI whiskers), ``line``
(CI band; one line per ``series`` value), ``roc`` / ``pr`` (one curve per item plus the pooled curve, the
95%-sensitivity operating point marked), ``reliability`` (calibration per item plus pooled, with the diagonal),
``box`` (per-case distribution with the cases as points) and ``curve_k`` (a metric over k, one line per group,
the macro mean dashed). Every other aggregate key ``K`` with single-level breakdown children
``K/by_<dimension>/<value>`` gets a bar chart too (the paired modality gap per organ
``umd/dsc_gap/ct_vs_pet/by_organ``...). Axis labels name the metric and its unit (``Dice``, ``HD95 (mm)``,
``AUROC``); titles and legends name the model version. Names that are data (model versions, group values in
legends and tick labels) go through :func:`trackeval.io.escape.escape_mathtext`: a ``$`` in a model name is shown,
never read as mathtext.

:func:`overlay_figures` draws the declared plots of two versions of one unit on the same axes (the legend
names each version) for the comparison report. The rows come from :mod:`trackeval.report.plots`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from trackeval import plotdata as rows_of  # noqa: E402
from trackeval.io.escape import escape_mathtext  # noqa: E402
from trackeval.report.curves import VERSION_COLOURS, draw_curves  # noqa: E402
from trackeval.report.labels import default_title, dimension_label, metric_label, version_label  # noqa: E402
from trackeval.results import BenchmarkResult, MetricSummary, PlotSpec  # noqa: E402

_CHILD = re.compile(r"^(?P<parent>.+)/by_(?P<dim>[a-z0-9_]+)/(?P<value>[a-z0-9_]+)$")

#: one line style per version in overlays of multi-line plots
VERSION_STYLES = ("-", "--")
DPI = 100


def breakdowns(result: BenchmarkResult) -> dict[tuple[str, str], dict[str, MetricSummary]]:
    """``{(parent key, dimension): {value: summary}}`` over single-level breakdown keys with a value."""
    out: dict[tuple[str, str], dict[str, MetricSummary]] = {}
    for key, s in sorted(result.aggregates.items()):
        m = _CHILD.match(key)
        if m and "/by_" not in m["parent"] and s.value is not None:
            out.setdefault((m["parent"], m["dim"]), {})[m["value"]] = s
    return out


def figure_name(unit: str, plot: PlotSpec) -> str:
    """The PNG's stem: ``umd__dsc__by_organ`` (bar, line), ``xray__cls__roc`` (roc, pr, reliability),
    ``umd__dsc__by_organ__box``, ``imis__dice__by_click__per_prompt``, ``mir3d__group__p_at_k__by_region``."""
    u = unit.replace("/", "__")
    if plot.kind in ("roc", "pr", "reliability"):
        return f"{u}__{plot.kind}"
    name = f"{u}__{plot.metric.replace('/', '__')}__by_{plot.dimension}"
    if plot.kind == "box":
        return name + "__box"
    if plot.kind == "line" and plot.series:
        return f"{name}__per_{plot.series}"
    return name


# ----------------------------------------------------------------------------------------------- drawers
# A drawer draws one plot of one or two versions (``runs``: ``[(legend label, result)]``) on ``ax`` and returns
# whether it drew anything.

Runs = list[tuple[str, BenchmarkResult]]


def _colours(n: int) -> list[str]:
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [matplotlib.colors.to_hex(cmap(i % cmap.N)) for i in range(n)]


def _legend(ax: Axes, title: str | None = None, outside: bool = False, handles: list | None = None) -> None:
    kw: dict = {"fontsize": 7, "title": title, "title_fontsize": 7}
    if handles is not None:
        kw["handles"] = handles
    if outside:
        kw |= {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0}
    ax.legend(**kw)


def _ticks(ax: Axes, labels: list[str]) -> None:
    """Category labels under 0..n-1, slanted when there are more than three."""
    slanted = len(labels) > 3
    ax.set_xticks(range(len(labels)), labels, rotation=45 if slanted else 0, ha="right" if slanted else "center")
    ax.tick_params(axis="x", labelsize=7)


def _num(x: object) -> float:
    return float(x)  # type: ignore[arg-type]


def _ci(rows: list[dict[str, object]]) -> tuple[list[float], list[float], list[float]]:
    """Estimates and CI bounds of rows ``{value, ci95_low, ci95_high}`` (a missing bound: the estimate)."""
    est = [_num(r["value"]) for r in rows]
    lo = [e if r["ci95_low"] is None else _num(r["ci95_low"]) for r, e in zip(rows, est, strict=True)]
    hi = [e if r["ci95_high"] is None else _num(r["ci95_high"]) for r, e in zip(rows, est, strict=True)]
    return est, lo, hi


def _whiskers(est: list[float], lo: list[float], hi: list[float]) -> list[list[float]]:
    """Error-bar lengths below and above each estimate, clipped at 0 (a result written by an older trackeval
    may hold a bound rounded past its estimate)."""
    return [
        [max(0.0, e - lo_) for e, lo_ in zip(est, lo, strict=True)],
        [max(0.0, h - e) for e, h in zip(est, hi, strict=True)],
    ]


def _group_ticks(groups: list[str], counts: dict[str, int | None] | None) -> list[str]:
    """Tick labels of groups (data: escaped for mathtext), with ``(n=...)`` under each when ``counts`` is given
    (one version)."""
    if counts is None:
        return [escape_mathtext(g) for g in groups]
    return [f"{escape_mathtext(g)}\n(n={counts[g]})" for g in groups]


def _draw_bar(ax: Axes, plot: PlotSpec, runs: Runs) -> bool:
    head = [f"{r.unit}/{plot.metric}" for _, r in runs]
    per_run = [
        {str(row[plot.dimension]): row for row in rows_of.breakdown_rows(r, h, plot.dimension)}
        for (_, r), h in zip(runs, head, strict=True)
    ]
    names = sorted({n for rows in per_run for n in rows})
    if not names:
        return False
    width = 0.8 / len(runs)
    for i, ((label, _), rows) in enumerate(zip(runs, per_run, strict=True)):
        xs = [j + (i - (len(runs) - 1) / 2) * width for j, n in enumerate(names) if n in rows]
        est, lo, hi = _ci([rows[n] for n in names if n in rows])
        ax.bar(
            xs, est, width=width * 0.95, yerr=_whiskers(est, lo, hi), capsize=2, color=VERSION_COLOURS[i],
            ecolor="#222222", label=label,
        )  # fmt: skip
    counts = None
    if len(runs) == 1:
        counts = {n: runs[0][1].aggregates[f"{head[0]}/by_{plot.dimension}/{n}"].n_valid for n in names}
    _ticks(ax, _group_ticks(names, counts))
    ax.axhline(0.0, color="#888888", linewidth=0.6)
    ax.set_xlabel(dimension_label(runs[0][1].unit, plot.dimension))
    ax.set_ylabel(f"{metric_label(runs[0][1].unit, plot.metric)}, 95% CI")
    _legend(ax)
    return True


def _draw_line(ax: Axes, plot: PlotSpec, runs: Runs) -> bool:
    if plot.series:
        return _draw_series(ax, plot, runs)
    drawn = False
    for i, (label, result) in enumerate(runs):
        rows = rows_of.line_rows(result, plot)
        if not rows:
            continue
        x = [r[plot.dimension] for r in rows]
        est, lo, hi = _ci(rows)
        ax.plot(x, est, marker="o", color=VERSION_COLOURS[i], label=label)
        ax.fill_between(x, lo, hi, color=VERSION_COLOURS[i], alpha=0.2, linewidth=0)  # type: ignore[arg-type]
        drawn = True
    if drawn:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(dimension_label(runs[0][1].unit, plot.dimension))
        ax.set_ylabel(f"{metric_label(runs[0][1].unit, plot.metric)}, mean and 95% CI")
        _legend(ax)
    return drawn


def _draw_series(ax: Axes, plot: PlotSpec, runs: Runs) -> bool:
    per_run = [rows_of.series_rows(result, plot) for _, result in runs]
    series = sorted({str(r[plot.series]) for rows in per_run for r in rows})
    if not series:
        return False
    colour = dict(zip(series, _colours(len(series)), strict=True))
    for i, ((label, _), rows) in enumerate(zip(runs, per_run, strict=True)):
        for s in series:
            sub = [r for r in rows if str(r[plot.series]) == s]
            if not sub:
                continue
            x = [r[plot.dimension] for r in sub]
            est, lo, hi = _ci(sub)
            name = escape_mathtext(s) if len(runs) == 1 else f"{escape_mathtext(s)} · {label}"
            ax.plot(x, est, marker="o", markersize=3, color=colour[s], linestyle=VERSION_STYLES[i], label=name)
            ax.fill_between(x, lo, hi, color=colour[s], alpha=0.15, linewidth=0)  # type: ignore[arg-type]
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(dimension_label(runs[0][1].unit, plot.dimension))
    ax.set_ylabel(f"{metric_label(runs[0][1].unit, plot.metric)}, mean and 95% CI")
    _legend(ax, title=dimension_label(runs[0][1].unit, plot.series) + (f" ({runs[0][0]})" if len(runs) == 1 else ""))
    return True


def _draw_curves(ax: Axes, plot: PlotSpec, runs: Runs) -> bool:
    handles = draw_curves(ax, plot, runs, _colours)
    if handles is None:
        return False
    _legend(ax, title=runs[0][0] if len(runs) == 1 else "version", outside=True, handles=handles)
    return True


def _box_version(
    ax: Axes, data: dict[str, list[float]], at: list[tuple[float, str]], style: tuple[int, str, float], rng
) -> None:
    """One version's boxes and jittered points: ``at`` holds ``(x position, group)``, ``style`` ``(version
    index, legend label, group width)``."""
    i, label, width = style
    ax.boxplot(
        [data[g] for _, g in at], positions=[p for p, _ in at], widths=width * 0.85, showfliers=False,
        patch_artist=True, boxprops={"facecolor": VERSION_COLOURS[i], "alpha": 0.35},
        medianprops={"color": VERSION_COLOURS[i]}, manage_ticks=False,
    )  # fmt: skip
    for p, g in at:
        jitter = rng.uniform(-width * 0.3, width * 0.3, len(data[g]))
        ax.scatter(p + jitter, data[g], s=7, color=VERSION_COLOURS[i], alpha=0.8, zorder=3, label=f"_{label}")


def _draw_box(ax: Axes, plot: PlotSpec, runs: Runs) -> bool:
    dim = plot.dimension
    per_run = [rows_of.box_rows(result, plot) for _, result in runs]
    groups = sorted({str(r[dim]) for rows in per_run for r in rows})
    if not groups:
        return False
    rng = np.random.default_rng(0)  # jitter of the points: fixed, so a figure is reproducible
    width = 0.7 / len(runs)
    handles = []
    for i, ((label, _), rows) in enumerate(zip(runs, per_run, strict=True)):
        data = {g: [float(r["value"]) for r in rows if r[dim] == g] for g in groups}  # type: ignore[arg-type]
        offset = (i - (len(runs) - 1) / 2) * width
        _box_version(ax, data, [(groups.index(g) + offset, g) for g in groups if data[g]], (i, label, width), rng)
        handles.append(Patch(facecolor=VERSION_COLOURS[i], alpha=0.6, label=label))
    counts = {g: sum(r[dim] == g for r in per_run[0]) for g in groups} if len(runs) == 1 else None
    _ticks(ax, _group_ticks(groups, counts))  # case-group values of a manifest: data
    ax.set_xlabel(dimension_label(runs[0][1].unit, dim))
    ax.set_ylabel(f"{metric_label(runs[0][1].unit, plot.case_metric or plot.metric)} per case")
    _legend(ax, handles=handles)
    return True


def _group_lines(
    ax: Axes, groups: list[tuple[str, list[dict[str, object]]]], colour: dict[str, str], style: tuple[int, str]
) -> set[int]:
    """One line with a CI band per group of ``(group, rows over k)``; ``style``: (version index, legend suffix).
    Returns the k values drawn."""
    i, suffix = style
    ks: set[int] = set()
    for g, sub in groups:
        if not sub:
            continue
        x = [int(r["k"]) for r in sub]  # type: ignore[call-overload]
        ks |= set(x)
        est, lo, hi = _ci(sub)
        name = escape_mathtext(g) + suffix
        ax.plot(x, est, marker="o", markersize=3, color=colour[g], linestyle=VERSION_STYLES[i], label=name)
        ax.fill_between(x, lo, hi, color=colour[g], alpha=0.12, linewidth=0)
    return ks


def _draw_curve_k(ax: Axes, plot: PlotSpec, runs: Runs) -> bool:
    dim = plot.dimension
    per_run = [rows_of.curve_k_rows(result, plot) for _, result in runs]
    groups = sorted({str(r[dim]) for rows in per_run for r in rows})
    if not groups:
        return False
    colour = dict(zip(groups, _colours(len(groups)), strict=True))
    ks: set[int] = set()
    for i, ((label, result), rows) in enumerate(zip(runs, per_run, strict=True)):
        suffix = "" if len(runs) == 1 else f" · {label}"
        ks |= _group_lines(ax, [(g, [r for r in rows if r[dim] == g]) for g in groups], colour, (i, suffix))
        head = rows_of.curve_k_headline(result, plot)
        if head:
            ax.plot(
                [r["k"] for r in head], [r["value"] for r in head], color="#000000", linewidth=1.8,
                linestyle=VERSION_STYLES[i], label=f"macro mean{suffix}",
            )  # fmt: skip
    ax.set_xticks(sorted(ks))
    ax.set_xlabel(dimension_label(runs[0][1].unit, "k"))
    ax.set_ylabel(f"{metric_label(runs[0][1].unit, plot.metric)}, mean and 95% CI")
    _legend(
        ax, title=dimension_label(runs[0][1].unit, dim) + (f" ({runs[0][0]})" if len(runs) == 1 else ""), outside=True
    )
    return True


_DRAW: dict[str, Callable[[Axes, PlotSpec, Runs], bool]] = {
    "bar": _draw_bar,
    "line": _draw_line,
    "roc": _draw_curves,
    "pr": _draw_curves,
    "reliability": _draw_curves,
    "box": _draw_box,
    "curve_k": _draw_curve_k,
}


def _n_groups(plot: PlotSpec, runs: Runs) -> int:
    if plot.kind == "box":
        return len({str(r[plot.dimension]) for _, res in runs for r in rows_of.box_rows(res, plot)})
    return len(
        {
            str(r[plot.dimension])
            for _, res in runs
            for r in rows_of.breakdown_rows(res, f"{res.unit}/{plot.metric}", plot.dimension)
        }
    )


def _size(plot: PlotSpec, runs: Runs) -> tuple[float, float]:
    if plot.kind in ("roc", "pr", "reliability"):
        return (7.2, 4.4)
    if plot.kind == "curve_k" or plot.series:
        return (6.6, 4.0)
    if plot.kind in ("bar", "box"):
        return (min(12.0, max(4.5, (0.35 + 0.25 * len(runs)) * _n_groups(plot, runs) + 1.8)), 4.2)
    return (5.6, 4.0)


def plot_figure(plot: PlotSpec, runs: Runs, unit: str) -> Figure | None:
    """One declared plot of one version (``runs`` of one) or two versions on the same axes; None when there
    is nothing to draw. The title names the unit, the plot and the version(s). The labels of ``runs`` are data:
    they are drawn as written (:func:`~trackeval.io.escape.escape_mathtext`), in the legends and the title."""
    runs = [(escape_mathtext(label), result) for label, result in runs]
    fig, ax = plt.subplots(figsize=_size(plot, runs), layout="constrained")
    if not _DRAW[plot.kind](ax, plot, runs):
        plt.close(fig)
        return None
    versions = " vs ".join(label for label, _ in runs)
    ax.set_title(f"{unit}: {plot.title or default_title(unit, plot)}\n{versions}", fontsize=10)
    ax.grid(alpha=0.25, linewidth=0.5)
    return fig


def result_figures(result: BenchmarkResult) -> list[tuple[str, Figure]]:
    """``(name, figure)`` of the declared plots, then one bar chart per other breakdown (:func:`breakdowns`);
    plots with nothing to draw are left out. The caller closes the figures."""
    runs = [(version_label(result), result)]
    out: list[tuple[str, Figure]] = []
    done: set[str] = set()
    for plot in result.plots:
        name = _unique(figure_name(result.unit, plot), done)
        fig = plot_figure(plot, runs, result.unit)
        if fig is not None:
            out.append((name, fig))
    prefix = result.unit + "/"
    for parent, dim in breakdowns(result):
        metric = parent[len(prefix) :] if parent.startswith(prefix) else ""
        plot = PlotSpec(metric=metric, dimension=dim)
        name = figure_name(result.unit, plot)
        if not metric or name in done:
            continue
        done.add(name)
        fig = plot_figure(plot, runs, result.unit)
        if fig is not None:
            out.append((name, fig))
    return out


def _unique(name: str, done: set[str]) -> str:
    n, candidate = 2, name
    while candidate in done:
        candidate, n = f"{name}_{n}", n + 1
    done.add(candidate)
    return candidate


def _save(figures: list[tuple[str, Figure]], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures:
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
        paths.append(path)
    return paths


def save_figures(result: BenchmarkResult, out_dir: Path) -> list[Path]:
    """Write :func:`result_figures` as PNGs into ``out_dir``; returns the paths in that order."""
    return _save(result_figures(result), out_dir)


def overlay_labels(a: BenchmarkResult, b: BenchmarkResult) -> tuple[str, str]:
    """The legend labels of two versions: their :func:`version_label`, suffixed `` (A)``/`` (B)`` when equal."""
    la, lb = version_label(a), version_label(b)
    return (f"{la} (A)", f"{lb} (B)") if la == lb else (la, lb)


def overlay_figure_objects(a: BenchmarkResult, b: BenchmarkResult) -> list[tuple[str, Figure]]:
    """``(name, figure)`` of each declared plot of the unit (``a``'s, else ``b``'s) with both versions on the
    same axes. The caller closes the figures.

    Raises:
        ValueError: ``a`` and ``b`` are results of different units.
    """
    if a.unit != b.unit:
        raise ValueError(f"cannot overlay results of different units: {a.unit} and {b.unit}")
    la, lb = overlay_labels(a, b)
    runs = [(la, a), (lb, b)]
    out: list[tuple[str, Figure]] = []
    done: set[str] = set()
    for plot in a.plots or b.plots:
        name = _unique(figure_name(a.unit, plot) + "__overlay", done)
        fig = plot_figure(plot, runs, a.unit)
        if fig is not None:
            out.append((name, fig))
    return out


def overlay_figures(a: BenchmarkResult, b: BenchmarkResult, out_dir: Path) -> list[Path]:
    """Write :func:`overlay_figure_objects` as PNGs (``<name>__overlay.png``) into ``out_dir``; returns the
    paths in the order of the declared plots."""
    return _save(overlay_figure_objects(a, b), out_dir)
