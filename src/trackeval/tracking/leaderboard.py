"""The leaderboard: every tracked model version x the primary metric of every benchmark unit, from MLflow 3
LoggedModels (``search_logged_models``), with CIs and the registry's ``@champion`` marked.

A version's numbers are those of the evaluation runs its registered version points at (``trackeval.eval_run.<unit>``,
set last by ``track``): metrics an interrupted or failed ``track`` linked to the LoggedModel are never shown, and
after ``track --replace`` the leaderboard moves exactly when the registry does."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trackeval.errors import InputError
from trackeval.gate.policy import UnitPolicy
from trackeval.report.leaderboard import Cell, Leaderboard, Row
from trackeval.tracking.client import Mlflow, quote
from trackeval.tracking.registry import registered_version_name, resolve_version
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


def _pointed_runs(ml: Mlflow, name: str) -> dict[str, set[str]]:
    """``{trackeval version: {evaluation run ids its eval_run tags point at}}`` of model ``name`` (the
    lowest-numbered registered version when two carry one trackeval version, as
    :func:`~trackeval.tracking.registry.find_version` picks)."""
    found = ml.call("search_model_versions", ml.client.search_model_versions, f"name = {quote(name)}")
    out: dict[str, set[str]] = {}
    for mv in sorted(found, key=lambda v: int(v.version), reverse=True):  # the lowest number is written last
        if VERSION_TAG in mv.tags:
            out[mv.tags[VERSION_TAG]] = {v for k, v in mv.tags.items() if k.startswith(EVAL_RUN_TAG)}
    return out


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
    from trackeval.tracking.missing import run_missing

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
    pointed: dict[str, dict[str, set[str]]] = {}
    rows = []
    for m in models:
        name, version = m.tags.get(TAG + "model_name", ""), m.tags[TAG + "model_version"]
        if name not in pointed:
            pointed[name] = _pointed_runs(ml, name)
        latest = _latest(m, pointed[name].get(version, set()))
        cells = _cells(latest, policies, units, missing)
        rows.append(
            Row(model=m.tags[TAG + "model_name"], version=version, model_id=m.model_id, champion=False, cells=cells)
        )
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
