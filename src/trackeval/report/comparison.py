"""Terminal (rich) and markdown tables of paired comparisons and gate decisions."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trackeval.gate.compare import BenchmarkComparison, DeltaRow
from trackeval.gate.decide import Decision
from trackeval.report.console import missing_line, n_missing
from trackeval.results import BenchmarkResult


def _v(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def _delta(r: DeltaRow) -> str:
    if r.delta is None:
        return "-"
    if r.ci95_low is None or r.ci95_high is None:
        return f"{r.delta:+.4f}"
    return f"{r.delta:+.4f} [{r.ci95_low:+.4f}, {r.ci95_high:+.4f}]"


def _cells(r: DeltaRow) -> list[str]:
    group = "(overall)" if not r.dimension else f"{r.dimension}={r.group}"
    return [group, _v(r.candidate), _v(r.baseline), _delta(r), str(r.n_pairs)]


HEADER = ["group", "A", "B", "delta A-B [95% CI]", "pairs"]


def print_comparisons(comparisons: list[BenchmarkComparison], console: Console | None = None) -> None:
    """One table per benchmark (paired deltas with CIs), or its pairing problems."""
    console = console or Console(width=140)
    for comp in comparisons:
        if comp.problems:
            console.print(f"[red]{comp.benchmark}: cannot pair[/] " + "; ".join(comp.problems))
            continue
        table = Table(title=f"{comp.metric}: A={comp.candidate_label} vs B={comp.baseline_label}, {comp.n_cases} cases")
        for h in HEADER:
            table.add_column(h, justify="left" if h == "group" else "right")
        for r in comp.rows:
            table.add_row(*_cells(r))
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


def print_missing(lines: Sequence[str], console: Console) -> None:
    """``warning: <line>`` for each line of :func:`missing_prediction_lines` (or of a decision's versions)."""
    for line in lines:
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def missing_markdown(lines: Sequence[str]) -> str:
    """The lines as a Markdown list under a bold "missing predictions" note ("" when there are none)."""
    if not lines:
        return ""
    return "**Missing predictions**\n\n" + "\n".join(f"- {line}" for line in lines) + "\n"


def comparison_markdown(comparisons: list[BenchmarkComparison]) -> str:
    """The same tables as markdown (one section per benchmark)."""
    lines = []
    for comp in comparisons:
        lines.append(f"## {comp.metric}: A = {comp.candidate_label}, B = {comp.baseline_label}")
        lines.append("")
        if comp.problems:
            lines += [f"- cannot pair: {p}" for p in comp.problems] + [""]
            continue
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("| " + " | ".join("---" for _ in HEADER) + " |")
        lines += ["| " + " | ".join(_cells(r)) + " |" for r in comp.rows]
        lines.append("")
    return "\n".join(lines)


def decision_markdown(decision: Decision, baseline: str = "champion") -> str:
    """The gate decision: verdict, checks, worst-group tests and the comparison tables.

    ``baseline``: what the candidate was gated against, as named in the title (``champion``; ``previous`` for
    ``trackeval promote --dry-run`` of the champion itself).
    """
    champion = decision.champion or "none (first version: absolute floors)"
    lines = [
        f"# Gate {decision.model}: candidate {decision.candidate} vs {baseline} {champion}: "
        f"**{decision.verdict.upper()}**",
        "",
        "| check | benchmark | passed | detail |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {c.name} | {c.benchmark} | {'yes' if c.passed else 'NO'} | {c.detail} |" for c in decision.checks]
    lines += [f"\nNote: {n}" for n in decision.notes]
    if decision.group_tests:
        lines += [
            "",
            "| group | delta [95% CI] | margin | p | p adjusted | passed |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for g in decision.group_tests:
            ci = "-" if g.delta is None else f"{g.delta:+.4f} [{g.ci95_low:+.4f}, {g.ci95_high:+.4f}]"
            ok = "yes" if g.passed else "NO"
            lines.append(f"| {g.key} | {ci} | {g.margin} | {g.p_value:.4f} | {g.p_adjusted:.4f} | {ok} |")
    lines += ["", comparison_markdown(decision.comparisons)]
    return "\n".join(lines)


def print_decision(decision: Decision, console: Console | None = None, missing: Sequence[str] = ()) -> None:
    """Comparison tables, the checks, ``missing`` (lines of :func:`~trackeval.report.console.missing_line` for
    the versions compared, shown as warnings) and the verdict line."""
    console = console or Console(width=140)
    print_comparisons(decision.comparisons, console)
    for c in decision.checks:
        mark = "[green]pass[/]" if c.passed else "[red]FAIL[/]"
        console.print(f"{mark} {c.benchmark} {c.name}: {c.detail}", highlight=False)
    print_missing(missing, console)
    for note in decision.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)
    colour = "green" if decision.verdict == "pass" else "red"
    console.print(f"[bold {colour}]verdict: {decision.verdict}[/] ({decision.model} {decision.candidate})")
