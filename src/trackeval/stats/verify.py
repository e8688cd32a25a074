"""Verifying a result's aggregates against its own case records: what the records determine is recomputed, with
the unit's declared reduction (:mod:`trackeval.stats.reduce`), and must agree.

A results folder is evidence that ``track`` logs and ``promote`` gates on, so it is checked, not trusted
(:func:`trackeval.io.results_folder.read_results_files` calls :func:`verify_aggregates`; the files themselves are
checked by :mod:`trackeval.io.evidence`).

Recomputable keys (``<unit>`` is ``benchmark`` or ``benchmark/task``, ``<kind>`` the result's ``item_kind``,
``<metric>`` a per-item metric name found in the case records, possibly with ``/`` as in 3D-MIR's
``group/ap_at_10``):

=========================================================== ==========================================================
key                                                          recomputed as
=========================================================== ==========================================================
``<unit>/<metric>/by_<kind>/<item>``                         mean of the non-null ``<item>/<metric>`` values over all
                                                             cases; its ``n_valid`` = their number
``<unit>/<metric>/by_<g>/<v>/by_<kind>/<item>``              the same over the cases whose group ``<g>`` is ``<v>``
``<unit>/<metric>`` and ``<unit>/<metric>/by_<g>/<v>``       when the result has their ``/by_<kind>/<item>`` breakdown:
                                                             the headline of those items under the metric's declared
                                                             reduction (:attr:`trackeval.spec.MetricInfo.reduction`):
                                                             ``item_mean`` (UMD, 3D-MIR, X-ray seg) or ``case_mean``
                                                             (IMIS image level); a ``corpus`` metric is not checked
``data.n_cases``, ``summary.n_cases``                        the number of case records
``summary.n_missing_predictions``                            the records with status ``missing_prediction``
=========================================================== ==========================================================

The declared reduction is looked up with ``declared`` (:func:`trackeval.registry.metric_info`, passed
in by the caller: this layer does not know the registered units). A headline that agrees with the other rule but
not with its unit's declared one is refused. When the unit is not registered here (no ``declared`` given, or it
knows no such metric: a plug-in not installed), the stored headline may be either rule's value.

Everything else is not recomputable from the records and is not checked here: confidence bounds (they need the
unit's resampling scheme), corpus metrics (BLEU, AUROC, mAP, operating points) and keys whose metric name is not a
per-item metric of the records. A null stored value agrees only with a recomputed NaN (nothing valid).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import numpy as np

from trackeval.errors import InputError
from trackeval.results import BenchmarkResult
from trackeval.spec import MetricInfo
from trackeval.stats.reduce import MeanReduction, headline, nan_mean

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ABS_TOL", "REL_TOL", "MetricLookup", "close", "verify_aggregates"]

#: relative tolerance of every comparison of a stored number with a recomputed one: metrics.json keeps 10
#: significant digits, and a recomputed mean may differ from the stored one in its last bits (summation order)
REL_TOL = 1e-9
ABS_TOL = 1e-12

#: ``(unit, metric path relative to the unit) -> its declaration or None``, as
#: :func:`trackeval.registry.metric_info`
MetricLookup = Callable[[str, str], MetricInfo | None]

_RULES: dict[MeanReduction, str] = {"item_mean": "the mean over {kind} means", "case_mean": "the mean over cases"}


def close(a: float, b: float) -> bool:
    """Equal within :data:`REL_TOL` / :data:`ABS_TOL`; NaN equals NaN (both "nothing valid")."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def verify_aggregates(result: BenchmarkResult, *, file: Path, declared: MetricLookup | None = None) -> None:
    """Recompute what the case records determine (see the module docstring) and compare it with the stored
    aggregates and counts; ``declared`` gives each metric's reduction (None: every unit unregistered, either
    rule accepted).

    Raises:
        InputError: naming ``file`` and, as ``field``, the first aggregate key (or count) that contradicts the
            case records.
    """
    _verify_counts(result, file)
    table = _CaseTable(result)
    for key, stored in result.aggregates.items():
        parsed = table.parse(key)
        if parsed is None:
            continue
        metric, group, item = parsed
        value = math.nan if stored.value is None else stored.value
        if item is not None:
            mean, n_valid = table.item_mean(metric, group, item)
            if not close(value, mean) or stored.n_valid != n_valid:
                raise InputError(
                    f"aggregate {key} = {_fmt(value)} (n_valid {stored.n_valid}) contradicts its case records, "
                    f"which give {_fmt(mean)} (n_valid {n_valid})",
                    file=str(file),
                    field=key,
                )
            continue
        items = table.breakdown_items(key)
        rules = _rules(declared, result.unit, metric)
        if items and rules:
            _verify_headline(table, key, value, table.headlines(metric, group, items), rules, file)


def _rules(declared: MetricLookup | None, unit: str, metric: str) -> list[MeanReduction]:
    """The reductions a stored headline of ``metric`` may follow: the declared one, both when the unit or the
    metric is not registered here, none for a ``corpus`` metric (not recomputable)."""
    info = None if declared is None else declared(unit, metric)
    if info is None:
        return list(_RULES)
    return [] if info.reduction == "corpus" else [cast(MeanReduction, info.reduction)]


def _verify_headline(
    table: _CaseTable,
    key: str,
    value: float,
    recomputed: dict[MeanReduction, float],
    rules: list[MeanReduction],
    file: Path,
) -> None:
    """``value`` must agree with the recomputed headline of one of ``rules``."""
    if any(close(value, recomputed[r]) for r in rules):
        return
    kind = table.result.item_kind
    if len(rules) == 1:
        rule = rules[0]
        gives = f"{_fmt(recomputed[rule])} ({_RULES[rule].format(kind=kind)}, its declared {rule} reduction)"
    elif close(*recomputed.values()):
        gives = f"{_fmt(recomputed['item_mean'])} (the mean over {kind} means, or over cases)"
    else:
        macro, per_case = recomputed["item_mean"], recomputed["case_mean"]
        gives = f"{_fmt(macro)} or {_fmt(per_case)} (the mean over {kind} means, or over cases)"
    raise InputError(
        f"aggregate {key} = {_fmt(value)} contradicts its case records, which give {gives}", file=str(file), field=key
    )


def _fmt(x: float) -> str:
    return "null" if math.isnan(x) else repr(x)


def _verify_counts(result: BenchmarkResult, file: Path) -> None:
    n = len(result.cases)
    missing = result.cases.field("status").count("missing_prediction")
    checks = [("data.n_cases", result.data.n_cases, n)]
    if "n_cases" in result.summary:
        checks.append(("summary.n_cases", result.summary["n_cases"], n))
    if "n_missing_predictions" in result.summary:
        checks.append(("summary.n_missing_predictions", result.summary["n_missing_predictions"], missing))
    for field, stored, actual in checks:
        if stored != actual:
            raise InputError(
                f"{field} = {stored} contradicts the case records, which give {actual}", file=str(file), field=field
            )


class _CaseTable:
    """The case records as ``(cases x items)`` matrices per metric (:func:`~trackeval.results.item_matrix`: NaN =
    null or absent), built lazily."""

    def __init__(self, result: BenchmarkResult) -> None:
        self.result = result
        self.unit = result.unit
        self.by_kind = f"by_{result.item_kind}"
        self.items = result.cases.sorted_items()
        self.column = {item: j for j, item in enumerate(self.items)}
        self.metrics = set(result.cases.metric_names())
        self.groups = {g: np.asarray(values, dtype=object) for g, values in result.cases.groups.items()}
        self._matrices: dict[str, np.ndarray] = {}

    def parse(self, key: str) -> tuple[str, tuple[str, str] | None, str | None] | None:
        """``(metric, (group, value) or None, item or None)`` of a recomputable key, else ``None``."""
        if not key.startswith(self.unit + "/"):
            return None
        tokens = key[len(self.unit) + 1 :].split("/")
        item = None
        if len(tokens) >= 3 and tokens[-2] == self.by_kind:
            item, tokens = tokens[-1], tokens[:-2]
        if "/".join(tokens) in self.metrics:
            return "/".join(tokens), None, item
        if len(tokens) >= 3 and tokens[-2].startswith("by_") and "/".join(tokens[:-2]) in self.metrics:
            group = tokens[-2][3:]
            if group in self.groups and (self.groups[group] == tokens[-1]).any():
                return "/".join(tokens[:-2]), (group, tokens[-1]), item
        return None

    def matrix(self, metric: str, group: tuple[str, str] | None) -> np.ndarray:
        """``(cases x items)`` values of ``metric``, the cases of ``group`` only when given."""
        if metric not in self._matrices:
            self._matrices[metric] = self.result.cases.matrix(metric, self.items)
        m = self._matrices[metric]
        if group is None:
            return m
        return m[self.groups[group[0]] == group[1]]

    def item_mean(self, metric: str, group: tuple[str, str] | None, item: str) -> tuple[float, int]:
        """Mean and number of the non-null values of ``item`` (NaN, 0 when there are none)."""
        if item not in self.column:
            return math.nan, 0
        col = self.matrix(metric, group)[:, self.column[item]]
        return float(nan_mean(col)), int((~np.isnan(col)).sum())

    def breakdown_items(self, key: str) -> list[str]:
        """Items of the ``key/by_<kind>/<item>`` aggregates present in the result."""
        prefix = f"{key}/{self.by_kind}/"
        return [
            k[len(prefix) :] for k in self.result.aggregates if k.startswith(prefix) and "/" not in k[len(prefix) :]
        ]

    def headlines(self, metric: str, group: tuple[str, str] | None, items: list[str]) -> dict[MeanReduction, float]:
        """The headline over ``items`` under each mean reduction."""
        m = self.matrix(metric, group)[:, [self.column[i] for i in items if i in self.column]]
        return {rule: headline(m, rule) for rule in _RULES}
