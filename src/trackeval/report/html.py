"""Self-contained HTML reports (inline CSS, figures embedded as base64 PNG, no external requests).

``result_report``: one evaluation (lineage, summary, headline and breakdown tables with CIs, figures).
``comparison_report``: paired deltas of two versions, optionally with the unit's declared figures of both
versions overlaid on the same axes. ``decision_report``: a gate decision.

Every text that is not our own markup goes through :func:`trackeval.io.escape.escape_html`.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Sequence
from pathlib import Path

from trackeval.gate.compare import BenchmarkComparison
from trackeval.gate.decide import Decision
from trackeval.io.escape import escape_html
from trackeval.report.checks import check_scope
from trackeval.report.comparison import HEADER, _cells, _reader_sections
from trackeval.report.console import reader_table
from trackeval.results import BenchmarkResult, MetricSummary

_CSS = (
    "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}td.n{text-align:right}"
    ".pass{color:#17702a;font-weight:bold}.fail{color:#b00020;font-weight:bold}img{max-width:100%}"
)


def _page(title: str, body: list[str]) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape_html(title)}</title>'
        f"<style>{_CSS}</style></head><body>\n<h1>{escape_html(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _table(header: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{escape_html(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i >= numeric_from else ''}>{escape_html(c)}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(s: MetricSummary) -> list[str]:
    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.4f}"

    return [f(s.value), f(s.ci95_low), f(s.ci95_high), str(s.n_valid), str(s.n)]


def result_report(result: BenchmarkResult, figures: list[Path]) -> str:
    """HTML report of one result: lineage, summary counts, warnings, every aggregate and the figures."""
    model = "/".join(v for v in (result.model.get("name"), result.model.get("version")) if v) or "unnamed model"
    body = [
        _table(
            ["field", "value"],
            [
                ["benchmark", result.benchmark],
                ["model", model],
                ["cases", str(result.data.n_cases)],
                ["data digest", result.data.digest],
                ["ground-truth digest", result.data.ground_truth_digest],
                ["config digest", result.config_digest],
                ["trackeval", result.trackeval_version],
            ],
            numeric_from=2,
        ),
        "<h2>Summary</h2>",
        _table(["count", "value"], [[k, str(v)] for k, v in sorted(result.summary.items())]),
    ]
    if result.warnings:
        body += ["<h2>Warnings</h2><ul>"] + [f"<li>{escape_html(w)}</li>" for w in result.warnings] + ["</ul>"]
    header = ["metric", "value", "ci95 low", "ci95 high", "n valid", "n"]
    body += [
        "<h2>Aggregates (mean, cluster-bootstrap 95% CI)</h2>",
        _table(header, [[k, *_fmt(s)] for k, s in sorted(result.aggregates.items())]),
    ]
    header, rows = reader_table(result)
    if rows:
        body += ["<h2>Human readers (mean [95% CI]; not gated)</h2>", _table(header, rows, numeric_from=2)]
    if figures:
        body.append("<h2>Figures</h2>")
        body += [_figure(path) for path in figures]
    return _page(f"trackeval report: {result.benchmark}, {model}", body)


def _figure(path: Path) -> str:
    """A PNG embedded as base64 with its file stem as caption."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{escape_html(path.stem)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{escape_html(path.stem)}</figcaption></figure>"
    )


def _overlay_sections(overlays: Sequence[tuple[BenchmarkResult, BenchmarkResult]]) -> list[str]:
    from trackeval.report.figures import overlay_figures, overlay_labels

    body = []
    for a, b in overlays:
        la, lb = overlay_labels(a, b)
        body.append(f"<h2>Overlays: {escape_html(a.unit)}, A = {escape_html(la)}, B = {escape_html(lb)}</h2>")
        with tempfile.TemporaryDirectory(prefix="trackeval-overlay-") as tmp:
            paths = overlay_figures(a, b, Path(tmp))
            body += [_figure(p) for p in paths] or ["<p>no declared figure to overlay</p>"]
    return body


def _comparison_sections(comparisons: list[BenchmarkComparison]) -> list[str]:
    body = []
    for comp in comparisons:
        body.append(
            f"<h2>{escape_html(comp.metric)}: A = {escape_html(comp.candidate_label)}, "
            f"B = {escape_html(comp.baseline_label)} ({comp.n_cases} cases)</h2>"
        )
        if comp.problems:
            problems = [f"<li>cannot pair: {escape_html(p)}</li>" for p in comp.problems]
            body += ['<ul class="fail">', *problems, "</ul>"]
        else:
            body.append(_table(HEADER, [_cells(r, str) for r in comp.rows]))  # _table escapes every cell
    return body


def comparison_report(
    comparisons: list[BenchmarkComparison],
    overlays: Sequence[tuple[BenchmarkResult, BenchmarkResult]] | None = None,
) -> str:
    """HTML of paired deltas (A - B) with 95% CIs per benchmark and breakdown group.

    ``overlays``: ``(A, B)`` results of one unit each (A = the candidate, as in ``comparisons``); their declared
    figures are drawn with both versions on the same axes (:func:`trackeval.report.figures.overlay_figures`)
    in a section per pair after the tables, and their human readers, when they record any, are listed side by
    side (:func:`trackeval.report.comparison.reader_comparison`; not gated).
    """
    readers = [
        f"<h2>{escape_html(title)}</h2>" + _table(header, rows, numeric_from=2)
        for title, header, rows in _reader_sections(overlays or ())
    ]
    body = _comparison_sections(comparisons) + readers + _overlay_sections(overlays or ())
    return _page("trackeval comparison", body)


def decision_report(decision: Decision) -> str:
    """HTML of a gate decision: verdict, checks, worst-group tests, comparison tables."""
    cls = "pass" if decision.verdict == "pass" else "fail"
    body = [
        f"<p>candidate <b>{escape_html(decision.candidate)}</b> "
        f"vs champion <b>{escape_html(decision.champion or 'none')}</b>: "
        f'<span class="{cls}">{decision.verdict.upper()}</span></p>',
        _table(
            ["check", "benchmark", "passed", "detail"],
            [[c.name, check_scope(c.unit), "yes" if c.passed else "NO", c.detail] for c in decision.checks],
            numeric_from=9,
        ),
        *(f"<p>Note: {escape_html(n)}</p>" for n in decision.notes),
    ]
    if decision.group_tests:
        rows = [
            [
                g.key,
                "-" if g.delta is None else f"{g.delta:+.4f}",
                f"{g.margin}",
                f"{g.p_value:.4f}",
                f"{g.p_adjusted:.4f}",
                "yes" if g.passed else "NO",
            ]
            for g in decision.group_tests
        ]
        body += ["<h2>Worst-group guard</h2>", _table(["group", "delta", "margin", "p", "p adjusted", "passed"], rows)]
    return _page(f"trackeval gate: {decision.model}", body + _comparison_sections(decision.comparisons))
