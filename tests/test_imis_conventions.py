"""IMIS literature conventions: RITM's click rule, NoC on IoU, NoC's "not reached" value, the ``ritm`` preset.

The RITM reference below is written from RITM's evaluation clicker (``isegm/inference/clicker.py``,
``Clicker._get_next_click``) and shares no code with trackeval: its distance transform is a brute-force exact
Euclidean distance to the nearest zero pixel of the padded mask (RITM: ``cv2.distanceTransform(..., DIST_L2, 0)``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage

from tests.test_imis import write_imis
from trackeval.api import config_model, load_config
from trackeval.benchmarks.imis.adapter import evaluate
from trackeval.benchmarks.imis.clicks import error_click
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.protocol import Request
from trackeval.benchmarks.imis.runner import write_log
from trackeval.benchmarks.imis.scoring import sequence_metrics
from trackeval.benchmarks.imis.session import PromptSchedule
from trackeval.config import EvalConfig
from trackeval.demo.imis_data import build_imis_demo
from trackeval.errors import ConfigError
from trackeval.metrics.interactive import binary_dice, binary_iou, number_of_clicks

GROWER = "trackeval.interactive.baselines:region_grower"
ROWS = "tests.test_imis_conventions:rows_model"
RNG = np.random.default_rng(0)  # only for click calls of rules that draw nothing


# --- an independent RITM reference ---------------------------------------------------------------------------


def _brute_edt(mask: np.ndarray) -> np.ndarray:
    """Exact L2 distance of every pixel to the nearest 0 pixel of ``mask`` (0 on zeros), by brute force."""
    out = np.zeros(mask.shape, dtype=np.float64)
    zeros = np.argwhere(~mask)
    for y, x in np.argwhere(mask):
        out[y, x] = np.sqrt(((zeros - (y, x)) ** 2).sum(axis=1).min())
    return out


def ritm_next_click(pred: np.ndarray, gt: np.ndarray, not_clicked_map: np.ndarray) -> tuple[bool, tuple[int, int]]:
    """RITM's ``_get_next_click(pred_mask, padding=True)`` with an all-valid ``not_ignore_mask``."""
    fn_mask = np.logical_and(gt, np.logical_not(pred))
    fp_mask = np.logical_and(np.logical_not(gt), pred)
    fn_mask = np.pad(fn_mask, ((1, 1), (1, 1)), "constant")
    fp_mask = np.pad(fp_mask, ((1, 1), (1, 1)), "constant")
    fn_mask_dt = _brute_edt(fn_mask)[1:-1, 1:-1] * not_clicked_map
    fp_mask_dt = _brute_edt(fp_mask)[1:-1, 1:-1] * not_clicked_map
    fn_max_dist, fp_max_dist = np.max(fn_mask_dt), np.max(fp_mask_dt)
    is_positive = fn_max_dist > fp_max_dist
    if is_positive:
        coords_y, coords_x = np.where(fn_mask_dt == fn_max_dist)
    else:
        coords_y, coords_x = np.where(fp_mask_dt == fp_max_dist)
    return bool(is_positive), (int(coords_y[0]), int(coords_x[0]))


def _blobs(rng: np.random.Generator, shape: tuple[int, int], sigma: float, level: float) -> np.ndarray:
    return ndimage.gaussian_filter(rng.standard_normal(shape), sigma) > level


def _apply(pred: np.ndarray, gt: np.ndarray, click: tuple[int, int], radius: int, rng) -> np.ndarray:
    """A toy model: copies the truth into a disk around the click, sometimes ignores the click."""
    if rng.random() < 0.25:
        return pred
    yy, xx = np.ogrid[: gt.shape[0], : gt.shape[1]]
    disk = (yy - click[0]) ** 2 + (xx - click[1]) ** 2 <= radius**2
    out = pred.copy()
    out[disk] = gt[disk]
    return out


@pytest.mark.parametrize("seed", range(24))
def test_ritm_clicks_equal_the_reference_on_seeded_masks(seed):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(12, 30)), int(rng.integers(12, 30)))
    gt = _blobs(rng, shape, float(rng.uniform(1.0, 3.0)), float(rng.uniform(-0.2, 0.3)))
    pred = _blobs(rng, shape, float(rng.uniform(1.0, 3.0)), float(rng.uniform(-0.2, 0.3))) if seed % 3 else gt & False
    not_clicked = np.ones(shape, dtype=bool)
    clicked: list[tuple[int, ...]] = []
    n_clicks = 0
    for _ in range(12):
        if not (pred ^ gt).any():
            assert error_click(pred, gt, RNG, "ritm", clicked) is None
            break
        is_positive, coords = ritm_next_click(pred, gt, not_clicked)
        ours = error_click(pred, gt, RNG, "ritm", clicked)
        assert ours is not None and ours.coords == coords and ours.label == int(is_positive)
        not_clicked[coords] = False
        clicked.append(coords)
        n_clicks += 1
        pred = _apply(pred, gt, coords, int(rng.integers(1, 4)), rng)
    assert n_clicks >= 1


def test_ritm_clicks_through_the_prompt_schedule_equal_the_reference():
    """The live/log schedule remembers earlier clicks (the point prompt's first click included)."""
    for seed in range(4):
        rng = np.random.default_rng(100 + seed)
        gt = _blobs(rng, (24, 24), 2.0, 0.0)
        for prompt_type in ("point", "box"):
            schedule = PromptSchedule(gt, "c", "t", prompt_type, IMISConfig(click_mode="ritm", max_clicks=10), 42)
            first = schedule.prompts(1, None)
            not_clicked = np.ones(gt.shape, dtype=bool)
            for c in first.clicks:
                not_clicked[c.coords] = False
            pred = ndimage.binary_erosion(gt, iterations=1)
            for turn in range(2, 11):
                if not (pred ^ gt).any():
                    break
                is_positive, coords = ritm_next_click(pred, gt, not_clicked)
                (click,) = schedule.prompts(turn, pred).clicks
                assert click.coords == coords and click.label == int(is_positive)
                not_clicked[coords] = False
                pred = _apply(pred, gt, coords, 1, rng)


def test_ritm_click_hand_cases():
    gt = np.zeros((20, 20), bool)
    gt[2:5, 2:5] = True  # a 3x3 miss: depth 2 at its centre (3, 3)
    click = error_click(np.zeros_like(gt), gt, RNG, "ritm")
    assert (click.label, click.coords) == (1, (3, 3))
    pred = np.zeros_like(gt)
    pred[10:17, 10:17] = True  # a 7x7 false alarm: depth 4 at (13, 13), deeper than the miss -> negative click
    click = error_click(pred, gt, RNG, "ritm")
    assert (click.label, click.coords) == (0, (13, 13))
    # equal depths: negative wins (RITM: positive only when strictly deeper); first pixel in row-major order
    pred = np.zeros_like(gt)
    pred[10:13, 10:13] = True
    click = error_click(pred, gt, RNG, "ritm")
    assert (click.label, click.coords) == (0, (11, 11))
    # the image border is a boundary (padding): a full-width band's deepest pixels are in its middle row
    gt = np.zeros((9, 6), bool)
    gt[2:7, :] = True
    click = error_click(gt & False, gt, RNG, "ritm")
    assert click.label == 1 and click.coords == (4, 2)  # depth 3 at columns 2 and 3 of row 4: the first
    # already clicked pixels are skipped (RITM's not_clicked_map); no error left -> no click
    assert error_click(gt & False, gt, RNG, "ritm", [(4, 2)]).coords == (4, 3)
    assert error_click(gt, gt, RNG, "ritm") is None
    # the largest-component centre rule differs: it picks the biggest region, not the deepest pixel
    gt = np.zeros((20, 20), bool)
    gt[1:4, 1:19] = True  # a long thin miss (54 px, depth 2)
    pred = np.zeros_like(gt)
    pred[8:15, 8:15] = True  # a compact false alarm (49 px, depth 4)
    assert error_click(pred, gt, RNG, "center_error").label == 1
    assert error_click(pred, gt, RNG, "ritm").label == 0


# --- NoC on IoU, not reached -----------------------------------------------------------------------------------


def test_iou_and_noc_rules_hand_computed():
    truth = np.zeros((20, 20), bool)
    truth[0:10, 0:10] = True
    pred = truth.copy()
    pred[8:10, 0:10] = False  # 80 of 100 px: Dice 160/180 = 0.889 >= 0.85, IoU 0.8 < 0.85
    assert binary_dice(pred, truth) == pytest.approx(160 / 180) and binary_iou(pred, truth) == pytest.approx(0.8)
    empty = np.zeros((3, 3), bool)
    assert math.isnan(binary_iou(empty, empty)) and binary_iou(empty, empty, "original_eps") == 0.0
    assert binary_iou(empty, truth[:3, :3]) == 0.0
    masks = {"point": [pred, pred, truth]}
    dice_cfg = IMISConfig(max_clicks=3, noc_thresholds=(0.85,))
    iou_cfg = IMISConfig(max_clicks=3, noc_thresholds=(0.85,), noc_metric="iou")
    assert sequence_metrics(truth, masks, dice_cfg)["noc_85"] == 1
    m = sequence_metrics(truth, masks, iou_cfg)
    assert m["noc_85"] == 3 and m["iou_point_1"] == pytest.approx(0.8) and m["iou_point_3"] == 1.0
    assert m["dice_point_1"] == pytest.approx(160 / 180)  # Dice curve and its AUC unchanged by noc_metric
    never = {"point": [pred, pred]}
    assert sequence_metrics(truth, never, IMISConfig(max_clicks=2, noc_metric="iou"))["noc_85"] == 3
    assert (
        sequence_metrics(truth, never, IMISConfig(max_clicks=2, noc_metric="iou", noc_not_reached="max"))["noc_85"] == 2
    )
    curve = [0.5, 0.8]
    assert number_of_clicks(curve, 0.9) == 3 and number_of_clicks(curve, 0.9, "max") == 2
    assert number_of_clicks(curve, 0.8, "max") == 2 and number_of_clicks(curve, 0.5, "max") == 1
    with pytest.raises(ValueError, match="not_reached"):
        number_of_clicks(curve, 0.9, "max+1")


class RowsModel:
    """Truth read off the image (red > 128) with its last rows missing: 2 rows at turn 1, 1 at turn 2, none after."""

    supported_prompts = ("point",)

    def predict(self, request: Request) -> np.ndarray:
        truth = request.image[..., 0] > 128
        rows = np.flatnonzero(truth.any(axis=1))
        out = truth.copy()
        drop = max(0, 3 - request.turn)
        if drop:
            out[rows[-drop:]] = False
        return out


def rows_model() -> RowsModel:
    return RowsModel()


def _cfg(**imis) -> EvalConfig:
    return config_model().model_validate(
        {"imis": imis, "engine": {"executor": "local", "cache": False}, "bootstrap": {"n_resamples": 200}}
    )


def _square(shape, lo, hi) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[lo[0] : hi[0], lo[1] : hi[1]] = True
    return m


@pytest.fixture(scope="module")
def square_gt(tmp_path_factory) -> Path:
    a = _square((24, 24), (2, 2), (12, 12))  # 10 x 10
    return write_imis(tmp_path_factory.mktemp("gt") / "gt", {"c1": np.stack([a, np.zeros_like(a)])})


def test_noc_metric_iou_end_to_end(square_gt):
    # turn 1: 80 px (Dice 0.889, IoU 0.8); turn 2: 90 px (Dice 0.947, IoU 0.9); turn 3: exact
    dice = evaluate(square_gt, _cfg(max_clicks=3, prompt_types=["point"]), model=ROWS)
    iou = evaluate(square_gt, _cfg(max_clicks=3, prompt_types=["point"], noc_metric="iou"), model=ROWS)
    assert dice.cases[0].metrics["a"]["noc_85"] == 1 and iou.cases[0].metrics["a"]["noc_85"] == 2
    assert dice.aggregates["imis/noc_85"].value == 1 and iou.aggregates["imis/noc_85"].value == 2
    assert iou.aggregates["imis/dice_auc"] == dice.aggregates["imis/dice_auc"]  # same Dice curve, same keys
    assert set(iou.aggregates) == set(dice.aggregates)
    assert iou.config["imis"]["noc_metric"] == "iou" and dice.config["imis"]["noc_metric"] == "dice"


def test_noc_not_reached_end_to_end(square_gt):
    kw = {"max_clicks": 2, "prompt_types": ["point"], "noc_thresholds": [0.85, 0.99]}
    plus = evaluate(square_gt, _cfg(**kw), model=ROWS)
    exact = evaluate(square_gt, _cfg(**kw, noc_not_reached="max"), model=ROWS)
    assert plus.cases[0].metrics["a"]["noc_99"] == 3 and exact.cases[0].metrics["a"]["noc_99"] == 2
    assert plus.summary["n_noc_99_not_reached"] == exact.summary["n_noc_99_not_reached"] == 1
    # NoC@85 under IoU is reached exactly at the last click (IoU 0.9): max, yet not counted as not reached
    reached_last = evaluate(square_gt, _cfg(**kw, noc_not_reached="max", noc_metric="iou"), model=ROWS)
    assert reached_last.cases[0].metrics["a"]["noc_85"] == 2
    assert reached_last.summary["n_noc_85_not_reached"] == 0
    assert reached_last.config["imis"]["noc_not_reached"] == "max"


# --- configuration: preset, alias -------------------------------------------------------------------------------


def test_preset_ritm_sets_the_four_fields():
    cfg = load_config(None, ["imis.preset=ritm"]).imis
    assert (cfg.noc_metric, cfg.max_clicks, cfg.max_turns, cfg.noc_not_reached, cfg.click_mode) == (
        "iou",
        20,
        20,
        "max",
        "ritm",
    )
    same = load_config(None, ["imis.preset=ritm", "imis.noc_metric=iou", "imis.max_turns=20"]).imis
    assert same == cfg  # explicit values equal to the preset's are fine
    other = load_config(None, ["imis.preset=ritm", "imis.noc_thresholds=[0.8]", "imis.seed=1"]).imis
    assert other.noc_thresholds == (0.8,) and other.click_mode == "ritm"  # unrelated fields stay free
    for override, field in (
        ("imis.noc_metric=dice", "imis.noc_metric"),
        ("imis.max_clicks=9", "imis.max_clicks"),
        ("imis.max_turns=9", "imis.max_turns"),
        ("imis.noc_not_reached=max_plus_one", "imis.noc_not_reached"),
        ("imis.click_mode=center_error", "imis.click_mode"),
    ):
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")) as err:
            load_config(None, ["imis.preset=ritm", override])
        assert "preset" in str(err.value)
    with pytest.raises(ConfigError, match="preset"):
        load_config(None, ["imis.preset=simpleclick"])


def test_max_clicks_and_max_turns_follow_each_other():
    assert IMISConfig().max_clicks == IMISConfig().max_turns == 9
    assert IMISConfig(max_clicks=5).max_turns == 5 and IMISConfig(max_turns=4).max_clicks == 4
    cfg = load_config(None, ["imis.max_clicks=7", "imis.max_turns=7"]).imis
    assert cfg.max_clicks == cfg.max_turns == 7
    with pytest.raises(ConfigError) as err:
        load_config(None, ["imis.max_clicks=7", "imis.max_turns=8"])
    assert "imis.max_clicks" in str(err.value) and "imis.max_turns" in str(err.value)
    with pytest.raises(ConfigError, match="max_clicks"):
        load_config(None, ["imis.max_clicks=0"])
    dumped = load_config().model_dump(mode="json")["imis"]
    assert {k: dumped[k] for k in ("preset", "noc_metric", "max_clicks", "max_turns", "noc_not_reached")} == {
        "preset": "none",
        "noc_metric": "dice",
        "max_clicks": 9,
        "max_turns": 9,
        "noc_not_reached": "max_plus_one",
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return build_imis_demo(tmp_path_factory.mktemp("imis") / "demo")


def test_defaults_leave_results_unchanged(demo):
    base = evaluate(demo, _cfg(max_turns=3), model=GROWER)
    explicit = evaluate(
        demo,
        _cfg(
            preset="none",
            max_turns=3,
            max_clicks=3,
            noc_metric="dice",
            noc_not_reached="max_plus_one",
            click_mode="random_error",
        ),
        model=GROWER,
    )
    assert explicit.aggregates == base.aggregates
    assert [c.metrics for c in explicit.cases] == [c.metrics for c in base.cases]
    assert explicit.summary == base.summary and explicit.config == base.config
    assert "iou_point_1" not in base.cases[0].metrics[next(iter(base.cases[0].metrics))]


def test_ritm_rule_live_equals_verified_log(demo, tmp_path):
    cfg = _cfg(click_mode="ritm", noc_metric="iou", noc_not_reached="max", max_clicks=4, prompt_types=["point"])
    live = evaluate(demo, cfg, model=GROWER)
    offline = evaluate(demo, cfg, log_path=write_log(demo, GROWER, tmp_path, cfg.imis))
    assert offline.aggregates == live.aggregates
    assert live.config["imis"]["click_mode"] == "ritm" and live.config["imis"]["noc_metric"] == "iou"
    assert all(0 < m["noc_85"] <= 4 for c in live.cases for m in c.metrics.values())


def test_oracle_unaffected_by_noc_switches(tmp_path):
    """The bundled oracle of test_imis: Dice/IoU both 1 from turn 3, so NoC@90 is the same under both metrics."""
    a = _square((24, 24), (2, 2), (12, 12))
    gt = write_imis(tmp_path / "gt", {"c1": np.stack([a, np.zeros_like(a)])})
    kw = {"max_clicks": 4, "prompt_types": ["point"]}
    dice = evaluate(gt, _cfg(**kw), model="tests.test_imis:oracle")
    iou = evaluate(gt, _cfg(**kw, noc_metric="iou"), model="tests.test_imis:oracle")
    assert dice.cases[0].metrics["a"]["noc_90"] == iou.cases[0].metrics["a"]["noc_90"] == 2  # 99/100 px at turn 2
