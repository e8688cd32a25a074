"""nnU-Net's ``ignore`` label in UMD (issue 37): voxels whose truth holds it are left out of every count.

nnU-Net v2 (``evaluation/evaluate_predictions.py``, ``compute_tp_fp_fn_tn``) counts TP, FP, FN and TN only where
the reference is not the ignore label; ``LabelManager`` requires the ignore label to be one integer, the highest
label value. nnunetv2 is not installed in the test environment (it pulls torch, SimpleITK, dynamic-network-
architectures ...), so the expected numbers are counted by hand on two small NIfTI cases, slice by slice.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import save_nifti, umd_argv
from tests.results_doc import results_doc
from trackeval.cli import main

SHAPE = (4, 4, 2)  # 4 slices of 8 voxels along the first axis
BG, LIVER, SPLEEN, IGNORE = 0, 1, 2, 3
DATASET_JSON = {
    "channel_names": {"0": "CT"},
    "labels": {"background": BG, "liver": LIVER, "spleen": SPLEEN, "ignore": IGNORE},
    "numTraining": 1,
    "file_ending": ".nii.gz",
}


def _case_1() -> tuple[np.ndarray, np.ndarray]:
    """Slice 0: liver, predicted (TP 8). Slice 1: ignore in the truth, liver predicted (not counted). Slice 2:
    spleen in 4 truth voxels, 2 of them predicted spleen and 2 liver (spleen TP 2 FN 2, liver FP 2). Slice 3:
    background, 2 voxels predicted spleen (FP 2) and one holding the ignore value (background to every label)."""
    t, p = np.zeros(SHAPE, np.uint8), np.zeros(SHAPE, np.uint8)
    t[0], p[0] = LIVER, LIVER
    t[1], p[1] = IGNORE, LIVER
    t[2, 0:2, :] = SPLEEN
    p[2, 0, :], p[2, 1, :] = SPLEEN, LIVER
    p[3, 0, :] = SPLEEN
    p[3, 3, 1] = IGNORE
    return t, p


def _case_2() -> tuple[np.ndarray, np.ndarray]:
    """Slice 0: one spleen voxel, predicted; the rest background. Slices 1-3: ignore in the truth, liver
    predicted: liver has no count at all (Dice NaN), spleen Dice 1."""
    t, p = np.zeros(SHAPE, np.uint8), np.zeros(SHAPE, np.uint8)
    t[0, 0, 0] = p[0, 0, 0] = SPLEEN
    t[1:], p[1:] = IGNORE, LIVER
    return t, p


#: hand counts (TP, FP, FN, TN): TN over the voxels that are not ignored (24 in case 1, 8 in case 2)
COUNTS = {
    "case_001": {"1": (8, 2, 0, 14), "2": (2, 2, 2, 18)},
    "case_002": {"1": (0, 0, 0, 8), "2": (1, 0, 0, 7)},
}
DICE = {"case_001": {"liver": 8 / 9, "spleen": 0.5}, "case_002": {"liver": math.nan, "spleen": 1.0}}


def _dataset(root: Path, dataset_json: dict = DATASET_JSON) -> tuple[Path, Path]:
    ds, pred = root / "nnUNet_raw" / "Dataset502_Sparse", root / "predictions"
    (ds / "labelsTs").mkdir(parents=True)
    pred.mkdir()
    (ds / "dataset.json").write_text(json.dumps(dataset_json, indent=4))
    for case, (t, p) in (("case_001", _case_1()), ("case_002", _case_2())):
        save_nifti(ds / "labelsTs" / f"{case}.nii.gz", t)
        save_nifti(pred / f"{case}.nii.gz", p)
    return ds, pred


def _run(ds: Path, pred: Path, out: Path, *extra: str) -> dict:
    argv = umd_argv(ds, pred, out, "--executor", "local", "--set", "bootstrap.n_resamples=50", *extra)
    assert main(argv) == 0
    return results_doc(out)


def _fails(ds: Path, pred: Path, tmp_path: Path, capsys, *extra: str) -> str:
    rc = main(umd_argv(ds, pred, tmp_path / "out", "--executor", "local", *extra))
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("trackeval: error:")]
    assert rc == 2 and len(lines) == 1, lines
    return lines[0]


def test_hand_counts_are_what_the_fixture_holds():
    """The hand counts re-derived with nnU-Net's rule written out (mask of the non-ignored reference)."""
    for case, (t, p) in (("case_001", _case_1()), ("case_002", _case_2())):
        use = t != IGNORE
        for label, (tp, fp, fn, tn) in COUNTS[case].items():
            r, q = t == int(label), p == int(label)
            assert (tp, fp, fn, tn) == tuple(int(np.sum(m & use)) for m in (r & q, ~r & q, r & ~q, ~r & ~q))


def test_ignore_voxels_are_left_out_of_every_count(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    res = _run(ds, pred, tmp_path / "out", "--nnunet-summary")
    assert res["config"]["umd"]["labels"] == {"liver": LIVER, "spleen": SPLEEN}
    assert res["config"]["umd"]["metrics"] == ["dsc", "iou"]
    assert any("ignore label 3" in w and "dsc, iou" in w for w in res["warnings"]), res["warnings"]
    cases = {c["case_id"]: c["metrics"] for c in res["cases"]}
    assert cases["case_001"]["liver"] == pytest.approx({"dsc": 8 / 9, "iou": 0.8, "n_ref": 8.0, "n_pred": 10.0})
    assert cases["case_001"]["spleen"] == pytest.approx({"dsc": 0.5, "iou": 1 / 3, "n_ref": 4.0, "n_pred": 4.0})
    assert cases["case_002"]["liver"]["dsc"] is None and cases["case_002"]["liver"]["n_pred"] == 0.0
    assert cases["case_002"]["spleen"]["dsc"] == 1.0
    agg = res["aggregates"]
    assert agg["umd/dsc/by_organ/liver"]["value"] == pytest.approx(8 / 9, abs=1e-12)  # case 2 not applicable
    assert agg["umd/dsc/by_organ/liver"]["n_valid"] == 1
    assert agg["umd/dsc/by_organ/spleen"]["value"] == pytest.approx(0.75, abs=1e-12)
    assert agg["umd/dsc"]["value"] == pytest.approx((8 / 9 + 0.75) / 2, abs=1e-12)
    assert not any(k.startswith(("umd/nsd", "umd/hd", "umd/assd")) for k in agg)


def test_summary_json_as_nnunet_writes_it(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    _run(ds, pred, tmp_path / "out", "--nnunet-summary")
    raw = (tmp_path / "out" / "summary.json").read_text()
    summary = json.loads(raw)
    assert raw == json.dumps(summary, sort_keys=True, indent=4).replace('"NaN"', "NaN")
    assert [c["prediction_file"] for c in summary["metric_per_case"]] == ["case_001.nii.gz", "case_002.nii.gz"]
    for entry in summary["metric_per_case"]:
        case = entry["prediction_file"].removesuffix(".nii.gz")
        assert set(entry["metrics"]) == {"1", "2"}  # the ignore label is no key
        for label, (tp, fp, fn, tn) in COUNTS[case].items():
            m = entry["metrics"][label]
            assert (m["TP"], m["FP"], m["FN"], m["TN"], m["n_pred"], m["n_ref"]) == (tp, fp, fn, tn, tp + fp, tp + fn)
            name = {"1": "liver", "2": "spleen"}[label]
            want = DICE[case][name]
            assert math.isnan(m["Dice"]) if math.isnan(want) else m["Dice"] == pytest.approx(want, abs=1e-12)
    mean = summary["mean"]
    assert mean["1"]["Dice"] == pytest.approx(8 / 9) and mean["1"]["TN"] == pytest.approx((14 + 8) / 2)
    assert mean["2"]["Dice"] == pytest.approx(0.75) and mean["2"]["IoU"] == pytest.approx((1 / 3 + 1) / 2)
    assert summary["foreground_mean"]["Dice"] == pytest.approx((8 / 9 + 0.75) / 2)


def test_overlap_metrics_set_explicitly_need_no_warning(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    res = _run(ds, pred, tmp_path / "out", "--set", "umd.metrics=[dsc,iou]")
    assert not any("ignore label" in w for w in res["warnings"])
    assert res["aggregates"]["umd/dsc"]["value"] == pytest.approx((8 / 9 + 0.75) / 2, abs=1e-12)


@pytest.mark.parametrize(
    ("change", "extra", "needles"),
    [
        ({}, ("--set", "umd.metrics=[dsc,hd95]"), ("ignore label 3", "hd95", "umd.metrics=[dsc, iou]")),
        ({}, ("--set", "umd.labels={liver: 1, spleen: 3}"), ("'spleen' to 3", "ignore label", "field=labels")),
        ({"ignore": 7}, (), ("ignore label 7", "highest label value (3 here)", "field=labels.ignore")),
        ({"ignore": [3]}, (), ("ignore label [3]", "field=labels.ignore")),
    ],
)
def test_refusals_are_one_line(tmp_path: Path, capsys, change: dict, extra: tuple[str, ...], needles: tuple[str, ...]):
    labels = {k: v for k, v in DATASET_JSON["labels"].items() if k != "ignore"} | (change or {"ignore": IGNORE})
    ds, pred = _dataset(tmp_path, {**DATASET_JSON, "labels": labels})
    line = _fails(ds, pred, tmp_path, capsys, *extra)
    for needle in needles:
        assert needle in line, line
