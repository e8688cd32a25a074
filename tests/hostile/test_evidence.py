"""Evidence is verified, not trusted: ``trackeval track`` refuses a results folder whose files disagree.

Each case tampers with a real UMD results folder (hand-edited numbers rewritten consistently into every derived
file, so only the recomputation catches them; files swapped in from another version; symlinks, FIFOs, missing and
malformed files) and asserts exit 2 with one line naming the file and the key, that the folder is left as it
was, and that no MLflow store was created (the folder is refused before anything is logged).
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests import gate_data
from trackeval.errors import InputError
from trackeval.io.results_folder import (
    CASES_PARQUET,
    METRICS_JSON,
    RESULTS_JSON,
    output_bytes,
    read_results,
    read_results_files,
)
from trackeval.registry import metric_info
from trackeval.results import BenchmarkResult, CaseRecord, MetricSummary, build_result


@pytest.fixture(scope="module")
def versions(tmp_path_factory) -> dict[str, Path]:
    """Real results folders of two model versions of the same ground truth."""
    root = tmp_path_factory.mktemp("umd")
    gt = gate_data.make_ground_truth(root)
    cfg = gate_data.config("engine.cache=false")
    return {v: gate_data.evaluate_version(root, gt, v, cfg)[1] for v in ("champion", "improved")}


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in (RESULTS_JSON, METRICS_JSON, CASES_PARQUET):
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


def _forge(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path, Path], None]:
    """Edit the result (its JSON, with the case records inline as a list), then rewrite the whole set from the
    edited result: a forgery consistent across the set (results.json's case digests included), which only
    recomputation from the case records can catch."""

    def tamper(out: Path, _other: Path) -> None:
        data = json.loads((out / RESULTS_JSON).read_text())
        data["cases"] = [case.model_dump(mode="json") for case in read_results(out).cases]
        edit(data)
        result = BenchmarkResult.model_validate(data)
        for name, raw in output_bytes(result).items():
            (out / name).write_bytes(raw)

    return tamper


def _set_agg(key: str, field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["aggregates"][key].__setitem__(field, value)


def _shift_agg(key: str, delta: float) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["aggregates"][key].__setitem__("value", d["aggregates"][key]["value"] + delta)


def _case_metric(d: dict[str, Any]) -> None:
    d["cases"][0]["metrics"]["liver"]["dsc"] = 0.99


def _drop_case(d: dict[str, Any]) -> None:
    d["cases"].pop()


def _flip_status(d: dict[str, Any]) -> None:
    d["cases"][3]["status"] = "missing_prediction"


FORGERIES = [
    ("headline_raised", _shift_agg("umd/dsc", 0.05), "umd/dsc"),
    ("headline_lowered", _shift_agg("umd/hd95", -0.5), "umd/hd95"),
    ("headline_nulled", _set_agg("umd/nsd", "value", None), "umd/nsd"),
    ("item_mean", _shift_agg("umd/dsc/by_organ/liver", 0.01), "umd/dsc/by_organ/liver"),
    ("item_tiny_edit", _shift_agg("umd/dsc/by_organ/heart", -1e-6), "umd/dsc/by_organ/heart"),
    ("item_n_valid", _set_agg("umd/nsd/by_organ/kidney_left", "n_valid", 11), "umd/nsd/by_organ/kidney_left"),
    (
        "nested_group_item",
        _shift_agg("umd/dsc/by_modality/pet/by_organ/liver", 0.1),
        "umd/dsc/by_modality/pet/by_organ/liver",
    ),
    ("group_headline", _shift_agg("umd/hd95/by_modality/ct", 1.0), "umd/hd95/by_modality/ct"),
    ("case_record", _case_metric, "umd/dsc"),
    ("dropped_case", _drop_case, "data.n_cases"),
    ("summary_n_cases", lambda d: d["summary"].__setitem__("n_cases", 13), "summary.n_cases"),
    (
        "summary_missing",
        lambda d: d["summary"].__setitem__("n_missing_predictions", 2),
        "summary.n_missing_predictions",
    ),
    ("status_flipped", _flip_status, "summary.n_missing_predictions"),
    ("data_n_cases", lambda d: d["data"].__setitem__("n_cases", 11), "data.n_cases"),
]


def _write(name: str, raw: bytes) -> Callable[[Path, Path], None]:
    return lambda out, _other: (out / name).write_bytes(raw)


def _edit_metrics(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path, Path], None]:
    def tamper(out: Path, _other: Path) -> None:
        data = json.loads((out / METRICS_JSON).read_text())
        edit(data)
        (out / METRICS_JSON).write_text(json.dumps(data, indent=1))

    return tamper


def _edit_cases(edit: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path, Path], None]:
    def tamper(out: Path, _other: Path) -> None:
        frame = edit(pd.read_parquet(out / CASES_PARQUET))
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        (out / CASES_PARQUET).write_bytes(buf.getvalue())

    return tamper


def _cell(column: str, value: Any) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def edit(frame: pd.DataFrame) -> pd.DataFrame:
        frame.loc[4, column] = value
        return frame

    return edit


def _swap(name: str) -> Callable[[Path, Path], None]:
    return lambda out, other: (out / name).write_bytes((other / name).read_bytes())


MISMATCHES = [
    ("metrics_value", _edit_metrics(lambda m: m.__setitem__("umd/dsc", 0.99)), METRICS_JSON, "umd/dsc"),
    ("metrics_ci", _edit_metrics(lambda m: m.__setitem__("umd/dsc/ci95_low", 0.0)), METRICS_JSON, "umd/dsc/ci95_low"),
    ("metrics_missing_key", _edit_metrics(lambda m: m.pop("umd/nsd")), METRICS_JSON, "umd/nsd"),
    ("metrics_extra_key", _edit_metrics(lambda m: m.__setitem__("umd/zzz", 1.0)), METRICS_JSON, "umd/zzz"),
    ("metrics_string", _edit_metrics(lambda m: m.__setitem__("umd/dsc", "0.7")), METRICS_JSON, "umd/dsc"),
    ("metrics_bool", _edit_metrics(lambda m: m.__setitem__("umd/n_cases", True)), METRICS_JSON, "umd/n_cases"),
    ("metrics_null", _edit_metrics(lambda m: m.__setitem__("umd/hd95", None)), METRICS_JSON, "umd/hd95"),
    ("metrics_nan", _edit_metrics(lambda m: m.__setitem__("umd/hd95", math.nan)), METRICS_JSON, "umd/hd95"),
    ("metrics_not_json", _write(METRICS_JSON, b'{"umd/dsc": 0.5,'), METRICS_JSON, None),
    ("metrics_array", _write(METRICS_JSON, b"[1, 2]"), METRICS_JSON, None),
    ("metrics_empty", _write(METRICS_JSON, b""), METRICS_JSON, None),
    ("metrics_latin1", _write(METRICS_JSON, '{"umd/dsc": "caf\xe9"}'.encode("latin-1")), METRICS_JSON, None),
    ("cases_value", _edit_cases(_cell("dsc", 0.123)), CASES_PARQUET, "dsc"),
    ("cases_status", _edit_cases(_cell("status", "missing_prediction")), CASES_PARQUET, "status"),
    ("cases_dropped_column", _edit_cases(lambda f: f.drop(columns=["nsd"])), CASES_PARQUET, "nsd"),
    ("cases_extra_column", _edit_cases(lambda f: f.assign(note="x")), CASES_PARQUET, "note"),
    ("cases_dropped_row", _edit_cases(lambda f: f.iloc[:-1]), CASES_PARQUET, "rows"),
    ("cases_duplicated_row", _edit_cases(lambda f: pd.concat([f, f.iloc[:1]])), CASES_PARQUET, "rows"),
    ("cases_garbage", _write(CASES_PARQUET, b"PAR1 not really"), CASES_PARQUET, None),
    ("cases_empty", _write(CASES_PARQUET, b""), CASES_PARQUET, None),
    ("mixed_metrics_from_other_version", _swap(METRICS_JSON), METRICS_JSON, "umd/dsc"),
    ("mixed_cases_from_other_version", _swap(CASES_PARQUET), CASES_PARQUET, None),
    # results.json records the digests of its case table's columns: the other version's case table is refused
    ("mixed_results_from_other_version", _swap(RESULTS_JSON), CASES_PARQUET, None),
    ("results_not_json", _write(RESULTS_JSON, b'{"schema_version": "1.1", '), RESULTS_JSON, None),
]


def _results_edit(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path, Path], None]:
    def tamper(out: Path, _other: Path) -> None:
        data = json.loads((out / RESULTS_JSON).read_text())
        edit(data)
        (out / RESULTS_JSON).write_text(json.dumps(data))

    return tamper


INVALID = [
    ("schema_major", _results_edit(lambda d: d.__setitem__("schema_version", "3.0")), "schema_version"),
    ("unknown_field", _results_edit(lambda d: d.__setitem__("verified", True)), "verified"),
    (
        "bad_key",
        _results_edit(lambda d: d["aggregates"].__setitem__("umd/DSC", d["aggregates"]["umd/dsc"])),
        "aggregates",
    ),
    (
        "string_value",
        _results_edit(lambda d: d["aggregates"]["umd/dsc"].__setitem__("value", "high")),
        "aggregates.umd/dsc.value",
    ),
]


def _symlink_to_copy(name: str) -> Callable[[Path, Path], None]:
    """``name`` replaced by a symlink to an identical copy outside the folder: the content would verify, the link
    is refused anyway."""

    def tamper(out: Path, _other: Path) -> None:
        outside = out.parent / f"outside-{name}"
        outside.write_bytes((out / name).read_bytes())
        (out / name).unlink()
        (out / name).symlink_to(outside)

    return tamper


def _loop(out: Path, _other: Path) -> None:
    (out / RESULTS_JSON).unlink()
    (out / RESULTS_JSON).symlink_to(out / "loop.json")
    (out / "loop.json").symlink_to(out / RESULTS_JSON)


def _directory(out: Path, _other: Path) -> None:
    (out / METRICS_JSON).unlink()
    (out / METRICS_JSON).mkdir()


def _fifo(out: Path, _other: Path) -> None:
    (out / CASES_PARQUET).unlink()
    os.mkfifo(out / CASES_PARQUET)


def _missing(name: str) -> Callable[[Path, Path], None]:
    return lambda out, _other: (out / name).unlink()


FILES = [
    ("symlinked_results", _symlink_to_copy(RESULTS_JSON), RESULTS_JSON, "symbolic link"),
    ("symlinked_metrics", _symlink_to_copy(METRICS_JSON), METRICS_JSON, "symbolic link"),
    ("symlinked_cases", _symlink_to_copy(CASES_PARQUET), CASES_PARQUET, "symbolic link"),
    ("symlink_loop", _loop, RESULTS_JSON, "symbolic link"),
    ("metrics_is_a_folder", _directory, METRICS_JSON, "not a regular file"),
    ("cases_is_a_fifo", _fifo, CASES_PARQUET, "not a regular file"),
    ("missing_results", _missing(RESULTS_JSON), RESULTS_JSON, "file not found"),
    ("missing_metrics", _missing(METRICS_JSON), METRICS_JSON, "file not found"),
    ("missing_cases", _missing(CASES_PARQUET), CASES_PARQUET, "file not found"),
]


def _snapshot(out: Path) -> dict[str, Any]:
    """The folder's entries: bytes of regular files, link targets, kinds of the rest (links not followed)."""
    snap: dict[str, Any] = {}
    for p in sorted(out.iterdir()):
        if p.is_symlink():
            snap[p.name] = ("link", os.readlink(p))
        elif p.is_file():
            snap[p.name] = p.read_bytes()
        else:
            snap[p.name] = "dir" if p.is_dir() else "special"
    return snap


def _track_refuses(cli, versions, tmp_path, tamper, file_name: str, *needles: str) -> None:
    out = _copy(versions["champion"], tmp_path / "out")
    tamper(out, versions["improved"])
    before = _snapshot(out)
    db = tmp_path / "mlflow.db"
    res = cli("track", out, "--set", f"tracking.uri=sqlite:///{db}", "--set", f"tracking.dvc_root={tmp_path}")
    res.one_line_error(f"file={out / file_name}", *needles, rc=2)
    assert _snapshot(out) == before  # nothing repaired, moved or written
    assert not db.exists()  # refused before any store was opened


@pytest.mark.parametrize(("edit", "key"), [f[1:] for f in FORGERIES], ids=[f[0] for f in FORGERIES])
def test_a_forged_number_is_refused_naming_the_key(cli, versions, tmp_path, edit, key):
    _track_refuses(cli, versions, tmp_path, _forge(edit), RESULTS_JSON, "contradicts", f"field={key}")


@pytest.mark.parametrize(("tamper", "file_name", "key"), [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_a_file_that_disagrees_with_results_json_is_refused(cli, versions, tmp_path, tamper, file_name, key):
    _track_refuses(cli, versions, tmp_path, tamper, file_name, *([f"field={key}"] if key else []))


@pytest.mark.parametrize(("tamper", "field"), [i[1:] for i in INVALID], ids=[i[0] for i in INVALID])
def test_an_invalid_results_json_is_refused_naming_the_field(cli, versions, tmp_path, tamper, field):
    _track_refuses(cli, versions, tmp_path, tamper, RESULTS_JSON, "not a trackeval results file", f"field={field}")


@pytest.mark.parametrize(("tamper", "file_name", "needle"), [f[1:] for f in FILES], ids=[f[0] for f in FILES])
def test_only_regular_files_inside_the_folder_are_read(cli, versions, tmp_path, tamper, file_name, needle):
    _track_refuses(cli, versions, tmp_path, tamper, file_name, needle)


def test_compare_refuses_a_forged_folder(cli, versions, tmp_path):
    """``compare`` reads folders through the same reader: a forged headline is refused there too."""
    out = _copy(versions["champion"], tmp_path / "out")
    _forge(_shift_agg("umd/dsc", 0.05))(out, versions["improved"])
    db = tmp_path / "mlflow.db"
    res = cli("compare", out, versions["improved"], "--set", f"tracking.uri=sqlite:///{db}")
    res.one_line_error(f"file={out / RESULTS_JSON}", "field=umd/dsc", rc=2)


def test_the_verified_bytes_are_returned_for_upload(versions):
    """``read_results_files`` returns exactly the bytes it verified (upload these: no second read to race)."""
    folder = versions["champion"]
    verified = read_results_files(folder)
    assert verified.files == {n: (folder / n).read_bytes() for n in (RESULTS_JSON, METRICS_JSON, CASES_PARQUET)}
    assert verified.result == read_results(folder / RESULTS_JSON)  # a lone results.json: its own checks only


def test_a_lone_results_json_is_still_checked_against_its_cases(versions, tmp_path):
    """A results.json downloaded without metrics.json (an MLflow artifact, with the cases.parquet its digests
    cover) has its numbers recomputed from the case records."""
    data = json.loads((versions["champion"] / RESULTS_JSON).read_text())
    data["aggregates"]["umd/dsc"]["value"] += 0.1
    lone = tmp_path / RESULTS_JSON
    lone.write_text(json.dumps(data))
    (tmp_path / CASES_PARQUET).write_bytes((versions["champion"] / CASES_PARQUET).read_bytes())
    with pytest.raises(InputError, match="contradicts") as err:
        read_results(lone)
    assert err.value.field == "umd/dsc" and err.value.file == str(lone)


def _two_organ_result(dsc: float) -> BenchmarkResult:
    """A UMD result of two cases x two organs, one value null: the organ means are 0.4 and 1.0, so the mean over
    organ means (UMD's declared ``item_mean``) is 0.7 and the mean over cases of each case's mean 0.5."""
    values = [{"a": {"dsc": 0.2}, "b": {}}, {"a": {"dsc": 0.6}, "b": {"dsc": 1.0}}]
    cases = [CaseRecord(case_id=f"c{i}", subject_id=f"s{i}", metrics=m) for i, m in enumerate(values)]
    aggregates = {
        "umd/dsc": MetricSummary(value=dsc, n=2, n_valid=2),
        "umd/dsc/by_organ/a": MetricSummary(value=0.4, n=2, n_valid=2),
        "umd/dsc/by_organ/b": MetricSummary(value=1.0, n=2, n_valid=1),
    }
    return build_result(
        "umd", model=None, config={}, ground_truth_digest="t", predictions_digest="p", summary={"n_cases": 2},
        warnings=[], cases=cases, aggregates=aggregates, item_kind="organ",
    )  # fmt: skip


def test_a_headline_must_follow_its_units_declared_reduction(tmp_path):
    """``umd/dsc`` is declared ``item_mean``: the other rule's value (the mean over cases) is refused when the
    declarations are known, and accepted for a unit not registered here (a plug-in not installed), which may
    follow either rule."""
    lone = tmp_path / RESULTS_JSON
    (tmp_path / CASES_PARQUET).write_bytes(output_bytes(_two_organ_result(0.7))[CASES_PARQUET])  # one table for all
    lone.write_text(_two_organ_result(0.7).to_json())
    assert read_results(lone, declared=metric_info).aggregates["umd/dsc"].value == 0.7
    lone.write_text(_two_organ_result(0.5).to_json())
    with pytest.raises(InputError, match="declared item_mean reduction") as err:
        read_results(lone, declared=metric_info)
    assert err.value.field == "umd/dsc" and err.value.file == str(lone)
    assert read_results(lone, declared=None).aggregates["umd/dsc"].value == 0.5  # no declarations: either rule
    with pytest.raises(InputError, match="declared item_mean reduction"):
        read_results(lone)  # the registered units' declarations by default
    lone.write_text(_two_organ_result(0.6).to_json())
    with pytest.raises(InputError, match=r"0\.7 or 0\.5 \(the mean over organ means, or over cases\)"):
        read_results(lone, declared=None)


def test_editing_a_result_in_memory_never_reaches_a_later_read(versions):
    """The verified-once cache hands out copies: a notebook that edits an aggregate, a case value or a group of
    the result it read, then promotes in the same process, gets the folder's verified numbers on the next read."""
    folder = versions["champion"]
    first = read_results(folder)
    dsc = first.aggregates["umd/dsc"].value
    liver = first.cases.matrix("dsc", ["liver"]).copy()
    first.aggregates["umd/dsc"].value = 0.999
    first.cases.metrics["dsc"][:] = 1.0
    first.cases.groups["modality"][0] = "forged"
    again = read_results(folder)
    assert again.aggregates["umd/dsc"].value == dsc != 0.999
    assert np.array_equal(again.cases.matrix("dsc", ["liver"]), liver, equal_nan=True)
    assert again.cases.field("modality")[0] != "forged" and again == read_results(folder)
