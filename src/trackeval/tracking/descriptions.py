"""What the MLflow UI says where people look: the description of a gate decision run, the gate history of a
registered version, and the marks on evaluation runs that ``track --replace`` replaced.

- A **decision run's description** (the run tag ``mlflow.note.content``, shown on the run's page) states the
  verdict, both versions (with links to their registry pages), the failed checks with their numbers (a first
  version's pass: the floor it passed), and links the overlay figures, the comparison table and the decision's
  own files. Its tag ``trackeval.gate.summary`` holds the same in a few words (:func:`~trackeval.report.checks.
  gate_summary`: ``pass``, ``fail: worst_group umd organ=heart -0.2000 [-0.2000, -0.2000]``): the leaderboard's
  gate column and the version's gate history read it.
- A **registered version's gate history** (:func:`gate_history_lines`): every decision recorded with the version
  as candidate, newest first, with its verdict, the champion it was gated against, its summary, whether it was
  made on the version's current evidence, and a link to its run.
- **Replaced evaluations** (:func:`mark_replaced`): when a version's ``trackeval.eval_run.<unit>`` tag points at
  a run tagged ``trackeval.replaces=<old run>``, the old run, and its parent run when none of the parent's
  evaluations is current any more, get ``trackeval.replaced_by=<current run>`` (the parent: the current run's
  parent), the name ``<...> (replaced)`` and a description that links the current run. A run that becomes
  current again (a revert) loses the marks. Derived from the registry each time ``track`` runs, so a ``track``
  interrupted between the re-pointing and the marks is completed by the next one.

Links are relative to the MLflow UI's page (``#/experiments/<id>/runs/<run>``, ``#/models/<name>/versions/<n>``):
they work on whatever host and path prefix serves the UI, and hold no credential.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote as url_quote

from trackeval.gate.decide import Decision
from trackeval.io.escape import escape_markdown
from trackeval.report.checks import failed_checks, gate_summary, short_check
from trackeval.tracking.attestations import read_record
from trackeval.tracking.client import Mlflow, quote
from trackeval.tracking.model_registry import eval_runs, find_version, registered_version_name
from trackeval.tracking.tags import KIND_GATE, TAG

#: MLflow's run description (shown on the run's page, editable there)
NOTE_TAG = "mlflow.note.content"
#: decision-run tag: the decision in a few words (:func:`~trackeval.report.checks.gate_summary`)
SUMMARY_TAG = TAG + "gate.summary"
#: evaluation / parent run tag: the run that replaced it as the version's evidence
REPLACED_BY_TAG = TAG + "replaced_by"
#: evaluation-run tag (set by the registry when ``track --replace`` re-points a version): the run it replaced
REPLACES_TAG = TAG + "replaces"
#: appended to the name of a replaced run
REPLACED_SUFFIX = " (replaced)"
#: how a replaced run's description starts (a description that does not is not trackeval's, and is kept)
REPLACED_NOTE = "**Replaced**"
#: the most decisions a version's gate history lists
HISTORY_ROWS = 10
#: the longest run description written (MLflow's SQL stores keep 5000 characters of a description)
MAX_NOTE = 5000


def run_link(experiment_id: str, run_id: str, artifact: str = "") -> str:
    """The MLflow UI's relative link to a run's page, or to one of its artifacts.

    >>> run_link("1", "abc"), run_link("1", "abc", "overlays/umd/x.png")
    ('#/experiments/1/runs/abc', '#/experiments/1/runs/abc/artifacts/overlays/umd/x.png')
    """
    base = f"#/experiments/{experiment_id}/runs/{run_id}"
    return f"{base}/artifacts/{url_quote(artifact)}" if artifact else base


def version_link(name: str, version: Any) -> str:
    """The MLflow UI's relative link to a registered version's page (the model name percent-encoded).

    >>> version_link("seg", 2), version_link("my seg", "3")
    ('#/models/seg/versions/2', '#/models/my%20seg/versions/3')
    """
    return f"#/models/{url_quote(name, safe='')}/versions/{version}"


def _cut(text: str) -> str:
    if len(text) <= MAX_NOTE:
        return text
    return text[: MAX_NOTE - 40].rsplit("\n", 1)[0] + "\n\n(cut; see decision.md)\n"


# ------------------------------------------------------------------------------------------ decision runs


def _side(name: str, label: str | None, mv: Any | None) -> str:
    if mv is None:
        return "none (first version: held to the absolute floors)"
    return f"{escape_markdown(label or registered_version_name(mv))} ({_version_ref(name, mv)})"


def _version_ref(name: str, mv: Any) -> str:
    """``[version 2](#/models/seg/versions/2)``."""
    return f"[version {mv.version}]({version_link(name, mv.version)})"


def _figure_links(ml: Mlflow, experiment_id: str, run_id: str) -> list[str]:
    """``[umd: umd__dsc__by_organ__overlay.png](link)`` per overlay figure logged on the decision run."""
    links = []
    for folder in ml.call("list_artifacts", ml.client.list_artifacts, run_id, "overlays"):
        if not folder.is_dir:
            continue
        for item in ml.call("list_artifacts", ml.client.list_artifacts, run_id, folder.path):
            if item.path.endswith(".png"):
                unit, file = item.path.split("/")[-2:]
                link = run_link(experiment_id, run_id, item.path)
                links.append(f"- [{escape_markdown(unit)}: {escape_markdown(file)}]({link})")
    return links


def decision_description(
    decision: Decision, cand_mv: Any, champ_mv: Any | None, experiment_id: str, run_id: str, figures: list[str]
) -> str:
    """The Markdown description of decision run ``run_id`` (module docstring); ``figures``: the overlay figures'
    link lines (:func:`_figure_links`)."""
    name = decision.model
    lines = [
        f"**{decision.verdict.upper()}**: gate of `{escape_markdown(name)}` "
        f"{_side(name, decision.candidate, cand_mv)} against champion {_side(name, decision.champion, champ_mv)}",
        "",
    ]
    failed = failed_checks(decision)
    if failed:
        lines += [f"Failed checks ({len(failed)}):", "", *(f"- {escape_markdown(f)}" for f in failed), ""]
    passed = [c for c in decision.checks if c.passed]
    if passed:
        lines += [f"Passed checks ({len(passed)}):", ""]
        lines += [f"- {escape_markdown(short_check(decision, c))}" for c in passed[:20]]
        lines.append("")
    lines += [f"Note: {escape_markdown(n)}" for n in decision.notes]
    if figures:
        lines += ["", "Overlay figures (both versions on the same axes):", "", *figures]
    files = ["decision.md", "decision.html"]
    if decision.champion is not None and any(c.rows for c in decision.comparisons):
        files.insert(0, "comparison.json")  # the paired table (log_comparison_tables)
    links = [f"[{f}]({run_link(experiment_id, run_id, f)})" for f in files]
    lines += ["", "Files: " + ", ".join(links)]
    return _cut("\n".join(lines) + "\n")


def describe_decision(ml: Mlflow, run_id: str, decision: Decision, cand_mv: Any, champ_mv: Any | None) -> None:
    """Write decision run ``run_id``'s description and its ``trackeval.gate.summary`` tag (module docstring),
    after its artifacts are logged (the figures it links are listed from the run)."""
    experiment_id = ml.call("get_run", ml.client.get_run, run_id).info.experiment_id
    figures = _figure_links(ml, experiment_id, run_id)
    text = decision_description(decision, cand_mv, champ_mv, experiment_id, run_id, figures)
    ml.call("set_tag", ml.client.set_tag, run_id, SUMMARY_TAG, gate_summary(decision)[:5000])
    ml.call("set_tag", ml.client.set_tag, run_id, NOTE_TAG, text)


# ------------------------------------------------------------------------------------------ gate history


def decision_summary(ml: Mlflow, run: Any) -> str:
    """The ``trackeval.gate.summary`` of decision run ``run``, or, for a decision recorded before the tag, the
    same computed from its ``decision.json`` (its verdict tag alone when that cannot be read)."""
    summary = run.data.tags.get(SUMMARY_TAG)
    if summary:
        return str(summary)
    decision = read_record(ml, run).decision
    return str(run.data.tags.get(TAG + "gate.verdict", "?")) if decision is None else gate_summary(decision)


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M")


def gate_history_lines(ml: Mlflow, name: str, mv: Any, limit: int = HISTORY_ROWS) -> list[str]:
    """A Markdown table of the decisions recorded with registered version ``mv`` of ``name`` as candidate,
    newest first (at most ``limit``, then how many more); [] when there is none."""
    runs = ml.search(
        f"tags.`{TAG}kind` = {quote(KIND_GATE)} and tags.`{TAG}model_name` = {quote(name)} "
        f"and tags.`{TAG}gate.candidate` = {quote(str(mv.version))}"
    )
    if not runs:
        return []
    labels: dict[str, str] = {}
    current = ",".join(f"{u}={r}" for u, r in eval_runs(mv).items())
    lines = [
        "",
        "Gate history (newest first):",
        "",
        "| decided (UTC) | verdict | against | checks | on evidence | decision run |",
        "|---" * 6 + "|",
    ]
    for run in runs[:limit]:
        tags = run.data.tags
        champion = str(tags.get(TAG + "gate.champion", ""))
        against = _label(ml, name, champion, labels) if champion else "none (floors)"
        summary = decision_summary(ml, run)
        evidence = "current" if run.data.params.get("candidate_runs", "") == current else "replaced"
        link = f"[{run.info.run_id[:12]}]({run_link(run.info.experiment_id, run.info.run_id)})"
        verdict = str(tags.get(TAG + "gate.verdict", "?")).upper()
        lines.append(
            f"| {_when(run.info.start_time)} | {verdict} | {escape_markdown(against)} | {escape_markdown(summary)} "
            f"| {evidence} | {link} |"
        )
    if len(runs) > limit:
        lines.append(f"({len(runs) - limit} older decision(s): runs tagged {TAG}gate.candidate={mv.version})")
    return lines


def _label(ml: Mlflow, name: str, version: str, labels: dict[str, str]) -> str:
    """``v1 (version 1)``: the team's name of registry version ``version`` (cached in ``labels``)."""
    if version not in labels:
        try:
            mv = ml.call("get_model_version", ml.client.get_model_version, name, version)
            labels[version] = f"{registered_version_name(mv)} (version {version})"
        except Exception:  # noqa: BLE001 - a deleted version: its number is all there is to show
            labels[version] = f"version {version}"
    return labels[version]


# ------------------------------------------------------------------------------------------ replaced runs


def _replaced_note(name: str, mv: Any, what: str, current: Any) -> str:
    link = run_link(current.info.experiment_id, current.info.run_id)
    return (
        f"{REPLACED_NOTE} (trackeval): {what} is no longer the evidence of `{escape_markdown(name)}` "
        f"{escape_markdown(registered_version_name(mv))} ({_version_ref(name, mv)}).\n\n"
        f"Current run: [{current.info.run_id}]({link}) (`{escape_markdown(current.info.run_name or '')}`), "
        "tracked with `trackeval track --replace`. This run is kept: gate decisions recorded on it keep pointing "
        "at it.\n"
    )


def _mark(ml: Mlflow, run: Any, current: Any, note: str) -> bool:
    """Tag, rename and describe ``run`` as replaced by ``current``; False when it already is."""
    run_id, name = run.info.run_id, run.info.run_name or ""
    tags = run.data.tags
    if tags.get(REPLACED_BY_TAG) == current.info.run_id and name.endswith(REPLACED_SUFFIX):
        return False
    ml.call("set_tag", ml.client.set_tag, run_id, REPLACED_BY_TAG, current.info.run_id)
    if not str(tags.get(NOTE_TAG, "")).strip() or str(tags.get(NOTE_TAG)).startswith(REPLACED_NOTE):
        ml.call("set_tag", ml.client.set_tag, run_id, NOTE_TAG, note)
    if not name.endswith(REPLACED_SUFFIX):
        ml.call("update_run", ml.client.update_run, run_id, name=name + REPLACED_SUFFIX)
    return True


def _unmark(ml: Mlflow, run: Any) -> None:
    """Take the replaced marks off ``run``, current again (a revert)."""
    run_id, name, tags = run.info.run_id, run.info.run_name or "", run.data.tags
    if REPLACED_BY_TAG in tags:
        ml.call("delete_tag", ml.client.delete_tag, run_id, REPLACED_BY_TAG)
    if str(tags.get(NOTE_TAG, "")).startswith(REPLACED_NOTE):
        ml.call("delete_tag", ml.client.delete_tag, run_id, NOTE_TAG)
    if name.endswith(REPLACED_SUFFIX):
        ml.call("update_run", ml.client.update_run, run_id, name=name[: -len(REPLACED_SUFFIX)])


def _unmark_current(ml: Mlflow, current: Mapping[str, Any], parents: set[str]) -> None:
    """Take the replaced marks off the current evaluation runs and their parents (current again: a revert)."""
    runs = [*current.values(), *(ml.call("get_run", ml.client.get_run, p) for p in sorted(parents))]
    for run in runs:
        if REPLACED_BY_TAG in run.data.tags or (run.info.run_name or "").endswith(REPLACED_SUFFIX):
            _unmark(ml, run)


def _mark_parent(ml: Mlflow, name: str, mv: Any, old: Any, run: Any, parents: set[str]) -> None:
    """Mark the parent of replaced run ``old`` as replaced by the parent of current run ``run``, unless one of
    its evaluations is still current (a parent of ``parents``)."""
    old_parent = old.data.tags.get("mlflow.parentRunId", "")
    new_parent = run.data.tags.get("mlflow.parentRunId", "")
    if not old_parent or not new_parent or old_parent in parents:
        return
    parent, successor = (ml.call("get_run", ml.client.get_run, r) for r in (old_parent, new_parent))
    _mark(ml, parent, successor, _replaced_note(name, mv, "the evaluation logged under this run", successor))


def mark_replaced(ml: Mlflow, name: str, version: str) -> dict[str, str]:
    """Mark the runs that the current evaluations of ``name``/``version`` replaced, and unmark current ones
    (module docstring). Returns ``{unit: replaced run id}`` of the evaluation runs marked now."""
    mv = find_version(ml, name, version)
    if mv is None:
        return {}
    current = current_runs(ml, mv)
    parents = {r.data.tags.get("mlflow.parentRunId", "") for r in current.values()} - {""}
    _unmark_current(ml, current, parents)
    marked = {}
    for unit, run in sorted(current.items()):
        old_id = run.data.tags.get(REPLACES_TAG)
        if not old_id or old_id == run.info.run_id:
            continue
        old = ml.call("get_run", ml.client.get_run, old_id)
        what = f"this evaluation on {escape_markdown(unit)}"
        if _mark(ml, old, run, _replaced_note(name, mv, what, run)):
            marked[unit] = old_id
        _mark_parent(ml, name, mv, old, run, parents)
    return marked


def current_runs(ml: Mlflow, mv: Any) -> Mapping[str, Any]:
    """``{unit: run}`` of the evaluation runs registered version ``mv`` points at now."""
    return {unit: ml.call("get_run", ml.client.get_run, run_id) for unit, run_id in eval_runs(mv).items()}
