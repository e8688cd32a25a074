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
from trackeval.metrics import overlap
from trackeval.metrics.classification import ece_reference, expected_calibration_error
from trackeval.metrics.detection import average_precision_at_iou, box_iou, match_image
from trackeval.metrics.overlap import confusion, confusion_matrix

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
