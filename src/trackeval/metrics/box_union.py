"""IoU of two regions that are each a union of axis-aligned boxes (phrase grounding with several boxes).

A phrase of MS-CXR may be grounded by several boxes (e.g. bilateral effusions): the phrase's region is the union
of its boxes, and a prediction's region the union of its boxes. :func:`union_iou` is the exact area IoU of the
two regions in continuous coordinates (no rasterisation, no pixel-centre rule): the plane is cut into the cells
of the grid of all box edges, and each cell is inside a region or not. For one box on each side it equals the
box IoU (:func:`trackeval.metrics.detection.grounding_iou`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["union_iou"]


def _cover(boxes: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``(len(ys) - 1, len(xs) - 1)`` booleans: the grid cells inside the union of ``boxes`` (xyxy)."""
    cx = (xs[:-1] + xs[1:]) / 2
    cy = (ys[:-1] + ys[1:]) / 2
    inside = np.zeros((cy.size, cx.size), dtype=bool)
    for x1, y1, x2, y2 in boxes:
        inside |= ((cy > y1) & (cy < y2))[:, None] & ((cx > x1) & (cx < x2))[None, :]
    return inside


def union_iou(pred: np.ndarray | Sequence[Sequence[float]], truth: np.ndarray | Sequence[Sequence[float]]) -> float:
    """Area IoU of the union of the ``pred`` boxes and the union of the ``truth`` boxes, ``(N, 4)`` and
    ``(M, 4)`` xyxy (pixels or any unit: the ratio is unitless) -> a number in [0, 1].

    Overlapping boxes of one side count their common area once. 0 when either side has no box, and when the
    union of both regions has no area (degenerate boxes only).

    Examples:
        Two disjoint truth boxes of area 4 each; a prediction covering the first one exactly: 4 / 8.

        >>> from trackeval.metrics.box_union import union_iou
        >>> union_iou([[0, 0, 2, 2]], [[0, 0, 2, 2], [4, 0, 6, 2]])
        0.5
        >>> union_iou([[0, 0, 2, 2]], [[1, 0, 3, 2]])  # one box each: the box IoU, 2 / 6
        0.3333333333333333
    """
    p = np.asarray(pred, dtype=np.float64).reshape(-1, 4)
    t = np.asarray(truth, dtype=np.float64).reshape(-1, 4)
    if not p.size or not t.size:
        return 0.0
    both = np.concatenate([p, t])
    xs = np.unique(np.concatenate([both[:, 0], both[:, 2]]))
    ys = np.unique(np.concatenate([both[:, 1], both[:, 3]]))
    if xs.size < 2 or ys.size < 2:
        return 0.0
    area = np.diff(ys)[:, None] * np.diff(xs)[None, :]
    a, b = _cover(p, xs, ys), _cover(t, xs, ys)
    union = float(area[a | b].sum())
    return float(area[a & b].sum()) / union if union > 0 else 0.0
