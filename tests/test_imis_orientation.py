"""``imis.volumes.orientation``: which image side a lateralised structure lands on, from real NIfTI files.

Each fixture is a TotalSegmentator MRI subject (``<subject>/mri.nii.gz``, ``segmentations/<structure>.nii.gz``,
``meta.csv``) whose structures are placed in world (RAS+ mm) coordinates through a non-RAS affine: kidney_left
left and posterior of the centre, liver right and anterior. ``ras``: rows run toward the patient's right and
columns toward anterior, so kidney_left is in the top rows and the left columns. ``imis_release`` (the released
IMIS-Bench PNGs, e.g. BTCV ``ABD_001_100``: spine at the top, left kidney on the image's right): rows toward
anterior, columns toward the patient's left, so kidney_left is in the top rows and the right columns.
"""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from trackeval.api import config_model
from trackeval.benchmarks.imis.adapter import evaluate
from trackeval.benchmarks.imis.cases import load_cases, load_dataset, read_case
from trackeval.benchmarks.imis.config import IMISConfig

GROWER = "trackeval.interactive.baselines:region_grower"
SHAPE = (34, 30, 7)
#: voxel -> world (RAS+ mm) affines, none of them RAS: LPS (DICOM), a permuted one (i -> P, j -> L), LIA-like
AFFINES = {
    "lps": np.array([[-2.0, 0, 0, 30], [0, -2.0, 0, 25], [0, 0, 3.0, -9], [0, 0, 0, 1]]),
    "pls": np.array([[0, -2.0, 0, 30], [-2.0, 0, 0, 34], [0, 0, 3.0, -9], [0, 0, 0, 1]]),
    "lia": np.array([[-2.0, 0, 0, 34], [0, 0, 3.0, -9], [0, -2.0, 0, 30], [0, 0, 0, 1]]),
}


def _subject(root: Path, sid: str, affine: np.ndarray, shape: tuple[int, int, int]) -> None:
    ijk = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing="ij"), axis=-1).astype(float)
    world = ijk @ affine[:3, :3].T + affine[:3, 3]
    centre = world.reshape(-1, 3).mean(axis=0)
    x, y, z = (world[..., a] - centre[a] for a in range(3))
    kidney_left = (x + 14) ** 2 + (y + 9) ** 2 < 36  # left (-x) and posterior (-y), a column across every z
    liver = (x - 12) ** 2 + (y - 8) ** 2 < 64  # right (+x) and anterior (+y)
    seg = root / sid / "segmentations"
    seg.mkdir(parents=True)
    image = 100.0 + 300.0 * kidney_left + 200.0 * liver + z
    nib.save(nib.Nifti1Image(image.astype(np.float32), affine), root / sid / "mri.nii.gz")
    nib.save(nib.Nifti1Image(kidney_left.astype(np.uint8), affine), seg / "kidney_left.nii.gz")
    nib.save(nib.Nifti1Image(liver.astype(np.uint8), affine), seg / "liver.nii.gz")


@pytest.fixture(scope="module")
def subjects(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("orient") / "TotalsegmentatorMRI_dataset_v100"
    for name, affine in AFFINES.items():
        shape = tuple(SHAPE[int(np.argmax(np.abs(affine[:3, a])))] for a in range(3))  # the same extent in mm
        _subject(root, f"s_{name}", affine, shape)
    (root / "meta.csv").write_text("image_id;split\n" + "".join(f"s_{n};test\n" for n in AFFINES))
    return root


def _sides(mask: np.ndarray) -> tuple[str, str]:
    """(``top``/``bottom``, ``left``/``right``): the image half the mask's centroid lies in."""
    rows, cols = np.nonzero(mask)
    h, w = mask.shape
    return ("top" if rows.mean() < (h - 1) / 2 else "bottom"), ("left" if cols.mean() < (w - 1) / 2 else "right")


@pytest.mark.parametrize(
    ("orientation", "kidney", "liver"),
    [("ras", ("top", "left"), ("bottom", "right")), ("imis_release", ("top", "right"), ("bottom", "left"))],
)
def test_kidney_left_lands_on_the_documented_side(subjects, orientation, kidney, liver):
    cfg = IMISConfig(volumes={"orientation": orientation, "slices": "every"})
    cases, _ = load_cases(subjects, cfg)
    seen = set()
    for case in cases:
        loaded = read_case(case, cfg)
        assert _sides(loaded.masks["kidney_left"]) == kidney, case.case_id
        assert _sides(loaded.masks["liver"]) == liver, case.case_id
        seen.add(case.subject_id)
    assert seen == {f"s_{n}" for n in AFFINES}  # every affine, every slice


def test_imis_release_is_the_ras_slice_rotated(subjects):
    ras, rel = IMISConfig(), IMISConfig(volumes={"orientation": "imis_release"})
    ras_cases, rel_cases = load_cases(subjects, ras)[0], load_cases(subjects, rel)[0]
    assert [c.case_id for c in ras_cases] == [c.case_id for c in rel_cases]  # slice indices do not change
    for a, b in zip(ras_cases, rel_cases, strict=True):
        x, y = read_case(a, ras), read_case(b, rel)
        np.testing.assert_array_equal(y.image, np.rot90(x.image, k=-1, axes=(0, 1)))  # a quarter turn clockwise
        np.testing.assert_array_equal(y.image, x.image.transpose(1, 0, 2)[:, ::-1])
        for t in x.masks:
            np.testing.assert_array_equal(y.masks[t], x.masks[t].T[:, ::-1])
        assert x.digest != y.digest


def test_orientation_is_recorded_only_when_not_ras(subjects):
    def run(**volumes):
        cfg = config_model().model_validate(
            {
                "imis": {"max_clicks": 2, "prompt_types": ["box"], "volumes": volumes},
                "engine": {"executor": "local"},
                "bootstrap": {"n_resamples": 20},
            }
        )
        return evaluate(subjects, cfg, model=GROWER)

    default, explicit, release = run(), run(orientation="ras"), run(orientation="imis_release")
    assert "orientation" not in default.config["imis"]["volumes"]  # results made before the switch: unchanged
    assert default.config == explicit.config and default.data == explicit.data
    assert release.config["imis"]["volumes"]["orientation"] == "imis_release"
    assert release.data.ground_truth_digest != default.data.ground_truth_digest
    cfg = IMISConfig()
    assert (
        load_dataset(subjects, cfg).digest
        != load_dataset(subjects, IMISConfig(volumes={"orientation": "imis_release"})).digest
    )


def test_imis_release_is_axial_only():
    with pytest.raises(ValueError, match="axial"):
        IMISConfig(volumes={"orientation": "imis_release", "axis": "coronal"})
    with pytest.raises(ValueError):
        IMISConfig(volumes={"orientation": "lps"})
