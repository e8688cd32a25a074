"""What a notebook shows of the gate's objects: their rows as a pandas DataFrame (``to_frame``) and as an HTML
fragment (``_repr_html_``, which Jupyter renders), for :class:`~trackeval.gate.compare.BenchmarkComparison` and
:class:`~trackeval.gate.decide.Decision`.

Pure functions of plain rows (``{column: value}``): this module imports neither model (they import it). Every
cell, heading and list item is data and goes through :func:`trackeval.io.escape.escape_html`, the HTML medium's
one escaping function; the markup around it is ours. pandas is imported on first use only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from trackeval.io.escape import escape_html

if TYPE_CHECKING:
    import pandas as pd

#: the columns of a comparison's rows (:class:`~trackeval.gate.pairing.DeltaRow`'s fields, ``samples`` left out)
ROW_COLUMNS = (
    "unit",
    "key",
    "dimension",
    "group",
    "candidate",
    "baseline",
    "delta",
    "ci95_low",
    "ci95_high",
    "n_pairs",
    "n_units",
    "std_error",
    "df",
)
#: the columns that are float64 in a frame (NaN for None): the values, deltas, bounds and DeLong's se and df
FLOAT_COLUMNS = ("candidate", "baseline", "delta", "ci95_low", "ci95_high", "std_error", "df")
#: the worst-group guard's columns a decision's frame adds to its group rows (:class:`~trackeval.gate.decide.GroupTest`)
GROUP_COLUMNS = ("margin", "p_value", "p_adjusted", "passed")


def frame(rows: Sequence[Mapping[str, object]], columns: Sequence[str], floats: Sequence[str]) -> pd.DataFrame:
    """A DataFrame of ``rows`` with exactly ``columns`` (a column a row lacks is None/NaN), the ``floats`` among
    them as float64 (None -> NaN); an empty frame with those columns when there is no row."""
    import pandas as pd

    out = pd.DataFrame([{c: row.get(c) for c in columns} for row in rows], columns=list(columns))
    return out.astype({c: "float64" for c in floats if c in columns})


def cell(value: object) -> str:
    """A value as table text: ``-`` for None or NaN, a float with 4 decimals, a bool as ``yes`` / ``NO``."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """An HTML table: ``header`` and each row's cells (:func:`cell`), every one escaped."""
    head = "".join(f"<th>{escape_html(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape_html(cell(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def bullets(lines: Sequence[str]) -> str:
    """An HTML list of ``lines`` (escaped); "" when there is none."""
    return "<ul>" + "".join(f"<li>{escape_html(line)}</li>" for line in lines) + "</ul>" if lines else ""


def comparison_html(
    metric: str, labels: tuple[str, str], n_cases: int, problems: Sequence[str], rows: Sequence[Mapping[str, object]]
) -> str:
    """A comparison as HTML: ``metric: A = <candidate>, B = <baseline> (n cases)``, then its pairing problems
    or one line per row (the group, A, B, the delta A - B and its 95% CI, the pairs)."""
    title = f"{metric}: A = {labels[0]}, B = {labels[1]} ({n_cases} cases)"
    parts = [f"<p><b>{escape_html(title)}</b></p>"]
    if problems:
        parts.append(bullets([f"cannot pair: {p}" for p in problems]))
    else:
        header = ["group", "A", "B", "delta A-B", "95% CI low", "95% CI high", "pairs"]
        cells = [
            [
                f"{r['dimension']}={r['group']}" if r["dimension"] else "(overall)",
                *(r[c] for c in ("candidate", "baseline", "delta", "ci95_low", "ci95_high", "n_pairs")),
            ]
            for r in rows
        ]
        parts.append(table(header, cells))
    return "<div>" + "".join(parts) + "</div>"


def decision_html(
    heading: Mapping[str, str | None],
    checks: Sequence[Sequence[object]],
    notes: Sequence[str],
    groups: Sequence[Sequence[object]],
    comparisons: Sequence[str],
) -> str:
    """A decision as HTML: ``heading`` (``model``, ``candidate``, ``champion``: None for a first version,
    ``verdict``), the checks (check, unit, passed, detail), the notes, the worst-group tests (group, delta,
    margin, p, p adjusted, passed) and the comparisons' fragments (:func:`comparison_html`)."""
    champion = heading["champion"] or "none (floors)"
    line = f"gate {heading['model']}: candidate {heading['candidate']} vs champion {champion}: "
    verdict = str(heading["verdict"]).upper()
    parts = [
        f"<p><b>{escape_html(line)}{escape_html(verdict)}</b></p>",
        table(["check", "unit", "passed", "detail"], checks),
        bullets([f"Note: {n}" for n in notes]),
    ]
    if groups:
        parts.append(table(["group", "delta", "margin", "p", "p adjusted", "passed"], groups))
    return "<div>" + "".join(parts) + "".join(comparisons) + "</div>"
