"""The leaderboard as data (:class:`Leaderboard`) and as a terminal table, Markdown and self-contained HTML.

Model names and versions are data: each medium escapes them with its function of :mod:`trackeval.io.escape`.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict
from rich.console import Console
from rich.table import Table

from trackeval.io.escape import escape_html, escape_markdown, escape_terminal
from trackeval.report.console import format_estimate, missing_line


class Cell(BaseModel):
    """One version's primary metric on one unit (None: not evaluated) and the evaluation's
    ``n_missing_predictions`` (0 when none or not counted)."""

    model_config = ConfigDict(extra="forbid")

    value: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    n_missing_predictions: int = 0


class Row(BaseModel):
    """One model version: its LoggedModel, whether it is ``@champion``, a cell per unit, and its last gate
    decision in a few words (``pass``, ``fail: worst_group umd organ=heart -0.2000 [-0.2000, -0.2000]``, ``not
    gated``; :func:`~trackeval.tracking.leaderboard_rows.gate_cell`)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    version: str
    model_id: str
    champion: bool
    cells: dict[str, Cell]
    gate: str = ""


class Leaderboard(BaseModel):
    """``units`` (column order) with their primary keys, and the rows (model, then version order)."""

    model_config = ConfigDict(extra="forbid")

    units: list[str]
    keys: dict[str, str]
    higher_is_better: dict[str, bool]
    rows: list[Row]


def _cell(c: Cell | None) -> str:
    if c is None:
        return "-"
    return format_estimate(c.value, c.ci95_low, c.ci95_high, digits=4) + (" *" if c.n_missing_predictions else "")


def _table(board: Leaderboard, escape: Callable[[str], str] = str) -> tuple[list[str], list[list[str]]]:
    """Header (primary keys; a lower-is-better one marked ``(lower is better)``; then ``gate``) and formatted
    rows; ``escape`` (the medium's function of :mod:`trackeval.io.escape`) applied to the keys, model names,
    versions and gate cells (which name groups: data)."""
    header = [
        "model",
        "version",
        *(escape(board.keys[u]) + ("" if board.higher_is_better[u] else " (lower is better)") for u in board.units),
        "gate",
    ]
    rows = [
        [
            escape(r.model),
            escape(r.version) + (" (champion)" if r.champion else ""),
            *(_cell(r.cells.get(u)) for u in board.units),
            escape(r.gate or "-"),
        ]
        for r in board.rows
    ]
    return header, rows


def missing_notes(board: Leaderboard) -> list[str]:
    """A :func:`~trackeval.report.console.missing_line` per cell with missing predictions (row, then unit order);
    a cell with one is also marked ``*`` in the tables."""
    return [
        missing_line(u, f"{r.model}/{r.version}", r.cells[u].n_missing_predictions)
        for r in board.rows
        for u in board.units
        if u in r.cells and r.cells[u].n_missing_predictions
    ]


def print_leaderboard(board: Leaderboard, console: Console | None = None) -> None:
    """The leaderboard as a terminal table (primary metric [95% CI] per unit; champion marked), then a warning
    line per cell with missing predictions (:func:`missing_notes`)."""
    if console is None:
        console = Console()
        if not console.is_terminal:  # logs and CI: do not wrap "value [low, high]" cells at 80 columns
            console.width = 160
    header, rows = _table(board, escape_terminal)
    table = Table(
        title="leaderboard: primary metric of each benchmark unit [95% CI]; higher is better unless marked; "
        "gate: the version's last decision (its first failed check)"
    )
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i < 2 or i == len(header) - 1 else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for note in missing_notes(board):
        console.print(f"[yellow]warning:[/] * {escape_terminal(note)}", highlight=False, soft_wrap=True)


def leaderboard_markdown(board: Leaderboard) -> str:
    """A Markdown table (GitHub flavour)."""
    header, rows = _table(board, escape_markdown)
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    note = (
        "Primary metric of each benchmark unit, mean [95% CI]; higher is better unless marked. Gate: the "
        "version's last gate decision (its first failed check, candidate - champion [95% CI]).\n\n"
    )
    missing = "".join(f"\n\\* {escape_markdown(m)}\n" for m in missing_notes(board))
    return "## Leaderboard\n\n" + note + "\n".join(lines) + "\n" + missing


def leaderboard_html(board: Leaderboard) -> str:
    """A self-contained HTML page (inline CSS, no external requests)."""
    header, rows = _table(board)  # raw: every cell is escaped below
    head = "".join(f"<th>{escape_html(h)}</th>" for h in header)
    body = "".join(
        "<tr"
        + (' class="champion"' if r.champion else "")
        + ">"
        + "".join(f"<td>{escape_html(c)}</td>" for c in row)
        + "</tr>"
        for r, row in zip(board.rows, rows, strict=True)
    )
    notes = missing_notes(board)
    missing = "<ul>" + "".join(f"<li>* {escape_html(m)}</li>" for m in notes) + "</ul>" if notes else ""
    css = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:3px 8px;font-size:13px}tr.champion{font-weight:bold;background:#eef7ee}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>trackeval leaderboard</title>'
        f"<style>{css}</style></head><body><h1>Leaderboard</h1><table><tr>{head}</tr>{body}</table>{missing}"
        "</body></html>\n"
    )
