"""IMIS: click simulator on real CT organ masks, the interaction loop, log verification, aggregation, readers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import scipy.sparse
from PIL import Image
from scipy import ndimage
from sklearn.metrics import f1_score

from trackeval.api import config_model, load_config
from trackeval.benchmarks.imis.adapter import evaluate
from trackeval.benchmarks.imis.aggregates import aggregate
from trackeval.benchmarks.imis.cases import load_cases, read_case
from trackeval.benchmarks.imis.clicks import bounding_box, error_click, first_click, inner_pixels
from trackeval.benchmarks.imis.config import IMISConfig
from trackeval.benchmarks.imis.protocol import Request
from trackeval.benchmarks.imis.runner import write_log
from trackeval.benchmarks.imis.session import PromptSchedule
from trackeval.cli import main
from trackeval.config import EvalConfig
from trackeval.demo.imis_data import build_imis_demo
from trackeval.errors import InputError
from trackeval.metrics.interactive import binary_dice, dice_auc, number_of_clicks
from trackeval.results import CaseRecord

GROWER = "trackeval.interactive.baselines:region_grower"
ORACLE = "tests.test_imis:oracle"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return build_imis_demo(tmp_path_factory.mktemp("imis") / "demo")


@pytest.fixture(scope="module")
def real_masks(demo) -> list[np.ndarray]:
    cfg = IMISConfig()
    cases, _ = load_cases(demo, cfg)
    return [m for c in cases for m in read_case(c, cfg).masks.values()]


def _cfg(**imis) -> EvalConfig:
    return config_model().model_validate(
        {"imis": imis, "engine": {"executor": "local"}, "bootstrap": {"n_resamples": 200}}
    )


# --- click simulator on real masks -------------------------------------------------------------------------


def test_first_clicks_lie_in_the_inner_fraction(real_masks):
    for truth in real_masks:
        coords = np.argwhere(truth)
        dist = np.linalg.norm(coords - coords.mean(axis=0), axis=1)
        for fraction in (0.5, 0.1):
            inner = inner_pixels(truth, fraction)
            assert inner.sum() == max(1, int(len(coords) * fraction))
            d_inner = dist[inner[tuple(coords.T)]]
            assert d_inner.max() <= dist[~inner[tuple(coords.T)]].min() + 1e-9  # the closest ones, by brute force
        rng = np.random.default_rng(0)
        clicks = [first_click(truth, rng, 0.5) for _ in range(50)]
        assert all(c.label == 1 and inner_pixels(truth, 0.5)[c.coords] for c in clicks)
        assert len({c.coords for c in clicks}) > 1 or truth.sum() < 4  # random, not the centroid


def test_error_clicks_lie_in_the_error_region_with_the_right_label(real_masks):
    rng = np.random.default_rng(1)
    for truth in real_masks[:8]:
        pred = np.roll(ndimage.binary_dilation(truth, iterations=2), 3, axis=1)
        fn, fp = truth & ~pred, pred & ~truth
        clicks = [error_click(pred, truth, rng, "random_error") for _ in range(400)]
        for c in clicks:
            assert (fn | fp)[c.coords] and c.label == int(truth[c.coords])
        share = np.mean([c.label for c in clicks])  # uniform over the error region: P(positive) = |FN| / |FN u FP|
        expected = fn.sum() / (fn.sum() + fp.sum())
        assert abs(share - expected) < 4 * math.sqrt(expected * (1 - expected) / 400) + 1e-9
    assert error_click(real_masks[0], real_masks[0], rng, "random_error") is None


def test_center_error_click_hand_computed():
    truth = np.zeros((20, 20), bool)
    truth[2:9, 2:9] = True  # 7x7 missed square: the deepest pixel is its centre (5, 5)
    pred = np.zeros_like(truth)
    pred[15:18, 15:18] = True  # a smaller 3x3 false alarm
    click = error_click(pred, truth, np.random.default_rng(0), "center_error")
    assert click.coords == (5, 5) and click.label == 1
    pred[10:20, 10:20] = True  # now the false alarm (10x10) is the largest error region
    click = error_click(pred, truth, np.random.default_rng(0), "center_error")
    assert click.label == 0 and click.coords in {(14, 14), (14, 15), (15, 14), (15, 15)}


def test_box_is_tight_and_jitter_bounded(real_masks):
    truth = real_masks[3]
    rows, cols = np.flatnonzero(truth.any(1)), np.flatnonzero(truth.any(0))
    box = bounding_box(truth, np.random.default_rng(0), 0)
    assert box.lo == (rows[0], cols[0]) and box.hi == (rows[-1], cols[-1])
    for seed in range(20):
        j = bounding_box(truth, np.random.default_rng(seed), 5)
        assert all(abs(a - b) <= 5 for a, b in zip(j.lo + j.hi, box.lo + box.hi, strict=True))


def test_prompt_schedule_is_deterministic_under_seed(real_masks):
    truth = real_masks[2]
    pred = ndimage.binary_erosion(truth, iterations=2)

    def clicks(seed):
        s = PromptSchedule(truth, "c1", "liver", "point", IMISConfig(), seed)
        return [s.prompts(1, None)] + [s.prompts(t, pred) for t in range(2, 6)]

    assert clicks(42) == clicks(42)
    assert clicks(42) != clicks(7)


def test_accumulate_prompts_keeps_every_click_and_the_box(real_masks):
    truth = real_masks[2]
    pred = ndimage.binary_erosion(truth, iterations=2)
    s = PromptSchedule(truth, "c1", "liver", "box", IMISConfig(accumulate_prompts=True), 0)
    first = s.prompts(1, None)
    p2, p3 = s.prompts(2, pred), s.prompts(3, pred)
    assert p3.box == first.box and len(p3.clicks) == 2 and p3.clicks[0] == p2.clicks[0]
    s = PromptSchedule(truth, "c1", "liver", "box", IMISConfig(), 0)
    s.prompts(1, None)
    assert s.prompts(2, pred).box is None and len(s.prompts(3, pred).clicks) == 1


# --- metrics ------------------------------------------------------------------------------------------------


def test_dice_matches_sklearn_f1_and_the_empty_rules(real_masks):
    truth = real_masks[1]
    pred = ndimage.binary_dilation(truth, iterations=1)
    assert binary_dice(pred, truth) == pytest.approx(f1_score(truth.ravel(), pred.ravel()), abs=1e-12)
    empty = np.zeros((5, 5), bool)
    assert binary_dice(empty, empty, "original_eps") == 0.0
    assert math.isnan(binary_dice(empty, empty, "nan"))
    assert binary_dice(empty, truth[:5, :5] | True) == 0.0


def test_noc_and_auc_hand_computed():
    curve = np.array([0.5, 0.86, 0.88, 0.95])
    assert number_of_clicks(curve, 0.85) == 2 and number_of_clicks(curve, 0.90) == 4
    assert number_of_clicks(curve, 0.99) == 5  # not reached -> max_turns + 1
    assert dice_auc(curve) == pytest.approx((0.5 / 2 + 0.86 + 0.88 + 0.95 / 2) / 3)
    assert dice_auc(np.array([0.7])) == 0.7


def test_image_level_vs_mask_level_hand_computed():
    def rec(case, dices, region):
        return CaseRecord(
            case_id=case,
            subject_id=case,
            groups={"modality": "ct", "region": region},
            metrics={t: {"dice_point_1": d} for t, d in dices.items()},
        )

    records = [rec("a", {"liver": 1.0, "spleen": 0.5}, "abdomen"), rec("b", {"liver": 0.0}, "thorax")]
    cfg = config_model().model_validate({"imis": {"max_turns": 1, "noc_thresholds": [0.9]}})
    agg = aggregate(records, cfg, ("point",))
    assert agg["imis/dice/by_prompt/point"].value == pytest.approx((0.75 + 0.0) / 2)  # image level
    assert agg["imis/mask_level/dice/by_prompt/point"].value == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert agg["imis/mask_level/dice/by_prompt/point"].n == 3 and agg["imis/dice/by_prompt/point"].n == 2
    assert agg["imis/dice/by_prompt/point/by_target/liver"].value == pytest.approx(0.5)
    assert agg["imis/dice/by_prompt/point/by_region/abdomen"].value == pytest.approx(0.75)
    assert agg["imis/mask_level/dice/by_prompt/point/by_region/abdomen"].value == pytest.approx(0.75)
    s = agg["imis/dice/by_prompt/point"]
    assert s.ci95_low <= s.value <= s.ci95_high


# --- the loop with an oracle ---------------------------------------------------------------------------------


class Oracle:
    """Reads the truth off the image (red channel > 128); eroded at turn 1, one pixel short at 2, exact from 3."""

    supported_prompts = ("point", "box", "text")

    def predict(self, request: Request) -> np.ndarray:
        truth = request.image[..., 0] > 128
        if request.turn == 1:
            return ndimage.binary_erosion(truth, iterations=2)
        if request.turn == 2:
            short = truth.copy()
            short[tuple(np.argwhere(truth)[0])] = False
            return short.astype(np.float32) * 8 - 4  # logits
        return truth


def oracle() -> Oracle:
    return Oracle()


def write_imis(root: Path, masks: dict[str, np.ndarray], shape=(24, 24), labels=("a", "b")) -> Path:
    """A one-dataset IMIS folder: each case's masks (C, H, W) as CSR npz, image red channel = union of masks."""
    (root / "image").mkdir(parents=True)
    (root / "label").mkdir()
    items = []
    for case, stack in masks.items():
        img = np.zeros((*shape, 3), np.uint8)
        img[..., 0] = stack.any(axis=0) * 200
        img[..., 1] = 30
        Image.fromarray(img).save(root / "image" / f"{case}.png")
        name = f"label/x___{case}.({stack.shape[0]}, {shape[0]}, {shape[1]}, 1).npz"
        scipy.sparse.save_npz(root / name, scipy.sparse.csr_matrix(stack.reshape(len(stack), -1).astype(np.int32)))
        items.append({"image": f"image/{case}.png", "label": name})
    meta = {
        "name": "t",
        "modality": {"0": "MR"},
        "labels": {"0": "background", **{str(i + 1): n for i, n in enumerate(labels)}},
    }
    (root / "dataset.json").write_text(json.dumps({**meta, "test": items, "training": items}))
    return root


def _square(shape, lo, hi) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[lo[0] : hi[0], lo[1] : hi[1]] = True
    return m


def test_oracle_reaches_dice_1_and_noc_is_right(tmp_path):
    a = _square((24, 24), (2, 2), (12, 12))  # 100 px
    gt = write_imis(tmp_path / "gt", {"c1": np.stack([a, np.zeros_like(a)])})
    result = evaluate(gt, _cfg(max_turns=4), model=ORACLE)
    m = result.cases[0].metrics
    assert list(m) == ["a"]  # the empty channel b is not a target
    d1 = 2 * 36 / (36 + 100)  # 6x6 after two erosions
    d2 = 2 * 99 / (99 + 100)
    curve = [m["a"][f"dice_point_{t}"] for t in range(1, 5)]
    assert curve == pytest.approx([d1, d2, 1.0, 1.0])
    assert m["a"]["noc_85"] == 2 and m["a"]["noc_90"] == 2
    assert m["a"]["dice_auc"] == pytest.approx((d1 / 2 + d2 + 1.0 + 0.5) / 3)
    assert m["a"]["dice_box_1"] == pytest.approx(d1) and m["a"]["dice_text_1"] == pytest.approx(d1)
    agg = result.aggregates
    assert agg["imis/dice/by_click/3"].value == 1.0 and agg["imis/noc_85"].value == 2
    assert result.summary["n_noc_90_not_reached"] == 0
    strict = evaluate(gt, _cfg(max_turns=2, noc_thresholds=[0.995]), model=ORACLE)
    assert strict.cases[0].metrics["a"]["noc_100"] == 3  # not reached in 2 turns -> max_turns + 1, counted
    assert strict.summary["n_noc_100_not_reached"] == 1


# --- logs: runner, verification, tampering -------------------------------------------------------------------


@pytest.fixture(scope="module")
def grower_log(demo, tmp_path_factory) -> Path:
    return write_log(demo, GROWER, tmp_path_factory.mktemp("log"), IMISConfig(max_turns=4))


def test_offline_log_scores_exactly_as_live(demo, grower_log):
    cfg = _cfg(max_turns=4)
    live = evaluate(demo, cfg, model=GROWER)
    offline = evaluate(demo, cfg, log_path=grower_log)
    assert offline.aggregates == live.aggregates
    assert offline.data.predictions_digest == live.data.predictions_digest
    assert live.to_json() == evaluate(demo, cfg, model=GROWER).to_json()  # byte-identical rerun
    assert "imis/dice/by_prompt/text" not in live.aggregates  # the grower declares no text support
    assert 0.3 < live.aggregates["imis/dice/by_prompt/point"].value < 1.0


def _tamper(log: Path, out: Path, edit) -> Path:
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    edit(lines)
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return out


def test_tampered_click_is_rejected_naming_case_target_and_turn(demo, grower_log):
    def move_click(lines):
        line = next(x for x in lines if x["turn"] == 3 and x["prompt"]["clicks"] and x["prompt_type"] == "point")
        line["prompt"]["clicks"][0]["coords"][0] += 1
        move_click.line = line

    bad = _tamper(grower_log, grower_log.parent / "bad.jsonl", move_click)
    with pytest.raises(InputError) as err:
        evaluate(demo, _cfg(max_turns=4), log_path=bad)
    msg, line = str(err.value), move_click.line
    assert f"target {line['target']}" in msg and "turn 3" in msg and f"case={line['case_id']}" in msg
    assert "does not follow the protocol" in msg
    code = main(["evaluate", "imis", "--ground-truth", str(demo), "--predictions", str(bad), "--out", "x"])
    assert code == 2


def test_log_other_defects(demo, grower_log, tmp_path):
    cfg = _cfg(max_turns=4)
    drop = _tamper(grower_log, tmp_path / "drop.jsonl", lambda ls: ls.remove(next(x for x in ls if x["turn"] == 2)))
    with pytest.raises(InputError, match="turn 2 missing"):
        evaluate(demo, cfg, log_path=drop)
    with pytest.raises(InputError, match="turn 1: the logged prompt"):  # another seed, other clicks
        evaluate(
            demo, cfg, log_path=_tamper(grower_log, tmp_path / "s.jsonl", lambda ls: [x.update(seed=1) for x in ls])
        )
    (tmp_path / "junk.jsonl").write_text('{"case_id": "x"}\n')
    with pytest.raises(InputError, match="line 1"):
        evaluate(demo, cfg, log_path=tmp_path / "junk.jsonl")
    first = json.loads(grower_log.read_text().splitlines()[0])["case_id"]
    partial = _tamper(
        grower_log,
        grower_log.parent / "partial.jsonl",
        lambda ls: ls.__setitem__(slice(None), [x for x in ls if x["case_id"] != first]),
    )
    result = evaluate(demo, cfg, log_path=partial)
    missing = next(c for c in result.cases if c.case_id == first)
    assert missing.status == "missing_prediction" and result.summary["n_missing_predictions"] == 1
    assert all(v["dice_point_4"] == 0.0 and v["noc_85"] == 5 for v in missing.metrics.values())


# --- readers ----------------------------------------------------------------------------------------------------


def test_imis_reader_channels_and_shape_from_name(tmp_path):
    a, b = _square((24, 24), (1, 1), (5, 9)), _square((24, 24), (10, 10), (20, 14))
    gt = write_imis(tmp_path / "gt", {"c1": np.stack([a, b])}, labels=("Left Kidney", "liver"))
    cfg = IMISConfig()
    (case,), _ = load_cases(gt, cfg)
    loaded = read_case(case, cfg)
    assert case.modality == "mr" and case.region == "unknown"
    assert set(loaded.masks) == {"left_kidney", "liver"}
    assert np.array_equal(loaded.masks["left_kidney"], a) and np.array_equal(loaded.masks["liver"], b)
    assert loaded.image.shape == (24, 24, 3)


@pytest.mark.parametrize(
    "defect, match",
    [
        ("no_shape", "dense shape"),
        ("wrong_shape", "the file name says"),
        ("values", "0 or 1"),
        ("image_size", "differs from the image size"),
        ("too_many_channels", "only 2 labels"),
        ("not_npz", "not a scipy.sparse"),
    ],
)
def test_imis_reader_bad_input_names_the_file(tmp_path, defect, match):
    a = _square((24, 24), (1, 1), (5, 9))
    gt = write_imis(tmp_path / "gt", {"c1": np.stack([a, a])})
    label = next((gt / "label").iterdir())
    meta = json.loads((gt / "dataset.json").read_text())
    if defect == "no_shape":
        label = label.rename(gt / "label" / "c1.npz")
    elif defect == "wrong_shape":
        label = label.rename(gt / "label" / "x___c1.(2, 24, 20, 1).npz")
    elif defect == "values":
        scipy.sparse.save_npz(label, scipy.sparse.csr_matrix(np.stack([a, a]).reshape(2, -1).astype(np.int32) * 3))
    elif defect == "image_size":
        Image.fromarray(np.zeros((20, 24, 3), np.uint8)).save(gt / "image" / "c1.png")
    elif defect == "too_many_channels":
        label = gt / "label" / "x___c1.(3, 24, 24, 1).npz"
        scipy.sparse.save_npz(label, scipy.sparse.csr_matrix(np.zeros((3, 576), np.int32)))
    elif defect == "not_npz":
        label.write_bytes(b"not a zip")
    meta["test"][0]["label"] = label.relative_to(gt).as_posix()
    (gt / "dataset.json").write_text(json.dumps(meta))
    cfg = IMISConfig()
    with pytest.raises(InputError, match=match) as err:
        read_case(load_cases(gt, cfg)[0][0], cfg)
    assert err.value.file in (str(label), str(gt / "label" / "x___c1.(2, 24, 24, 1).npz")) and err.value.case_id == "c1"


def test_dataset_json_errors_name_the_file(tmp_path):
    gt = write_imis(tmp_path / "gt", {"c1": np.stack([_square((24, 24), (1, 1), (5, 9))] * 2)})
    (gt / "dataset.json").write_text("{not json")
    with pytest.raises(InputError, match="malformed JSON: Expecting property name") as err:
        load_cases(gt, IMISConfig())
    assert err.value.file == str(gt / "dataset.json")
    (gt / "dataset.json").write_text(json.dumps({"labels": {"0": "bg", "1": "a"}, "training": []}))
    with pytest.raises(InputError, match="'test' list"):
        load_cases(gt, IMISConfig())


def test_nifti_manifest_3d_pairs(tmp_path):
    gt = tmp_path / "gt"
    gt.mkdir()
    label = np.zeros((12, 12, 8), np.uint8)
    label[2:7, 3:9, 1:6] = 3
    image = np.where(label > 0, 200.0, 20.0).astype(np.float32)[..., None].repeat(3, -1)  # red channel = truth
    nib.save(nib.Nifti1Image(image[..., 0], np.eye(4)), gt / "img.nii.gz")
    nib.save(nib.Nifti1Image(label, np.eye(4)), gt / "lab.nii.gz")
    (gt / "manifest.csv").write_text("case_id,image,label,modality,region\nv1,img.nii.gz,lab.nii.gz,CT,pelvis\n")

    class Threshold:
        supported_prompts = ("point",)

    cfg = IMISConfig(labels={"bladder": 3})
    (case,), _ = load_cases(gt, cfg)
    loaded = read_case(case, cfg)
    assert loaded.image.shape == (12, 12, 8) and loaded.masks["bladder"].sum() == 5 * 6 * 5
    s = PromptSchedule(loaded.masks["bladder"], "v1", "bladder", "point", cfg, 0)
    c = s.prompts(1, None).clicks[0]
    assert len(c.coords) == 3 and loaded.masks["bladder"][c.coords]
    nib.save(nib.Nifti1Image(label, np.diag([2.0, 1, 1, 1])), gt / "lab.nii.gz")
    with pytest.raises(InputError, match="affine"):
        read_case(case, cfg)


def test_config_switches_validate():
    cfg = load_config(None, ["imis.click_mode=center_error", "imis.max_turns=5", "imis.dice_empty_rule=original_eps"])
    assert cfg.imis.click_mode == "center_error" and cfg.imis.max_turns == 5
    for bad in ("imis.click_mode=centre", "imis.first_click_fraction=0", "imis.prompt_types=[point,point]"):
        with pytest.raises(Exception, match="imis"):
            load_config(None, [bad])


@pytest.mark.slow
def test_click_unet_trains_saves_and_runs_the_loop(demo, tmp_path):
    import torch

    from trackeval.benchmarks.imis.session import run_sequence
    from trackeval.demo.baselines import click_unet, train_click_unet

    weights = tmp_path / "unet.pt"
    stats = train_click_unet(demo, weights, iterations=2, batch=2)
    assert math.isfinite(stats["final_loss"])
    model = click_unet(str(weights))
    saved = torch.load(weights, weights_only=True)
    assert all(torch.equal(saved[k], v) for k, v in model.network.state_dict().items())
    cfg = IMISConfig()
    case = load_cases(demo, cfg)[0][0]
    loaded = read_case(case, cfg)
    target = sorted(loaded.masks)[0]
    turns = run_sequence(
        model, loaded.image, loaded.masks[target], case.case_id, target, "point", IMISConfig(max_turns=2)
    )
    assert [t.mask.shape for t in turns] == [(256, 256)] * 2 and turns[1].prompts.clicks[0].label in (0, 1)


# --- baselines and model loading ------------------------------------------------------------------------------


def test_region_grower_improves_with_corrective_clicks_on_a_real_slice(demo):
    from trackeval.benchmarks.imis.session import run_sequence
    from trackeval.demo.baselines import region_grower

    cfg = IMISConfig()
    case = next(c for c in load_cases(demo, cfg)[0] if c.case_id == "ct_z091")  # thorax: aorta, heart
    loaded = read_case(case, cfg)
    grower = region_grower()
    first, last, nocs = [], [], []
    for target, truth in sorted(loaded.masks.items()):
        curve = [
            binary_dice(t.mask, truth)
            for t in run_sequence(grower, loaded.image, truth, case.case_id, target, "point", cfg)
        ]
        first.append(curve[0])
        last.append(curve[-1])
        nocs.append(number_of_clicks(np.array(curve), 0.85))
    assert np.mean(last) > np.mean(first) + 0.02
    assert max(nocs) <= cfg.max_turns  # every target of this slice reaches Dice 0.85 within the turns


def _log_pyfunc(tmp_path, python_model, name):
    """Log and register ``python_model``; sets the tracking URI (models:/ URIs resolve through it) but not the
    experiment (``mlflow.set_experiment`` would leave ``MLFLOW_EXPERIMENT_ID`` in the environment)."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("imis-test")
    experiment_id = experiment.experiment_id if experiment else client.create_experiment("imis-test")
    with mlflow.start_run(experiment_id=experiment_id) as run:
        mlflow.pyfunc.log_model(name="model", python_model=python_model, registered_model_name=name)
    return run.info.run_id


@pytest.mark.slow
def test_mlflow_model_uri_runs_the_protocol(demo, tmp_path, monkeypatch):
    import mlflow
    import mlflow.pyfunc

    from trackeval.benchmarks.imis.session import load_model
    from trackeval.demo.baselines import RegionGrower

    class Wrapped(mlflow.pyfunc.PythonModel):
        supported_prompts = ("point", "box")

        def __init__(self):
            self.grower = RegionGrower()

        def predict(self, model_input, params=None):
            return self.grower.predict(model_input)

    class NotProtocol(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input, params=None):
            return model_input

    # mlflow.set_tracking_uri also writes MLFLOW_TRACKING_URI into os.environ: clear both afterwards and let
    # monkeypatch restore whatever the environment held before, so no later test sees this store
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    try:
        run_id = _log_pyfunc(tmp_path, Wrapped(), "imis_grower")
        _log_pyfunc(tmp_path, NotProtocol(), "imis_identity")
        cfg = _cfg(max_turns=3)
        direct = evaluate(demo, cfg, model=GROWER, model_kwargs={})
        for uri in ("models:/imis_grower/1", f"runs:/{run_id}/model"):
            via_uri = evaluate(demo, cfg, model=uri)
            assert via_uri.aggregates == direct.aggregates
            assert via_uri.model["interactive_model"] == uri
        with pytest.raises(InputError, match="does not implement predict") as err:
            load_model("models:/imis_identity/1")
        assert err.value.field == "--model"
        with pytest.raises(InputError, match="cannot load MLflow model"):
            load_model("models:/no_such_model/1")
        code = main(["evaluate", "imis", "--ground-truth", str(demo), "--model", "models:/nope/3", "--out", "x"])
        assert code == 2
    finally:
        mlflow.set_tracking_uri(None)
        load_model.cache_clear()
