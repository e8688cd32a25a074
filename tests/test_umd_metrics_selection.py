"""``umd.metrics``: the selected per-organ metrics are computed (with the full run's values), the others are absent;
a bad selection is a one-line config error naming the field."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import trackeval.benchmarks.segmentation as segmentation
from tests.conftest import umd_argv
from tests.results_doc import results_doc
from trackeval.cli import main

COUNTS = {"n_ref", "n_pred"}


def _run(gt: Path, pred: Path, out: Path, *extra: str) -> dict:
    assert main(umd_argv(gt, pred, out, "--executor", "local", "--no-cache", *extra)) == 0
    return results_doc(out)


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        ("[dsc,iou]", {"dsc", "iou"}),
        ("[hd,dsc]", {"dsc", "hd"}),  # any order: stored in canonical order
        ("[dsc,nsd,hd95]", {"dsc", "nsd", "hd95"}),
    ],
)
def test_selected_metrics_equal_the_full_run_and_the_others_are_absent(
    umd_dataset, tmp_path: Path, selection: str, expected: set[str]
) -> None:
    gt, pred = umd_dataset()
    full = _run(gt, pred, tmp_path / "full")
    part = _run(gt, pred, tmp_path / "part", "--set", f"umd.metrics={selection}")
    assert full["config"]["umd"]["metrics"] == ["dsc", "iou", "nsd", "hd95", "hd", "assd"]
    assert set(part["config"]["umd"]["metrics"]) == expected
    for full_case, case in zip(full["cases"], part["cases"], strict=True):
        for organ, values in case["metrics"].items():
            assert set(values) == expected | COUNTS, (case["case_id"], organ)
            for metric, value in values.items():
                assert _same(value, full_case["metrics"][organ][metric]), (case["case_id"], organ, metric)
    # aggregates: every key of a selected metric is there with the full run's numbers, no key of another one
    unselected = {"nsd", "hd95"} - expected
    for key, summary in full["aggregates"].items():
        metric = key.split("/")[1]
        if metric in unselected:
            assert key not in part["aggregates"]
        else:
            assert part["aggregates"][key] == summary, key
    assert not any(key.split("/")[1] in unselected for key in part["aggregates"])
    assert "umd/dsc_gap/ct_vs_pet" in part["aggregates"]


def test_overlap_only_never_computes_surface_distances(umd_dataset, tmp_path: Path, monkeypatch) -> None:
    gt, pred = umd_dataset()

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("surface distances computed for umd.metrics=[dsc, iou]")

    monkeypatch.setattr(segmentation, "surface_metrics", boom)
    res = _run(gt, pred, tmp_path / "out", "--set", "umd.metrics=[dsc,iou]")
    assert res["aggregates"]["umd/dsc"]["value"] > 0.5


def test_empty_both_perfect_applies_to_the_selection_only(umd_dataset, tmp_path: Path) -> None:
    gt, pred = umd_dataset()
    res = _run(gt, pred, tmp_path / "out", "--set", "umd.metrics=[dsc,hd]", "--set", "umd.empty_both=perfect")
    brain = res["cases"][0]["metrics"]["brain"]  # absent from both maps
    assert brain == {"dsc": 1.0, "hd": 0.0, "n_ref": 0.0, "n_pred": 0.0}


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("[dsc,foo]", "field umd.metrics.1: Input should be 'dsc', 'iou', 'nsd', 'hd95', 'hd' or 'assd'"),
        ("[]", "field umd.metrics: Value error, umd.metrics must not be empty"),
        ("[iou,nsd]", "field umd.metrics: Value error, umd.metrics must include 'dsc'"),
        ("[dsc,iou,dsc]", "field umd.metrics: Value error, umd.metrics must not repeat a value"),
        ("dsc", "field umd.metrics: Input should be a valid tuple"),
    ],
)
def test_bad_selection_is_a_config_error(umd_dataset, tmp_path: Path, capsys, value: str, needle: str) -> None:
    gt, pred = umd_dataset()
    out = tmp_path / "out"
    assert main(umd_argv(gt, pred, out, "--set", f"umd.metrics={value}")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trackeval: error: invalid config") and needle in err[0], err
    assert not out.exists()


IMPORTS_PROBE = """
import json, sys
from trackeval.cli import main
code = main(sys.argv[1:])
heavy = ("numba", "scipy.ndimage", "scipy.spatial", "scipy.sparse", "scipy.stats", "pandas", "torch", "monai")
print(json.dumps({"code": code, "loaded": [m for m in heavy if m in sys.modules]}))
"""


@pytest.mark.parametrize(("selection", "loaded"), [("[dsc,iou]", set()), ("[dsc,hd95]", {"numba"})])
def test_a_dice_only_evaluation_loads_no_scipy_pandas_or_torch(
    umd_dataset, tmp_path: Path, selection: str, loaded: set[str]
) -> None:
    """The start-up a Dice/IoU run pays is numpy, pydantic and the NIfTI reader: the surface metrics' compiled
    loops (numba, ~0.25 s to load) only when a surface metric is selected; scipy's submodules, pandas (~0.3 s)
    and torch never for these maps. (nibabel imports the bare ``scipy`` package, which loads none of them.)"""
    import subprocess
    import sys

    gt, pred = umd_dataset()
    argv = umd_argv(
        gt, pred, tmp_path / "out", "--executor", "local", "--no-cache", "--set", f"umd.metrics={selection}"
    )
    proc = subprocess.run([sys.executable, "-c", IMPORTS_PROBE, *argv], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["code"] == 0
    # scipy.spatial (the k-d tree) loads only when a surface needs it: not for these small cubes
    assert set(out["loaded"]) - {"scipy.spatial"} == loaded
