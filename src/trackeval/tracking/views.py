"""What people read in the MLflow UI: a registered version's description and the paired-comparison tables.

- The registered version's **description** (Markdown, shown on its page in the Models tab): the team's version
  name, each unit's gated headline with its 95% CI (``umd/dsc 0.9300 [0.9100, 0.9500]``, n) read from the
  evaluation runs the version points at, and the last gate decision (verdict, baseline, a link to the decision
  run). The short tag ``version`` (``v2``) sits beside ``trackeval.model_version``, so the registry's tag column
  shows the name untruncated.
- The **comparison table** (``mlflow.log_table``: one row per unit x group, with champion, candidate, delta, CI
  and n) on the decision run (``comparison.json``) and on the candidate's parent run
  (``gate/comparison_vs_<champion>.json``), which the run's artifact view renders as a table.

Numbers shown to people are rounded to 4 significant digits (:func:`shown`); metrics keep full precision. This
module formats what the results and decisions hold; it computes no metric.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trackeval.gate.decide import Decision
from trackeval.io.escape import escape_markdown
from trackeval.registry import units
from trackeval.report.checks import shown
from trackeval.report.figures import overlay_figures
from trackeval.results import BenchmarkResult
from trackeval.tracking.client import Mlflow
from trackeval.tracking.descriptions import current_runs, describe_decision, gate_history_lines, run_link
from trackeval.tracking.evidence import version_results
from trackeval.tracking.model_registry import eval_runs, registered_version_name
from trackeval.tracking.tags import TAG

__all__ = ["describe_decision", "describe_version", "log_comparison_tables", "shown", "version_description"]

#: one version's evaluations, ``{unit: result}``
Results = Mapping[str, BenchmarkResult]
#: the results a decision was made on: the candidate's and the champion's (None: no champion)
SidesResults = tuple[Results, Results | None]
#: the short model-version tag holding the team's version name (``v2``)
SHORT_VERSION_TAG = "version"
DECISION_TABLE = "comparison.json"
#: the columns of a comparison table, in order
COLUMNS = ("unit", "dimension", "group", "champion", "candidate", "delta", "ci95_low", "ci95_high", "n", "metric")
#: the most comparison rows a description lists (the decision run's table has them all)
DESCRIPTION_ROWS = 40
#: the longest description a store keeps (MLflow's SQL stores: 5000 characters)
MAX_DESCRIPTION = 5000


def comparison_table(decision: Decision) -> dict[str, list[Any]]:
    """The decision's paired rows as table columns (:data:`COLUMNS`); numbers as shown (4 significant
    digits), the headline row's dimension and group ``(overall)``."""
    table: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for comp in decision.comparisons:
        for row in comp.rows:
            values = (comp.unit, row.dimension or "(overall)", row.group or "(overall)", shown(row.baseline),
                      shown(row.candidate), shown(row.delta), shown(row.ci95_low), shown(row.ci95_high),
                      row.n_pairs, row.key)  # fmt: skip
            for column, value in zip(COLUMNS, values, strict=True):
                table[column].append(value)
    return table


def log_comparison_tables(
    ml: Mlflow, decision_run: str, decision: Decision, cand_mv: Any, results: SidesResults
) -> None:
    """The comparison table and the overlay figures of ``results`` (both versions on the same axes) on the
    decision run (``comparison.json``, ``overlays/``) and on the candidate's parent run
    (``gate/comparison_vs_<champion>.json``, ``gate/overlays_vs_<champion>/``); nothing without a comparison (a
    first version held to the floors)."""
    cand, champ = results
    if champ is None or not any(comp.rows for comp in decision.comparisons):
        return
    table = comparison_table(decision)
    vs = "".join(c if c.isalnum() or c in "._-" else "_" for c in decision.champion or "none")
    parent = getattr(cand_mv, "run_id", None)
    ml.call("log_table", ml.client.log_table, decision_run, table, DECISION_TABLE)
    if parent:
        ml.call("log_table", ml.client.log_table, parent, table, f"gate/comparison_vs_{vs}.json")
    _log_overlays(ml, [(decision_run, "overlays"), *([(parent, f"gate/overlays_vs_{vs}")] if parent else [])],
                  cand, champ)  # fmt: skip


def _log_overlays(
    ml: Mlflow,
    targets: list[tuple[str, str]],
    cand: Mapping[str, BenchmarkResult],
    champ: Mapping[str, BenchmarkResult],
) -> None:
    """The declared figures of every unit both versions were evaluated on, candidate and champion on the same
    axes (:func:`trackeval.report.figures.overlay_figures`), logged under each ``(run, artifact folder)``."""
    with tempfile.TemporaryDirectory(prefix="trackeval-overlays-") as tmp:
        for unit_name in sorted(set(cand) & set(champ)):
            overlay_figures(cand[unit_name], champ[unit_name], Path(tmp) / unit_name.replace("/", "_"))
        if any(Path(tmp).iterdir()):
            for run_id, folder in targets:
                ml.call("log_artifacts", ml.client.log_artifacts, run_id, tmp, folder)


def _headline_lines(
    results: Mapping[str, BenchmarkResult], primary: Mapping[str, str], runs: Mapping[str, str]
) -> list[str]:
    """Each unit's gated headline [95% CI] and n; with ``runs`` (``{unit: UI link}``) a column linking the
    evaluation run the version points at now."""
    linked = bool(runs)
    lines = ["| unit | metric | value [95% CI] | n |" + (" evaluation run |" if linked else ""),
             "| --- | --- | --- | --- |" + (" --- |" if linked else "")]  # fmt: skip
    for unit_name, result in sorted(results.items()):
        key = primary.get(unit_name, "")
        s = result.aggregates.get(key)
        value = "missing" if s is None else f"{shown(s.value)} [{shown(s.ci95_low)}, {shown(s.ci95_high)}]"
        n = "" if s is None else str(s.n_valid)
        run = runs.get(unit_name, "")
        cell = f" [{run.rsplit('/', 1)[-1][:12]}]({run}) |" if run else (" - |" if linked else "")
        lines.append(f"| {escape_markdown(unit_name)} | {escape_markdown(key)} | {value} | {n} |{cell}")
    return lines


def _comparison_lines(decision: Decision) -> list[str]:
    """The decision's paired rows as a Markdown table (at most :data:`DESCRIPTION_ROWS`, then how many more)."""
    table = comparison_table(decision)
    n = len(table["unit"])
    if not n:
        return []
    champion = escape_markdown(decision.champion or "")
    header = "| unit | group | champion | candidate | delta [95% CI] | n |"
    lines = ["", f"Paired against {champion} (candidate - champion, 95% CI):", "", header, "|---" * 6 + "|"]
    for i in range(min(n, DESCRIPTION_ROWS)):
        dim, group = table["dimension"][i], table["group"][i]
        group = group if dim == "(overall)" else f"{dim}={group}"
        sign = "+" if table["delta"][i][0].isdigit() else ""
        delta = f"{sign}{table['delta'][i]} [{table['ci95_low'][i]}, {table['ci95_high'][i]}]"
        names = " | ".join(escape_markdown(c) for c in (table["unit"][i], group))  # user data; numbers are ours
        lines.append(f"| {names} | {table['champion'][i]} | {table['candidate'][i]} | {delta} | {table['n'][i]} |")
    if n > DESCRIPTION_ROWS:
        lines.append(f"({n - DESCRIPTION_ROWS} more rows in the decision run's {DECISION_TABLE})")
    return lines


def version_description(
    model: str,
    mv: Any,
    results: Mapping[str, BenchmarkResult],
    primary: Mapping[str, str],
    decision: Decision | None = None,
    decision_link: str = "",
    *,
    runs: Mapping[str, str] | None = None,
    history: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> str:
    """The Markdown description of registered version ``mv`` (module docstring). ``primary``: ``{unit: gated
    headline key}``; ``decision``: its last gate decision (its verdict, reasons and paired rows are listed) and
    ``decision_link`` the UI link of that decision's run. ``runs``: ``{unit: UI link}`` of the evaluation runs
    the version points at (its current evidence); ``notes``: Markdown paragraphs under the headline table;
    ``history``: the lines of its gate history (:func:`~trackeval.tracking.descriptions.gate_history_lines`),
    listed before the paired rows (a description cut at :data:`MAX_DESCRIPTION` loses paired rows first)."""
    label = registered_version_name(mv)
    lines = [f"**{escape_markdown(label)}**: version {mv.version} of `{escape_markdown(model)}` (trackeval)", ""]
    lines += _headline_lines(results, primary, runs or {}) if results else ["no evaluation tracked yet"]
    for note in notes:
        lines += ["", note]
    if decision is not None:
        reasons = escape_markdown("; ".join(decision.reasons) or "all checks passed")
        lines += ["", f"Gate: **{decision.verdict.upper()}** ({reasons})"]
        if decision_link:
            lines.append(f"[decision run]({decision_link})")
    lines += history
    if decision is not None:
        lines += _comparison_lines(decision)
    return "\n".join(lines) + "\n"


def declared_primary() -> dict[str, str]:
    """``{unit: headline key}`` of the registered units' declared primary metrics (``umd`` -> ``umd/dsc``): what a
    version's description shows before a gate decision names the gate's own (``gate.primary_metrics``).

    >>> declared_primary()["umd"], declared_primary()["xray/cls"]
    ('umd/dsc', 'xray/cls/auroc')
    """
    return {name: f"{name}/{spec.primary.metric}" for name, spec in units().items()}


def _current_evidence(ml: Mlflow, mv: Any) -> tuple[dict[str, str], list[str]]:
    """``{unit: UI link}`` of the evaluation runs ``mv`` points at, and a note when one of them is not under the
    version's Source Run (the run it was registered from: after ``track --replace`` an earlier one)."""
    runs = current_runs(ml, mv)
    links = {unit: run_link(r.info.experiment_id, r.info.run_id) for unit, r in runs.items()}
    source = getattr(mv, "run_id", None)
    moved = sorted(u for u, r in runs.items() if source and r.data.tags.get("mlflow.parentRunId") != source)
    if not moved:
        return links, []
    note = (
        f"Current evidence: the evaluation runs linked above. The version's Source Run is the run it was first "
        f"registered from; {escape_markdown(', '.join(moved))} was tracked again since (`trackeval track --replace`), "
        "and the replaced runs are named `... (replaced)`."
    )
    return links, [note]


def _stale(ml: Mlflow, mv: Any) -> str | None:
    """The UI link of ``mv``'s last decision run when it was made on other evaluation runs than the ones ``mv``
    points at now (``track --replace`` since), else None (also when never gated)."""
    run_id = mv.tags.get(TAG + "gate.decision_run")
    if not run_id:
        return None
    run = ml.call("get_run", ml.client.get_run, run_id)
    current = ",".join(f"{u}={r}" for u, r in eval_runs(mv).items())
    if run.data.params.get("candidate_runs", current) == current:
        return None
    return run_link(run.info.experiment_id, run_id)


def describe_version(
    ml: Mlflow,
    name: str,
    mv: Any,
    primary: Mapping[str, str],
    decision: tuple[Decision, str] | None = None,
    results: Results | None = None,
) -> None:
    """Set ``mv``'s description and short ``version`` tag from the evaluations it points at (``results`` when
    the caller has read them already), their runs (linked: the current evidence), its gate history and
    ``decision`` (its last gate decision and that decision's run id), only what changed. ``primary``: ``{unit:
    headline key}`` shown per unit. Without ``decision``, a version already gated keeps its description (the gate
    writes it, ``track`` only before the first decision), unless its evaluations were replaced since that
    decision: the description then shows the current evidence and says the version is not gated on it."""
    mv = ml.call("get_model_version", ml.client.get_model_version, name, mv.version)  # fresh tags
    stale = None if decision is not None else _stale(ml, mv)
    if decision is None and mv.tags.get(TAG + "gate.decision_run") and stale is None:
        return
    results = version_results(ml, mv) if results is None else results
    runs, notes = _current_evidence(ml, mv)
    if stale:
        notes.append(f"Gate: not gated on the current evidence yet; the [last decision]({stale}) was made on "
                     "replaced evaluations (run `trackeval promote`).")  # fmt: skip
    link = run_link(ml.experiment_id(), decision[1]) if decision else ""
    history = gate_history_lines(ml, name, mv)
    text = version_description(
        name, mv, results, primary, decision[0] if decision else None, link, runs=runs, history=history, notes=notes
    )
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 60].rsplit("\n", 1)[0] + f"\n\n(cut; the full table: {DECISION_TABLE})\n"
    if (mv.description or "") != text:
        ml.call("update_model_version", ml.client.update_model_version, name, mv.version, description=text)
    label = registered_version_name(mv)
    if mv.tags.get(SHORT_VERSION_TAG) != label:
        ml.call("set_model_version_tag", ml.client.set_model_version_tag, name, mv.version, SHORT_VERSION_TAG, label)
