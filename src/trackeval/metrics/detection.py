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

:func:`weighted_average_precision` recomputes step 3 under image weights (many bootstrap resamples of the images
at once) from the matched detections of step 2, which the paired comparison of two versions needs.
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


#: entries of one block of ``(resamples x detections)`` arrays in :func:`weighted_average_precision`
_BLOCK_ENTRIES = 1 << 22


def weighted_average_precision(
    scores: np.ndarray | Sequence[float],
    is_tp: np.ndarray | Sequence[bool],
    image_index: np.ndarray | Sequence[int],
    n_gt_per_image: np.ndarray | Sequence[float],
    weights: np.ndarray,
) -> np.ndarray:
    """COCO 101-point AP of one category's matched detections under image weights, one AP per weight row.

    The detections are the kept, matched ones of every image (:func:`match_image`), pooled in the order
    :func:`average_precision_at_iou` pools them (image after image, each in descending score order); they are
    merged by score (stable) as :func:`coco_average_precision` merges them. An image's weight multiplies the
    true- and false-positive count of each of its detections and its number of truth boxes, so the cumulative
    TP/FP counts, recall and precision are weighted sums. A row of ones gives exactly
    :func:`coco_average_precision` (the same integer counts in float64), and a row of integer weights gives the
    AP of the image list with every image repeated that many times (a bootstrap resample), the copies of an image
    adjacent in the list: the copies of one detection have equal scores and sort together, so they are one step
    of the weighted counts. A weight of 0 removes the image. Tie caveat: where two kept detections of one
    repeated image have the same score, the repeated list interleaves their copies (``a b a b``) while the
    weights keep them grouped (``a a b b``), which can change the AP; tied scores of different images, and any
    tie under weights 0 and 1, give the same AP either way.

    Args:
        scores, is_tp: ``(D,)`` score and true-positive flag of each kept detection, in pooling order.
        image_index: ``(D,)`` index of each detection's image into ``n_gt_per_image``.
        n_gt_per_image: ``(n_images,)`` truth boxes of the category in each image.
        weights: ``(B, n_images)`` image weights (a 1D array is one row).

    Returns:
        ``(B,)`` APs: NaN where the weighted number of truth boxes is 0 (the category is not scored), 0 where
        there is truth but no weighted detection.

    Examples:
        The two images of :func:`average_precision_at_iou` (image 0: a false positive 0.9 and a true positive
        0.6; image 1: a true positive 0.5): ones give its 2/3; image 1 twice gives FP, TP, TP, TP, so 3/4; image
        1 alone gives 1.

        >>> import numpy as np
        >>> from trackeval.metrics.detection import weighted_average_precision
        >>> w = np.array([[1, 1], [1, 2], [0, 1], [1, 0]])
        >>> np.round(weighted_average_precision([0.9, 0.6, 0.5], [False, True, True], [0, 0, 1], [1, 1], w), 4)
        array([0.6667, 0.75  , 1.    , 0.5   ])
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    tp = np.asarray(is_tp, dtype=bool).ravel()
    img = np.asarray(image_index, dtype=np.int64).ravel()
    n_gt = np.asarray(n_gt_per_image, dtype=np.float64).ravel()
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 1:
        w = w[None, :]
    if not (s.shape == tp.shape == img.shape):
        raise ValueError(f"scores, is_tp and image_index must match, got {s.shape}, {tp.shape}, {img.shape}")
    if w.ndim != 2 or w.shape[1] != n_gt.size:
        raise ValueError(f"weights must be (B, {n_gt.size}) (one column per image), got {w.shape}")
    if img.size and (img.min() < 0 or img.max() >= n_gt.size):
        raise ValueError("image_index must index into n_gt_per_image")
    n_rows, n_dets = w.shape[0], s.size
    gt_w = w @ n_gt
    out = np.full(n_rows, np.nan)
    order = np.argsort(-s, kind="stable")
    tp_o, img_o = tp[order], img[order]
    step = max(1, _BLOCK_ENTRIES // max(n_dets, 1))
    for start in range(0, n_rows, step):
        g = gt_w[start : start + step]
        if n_dets == 0:
            out[start : start + step] = np.where(g > 0, 0.0, np.nan)
            continue
        dw = w[start : start + step][:, img_o]
        ctp = np.cumsum(np.where(tp_o, dw, 0.0), axis=1)
        cfp = np.cumsum(np.where(tp_o, 0.0, dw), axis=1)
        precision = ctp / (ctp + cfp + np.spacing(1))  # COCOeval's guard against 0 / 0
        precision = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
        for r in np.flatnonzero(g > 0):
            recall = ctp[r] / g[r]
            idx = np.searchsorted(recall, RECALL_POINTS, side="left")
            q = np.zeros(RECALL_POINTS.size)
            reached = idx < n_dets
            q[reached] = precision[r, idx[reached]]
            out[start + r] = float(np.mean(q))
    return out


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
