"""Detection kernels: hand-computed AP cases and pycocotools' COCOeval (AP at IoU 0.5) on random scenes."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from trackeval.metrics.detection import (
    average_precision_at_iou,
    box_iou,
    coco_average_precision,
    grounding_iou,
    match_image,
    xywh_to_xyxy,
)


def test_torchmetrics_doc_box_iou_776_gives_ap50_one():
    pred, gt = np.array([[258.0, 41, 606, 285]]), np.array([[214.0, 41, 562, 285]])
    assert box_iou(pred, gt)[0, 0] == pytest.approx(304 / 392, abs=1e-12)  # = 0.776
    assert average_precision_at_iou([gt], [pred], [np.array([0.536])], 0.5) == pytest.approx(1.0, abs=1e-12)
    assert average_precision_at_iou([gt], [pred], [np.array([0.536])], 0.8) == 0.0


def test_101_point_interpolation_hand_computed():
    # 3 truth boxes; detections by score: TP, FP, TP, FP, TP -> recall 1/3,1/3,2/3,2/3,1;
    # precision 1, .5, 2/3, .5, .6 -> monotone 1, 2/3, 2/3, .6, .6. Recall points 0..0.33 (34) -> 1,
    # 0.34..0.66 (33) -> 2/3, 0.67..1 (34) -> 0.6.
    ap = coco_average_precision(np.array([0.9, 0.8, 0.7, 0.6, 0.5]), np.array([1, 0, 1, 0, 1], bool), 3)
    assert ap == pytest.approx((34 * 1 + 33 * 2 / 3 + 34 * 0.6) / 101, abs=1e-12)
    # 2 of 4 truth boxes found: recall never reaches 0.51..1 -> those 50 points are 0
    assert coco_average_precision(np.array([0.9, 0.8]), np.array([1, 1], bool), 4) == pytest.approx(51 / 101)
    assert math.isnan(coco_average_precision(np.zeros(0), np.zeros(0, bool), 0))
    assert coco_average_precision(np.zeros(0), np.zeros(0, bool), 2) == 0.0


def test_greedy_matching_one_truth_box_per_detection():
    gt = np.array([[0.0, 0, 10, 10]])
    dets = np.array([[0.0, 0, 10, 10], [0.0, 0, 10, 9]])
    scores, tp = match_image(gt, dets, np.array([0.5, 0.9]))
    assert scores.tolist() == [0.9, 0.5] and tp.tolist() == [True, False]  # the duplicate is a false positive


def test_grounding_iou_pairs():
    p = np.array([[0.0, 0, 2, 2], [0, 0, 1, 1], [5, 5, 6, 6]])
    t = np.array([[1.0, 1, 3, 3], [0, 0, 1, 1], [0, 0, 1, 1]])
    np.testing.assert_allclose(grounding_iou(p, t), [1 / 7, 1.0, 0.0])


def _coco_ap50(gt_anns, dets, images, cats):
    gt = {
        "images": [{"id": i} for i in images],
        "categories": [{"id": c} for c in cats],
        "annotations": [
            {"id": k + 1, "image_id": im, "category_id": c, "bbox": b, "area": b[2] * b[3], "iscrowd": 0}
            for k, (im, c, b) in enumerate(gt_anns)
        ],
    }
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
        res = coco.loadRes([{"image_id": im, "category_id": c, "bbox": b, "score": s} for im, c, b, s in dets])
        ev = COCOeval(coco, res, "bbox")
        ev.evaluate()
        ev.accumulate()
    prec = ev.eval["precision"][0, :, :, 0, 2]  # IoU 0.5, all recall points, categories, area all, maxDets 100
    return [float(np.mean(prec[:, k])) if (prec[:, k] > -1).all() else math.nan for k in range(len(cats))]


@pytest.mark.parametrize("seed", range(6))
def test_ap50_equals_pycocotools(seed):
    rng = np.random.default_rng(seed)
    images, cats = list(range(1, 9)), [1, 2, 3]
    gt_anns, dets = [], []
    for im in images:
        for c in cats:
            for _ in range(rng.integers(0, 3)):
                x, y = rng.uniform(0, 80, 2)
                w, h = rng.uniform(5, 30, 2)
                b = [round(x, 1), round(y, 1), round(w, 1), round(h, 1)]
                gt_anns.append((im, c, b))
                for _ in range(rng.integers(0, 3)):  # jittered detections, some duplicates
                    j = (b + rng.normal(0, 4, 4)).round(1)
                    dets.append((im, c, [j[0], j[1], max(j[2], 1.0), max(j[3], 1.0)], round(float(rng.uniform()), 2)))
            if rng.uniform() < 0.3:  # a false positive on an image without that category
                dets.append((im, c, [10.0, 10, 20, 20], round(float(rng.uniform()), 2)))
    expected = _coco_ap50(gt_anns, dets, images, cats)
    for k, c in enumerate(cats):
        gt = [xywh_to_xyxy([b for im2, c2, b in gt_anns if im2 == im and c2 == c]) for im in images]
        dd = [[(b, s) for im2, c2, b, s in dets if im2 == im and c2 == c] for im in images]
        ap = average_precision_at_iou(
            gt, [xywh_to_xyxy([b for b, _ in d]) for d in dd], [np.array([s for _, s in d]) for d in dd], 0.5
        )
        if math.isnan(expected[k]):
            assert math.isnan(ap)
        else:
            assert ap == pytest.approx(expected[k], abs=1e-12), c
