"""The leaderboard: every tracked model version x the primary metric of every benchmark unit, from MLflow 3
LoggedModels (``search_logged_models``), with CIs and the registry's ``@champion`` marked.

A version's numbers are those of the evaluation runs its registered version points at (``trackeval.eval_run.<unit>``,
set last by ``track``): metrics an interrupted or failed ``track`` linked to the LoggedModel are never shown, and
after ``track --replace`` the leaderboard moves exactly when the registry does. The gate column says what the
version's last gate decision was and, when it failed, its first failed check with its numbers (:func:`gate_cell`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trackeval.errors import InputError
from trackeval.gate.policy import UnitPolicy
from trackeval.report.leaderboard_table import Cell, Leaderboard, Row
from trackeval.tracking.client import Mlflow, quote
from trackeval.tracking.descriptions import decision_summary
from trackeval.tracking.missing import run_missing
from trackeval.tracking.model_registry import eval_runs, registered_version_name, resolve_version
from trackeval.tracking.tags import EVAL_RUN_TAG, TAG, VERSION_TAG


def _champions(ml: Mlflow, names: set[str]) -> dict[str, str]:
    """``{model name: trackeval version of @champion}`` for the models that have one."""
    out = {}
    for name in sorted(names):
        try:
            mv = resolve_version(ml, name, "@champion")
        except InputError:
            continue
        out[name] = registered_version_name(mv)
    return out


def _versions(ml: Mlflow, name: str) -> dict[str, Any]:
    """``{trackeval version: registered version}`` of model ``name`` (the lowest-numbered registered version when
    two carry one trackeval version, as :func:`~trackeval.tracking.model_registry.find_version` picks)."""
    found = ml.call("search_model_versions", ml.client.search_model_versions, f"name = {quote(name)}")
    out: dict[str, Any] = {}
    for mv in sorted(found, key=lambda v: int(v.version), reverse=True):  # the lowest number is written last
        if VERSION_TAG in mv.tags:
            out[mv.tags[VERSION_TAG]] = mv
    return out


def _pointed(mv: Any | None) -> set[str]:
    """The evaluation run ids registered version ``mv`` points at (its ``eval_run`` tags)."""
    return set() if mv is None else {v for k, v in mv.tags.items() if k.startswith(EVAL_RUN_TAG)}


def gate_cell(ml: Mlflow, mv: Any | None) -> str:
    """The gate column of registered version ``mv``: its last decision in a few words (``pass``, ``fail:
    worst_group umd organ=heart -0.2000 [-0.2000, -0.2000]``: the decision run's ``trackeval.gate.summary``, see
    :func:`~trackeval.report.checks.gate_summary`), ``(evidence replaced since)`` appended when the version's
    evaluations changed after it (``track --replace``), ``not gated`` without a decision."""
    run_id = None if mv is None else mv.tags.get(TAG + "gate.decision_run")
    if not run_id:
        return "not gated"
    run = ml.call("get_run", ml.client.get_run, run_id)
    current = ",".join(f"{u}={r}" for u, r in eval_runs(mv).items())
    stale = run.data.params.get("candidate_runs", current) != current
    return decision_summary(ml, run) + (" (evidence replaced since)" if stale else "")


def _latest(model: Any, tracked: set[str]) -> dict[str, Any]:
    """``{key: metric}``: the latest value per key among the metrics linked to LoggedModel ``model`` by the
    evaluation runs in ``tracked`` (a tie in timestamp: the one listed last)."""
    latest: dict[str, Any] = {}
    for metric in model.metrics or []:
        if getattr(metric, "run_id", None) not in tracked:
            continue
        if metric.key not in latest or metric.timestamp >= latest[metric.key].timestamp:
            latest[metric.key] = metric
    return latest


def _cells(
    latest: Mapping[str, Any],
    policies: Mapping[str, UnitPolicy],
    units: Sequence[str],
    missing: Callable[[str | None], int],
) -> dict[str, Cell]:
    """``{unit: cell}`` of every unit (of ``units``, when given) whose primary metric has a value in ``latest``;
    ``missing``: the missing predictions of an evaluation run (0 for None)."""
    values = {k: metric.value for k, metric in latest.items()}
    cells = {}
    for unit, policy in policies.items():
        if units and unit not in units or policy.key not in values:
            continue
        cells[unit] = Cell(
            value=values[policy.key],
            ci95_low=values.get(policy.key + "/ci95_low"),
            ci95_high=values.get(policy.key + "/ci95_high"),
            n_missing_predictions=missing(getattr(latest[policy.key], "run_id", None)),
        )
    return cells


def leaderboard(
    ml: Mlflow, policies: Mapping[str, UnitPolicy], model: str | None = None, units: Sequence[str] = ()
) -> Leaderboard:
    """Collect the leaderboard of ``model`` (every model when None), restricted to ``units`` when given.

    Values come from the metrics linked to each version's LoggedModel by the evaluation runs its registered
    version points at (latest value per key; module docstring); a unit without a value for any listed version is
    left out of the columns. A cell's ``n_missing_predictions`` is read from the
    evaluation run its value was logged by (:func:`~trackeval.tracking.missing.run_missing`).
    """
    runs: dict[str, int] = {}

    def missing(run_id: str | None) -> int:
        if not run_id:
            return 0
        if run_id not in runs:
            runs[run_id] = run_missing(ml.call("get_run", ml.client.get_run, run_id))
        return runs[run_id]

    found = ml.call("search_logged_models", ml.client.search_logged_models, [ml.experiment_id()])
    models = [
        m
        for m in found
        if TAG + "model_version" in m.tags and (model is None or m.tags.get(TAG + "model_name") == model)
    ]
    registered: dict[str, dict[str, Any]] = {}
    rows = []
    for m in models:
        name, version = m.tags.get(TAG + "model_name", ""), m.tags[TAG + "model_version"]
        if name not in registered:
            registered[name] = _versions(ml, name)
        mv = registered[name].get(version)
        cells = _cells(_latest(m, _pointed(mv)), policies, units, missing)
        gate = gate_cell(ml, mv)
        rows.append(Row(model=name, version=version, model_id=m.model_id, champion=False, cells=cells, gate=gate))
    champions = _champions(ml, {r.model for r in rows})
    for r in rows:
        r.champion = champions.get(r.model) == r.version
    rows.sort(key=lambda r: (r.model, r.version))
    shown = sorted({u for r in rows for u in r.cells})
    return Leaderboard(
        units=shown,
        keys={u: policies[u].key for u in shown},
        higher_is_better={u: policies[u].higher_is_better for u in shown},
        rows=rows,
    )
