"""Manifest group columns that would overwrite an output column are refused, never silently merged.

A UMD manifest's extra columns become case groups, and every group becomes a column of ``cases.parquet`` next to
``case_id``, ``subject_id``, ``status``, the item column (``organ``) and the per-organ metrics. A group named like
one of those would overwrite it (``status`` = the manifest's text instead of ``ok``; ``dsc`` = the Dice of the
row replaced by a manifest value). :func:`trackeval.results.check_group_columns`, run by every
``BenchmarkResult``, refuses it: exit 2 naming the case and the column; ``--out`` is not created.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.conftest import umd_argv, write_manifest
from tests.results_doc import results_doc
from trackeval.errors import InputError
from trackeval.results import CASE_COLUMNS, check_group_columns

UMD_METRICS = ("dsc", "iou", "nsd", "hd95", "hd", "assd", "n_ref", "n_pred")
FAST = ("--executor", "local", "--no-cache", "--set", "bootstrap.n_resamples=20")


def _with_column(gt, name: str, value: str = "x") -> None:
    """Add column ``name`` (``value`` on every row) to the UMD manifest of ``gt``."""
    rows = pd.read_csv(gt / "manifest.csv", dtype=str).to_dict("records")
    write_manifest(gt / "manifest.csv", [{**row, name: value} for row in rows])


@pytest.mark.parametrize("column", ["status", "message", "organ", *UMD_METRICS])
def test_umd_manifest_column_named_like_an_output_column(cli, umd_dataset, tmp_path, column):
    gt, pred = umd_dataset()
    _with_column(gt, column, "0.5")
    out = tmp_path / "out"
    cli(*umd_argv(gt, pred, out, *FAST)).one_line_error(
        f"case group column {column!r}", "would overwrite it", f"file={gt / 'manifest.csv'}, case=s1_ct, field={column}"
    )
    assert not out.exists()


def test_an_ordinary_group_column_is_kept_beside_the_outputs(cli, umd_dataset, tmp_path):
    """Control: ``site`` (and ``scanner``) are groups; status and Dice stay the computed ones."""
    gt, pred = umd_dataset()
    _with_column(gt, "scanner", "0.5")
    out = tmp_path / "out"
    assert cli(*umd_argv(gt, pred, out, *FAST)).rc == 0
    frame = pd.read_parquet(out / "cases.parquet")
    assert set(frame["status"]) == {"ok"} and set(frame["scanner"]) == {"0.5"} and set(frame["site"]) == {"a"}
    liver = frame[(frame["case_id"] == "s1_ct") & (frame["organ"] == "liver")]
    case = next(c for c in results_doc(out)["cases"] if c["case_id"] == "s1_ct")
    assert float(liver["dsc"].iloc[0]) == case["metrics"]["liver"]["dsc"] != 0.5


@pytest.mark.parametrize(
    ("groups", "items", "field", "what"),
    [
        ({"status": "done"}, ["liver"], "status", "a case field"),
        ({"case_id": "c9"}, ["liver"], "case_id", "a case field"),
        ({"subject_id": "s9"}, ["liver"], "subject_id", "a case field"),
        ({"organ": "liver"}, None, "organ", "the item column"),  # items unknown while reading a manifest
        ({"organ": "heart"}, ["liver"], "organ", "the item column"),
        ({"hd95": "3"}, ["liver"], "hd95", "a metric"),
    ],
)
def test_the_shared_check_names_file_case_and_column(groups, items, field, what):
    with pytest.raises(InputError) as err:
        check_group_columns(
            groups, item_kind="organ", metrics=UMD_METRICS, items=items, file="gt/manifest.csv", case_id="c1"
        )
    assert err.value.file == "gt/manifest.csv" and err.value.case_id == "c1" and err.value.field == field
    assert what in err.value.message


def test_a_group_equal_to_the_case_item_is_no_collision():
    """3D-MIR: group ``region`` of a case whose one item is that region (the same value twice)."""
    check_group_columns({"region": "colon"}, item_kind="region", metrics=["group/ap_at_10"], items=["colon"])
    assert set(CASE_COLUMNS) == {"case_id", "subject_id", "status", "message"}


def test_a_results_file_with_a_colliding_group_is_refused_by_track(cli, umd_dataset, tmp_path):
    """A hand-edited results.json (its case table's group list names ``status``, so the status column is read as a
    group) is refused when read: nothing reaches the MLflow store."""
    gt, pred = umd_dataset()
    out = tmp_path / "out"
    assert cli(*umd_argv(gt, pred, out, *FAST)).rc == 0
    first = results_doc(out)["cases"][0]["case_id"]
    doc = json.loads((out / "results.json").read_text())
    doc["cases"]["groups"].append("status")
    (out / "results.json").write_text(json.dumps(doc))
    store = tmp_path / "mlflow.db"
    res = cli("track", out, "--set", f"tracking.uri=sqlite:///{store}")
    res.one_line_error("case group column 'status'", f"case={first}", "field=status", rc=2)
    assert not store.exists() or _finished_runs(store) == 0


def _finished_runs(store) -> int:
    import sqlite3

    with sqlite3.connect(store) as db:
        tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
        return db.execute("select count(*) from runs where status='FINISHED'").fetchone()[0] if "runs" in tables else 0
