"""Per-case records as columns: the in-memory form of a result's cases and of ``cases.parquet``.

A :class:`CaseTable` holds what a list of :class:`~trackeval.results.CaseRecord` holds, in arrays:

* per case (``n_cases`` long, case order): ``case_id``, ``subject_id``, ``status``, ``message`` and one column
  per case group (None where a case lacks the group);
* per row (one row per case x item, ``n_rows`` long, cases in order and each case's items in its own order):
  ``row_case`` (the case's index), ``row_item`` (an index into ``items``) and one float64 column per per-item
  metric, NaN where the item's value is null (not applicable) or absent, with ``absent`` telling the two apart
  (in ``cases.parquet``: NaN for not applicable, null where the item has no such metric).

Everything the decision side needs is a vectorised read: :meth:`CaseTable.matrix` (``cases x items`` of one
metric), :meth:`CaseTable.field`, :meth:`CaseTable.take`; iterating the table gives
:class:`~trackeval.results.CaseRecord` objects, built on first use, for the code that reads records one by one
(small results only: a UMD run has ~1,000 cases, an X-ray classification run can have 10^5-10^6).

The table's :meth:`CaseTable.descriptor` holds a sha256 per column over a canonical encoding of its values (not
over parquet bytes, which differ between pyarrow versions for the same values) and one over them all;
results.json records it, so the evidence digest of a result (the sha256 of its results.json) covers the case
records too, and a column that no longer matches is named.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    import pyarrow as pa

#: the per-case string columns, in the order they are written (the case groups and the item column follow)
CASE_FIELDS: tuple[str, ...] = ("case_id", "subject_id", "status", "message")
#: marks a metric an item does not have while the records are gathered into columns
_ABSENT = object()
#: names the canonical digest encoding (bumped if the encoding ever changes)
DIGEST_METHOD = "trackeval-columns-1"


CaseStatus = Literal["ok", "missing_prediction"]


def nan_to_none(x: float | None) -> float | None:
    """``x``, None for NaN (JSON's ``null``)."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


class CaseRecord(BaseModel):
    """One evaluated case. ``metrics`` maps an item (organ, region, target) to ``{metric: value}``."""

    model_config = ConfigDict(extra="forbid")

    case_id: str
    subject_id: str
    groups: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    status: CaseStatus = "ok"
    message: str = ""

    @field_validator("metrics")
    @classmethod
    def _nan_as_null(cls, v: dict[str, dict[str, float | None]]) -> dict[str, dict[str, float | None]]:
        return {item: {m: nan_to_none(x) for m, x in vals.items()} for item, vals in v.items()}


class ColumnError(ValueError):
    """A ``cases.parquet`` that is not a case table; ``column`` names the offending column (or ``rows``)."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


class CaseTable:
    """Case records as columns (see the module docstring). Build with :meth:`from_records`, :meth:`dense` or
    :meth:`from_arrow`; the constructor takes the columns as they are (lengths checked, nothing copied)."""

    __slots__ = ("fields", "groups", "items", "row_case", "row_item", "metrics", "absent", "__dict__")

    def __init__(
        self,
        fields: Mapping[str, Sequence[str]],
        groups: Mapping[str, Sequence[str | None]],
        items: Sequence[str],
        row_case: np.ndarray,
        row_item: np.ndarray,
        metrics: Mapping[str, np.ndarray],
        absent: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.fields = {name: list(fields[name]) for name in CASE_FIELDS}
        self.groups = {name: list(values) for name, values in sorted(groups.items())}
        self.items = list(items)
        self.row_case = np.asarray(row_case, dtype=np.int64)
        self.row_item = np.asarray(row_item, dtype=np.int64)
        self.metrics = {name: np.asarray(v, dtype=np.float64) for name, v in metrics.items()}
        #: per metric, the rows whose item has no such metric (only metrics absent somewhere are listed)
        self.absent = {m: np.asarray(v, dtype=bool) for m, v in (absent or {}).items() if np.any(v)}
        self._check_shape()

    def _check_shape(self) -> None:
        """``ValueError`` unless every column has its length and the rows follow case order within range."""
        n, rows = len(self.fields["case_id"]), len(self.row_case)
        case_lengths = {len(v) for v in (*self.fields.values(), *self.groups.values())}
        row_lengths = {len(v) for v in (self.row_item, *self.metrics.values(), *self.absent.values())}
        if case_lengths - {n} or row_lengths - {rows} or not set(self.absent) <= set(self.metrics):
            raise ValueError("CaseTable columns of unequal length")
        ordered = not np.any(np.diff(self.row_case) < 0)
        if rows and (not ordered or self.row_case[-1] >= n or self.row_item.max() >= len(self.items)):
            raise ValueError("CaseTable rows must follow case order and index existing cases and items")

    # -- construction ------------------------------------------------------------------------------------------

    @classmethod
    def from_records(cls, records: Iterable[CaseRecord]) -> CaseTable:
        """The table of case records (metrics in order of first appearance, items likewise)."""
        records = list(records)
        group_names = sorted({g for r in records for g in r.groups})
        items, row_case, row_item, metric_cols = _gather_rows(records)
        absent = {m: np.array([x is _ABSENT for x in v], dtype=bool) for m, v in metric_cols.items()}
        return cls(
            {name: [getattr(r, name) for r in records] for name in CASE_FIELDS},
            {g: [r.groups.get(g) for r in records] for g in group_names},
            items,
            np.array(row_case, dtype=np.int64),
            np.array(row_item, dtype=np.int64),
            {m: np.array([np.nan if x is _ABSENT else x for x in v], dtype=np.float64) for m, v in metric_cols.items()},
            absent,
        )

    @classmethod
    def dense(
        cls,
        case_id: Sequence[str],
        subject_id: Sequence[str],
        groups: Mapping[str, Sequence[str | None]],
        items: Sequence[str],
        metrics: Mapping[str, np.ndarray],
    ) -> CaseTable:
        """Every case has every item: ``metrics`` maps a metric to its ``(n_cases, n_items)`` values (NaN = null);
        statuses ``ok``, no messages."""
        n, k = len(case_id), len(items)
        return cls(
            {"case_id": case_id, "subject_id": subject_id, "status": ["ok"] * n, "message": [""] * n},
            groups,
            items,
            np.repeat(np.arange(n, dtype=np.int64), k),
            np.tile(np.arange(k, dtype=np.int64), n),
            {m: np.asarray(v, dtype=np.float64).reshape(n * k) for m, v in metrics.items()},
        )

    # -- reading -----------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.fields["case_id"])

    @property
    def n_rows(self) -> int:
        """Rows (case x item pairs)."""
        return len(self.row_case)

    def field(self, name: str) -> list[str | None]:
        """One per-case column: a case field (:data:`CASE_FIELDS`) or a case group's values (None: no such
        group for that case, or no such group at all)."""
        if name in self.fields:
            return list(self.fields[name])
        return list(self.groups.get(name, [None] * len(self)))

    def sorted_items(self) -> list[str]:
        """Every item any case has, sorted by name."""
        return sorted(self.items[i] for i in np.unique(self.row_item))

    def metric_names(self) -> list[str]:
        """The per-item metrics, in order of first appearance."""
        return list(self.metrics)

    def matrix(self, metric: str, items: Sequence[str]) -> np.ndarray:
        """``(n_cases, len(items))`` float64 values of ``metric``; NaN where a case lacks the item, the item the
        metric, or the value is null."""
        out = np.full((len(self), len(items)), np.nan)
        values = self.metrics.get(metric)
        if values is None or not self.n_rows:
            return out
        column = np.full(len(self.items), -1, dtype=np.int64)
        wanted = {name: j for j, name in enumerate(items)}
        for code, name in enumerate(self.items):
            column[code] = wanted.get(name, -1)
        cols = column[self.row_item]
        keep = cols >= 0
        out[self.row_case[keep], cols[keep]] = values[keep]
        return out

    def take(self, cases: Sequence[int] | np.ndarray) -> CaseTable:
        """The table of the cases at these indices, in this order (a case may not repeat)."""
        index = np.asarray(cases, dtype=np.int64)
        position = np.full(len(self), -1, dtype=np.int64)
        position[index] = np.arange(len(index))
        order = np.argsort(position[self.row_case], kind="stable")
        order = order[position[self.row_case[order]] >= 0]
        return CaseTable(
            {name: [values[i] for i in index] for name, values in self.fields.items()},
            {name: [values[i] for i in index] for name, values in self.groups.items()},
            self.items,
            position[self.row_case[order]],
            self.row_item[order],
            {m: v[order] for m, v in self.metrics.items()},
            {m: v[order] for m, v in self.absent.items()},
        )

    # -- records (compatibility view) ----------------------------------------------------------------------------

    @cached_property
    def _records(self) -> list[CaseRecord]:
        starts = np.searchsorted(self.row_case, np.arange(len(self) + 1))
        names = list(self.metrics)
        values = np.column_stack([self.metrics[m] for m in names]).tolist() if names else [[]] * self.n_rows
        gone = (
            np.column_stack([self.absent.get(m, np.zeros(self.n_rows, bool)) for m in names]).tolist()
            if names
            else values
        )
        items = [self.items[i] for i in self.row_item.tolist()]
        out = []
        for i in range(len(self)):
            metrics = {
                items[row]: {
                    m: (None if v != v else v) for m, v, no in zip(names, values[row], gone[row], strict=True) if not no
                }
                for row in range(starts[i], starts[i + 1])
            }
            groups = {g: col[i] for g, col in self.groups.items() if col[i] is not None}
            fields = {name: col[i] for name, col in self.fields.items()}
            out.append(CaseRecord.model_construct(**fields, groups=groups, metrics=metrics))
        return out

    def __iter__(self) -> Iterator[CaseRecord]:
        return iter(self._records)

    @overload
    def __getitem__(self, index: int) -> CaseRecord: ...
    @overload
    def __getitem__(self, index: slice) -> CaseTable: ...
    def __getitem__(self, index: int | slice) -> CaseRecord | CaseTable:
        """A case's record, or the table of a slice of the cases."""
        if isinstance(index, slice):
            return self.take(range(len(self))[index])
        return self._records[index]

    def __deepcopy__(self, memo: dict[int, Any]) -> CaseTable:
        """An independent table (arrays and lists copied, strings shared: they are immutable), with the digests
        already computed."""
        copied = CaseTable(
            {name: list(values) for name, values in self.fields.items()},
            {name: list(values) for name, values in self.groups.items()},
            list(self.items),
            self.row_case.copy(),
            self.row_item.copy(),
            {m: v.copy() for m, v in self.metrics.items()},
            {m: v.copy() for m, v in self.absent.items()},
        )
        for digests in ("_column_digests", "_item_digest"):  # the same content: its digests, once computed, hold
            if digests in self.__dict__:
                copied.__dict__[digests] = copy.copy(self.__dict__[digests])
        return copied

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CaseTable):
            return self.digest() == other.digest()
        if isinstance(other, list):
            return self == CaseTable.from_records(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"CaseTable({len(self)} cases, {self.n_rows} rows, items={self.items[:5]}..., metrics={list(self.metrics)})"
        )

    # -- digest and arrow ----------------------------------------------------------------------------------------

    def digest(self) -> str:
        """sha256 (hex) of the table's content, the ``sha256`` of :meth:`descriptor` (independent of names given
        to the item column)."""
        return self.descriptor("item")["sha256"]

    def descriptor(self, item_kind: str) -> dict[str, Any]:
        """What results.json records of the table (:data:`DIGEST_METHOD`): ``file``, ``method``, ``n_cases``,
        ``n_rows``, ``groups``, ``columns`` (the sha256 of each ``cases.parquet`` column's canonical encoding,
        plus ``rows``, the rows' case indices) and ``sha256`` over all of it. A string column is encoded per case
        as little-endian int64 UTF-8 byte lengths (-1 for None) then the bytes; the item column as its items in
        order of first appearance (so however the table was built) then each row's item index; a metric as
        float64 with every NaN as one bit pattern."""
        columns = {**self._column_digests, item_kind: self._item_digest}  # a group named like the item: the item
        body = {
            "file": "cases.parquet",
            "method": DIGEST_METHOD,
            "n_cases": len(self),
            "n_rows": self.n_rows,
            "groups": list(self.groups),
            "columns": columns,
        }
        return {**body, "sha256": hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()}

    @cached_property
    def _column_digests(self) -> dict[str, str]:
        """The sha256 of every column but the item column, and of ``rows`` (computed once per table)."""
        columns = {name: _strings_digest(values) for name, values in (*self.fields.items(), *self.groups.items())}
        columns["rows"] = hashlib.sha256(self.row_case.astype("<i8").tobytes()).hexdigest()
        for name, values in self.metrics.items():
            canonical = np.where(np.isnan(values), np.nan, values).astype("<f8")
            h = hashlib.sha256(canonical.tobytes())
            if name in self.absent:
                h.update(np.packbits(self.absent[name], bitorder="little").tobytes())
            columns[name] = h.hexdigest()
        return columns

    @cached_property
    def _item_digest(self) -> str:
        used, first = np.unique(self.row_item, return_index=True)
        order = used[np.argsort(first)]  # the items in order of first appearance: canonical whatever the build
        recode = np.zeros(len(self.items), dtype="<i8")
        recode[order] = np.arange(len(order))
        h = hashlib.sha256(bytes.fromhex(_strings_digest([self.items[i] for i in order])))
        h.update(recode[self.row_item].astype("<i8").tobytes())
        return h.hexdigest()

    def to_arrow(self, item_kind: str) -> pa.Table:
        """The ``cases.parquet`` table (schema 2.x): one row per case x item, and one row with a null item for a
        case without items; columns ``case_id, subject_id, status, message``, the case groups (sorted), the item
        column named ``item_kind``, the metrics (float64; null where NaN)."""
        import pyarrow as pa

        has_rows = np.zeros(len(self), dtype=bool)
        has_rows[self.row_case] = True
        lone = np.flatnonzero(~has_rows)
        case_of_row = np.concatenate([self.row_case, lone])
        order = np.argsort(case_of_row, kind="stable")
        case_of_row = _int_array(case_of_row[order])
        item_codes = np.concatenate([self.row_item, np.full(len(lone), -1)])[order]
        columns: dict[str, pa.Array] = {}
        for name, values in (*self.fields.items(), *self.groups.items()):
            if name != item_kind:  # a group named like the item column holds the item (see check_group_columns)
                columns[name] = _string_array(values).take(case_of_row)
        columns[item_kind] = _string_array(self.items).take(_int_array(item_codes, valid=item_codes >= 0))
        for name, values in self.metrics.items():
            full = np.concatenate([values, np.full(len(lone), np.nan)])[order]
            gone = np.concatenate([self.absent.get(name, np.zeros(len(values), bool)), np.ones(len(lone), bool)])
            columns[name] = pa.Array.from_buffers(pa.float64(), len(full), [_bitmap(~gone[order]), pa.py_buffer(full)])
        return pa.table(columns)

    @classmethod
    def from_arrow(cls, table: pa.Table, item_kind: str, groups: Sequence[str]) -> CaseTable:
        """The table of a ``cases.parquet`` (schema 2.x) read back: ``groups`` names the case groups (the string
        columns besides the case fields and the item column; a group named ``item_kind`` is rebuilt from the
        item of its case). Raises ``ValueError`` (the caller names the file) where a column is missing, a case's
        rows are not together or disagree on a per-case column."""
        import pyarrow as pa
        import pyarrow.compute as pc

        names = table.column_names
        per_case = [*CASE_FIELDS, *(g for g in groups if g != item_kind)]
        missing = sorted(set((*per_case, item_kind)) - set(names), key=[*per_case, item_kind].index)
        if missing:
            raise ColumnError(missing[0], f"lacks the column(s) {missing}")
        table = table.combine_chunks()
        starts, row_case = _case_rows(table)
        columns = {name: _per_case(table[name], name, starts, row_case) for name in per_case}
        present = pc.is_valid(table[item_kind]).to_numpy(zero_copy_only=False)
        if len(np.unique(row_case[present])) + int((~present).sum()) != len(starts):
            raise ColumnError(item_kind, f"a case has both a row without {item_kind} and rows with one")
        mask = pa.array(present)
        encoded = pc.dictionary_encode(table[item_kind].filter(mask)).combine_chunks()
        codes, items = encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist()
        metrics = [c for c in names if c not in per_case and c != item_kind]
        _metric_columns(table, metrics)
        if item_kind in groups:  # the group holds its case's (one) item
            columns[item_kind] = _first_items(len(starts), row_case[present], codes, items)
        return cls(
            {name: columns[name] for name in CASE_FIELDS},
            {name: columns[name] for name in groups},
            items,
            row_case[present],
            codes,
            {m: table[m].filter(mask).cast(pa.float64()).to_numpy(zero_copy_only=False) for m in metrics},
            {m: table[m].filter(mask).is_null().to_numpy(zero_copy_only=False) for m in metrics},
        )


def _gather_rows(records: list[CaseRecord]) -> tuple[list[str], list[int], list[int], dict[str, list[object]]]:
    """``(items, row_case, row_item, {metric: values})`` of the records' case x item rows, items and metrics in
    order of first appearance; a value is NaN for null, :data:`_ABSENT` where the item lacks the metric."""
    item_index: dict[str, int] = {}
    metric_cols: dict[str, list[object]] = {}
    row_case: list[int] = []
    row_item: list[int] = []
    for i, r in enumerate(records):
        for item, values in r.metrics.items():
            row = len(row_case)
            row_case.append(i)
            row_item.append(item_index.setdefault(item, len(item_index)))
            for m, v in values.items():
                col = metric_cols.setdefault(m, [])
                col.extend([_ABSENT] * (row - len(col)))
                col.append(np.nan if v is None else v)
    for col in metric_cols.values():
        col.extend([_ABSENT] * (len(row_case) - len(col)))
    return list(item_index), row_case, row_item, metric_cols


def _metric_columns(table: pa.Table, names: list[str]) -> None:
    """:class:`ColumnError` unless every metric column is floating point."""
    import pyarrow as pa

    for m in names:
        if not pa.types.is_floating(table.schema.field(m).type):
            raise ColumnError(m, f"column {m} is {table.schema.field(m).type}, not a float64 metric")


def _first_items(n_cases: int, row_case: np.ndarray, codes: np.ndarray, items: list[str]) -> list[str | None]:
    """Each case's first item (None for a case without rows)."""
    first = np.full(n_cases, -1, dtype=np.int64)
    first[row_case[::-1]] = codes[::-1]  # the last write wins: reversed, the first row's
    return [items[c] if c >= 0 else None for c in first.tolist()]


def _case_rows(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """``(first row of each case, each row's case index)`` of a table whose rows of a case are together;
    :class:`ColumnError` (``rows``) otherwise."""
    import pyarrow.compute as pc

    n_rows = table.num_rows
    codes = pc.dictionary_encode(table["case_id"]).combine_chunks().indices.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if n_rows else np.zeros(0, np.int64)
    if len(np.unique(codes)) != len(starts):
        raise ColumnError("rows", "the rows of a case are not together (or a case_id repeats)")
    return starts, np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.r_[starts, n_rows]))


def _per_case(column: pa.ChunkedArray, name: str, starts: np.ndarray, row_case: np.ndarray) -> list[str | None]:
    """A per-case column's value for each case (its first row's); :class:`ColumnError` where the rows of a case
    disagree."""
    import pyarrow as pa

    first = column.take(pa.array(starts))
    if not _same_strings(column, first.take(pa.array(row_case))):
        raise ColumnError(name, f"column {name} differs between the rows of one case")
    return first.to_pylist()


# Arrays are built from buffers: pa.array() would import pandas (~0.3 s of every evaluate) on first use.


def _bitmap(valid: np.ndarray) -> pa.Buffer | None:
    """Arrow validity bitmap of a boolean mask (None when every entry is valid)."""
    import pyarrow as pa

    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def _int_array(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """An int64 arrow array of ``values`` (null where ``valid`` is False)."""
    import pyarrow as pa

    data = np.ascontiguousarray(np.where(valid, values, 0) if valid is not None else values, dtype=np.int64)
    bitmap = None if valid is None else _bitmap(valid)
    return pa.Array.from_buffers(pa.int64(), len(data), [bitmap, pa.py_buffer(data)])


def _string_array(values: Sequence[str | None]) -> pa.Array:
    """A UTF-8 arrow array of ``values`` (null for None)."""
    import pyarrow as pa

    encoded = [b"" if v is None else v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(encoded))
    buffers = [_bitmap(valid), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.large_string(), len(encoded), buffers).cast(pa.string())


def _same_strings(a: pa.Array, b: pa.Array) -> bool:
    """Whether two string arrays hold the same values, None where the other has None."""
    import pyarrow.compute as pc

    same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
    return bool(pc.all(same).as_py()) if len(a) else True


def _strings_digest(values: Sequence[str | None]) -> str:
    """sha256 of a string column: int64 byte lengths (-1 for None), then the UTF-8 bytes."""
    encoded = [b"" if v is None else v.encode("utf-8") for v in values]
    lengths = np.fromiter(map(len, encoded), dtype="<i8", count=len(encoded))
    lengths[[i for i, v in enumerate(values) if v is None]] = -1
    return hashlib.sha256(lengths.tobytes() + b"".join(encoded)).hexdigest()
