"""UMD datasets for the gate and tracking tests: real NIfTI files, one ground truth, several model versions.

Twelve cases (6 subjects x ct, pet) on a 16 x 16 x 10 grid with three organs (liver, kidney_left, heart) as
boxes. A model version is a set of per-organ shifts of the truth boxes (voxels along x), optionally with
one-voxel noise; evaluations are real ``trackeval.benchmarks.umd.evaluate`` runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.conftest import cube, save_nifti, write_manifest
from trackeval.api import load_config
from trackeval.benchmarks import umd
from trackeval.config import EvalConfig
from trackeval.io.results_folder import write_outputs
from trackeval.results import BenchmarkResult

SHAPE = (16, 16, 10)
SUBJECTS = [f"s{i}" for i in range(6)]
LABELS = {"liver": 1, "kidney_left": 2, "heart": 5}
OVERRIDES = [
    "engine.executor=local",
    "bootstrap.n_resamples=200",
    "umd.labels={liver: 1, kidney_left: 2, heart: 5}",
    "gate.n_resamples=1000",
]

#: per-organ x-shift (voxels) of each model version's predictions
VERSIONS: dict[str, dict[int, int]] = {
    "champion": {1: 2, 2: 2, 5: 0},  # liver and kidney off by two voxels, heart right
    "improved": {1: 0, 2: 0, 5: 0},  # everything right
    "noise": {1: 2, 2: 2, 5: 0},  # the champion plus one-voxel noise (see _noise)
    "organ_regress": {1: 0, 2: 0, 5: 1},  # liver and kidney fixed (mean up), heart off by one voxel
}


def config(*extra: str) -> EvalConfig:
    return load_config(None, [*OVERRIDES, *extra])


def _boxes(subject: int) -> dict[int, tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """Organ boxes whose x-extent varies by subject (liver 6-8, kidney 4-5 voxels), so Dice varies too."""
    d, e = subject % 3, subject % 2
    return {1: ((2, 2, 2), (8 + d, 9, 7)), 2: ((2, 11, 2), (6 + e, 15, 6)), 5: ((10, 9, 4), (15, 15, 9))}


def _label_map(subject: int, shifts: dict[int, int]) -> np.ndarray:
    out = np.zeros(SHAPE, np.uint8)
    for label, (lo, hi) in _boxes(subject).items():
        s = shifts.get(label, 0)
        cube(SHAPE, (lo[0] + s, lo[1], lo[2]), (hi[0] + s, hi[1], hi[2]), label, out)
    return out


def _noise(array: np.ndarray, case_index: int) -> np.ndarray:
    """Add or remove one liver voxel (alternating by case): a Dice change of about +-0.003."""
    out = array.copy()
    liver = np.argwhere(out == 1)
    if case_index % 2:
        out[tuple(liver[case_index % len(liver)])] = 0
    else:
        x, y, z = liver.max(axis=0)
        out[min(x + 1, SHAPE[0] - 1), y, z] = 1
    return out


def make_ground_truth(root: Path, *, altered: bool = False) -> Path:
    """Write ``root/gt`` (manifest + truths); ``altered`` changes one voxel of one case (a new data digest)."""
    gt = root / "gt"
    gt.mkdir(parents=True)
    rows = []
    for i, subject in enumerate(SUBJECTS):
        truth = _label_map(i, {})
        for modality in ("ct", "pet"):
            case = f"{subject}_{modality}"
            t = truth.copy()
            if altered and case == "s0_ct":
                t[0, 0, 0] = 1
            save_nifti(gt / f"{case}.nii.gz", t)
            rows.append({"case_id": case, "subject_id": subject, "modality": modality})
    write_manifest(gt / "manifest.csv", rows)
    return gt


def make_predictions(root: Path, version: str) -> Path:
    pred = root / f"pred_{version}"
    pred.mkdir(parents=True)
    k = 0
    for i, subject in enumerate(SUBJECTS):
        for modality in ("ct", "pet"):
            p = _label_map(i, VERSIONS[version])
            if version == "noise":
                p = _noise(p, k)
            save_nifti(pred / f"{subject}_{modality}.nii.gz", p)
            k += 1
    return pred


def evaluate_version(
    root: Path, gt: Path, version: str, cfg: EvalConfig, model: str = "seg", model_version: str | None = None
) -> tuple[BenchmarkResult, Path]:
    """Evaluate one version and write its results folder ``root/out_<model_version>``."""
    model_version = model_version or version
    result = umd.evaluate(
        gt, make_predictions(root / model_version, version), cfg, {"name": model, "version": model_version}
    )
    out = root / f"out_{model_version}"
    write_outputs(result, out)
    return result, out
