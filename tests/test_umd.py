"""UMD adapter end to end on real NIfTI files: values, keys, NaN semantics, paired gap, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import umd_argv
from tests.results_doc import results_doc
from trackeval.benchmarks.umd.config import UMD_ORGANS
from trackeval.cli import main


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    s = a.sum() + b.sum()
    return float("nan") if s == 0 else 2.0 * (a & b).sum() / s


def _run(gt: Path, pred: Path, out: Path, *extra: str) -> dict:
    rc = main(umd_argv(gt, pred, out, "--set", "bootstrap.n_resamples=200", *extra))
    assert rc == 0
    return results_doc(out)


def test_values_keys_and_gap(umd_dataset, tmp_path: Path):
    import nibabel as nib

    gt, pred = umd_dataset()
    res = _run(gt, pred, tmp_path / "out", "--executor", "local")
    agg = res["aggregates"]
    dsc = {}
    for case in ("s1_ct", "s1_pet", "s2_ct", "s2_pet"):
        t = np.asarray(nib.load(gt / f"{case}.nii.gz").dataobj)
        p = np.asarray(nib.load(pred / f"{case}.nii.gz").dataobj)
        dsc[case] = {1: _dice(t == 1, p == 1), 5: _dice(t == 5, p == 5)}
    liver = np.mean([d[1] for d in dsc.values()])
    heart = np.mean([d[5] for d in dsc.values()])
    assert agg["umd/dsc/by_organ/liver"]["value"] == pytest.approx(liver)
    assert agg["umd/dsc/by_organ/heart"]["value"] == pytest.approx(heart)
    # headline = mean over organs with any valid value; the 11 absent organs are NaN, not 0
    assert agg["umd/dsc"]["value"] == pytest.approx((liver + heart) / 2)
    assert agg["umd/dsc/by_organ/brain"]["value"] is None
    assert agg["umd/dsc/by_organ/brain"]["n_valid"] == 0 and agg["umd/dsc/by_organ/liver"]["n_valid"] == 4
    ct_liver = np.mean([dsc["s1_ct"][1], dsc["s2_ct"][1]])
    assert agg["umd/dsc/by_modality/ct/by_organ/liver"]["value"] == pytest.approx(ct_liver)
    # paired gap per subject and organ
    gaps_liver = [dsc[f"{s}_ct"][1] - dsc[f"{s}_pet"][1] for s in ("s1", "s2")]
    gaps_heart = [dsc[f"{s}_ct"][5] - dsc[f"{s}_pet"][5] for s in ("s1", "s2")]
    assert agg["umd/dsc_gap/ct_vs_pet/by_organ/liver"]["value"] == pytest.approx(np.mean(gaps_liver))
    assert agg["umd/dsc_gap/ct_vs_pet"]["value"] == pytest.approx((np.mean(gaps_liver) + np.mean(gaps_heart)) / 2)
    assert agg["umd/dsc_gap/ct_vs_pet"]["n"] == 2
    assert "umd/dsc_gap/mri_vs_pet" not in agg
    s = agg["umd/dsc"]
    assert s["ci95_low"] <= s["value"] <= s["ci95_high"]
    # heart missed on s2 PET: HD95 penalty = image diagonal in mm
    diag = float(np.sqrt((20 * 1.5) ** 2 + (18 * 1.0) ** 2 + (12 * 2.0) ** 2))
    s2_pet = next(c for c in res["cases"] if c["case_id"] == "s2_pet")
    assert s2_pet["metrics"]["heart"]["hd95"] == pytest.approx(diag)
    assert s2_pet["metrics"]["heart"]["dsc"] == 0.0 and s2_pet["metrics"]["heart"]["nsd"] == 0.0
    assert s2_pet["metrics"]["brain"]["dsc"] is None

    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    for key in (
        "umd/dsc",
        "umd/nsd",
        "umd/hd95",
        "umd/dsc/ci95_low",
        "umd/dsc/ci95_high",
        "umd/dsc/n_valid",
        "umd/nsd/by_organ/liver/ci95_low",
        "umd/hd95/by_modality/pet/by_organ/heart",
        "umd/dsc_gap/ct_vs_pet/by_organ/liver",
        "umd/n_cases",
    ):
        assert key in metrics, key
    assert "umd/dsc/by_organ/brain" not in metrics  # NaN aggregates are not logged as numbers
    assert all(isinstance(v, float) and np.isfinite(v) for v in metrics.values())
    assert len(metrics) < 500

    frame = pd.read_parquet(tmp_path / "out" / "cases.parquet")
    assert len(frame) == 4 * len(UMD_ORGANS)
    row = frame[(frame.case_id == "s1_ct") & (frame.organ == "liver")].iloc[0]
    assert row.dsc == pytest.approx(dsc["s1_ct"][1]) and row.modality == "ct" and row.site == "a"


@pytest.mark.parametrize("start_method", ["auto", "fork", "forkserver", "spawn"])
def test_results_are_byte_identical_across_executors(umd_dataset, tmp_path: Path, start_method: str):
    gt, pred = umd_dataset()
    _run(gt, pred, tmp_path / "a", "--executor", "local", "--no-cache")
    _run(
        gt, pred, tmp_path / "b", "--executor", "processes", "--workers", "2", "--no-cache",
        "--set", f"engine.start_method={start_method}",
    )  # fmt: skip
    for name in ("results.json", "metrics.json", "cases.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_region_labels_from_config(umd_dataset, tmp_path: Path):
    gt, pred = umd_dataset()
    res = _run(
        gt,
        pred,
        tmp_path / "out",
        "--executor",
        "local",
        "--set",
        "umd.labels={liver: 1, heart: 5, both: [1, 5]}",
    )
    frame = pd.read_parquet(tmp_path / "out" / "cases.parquet")
    assert set(frame.organ) == {"liver", "heart", "both"}
    assert "umd/dsc/by_organ/both" in res["aggregates"]
    r = frame[frame.case_id == "s1_ct"].set_index("organ")
    assert r.loc["both", "n_ref"] == r.loc["liver", "n_ref"] + r.loc["heart", "n_ref"]


def test_missing_prediction_is_scored_and_counted(umd_dataset, tmp_path: Path):
    gt, pred = umd_dataset()
    (pred / "s2_pet.nii.gz").unlink()
    (pred / "stray.nii.gz").write_bytes((pred / "s1_ct.nii.gz").read_bytes())
    res = _run(gt, pred, tmp_path / "out", "--executor", "local")
    case = next(c for c in res["cases"] if c["case_id"] == "s2_pet")
    assert case["status"] == "missing_prediction"
    assert case["metrics"]["liver"]["dsc"] == 0.0 and case["metrics"]["brain"]["dsc"] is None
    assert res["summary"]["n_missing_predictions"] == 1 and res["summary"]["n_extra_predictions"] == 1
    assert any("stray.nii.gz" in w for w in res["warnings"])
    res2 = _run(gt, pred, tmp_path / "out2", "--executor", "local", "--set", "umd.missing_prediction=exclude")
    case2 = next(c for c in res2["cases"] if c["case_id"] == "s2_pet")
    assert case2["metrics"]["liver"] == {} and res2["aggregates"]["umd/dsc/by_organ/liver"]["n_valid"] == 3


def test_bundled_example_runs(tmp_path: Path):
    assert main(["demo", "--out", str(tmp_path), "--executor", "local", "--set", "bootstrap.n_resamples=100"]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    agg = res["aggregates"]
    assert res["data"]["n_cases"] == 6
    assert agg["umd/dsc/by_organ/brain"]["n_valid"] == 0  # outside a chest CT's field of view
    assert 0.5 < agg["umd/dsc/by_modality/ct"]["value"] <= 1.0
    assert agg["umd/dsc_gap/ct_vs_pet"]["value"] > 0  # PET predictions are coarser by construction


def test_empty_both_policy_perfect_counts_absent_organs(umd_dataset, tmp_path: Path):
    gt, pred = umd_dataset()
    res = _run(gt, pred, tmp_path / "out", "--executor", "local", "--set", "umd.empty_both=perfect")
    agg = res["aggregates"]
    assert agg["umd/dsc/by_organ/brain"]["value"] == 1.0 and agg["umd/dsc/by_organ/brain"]["n_valid"] == 4
    assert agg["umd/hd95/by_organ/brain"]["value"] == 0.0
    liver, heart = agg["umd/dsc/by_organ/liver"]["value"], agg["umd/dsc/by_organ/heart"]["value"]
    assert agg["umd/dsc"]["value"] == pytest.approx((liver + heart + 11 * 1.0) / 13)
