"""``xray.seg.empty_both`` (issue 37): SIIM-ACR's Kaggle rule, Dice 1 for an image empty in truth and prediction.

The fixture is written in the published layout: ``train-rle.csv`` with the header ``ImageId, EncodedPixels`` and
``", "`` between the fields, several rows for one image (united), ``-1`` for an image without pneumothorax, and a
submission ``ImageId,EncodedPixels`` as Kaggle takes it; masks are 1024 x 1024 and the RLE is the challenge's
relative, column-major encoding, written here from its definition for axis-aligned rectangles. The expected numbers
are computed by hand from the rectangles' areas (Kaggle's score: the mean of the per-image Dice over all images,
1 where both masks are empty).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.results_doc import results_doc
from tests.xray_cli import run_task
from trackeval.gate.pairing import pairing_problems
from trackeval.io.results_folder import read_results
from trackeval.registry import unit

KEY = "xray/seg/dsc"
SIZE = 1024

#: (row0, row1, col0, col1) rectangles, rows/cols half-open; () = empty mask
Rect = tuple[int, int, int, int]


def _rle(rects: list[Rect]) -> str:
    """SIIM's relative RLE of the union of non-overlapping rectangles that share no column: pixels numbered down
    each column, then across (column-major); each pair is (pixels since the end of the last run, run length)."""
    runs = sorted((c * SIZE + r0, r1 - r0) for r0, r1, c0, c1 in rects for c in range(c0, c1))
    out, end = [], 0
    for start, length in runs:
        out += [start - end, length]
        end = start + length
    return " ".join(map(str, out)) if out else "-1"


def _image_id(n: int) -> str:
    """An id in SIIM's DICOM UID form."""
    return f"1.2.276.0.7230010.3.1.4.8323329.{1000 + n}.1517875{160 + n}.{900000 + n}"


# image: (truth rows: one list of rectangles per train-rle.csv row, prediction rectangles)
CASES: dict[str, tuple[list[list[Rect]], list[Rect]]] = {
    "a": ([[(100, 200, 100, 200)]], [(100, 200, 100, 200)]),  # identical: Dice 1, IoU 1
    "b": ([[(0, 100, 0, 50)], [(0, 100, 50, 100)]], [(0, 100, 0, 50)]),  # 2 rows united; pred half: 2/3, 1/2
    "c": ([[(300, 400, 300, 400)]], []),  # missed: 0, 0
    "d": ([[]], [(10, 20, 10, 20)]),  # false positive on a negative image: 0, 0
    "e": ([[(0, 200, 600, 700)]], [(100, 300, 600, 700)]),  # overlap 100x100 of 200x100 each: 1/2, 1/3
    "f": ([[(500, 600, 500, 600)]], [(500, 600, 525, 625)]),  # overlap 100x75: 3/4, 3/5
    **{k: ([[]], []) for k in "ghijkl"},  # six images empty in truth and prediction
}
DICE = {"a": 1.0, "b": 2 / 3, "c": 0.0, "d": 0.0, "e": 0.5, "f": 0.75}
IOU = {"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.0, "e": 1 / 3, "f": 0.6}
IDS = {k: _image_id(n) for n, k in enumerate(CASES)}


@pytest.fixture(scope="module")
def siim(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``train-rle.csv`` (ground truth) and ``submission.csv`` (predictions) of the 12 images."""
    root = tmp_path_factory.mktemp("siim")
    truth = ["ImageId, EncodedPixels"] + [f"{IDS[k]}, {_rle(r)}" for k, (rows, _) in CASES.items() for r in rows]
    pred = ["ImageId,EncodedPixels"] + [f"{IDS[k]},{_rle(p)}" for k, (_, p) in CASES.items()]
    (root / "train-rle.csv").write_text("\n".join(truth) + "\n", encoding="utf-8")
    (root / "submission.csv").write_text("\n".join(pred) + "\n", encoding="utf-8")
    return root / "train-rle.csv", root / "submission.csv"


def test_fixture_is_the_published_layout(siim):
    gt, sub = siim
    lines = gt.read_text().splitlines()
    assert lines[0] == "ImageId, EncodedPixels" and len(lines) == 1 + 13  # image b has two rows
    assert lines[1] == f"{IDS['a']}, {100 * SIZE + 100} 100 " + " ".join(["924 100"] * 99)
    assert f"{IDS['g']}, -1" in lines and sub.read_text().splitlines()[0] == "ImageId,EncodedPixels"


def _dice_of(res: dict, key: str) -> float | None:
    rec = next(c for c in res["cases"] if c["case_id"] == IDS[key])
    return rec["metrics"]["pneumothorax"].get("dsc")


def test_default_leaves_empty_images_out(siim, tmp_path):
    run_task("seg", *siim, tmp_path / "out")
    res = results_doc(tmp_path / "out")
    assert res["config"]["xray"]["seg"]["empty_both"] == "nan"
    agg = res["aggregates"]
    assert agg[KEY]["value"] == pytest.approx(35 / 72, abs=1e-12)  # (1 + 2/3 + 0 + 0 + 1/2 + 3/4) / 6
    assert agg[KEY]["n_valid"] == 6 and agg[KEY]["n"] == 12
    assert agg["xray/seg/miou"]["value"] == pytest.approx((1 + 0.5 + 1 / 3 + 0.6) / 6, abs=1e-12)
    assert {k: _dice_of(res, k) for k in DICE} == pytest.approx(DICE, abs=1e-12)
    assert all(_dice_of(res, k) is None for k in "ghijkl")


def test_perfect_gives_kaggles_mean_over_every_image(siim, tmp_path):
    run_task("seg", *siim, tmp_path / "out", "--set", "xray.seg.empty_both=perfect")
    res = results_doc(tmp_path / "out")
    assert res["config"]["xray"]["seg"]["empty_both"] == "perfect"
    agg = res["aggregates"]
    kaggle = (sum(DICE.values()) + 6 * 1.0) / 12  # Dice 1 for each of the six empty/empty images
    assert kaggle == pytest.approx(107 / 144, abs=1e-15)
    assert agg[KEY]["value"] == pytest.approx(kaggle, abs=1e-12)
    assert agg[KEY]["n_valid"] == 12
    assert agg["xray/seg/miou"]["value"] == pytest.approx((sum(IOU.values()) + 6) / 12, abs=1e-12)
    assert all(_dice_of(res, k) == 1.0 for k in "ghijkl")
    assert {k: _dice_of(res, k) for k in DICE} == pytest.approx(DICE, abs=1e-12)  # the others unchanged


def test_the_gate_does_not_pair_the_two_conventions(siim, tmp_path):
    run_task("seg", *siim, tmp_path / "nan")
    run_task("seg", *siim, tmp_path / "perfect", "--set", "xray.seg.empty_both=perfect")
    cand, base = read_results(tmp_path / "perfect"), read_results(tmp_path / "nan")
    problems = pairing_problems(cand, base, unit("xray/seg").primary.protocol)
    assert problems == [
        'protocol config differs: xray.seg.empty_both is "perfect" in the candidate, "nan" in the baseline; '
        "re-evaluate with the same config"
    ]


def test_label_maps_follow_the_same_rule(tmp_path):
    """The generic layout (a label map per image): class 2 is absent from image x in both maps."""
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    t = np.zeros((8, 8), np.uint8)
    t[:4, :4] = 1  # 16 pixels of class 1
    p = t.copy()
    p[:4, :2] = 0  # 8 of them predicted: Dice 2*8/24 = 2/3
    Image.fromarray(t).save(gt / "x.png")
    Image.fromarray(p).save(pred / "x.png")
    t2 = np.full((8, 8), 2, np.uint8)
    Image.fromarray(t2).save(gt / "y.png")  # class 2 everywhere, class 1 absent from both: Dice 1 / NaN
    Image.fromarray(t2).save(pred / "y.png")
    names = tmp_path / "names.csv"
    names.write_text("id,name\n1,lung\n2,heart\n", encoding="utf-8")
    default = run_task("seg", gt, pred, tmp_path / "o1", "--label-names", str(names))
    perfect = run_task(
        "seg", gt, pred, tmp_path / "o2", "--label-names", str(names), "--set", "xray.seg.empty_both=perfect"
    )
    by_class = "xray/seg/dsc/by_class/"
    assert default["aggregates"][by_class + "lung"]["value"] == pytest.approx(2 / 3, abs=1e-12)
    assert default["aggregates"][by_class + "heart"]["value"] == pytest.approx(1.0, abs=1e-12)
    assert perfect["aggregates"][by_class + "lung"]["value"] == pytest.approx((2 / 3 + 1) / 2, abs=1e-12)
    assert perfect["aggregates"][by_class + "heart"]["value"] == pytest.approx(1.0, abs=1e-12)
    assert (
        perfect["aggregates"][by_class + "heart"]["n_valid"] == 2
        and default["aggregates"][by_class + "heart"]["n_valid"] == 1
    )
