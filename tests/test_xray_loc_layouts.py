"""``xray/loc`` native layouts (issue 21): YOLO (Roboflow bone-fracture export, ``yolo val --save-txt
--save-conf`` predictions) and MS-CXR CSVs, checked against pycocotools on the converted boxes, against the
generic COCO path on hand-converted files, and against hand-computed grounding IoUs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from tests.xray_cli import fail_line, run_task
from trackeval.metrics.box_union import union_iou

#: the 7 classes of the Roboflow / Kaggle "bone fracture detection" data.yaml
BONE_NAMES = [
    "elbow positive",
    "fingers positive",
    "forearm fracture",
    "humerus fracture",
    "humerus",
    "shoulder fracture",
    "wrist positive",
]
DATA_YAML = (
    "train: ../train/images\nval: ../valid/images\ntest: ../test/images\n\nnc: 7\n"
    "names: ['elbow positive', 'fingers positive', 'forearm fracture', 'humerus fracture', 'humerus', "
    "'shoulder fracture', 'wrist positive']\n"
)
MS_CXR_HEADER = [
    "dicom_id",
    "category_name",
    "label_text",
    "path",
    "x",
    "y",
    "w",
    "h",
    "image_width",
    "image_height",
    "split",
]
SIZES = {"img_a": (64, 48), "img_b": (80, 120), "img_c": (50, 50), "img_d": (96, 72)}


def _agg(res: dict, key: str) -> float:
    return res["aggregates"][key]["value"]


# ---------------------------------------------------------------- YOLO fixture


def _labels(rng: np.random.Generator) -> dict[str, list[tuple[int, float, float, float, float]]]:
    """Normalised truth boxes ``(cls, xc, yc, w, h)`` per image; classes 0, 2 and 6 only."""
    out = {}
    for stem in SIZES:
        rows = []
        for _ in range(int(rng.integers(1, 4))):
            w, h = rng.uniform(0.1, 0.4, 2)
            xc, yc = rng.uniform(w / 2, 1 - w / 2), rng.uniform(h / 2, 1 - h / 2)
            rows.append((int(rng.choice([0, 2, 6])), float(xc), float(yc), float(w), float(h)))
        out[stem] = rows
    return out


def _detections(rng, labels) -> dict[str, list[tuple[int, float, float, float, float, float]]]:
    """Jittered copies of the truth (some with a wrong class) plus a false positive per image, with scores."""
    out = {}
    for stem, rows in labels.items():
        dets = []
        for cls, xc, yc, w, h in rows:
            j = rng.normal(0, 0.03, 4)
            c = cls if rng.random() > 0.2 else 4
            # clipped to the image, as Ultralytics writes them (ops.clip_boxes): a box never leaves its image
            x0, x1 = np.clip([xc + j[0] - abs(w + j[2]) / 2, xc + j[0] + abs(w + j[2]) / 2], 0, 1)
            y0, y1 = np.clip([yc + j[1] - abs(h + j[3]) / 2, yc + j[1] + abs(h + j[3]) / 2], 0, 1)
            box = ((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0)
            dets.append((c, *(float(v) for v in box), float(rng.uniform(0.2, 1))))
        dets.append((int(rng.choice([0, 2])), 0.5, 0.5, 0.2, 0.2, float(rng.uniform(0, 0.6))))
        out[stem] = dets
    return out


def _write_yolo(root: Path, labels, dets, *, images: bool = True) -> tuple[Path, Path]:
    """A Roboflow export (``data.yaml``, ``test/images``, ``test/labels``) and a ``--save-txt --save-conf``
    labels folder; ``img_d`` has no label file (a background image)."""
    root.mkdir()
    (root / "data.yaml").write_text(DATA_YAML)
    for split in ("train", "valid", "test"):
        (root / split / "labels").mkdir(parents=True)
        if images:
            (root / split / "images").mkdir()
    for stem, (w, h) in SIZES.items():
        if images:
            suffix = ".jpg" if stem != "img_b" else ".png"
            Image.new("L", (w, h), 128).save(root / "test" / "images" / f"{stem}{suffix}")
        if stem != "img_d":
            text = "".join(f"{c} {xc:g} {yc:g} {bw:g} {bh:g}\n" for c, xc, yc, bw, bh in labels[stem])
            (root / "test" / "labels" / f"{stem}.txt").write_text(text)
    pred = root.parent / "runs" / "detect" / "val" / "labels"
    pred.mkdir(parents=True)
    for stem, rows in dets.items():
        text = "".join(f"{c} {xc:g} {yc:g} {bw:g} {bh:g} {s:g}\n" for c, xc, yc, bw, bh, s in rows)
        (pred / f"{stem}.txt").write_text(text)
    return root / "data.yaml", pred


def _read_back(path: Path) -> list[list[float]]:
    return [[float(v) for v in line.split()] for line in path.read_text().splitlines() if line.strip()]


def _coco_files(root: Path, gt_dir: Path, pred_dir: Path, tmp: Path) -> tuple[Path, Path]:
    """The YOLO files converted by hand to COCO (pixels: x = (xc - w / 2) * width ...), as written on disk."""

    def px(v, size):
        return [(v[1] - v[3] / 2) * size[0], (v[2] - v[4] / 2) * size[1], v[3] * size[0], v[4] * size[1]]

    anns, dets = [], []
    for stem, size in SIZES.items():
        f = gt_dir / f"{stem}.txt"
        for v in _read_back(f) if f.exists() else []:
            anns.append({"id": len(anns) + 1, "image_id": stem, "category_id": int(v[0]), "bbox": px(v, size)})
        for v in _read_back(pred_dir / f"{stem}.txt"):
            dets.append({"image_id": stem, "category_id": int(v[0]), "bbox": px(v, size), "score": v[5]})
    gt = {
        "images": [{"id": s, "width": w, "height": h} for s, (w, h) in SIZES.items()],
        "categories": [{"id": i, "name": n} for i, n in enumerate(BONE_NAMES)],
        "annotations": anns,
    }
    (tmp / "gt.json").write_text(json.dumps(gt))
    (tmp / "det.json").write_text(json.dumps(dets))
    return tmp / "gt.json", tmp / "det.json"


def _pycoco_ap50(gt_file: Path, det_file: Path) -> dict[int, float]:
    """pycocotools COCOeval AP at IoU 0.5 (area all, maxDets 100) per category with truth boxes."""
    doc = json.loads(gt_file.read_text())
    for a in doc["annotations"]:
        a["area"], a["iscrowd"] = a["bbox"][2] * a["bbox"][3], 0
    coco = COCO()
    coco.dataset = doc
    coco.createIndex()
    ev = COCOeval(coco, coco.loadRes(json.loads(det_file.read_text())), "bbox")
    ev.params.iouThrs = np.array([0.5])
    ev.params.maxDets = [100]
    ev.params.areaRng, ev.params.areaRngLbl = [[0, 1e10]], ["all"]
    ev.evaluate()
    ev.accumulate()
    out = {}
    for k, cat in enumerate(ev.params.catIds):
        p = ev.eval["precision"][0, :, k, 0, 0]
        if (p > -1).any():
            out[cat] = float(p[p > -1].mean())
    return out


@pytest.fixture
def yolo(tmp_path):
    rng = np.random.default_rng(7)
    labels = _labels(rng)
    data_yaml, pred = _write_yolo(tmp_path / "bone", labels, _detections(rng, labels))
    return data_yaml, pred


def test_yolo_matches_pycocotools_and_the_generic_path(yolo, tmp_path):
    data_yaml, pred = yolo
    res = run_task("loc", data_yaml, pred, tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "yolo", "predictions": "yolo"}
    gt_json, det_json = _coco_files(data_yaml.parent, data_yaml.parent / "test" / "labels", pred, tmp_path)
    expected = _pycoco_ap50(gt_json, det_json)
    assert set(expected) == {0, 2, 6}
    for cat, ap in expected.items():
        token = BONE_NAMES[cat].replace(" ", "_")
        assert _agg(res, f"xray/loc/map_50/by_category/{token}") == pytest.approx(ap, abs=1e-12)
    assert _agg(res, "xray/loc/map_50") == pytest.approx(np.mean(list(expected.values())), abs=1e-12)
    assert 0.0 < _agg(res, "xray/loc/map_50") < 1.0  # a real mix of hits, misses and false positives
    generic = run_task("loc", gt_json, det_json, tmp_path / "generic")
    assert generic["config"]["format"] == {"ground_truth": "generic", "predictions": "generic"}
    for key, agg in generic["aggregates"].items():
        assert _agg(res, key) == pytest.approx(agg["value"], abs=1e-12), key
    assert res["summary"]["n_images"] == 4 and res["summary"]["n_gt_boxes"] == generic["summary"]["n_gt_boxes"]
    assert res["data"]["ground_truth_digest"] != generic["data"]["ground_truth_digest"]
    # COCO results against the YOLO truth (image_id = stem, category_id = class index): the same numbers
    as_coco = run_task("loc", data_yaml, det_json, tmp_path / "as_coco")
    assert as_coco["config"]["format"] == {"ground_truth": "yolo", "predictions": "generic"}
    assert _agg(as_coco, "xray/loc/map_50") == pytest.approx(_agg(res, "xray/loc/map_50"), abs=1e-12)


def test_yolo_sizes_from_headers_without_decoding_and_from_sizes_csv(yolo, tmp_path, monkeypatch):
    data_yaml, pred = yolo

    def no_decoding(self):
        raise AssertionError("pixels decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    from_headers = run_task("loc", data_yaml, pred, tmp_path / "h")
    monkeypatch.undo()
    # the same split without images: sizes.csv beside images/ (file names or stems), and the split folder
    test = data_yaml.parent / "test"
    for f in (test / "images").iterdir():
        f.unlink()
    (test / "images").rmdir()
    rows = [[f"{s}.jpg" if i % 2 else s, w, h] for i, (s, (w, h)) in enumerate(SIZES.items())]
    with open(test / "sizes.csv", "w", newline="") as f:
        csv.writer(f).writerows([["image", "width", "height"], *rows])
    from_csv = run_task("loc", test, pred, tmp_path / "c")
    assert from_csv["config"]["format"]["ground_truth"] == "yolo"
    assert from_csv["aggregates"] == from_headers["aggregates"]
    # pixel sizes matter for the boxes recorded, not for IoU: twice the size gives the same mAP
    rows = [[s, 2 * w, 2 * h] for s, (w, h) in SIZES.items()]
    with open(test / "sizes.csv", "w", newline="") as f:
        csv.writer(f).writerows([["image", "width", "height"], *rows])
    doubled = run_task("loc", test, pred, tmp_path / "d")
    assert _agg(doubled, "xray/loc/map_50") == pytest.approx(_agg(from_csv, "xray/loc/map_50"), abs=1e-12)
    assert doubled["data"]["ground_truth_digest"] != from_csv["data"]["ground_truth_digest"]


def test_yolo_split_key_polygons_and_hand_case(tmp_path, capsys):
    root = tmp_path / "ds"
    for split in ("valid", "test"):
        (root / split / "images").mkdir(parents=True)
        (root / split / "labels").mkdir()
        Image.new("L", (100, 50), 0).save(root / split / "images" / "x.png")
    (root / "data.yaml").write_text("path: .\ntrain: train/images\nval: valid/images\nnames:\n  0: fracture\n")
    # a box and a polygon (its bounding box is 0.1..0.3 x 0.2..0.6 of 100 x 50)
    (root / "valid" / "labels" / "x.txt").write_text("0 0.5 0.5 0.2 0.2\n0 0.1 0.2 0.3 0.2 0.2 0.6\n")
    pred = tmp_path / "pred"
    pred.mkdir()
    # the box found (IoU 1); the polygon's box [10, 10, 20, 20] px predicted as [10, 10, 20, 15] px: IoU 0.75
    (pred / "x.txt").write_text("0 0.5 0.5 0.2 0.2 0.9\n0 0.2 0.35 0.2 0.3 0.8\n")
    res = run_task("loc", root / "data.yaml", pred, tmp_path / "o", "--set", "xray.loc.split=val")
    assert _agg(res, "xray/loc/map_50") == pytest.approx(1.0)
    assert res["summary"]["n_gt_boxes"] == 2
    # as [10, 10, 20, 5] px: IoU 0.25, a false positive: precision 1 up to recall 0.5, AP = 51 / 101 points
    (pred / "x.txt").write_text("0 0.5 0.5 0.2 0.2 0.9\n0 0.2 0.25 0.2 0.1 0.8\n")
    res = run_task("loc", root / "data.yaml", pred, tmp_path / "o2", "--set", "xray.loc.split=val")
    assert _agg(res, "xray/loc/map_50") == pytest.approx(51 / 101)
    # the default split (test) is not in this data.yaml
    fail_line(capsys, "loc", root / "data.yaml", pred, tmp_path / "o3", "no 'test' image folder", "field=test")


def test_yolo_bad_input_lines(yolo, tmp_path, capsys):
    data_yaml, pred = yolo
    labels = data_yaml.parent / "test" / "labels"
    saved = (labels / "img_a.txt").read_text()
    (labels / "img_a.txt").write_text("0 0.5 0.5 0.2\n")
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "o1", "line 1", "img_a.txt", "field=box")
    (labels / "img_a.txt").write_text("9 0.5 0.5 0.2 0.2\n")
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "o2", "class 9", "field=class")
    (labels / "img_a.txt").write_text("0 0.5 0.5 1.2 0.2\n")
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "o3", "normalised", "img_a.txt")
    (labels / "img_a.txt").write_text(saved)
    (pred / "img_a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "o4", "--save-conf", "field=conf")
    (pred / "img_a.txt").write_text("0 0.5 0.5 0.2 0.2 0.5\n")
    (pred / "zzz.txt").write_text("0 0.5 0.5 0.2 0.2 0.5\n")
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "o5", "not in the ground truth", "case=zzz")
    (pred / "zzz.txt").unlink()
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "o6", "'all'", extra=("--set", "xray.loc.split=all"))
    (data_yaml.parent / "test" / "images" / "img_c.jpg").write_bytes(b"not an image")
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "o7", "image header", "img_c.jpg", "field=image")
    empty = tmp_path / "nothing"
    empty.mkdir()
    fail_line(capsys, "loc", empty, pred, tmp_path / "o8", "looks like none of the layouts", "yolo (", "ms-cxr (")


def test_format_forcing(yolo, tmp_path, capsys):
    data_yaml, pred = yolo
    forced = run_task("loc", data_yaml, pred, tmp_path / "f", "--format", "yolo")
    assert forced["config"]["format"]["ground_truth"] == "yolo"
    fail_line(
        capsys, "loc", data_yaml, pred, tmp_path / "g", "malformed JSON", "data.yaml", extra=("--format", "generic")
    )
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "m", "missing required column", extra=("--format", "ms-cxr"))
    fail_line(capsys, "loc", data_yaml, pred, tmp_path / "u", "unknown format 'coco'", extra=("--format", "coco"))


# ---------------------------------------------------------------- MS-CXR


def _ms_rows() -> list[list]:
    """MS-CXR rows: ``d1``'s effusion phrase has two boxes; ``d3`` is a train row (left out under split test)."""
    p = "files/p10/p10000001/s5000001/"
    return [
        ["d1", "Pleural effusion", "bilateral effusions", p + "d1.jpg", 0, 0, 10, 10, 100, 80, "test"],
        ["d1", "Pleural effusion", "bilateral effusions", p + "d1.jpg", 20, 0, 10, 10, 100, 80, "test"],
        ["d1", "Cardiomegaly", "enlarged heart", p + "d1.jpg", 30, 30, 20, 20, 100, 80, "test"],
        ["d2", "Pneumonia", "right lower lobe opacity", p + "d2.jpg", 0, 0, 10, 10, 90, 90, "test"],
        ["d2", "Pleural effusion", "small left effusion", p + "d2.jpg", 50, 50, 8, 8, 90, 90, "test"],
        ["d3", "Pneumonia", "patchy opacity", p + "d3.jpg", 1, 1, 5, 5, 64, 64, "train"],
    ]


def _csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    return path


def test_ms_cxr_union_iou_by_hand(tmp_path):
    gt = _csv(tmp_path / "MS_CXR_Local_Alignment_v1.1.0.csv", MS_CXR_HEADER, _ms_rows())
    pred = _csv(
        tmp_path / "pred.csv",
        ["dicom_id", "label_text", "x", "y", "w", "h"],
        [
            ["d1", "bilateral effusions", 0, 0, 30, 10],  # covers both boxes and the gap: 200 / 300
            ["d1", "enlarged heart", 40, 30, 20, 20],  # 200 / 600
            ["d2", "right lower lobe opacity", 5, 0, 10, 10],  # 50 / 150
            ["d2", "right lower lobe opacity", 0, 0, 5, 10],  # a second box: the union is [0, 0, 15, 10]: 100/150
        ],  # "small left effusion": no prediction, 0
    )
    res = run_task("loc", gt, pred, tmp_path / "out")
    assert res["config"]["format"] == {"ground_truth": "ms-cxr", "predictions": "ms-cxr"}
    assert _agg(res, "xray/loc/miou") == pytest.approx((2 / 3 + 1 / 3 + 2 / 3 + 0) / 4)
    assert res["summary"]["n_phrases"] == 4 and res["summary"]["n_missing_grounding"] == 1
    assert res["summary"]["n_gt_boxes"] == 5  # the train row is not read
    everything = run_task("loc", gt, pred, tmp_path / "all", "--set", "xray.loc.split=all")
    assert everything["summary"]["n_phrases"] == 5
    assert _agg(everything, "xray/loc/miou") == pytest.approx((2 / 3 + 1 / 3 + 2 / 3 + 0 + 0) / 5)


def test_ms_cxr_single_boxes_match_the_generic_path(tmp_path):
    rows = [r for r in _ms_rows() if r[4] != 20]  # one box per phrase
    gt = _csv(tmp_path / "ms.csv", MS_CXR_HEADER, rows)
    boxes = [[1, 0, 10, 10], [30, 35, 20, 20], [0, 2, 9, 9], [48, 50, 8, 8], [1, 1, 5, 5]]
    scores = [0.9, 0.4, 0.7, 0.2, 0.5]
    pred_rows = [[r[0], r[2], *b, s] for r, b, s in zip(rows, boxes, scores, strict=True)]
    pred = _csv(tmp_path / "pred.csv", ["dicom_id", "label_text", "x", "y", "w", "h", "score"], pred_rows[:4])
    res = run_task("loc", gt, pred, tmp_path / "ms")
    # the same rows by hand as COCO: categories sorted by name, one annotation per row, grounding per row
    cats = sorted({r[1] for r in rows[:5] if r[10] == "test"})
    test_rows = [r for r in rows if r[10] == "test"]
    coco = {
        "images": [{"id": d} for d in sorted({r[0] for r in test_rows})],
        "categories": [{"id": i + 1, "name": n} for i, n in enumerate(cats)],
        "annotations": [
            {"id": k, "image_id": r[0], "category_id": cats.index(r[1]) + 1, "bbox": r[4:8]}
            for k, r in enumerate(test_rows)
        ],
    }
    dets = [
        {"image_id": r[0], "category_id": cats.index(r[1]) + 1, "bbox": b, "score": s}
        for r, b, s in zip(test_rows, boxes, scores, strict=False)
    ] + [{"annotation_id": k, "bbox": b} for k, b in enumerate(boxes[: len(test_rows)])]
    (tmp_path / "gt.json").write_text(json.dumps(coco))
    (tmp_path / "det.json").write_text(json.dumps(dets))
    generic = run_task("loc", tmp_path / "gt.json", tmp_path / "det.json", tmp_path / "generic")
    for key, agg in generic["aggregates"].items():
        assert _agg(res, key) == pytest.approx(agg["value"], abs=1e-12), key
    assert 0 < _agg(res, "xray/loc/miou") < 1 and 0 < _agg(res, "xray/loc/map_50") <= 1


def test_ms_cxr_bad_input(tmp_path, capsys):
    gt = _csv(tmp_path / "ms.csv", MS_CXR_HEADER, _ms_rows())
    head = ["dicom_id", "label_text", "x", "y", "w", "h"]
    pred = _csv(tmp_path / "p.csv", head, [["d1", "no such phrase", 0, 0, 1, 1]])
    fail_line(capsys, "loc", gt, pred, tmp_path / "o1", "not in the ground truth", "case=d1", "field=label_text")
    pred = _csv(tmp_path / "p.csv", head, [["d1", "enlarged heart", 0, 0, -1, 1]])
    fail_line(capsys, "loc", gt, pred, tmp_path / "o2", "w must be", "field=w")
    (tmp_path / "p.json").write_text("[]")
    fail_line(capsys, "loc", gt, tmp_path / "p.json", tmp_path / "o3", "MS-CXR predictions must be a CSV")
    bad = _ms_rows()
    bad[0][4] = "abc"
    gt = _csv(tmp_path / "ms.csv", MS_CXR_HEADER, bad)
    fail_line(capsys, "loc", gt, pred, tmp_path / "o4", "x must be a finite number", "ms.csv", "case=d1", "field=x")
    other = _csv(tmp_path / "other.csv", ["image", "finding"], [["a", "b"]])
    fail_line(capsys, "loc", other, pred, tmp_path / "o5", "looks like none of the layouts", "other.csv")


def test_union_iou_against_rasterised_masks():
    rng = np.random.default_rng(3)
    for _ in range(200):
        a = rng.integers(0, 30, (int(rng.integers(1, 4)), 4))
        b = rng.integers(0, 30, (int(rng.integers(1, 4)), 4))
        a[:, 2:] += a[:, :2]  # xyxy with x2 >= x1
        b[:, 2:] += b[:, :2]
        ma, mb = np.zeros((64, 64), bool), np.zeros((64, 64), bool)
        for x1, y1, x2, y2 in a:
            ma[y1:y2, x1:x2] = True
        for x1, y1, x2, y2 in b:
            mb[y1:y2, x1:x2] = True
        union = (ma | mb).sum()
        expected = (ma & mb).sum() / union if union else 0.0
        assert union_iou(a, b) == pytest.approx(expected, abs=1e-12)
    assert union_iou(np.zeros((0, 4)), [[0, 0, 1, 1]]) == 0.0


def test_roboflow_yaml_as_published(tmp_path):
    """87tana/YOLO11n-Bone-Fracture-Detection-Model's data.yaml: ``nc: 1`` beside two names and a ``roboflow``
    block; the names decide the classes (as Ultralytics, which checks ``nc`` only when there are no names)."""
    root = tmp_path / "fraction-detection"
    (root / "test" / "images").mkdir(parents=True)
    (root / "test" / "labels").mkdir()
    (root / "data.yaml").write_text(
        "train: ../train/images\nval: ../valid/images\ntest: ../test/images\n\nnc: 1\n"
        "names: ['negative', 'positive']\n\nroboflow:\n  workspace: fraction-detection\n"
        "  project: fraction-detection\n  version: 12\n  license: CC BY 4.0\n"
        "  url: https://universe.roboflow.com/fraction-detection/fraction-detection/dataset/12\n"
    )
    Image.new("RGB", (640, 640)).save(root / "test" / "images" / "image1_jpg.rf.0a1b.jpg")
    (root / "test" / "labels" / "image1_jpg.rf.0a1b.txt").write_text("1 0.4 0.5 0.1 0.2\n")
    pred = tmp_path / "labels"
    pred.mkdir()
    (pred / "image1_jpg.rf.0a1b.txt").write_text("1 0.4 0.5 0.1 0.2 0.91\n0 0.4 0.5 0.1 0.2 0.3\n")
    res = run_task("loc", root / "data.yaml", pred, tmp_path / "out")
    assert _agg(res, "xray/loc/map_50/by_category/positive") == pytest.approx(1.0)
    assert res["aggregates"]["xray/loc/map_50/by_category/negative"]["n_valid"] == 0  # no truth: undefined
    assert res["summary"]["n_categories"] == 2


def test_ms_cxr_boxes_must_lie_inside_their_image(tmp_path, capsys):
    """MS-CXR's image_width/image_height bound the boxes of truth and predictions alike (COCO's convention, as
    for COCO files): a box past the edge, e.g. normalised or in another image's pixels, is one line naming the row."""
    head = ["dicom_id", "label_text", "x", "y", "w", "h"]
    gt = _csv(tmp_path / "ms.csv", MS_CXR_HEADER, _ms_rows())
    pred = _csv(tmp_path / "p.csv", head, [["d1", "enlarged heart", 90, 30, 20, 20]])  # x + w = 110 > 100
    fail_line(capsys, "loc", gt, pred, tmp_path / "o1", "row 1: bbox", "outside its 100 x 80 image", "p.csv")
    edge = _csv(tmp_path / "p.csv", head, [["d1", "enlarged heart", 80.5, 59.5, 20, 21]])  # within 1 px: kept
    assert run_task("loc", gt, edge, tmp_path / "o2")["summary"]["n_phrases"] == 4
    bad = _ms_rows()
    bad[3][7] = 95  # d2 (90 x 90): y + h = 95
    gt = _csv(tmp_path / "ms.csv", MS_CXR_HEADER, bad)
    fail_line(capsys, "loc", gt, pred, tmp_path / "o3", "row 4: bbox", "outside its 90 x 90 image", "ms.csv")
