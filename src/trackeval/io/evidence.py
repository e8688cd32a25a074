"""Verifying a results set: the numbers that can be recomputed from the case records are, and must agree.

A results folder is evidence that ``track`` logs and ``promote`` gates on, so it is checked, not trusted
(:func:`trackeval.io.results_folder.read_results` calls everything here):

* :func:`verify_metrics`: ``metrics.json`` holds exactly the keys of the flat metrics derived from results.json,
  each equal to the derived value within the rounding of metrics.json (relative ``1e-9``);
* :func:`verify_cases`: ``cases.parquet`` holds the rows derived from the case records, column by column (values
  compared, not bytes: another pyarrow writes other bytes for the same table);
* :func:`verify_aggregates`: the aggregates and counts that are a plain function of the case records.

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
                                                             the mean over items of the item means (the macro mean of
                                                             ``mean_summaries``: UMD, 3D-MIR, X-ray seg) or the mean
                                                             over cases of each case's item mean (IMIS image level);
                                                             the stored value must be one of the two
``data.n_cases``, ``summary.n_cases``                        the number of case records
``summary.n_missing_predictions``                            the records with status ``missing_prediction``
=========================================================== ==========================================================

Everything else is not recomputable from the records and is not checked here: confidence bounds (they need the
unit's resampling scheme), corpus metrics (BLEU, AUROC, mAP, operating points) and keys whose metric name is not a
per-item metric of the records. A null stored value agrees only with a recomputed NaN (nothing valid).
"""

from __future__ import annotations

import io
import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from trackeval.errors import InputError
from trackeval.io.files import decode_text
from trackeval.results import BenchmarkResult

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

#: relative tolerance of every comparison: metrics.json keeps 10 significant digits, and a recomputed mean may
#: differ from the stored one in its last bits (summation order)
REL_TOL = 1e-9
ABS_TOL = 1e-12


def _close(a: float, b: float) -> bool:
    """Equal within :data:`REL_TOL` / :data:`ABS_TOL`; NaN equals NaN (both "nothing valid")."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def verify_metrics(raw: bytes, expected: dict[str, float], *, file: Path) -> None:
    """Check ``metrics.json`` (its bytes ``raw``) against ``expected``, the metrics derived from results.json.

    Raises:
        InputError: naming ``file`` and, as ``field``, the first key that is missing, extra, not a number or
            different (malformed JSON or a non-object: no field).
    """
    try:
        actual = json.loads(decode_text(raw, file=file))
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", file=str(file)) from exc
    if not isinstance(actual, dict):
        raise InputError("metrics.json must hold a JSON object of {key: number}", file=str(file))
    for key in sorted(expected.keys() | actual.keys()):
        if key not in actual:
            raise InputError(f"metrics.json lacks {key}, which results.json gives", file=str(file), field=key)
        if key not in expected:
            raise InputError(f"metrics.json has {key}, which results.json does not give", file=str(file), field=key)
        value = actual[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"metrics.json holds {value!r} for {key}, not a number", file=str(file), field=key)
        if not _close(float(value), expected[key]):
            raise InputError(
                f"metrics.json says {key} = {value!r}, results.json gives {expected[key]!r}", file=str(file), field=key
            )


def verify_cases(raw: bytes, expected: pd.DataFrame, *, keys: tuple[str, ...], file: Path) -> None:
    """Check ``cases.parquet`` (its bytes ``raw``) against ``expected``, the rows derived from the case records.

    Columns are matched by name and rows by ``keys`` (``case_id`` and the item column): the order of both follows
    dict order, which a JSON round trip (sorted keys) changes, and carries no meaning.

    Raises:
        InputError: naming ``file``, the column as ``field`` and the case of the first differing row; or an
            unreadable parquet file.
    """
    import pandas as pd

    try:
        actual = pd.read_parquet(io.BytesIO(raw))
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError and others on damaged files
        raise InputError(f"not a readable parquet file: {type(exc).__name__}: {exc}", file=str(file)) from exc
    missing = [c for c in expected.columns if c not in actual.columns]
    extra = [c for c in actual.columns if c not in expected.columns]
    if missing or extra:
        raise InputError(
            f"columns differ from the case records (missing {missing}, unexpected {extra})",
            file=str(file),
            field=str((missing or extra)[0]),
        )
    if len(actual) != len(expected):
        raise InputError(
            f"{len(actual)} rows, the case records give {len(expected)} (case x item)", file=str(file), field="rows"
        )
    by = [k for k in keys if k in expected.columns]
    actual, expected = (
        f.sort_values(by, kind="stable").reset_index(drop=True) if by else f for f in (actual, expected)
    )
    for column in expected.columns:
        a, e = _values(actual[column]), _values(expected[column])
        for row, (x, y) in enumerate(zip(a, e, strict=True)):
            if not _same_cell(x, y):
                raise InputError(
                    f"column {column} is {x!r} where the case records give {y!r}",
                    file=str(file),
                    case_id=str(expected["case_id"].iloc[row]),
                    field=str(column),
                )


def _values(column: pd.Series) -> list[Any]:
    """Plain Python values with every missing marker (None, NaN, pd.NA) as ``None``."""
    import pandas as pd

    return [None if pd.isna(v) else v for v in column.tolist()]


def _same_cell(x: Any, y: Any) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, int | float) and isinstance(y, int | float) and not isinstance(x, bool):
        return float(x) == float(y)
    return type(x) is type(y) and x == y


def verify_aggregates(result: BenchmarkResult, *, file: Path) -> None:
    """Recompute what the case records determine (see the module docstring) and compare it with the stored
    aggregates and counts.

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
            if not _close(value, mean) or stored.n_valid != n_valid:
                raise InputError(
                    f"aggregate {key} = {_fmt(value)} (n_valid {stored.n_valid}) contradicts its case records, "
                    f"which give {_fmt(mean)} (n_valid {n_valid})",
                    file=str(file),
                    field=key,
                )
            continue
        items = table.breakdown_items(key)
        if not items:
            continue
        macro, per_case = table.headline_means(metric, group, items)
        if not (_close(value, macro) or _close(value, per_case)):
            either = _fmt(macro) if _close(macro, per_case) else f"{_fmt(macro)} or {_fmt(per_case)}"
            raise InputError(
                f"aggregate {key} = {_fmt(value)} contradicts its case records, which give {either} "
                f"(the mean over {result.item_kind} means, or over cases)",
                file=str(file),
                field=key,
            )


def _fmt(x: float) -> str:
    return "null" if math.isnan(x) else repr(x)


def _verify_counts(result: BenchmarkResult, file: Path) -> None:
    n = len(result.cases)
    missing = sum(c.status == "missing_prediction" for c in result.cases)
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
    """The case records as ``(cases x items)`` float matrices per metric (NaN = null or absent), built lazily."""

    def __init__(self, result: BenchmarkResult) -> None:
        self.result = result
        self.unit = result.unit
        self.by_kind = f"by_{result.item_kind}"
        self.items = sorted({item for c in result.cases for item in c.metrics})
        self.column = {item: j for j, item in enumerate(self.items)}
        self.metrics = {m for c in result.cases for vals in c.metrics.values() for m in vals}
        self.groups = {g for c in result.cases for g in c.groups}
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
            if group in self.groups and any(c.groups.get(group) == tokens[-1] for c in self.result.cases):
                return "/".join(tokens[:-2]), (group, tokens[-1]), item
        return None

    def matrix(self, metric: str, group: tuple[str, str] | None) -> np.ndarray:
        if metric not in self._matrices:
            m = np.full((len(self.result.cases), len(self.items)), np.nan)
            for i, case in enumerate(self.result.cases):
                for item, vals in case.metrics.items():
                    v = vals.get(metric)
                    if v is not None:
                        m[i, self.column[item]] = v
            self._matrices[metric] = m
        m = self._matrices[metric]
        if group is None:
            return m
        rows = [i for i, c in enumerate(self.result.cases) if c.groups.get(group[0]) == group[1]]
        return m[rows]

    def item_mean(self, metric: str, group: tuple[str, str] | None, item: str) -> tuple[float, int]:
        """Mean and number of the non-null values of ``item`` (NaN, 0 when there are none)."""
        if item not in self.column:
            return math.nan, 0
        col = self.matrix(metric, group)[:, self.column[item]]
        valid = col[~np.isnan(col)]
        return (float(valid.sum() / valid.size) if valid.size else math.nan), int(valid.size)

    def breakdown_items(self, key: str) -> list[str]:
        """Items of the ``key/by_<kind>/<item>`` aggregates present in the result."""
        prefix = f"{key}/{self.by_kind}/"
        return [
            k[len(prefix) :] for k in self.result.aggregates if k.startswith(prefix) and "/" not in k[len(prefix) :]
        ]

    def headline_means(self, metric: str, group: tuple[str, str] | None, items: list[str]) -> tuple[float, float]:
        """(mean over ``items`` of the item means, mean over cases of each case's mean over ``items``)."""
        cols = [self.column[i] for i in items if i in self.column]
        m = self.matrix(metric, group)[:, cols]
        return _nanmean(_nanmean_axis(m, axis=0)), _nanmean(_nanmean_axis(m, axis=1))


def _nanmean_axis(m: np.ndarray, axis: int) -> np.ndarray:
    valid = ~np.isnan(m)
    counts = valid.sum(axis=axis)
    sums = np.where(valid, m, 0.0).sum(axis=axis)
    return np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)


def _nanmean(v: np.ndarray) -> float:
    valid = v[~np.isnan(v)]
    return float(valid.sum() / valid.size) if valid.size else math.nan
