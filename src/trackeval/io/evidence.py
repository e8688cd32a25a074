"""Verifying a results folder's files: metrics.json and cases.parquet are pure functions of results.json and
must agree with it (:func:`trackeval.io.results_folder.read_results` calls everything here):

* :func:`verify_metrics`: ``metrics.json`` holds exactly the keys of the flat metrics derived from results.json,
  each equal to the derived value within the rounding of metrics.json (:data:`~trackeval.stats.verify.REL_TOL`);
* :func:`verify_cases`: a schema 1.x ``cases.parquet`` holds the rows derived from the inline case records,
  column by column (values compared, not bytes: another pyarrow writes other bytes for the same table);
* :func:`read_parquet`: a parquet file's table, or an error naming the file.

This is file integrity only. Whether results.json's aggregates agree with its own case records is a question of
the units' reductions, answered by :func:`trackeval.stats.verify.verify_aggregates`.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np

from trackeval.errors import InputError
from trackeval.io.files import decode_text
from trackeval.io.structured import parse_json
from trackeval.stats.verify import close

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa


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


def verify_cases(raw: bytes, expected: pa.Table, *, keys: tuple[str, ...], file: Path) -> None:
    """Check a schema 1.x ``cases.parquet`` (its bytes ``raw``) against ``expected``, the rows derived from the
    case records results.json holds inline (a 2.x set is checked by its columns' digest instead).

    Columns are matched by name and rows by ``keys`` (``case_id`` and the item column): the order of both follows
    dict order, which a JSON round trip (sorted keys) changes, and carries no meaning. Compared column by column,
    vectorised: floats by value (null = NaN), strings exactly.

    Raises:
        InputError: naming ``file``, the column as ``field`` and the case of the first differing row; or an
            unreadable parquet file.
    """
    import pyarrow.compute as pc

    actual = read_parquet(raw, file=file)
    _check_layout(actual, expected, file=file)
    by = [(k, "ascending") for k in keys if k in expected.column_names]
    if by:
        actual = actual.take(pc.sort_indices(actual, sort_keys=by))
        expected = expected.take(pc.sort_indices(expected, sort_keys=by))
    for column in expected.column_names:
        differs = _differs(actual[column], expected[column])
        if differs.any():
            row = int(np.flatnonzero(differs)[0])
            raise InputError(
                f"column {column} is {actual[column][row].as_py()!r} where the case records give "
                f"{expected[column][row].as_py()!r}",
                file=str(file),
                case_id=str(expected["case_id"][row].as_py()),
                field=str(column),
            )


def read_parquet(raw: bytes, *, file: Path) -> pa.Table:
    """The table of a parquet file's bytes; :class:`InputError` naming ``file`` when pyarrow cannot read it."""
    import pyarrow.parquet as pq

    try:
        return pq.read_table(io.BytesIO(raw))
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError and others on damaged files
        raise InputError(f"not a readable parquet file: {type(exc).__name__}: {exc}", file=str(file)) from exc


def _check_layout(actual: pa.Table, expected: pa.Table, *, file: Path) -> None:
    """Refuse a table whose column names (any order) or row count differ from ``expected``'s."""
    missing = [c for c in expected.column_names if c not in actual.column_names]
    extra = [c for c in actual.column_names if c not in expected.column_names]
    if missing or extra:
        raise InputError(
            f"columns differ from the case records (missing {missing}, unexpected {extra})",
            file=str(file),
            field=str((missing or extra)[0]),
        )
    if actual.num_rows != expected.num_rows:
        raise InputError(
            f"{actual.num_rows} rows, the case records give {expected.num_rows} (case x item)",
            file=str(file),
            field="rows",
        )


def _differs(actual: pa.ChunkedArray, expected: pa.ChunkedArray) -> np.ndarray:
    """Per row, whether the cells differ: floats by value with null and NaN alike, other types exactly (a
    column of another type than expected's differs in every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(expected)
    if pa.types.is_floating(expected.type):
        if not (pa.types.is_floating(actual.type) or pa.types.is_integer(actual.type)):
            return np.ones(n, dtype=bool)
        a, e = (c.cast(pa.float64()).to_numpy() for c in (actual, expected))
        return ~((a == e) | (np.isnan(a) & np.isnan(e)))
    if actual.type != expected.type:
        return np.ones(n, dtype=bool)
    same = pc.or_(pc.fill_null(pc.equal(actual, expected), False), pc.and_(pc.is_null(actual), pc.is_null(expected)))
    return ~same.to_numpy(zero_copy_only=False)
