"""cases.parquet: the rows of the case records, exact floats, typed columns, nulls for NaN; written without pandas."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import textwrap

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trackeval.io.results_folder import CASES_PARQUET, cases_table, output_bytes, read_results
from trackeval.results import READABLE_JSON_BYTES, CaseRecord, build_result, json_text

#: floats whose text form is easy to get wrong: the smallest subnormal, the largest double, a sum that is not
#: 0.3, a negative zero, digits beyond 17 significant ones
TRICKY = [5e-324, 1.7976931348623157e308, 0.1 + 0.2, -0.0, 2.220446049250313e-16, 123456789.12345679]


def _result(cases: list[CaseRecord], item_kind: str = "organ"):
    return build_result(
        "toy",
        model=None,
        config={},
        ground_truth_digest="g",
        predictions_digest="p",
        summary={"n_cases": len(cases)},
        warnings=[],
        cases=cases,
        aggregates={},
        item_kind=item_kind,
    )


def _cases() -> list[CaseRecord]:
    return [
        CaseRecord(
            case_id="a\nline two",  # a line break and other characters JSON escapes stay data
            subject_id='s "1" \u2028 \u00e9',
            groups={"site": "x"},
            metrics={"liver": {"dsc": TRICKY[0], "hd": TRICKY[1]}, "heart": {"dsc": TRICKY[2], "hd": math.nan}},
        ),
        CaseRecord(
            case_id="b",
            subject_id="s2",
            groups={"scanner": "ge"},  # another group: "site" is null here, "scanner" null in the first case
            metrics={"liver": {"dsc": TRICKY[3], "hd": TRICKY[4], "nsd": TRICKY[5]}},  # nsd only here
            status="missing_prediction",
        ),
    ]


def test_rows_columns_types_and_exact_values() -> None:
    table = cases_table(_result(_cases()))
    assert table.column_names == [
        "case_id",
        "subject_id",
        "status",
        "message",
        "scanner",
        "site",
        "organ",
        "dsc",
        "hd",
        "nsd",
    ]
    assert [str(t) for t in table.schema.types] == ["string"] * 7 + ["double"] * 3
    rows = table.to_pylist()
    assert [(r["case_id"], r["organ"]) for r in rows] == [
        ("a\nline two", "liver"),
        ("a\nline two", "heart"),
        ("b", "liver"),
    ]
    assert rows[0]["subject_id"] == 's "1" \u2028 \u00e9'
    assert [r["site"] for r in rows] == ["x", "x", None] and [r["scanner"] for r in rows] == [None, None, "ge"]
    assert rows[2]["status"] == "missing_prediction"
    # bit-exact floats (-0.0 keeps its sign); NaN (not applicable) stays NaN, an absent metric is null
    got = [rows[0]["dsc"], rows[0]["hd"], rows[1]["dsc"], rows[2]["dsc"], rows[2]["hd"], rows[2]["nsd"]]
    assert [v.hex() for v in got] == [v.hex() for v in TRICKY]
    assert math.isnan(rows[1]["hd"]) and rows[0]["nsd"] is None and rows[1]["nsd"] is None


def test_parquet_bytes_read_back_by_pandas_and_verified(tmp_path) -> None:
    result = _result(_cases())
    files = output_bytes(result)
    frame = pd.read_parquet(io.BytesIO(files[CASES_PARQUET]))
    assert frame["hd"].isna().tolist() == [False, True, False]
    assert frame["dsc"].tolist() == [TRICKY[0], TRICKY[2], TRICKY[3]]
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert read_results(tmp_path).cases == result.cases  # the reader's verification accepts the set


def test_no_cases_and_all_null_columns() -> None:
    empty = cases_table(_result([]))
    assert empty.num_rows == 0 and empty.column_names == ["case_id", "subject_id", "status", "message", "organ"]
    only_nan = cases_table(_result([CaseRecord(case_id="c", subject_id="s", metrics={"x": {"dsc": math.nan}})]))
    assert only_nan.schema.field("dsc").type == pa.float64() and only_nan.column("dsc").null_count == 0
    assert math.isnan(only_nan.column("dsc")[0].as_py())  # not applicable: NaN, not null (null: absent)
    buf = io.BytesIO()
    pq.write_table(only_nan, buf)
    back = pq.read_table(io.BytesIO(buf.getvalue()))
    assert back.schema == only_nan.schema and math.isnan(back.column("dsc")[0].as_py())


def test_case_without_items_keeps_one_row_and_reads_back(tmp_path) -> None:
    """Schema 2: cases.parquet is the case records, so a case without items (no prediction, every item absent)
    keeps one row with a null item, and its message."""
    cases = [*_cases(), CaseRecord(case_id="c", subject_id="s3", status="missing_prediction", message="no file")]
    result = _result(cases)
    rows = cases_table(result).to_pylist()
    assert [(r["case_id"], r["organ"], r["message"]) for r in rows][-1] == ("c", None, "no file")
    for name, data in output_bytes(result).items():
        (tmp_path / name).write_bytes(data)
    back = read_results(tmp_path)
    assert [c.model_dump() for c in back.cases][-1] == cases[-1].model_dump()
    assert back.cases.digest() == result.cases.digest()


def test_writing_outputs_does_not_import_pandas() -> None:
    """``evaluate`` never needs pandas (importing it costs ~0.3 s per run); readers may use it."""
    script = textwrap.dedent(
        """
        import json, sys
        from trackeval.io.results_folder import output_bytes
        from trackeval.results import READABLE_JSON_BYTES, CaseRecord, build_result, json_text
        result = build_result("toy", model=None, config={}, ground_truth_digest="g", predictions_digest="p",
                              summary={}, warnings=[], item_kind="organ",
                              cases=[CaseRecord(case_id="c", subject_id="s", metrics={"x": {"dsc": 0.5}})],
                              aggregates={})
        files = output_bytes(result)
        print(json.dumps({"pandas": "pandas" in sys.modules, "size": len(files["cases.parquet"])}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out == {"pandas": False, "size": out["size"]} and out["size"] > 0


def test_json_text_is_indented_when_small_and_compact_when_large() -> None:
    small = {"b": 1.5, "a": [1, None]}
    assert json_text(small) == '{\n "a": [\n  1,\n  null\n ],\n "b": 1.5\n}\n'
    large = {f"k{i:07d}": i * 0.5 for i in range(READABLE_JSON_BYTES // 10)}
    text = json_text(large)
    assert text.endswith("}\n") and "\n" not in text[:-1] and json.loads(text) == large
    assert text == json.dumps(large, sort_keys=True, separators=(",", ":")) + "\n"  # what the C encoder writes
    with pytest.raises(ValueError):
        json_text({"x": math.nan})
