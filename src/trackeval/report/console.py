"""Terminal summary of a result: headline metrics with CIs, the per-item table and, when the result records human
readers, their table (each reader's metrics per item, as results.json holds them; not gated)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trackeval.io.escape import escape_terminal
from trackeval.plotdata import READER_DIMENSION, reader_metric_rows
from trackeval.report.labels import metric_label
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


def reader_table(result: BenchmarkResult) -> tuple[list[str], list[list[str]]]:
    """The human readers' table: header ``reader, <item kind>, <metric label>...`` and one row per reader and item
    with ``value [low, high]`` cells (:func:`trackeval.plotdata.reader_metric_rows`); ``([], [])`` without
    readers. Cells are data, unescaped: each medium escapes them."""
    metrics, rows = reader_metric_rows(result, result.item_kind)
    if not rows:
        return [], []
    header = [READER_DIMENSION, result.item_kind, *(metric_label(result.unit, m) for m in metrics)]
    cells = [
        [str(r[READER_DIMENSION]), str(r[result.item_kind]), *(_fmt(r[m]) for m in metrics)]  # type: ignore[arg-type]
        for r in rows
    ]
    return header, cells


def _reader_summary(result: BenchmarkResult) -> Table | None:
    header, rows = reader_table(result)
    if not rows:
        return None
    table = Table(title=f"{escape_terminal(result.unit)}: human readers (mean [95% CI]; not gated)")
    for i, h in enumerate(header):
        table.add_column(escape_terminal(h), justify="left" if i < 2 else "right")
    for row in rows:
        table.add_row(*(escape_terminal(c) for c in row))
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
    readers = _reader_summary(result)
    if readers is not None:
        console.print(readers)
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {escape_terminal(w)}")
