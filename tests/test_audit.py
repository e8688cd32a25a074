"""Leakage audits: subject overlap and voxel-identical duplicates across splits, in evaluate and `audit`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.conftest import save_nifti, umd_argv, write_manifest
from trackeval.audit.leakage import duplicate_images, voxel_digest
from trackeval.cli import main


def test_voxel_digest_ignores_file_encoding(tmp_path: Path):
    a = np.random.default_rng(0).integers(0, 5, (8, 9, 7))
    save_nifti(tmp_path / "a.nii.gz", a)
    save_nifti(tmp_path / "b.nii", a, dtype=np.float32)  # other file format and dtype, same voxels
    save_nifti(tmp_path / "c.nii.gz", a + (a == 0))
    assert voxel_digest(tmp_path / "a.nii.gz") == voxel_digest(tmp_path / "b.nii")
    assert voxel_digest(tmp_path / "a.nii.gz") != voxel_digest(tmp_path / "c.nii.gz")
    found = duplicate_images({"t1": tmp_path / "a.nii.gz"}, {"x": tmp_path / "b.nii", "y": tmp_path / "c.nii.gz"})
    assert found.count == 1 and "x=t1" in found.note


def _with_images(gt: Path, tmp_path: Path, leak: bool) -> Path:
    rows = []
    for i, case in enumerate(("s1_ct", "s1_pet", "s2_ct", "s2_pet")):
        save_nifti(gt / f"img_{case}.nii.gz", np.full((20, 18, 12), i, np.int16), dtype=np.int16)
        rows.append({"case_id": case, "subject_id": case[:2], "modality": case[3:], "image": f"img_{case}.nii.gz"})
    write_manifest(gt / "manifest.csv", rows)
    train = tmp_path / "train"
    train.mkdir()
    save_nifti(train / "t.nii.gz", np.full((20, 18, 12), 2 if leak else 9, np.int16), dtype=np.int16)
    write_manifest(
        train / "manifest.csv", [{"subject_id": "s2" if leak else "s9", "case_id": "t", "image": "t.nii.gz"}]
    )
    return train / "manifest.csv"


def test_evaluate_records_audit_failures(umd_dataset, tmp_path: Path, capsys):
    gt, pred = umd_dataset()
    train = _with_images(gt, tmp_path, leak=True)
    extra = ("--executor", "local", "--set", "bootstrap.n_resamples=50", "--set", f"umd.train_manifest={train}")
    assert main(umd_argv(gt, pred, tmp_path / "out", *extra)) == 0
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["summary"]["audit/n_subject_overlap"] == 1
    assert res["summary"]["audit/n_duplicate_images"] == 1  # s2_ct's image equals the training image
    assert any("s2_ct=t" in w for w in res["warnings"])
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["umd/audit/n_subject_overlap"] == 1.0
    capsys.readouterr()
    assert (
        main(["audit", "umd", "--ground-truth", str(gt), "--predictions", str(pred), "--train-manifest", str(train)])
        == 1
    )
    assert "n_subject_overlap: 1" in capsys.readouterr().out


def test_clean_split_passes(umd_dataset, tmp_path: Path, capsys):
    gt, pred = umd_dataset()
    train = _with_images(gt, tmp_path, leak=False)
    assert (
        main(["audit", "umd", "--ground-truth", str(gt), "--predictions", str(pred), "--train-manifest", str(train)])
        == 0
    )
    out = capsys.readouterr().out
    assert "n_subject_overlap: 0" in out and "n_duplicate_images: 0" in out
