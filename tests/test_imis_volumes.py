"""IMIS on the 3D releases: TotalSegmentator MRI and ISLES'22 as distributed, sliced into 2D targets.

The fixtures reproduce the published folder structures and file names (TotalSegmentator MRI: Zenodo 11367005,
``<subject>/mri.nii.gz``, ``<subject>/segmentations/<structure>.nii.gz``, a ``;``-separated meta.csv with
``image_id`` and ``split``, as nnU-Net's Dataset227 conversion and TotalSegmentator's own
``convert_dataset_to_nnunet.py`` read them; ISLES'22: Zenodo 7960856 BIDS, ``sub-strokecaseNNNN/ses-0001/dwi/``,
``anat/..._FLAIR.nii.gz``, ``derivatives/sub-strokecaseNNNN/ses-0001/..._msk.nii.gz``), on non-identity affines
so that the reorientation is exercised. Expected slices, masks and windows are computed directly with nibabel's
``as_closest_canonical`` and numpy.
"""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from trackeval.api import config_model
from trackeval.benchmarks.imis.adapter import evaluate
from trackeval.benchmarks.imis.cases import load_cases, load_dataset, read_case
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.runner import write_log
from trackeval.errors import InputError

GROWER = "trackeval.interactive.baselines:region_grower"
#: a permuted, flipped affine (voxel axes: j -> L, i -> P, k -> S), 1.5 mm in-plane, 3 mm slices
AFFINE = np.array([[0, -1.5, 0, 40.0], [-1.5, 0, 0, 30.0], [0, 0, 3.0, -20.0], [0, 0, 0, 1]])
SHAPE = (20, 18, 9)


def _cfg(**imis) -> IMISConfig:
    return IMISConfig(**imis)


def _eval_cfg(**imis):
    return config_model().model_validate(
        {"imis": {"max_clicks": 3, **imis}, "engine": {"executor": "local"}, "bootstrap": {"n_resamples": 50}}
    )


def _save(path: Path, data: np.ndarray, affine: np.ndarray = AFFINE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(data, affine), path)


def _blob(lo: tuple[int, int, int], hi: tuple[int, int, int], grow_k: bool = True) -> np.ndarray:
    """A box whose cross-section grows with k (so one axial slice is the largest)."""
    m = np.zeros(SHAPE, np.uint8)
    for k in range(lo[2], hi[2]):
        extra = (k - lo[2]) if grow_k else 0
        m[lo[0] : min(hi[0] + extra, SHAPE[0]), lo[1] : hi[1], k] = 1
    return m


@pytest.fixture()
def totalseg(tmp_path) -> Path:
    root = tmp_path / "TotalsegmentatorMRI_dataset_v100"
    rng = np.random.default_rng(0)
    subjects = {"s0001": "test", "s0002": "train", "s0003": "test"}
    for n, sid in enumerate(subjects):
        _save(root / sid / "mri.nii.gz", rng.gamma(2.0, 100.0, SHAPE).astype(np.float32))
        seg = root / sid / "segmentations"
        _save(seg / "liver.nii.gz", _blob((2, 2, 1 + n), (8, 9, 6 + n)))
        _save(seg / "kidney_left.nii.gz", _blob((10, 10, 2), (14, 15, 5), grow_k=False))  # equal areas: tie
        _save(seg / "spleen.nii.gz", np.zeros(SHAPE, np.uint8))  # empty in this subject: no target
    lines = ["image_id;age;gender;institute;study_type;split"]
    lines += [f"{sid};{50 + i};f;A;MR abdomen;{split}" for i, (sid, split) in enumerate(subjects.items())]
    (root / "meta.csv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture()
def isles(tmp_path) -> Path:
    root = tmp_path / "ISLES-2022"
    rng = np.random.default_rng(1)
    (root / "derivatives").mkdir(parents=True)
    (root / "dataset_description.json").write_text(json.dumps({"Name": "ISLES 2022", "BIDSVersion": "1.7.0"}))
    for n in (1, 2):
        sub, ses = f"sub-strokecase{n:04d}", "ses-0001"
        stem = f"{sub}_{ses}"
        dwi = rng.normal(100.0, 20.0, SHAPE).astype(np.float32)
        _save(root / sub / ses / "dwi" / f"{stem}_dwi.nii.gz", dwi)
        _save(root / sub / ses / "dwi" / f"{stem}_adc.nii.gz", (2000 - dwi).astype(np.float32))
        _save(root / sub / ses / "anat" / f"{stem}_FLAIR.nii.gz", np.ones((30, 30, 12), np.float32), np.eye(4))
        _save(root / "derivatives" / sub / ses / f"{stem}_msk.nii.gz", _blob((4, 4, 2 + n), (9, 10, 7)))
    return root


def _canonical(path: Path) -> np.ndarray:
    return np.asanyarray(nib.as_closest_canonical(nib.load(path)).dataobj)


def _expected_largest(mask: np.ndarray, axis: int) -> int | None:
    areas = (mask > 0).sum(axis=tuple(a for a in range(3) if a != axis))
    return int(np.argmax(areas)) if areas.max() > 0 else None


def _window(volume: np.ndarray, lo_p: float, hi_p: float) -> np.ndarray:
    lo, hi = np.percentile(volume, [lo_p, hi_p])
    return np.rint((np.clip(volume, lo, hi) - lo) / (hi - lo) * 255).astype(np.uint8)


@pytest.mark.parametrize(("axis", "ras"), [("axial", 2), ("coronal", 1), ("sagittal", 0)])
def test_totalseg_largest_slices_match_a_direct_computation(totalseg, axis, ras):
    cfg = _cfg(volumes={"axis": axis})
    data = load_dataset(totalseg, cfg)
    assert data.layout.name == "totalseg-mri"
    expected: dict[str, set[str]] = {}
    for sid in ("s0001", "s0003"):  # the test split of meta.csv only
        for name in ("liver", "kidney_left", "spleen"):
            idx = _expected_largest(_canonical(totalseg / sid / "segmentations" / f"{name}.nii.gz"), ras)
            if idx is not None:
                expected.setdefault(f"{sid}_{axis}_{idx:04d}", set()).add(name)
    assert {c.case_id: set(c.targets) for c in data.cases} == expected
    assert all(c.subject_id == c.case_id.split("_")[0] for c in data.cases)
    for case in data.cases:
        loaded = read_case(case, cfg)
        index = int(case.case_id.rsplit("_", 1)[1])
        sid = case.subject_id
        grey = np.take(_window(_canonical(totalseg / sid / "mri.nii.gz").astype(np.float64), 0.5, 99.5), index, ras)
        assert loaded.image.dtype == np.uint8 and loaded.image.shape == (*grey.shape, 3)
        assert np.array_equal(loaded.image[..., 0], grey) and np.array_equal(loaded.image[..., 2], grey)
        for name, mask in loaded.masks.items():
            truth = np.take(_canonical(totalseg / sid / "segmentations" / f"{name}.nii.gz"), index, ras) > 0
            assert np.array_equal(mask, truth)


def test_every_slice_mode_stride_and_min_pixels(totalseg):
    cfg = _cfg(volumes={"slices": "every", "stride": 2, "min_pixels": 40, "structures": ["liver"]})
    cases, _ = load_cases(totalseg, cfg)
    liver = _canonical(totalseg / "s0001" / "segmentations" / "liver.nii.gz")
    areas = (liver > 0).sum(axis=(0, 1))
    want = [f"s0001_axial_{k:04d}" for k in range(0, len(areas), 2) if areas[k] >= 40]
    assert [c.case_id for c in cases if c.subject_id == "s0001"] == want and want
    assert all(set(c.targets) == {"liver"} for c in cases)


def test_window_percentiles_configurable(totalseg):
    cfg = _cfg(volumes={"window": [5.0, 95.0], "structures": ["liver"]})
    case = load_cases(totalseg, cfg)[0][0]
    index = int(case.case_id.rsplit("_", 1)[1])
    vol = _canonical(totalseg / "s0001" / "mri.nii.gz").astype(np.float64)
    assert np.array_equal(read_case(case, cfg).image[..., 1], np.take(_window(vol, 5.0, 95.0), index, 2))
    flat = totalseg / "s0001" / "mri.nii.gz"
    _save(flat, np.full(SHAPE, 7.0, np.float32))  # both percentiles equal: all 0
    assert not read_case(load_cases(totalseg, cfg)[0][0], cfg).image.any()


def test_meta_split_all_and_errors(totalseg):
    ids = {c.subject_id for c in load_cases(totalseg, _cfg(volumes={"meta_split": "all"}))[0]}
    assert ids == {"s0001", "s0002", "s0003"}
    with pytest.raises(InputError, match=r"structure\(s\) \['pancreas'\]") as err:
        load_cases(totalseg, _cfg(volumes={"structures": ["pancreas"]}))
    assert err.value.case_id == "s0001"
    (totalseg / "meta.csv").write_text("image_id;age;split\ns0009;3;test\n")
    with pytest.raises(InputError, match="no mri.nii.gz") as err:
        load_cases(totalseg, _cfg())
    assert err.value.case_id == "s0009"
    (totalseg / "meta.csv").write_text("image_id;age\ns0001;3\n")
    with pytest.raises(InputError, match="'split'") as err:
        load_cases(totalseg, _cfg())
    assert err.value.file == str(totalseg / "meta.csv")


def test_isles_dwi_default_adc_selectable_flair_off_grid(isles):
    cfg = _cfg()
    data = load_dataset(isles, cfg)
    assert data.layout.name == "isles22"
    want = {}
    for n in (1, 2):
        stem = f"sub-strokecase{n:04d}_ses-0001"
        idx = _expected_largest(
            _canonical(isles / "derivatives" / stem.split("_")[0] / "ses-0001" / f"{stem}_msk.nii.gz"), 2
        )
        want[f"{stem}_axial_{idx:04d}"] = {"lesion"}
    assert {c.case_id: set(c.targets) for c in data.cases} == want
    case = data.cases[0]
    index = int(case.case_id.rsplit("_", 1)[1])
    sub = isles / "sub-strokecase0001" / "ses-0001"
    for channel, file in (("dwi", "dwi/sub-strokecase0001_ses-0001_dwi.nii.gz"),
                          ("adc", "dwi/sub-strokecase0001_ses-0001_adc.nii.gz")):  # fmt: skip
        ccfg = _cfg(volumes={"channel": channel})
        got = read_case(load_cases(isles, ccfg)[0][0], ccfg).image[..., 0]
        assert np.array_equal(got, np.take(_window(_canonical(sub / file).astype(np.float64), 0.5, 99.5), index, 2))
    fcfg = _cfg(volumes={"channel": "flair"})
    with pytest.raises(InputError, match="affine|shape|grid"):
        read_case(load_cases(isles, fcfg)[0][0], fcfg)
    (isles / "derivatives" / "sub-strokecase0002" / "ses-0001" / "sub-strokecase0002_ses-0001_msk.nii.gz").unlink()
    with pytest.raises(InputError, match="lesion mask not found") as err:
        load_cases(isles, cfg)
    assert err.value.case_id == "sub-strokecase0002_ses-0001"


def test_detection_error_names_every_layout_and_format_forces(tmp_path, totalseg):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="looks like none of the layouts tried") as err:
        load_cases(tmp_path / "other", _cfg())
    for name in ("generic", "nifti-manifest", "totalseg-mri", "isles22"):
        assert name in str(err.value)
    assert err.value.file == str(tmp_path / "other")
    with pytest.raises(InputError, match="unknown format 'nnunet'"):
        load_dataset(totalseg, _cfg(), "nnunet")
    with pytest.raises(InputError, match=r"no sub-\*/ses-\* session folder") as err:  # forced on the wrong files
        load_dataset(totalseg, _cfg(), "isles22")
    assert err.value.file == str(totalseg)
    with pytest.raises(InputError, match="no meta.csv row of split 'val'"):
        load_dataset(totalseg, _cfg(volumes={"meta_split": "val"}))
    plain = load_dataset(totalseg, _cfg(), "totalseg-mri")
    (totalseg / "meta.csv").rename(totalseg / "meta.bak")
    assert load_dataset(totalseg, _cfg(volumes={"meta_split": "all"})).layout.name == "totalseg-mri"
    assert plain.digest != load_dataset(totalseg, _cfg(volumes={"meta_split": "all"})).digest


def test_evaluation_live_and_offline_on_volumes(totalseg, tmp_path):
    cfg = _eval_cfg(volumes={"structures": ["liver", "kidney_left"]})
    live = evaluate(totalseg, cfg, model=GROWER, format="totalseg-mri")
    assert live.config["format"] == {"ground_truth": "totalseg-mri"}
    vol = live.config["imis"]["volumes"]
    assert vol["axis"] == "axial" and vol["slices"] == "largest" and vol["meta_split"] == "test"
    assert "channel" not in vol and "stride" not in vol
    n_targets = sum(len(c.metrics) for c in live.cases)
    assert live.summary["n_targets"] == n_targets == 4 and live.summary["n_cases"] == len(live.cases)
    assert {c.subject_id for c in live.cases} == {"s0001", "s0003"}
    assert 0.0 <= live.aggregates["imis/dice_auc"].value <= 1.0
    log = write_log(totalseg, GROWER, tmp_path / "log", cfg.imis)
    offline = evaluate(totalseg, cfg, log_path=log)
    assert offline.aggregates == live.aggregates
    assert offline.config["format"] == {"ground_truth": "totalseg-mri", "predictions": "generic"}
    coronal = evaluate(totalseg, _eval_cfg(volumes={"axis": "coronal"}), model=GROWER)
    assert coronal.data.ground_truth_digest != live.data.ground_truth_digest
    assert coronal.config["imis"]["volumes"]["axis"] == "coronal"


def test_generic_layout_results_keep_their_config(tmp_path):
    from tests.test_imis import write_imis

    square = np.zeros((24, 24), bool)
    square[3:12, 4:15] = True
    gt = write_imis(tmp_path / "gt", {"c1": np.stack([square, square.T])})
    result = evaluate(gt, _eval_cfg(), model=GROWER)
    assert "volumes" not in result.config["imis"]
    assert result.config["format"] == {"ground_truth": "generic"}
    forced = evaluate(gt, _eval_cfg(), model=GROWER, format="generic")
    assert forced.data.ground_truth_digest == result.data.ground_truth_digest


def test_isles_readme_schematic_rawdata_flat_layout(tmp_path):
    """The challenge README's schematic: ``rawdata/<sub>/<ses>/<stem>_dwi.nii.gz`` (no modality folders)."""
    root = tmp_path / "isles"
    stem = "sub-strokecase0009_ses-0001"
    mask = _blob((3, 3, 1), (7, 8, 6))
    _save(
        root / "rawdata" / "sub-strokecase0009" / "ses-0001" / f"{stem}_dwi.nii.gz",
        np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE),
    )
    _save(root / "derivatives" / "sub-strokecase0009" / "ses-0001" / f"{stem}_msk.nii.gz", mask)
    (case,), _ = load_cases(root, _cfg())
    idx = _expected_largest(
        _canonical(root / "derivatives" / "sub-strokecase0009" / "ses-0001" / f"{stem}_msk.nii.gz"), 2
    )
    assert case.case_id == f"{stem}_axial_{idx:04d}" and case.image_path.parent.name == "ses-0001"
    with pytest.raises(InputError, match="one structure, 'lesion'"):
        load_cases(root, _cfg(volumes={"structures": ["infarct"]}))
