"""``trackeval history`` as a terminal table (:func:`print_history`) and as one self-contained HTML page
(:func:`history_html`: inline CSS, no script, no external request; every value escaped as user data)."""

from __future__ import annotations

from rich.console import Console

from trackeval.attest.dsse import short
from trackeval.attest.trail import History, HistoryEvent
from trackeval.io.escape import escape_html, escape_terminal
from trackeval.report.checks import check_scope
from trackeval.report.html import _page, _table


def _aliases(aliases: dict[str, str]) -> str:
    return ", ".join(f"@{k}={v}" for k, v in sorted(aliases.items())) or "(none)"


def _signed(event: HistoryEvent) -> str:
    if event.signature == "verified":
        return f"signed {short(event.signer or '')}"
    if event.signature == "not checked":
        return f"signature not checked (key {short(event.signer or '?')})"
    return event.signature or ""


def _failed(event: HistoryEvent) -> str:
    """The failed checks (``unit: rule: numbers``), or the check a pass rests on for a first version."""
    failed = [f"{check_scope(c.unit)}: {c.name}: {c.detail}" for c in event.checks if not c.passed]
    if failed:
        return "; ".join(failed)
    floors = [f"{c.unit}: floor: {c.detail}" for c in event.checks if c.name == "floor"]
    return "; ".join(floors) if event.champion is None else "all checks passed"


def _summary(event: HistoryEvent) -> str:
    """One line of an event, for the terminal."""
    if event.kind == "replaced":
        return f"{event.label} {event.unit}: evaluation run {event.run_id} replaced by {event.replaced_by}"
    against = f"vs {event.champion_label or event.champion}" if event.champion else "first version (floors)"
    moved = f"; aliases {_aliases(event.aliases_before)} -> {_aliases(event.aliases_after)}" if event.promoted else ""
    problem = f"; PROBLEM: {event.problem}" if event.problem else ""
    return (
        f"{event.label} (version {event.version}) {against}: {(event.verdict or '?').upper()} [{_signed(event)}] "
        f"{_failed(event)}{moved}; run {event.run_id}{problem}"
    )


def print_history(history: History, console: Console) -> None:
    """One line per event, oldest first, then the registry's aliases now."""
    for event in history.events:
        console.print(escape_terminal(f"{event.time}  {_summary(event)}"), highlight=False, soft_wrap=True)
    match = "" if history.trail_matches_registry else " (NOT where the decisions leave them: moved outside the gate)"
    line = f"{history.model} aliases now: {_aliases(history.aliases_now)}{match}"
    console.print(escape_terminal(line), highlight=False, soft_wrap=True)


def _run_cell(event: HistoryEvent) -> str:
    """The run id, linked to the MLflow UI when the store is a server (an http(s) URL only)."""
    if event.run_url and event.run_url.startswith(("http://", "https://")):
        return f'<a href="{escape_html(event.run_url)}">{escape_html(event.run_id)}</a>'
    return escape_html(event.run_id)


def _event_row(e: HistoryEvent) -> str:
    """One ``<tr>`` of the events table (every value escaped; the run linked only to an http(s) URL)."""
    decision = e.kind == "decision"
    css = {"pass": "pass", "fail": "fail"}.get(e.verdict or "", "")
    cells = [
        escape_html(e.time),
        escape_html(f"{e.label} ({e.version})" + (f" {e.unit}" if e.unit else "")),
        escape_html(e.champion_label or e.champion or "-") if decision else "-",
        f'<span class="{css}">{escape_html((e.verdict or e.kind).upper())}</span>',
        escape_html(_signed(e)) if decision else "-",
        escape_html(f"{_aliases(e.aliases_before)} -> {_aliases(e.aliases_after)}" if e.promoted else "-"),
        escape_html(_failed(e) if decision else f"replaced by {e.replaced_by}"),
        _run_cell(e),
        escape_html(e.problem or ""),
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


#: the events table's columns
_HEADER = ["time (UTC)", "version", "against", "verdict", "signature", "aliases", "checks", "run", "problem"]


def history_html(history: History) -> str:
    """The history as one HTML page: how it was checked, a table of events and, per decision, its checks."""
    head = "".join(f"<th>{escape_html(h)}</th>" for h in _HEADER)
    events = f"<table><tr>{head}</tr>" + "".join(_event_row(e) for e in history.events) + "</table>"
    keys = ", ".join(short(k) for k in history.trusted_keys) or "none (signatures not checked)"
    match = "yes" if history.trail_matches_registry else "NO: an alias was moved outside the gate"
    how = [["trusted keys", keys], ["aliases now", _aliases(history.aliases_now)], ["trail matches registry", match]]
    body = [_table(["field", "value"], how, numeric_from=2), "<h2>Events (oldest first)</h2>", events]
    for e in history.events:
        if e.kind == "decision" and e.checks:
            body.append(f"<h3>{escape_html(e.time)}: {escape_html(e.label)} (run {escape_html(e.run_id)})</h3>")
            rows = [[check_scope(c.unit), c.name, "yes" if c.passed else "NO", c.detail] for c in e.checks]
            body.append(_table(["unit", "check", "passed", "detail"], rows, numeric_from=4))
    return _page(f"Gate history of {history.model}", body)
