"""Terminal summary of a result: headline metrics with CIs and the per-item table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trackeval.io.escape import escape_terminal
from trackeval.results import BenchmarkResult, MetricSummary


def format_estimate(value: float | None, low: float | None, high: float | None, digits: int = 3) -> str:
    """``value [low, high]`` with ``digits`` decimals; ``value`` alone without a CI; ``-`` without a value."""
    if value is None:
        return "-"
    if low is None or high is None:
        return f"{value:.{digits}f}"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def missing_line(unit: str, who: str, n_missing: int) -> str:
    """``umd: candidate v2 has 1 missing prediction(s) (n_missing_predictions=1)``: how ``track``, ``compare``,
    ``promote`` and ``leaderboard`` show a result's non-zero ``summary["n_missing_predictions"]``."""
    return f"{unit}: {who} has {n_missing} missing prediction(s) (n_missing_predictions={n_missing})"


def n_missing(result: BenchmarkResult) -> int:
    """``summary["n_missing_predictions"]`` of ``result`` (0 when the unit does not count them)."""
    return int(result.summary.get("n_missing_predictions", 0))


def _fmt(s: MetricSummary | None) -> str:
    return "-" if s is None else format_estimate(s.value, s.ci95_low, s.ci95_high)


def _summary_table(result: BenchmarkResult, metrics: tuple[str, ...]) -> Table:
    """Headline row, then one row per item of the first metric's ``/by_<item_kind>/`` breakdown."""
    agg, b, kind = result.aggregates, result.unit, result.item_kind
    table = Table(title=f"{escape_terminal(b)}: {result.data.n_cases} cases (mean [95% CI])")
    table.add_column(escape_terminal(kind))
    for m in metrics:
        table.add_column(escape_terminal(m), justify="right")
    table.add_row("[bold]mean", *(_fmt(agg.get(f"{b}/{m}")) for m in metrics))
    items = [k.rsplit("/", 1)[1] for k in agg if k.startswith(f"{b}/{metrics[0]}/by_{kind}/")]
    for item in items:
        table.add_row(escape_terminal(item), *(_fmt(agg.get(f"{b}/{m}/by_{kind}/{item}")) for m in metrics))
    return table


def print_summary(result: BenchmarkResult, metrics: tuple[str, ...], console: Console | None = None) -> None:
    """Print ``<unit>/<metric>`` headlines and their ``/by_<item_kind>/<item>`` breakdown.

    Metrics without a headline in ``result`` are not shown. Items, keys and warnings are data: they are shown
    as written (:func:`~trackeval.io.escape.escape_terminal`), never as rich markup.
    """
    if console is None:
        console = Console()
        if not console.is_terminal:  # logs and CI: do not wrap "value [low, high]" cells at 80 columns
            console.width = 132
    agg = result.aggregates
    console.print(_summary_table(result, tuple(m for m in metrics if f"{result.unit}/{m}" in agg) or metrics))
    gaps = {k: v for k, v in agg.items() if k.count("/") == 2 and "_gap/" in k}
    for key, s in sorted(gaps.items()):
        console.print(f"{escape_terminal(key)}: {_fmt(s)} (paired, {s.n} subjects)")
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {escape_terminal(w)}")
