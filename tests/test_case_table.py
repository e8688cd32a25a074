"""The case table (``trackeval.case_table.CaseTable``): the columns of the case records, their parquet form and
their digests; hand-built records, values checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from trackeval.case_table import CaseTable, ColumnError
from trackeval.results import CaseRecord

RECORDS = [
    CaseRecord(case_id="a", subject_id="s1", groups={"site": "x"}, metrics={"liver": {"dsc": 0.5, "hd": None}}),
    CaseRecord(case_id="b", subject_id="s1", status="missing_prediction", message="no file"),  # no items
    CaseRecord(case_id="c", subject_id="s2", metrics={"spleen": {"dsc": 0.25, "hd": 3.0}, "liver": {"dsc": 1.0}}),
]


def _dump(table: CaseTable) -> list[dict]:
    return [r.model_dump() for r in table]


def test_records_round_trip_through_columns_and_parquet():
    table = CaseTable.from_records(RECORDS)
    assert (len(table), table.n_rows, table.items) == (3, 3, ["liver", "spleen"])
    assert _dump(table) == [r.model_dump() for r in RECORDS]  # absent hd (c/liver) stays absent, null stays null
    arrow = table.to_arrow("organ")
    assert arrow.column_names == ["case_id", "subject_id", "status", "message", "site", "organ", "dsc", "hd"]
    rows = arrow.to_pylist()
    assert [(r["case_id"], r["organ"]) for r in rows] == [("a", "liver"), ("b", None), ("c", "spleen"), ("c", "liver")]
    assert math.isnan(rows[0]["hd"]) and rows[3]["hd"] is None  # not applicable: NaN; absent: null
    back = CaseTable.from_arrow(arrow, "organ", ["site"])
    assert _dump(back) == _dump(table) and back.digest() == table.digest()


def test_matrix_field_and_take():
    table = CaseTable.from_records(RECORDS)
    want = np.array([[0.5, np.nan], [np.nan, np.nan], [1.0, 0.25]])
    np.testing.assert_array_equal(table.matrix("dsc", ["liver", "spleen"]), want)
    np.testing.assert_array_equal(table.matrix("dsc", ["spleen"]), want[:, [1]])
    assert np.isnan(table.matrix("iou", ["liver"])).all()
    assert table.field("site") == ["x", None, None] and table.field("status")[1] == "missing_prediction"
    assert table.sorted_items() == ["liver", "spleen"] and table.metric_names() == ["dsc", "hd"]
    picked = table.take([2, 0])
    assert _dump(picked) == [RECORDS[2].model_dump(), RECORDS[0].model_dump()]
    assert picked.digest() == CaseTable.from_records([RECORDS[2], RECORDS[0]]).digest()
    assert _dump(table[1:]) == [r.model_dump() for r in RECORDS[1:]]


def test_dense_is_the_table_of_the_same_records():
    labels = np.array([[1.0, 0.0], [np.nan, 1.0]])
    dense = CaseTable.dense(["i1", "i2"], ["p1", "p1"], {"view": ["pa", None]}, ["edema", "mass"], {"label": labels})
    first = {"edema": {"label": 1.0}, "mass": {"label": 0.0}}
    records = [
        CaseRecord(case_id="i1", subject_id="p1", groups={"view": "pa"}, metrics=first),
        CaseRecord(case_id="i2", subject_id="p1", metrics={"edema": {"label": None}, "mass": {"label": 1.0}}),
    ]
    assert dense.digest() == CaseTable.from_records(records).digest()
    assert _dump(dense) == [r.model_dump() for r in records]


def test_each_column_has_its_digest():
    base = CaseTable.from_records(RECORDS).descriptor("organ")
    edited = [
        RECORDS[0],
        RECORDS[1],
        RECORDS[2].model_copy(update={"metrics": {"spleen": {"dsc": 0.26, "hd": 3.0}, "liver": {"dsc": 1.0}}}),
    ]
    other = CaseTable.from_records(edited).descriptor("organ")
    assert [c for c in base["columns"] if base["columns"][c] != other["columns"][c]] == ["dsc"]
    assert base["sha256"] != other["sha256"] and set(base["columns"]) == {
        "case_id", "subject_id", "status", "message", "site", "rows", "organ", "dsc", "hd"
    }  # fmt: skip
    assert (base["n_cases"], base["n_rows"], base["groups"], base["file"]) == (3, 3, ["site"], "cases.parquet")


def test_a_table_that_is_not_a_case_table_names_its_column():
    arrow = CaseTable.from_records(RECORDS).to_arrow("organ")
    swapped = arrow.take([2, 0, 1, 3])  # case c's rows apart
    with pytest.raises(ColumnError) as err:
        CaseTable.from_arrow(swapped, "organ", ["site"])
    assert err.value.column == "rows"
    status = arrow.set_column(2, "status", pa.array(["ok", "missing_prediction", "ok", "missing_prediction"]))
    with pytest.raises(ColumnError) as err:
        CaseTable.from_arrow(status, "organ", ["site"])
    assert err.value.column == "status"
    text = arrow.append_column("note", pa.array(["x"] * 4))
    with pytest.raises(ColumnError) as err:
        CaseTable.from_arrow(text, "organ", ["site"])
    assert err.value.column == "note"
    with pytest.raises(ColumnError) as err:
        CaseTable.from_arrow(arrow.drop_columns(["site"]), "organ", ["site"])
    assert err.value.column == "site"
