"""UMD on the nnU-Net v2 raw dataset layout: an exact ``DatasetXXX_Name/`` fixture (dataset.json with a region,
``labelsTs/``, ``imagesTs/``, predictions as nnUNetv2_predict writes them) written as real NIfTI files; values
against independent numpy (and MONAI) Dice, summary.json against nnU-Net's definitions computed here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
from monai.metrics import DiceMetric

from tests.conftest import cube, save_nifti, umd_argv, write_manifest
from tests.results_doc import results_doc
from trackeval.cli import main

SHAPE = (16, 14, 10)
#: dataset.json as nnU-Net's generate_dataset_json writes it (key order, a region as a list, regions_class_order)
DATASET_JSON = {
    "channel_names": {"0": "CT"},
    "labels": {
        "background": 0,
        "liver": 1,
        "Kidney Left": 2,
        "heart": 3,
        "lung_left": 4,
        "lung_right": 5,
        "lung": [4, 5],
        "tumor": 6,
    },
    "numTraining": 2,
    "file_ending": ".nii.gz",
    "regions_class_order": [1, 2, 3, 4, 5, 4, 6],
    "licence": "CC-BY-SA 4.0",
    "converted_by": "test",
    "name": "UMDTest",
}
#: what nnU-Net scores: with a region present, every foreground entry in dataset.json order
TARGETS = [1, 2, 3, 4, 5, (4, 5), 6]
CASES = ("case_001", "case_002", "case_003")


def _truth(i: int) -> np.ndarray:
    t = cube(SHAPE, (1, 1, 1), (7 + i, 6, 5), 1)
    cube(SHAPE, (9, 1, 1), (14, 5, 4), 2, t)
    if i < 2:  # case_003: no heart in truth nor prediction (Dice NaN)
        cube(SHAPE, (9, 8, 5), (13, 12, 9), 3, t)
    cube(SHAPE, (1, 8, 6), (4, 13, 9), 4, t)
    cube(SHAPE, (4, 8, 6), (7, 13, 9), 5, t)
    return t


def _prediction(i: int) -> np.ndarray:
    p = cube(SHAPE, (2, 1, 1), (7 + i, 6, 6), 1)
    cube(SHAPE, (9, 1, 1), (13, 5, 4), 2, p)
    if i == 0:
        cube(SHAPE, (9, 8, 5), (13, 11, 9), 3, p)  # case_002 misses the heart: Dice 0
    cube(SHAPE, (1, 8, 6), (5, 13, 9), 4, p)  # left/right lung confused at the border: the region is right
    cube(SHAPE, (5, 8, 6), (7, 13, 9), 5, p)
    return p


def _dataset(root: Path, dataset_json: dict | None = None) -> tuple[Path, Path]:
    """``nnUNet_raw/Dataset501_UMDTest`` and an nnUNetv2_predict output folder."""
    ds, pred = root / "nnUNet_raw" / "Dataset501_UMDTest", root / "predictions"
    for sub in ("imagesTr", "labelsTr", "imagesTs", "labelsTs"):
        (ds / sub).mkdir(parents=True)
    pred.mkdir()
    (ds / "dataset.json").write_text(json.dumps(dataset_json or DATASET_JSON, indent=4))
    save_nifti(ds / "imagesTr" / "train_001_0000.nii.gz", np.zeros(SHAPE), dtype=np.int16)
    save_nifti(ds / "labelsTr" / "train_001.nii.gz", _truth(0))
    for i, case in enumerate(CASES):
        save_nifti(ds / "imagesTs" / f"{case}_0000.nii.gz", np.zeros(SHAPE), dtype=np.int16)
        save_nifti(ds / "labelsTs" / f"{case}.nii.gz", _truth(i))
        save_nifti(pred / f"{case}.nii.gz", _prediction(i))
    (pred / "dataset.json").write_text(json.dumps(dataset_json or DATASET_JSON))
    (pred / "plans.json").write_text(json.dumps({"dataset_name": "Dataset501_UMDTest"}))
    (pred / "predict_from_raw_data_args.json").write_text("{}")
    return ds, pred


def _run(gt: Path, pred: Path, out: Path, *extra: str) -> dict:
    argv = umd_argv(gt, pred, out, "--executor", "local", "--set", "bootstrap.n_resamples=50", *extra)
    assert main(argv) == 0
    return results_doc(out)


def _load(path: Path) -> np.ndarray:
    return np.asarray(nib.load(path).dataobj)


def _mask(seg: np.ndarray, label: int | tuple[int, ...]) -> np.ndarray:
    return np.isin(seg, label if isinstance(label, tuple) else (label,))


def _dice(t: np.ndarray, p: np.ndarray) -> float:
    s = t.sum() + p.sum()
    return math.nan if s == 0 else 2.0 * (t & p).sum() / s


def _same(a: float | None, b: float) -> bool:
    return (a is None or math.isnan(a)) if math.isnan(b) else a == pytest.approx(b, abs=1e-12)


def test_values_labels_and_formats(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    res = _run(ds, pred, tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "nnunet", "predictions": "nnunet"}
    # organs by key token of the label name ("Kidney Left" -> kidney_left); the region is kept as a list
    assert res["config"]["umd"]["labels"] == {"liver": 1, "kidney_left": 2, "heart": 3, "lung": [4, 5]}
    assert any("lung_left, lung_right, tumor" in w for w in res["warnings"]), res["warnings"]
    organs = {"liver": 1, "kidney_left": 2, "heart": 3, "lung": (4, 5)}
    for case in res["cases"]:
        t, p = _load(ds / "labelsTs" / f"{case['case_id']}.nii.gz"), _load(pred / f"{case['case_id']}.nii.gz")
        for organ, label in organs.items():
            assert _same(case["metrics"][organ]["dsc"], _dice(_mask(t, label), _mask(p, label))), (case, organ)
        # no manifest: each case its own subject, modality from channel_names
        assert case["subject_id"] == case["case_id"] and case["groups"]["modality"] == "ct"
    assert res["cases"][2]["metrics"]["heart"]["dsc"] is None  # absent from both: NaN, as nnU-Net
    assert res["cases"][0]["metrics"]["lung"]["dsc"] == 1.0  # the region is the union of its labels
    # an independent implementation of the region's Dice: MONAI on the binary mask
    t, p = _load(ds / "labelsTs" / "case_002.nii.gz"), _load(pred / "case_002.nii.gz")
    as_tensor = [torch.from_numpy(_mask(x, 1)[None, None].astype(np.float32)) for x in (p, t)]
    monai = float(DiceMetric(include_background=True, reduction="none")(*as_tensor)[0, 0])
    assert res["cases"][1]["metrics"]["liver"]["dsc"] == pytest.approx(monai)
    assert "umd/dsc/by_modality/ct" in res["aggregates"]


def _expected_case(t: np.ndarray, p: np.ndarray) -> dict:
    """nnU-Net's per-label record, computed here from the masks."""
    out = {}
    for label in TARGETS:
        rt, rp = _mask(t, label), _mask(p, label)
        tp, fp = int((rt & rp).sum()), int((~rt & rp).sum())
        fn, tn = int((rt & ~rp).sum()), int((~rt & ~rp).sum())
        union = tp + fp + fn
        out[str(label)] = {
            "Dice": math.nan if union == 0 else 2 * tp / (2 * tp + fp + fn),
            "IoU": math.nan if union == 0 else tp / union,
            "TP": tp,
            "FP": fp,
            "FN": fn,
            "TN": tn,
            "n_pred": tp + fp,
            "n_ref": tp + fn,
        }
    return out


def _nan_mean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def test_summary_json_is_nnunets(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    out = tmp_path / "out"
    _run(ds, pred, out, "--nnunet-summary")
    text = (out / "summary.json").read_text()
    summary = json.loads(text)
    assert text == json.dumps(summary, sort_keys=True, indent=4)  # nnU-Net's save_json: sorted, indent 4
    assert "NaN" in text and str(tmp_path) not in text  # NaN as Python's json writes it; no machine paths
    assert list(summary) == ["foreground_mean", "mean", "metric_per_case"]
    expected = [_expected_case(_load(ds / "labelsTs" / f"{c}.nii.gz"), _load(pred / f"{c}.nii.gz")) for c in CASES]
    per_case = summary["metric_per_case"]
    assert [c["reference_file"] for c in per_case] == [f"labelsTs/{c}.nii.gz" for c in CASES]
    assert [c["prediction_file"] for c in per_case] == [f"{c}.nii.gz" for c in CASES]
    assert set(per_case[0]["metrics"]) == {"1", "2", "3", "4", "5", "(4, 5)", "6"}
    assert list(per_case[0]["metrics"]["1"]) == ["Dice", "FN", "FP", "IoU", "TN", "TP", "n_pred", "n_ref"]
    for got, want in zip(per_case, expected, strict=True):
        for key, metrics in want.items():
            for m, v in metrics.items():
                assert _same(got["metrics"][key][m], v), (key, m)
                if m not in ("Dice", "IoU"):
                    assert isinstance(got["metrics"][key][m], int)
    assert math.isnan(per_case[2]["metrics"]["3"]["Dice"]) and per_case[1]["metrics"]["3"]["Dice"] == 0.0
    for key in want:
        for m in want[key]:
            assert _same(summary["mean"][key][m], _nan_mean([float(e[key][m]) for e in expected])), (key, m)
    # the tumour is absent everywhere: its mean Dice is NaN, and so is the foreground mean (a plain mean)
    assert math.isnan(summary["mean"]["6"]["Dice"]) and math.isnan(summary["foreground_mean"]["Dice"])
    tp = np.mean([summary["mean"][str(k)]["TP"] for k in TARGETS])
    assert summary["foreground_mean"]["TP"] == pytest.approx(tp)


def test_labels_folder_given_directly_and_no_summary_by_default(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    whole = _run(ds, pred, tmp_path / "a")
    direct = _run(ds / "labelsTs", pred, tmp_path / "b", "--nnunet-summary")
    assert not (tmp_path / "a" / "summary.json").exists()
    assert direct["aggregates"]["umd/dsc"] == whole["aggregates"]["umd/dsc"]
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["metric_per_case"][0]["reference_file"] == "case_001.nii.gz"


def test_manifest_gives_subjects_and_modalities_for_the_gap(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    rows = [("case_001", "s1", "ct"), ("case_002", "s1", "pet"), ("case_003", "s2", "ct")]
    write_manifest(ds / "manifest.csv", [{"case_id": c, "subject_id": s, "modality": m} for c, s, m in rows])
    res = _run(ds, pred, tmp_path / "out")
    dsc = {c["case_id"]: c["metrics"]["liver"]["dsc"] for c in res["cases"]}
    agg = res["aggregates"]
    assert agg["umd/dsc_gap/ct_vs_pet/by_organ/liver"]["value"] == pytest.approx(dsc["case_001"] - dsc["case_002"])
    assert agg["umd/dsc_gap/ct_vs_pet"]["n"] == 1


def test_unknown_modality_is_a_warning_and_no_gap(tmp_path: Path):
    ds, pred = _dataset(tmp_path, {**DATASET_JSON, "channel_names": {"0": "CT", "1": "PET"}})
    res = _run(ds, pred, tmp_path / "out")
    assert any(w.startswith("modality unknown") for w in res["warnings"]), res["warnings"]
    assert {c["groups"]["modality"] for c in res["cases"]} == {"unknown"}
    assert not [k for k in res["aggregates"] if "by_modality" in k or "dsc_gap" in k]


def test_generic_layout_records_its_format_and_can_write_a_summary(umd_dataset, tmp_path: Path):
    gt, pred = umd_dataset()
    res = _run(gt, pred, tmp_path / "out", "--nnunet-summary")
    assert res["config"]["format"] == {"ground_truth": "generic", "predictions": "generic"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary["mean"]) == {str(i) for i in range(1, 14)}  # umd.labels' ids, sorted as nnU-Net does
    t, p = _load(gt / "s1_ct.nii.gz"), _load(pred / "s1_ct.nii.gz")
    first = summary["metric_per_case"][0]
    assert first["prediction_file"] == "s1_ct.nii.gz"
    assert first["metrics"]["1"]["Dice"] == pytest.approx(_dice(t == 1, p == 1))


def _fails(gt: Path, pred: Path, tmp_path: Path, capsys, *extra: str) -> str:
    rc = main(umd_argv(gt, pred, tmp_path / "out", "--executor", "local", *extra))
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("trackeval: error:")]
    assert rc == 2 and len(lines) == 1, err
    return lines[0]


def test_format_forcing_and_detection_error(umd_dataset, tmp_path: Path, capsys):
    ds, pred = _dataset(tmp_path)
    line = _fails(ds, pred, tmp_path, capsys, "--format", "generic")
    assert "manifest.csv" in line
    line = _fails(ds, pred, tmp_path, capsys, "--format", "yolo")
    assert "unknown format 'yolo'" in line and "['nnunet', 'generic']" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _fails(empty, pred, tmp_path, capsys)
    assert "looks like none of the layouts tried: nnunet (" in line and "; generic (" in line
    assert f"file={empty}" in line and "field=format" in line
    gt, generic_pred = umd_dataset()
    line = _fails(gt, generic_pred, tmp_path, capsys, "--format", "nnunet")
    assert "not an nnU-Net dataset" in line


@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"file_ending": ".png"}, ("file_ending '.png'", "field=file_ending")),
        ({"labels": {"background": 0, "liver": 1, "ignore": 5}}, ("ignore label 5", "field=labels.ignore")),
        ({"labels": {"liver": 1}}, ('"background": 0', "field=labels")),
        ({"labels": {"background": 0, "tumor": 1}}, ("no label names a UMD organ", "set umd.labels")),
        ({"labels": {"background": 0, "liver": "1"}}, ("label 'liver'", "field=labels.liver")),
    ],
)
def test_bad_dataset_json_is_one_line(tmp_path: Path, capsys, change: dict, needles: tuple[str, ...]):
    ds, pred = _dataset(tmp_path, {**DATASET_JSON, **change})
    line = _fails(ds, pred, tmp_path, capsys)
    assert "dataset.json" in line
    for needle in needles:
        assert needle in line, line


def test_config_labels_replace_the_name_matching(tmp_path: Path):
    ds, pred = _dataset(tmp_path)
    res = _run(ds, pred, tmp_path / "out", "--set", "umd.labels={liver: 1, lung: [4, 5, 6]}")
    assert res["config"]["umd"]["labels"] == {"liver": 1, "lung": [4, 5, 6]}
    t, p = _load(ds / "labelsTs" / "case_001.nii.gz"), _load(pred / "case_001.nii.gz")
    want = _dice(_mask(t, (4, 5, 6)), _mask(p, (4, 5, 6)))
    assert res["cases"][0]["metrics"]["lung"]["dsc"] == pytest.approx(want)


def test_manifest_must_cover_the_label_maps(tmp_path: Path, capsys):
    ds, pred = _dataset(tmp_path)
    rows = [{"case_id": c, "subject_id": "s1", "modality": "ct"} for c in ("case_001", "case_002", "case_009")]
    write_manifest(ds / "manifest.csv", rows)
    line = _fails(ds, pred, tmp_path, capsys)
    assert "no manifest.csv row for this label map" in line and "case=case_003" in line
    write_manifest(ds / "manifest.csv", [*rows, {"case_id": "case_003", "subject_id": "s2", "modality": "ct"}])
    line = _fails(ds, pred, tmp_path, capsys)
    assert "ground-truth label map not found" in line and "case=case_009" in line
