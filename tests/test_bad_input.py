"""Bad UMD input: each gets a clear one-line error naming file, case and field; nothing is written."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import save_nifti, umd_argv, write_manifest
from trackeval.cli import main


def _evaluate(gt: Path, pred: Path, out: Path, capsys) -> tuple[int, str]:
    rc = main(umd_argv(gt, pred, out, "--executor", "local", "--set", "bootstrap.n_resamples=50"))
    err = capsys.readouterr().err
    return rc, err


def _assert_fails(gt, pred, tmp_path, capsys, *needles: str) -> str:
    out = tmp_path / "out"
    rc, err = _evaluate(gt, pred, out, capsys)
    assert rc == 2, err
    line = [x for x in err.splitlines() if x.startswith("trackeval: error:")]
    assert len(line) == 1, err
    for needle in needles:
        assert needle in line[0], line[0]
    assert not out.exists() or not any(out.iterdir()), "partial output left behind"
    return line[0]


def test_shape_mismatch(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    save_nifti(pred / "s1_ct.nii.gz", np.zeros((20, 18, 11)))
    _assert_fails(gt, pred, tmp_path, capsys, "shape mismatch", "s1_ct.nii.gz", "case=s1_ct", "field=dim")


def test_affine_mismatch(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    save_nifti(pred / "s1_pet.nii.gz", np.zeros((20, 18, 12)), spacing=(1.5, 1.0, 2.5))
    _assert_fails(gt, pred, tmp_path, capsys, "affine/spacing mismatch", "case=s1_pet", "field=affine")


def test_unknown_label_in_prediction_and_truth(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    p = np.zeros((20, 18, 12))
    p[0, 0, 0] = 42
    save_nifti(pred / "s2_ct.nii.gz", p)
    _assert_fails(gt, pred, tmp_path, capsys, "label id(s) [42]", "prediction", "case=s2_ct", "field=voxel values")
    gt2, pred2 = gt, pred
    save_nifti(pred2 / "s2_ct.nii.gz", np.zeros((20, 18, 12)))
    t = np.zeros((20, 18, 12))
    t[1, 1, 1] = 14
    save_nifti(gt2 / "s1_ct.nii.gz", t)
    _assert_fails(gt2, pred2, tmp_path, capsys, "ground truth holds label id(s) [14]", "case=s1_ct")


@pytest.mark.parametrize(("value", "needle"), [(0.5, "non-integer"), (np.nan, "NaN or inf")])
def test_float_label_maps(umd_dataset, tmp_path, capsys, value, needle):
    gt, pred = umd_dataset()
    p = np.zeros((20, 18, 12), np.float32)
    p[3, 3, 3] = value
    save_nifti(pred / "s1_ct.nii.gz", p, dtype=np.float32)
    _assert_fails(gt, pred, tmp_path, capsys, needle, "case=s1_ct", "field=voxel values")


def test_float_label_map_with_integer_values_is_accepted(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    import nibabel as nib

    p = np.asarray(nib.load(pred / "s1_ct.nii.gz").dataobj).astype(np.float32)
    save_nifti(pred / "s1_ct.nii.gz", p, dtype=np.float32)
    rc, err = _evaluate(gt, pred, tmp_path / "out", capsys)
    assert rc == 0, err


@pytest.mark.parametrize(
    ("bad_id", "needle"),
    [("../escape", "unsafe"), ("a/b", "unsafe"), ("", "unsafe"), ("s1_ct", "duplicate case id")],
)
def test_bad_case_ids(umd_dataset, tmp_path, capsys, bad_id, needle):
    gt, pred = umd_dataset()
    rows = [
        {"case_id": "s1_ct", "subject_id": "s1", "modality": "ct"},
        {"case_id": bad_id, "subject_id": "s1", "modality": "pet"},
    ]
    write_manifest(gt / "manifest.csv", rows)
    _assert_fails(gt, pred, tmp_path, capsys, needle, "manifest.csv", "field=case_id")


def test_unknown_modality(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    write_manifest(gt / "manifest.csv", [{"case_id": "s1_ct", "subject_id": "s1", "modality": "xray"}])
    _assert_fails(gt, pred, tmp_path, capsys, "unknown modality 'xray'", "case=s1_ct", "field=modality")


@pytest.mark.parametrize("content", ["", "case_id,subject_id,modality\n"])
def test_empty_manifest(umd_dataset, tmp_path, capsys, content):
    gt, pred = umd_dataset()
    (gt / "manifest.csv").write_text(content)
    _assert_fails(gt, pred, tmp_path, capsys, "empty", "manifest.csv")


def test_missing_manifest_column(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    (gt / "manifest.csv").write_text("case_id,subject\ns1_ct,s1\n")
    _assert_fails(gt, pred, tmp_path, capsys, "missing required column", "field=subject_id")


def test_truncated_gzip(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    data = (pred / "s2_pet.nii.gz").read_bytes()
    (pred / "s2_pet.nii.gz").write_bytes(data[: len(data) // 2])
    _assert_fails(gt, pred, tmp_path, capsys, "truncated or corrupt", "s2_pet.nii.gz", "case=s2_pet")


def test_garbage_and_truncated_uncompressed_file(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    (pred / "s2_pet.nii.gz").write_bytes(gzip.compress(b"not a nifti header at all" * 3))
    _assert_fails(gt, pred, tmp_path, capsys, "not a readable NIfTI", "case=s2_pet", "field=header")
    raw = gzip.decompress((gt / "s1_ct.nii.gz").read_bytes())
    (gt / "s1_ct.nii.gz").write_bytes(gzip.compress(raw[: 352 + 100]))
    _assert_fails(gt, pred, tmp_path, capsys, "not a readable NIfTI", "case=s1_ct")


def test_empty_file(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    (gt / "s1_pet.nii.gz").write_bytes(b"")
    _assert_fails(gt, pred, tmp_path, capsys, "file is empty", "case=s1_pet")


def test_missing_truth_file(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    (gt / "s1_pet.nii.gz").unlink()
    _assert_fails(gt, pred, tmp_path, capsys, "ground-truth label map not found", "case=s1_pet")


def test_symlink_outside_root(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    outside = tmp_path / "elsewhere.nii.gz"
    os.replace(pred / "s1_ct.nii.gz", outside)
    (pred / "s1_ct.nii.gz").symlink_to(outside)
    _assert_fails(gt, pred, tmp_path, capsys, "resolves outside the data root", "case=s1_ct")


def test_bad_config_override(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    rc = main(umd_argv(gt, pred, tmp_path / "o", "--set", "umd.nsd_tolerance_mm=abc"))
    assert rc == 2 and "umd.nsd_tolerance_mm" in capsys.readouterr().err


def test_output_path_is_a_file(umd_dataset, tmp_path, capsys):
    gt, pred = umd_dataset()
    (tmp_path / "out").write_text("I am a file")
    rc, err = _evaluate(gt, pred, tmp_path / "out", capsys)
    assert rc == 2 and "cannot write the outputs" in err
    assert (tmp_path / "out").read_text() == "I am a file"


def test_read_only_output_leaves_nothing(umd_dataset, tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    gt, pred = umd_dataset()
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        rc, err = _evaluate(gt, pred, out, capsys)
        assert rc == 2 and "cannot write the outputs" in err
        assert list(out.iterdir()) == []
    finally:
        out.chmod(0o700)
