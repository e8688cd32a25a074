"""Box detection and phrase-grounding metrics with pycocotools ``COCOeval`` semantics.

Boxes are ``(x1, y1, x2, y2)`` float arrays in pixels (corners; width ``x2 - x1``, no ``+1``), the convention
pycocotools uses after converting COCO's ``[x, y, w, h]``. Pure functions, numbers out.

Average precision of one category at one IoU threshold (COCO, area range "all", no crowd regions):

1. per image, detections sorted by score (descending, stable) and cut to the ``max_dets`` highest;
2. greedy matching in that order: each detection takes the unmatched ground-truth box of highest IoU among
   those with ``IoU >= threshold`` (ties: the last such box in the truth order, as COCOeval), else it is a false
   positive;
3. all images' detections merged by score (stable), cumulative TP/FP give recall and precision; precision is
   made monotone (running maximum from the right); AP is the mean of the precision at the 101 recall points
   ``0, 0.01, ..., 1`` (the first detection whose recall reaches each point, 0 if none does).

A category without ground-truth boxes has no AP (NaN; COCO's -1) and is left out of mAP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: COCO's 101 recall points of the interpolated precision.
RECALL_POINTS = np.linspace(0.0, 1.0, 101)


def _boxes(b: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    a = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    if not np.isfinite(a).all():
        raise ValueError("box coordinates must be finite")
    if (a[:, 2] < a[:, 0]).any() or (a[:, 3] < a[:, 1]).any():
        raise ValueError("boxes must satisfy x2 >= x1 and y2 >= y1")
    return a


def xywh_to_xyxy(b: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """COCO ``[x, y, w, h]`` boxes to ``(x1, y1, x2, y2)``, shape ``(N, 4)``.

    Examples:
        >>> from trackeval.metrics.detection import xywh_to_xyxy
        >>> xywh_to_xyxy([[10, 20, 30, 40]]).tolist()
        [[10.0, 20.0, 40.0, 60.0]]
    """
    a = np.asarray(b, dtype=np.float64).reshape(-1, 4).copy()
    a[:, 2:] += a[:, :2]
    return a


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of broadcastable xyxy box arrays (last axis 4); 0 where the union is empty."""
    iw = np.clip(np.minimum(a[..., 2], b[..., 2]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    ih = np.clip(np.minimum(a[..., 3], b[..., 3]) - np.maximum(a[..., 1], b[..., 1]), 0, None)
    inter = iw * ih
    union = (a[..., 2] - a[..., 0]) * (a[..., 3] - a[..., 1]) + (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])
    union = union - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of ``(N, 4)`` and ``(M, 4)`` xyxy boxes, shape ``(N, M)``; 0 where the union is empty.

    Examples:
        A 2 x 2 box against a copy shifted by 1 (overlap 2, union 4 + 4 - 2 = 6), itself and a disjoint box:

        >>> import numpy as np
        >>> from trackeval.metrics.detection import box_iou
        >>> a = [[0, 0, 2, 2]]
        >>> b = [[1, 0, 3, 2], [0, 0, 2, 2], [5, 5, 6, 6]]
        >>> np.round(box_iou(a, b), 4).tolist()
        [[0.3333, 1.0, 0.0]]
    """
    return _iou(_boxes(a)[:, None, :], _boxes(b)[None, :, :])


def match_image(
    gt: np.ndarray, dets: np.ndarray, scores: np.ndarray, iou_threshold: float = 0.5, max_dets: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy COCO matching of one image and category.

    Args:
        gt: ``(G, 4)`` ground-truth boxes (xyxy).
        dets: ``(D, 4)`` detected boxes (xyxy).
        scores: ``(D,)`` detection confidences.
        iou_threshold: a match needs ``IoU >= iou_threshold``.
        max_dets: only the ``max_dets`` highest-scoring detections are kept.

    Returns:
        ``(scores, is_tp)`` of the kept detections in descending score order.

    Examples:
        The higher-scored detection overlaps the truth box with IoU 1/3 only (a false positive); the exact one
        then takes the truth box:

        >>> from trackeval.metrics.detection import match_image
        >>> gt = [[0, 0, 2, 2]]
        >>> dets = [[0, 0, 2, 2], [1, 0, 3, 2]]
        >>> scores, is_tp = match_image(gt, dets, [0.6, 0.9])
        >>> scores.tolist(), is_tp.tolist()
        ([0.9, 0.6], [False, True])
        >>> match_image(gt, dets, [0.6, 0.9], iou_threshold=0.3)[1].tolist()  # now the first one matches
        [True, False]
    """
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")[:max_dets]
    kept_scores = np.asarray(scores, dtype=np.float64)[order]
    tp = np.zeros(order.size, dtype=bool)
    if order.size and len(gt):
        ious = box_iou(_boxes(dets)[order], gt)
        free = np.ones(len(gt), dtype=bool)
        thr = min(iou_threshold, 1 - 1e-10)  # as COCOeval: an IoU of exactly 1 always matches at t = 1
        for d in range(order.size):
            cand = np.where(free, ious[d], -1.0)
            g = cand.size - 1 - int(np.argmax(cand[::-1]))  # COCOeval keeps the LAST box of highest IoU
            if cand[g] >= thr:
                free[g] = False
                tp[d] = True
    return kept_scores, tp


def coco_average_precision(scores: np.ndarray, is_tp: np.ndarray, n_gt: int) -> float:
    """101-point interpolated AP of pooled detections (``scores``, ``is_tp``) against ``n_gt`` truth boxes.

    NaN when ``n_gt == 0`` (COCO's -1: the category is not scored); 0 when there is truth but no detection.

    Examples:
        A false positive followed by the only true positive: recall reaches 1 at precision 1/2, so the
        interpolated precision is 0.5 at all 101 recall points.

        >>> from trackeval.metrics.detection import coco_average_precision
        >>> round(coco_average_precision([0.9, 0.6], [False, True], n_gt=1), 4)
        0.5
        >>> round(coco_average_precision([0.9, 0.6], [True, False], n_gt=1), 4)  # the true positive first
        1.0
        >>> coco_average_precision([], [], n_gt=0)
        nan
    """
    if n_gt == 0:
        return math.nan
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    tp = np.asarray(is_tp, dtype=bool)[order]
    ctp = np.cumsum(tp)
    cfp = np.cumsum(~tp)
    recall = ctp / n_gt
    precision = ctp / (ctp + cfp + np.spacing(1))  # COCOeval's guard against 0 / 0
    precision = np.maximum.accumulate(precision[::-1])[::-1]  # monotone: best precision at recall >= r
    idx = np.searchsorted(recall, RECALL_POINTS, side="left")
    q = np.zeros(RECALL_POINTS.size)
    reached = idx < recall.size
    q[reached] = precision[idx[reached]]
    return float(np.mean(q))


def average_precision_at_iou(
    gt_by_image: Sequence[np.ndarray],
    dets_by_image: Sequence[np.ndarray],
    scores_by_image: Sequence[np.ndarray],
    iou_threshold: float = 0.5,
    max_dets: int = 100,
) -> float:
    """COCO AP of one category over images (the three sequences are aligned image by image).

    Examples:
        Image 1 as in :func:`match_image` (a false positive scored 0.9, a true positive scored 0.6), image 2
        one exact detection scored 0.5. Pooled by score: FP, TP, TP, so precision 2/3 at recall 1 and AP 2/3.

        >>> from trackeval.metrics.detection import average_precision_at_iou
        >>> gt = [[[0, 0, 2, 2]], [[0, 0, 1, 1]]]
        >>> dets = [[[0, 0, 2, 2], [1, 0, 3, 2]], [[0, 0, 1, 1]]]
        >>> scores = [[0.6, 0.9], [0.5]]
        >>> round(average_precision_at_iou(gt, dets, scores, iou_threshold=0.5), 4)
        0.6667
    """
    kept_scores, kept_tp, n_gt = [], [], 0
    for gt, dets, scores in zip(gt_by_image, dets_by_image, scores_by_image, strict=True):
        s, tp = match_image(gt, dets, scores, iou_threshold, max_dets)
        kept_scores.append(s)
        kept_tp.append(tp)
        n_gt += len(gt)
    if not kept_scores:
        return math.nan
    return coco_average_precision(np.concatenate(kept_scores), np.concatenate(kept_tp), n_gt)


def grounding_iou(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """IoU of paired boxes (one predicted box per phrase), ``(N, 4)`` and ``(N, 4)`` -> ``(N,)``.

    The phrase-grounding mIoU is the mean of this vector (a missing prediction counts 0).

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.detection import grounding_iou
        >>> pred = [[0, 0, 2, 2], [0, 0, 1, 1]]
        >>> truth = [[1, 0, 3, 2], [0, 0, 2, 2]]
        >>> np.round(grounding_iou(pred, truth), 4).tolist()  # 2 / 6 and 1 / 4
        [0.3333, 0.25]
    """
    p, t = _boxes(pred), _boxes(truth)
    if p.shape != t.shape:
        raise ValueError(f"pred and truth must pair up, got {p.shape} and {t.shape}")
    return _iou(p, t)
