"""Verifying a results folder's files: metrics.json and cases.parquet are pure functions of results.json and
must agree with it (:func:`trackeval.io.results_folder.read_results` calls everything here):

* :func:`verify_metrics`: ``metrics.json`` holds exactly the keys of the flat metrics derived from results.json,
  each equal to the derived value within the rounding of metrics.json (:data:`~trackeval.stats.verify.REL_TOL`);
* :func:`verify_cases`: ``cases.parquet`` holds the rows derived from the case records, column by column (values
  compared, not bytes: another pyarrow writes other bytes for the same table).

This is file integrity only. Whether results.json's aggregates agree with its own case records is a question of
the units' reductions, answered by :func:`trackeval.stats.verify.verify_aggregates`.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from trackeval.errors import InputError
from trackeval.io.files import decode_text
from trackeval.io.structured import parse_json
from trackeval.stats.verify import close

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd


def verify_metrics(raw: bytes, expected: dict[str, float], *, file: Path) -> None:
    """Check ``metrics.json`` (its bytes ``raw``) against ``expected``, the metrics derived from results.json.

    Raises:
        InputError: naming ``file`` and, as ``field``, the first key that is missing, extra, not a number or
            different (malformed JSON or a non-object: no field).
    """
    actual = parse_json(decode_text(raw, file=file), file=file)
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
        if not close(float(value), expected[key]):
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
    actual = _read_parquet(raw, file=file)
    _check_layout(actual, expected, file=file)
    by = [k for k in keys if k in expected.columns]
    actual, expected = (
        f.sort_values(by, kind="stable").reset_index(drop=True) if by else f for f in (actual, expected)
    )
    _check_cells(actual, expected, file=file)


def _read_parquet(raw: bytes, *, file: Path) -> pd.DataFrame:
    """The table of a parquet file's bytes; :class:`InputError` naming ``file`` when pyarrow cannot read it."""
    import pandas as pd

    try:
        return pd.read_parquet(io.BytesIO(raw))
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError and others on damaged files
        raise InputError(f"not a readable parquet file: {type(exc).__name__}: {exc}", file=str(file)) from exc


def _check_layout(actual: pd.DataFrame, expected: pd.DataFrame, *, file: Path) -> None:
    """Refuse a table whose column names (any order) or row count differ from ``expected``'s."""
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


def _check_cells(actual: pd.DataFrame, expected: pd.DataFrame, *, file: Path) -> None:
    """Compare two tables of the same layout, rows already aligned, cell by cell in ``expected``'s column order;
    :class:`InputError` naming the first differing cell's column and case."""
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
