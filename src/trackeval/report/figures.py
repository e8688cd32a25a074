"""Matplotlib figures of a result: one bar chart with 95% CI whiskers per breakdown of an aggregate.

Every aggregate key ``K`` that has single-level breakdown children ``K/by_<dimension>/<value>`` gets a figure:
per-organ bars (``umd/dsc/by_organ``), per-modality bars, the paired modality gap per organ
(``umd/dsc_gap/ct_vs_pet/by_organ``), and per-region / per-finding bars of other benchmarks. Curves (ROC/PR,
Dice-vs-clicks) need curve data in results.json, which no adapter writes yet.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from trackeval.results import BenchmarkResult, MetricSummary  # noqa: E402

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


def save_figures(result: BenchmarkResult, out_dir: Path) -> list[Path]:
    """Write one PNG per breakdown (:func:`breakdowns`) into ``out_dir``; returns the paths in key order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for (parent, dim), values in breakdowns(result).items():
        fig = bar_figure(f"{parent} by {dim}", dim, values)
        path = out_dir / f"{parent.replace('/', '__')}__by_{dim}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
