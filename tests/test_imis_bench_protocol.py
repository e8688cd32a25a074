"""``imis.protocol: imis_bench`` (IMIS-Bench test.py: 1024 grid, nearest resize, -1 click) vs ``native``."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from trackeval.api import config_model
from trackeval.benchmarks.imis.adapter import evaluate
from trackeval.benchmarks.imis.cases import load_cases, read_case
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.protocol import Request
from trackeval.benchmarks.imis.session import run_sequence
from trackeval.config import EvalConfig
from trackeval.demo.imis_data import build_imis_demo
from trackeval.errors import ConfigError, InputError

GROWER = "trackeval.interactive.baselines:region_grower"
THRESHOLD = "tests.test_imis_bench_protocol:threshold"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return build_imis_demo(tmp_path_factory.mktemp("imis_bench") / "demo")


def _cfg(**imis) -> EvalConfig:
    return config_model().model_validate(
        {"imis": imis, "engine": {"executor": "local"}, "bootstrap": {"n_resamples": 200}}
    )


def _torch_nearest(array: np.ndarray, size: int = 1024) -> np.ndarray:
    """Pixel-centre nearest resize (PIL's NEAREST, IMIS-Bench's loader), called directly as torch's
    ``F.interpolate(mode="nearest-exact")`` on an (N, C, H, W) float tensor (equal to PIL's for these sizes;
    tests/test_imis_bench_reference.py compares with PIL itself)."""
    chw = array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
    t = torch.from_numpy(chw.astype(np.float32))[None]
    out = F.interpolate(t, size=(size, size), mode="nearest-exact")[0].numpy()
    return out[0] if array.ndim == 2 else out.transpose(1, 2, 0)


class Threshold:
    """A fixed prediction: grey > 100 (checks that image and output are on the 1024 grid)."""

    supported_prompts = ("point",)

    def predict(self, request: Request) -> np.ndarray:
        assert request.image.shape == (1024, 1024, 3) and request.spatial_shape == (1024, 1024)
        return request.image[..., 0] > 100


def threshold() -> Threshold:
    return Threshold()


class Exact:
    """Returns the target exactly from the first prompt on, and records every prompt it receives."""

    def __init__(self, truth: np.ndarray) -> None:
        self.truth, self.seen = truth, []

    def predict(self, request: Request) -> np.ndarray:
        self.seen.append(request.prompts)
        return self.truth.copy()


# --- (a) the resize on real demo slices ----------------------------------------------------------------------


def test_resize_equals_torch_nearest_on_real_slices(demo):
    native, bench = IMISConfig(), IMISConfig(protocol="imis_bench")
    cases, _ = load_cases(demo, native)
    n_masks = 0
    for case in cases:
        small, big = read_case(case, native), read_case(case, bench)
        assert small.image.shape == (256, 256, 3) and big.image.shape == (1024, 1024, 3)
        assert big.image.dtype == np.uint8
        np.testing.assert_array_equal(big.image, _torch_nearest(small.image).astype(np.uint8))
        assert big.digest == small.digest  # the same files
        assert sorted(big.masks) == sorted(small.masks)
        for target, mask in small.masks.items():
            direct = _torch_nearest(mask.astype(np.uint8)) > 0.5
            np.testing.assert_array_equal(big.masks[target], direct)
            # 256 -> 1024 nearest is each pixel repeated 4 x 4: an independent check of the direct call
            np.testing.assert_array_equal(direct, np.kron(mask, np.ones((4, 4), bool)))
            assert big.masks[target].sum() == 16 * mask.sum()
            n_masks += 1
    assert n_masks >= 20


def test_eval_size_is_configurable(demo):
    cfg = IMISConfig(protocol="imis_bench", eval_size=320)  # not a multiple: pixel centres floor((i + 0.5) * in / out)
    case = load_cases(demo, cfg)[0][0]
    small, big = read_case(case, IMISConfig()), read_case(case, cfg)
    for target, mask in small.masks.items():
        pil = np.array(Image.fromarray(mask.astype(np.uint8)).resize((320, 320), Image.NEAREST)) > 0
        np.testing.assert_array_equal(big.masks[target], pil)  # torch's float32 "nearest-exact" is not PIL's here


# --- (b) Dice on the label grid ------------------------------------------------------------------------------


def test_dice_of_a_fixed_prediction_is_taken_on_the_label_grid(demo):
    """The model answers on the 1024 grid; its mask goes back to 256 x 256 (bilinear, > 0.5: a 4 x 4 block mask
    returns to its pixel) and Dice is IMIS-Bench's there, ``2|P&G| / (|P| + |G| + 1e-8)``. At this integer scale it
    equals the Dice of the same answer on the 1024 grid (every count x 16); tests/test_imis_bench_reference.py
    has the non-integer scales."""
    result = evaluate(demo, _cfg(protocol="imis_bench", prompt_types=["point"], max_clicks=2), model=THRESHOLD)
    cfg = IMISConfig()
    cases, _ = load_cases(demo, cfg)
    by_id = {c.case_id: c for c in cases}
    checked = 0
    for record in result.cases:
        small = read_case(by_id[record.case_id], cfg)
        pred = small.image[..., 0] > 100  # the answer brought back to the label grid
        big_pred = _torch_nearest(small.image)[..., 0] > 100
        for target, mask in small.masks.items():
            dice = 2 * (pred & mask).sum() / (pred.sum() + mask.sum() + 1e-8)
            assert record.metrics[target]["dice_point_1"] == pytest.approx(dice, abs=1e-12)
            big = _torch_nearest(mask.astype(np.uint8)) > 0.5
            assert dice == pytest.approx(2 * (big_pred & big).sum() / (big_pred.sum() + big.sum()), abs=1e-9)
            checked += 1
    assert checked >= 20


# --- (c) the -1 click -----------------------------------------------------------------------------------------


def test_minus_one_click_when_the_previous_mask_is_exact(demo):
    bench = IMISConfig(protocol="imis_bench", max_clicks=4)
    case = load_cases(demo, bench)[0][0]
    loaded = read_case(case, bench)
    target, truth = sorted(loaded.masks.items())[0]
    model = Exact(truth)
    turns = run_sequence(model, loaded.image, truth, case.case_id, target, "point", bench)
    assert [t.mask.shape for t in turns] == [(1024, 1024)] * 4
    first, *later = model.seen
    assert len(first.clicks) == 1 and first.clicks[0].label == 1 and truth[first.clicks[0].coords]
    for prompts in later:
        (click,) = prompts.clicks
        assert click.label == -1 and all(0 <= c < 256 for c in click.coords)
        assert prompts.box is None and prompts.text is None
    assert len({p.clicks[0].coords for p in later}) > 1  # a fresh random pixel per turn
    again = Exact(truth)
    run_sequence(again, loaded.image, truth, case.case_id, target, "point", bench)
    assert again.seen == model.seen  # seeded
    # native: no click at all once the mask is exact (today's behaviour)
    native = IMISConfig(max_clicks=4)
    small = read_case(case, native)
    plain = Exact(small.masks[target])
    run_sequence(plain, small.image, small.masks[target], case.case_id, target, "box", native)
    assert [p.clicks for p in plain.seen[1:]] == [(), (), ()]


def test_minus_one_click_after_a_box_is_also_sent(demo):
    bench = IMISConfig(protocol="imis_bench", max_clicks=2)
    case = load_cases(demo, bench)[0][0]
    loaded = read_case(case, bench)
    target, truth = sorted(loaded.masks.items())[0]
    model = Exact(truth)
    run_sequence(model, loaded.image, truth, case.case_id, target, "box", bench)
    assert model.seen[0].box is not None and [c.label for c in model.seen[1].clicks] == [-1]


# --- (d) defaults unchanged; limits ---------------------------------------------------------------------------


def test_defaults_are_native_and_unchanged(demo):
    assert IMISConfig().protocol == "native" and IMISConfig().eval_size == 1024
    default = evaluate(demo, _cfg(max_clicks=4), model=GROWER)
    explicit = evaluate(demo, _cfg(max_clicks=4, protocol="native", eval_size=512), model=GROWER)
    assert default.aggregates == explicit.aggregates
    assert [c.metrics for c in default.cases] == [c.metrics for c in explicit.cases]
    assert default.data == explicit.data and default.summary == explicit.summary


def test_3d_input_is_a_config_error_naming_the_switch(tmp_path):
    gt = tmp_path / "gt"
    gt.mkdir()
    label = np.zeros((12, 12, 8), np.uint8)
    label[2:7, 3:9, 1:6] = 3
    nib.save(nib.Nifti1Image(np.where(label > 0, 200.0, 20.0).astype(np.float32), np.eye(4)), gt / "img.nii.gz")
    nib.save(nib.Nifti1Image(label, np.eye(4)), gt / "lab.nii.gz")
    (gt / "manifest.csv").write_text("case_id,image,label,modality,region\nv1,img.nii.gz,lab.nii.gz,CT,pelvis\n")
    cfg = IMISConfig(protocol="imis_bench", labels={"bladder": 3})
    (case,), _ = load_cases(gt, cfg)
    with pytest.raises(ConfigError, match="imis.protocol"):
        read_case(case, cfg)


def test_2d_nifti_is_resized(tmp_path):
    gt = tmp_path / "gt"
    gt.mkdir()
    label = np.zeros((16, 20), np.uint8)
    label[3:9, 4:12] = 2
    image = np.where(label > 0, 200.0, 20.0).astype(np.float32)
    nib.save(nib.Nifti1Image(image, np.eye(4)), gt / "img.nii.gz")
    nib.save(nib.Nifti1Image(label, np.eye(4)), gt / "lab.nii.gz")
    (gt / "manifest.csv").write_text("case_id,image,label,modality,region\nv1,img.nii.gz,lab.nii.gz,CT,pelvis\n")
    cfg = IMISConfig(protocol="imis_bench", eval_size=64)
    (case,), _ = load_cases(gt, cfg)
    loaded = read_case(case, cfg)
    assert loaded.image.shape == (64, 64) and loaded.image.dtype == np.float32
    np.testing.assert_array_equal(loaded.image, _torch_nearest(image, 64))
    np.testing.assert_array_equal(loaded.masks["label_2"], _torch_nearest(label == 2, 64) > 0.5)


def test_offline_logs_are_refused_with_imis_bench(demo, tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("")
    with pytest.raises(InputError, match="imis.protocol=imis_bench is live only"):
        evaluate(demo, _cfg(protocol="imis_bench"), log_path=log)


def test_protocol_switch_validates():
    with pytest.raises(ValueError):
        IMISConfig(protocol="ritm")
    with pytest.raises(ValueError):
        IMISConfig(eval_size=0)
