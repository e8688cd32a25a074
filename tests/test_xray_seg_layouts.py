"""``xray/seg`` native layouts (issue 21): overlapping classes, each scored on its own binary masks.

Every fixture is written here in the published layout (file names, JSON keys, CSV headers with their spaces,
RLE strings); the values are checked against direct implementations: numpy Dice on independently decoded
masks, the SIIM-ACR ``rle2mask`` definition written out, a crossing-number point-in-polygon test, PIL's
polygon fill.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests.results_doc import results_doc
from tests.xray_cli import fail_line, run_task
from trackeval.errors import InputError
from trackeval.io.images import load_npy
from trackeval.io.polygons import fill_polygon
from trackeval.io.rle import decode_relative_rle

PREFIX = "xray/seg"


def _dice(t: np.ndarray, p: np.ndarray) -> float:
    """Direct Dice of two boolean masks (NaN when both are empty)."""
    denom = int(t.sum()) + int(p.sum())
    return np.nan if denom == 0 else 2.0 * int((t & p).sum()) / denom


def _iou(t: np.ndarray, p: np.ndarray) -> float:
    union = int((t | p).sum())
    return np.nan if union == 0 else int((t & p).sum()) / union


def _case_metric(res: dict, case: str, cls: str, metric: str = "dsc") -> float | None:
    rec = next(c for c in res["cases"] if c["case_id"] == case)
    return rec["metrics"][cls].get(metric)


def _check_aggregates(res: dict, truth: dict[str, np.ndarray], pred: dict[str, np.ndarray], classes: list[str]):
    """Per-class means over images of direct Dice / IoU, and the means over classes, equal the results."""
    dsc = {c: np.nanmean([_dice(truth[i][k], pred[i][k]) for i in truth]) for k, c in enumerate(classes)}
    iou = {c: np.nanmean([_iou(truth[i][k], pred[i][k]) for i in truth]) for k, c in enumerate(classes)}
    for c in classes:
        assert res["aggregates"][f"{PREFIX}/dsc/by_class/{c}"]["value"] == pytest.approx(dsc[c], abs=1e-12)
        assert res["aggregates"][f"{PREFIX}/miou/by_class/{c}"]["value"] == pytest.approx(iou[c], abs=1e-12)
    assert res["aggregates"][f"{PREFIX}/dsc"]["value"] == pytest.approx(np.mean(list(dsc.values())), abs=1e-12)
    assert res["aggregates"][f"{PREFIX}/miou"]["value"] == pytest.approx(np.mean(list(iou.values())), abs=1e-12)


def _blobs(rng: np.random.Generator, shape: tuple[int, int], n: int) -> np.ndarray:
    """``n`` overlapping random rectangles as a ``(n, H, W)`` bool stack."""
    out = np.zeros((n, *shape), dtype=bool)
    for k in range(n):
        y0, x0 = rng.integers(0, shape[0] // 2), rng.integers(0, shape[1] // 2)
        out[k, y0 : y0 + rng.integers(2, shape[0] // 2), x0 : x0 + rng.integers(2, shape[1] // 2)] = True
    return out


def _jitter(rng: np.random.Generator, stack: np.ndarray, p: float = 0.1) -> np.ndarray:
    return stack ^ (rng.uniform(size=stack.shape) < p)


# ---------------------------------------------------------------- SIIM-ACR relative RLE


def _rle2mask_definition(rle: str, width: int, height: int) -> np.ndarray:
    """The SIIM-ACR ``mask_functions.rle2mask`` definition, written out: relative starts, 255 fill,
    ``reshape(width, height)``; the callers transpose it (``rle2mask(...).T``)."""
    mask = np.zeros(width * height)
    array = [int(x) for x in rle.split()]
    current = 0
    for start, length in zip(array[0::2], array[1::2], strict=True):
        current += start
        mask[current : current + length] = 255
        current += length
    return mask.reshape(width, height)


def _mask2rle_relative(mask: np.ndarray) -> str:
    """A (height, width) mask as the challenge's relative column-major RLE (independent vectorised encoder)."""
    flat = np.concatenate([[0], mask.T.ravel().astype(np.int8), [0]])
    change = np.flatnonzero(np.diff(flat))
    starts, ends = change[0::2], change[1::2]
    gaps = starts - np.concatenate([[0], ends[:-1]])
    return " ".join(f"{g} {e - s}" for g, s, e in zip(gaps, starts, ends, strict=True)) or "-1"


@pytest.mark.parametrize(
    "rle, shape",
    [("0 1", (3, 2)), ("1 2 1 1", (3, 2)), ("5 1", (3, 2)), ("0 6", (3, 2)), ("2 0 1 2", (2, 4)), ("-1", (2, 2))],
)
def test_rle_decoder_matches_the_published_definition_on_hand_cases(rle, shape):
    height, width = shape
    ours = decode_relative_rle(f" {rle}", shape, file="x")  # the CSV's leading space is part of the value
    ref = _rle2mask_definition(rle if rle != "-1" else "", width, height).T == 255
    assert ours.shape == shape and np.array_equal(ours, ref)


def test_rle_decoder_hand_case_is_column_major():
    # 3 rows x 2 columns: offset 1 is row 1 of column 0; "1 2 1 1" covers flat pixels 1, 2 and 4
    assert decode_relative_rle("1 2 1 1", (3, 2), file="x").astype(int).tolist() == [[0, 0], [1, 1], [1, 0]]


def test_rle_round_trip_on_1024_masks():
    rng = np.random.default_rng(3)
    mask = _blobs(rng, (1024, 1024), 3).any(axis=0)
    rle = _mask2rle_relative(mask)
    assert np.array_equal(decode_relative_rle(rle, (1024, 1024), file="x"), mask)
    assert np.array_equal(_rle2mask_definition(rle, 1024, 1024).T == 255, mask)


@pytest.mark.parametrize(
    "rle, needle",
    [("1 2 3", "odd number"), ("1 x", "'x'"), ("-3 2", "'-3'"), ("1048570 10", "beyond the 1024x1024")],
)
def test_rle_decoder_refuses_bad_encodings(rle, needle):
    with pytest.raises(InputError, match="field=EncodedPixels") as exc:
        decode_relative_rle(rle, (1024, 1024), file="train-rle.csv", case_id="c")
    assert needle in str(exc.value) and "case=c" in str(exc.value)


def _write_siim(path: Path, header: list[str], rows: list[tuple[str, str]], space: bool) -> Path:
    # train-rle.csv writes ", " between the fields (header and values); a submission writes ","
    sep = ", " if space else ","
    path.write_text("\n".join([sep.join(header), *(f"{i}{sep}{v}" for i, v in rows)]) + "\n", encoding="utf-8")
    return path


SIIM_IDS = (
    "1.2.276.0.7230010.3.1.4.8323329.5597.1517875188.959090",
    "1.2.276.0.7230010.3.1.4.8323329.12515.1517875239.501137",
    "1.2.276.0.7230010.3.1.4.8323329.4904.1517875185.355709",
)


def test_siim_truth_and_submission(tmp_path):
    rng = np.random.default_rng(0)
    parts = {SIIM_IDS[0]: _blobs(rng, (1024, 1024), 2), SIIM_IDS[1]: np.zeros((1, 1024, 1024), bool)}
    parts[SIIM_IDS[2]] = _blobs(rng, (1024, 1024), 1)
    rows = [(cid, _mask2rle_relative(m)) for cid, stack in parts.items() for m in stack]  # 2 rows for image 0
    assert rows[2][1] == "-1"
    gt = _write_siim(tmp_path / "train-rle.csv", ["ImageId", "EncodedPixels"], rows, space=True)
    assert gt.read_text().startswith("ImageId, EncodedPixels\n1.2.276")
    truth = {cid: stack.any(axis=0)[None] for cid, stack in parts.items()}
    shifted = np.roll(truth[SIIM_IDS[0]], (13, -29), axis=(1, 2)) | _blobs(rng, (1024, 1024), 1)
    pred = {SIIM_IDS[0]: shifted, SIIM_IDS[1]: _blobs(rng, (1024, 1024), 1)}
    pred[SIIM_IDS[2]] = np.zeros((1, 1024, 1024), bool)
    sub = _write_siim(
        tmp_path / "submission.csv",
        ["ImageId", "EncodedPixels"],
        [(cid, _mask2rle_relative(m[0])) for cid, m in pred.items()],
        space=False,
    )
    run_task("seg", gt, sub, tmp_path / "out")
    res = results_doc(tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "siim-rle", "predictions": "siim-rle"}
    assert res["config"]["xray_run"]["classes"] == {"pneumothorax": "pneumothorax"}
    _check_aggregates(res, truth, pred, ["pneumothorax"])
    # image 0: the union of its two rows is the truth (a pixel in both rows counts once)
    assert _case_metric(res, SIIM_IDS[0], "pneumothorax") == pytest.approx(
        _dice(truth[SIIM_IDS[0]][0], pred[SIIM_IDS[0]][0]), abs=1e-12
    )
    assert _case_metric(res, SIIM_IDS[1], "pneumothorax") == 0.0  # false positive on an empty truth


def test_siim_bad_rle_is_one_line(tmp_path, capsys):
    gt = _write_siim(tmp_path / "train-rle.csv", ["ImageId", "EncodedPixels"], [(SIIM_IDS[0], "5 3 2")], True)
    sub = _write_siim(tmp_path / "sub.csv", ["ImageId", "EncodedPixels"], [(SIIM_IDS[0], "-1")], False)
    fail_line(capsys, "seg", gt, sub, tmp_path / "o", "odd number", f"case={SIIM_IDS[0]}", "field=EncodedPixels")


# ---------------------------------------------------------------- polygons (VinDr-RibCXR)


def _pnpoly(pts: np.ndarray, x: float, y: float) -> bool:
    """The classic crossing-number point-in-polygon test, one point at a time."""
    inside, j = False, len(pts) - 1
    for i in range(len(pts)):
        (xi, yi), (xj, yj) = pts[i], pts[j]
        if (yi > y) != (yj > y) and x < xi + (y - yi) * (xj - xi) / (yj - yi):
            inside = not inside
        j = i
    return inside


def _centre_mask(pts: np.ndarray, height: int, width: int) -> np.ndarray:
    return np.array([[_pnpoly(pts, i + 0.5, j + 0.5) for i in range(width)] for j in range(height)])


def _boundary_distance(pts: np.ndarray, x: float, y: float) -> float:
    a, b = pts, np.roll(pts, -1, axis=0)
    ab, ap = b - a, np.array([x, y]) - a
    t = np.clip((ap * ab).sum(axis=1) / np.maximum((ab * ab).sum(axis=1), 1e-12), 0, 1)
    return float(np.min(np.hypot(*(ap - t[:, None] * ab).T)))


@pytest.mark.parametrize("kind", ["float", "integer", "half"])
def test_polygon_fill_is_the_pixel_centre_rule(kind):
    """Exactly the pixels whose centre passes the crossing test, edges included (integer and half-integer
    vertices put centres exactly on edges)."""
    rng = np.random.default_rng({"float": 1, "integer": 2, "half": 3}[kind])
    for _ in range(20):
        pts = rng.uniform(-4, 30, size=(int(rng.integers(3, 10)), 2))
        pts = {"float": pts, "integer": np.round(pts), "half": np.round(pts) + 0.5}[kind]
        assert np.array_equal(fill_polygon(pts, 24, 21), _centre_mask(pts, 24, 21))


def test_polygon_fill_against_pil_differs_only_on_the_outline():
    """PIL's ``ImageDraw.polygon`` (vertices snapped to its pixel grid, outline painted) agrees everywhere but
    near the boundary: every differing pixel's centre is within 1.5 pixels of it, and PIL covers more."""
    rng = np.random.default_rng(5)
    n_diff = ours_total = pil_total = 0
    for _ in range(60):
        n = int(rng.integers(3, 12))
        centre, angles = rng.uniform(15, 45, size=2), np.sort(rng.uniform(0, 2 * np.pi, size=n))
        pts = centre + rng.uniform(2, 14, size=(n, 1)) * np.c_[np.cos(angles), np.sin(angles)]
        ours = fill_polygon(pts, 60, 60)
        img = Image.new("L", (60, 60), 0)
        ImageDraw.Draw(img).polygon([(float(x), float(y)) for x, y in pts], fill=1, outline=1)
        pil = np.asarray(img).astype(bool)
        diff = np.argwhere(ours != pil)
        assert all(_boundary_distance(pts, c + 0.5, r + 0.5) <= 1.5 for r, c in diff)
        n_diff, ours_total, pil_total = n_diff + len(diff), ours_total + ours.sum(), pil_total + pil.sum()
    assert n_diff > 0 and ours_total < pil_total  # the rules do differ, on the outline PIL paints


def _vindr_polygon(rng: np.random.Generator, width: int, height: int) -> list[dict[str, float]]:
    centre = rng.uniform([0.3 * width, 0.3 * height], [0.7 * width, 0.7 * height])
    angles = np.sort(rng.uniform(0, 2 * np.pi, size=int(rng.integers(4, 12))))
    radius = rng.uniform(3, min(width, height) / 3, size=(len(angles), 1))
    pts = centre + radius * np.c_[np.cos(angles), np.sin(angles)]
    return [{"x": round(float(x), 3), "y": round(float(y), 3)} for x, y in pts]


RIBS = [f"R{i}" for i in range(1, 11)] + [f"L{i}" for i in range(1, 11)]


def _vindr_json(path: Path, images: list[str], ribs: dict[str, list]) -> Path:
    """The released layout, as pandas ``to_json`` writes a frame: ``{column: {"<row>": value}}``."""
    table = {"img": {str(i): img for i, img in enumerate(images)}}
    table.update({r: {str(i): v for i, v in enumerate(ribs[r])} for r in RIBS})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table), encoding="utf-8")
    return path


def test_vindr_ribcxr_polygons(tmp_path):
    rng = np.random.default_rng(7)
    sizes = {"VinDr_RibCXR_test_000": (40, 30), "VinDr_RibCXR_test_001": (36, 44)}  # (width, height)
    images = [f"data/test/img/{name}.png" for name in sizes]
    for name, (w, h) in sizes.items():  # released as Data/test/img/...; the JSON says data/test/img/...
        (tmp_path / "Data" / "test" / "img").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.zeros((h, w), np.uint8)).save(tmp_path / "Data" / "test" / "img" / f"{name}.png")
    truth_ribs = {r: [_vindr_polygon(rng, w, h) for w, h in sizes.values()] for r in RIBS}
    truth_ribs["L10"][1] = "None"
    pred_ribs = {r: [_vindr_polygon(rng, w, h) for w, h in sizes.values()] for r in RIBS}
    pred_ribs["R1"] = [truth_ribs["R1"][0], "None"]
    gt = _vindr_json(tmp_path / "Data" / "Vindr_RibCXR_test_mask.json", images, truth_ribs)
    pred = _vindr_json(tmp_path / "pred" / "predictions.json", images, pred_ribs)
    run_task("seg", gt, pred, tmp_path / "out")
    res = results_doc(tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "vindr-ribcxr", "predictions": "vindr-ribcxr"}
    classes = [r.lower() for r in RIBS]
    assert res["config"]["xray_run"]["classes"] == {r.lower(): r for r in RIBS}

    def stack(ribs: dict[str, list], i: int, w: int, h: int) -> np.ndarray:
        return np.stack(
            [
                np.zeros((h, w), bool)
                if ribs[r][i] == "None"
                else _centre_mask(np.array([[p["x"], p["y"]] for p in ribs[r][i]]), h, w)
                for r in RIBS
            ]
        )

    names = list(sizes)
    truth = {n: stack(truth_ribs, i, *sizes[n]) for i, n in enumerate(names)}
    preds = {n: stack(pred_ribs, i, *sizes[n]) for i, n in enumerate(names)}
    _check_aggregates(res, truth, preds, classes)
    assert _case_metric(res, names[0], "r1") == 1.0
    assert _case_metric(res, names[1], "l10") == 0.0  # empty truth, a predicted rib


# ---------------------------------------------------------------- PAX-Ray (.npy stacks + paxray.json)


PAX_NAMES = {"0": "lungs", "1": "left lung", "2": "right lung", "3": "heart"}


def _paxray(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path / "paxray_dataset"
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    truth, entries = {}, {"train": [], "val": [], "test": []}
    for n, split in enumerate(["train", "test", "test", "val"]):
        name = f"PAX_{n:03d}"
        stack = _blobs(rng, (32, 28), 4)
        stack[0] = stack[1] | stack[2]  # "lungs" overlaps both lungs: no argmax can represent it
        np.save(root / "labels" / f"{name}.npy", stack)
        entries[split].append({"image": f"images/{name}.png", "target": f"labels/{name}.npy"})
        if split == "test":
            truth[name] = stack
    entries["test"].append({"image": "images/PAX_unlabelled.png", "target": None})
    (root / "paxray.json").write_text(json.dumps({"label_dict": PAX_NAMES, **entries}), encoding="utf-8")
    return root, truth


def test_paxray_overlapping_classes_are_scored_independently(tmp_path):
    rng = np.random.default_rng(11)
    root, truth = _paxray(tmp_path, rng)
    pred_dir = tmp_path / "pred"
    pred_dir.mkdir()
    preds = {name: _jitter(rng, stack) for name, stack in truth.items()}
    for name, stack in preds.items():
        np.save(pred_dir / f"{name}.npy", stack)  # bool, as the PAX-Ray inference.py writes
    run_task("seg", root, pred_dir, tmp_path / "out")
    res = results_doc(tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "paxray", "predictions": "paxray"}
    assert res["config"]["xray_run"]["split"] == "test"
    classes = ["lungs", "left_lung", "right_lung", "heart"]
    assert res["config"]["xray_run"]["classes"] == dict(zip(classes, PAX_NAMES.values(), strict=True))
    assert [c["case_id"] for c in res["cases"]] == list(truth)  # the test split, labelled entries only
    _check_aggregates(res, truth, preds, classes)
    # the prediction equal to the truth scores 1.0 on every class, the overlap included
    for name, stack in truth.items():
        np.save(pred_dir / f"{name}.npy", stack.astype(np.uint8))
    res = run_task("seg", root / "paxray.json", pred_dir, tmp_path / "out2")
    assert all(res["aggregates"][f"{PREFIX}/dsc/by_class/{c}"]["value"] == 1.0 for c in classes)


def test_paxray_refuses_pickles_and_wrong_channels(tmp_path, capsys):
    rng = np.random.default_rng(12)
    root, truth = _paxray(tmp_path, rng)
    pred_dir = tmp_path / "pred"
    pred_dir.mkdir()
    first, second = list(truth)
    np.save(pred_dir / f"{first}.npy", truth[first][:3])
    np.save(pred_dir / f"{second}.npy", truth[second])
    fail_line(capsys, "seg", root, pred_dir, tmp_path / "o1", "3 class channel(s), expected 4", f"case={first}")
    np.save(pred_dir / f"{first}.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    fail_line(capsys, "seg", root, pred_dir, tmp_path / "o2", "not a readable .npy", f"case={first}", "field=npy")
    np.save(pred_dir / f"{first}.npy", truth[first].astype(np.uint8) * 2)
    fail_line(capsys, "seg", root, pred_dir, tmp_path / "o3", "not 0 or 1", "field=values")


def test_load_npy_checks_the_declared_size_first(tmp_path, monkeypatch):
    np.save(tmp_path / "a.npy", np.zeros((4, 8, 8), bool))
    monkeypatch.setenv("TRACKEVAL_MAX_VOXELS", "100")
    with pytest.raises(InputError, match="exceeds the limit"):
        load_npy((tmp_path / "a.npy").read_bytes(), file="a.npy")


# ---------------------------------------------------------------- JSRT / SCR (GIF per structure)

SCR = ["heart", "left clavicle", "left lung", "right clavicle", "right lung"]


def _scr(root: Path, masks: dict[str, np.ndarray], folder_names: list[str] = SCR, suffix: str = ".gif") -> Path:
    for k, structure in enumerate(folder_names):
        (root / structure).mkdir(parents=True, exist_ok=True)
        for name, stack in masks.items():
            Image.fromarray(stack[k].astype(np.uint8) * 255).save(root / structure / f"{name}{suffix}")
    return root


def _scr_stack(rng: np.random.Generator) -> np.ndarray:
    stack = _blobs(rng, (1024, 1024), 5)
    stack[1] = np.roll(stack[2], 40, axis=0) | stack[1]  # a clavicle overlapping the left lung
    stack[1, :64, :] = stack[2, :64, :] = True
    return stack


def test_jsrt_scr_gif_masks(tmp_path):
    rng = np.random.default_rng(21)
    truth = {"JPCLN001": _scr_stack(rng), "JPCNN010": _scr_stack(rng)}
    assert (truth["JPCLN001"][1] & truth["JPCLN001"][2]).any()
    gt_fold = tmp_path / "scratch" / "fold1"
    _scr(gt_fold / "masks", truth)
    assert Image.open(gt_fold / "masks" / "heart" / "JPCLN001.gif").size == (1024, 1024)
    preds = {name: _jitter(rng, stack, 0.02) for name, stack in truth.items()}
    pred = _scr(tmp_path / "pred", preds)
    res = run_task("seg", gt_fold, pred, tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "jsrt-scr", "predictions": "jsrt-scr"}
    classes = ["heart", "left_clavicle", "left_lung", "right_clavicle", "right_lung"]
    assert res["config"]["xray_run"]["classes"] == dict(zip(classes, SCR, strict=True))
    _check_aggregates(res, truth, preds, classes)


# ---------------------------------------------------------------- binary folders, and label maps as one mechanism


def test_binary_folders_equal_the_label_map_they_split(tmp_path):
    """A label map scored as such and split into one binary folder per id give the same numbers."""
    rng = np.random.default_rng(31)
    maps_t = {f"img{i}": rng.integers(0, 4, size=(20, 24)).astype(np.uint8) for i in range(3)}
    maps_p = {
        k: np.where(rng.uniform(size=v.shape) < 0.2, rng.integers(0, 4, size=v.shape), v) for k, v in maps_t.items()
    }
    maps_p["img2"][maps_p["img2"] == 3] = 0
    for side, maps in (("gt", maps_t), ("pred", maps_p)):
        (tmp_path / side).mkdir()
        for name, m in maps.items():
            Image.fromarray(m.astype(np.uint8)).save(tmp_path / side / f"{name}.png")
        _scr(tmp_path / f"{side}_bin", {n: np.stack([m == i for i in (1, 2, 3)]) for n, m in maps.items()},
             ["a", "b", "c"], ".png")  # fmt: skip
    names = tmp_path / "names.csv"
    names.write_text("id,name\n1,a\n2,b\n3,c\n", encoding="utf-8")
    run_task("seg", tmp_path / "gt", tmp_path / "pred", tmp_path / "o1", "--label-names", str(names))
    label_res = results_doc(tmp_path / "o1")
    run_task("seg", tmp_path / "gt_bin", tmp_path / "pred_bin", tmp_path / "o2")
    bin_res = results_doc(tmp_path / "o2")
    assert label_res["config"]["format"] == {"ground_truth": "generic", "predictions": "generic"}
    assert bin_res["config"]["format"] == {"ground_truth": "binary-folders", "predictions": "binary-folders"}
    assert label_res["aggregates"] == bin_res["aggregates"]
    assert [c["metrics"] for c in label_res["cases"]] == [c["metrics"] for c in bin_res["cases"]]
    truth = {n: np.stack([m == i for i in (1, 2, 3)]) for n, m in maps_t.items()}
    _check_aggregates(
        bin_res, truth, {n: np.stack([m == i for i in (1, 2, 3)]) for n, m in maps_p.items()}, list("abc")
    )
    assert bin_res["data"]["ground_truth_digest"] != label_res["data"]["ground_truth_digest"]


def test_binary_folders_missing_prediction_policy_and_missing_class(tmp_path, capsys):
    rng = np.random.default_rng(32)
    truth = {f"c{i}": _blobs(rng, (10, 12), 2) for i in range(3)}
    gt = _scr(tmp_path / "gt", truth, ["lung", "heart"], ".png")
    pred = _scr(tmp_path / "pred", {k: truth[k] for k in ("c0", "c1")}, ["lung", "heart"], ".png")
    run_task("seg", gt, pred, tmp_path / "o1")
    res = results_doc(tmp_path / "o1")
    assert res["summary"]["n_missing_predictions"] == 1
    assert any("1/3 cases have no prediction: c2" in w for w in res["warnings"])
    assert _case_metric(res, "c2", "lung") == (0.0 if truth["c2"][0].any() else None)
    run_task("seg", gt, pred, tmp_path / "o2", "--set", "xray.seg.missing_prediction=exclude")
    res = results_doc(tmp_path / "o2")
    assert _case_metric(res, "c2", "lung") is None
    fail_line(capsys, "seg", gt, pred, tmp_path / "o3", "c2", extra=("--set", "xray.seg.missing_prediction=error"))
    (pred / "heart" / "c1.png").unlink()
    fail_line(capsys, "seg", gt, pred, tmp_path / "o4", "class folder 'heart' has no mask", "case=c1")


# ---------------------------------------------------------------- layout detection and --format


def test_unrecognised_truth_is_one_line_naming_the_layouts(tmp_path, capsys):
    gt = tmp_path / "labels.txt"
    gt.write_text("not a layout\n", encoding="utf-8")
    line = fail_line(capsys, "seg", gt, tmp_path, tmp_path / "o", "looks like none of the layouts tried", f"file={gt}")
    for name in ("paxray", "siim-rle", "vindr-ribcxr", "jsrt-scr", "binary-folders", "generic"):
        assert name in line
    csv_gt = tmp_path / "other.csv"
    with open(csv_gt, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["ImageId", "Mask"], ["a", "-1"]])
    fail_line(capsys, "seg", csv_gt, tmp_path, tmp_path / "o2", "looks like none of the layouts tried", "field=format")


def test_format_forces_the_truth_layout(tmp_path, capsys):
    rng = np.random.default_rng(41)
    truth = {"JPCLN002": _blobs(rng, (16, 16), 5)}
    gt = _scr(tmp_path / "masks", truth)
    pred = _scr(tmp_path / "pred", truth)
    told = run_task("seg", gt, pred, tmp_path / "o1")
    forced = run_task("seg", gt, pred, tmp_path / "o2", "--format", "binary-folders")
    assert told["config"]["format"]["ground_truth"] == "jsrt-scr"
    assert forced["config"]["format"] == {"ground_truth": "binary-folders", "predictions": "jsrt-scr"}
    assert told["aggregates"] == forced["aggregates"]
    assert told["data"]["ground_truth_digest"] != forced["data"]["ground_truth_digest"]
    fail_line(
        capsys, "seg", gt, pred, tmp_path / "o3", "unknown format 'nope'", "field=format", extra=("--format", "nope")
    )
    fail_line(capsys, "seg", gt, pred, tmp_path / "o4", "no class names", extra=("--format", "generic"))
    fail_line(capsys, "seg", gt, pred, tmp_path / "o5", "not a regular file", extra=("--format", "siim-rle"))


def test_predictions_layout_is_told_from_their_files(tmp_path, capsys):
    """SCR truth with predictions as binary PNG folders of the same classes, then as PAX-Ray-style stacks."""
    rng = np.random.default_rng(42)
    truth = {"JPCLN003": _blobs(rng, (16, 16), 5), "JPCLN004": _blobs(rng, (16, 16), 5)}
    gt = _scr(tmp_path / "fold2" / "masks", truth)
    preds = {k: _jitter(rng, v) for k, v in truth.items()}
    png = _scr(tmp_path / "png", preds, [s.replace(" ", "_") for s in SCR], ".png")
    res = run_task("seg", tmp_path / "fold2", png, tmp_path / "o1")
    assert res["config"]["format"] == {"ground_truth": "jsrt-scr", "predictions": "binary-folders"}
    classes = ["heart", "left_clavicle", "left_lung", "right_clavicle", "right_lung"]
    _check_aggregates(res, truth, preds, classes)
    stacks = tmp_path / "npy"
    stacks.mkdir()
    for k, v in preds.items():
        np.save(stacks / f"{k}.npy", v)
    res = run_task("seg", gt, stacks, tmp_path / "o2")
    assert res["config"]["format"] == {"ground_truth": "jsrt-scr", "predictions": "paxray"}
    _check_aggregates(res, truth, preds, classes)
    fail_line(capsys, "seg", gt, tmp_path / "nothing.txt", tmp_path / "o3", "the predictions looks like none")
