"""Terminal summary of a result: headline metrics with CIs and the per-item table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trackeval.results import BenchmarkResult, MetricSummary


def _fmt(s: MetricSummary | None) -> str:
    if s is None or s.value is None:
        return "-"
    if s.ci95_low is None or s.ci95_high is None:
        return f"{s.value:.3f}"
    return f"{s.value:.3f} [{s.ci95_low:.3f}, {s.ci95_high:.3f}]"


def print_summary(result: BenchmarkResult, metrics: tuple[str, ...], console: Console | None = None) -> None:
    """Print ``<unit>/<metric>`` headlines and their ``/by_<item_kind>/<item>`` breakdown.

    Metrics without a headline in ``result`` are not shown.
    """
    if console is None:
        console = Console()
        if not console.is_terminal:  # logs and CI: do not wrap "value [low, high]" cells at 80 columns
            console.width = 132
    agg = result.aggregates
    b, kind = result.unit, result.item_kind
    metrics = tuple(m for m in metrics if f"{b}/{m}" in agg) or metrics
    table = Table(title=f"{b}: {result.data.n_cases} cases (mean [95% CI])")
    table.add_column(kind)
    for m in metrics:
        table.add_column(m, justify="right")
    table.add_row("[bold]mean", *(_fmt(agg.get(f"{b}/{m}")) for m in metrics))
    items = [k.rsplit("/", 1)[1] for k in agg if k.startswith(f"{b}/{metrics[0]}/by_{kind}/")]
    for item in items:
        table.add_row(item, *(_fmt(agg.get(f"{b}/{m}/by_{kind}/{item}")) for m in metrics))
    console.print(table)
    gaps = {k: v for k, v in agg.items() if k.count("/") == 2 and "_gap/" in k}
    for key, s in sorted(gaps.items()):
        console.print(f"{key}: {_fmt(s)} (paired, {s.n} subjects)")
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}")
