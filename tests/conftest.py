"""Shared fixtures: small UMD-layout datasets written as real NIfTI files with nibabel."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

SPACING = (1.5, 1.0, 2.0)


def save_nifti(path: Path, array: np.ndarray, spacing=SPACING, dtype=np.uint8) -> Path:
    img = nib.Nifti1Image(np.asarray(array).astype(dtype), np.diag([*spacing, 1.0]))
    img.header.set_data_dtype(dtype)
    nib.save(img, path)
    return path


def write_manifest(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def evaluate_argv(benchmark: str, gt: Path, pred: Path, out: Path, *extra: str) -> list[str]:
    """``trackeval evaluate <benchmark>`` arguments for the CLI entry point."""
    return ["evaluate", benchmark, "--ground-truth", str(gt), "--predictions", str(pred), "--out", str(out), *extra]


def umd_argv(gt: Path, pred: Path, out: Path, *extra: str) -> list[str]:
    """``trackeval evaluate umd`` arguments for the CLI entry point."""
    return evaluate_argv("umd", gt, pred, out, *extra)


def cube(shape, lo, hi, label: int, out: np.ndarray | None = None) -> np.ndarray:
    out = np.zeros(shape, np.uint8) if out is None else out
    out[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = label
    return out


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test in its own folder, so the default case cache (``.trackeval-cache``) is per test."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def umd_dataset(tmp_path: Path) -> Callable[..., tuple[Path, Path]]:
    """Factory: two subjects x (ct, pet), organs 1 (liver) and 5 (heart) as boxes; returns (gt, pred) dirs.

    CT predictions shift the liver box by one voxel; PET predictions shrink it; heart is perfect on CT and
    missed on PET for subject s2.
    """

    def make(shape=(20, 18, 12), n_subjects: int = 2) -> tuple[Path, Path]:
        gt, pred = tmp_path / "gt", tmp_path / "pred"
        gt.mkdir()
        pred.mkdir()
        rows = []
        for i in range(n_subjects):
            s, subject = i % 2, f"s{i + 1}"
            truth = cube(shape, (2 + s, 2, 2), (10 + s, 10, 8), 1)
            cube(shape, (12, 11, 3), (17, 16, 9), 5, truth)
            for modality in ("ct", "pet"):
                case = f"{subject}_{modality}"
                if modality == "ct":
                    p = cube(shape, (3 + s, 2, 2), (11 + s, 10, 8), 1)
                    cube(shape, (12, 11, 3), (17, 16, 9), 5, p)
                else:
                    p = cube(shape, (3 + s, 3, 3), (9 + s, 9, 7), 1)
                    if subject == "s1":
                        cube(shape, (12, 11, 3), (16, 16, 9), 5, p)
                save_nifti(gt / f"{case}.nii.gz", truth)
                save_nifti(pred / f"{case}.nii.gz", p)
                rows.append({"case_id": case, "subject_id": subject, "modality": modality, "site": "a"})
        write_manifest(gt / "manifest.csv", rows)
        return gt, pred

    return make
