"""Metric kernels pinned at their boundaries (issue 19, section 6): a detection at IoU exactly 0.5, ``max_dets``,
a tie between two truth boxes, ECE bin edges, and the chunked confusion pass where a label's only voxel is the
first voxel of a chunk. The detection cases are also run through pycocotools' COCOeval, the ECE bins through
sklearn's ``calibration_curve``.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from tests.test_metrics_detection import _coco_ap50
from trackeval.metrics import detection, overlap
from trackeval.metrics.classification import (
    delong,
    ece_reference,
    expected_calibration_error,
    logit_interval,
    operating_point,
    threshold_at_sensitivity,
    undefined_roc_point,
    wald_interval,
)
from trackeval.metrics.detection import (
    average_precision_at_iou,
    box_iou,
    grounding_iou,
    match_image,
    weighted_average_precision,
    xywh_to_xyxy,
)
from trackeval.metrics.overlap import confusion, confusion_matrix

NAN_AUC = float("nan")

# ------------------------------------------------------------------ detection


def _xywh(b: list[float]) -> list[float]:
    return [b[0], b[1], b[2] - b[0], b[3] - b[1]]


def test_iou_exactly_at_the_threshold_matches():
    gt = np.array([[0.0, 0, 2, 1]])
    det = np.array([[0.0, 0, 1, 1]])  # intersection 1, union 2
    assert box_iou(det, gt)[0, 0] == 0.5
    assert match_image(gt, det, np.array([0.9]), 0.5)[1].tolist() == [True]
    assert match_image(gt, det, np.array([0.9]), np.nextafter(0.5, 1.0))[1].tolist() == [False]
    assert average_precision_at_iou([gt], [det], [np.array([0.9])], 0.5) == pytest.approx(1.0)
    # COCOeval's first threshold is 0.5 and it matches at IoU >= t
    coco = _coco_ap50([(1, 1, _xywh(gt[0].tolist()))], [(1, 1, _xywh(det[0].tolist()), 0.9)], [1], [1])
    assert coco == [pytest.approx(1.0)]


def test_max_dets_keeps_exactly_the_highest_scored_detections():
    gt = np.array([[0.0, 0, 1, 1], [2.0, 0, 3, 1], [4.0, 0, 5, 1]])
    scores = np.array([0.5, 0.9, 0.7])
    scores_kept, tp = match_image(gt, gt.copy(), scores, 0.5, max_dets=2)
    assert scores_kept.tolist() == [0.9, 0.7] and tp.tolist() == [True, True]
    assert match_image(gt, gt.copy(), scores, 0.5, max_dets=3)[0].tolist() == [0.9, 0.7, 0.5]
    assert match_image(gt, gt.copy(), scores, 0.5, max_dets=1)[0].tolist() == [0.9]
    # the third truth box is never found with 2 detections: recall 2/3, AP 67/101
    ap = average_precision_at_iou([gt], [gt.copy()], [scores], 0.5, max_dets=2)
    assert ap == pytest.approx(67 / 101, abs=1e-12)
    assert average_precision_at_iou([gt], [gt.copy()], [scores], 0.5) == pytest.approx(1.0)


def test_a_tie_between_two_truth_boxes_goes_to_the_last_one_as_in_cocoeval():
    a, b = [0.0, 0, 2, 2], [1.0, 0, 3, 2]
    gt = np.array([a, b])
    first = [0.5, 0, 2.5, 2]  # IoU 3/5 with both truth boxes
    dets = np.array([first, a])  # then an exact copy of the first truth box, scored lower
    ious = box_iou(dets[:1], gt)[0]
    assert ious[0] == ious[1] == pytest.approx(0.6)
    # the tie goes to the last box (b), so the copy of a still finds a: two true positives
    assert match_image(gt, dets, np.array([0.9, 0.8]), 0.5)[1].tolist() == [True, True]
    assert average_precision_at_iou([gt], [dets], [np.array([0.9, 0.8])], 0.5) == pytest.approx(1.0)
    coco = _coco_ap50(
        [(1, 1, _xywh(a)), (1, 1, _xywh(b))], [(1, 1, _xywh(first), 0.9), (1, 1, _xywh(a), 0.8)], [1], [1]
    )
    assert coco == [pytest.approx(1.0)]
    # the same truth boxes in the other order: the tie now takes a and the copy of a is a false positive
    swapped = np.array([b, a])
    assert match_image(swapped, dets, np.array([0.9, 0.8]), 0.5)[1].tolist() == [True, False]


# ------------------------------------------------------------------ ECE bins: (lo, hi], the first one closed


def test_ece_a_score_on_a_bin_edge_goes_to_the_lower_bin():
    # 4 bins, edges 0.25, 0.5, 0.75: 0.25 is in [0, 0.25], 0.375 in (0.25, 0.5] -> two bins of one score each
    y, p = np.array([1, 0]), np.array([0.25, 0.375])
    assert expected_calibration_error(y, p, n_bins=4) == pytest.approx((0.75 + 0.375) / 2, abs=1e-15)
    # with bins closed on the left ([0.25, 0.5)) the two would share a bin: |1 - 0.625| / 2
    assert expected_calibration_error(y, p, n_bins=4) != pytest.approx(0.375 / 2)
    # sklearn's calibration_curve (Guo et al. 2017, B_m = ((m-1)/M, m/M]) bins the same way
    _, prob_pred = calibration_curve(y, p, n_bins=4)
    assert prob_pred.tolist() == pytest.approx([0.25, 0.375])
    # the upper edges 0.5 and 0.75 behave the same way; 1.0 is in the last bin and 0.0 in the first
    y2, p2 = np.array([1, 0, 1, 0]), np.array([0.5, 0.625, 0.75, 0.875])
    # bins (0.25, 0.5]: {0.5}; (0.5, 0.75]: {0.625, 0.75} (one positive); (0.75, 1]: {0.875}
    assert expected_calibration_error(y2, p2, n_bins=4) == pytest.approx((0.5 + abs(1 - 1.375) + 0.875) / 4)
    _, pred2 = calibration_curve(y2, p2, n_bins=4)
    assert pred2.tolist() == pytest.approx([0.5, 0.6875, 0.875])  # (0.25, 0.5], (0.5, 0.75] twice, (0.75, 1]
    assert expected_calibration_error(np.array([0, 1]), np.array([0.0, 1.0]), n_bins=4) == 0.0
    assert expected_calibration_error(np.array([1, 1]), np.array([0.0, 0.25]), n_bins=4) == pytest.approx(
        (1.0 + 0.75) / 2
    )


def test_ece_reference_uses_the_same_bins():
    # one score per bin: E|y - p| = 2 p (1 - p) each; merged into one bin the expectation would differ
    p = np.array([0.25, 0.375])
    assert ece_reference(p, n_bins=4) == pytest.approx((2 * 0.25 * 0.75 + 2 * 0.375 * 0.625) / 2, abs=1e-15)
    assert ece_reference(np.array([0.0, 1.0]), n_bins=4) == 0.0


# ------------------------------------------------------------------ the chunked confusion pass


def _first_voxel_maps(n: int, chunk: int, labels: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Flat maps of ``n`` voxels where each of three labels has exactly one voxel, at the first voxel of a chunk
    (0, ``chunk`` and ``2 * chunk``): the truth holds the first two, the prediction the last two."""
    truth = np.zeros(n, dtype=np.int64)
    pred = np.zeros(n, dtype=np.int64)
    truth[0], truth[chunk] = labels[0], labels[1]
    pred[chunk], pred[2 * chunk] = labels[1], labels[2]
    return truth, pred


@pytest.mark.parametrize("labels", [(3, 5, 7), (800, 900, 1000), (2**40, 2**40 + 1, 2**41)])
def test_a_label_whose_only_voxel_starts_a_chunk_is_counted(monkeypatch, labels):
    """Direct codes (small ids), compaction with a lookup table (ids above 723) and with searchsorted."""
    chunk = 64
    monkeypatch.setattr(overlap, "CHUNK", chunk)
    truth, pred = _first_voxel_maps(3 * chunk + 5, chunk, labels)
    values, matrix = confusion_matrix(pred, truth)
    assert values.tolist() == [0, *labels]
    want = np.zeros((4, 4), dtype=np.int64)
    want[0, 0] = truth.size - 3  # voxels 0, chunk and 2 * chunk carry a label
    want[1, 0] = 1  # labels[0]: one truth voxel (chunk 0, voxel 0), predicted as background
    want[2, 2] = 1  # labels[1]: truth and prediction agree on the first voxel of chunk 1
    want[0, 3] = 1  # labels[2]: one predicted voxel (first of chunk 2) on background
    np.testing.assert_array_equal(matrix, want)
    c = confusion(pred, truth, list(labels))
    assert (c[labels[0]].fn, c[labels[1]].tp, c[labels[2]].fp) == (1, 1, 1)


def test_a_label_at_the_first_voxel_of_a_real_sized_chunk_is_counted():
    """The default chunk size (no monkeypatch), compaction path: three chunks and a partial one."""
    chunk = overlap.CHUNK
    truth, pred = _first_voxel_maps(3 * chunk + 1, chunk, (1000, 2000, 3000))
    values, matrix = confusion_matrix(pred, truth)
    assert values.tolist() == [0, 1000, 2000, 3000]
    assert matrix[1, 0] == 1 and matrix[2, 2] == 1 and matrix[0, 3] == 1 and matrix[0, 0] == truth.size - 3


# ------------------------------------------------------------------ box geometry and COCO defaults


def test_iou_of_disjoint_touching_and_empty_boxes():
    a = [[0.0, 0, 1, 1]]
    # apart along both axes: both overlaps are negative, their product must not count as an intersection
    assert box_iou(a, [[2.0, 2, 3, 3]])[0, 0] == 0.0
    assert box_iou(a, [[1.0, 0, 2, 1]])[0, 0] == 0.0  # touching edges
    # apart along one axis only: the negative overlap must not make a negative intersection
    assert box_iou(a, [[2.0, 0, 3, 1]])[0, 0] == 0.0
    assert box_iou(a, [[0.0, 2, 1, 3]])[0, 0] == 0.0
    assert box_iou(a, [[0.5, 0.5, 1.5, 1.5]])[0, 0] == pytest.approx(0.25 / 1.75)  # a fractional overlap
    # zero-area boxes (x2 == x1 is allowed): the union is empty, IoU 0
    assert box_iou([[1.0, 1, 1, 1]], [[1.0, 1, 1, 1]])[0, 0] == 0.0
    assert box_iou([[1.0, 1, 1, 2]], [[0.0, 0, 2, 2]])[0, 0] == 0.0


def test_box_validation():
    with pytest.raises(ValueError, match="^box coordinates must be finite$"):
        box_iou([[0.0, 0, np.nan, 1]], [[0.0, 0, 1, 1]])
    with pytest.raises(ValueError, match=r"^boxes must satisfy x2 >= x1 and y2 >= y1$"):
        box_iou([[1.0, 0, 0, 1]], [[0.0, 0, 1, 1]])  # only x is reversed
    with pytest.raises(ValueError, match=r"^boxes must satisfy x2 >= x1 and y2 >= y1$"):
        box_iou([[0.0, 1, 1, 0]], [[0.0, 0, 1, 1]])  # only y is reversed
    with pytest.raises(ValueError, match=r"^pred and truth must pair up, got \(1, 4\) and \(2, 4\)$"):
        grounding_iou([[0.0, 0, 1, 1]], [[0.0, 0, 1, 1], [0.0, 0, 1, 1]])
    out = xywh_to_xyxy([[10, 20, 30, 40]])
    assert out.dtype == np.float64 and out.tolist() == [[10.0, 20.0, 40.0, 60.0]]


def test_coco_defaults_iou_half_and_one_hundred_detections():
    gt = np.array([[0.0, 0, 2, 1]])
    det = np.array([[0.0, 0, 1, 1]])  # IoU exactly 0.5
    assert average_precision_at_iou([gt], [det], [np.array([0.9])]) == pytest.approx(1.0)
    assert match_image(gt, det, np.array([0.9]))[1].tolist() == [True]
    many = np.tile([[5.0, 5, 6, 6]], (101, 1))
    kept, _ = match_image(gt, many, np.linspace(1.0, 0.0, 101))
    assert kept.size == 100 and kept[-1] == pytest.approx(0.01)
    # 101 false positives above the only true positive: with 100 kept the true positive is cut off
    dets = np.vstack([many, det])
    scores = np.r_[np.full(101, 0.9), 0.1]
    assert average_precision_at_iou([gt], [dets], [scores]) == 0.0
    assert average_precision_at_iou([gt], [dets], [scores], max_dets=102) > 0.0
    with pytest.raises(ValueError):
        average_precision_at_iou([gt, gt], [det], [np.array([0.9])])


def test_an_iou_within_1e_10_of_one_matches_at_threshold_one():
    gt = np.array([[0.0, 0, 1, 1]])
    det = np.array([[0.0, 0, 1, 1 + 1e-12]])
    iou = box_iou(det, gt)[0, 0]
    assert 1 - 1e-10 < iou < 1.0
    assert match_image(gt, det, np.array([0.9]), iou_threshold=1.0)[1].tolist() == [True]
    assert match_image(gt, np.array([[0.0, 0, 1, 1.01]]), np.array([0.9]), iou_threshold=1.0)[1].tolist() == [False]


def test_equal_scores_keep_their_input_order_as_cocoeval():
    # 40 detections in one image with three distinct scores: stable sorting keeps tied detections in input order
    # (COCOeval sorts with mergesort), so the precision curve does not depend on the sort algorithm (numpy's
    # default sort does not keep the order of ties)
    gt = np.array([[4.0 * k, 0, 4.0 * k + 1, 1] for k in range(20)])
    rng = np.random.default_rng(0)
    dets = np.vstack([gt, gt + [0.0, 10, 0, 10]])[rng.permutation(40)]  # 20 exact hits and 20 misses, shuffled
    scores = rng.choice([0.5, 0.7, 0.9], 40)
    assert not np.array_equal(np.argsort(-scores), np.argsort(-scores, kind="stable"))
    kept, tp = match_image(gt, dets, scores)
    stable = np.argsort(-scores, kind="stable")
    np.testing.assert_array_equal(kept, scores[stable])
    np.testing.assert_array_equal(tp, dets[stable, 1] == 0.0)
    ap = average_precision_at_iou([gt], [dets], [scores])
    coco = _coco_ap50(
        [(1, 1, _xywh(b)) for b in gt.tolist()],
        [(1, 1, _xywh(b), float(sc)) for b, sc in zip(dets.tolist(), scores, strict=True)],
        [1],
        [1],
    )
    assert ap == pytest.approx(coco[0], abs=1e-12)


# ------------------------------------------------------------------ ROC helpers and AUC intervals


def test_undefined_roc_point_names_the_missing_class():
    assert [undefined_roc_point(y) for y in ([0, 1], [1, 0, 1], [0, 0], [1, 1], [1], [0], [])] == [
        "",
        "",
        "no positive",
        "no negative",
        "no negative",
        "no positive",
        "no label",
    ]


def test_threshold_at_sensitivity_needs_at_least_one_positive_found():
    y, s = np.array([1, 1, 1, 0]), np.array([0.9, 0.6, 0.3, 0.5])
    assert threshold_at_sensitivity(y, s) == 0.3  # default 95%: all three positives
    assert threshold_at_sensitivity(y, s, 0.01) == 0.9  # any target above 0 needs one positive
    assert threshold_at_sensitivity(y, s, 0.0) == 0.9
    assert np.isnan(threshold_at_sensitivity(np.array([0, 0]), np.array([0.2, 0.4])))
    assert threshold_at_sensitivity(np.array([1]), np.array([0.7])) == 0.7
    op = operating_point(y, s, 0.6)
    assert (op.threshold, op.tp, op.fp, op.tn, op.fn) == (0.6, 2, 0, 1, 1)


def test_auc_intervals_pass_their_confidence_and_propagate_nan():
    assert all(np.isnan(logit_interval(NAN_AUC, 0.01)))
    assert all(np.isnan(logit_interval(0.8, NAN_AUC)))
    # at the bounds the Wald interval is used, at the requested level
    assert logit_interval(1.0, 0.01, 0.5) == pytest.approx(wald_interval(1.0, 0.01, 0.5))
    assert logit_interval(1.0, 0.01, 0.5) != pytest.approx(wald_interval(1.0, 0.01, 0.95))
    d = delong(np.array([0, 1, 0, 1, 1, 0]), np.array([0.2, 0.7, 0.6, 0.9, 0.4, 0.1]))
    assert d.ci(0.5) == pytest.approx(logit_interval(d.auc, d.variance, 0.5))
    assert d.ci(0.5)[1] - d.ci(0.5)[0] < d.ci()[1] - d.ci()[0]
    assert d.ci() == pytest.approx(logit_interval(d.auc, d.variance, 0.95))


def test_ece_argument_errors():
    with pytest.raises(ValueError, match=r"^n_bins must be >= 1$"):
        expected_calibration_error(np.array([1]), np.array([0.5]), n_bins=0)
    with pytest.raises(ValueError, match=r"^probabilities must lie in \[0, 1\]$"):
        expected_calibration_error(np.array([1]), np.array([1.5]))
    with pytest.raises(ValueError, match=r"^probabilities must be finite$"):
        ece_reference(np.array([0.5, np.inf]))
    with pytest.raises(ValueError, match=r"^probs must be 1D, got shape \(1, 2\)$"):
        ece_reference(np.array([[0.5, 0.5]]))


def test_weighted_ap_edges_and_argument_checks(monkeypatch):
    s, tp, img = [0.9, 0.6, 0.5], [False, True, True], [0, 0, 1]
    one_row = weighted_average_precision(s, tp, img, [1, 1], np.array([1.0, 1.0]))  # a 1D weight vector
    assert one_row.shape == (1,) and one_row[0] == pytest.approx(2 / 3)
    # without detections: 0 where there is truth (one box is enough), NaN where there is none
    none = weighted_average_precision([], [], [], [1, 0], np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    np.testing.assert_array_equal(none, [0.0, np.nan, 0.0])
    monkeypatch.setattr(detection, "_BLOCK_ENTRIES", 1)  # one weight row per block
    blocks = weighted_average_precision([], [], [], [1, 0], np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    np.testing.assert_array_equal(blocks, [0.0, np.nan, 0.0])
    w = np.array([[1, 1], [1, 2], [0, 1], [1, 0]], dtype=float)
    np.testing.assert_allclose(weighted_average_precision(s, tp, img, [1, 1], w), [2 / 3, 0.75, 1.0, 0.5])
    with pytest.raises(ValueError, match=r"^scores, is_tp and image_index must match, got \(3,\), \(2,\), \(3,\)$"):
        weighted_average_precision(s, tp[:2], img, [1, 1], w)
    with pytest.raises(ValueError, match=r"^image_index must index into n_gt_per_image$"):
        weighted_average_precision(s, tp, [0, 0, 2], [1, 1], w)  # one past the last image
    with pytest.raises(ValueError, match=r"^image_index must index into n_gt_per_image$"):
        weighted_average_precision(s, tp, [0, -1, 1], [1, 1], w)
    with pytest.raises(ValueError, match=r"^weights must be \(B, 2\) \(one column per image\), got \(4, 3\)$"):
        weighted_average_precision(s, tp, img, [1, 1], np.ones((4, 3)))
