"""Matplotlib figures of a result: the unit's declared plots first, then one bar chart per other breakdown.

Declared plots (:class:`trackeval.results.PlotSpec`, e.g. UMD Dice by organ, IMIS Dice vs clicks, the X-ray ROC)
are drawn as bars with 95% CI whiskers, lines with a CI band, or a ROC curve. Every other aggregate key ``K``
with single-level breakdown children ``K/by_<dimension>/<value>`` gets a bar chart too (per-modality bars,
the paired modality gap per organ ``umd/dsc_gap/ct_vs_pet/by_organ``...). Titles name the model version.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from trackeval.report.plots import roc_rows  # noqa: E402
from trackeval.results import BenchmarkResult, MetricSummary, PlotSpec  # noqa: E402

_CHILD = re.compile(r"^(?P<parent>.+)/by_(?P<dim>[a-z0-9_]+)/(?P<value>[a-z0-9_]+)$")


def breakdowns(result: BenchmarkResult) -> dict[tuple[str, str], dict[str, MetricSummary]]:
    """``{(parent key, dimension): {value: summary}}`` over single-level breakdown keys with a value."""
    out: dict[tuple[str, str], dict[str, MetricSummary]] = {}
    for key, s in sorted(result.aggregates.items()):
        m = _CHILD.match(key)
        if m and "/by_" not in m["parent"] and s.value is not None:
            out.setdefault((m["parent"], m["dim"]), {})[m["value"]] = s
    return out


def bar_figure(title: str, dimension: str, values: dict[str, MetricSummary]) -> Figure:
    """Bars of ``values`` (point estimates) with asymmetric 95% CI whiskers; n_valid under each label."""
    names = list(values)
    est = [values[n].value for n in names]
    lo = [values[n].value - (values[n].ci95_low if values[n].ci95_low is not None else values[n].value) for n in names]
    hi = [
        (values[n].ci95_high if values[n].ci95_high is not None else values[n].value) - values[n].value for n in names
    ]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.55 * len(names) + 1.5), 3.6), layout="constrained")
    ax.bar(range(len(names)), est, yerr=[lo, hi], capsize=3, color="#4c72b0", ecolor="#222222")
    ax.set_xticks(
        range(len(names)), [f"{n}\n(n={values[n].n_valid})" for n in names], rotation=45, ha="right", fontsize=7
    )
    ax.axhline(0.0, color="#888888", linewidth=0.6)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(dimension)
    ax.set_ylabel("mean, 95% CI")
    return fig


def line_figure(title: str, dimension: str, values: dict[str, MetricSummary]) -> Figure:
    """Point estimates over an ordered numeric dimension (clicks) with the 95% CI as a band."""
    pairs = sorted((int(k), v) for k, v in values.items() if k.isdigit())
    x = [k for k, _ in pairs]
    est = [v.value for _, v in pairs]
    lo = [v.ci95_low if v.ci95_low is not None else v.value for _, v in pairs]
    hi = [v.ci95_high if v.ci95_high is not None else v.value for _, v in pairs]
    fig, ax = plt.subplots(figsize=(5.0, 3.6), layout="constrained")
    ax.plot(x, est, marker="o", color="#4c72b0")
    ax.fill_between(x, lo, hi, color="#4c72b0", alpha=0.2, linewidth=0)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(dimension)
    ax.set_ylabel("mean, 95% CI")
    return fig


def roc_figure(title: str, result: BenchmarkResult) -> Figure | None:
    """The pooled ROC curve of the records' ``label``/``score`` pairs (None when there are none)."""
    rows = roc_rows(result)
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(4.2, 4.0), layout="constrained")
    ax.plot([r["fpr"] for r in rows], [r["tpr"] for r in rows], color="#4c72b0")
    ax.plot([0, 1], [0, 1], color="#888888", linewidth=0.6, linestyle="--")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    return fig


def _declared(result: BenchmarkResult, plot: PlotSpec, label: str) -> tuple[str, Figure | None]:
    parent = f"{result.unit}/{plot.metric}"
    if plot.kind == "roc":
        return f"{result.unit.replace('/', '__')}__roc", roc_figure(
            f"{plot.title or 'ROC'}: {result.unit}{label}", result
        )
    values = breakdowns(result).get((parent, plot.dimension))
    name = f"{parent.replace('/', '__')}__by_{plot.dimension}"
    if not values:
        return name, None
    title = f"{plot.title or parent + ' by ' + plot.dimension}{label}"
    draw = line_figure if plot.kind == "line" else bar_figure
    return name, draw(title, plot.dimension, values)


def save_figures(result: BenchmarkResult, out_dir: Path) -> list[Path]:
    """Write the declared plots, then one PNG per other breakdown (:func:`breakdowns`), into ``out_dir``;
    returns the paths in that order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    version = "/".join(v for v in (result.model.get("name"), result.model.get("version")) if v)
    label = f" ({version})" if version else ""
    figures: list[tuple[str, Figure | None]] = [_declared(result, p, label) for p in result.plots]
    done = {name for name, _ in figures}
    for (parent, dim), values in breakdowns(result).items():
        name = f"{parent.replace('/', '__')}__by_{dim}"
        if name not in done:
            figures.append((name, bar_figure(f"{parent} by {dim}{label}", dim, values)))
    paths = []
    for name, fig in figures:
        if fig is None:
            continue
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
