"""Terminal (rich) and markdown tables of paired comparisons and gate decisions.

Labels, group values, problems, check details and notes are data: each goes through the escaping function of
the medium (:func:`~trackeval.io.escape.escape_terminal`, :func:`~trackeval.io.escape.escape_markdown`), never
read as rich markup or Markdown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from rich.console import Console
from rich.table import Table

from trackeval.gate.compare import BenchmarkComparison
from trackeval.gate.decide import Decision
from trackeval.gate.pairing import DeltaRow
from trackeval.io.escape import escape_markdown, escape_terminal
from trackeval.plotdata import READER_DIMENSION, reader_metric_rows
from trackeval.report.checks import check_scope
from trackeval.report.console import missing_line, n_missing
from trackeval.report.labels import metric_label, version_label
from trackeval.results import BenchmarkResult, MetricSummary


def _v(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def _delta(r: DeltaRow) -> str:
    if r.delta is None:
        return "-"
    if r.ci95_low is None or r.ci95_high is None:
        return f"{r.delta:+.4f}"
    return f"{r.delta:+.4f} [{r.ci95_low:+.4f}, {r.ci95_high:+.4f}]"


def _cells(r: DeltaRow, escape: Callable[[str], str]) -> list[str]:
    """The row's cells; ``escape`` (the medium's escaping function) applied to the group, the one cell of data."""
    group = "(overall)" if not r.dimension else escape(f"{r.dimension}={r.group}")
    return [group, _v(r.candidate), _v(r.baseline), _delta(r), str(r.n_pairs)]


HEADER = ["group", "A", "B", "delta A-B [95% CI]", "pairs"]


def print_comparisons(comparisons: list[BenchmarkComparison], console: Console | None = None) -> None:
    """One table per benchmark (paired deltas with CIs), or its pairing problems."""
    console = console or Console(width=140)
    for comp in comparisons:
        if comp.problems:
            problems = "; ".join(comp.problems)
            console.print(f"[red]{escape_terminal(comp.unit)}: cannot pair[/] {escape_terminal(problems)}")
            continue
        a, b = escape_terminal(comp.candidate_label), escape_terminal(comp.baseline_label)
        table = Table(title=f"{escape_terminal(comp.metric)}: A={a} vs B={b}, {comp.n_cases} cases")
        for h in HEADER:
            table.add_column(h, justify="left" if h == "group" else "right")
        for r in comp.rows:
            table.add_row(*_cells(r, escape_terminal))
        console.print(table)


def missing_prediction_lines(
    comparisons: list[BenchmarkComparison], pairs: list[tuple[BenchmarkResult, BenchmarkResult]]
) -> list[str]:
    """One :func:`~trackeval.report.console.missing_line` per side (``A=<label>``, ``B=<label>``) of each compared
    unit whose result has missing predictions; ``pairs`` are the ``(A, B)`` results of ``comparisons``, in order."""
    out = []
    for comp, (a, b) in zip(comparisons, pairs, strict=True):
        for who, result in ((f"A={comp.candidate_label}", a), (f"B={comp.baseline_label}", b)):
            if n_missing(result):
                out.append(missing_line(result.unit, who, n_missing(result)))
    return out


def reader_comparison(a: BenchmarkResult, b: BenchmarkResult) -> tuple[list[str], list[list[str]]]:
    """The human readers of two results of one unit side by side: header ``reader, <item kind>, <metric> A,
    <metric> B...`` and one row per reader and item with the values each result reports (``-`` where one has
    none); ``([], [])`` when neither records readers. Readers are shown, never compared or gated: their metrics
    are declared ``paired="none"``. Cells are data, unescaped."""
    kind = a.item_kind
    (ma, ra), (mb, rb) = reader_metric_rows(a, kind), reader_metric_rows(b, kind)
    metrics = ma + [m for m in mb if m not in ma]
    if not metrics:
        return [], []
    sides = [{(str(r[READER_DIMENSION]), str(r[kind])): r for r in rows} for rows in (ra, rb)]
    header = [READER_DIMENSION, kind] + [f"{metric_label(a.unit, m)} {s}" for m in metrics for s in "AB"]

    def cell(side: dict, key: tuple[str, str], m: str) -> str:
        s = side.get(key, {}).get(m)
        return _v(s.value) if isinstance(s, MetricSummary) else "-"

    rows = [
        [*key, *(cell(side, key, m) for m in metrics for side in sides)]
        for key in sorted(set(sides[0]) | set(sides[1]))
    ]
    return header, rows


def _reader_sections(
    pairs: Sequence[tuple[BenchmarkResult, BenchmarkResult]],
) -> Iterator[tuple[str, list[str], list[list[str]]]]:
    """``(title, header, rows)`` of :func:`reader_comparison` per ``(A, B)`` pair whose results record readers."""
    for a, b in pairs:
        header, rows = reader_comparison(a, b)
        if rows:
            yield f"{a.unit}: human readers, A = {version_label(a)}, B = {version_label(b)} (not gated)", header, rows


def print_reader_comparisons(pairs: Sequence[tuple[BenchmarkResult, BenchmarkResult]], console: Console) -> None:
    """One table of :func:`reader_comparison` per ``(A, B)`` pair of compared results (``compare``'s pairs) that
    records readers; nothing for units without readers."""
    for title, header, rows in _reader_sections(pairs):
        table = Table(title=escape_terminal(title))
        for i, h in enumerate(header):
            table.add_column(escape_terminal(h), justify="left" if i < 2 else "right")
        for row in rows:
            table.add_row(*(escape_terminal(c) for c in row))
        console.print(table)


def reader_comparison_markdown(pairs: Sequence[tuple[BenchmarkResult, BenchmarkResult]]) -> str:
    """The tables of :func:`print_reader_comparisons` as markdown sections ("" when no pair has readers)."""
    lines: list[str] = []
    for title, header, rows in _reader_sections(pairs):
        lines += [f"## {escape_markdown(title)}", "", "| " + " | ".join(escape_markdown(h) for h in header) + " |"]
        lines.append("| " + " | ".join("---" for _ in header) + " |")
        lines += ["| " + " | ".join(escape_markdown(c) for c in row) + " |" for row in rows] + [""]
    return "\n".join(lines)


def print_missing(lines: Sequence[str], console: Console) -> None:
    """``warning: <line>`` for each line of :func:`missing_prediction_lines` (or of a decision's versions)."""
    for line in lines:
        console.print(f"[yellow]warning:[/] {escape_terminal(line)}", highlight=False, soft_wrap=True)


def missing_markdown(lines: Sequence[str]) -> str:
    """The lines as a Markdown list under a bold "missing predictions" note ("" when there are none)."""
    if not lines:
        return ""
    return "**Missing predictions**\n\n" + "\n".join(f"- {escape_markdown(line)}" for line in lines) + "\n"


def comparison_markdown(comparisons: list[BenchmarkComparison]) -> str:
    """The same tables as markdown (one section per benchmark)."""
    lines = []
    for comp in comparisons:
        a, b = escape_markdown(comp.candidate_label), escape_markdown(comp.baseline_label)
        lines.append(f"## {escape_markdown(comp.metric)}: A = {a}, B = {b}")
        lines.append("")
        if comp.problems:
            lines += [f"- cannot pair: {escape_markdown(p)}" for p in comp.problems] + [""]
            continue
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("| " + " | ".join("---" for _ in HEADER) + " |")
        lines += ["| " + " | ".join(_cells(r, escape_markdown)) + " |" for r in comp.rows]
        lines.append("")
    return "\n".join(lines)


def decision_markdown(decision: Decision, baseline: str = "champion") -> str:
    """The gate decision: verdict, checks, worst-group tests and the comparison tables.

    ``baseline``: what the candidate was gated against, as named in the title (``champion``; ``previous`` for
    ``trackeval promote --dry-run`` of the champion itself).
    """
    md = escape_markdown
    champion = md(decision.champion) if decision.champion else "none (first version: absolute floors)"
    lines = [
        f"# Gate {md(decision.model)}: candidate {md(decision.candidate)} vs {md(baseline)} {champion}: "
        f"**{decision.verdict.upper()}**",
        "",
        "| check | benchmark | passed | detail |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {md(c.name)} | {md(check_scope(c.unit))} | {'yes' if c.passed else 'NO'} | {md(c.detail)} |"
        for c in decision.checks
    ]
    lines += [f"\nNote: {md(n)}" for n in decision.notes]
    if decision.group_tests:
        lines += [
            "",
            "| group | delta [95% CI] | margin | p | p adjusted | passed |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for g in decision.group_tests:
            ci = "-" if g.delta is None else f"{g.delta:+.4f} [{g.ci95_low:+.4f}, {g.ci95_high:+.4f}]"
            ok = "yes" if g.passed else "NO"
            lines.append(f"| {md(g.key)} | {ci} | {g.margin} | {g.p_value:.4f} | {g.p_adjusted:.4f} | {ok} |")
    lines += ["", comparison_markdown(decision.comparisons)]
    return "\n".join(lines)


def print_decision(decision: Decision, console: Console | None = None, missing: Sequence[str] = ()) -> None:
    """Comparison tables, the checks, ``missing`` (lines of :func:`~trackeval.report.console.missing_line` for
    the versions compared, shown as warnings) and the verdict line."""
    console = console or Console(width=140)
    print_comparisons(decision.comparisons, console)
    for c in decision.checks:
        mark = "[green]pass[/]" if c.passed else "[red]FAIL[/]"
        what = escape_terminal(f"{check_scope(c.unit)} {c.name}: {c.detail}")  # "all units", never "*"
        console.print(f"{mark} {what}", highlight=False)
    print_missing(missing, console)
    for note in decision.notes:
        console.print(f"[yellow]note:[/] {escape_terminal(note)}", highlight=False)
    colour = "green" if decision.verdict == "pass" else "red"
    who = escape_terminal(f"({decision.model} {decision.candidate})")
    console.print(f"[bold {colour}]verdict: {decision.verdict}[/] {who}")
