"""Interactive-segmentation metrics: binary Dice and IoU with a declared empty rule, NoC and the Dice-vs-clicks AUC.

Pure functions, arrays in and numbers out. Curves are the Dice (or IoU) after turn 1, 2, ..., T of one sequence.
"""

from __future__ import annotations

import math

import numpy as np

from trackeval.metrics.overlap import LabelCounts, confusion


def binary_dice(pred: np.ndarray, truth: np.ndarray, empty_rule: str = "nan") -> float:
    """Dice of two boolean masks of one shape (one confusion pass, :mod:`trackeval.metrics.overlap`).

    Args:
        pred: predicted mask (bool, or integer with non-zero = foreground).
        truth: reference mask, same shape.
        empty_rule: both masks empty -> ``nan`` (not applicable) or ``original_eps`` -> 0.0, the value of the
            original ``2|P&G| / (|P|+|G|+1e-8)``. Otherwise the exact ratio (the epsilon changes it by less
            than ``1e-8 / (|P|+|G|)``).

    Returns:
        Dice in [0, 1]; 0.0 when exactly one mask is empty.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.interactive import binary_dice
        >>> round(binary_dice(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])), 4)  # 2 * 1 / (2 + 1)
        0.6667
        >>> empty = np.zeros((2, 2), dtype=bool)
        >>> binary_dice(empty, empty), binary_dice(empty, empty, empty_rule="original_eps")
        (nan, 0.0)
    """
    c = _counts(pred, truth, empty_rule)
    if c is None:
        return 0.0 if empty_rule == "original_eps" else math.nan
    return c.dice


def binary_iou(pred: np.ndarray, truth: np.ndarray, empty_rule: str = "nan") -> float:
    """Binary IoU (Jaccard) ``|P & G| / |P | G|`` of two masks of one shape, the NoC score of RITM / SimpleClick.

    ``empty_rule`` as :func:`binary_dice` (both masks empty -> NaN, or 0.0 for ``original_eps``), so the two
    scores agree on when a turn is "not applicable"; 0.0 when exactly one mask is empty.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.interactive import binary_iou
        >>> binary_iou(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]))  # 1 / 2
        0.5
    """
    c = _counts(pred, truth, empty_rule)
    if c is None:
        return 0.0 if empty_rule == "original_eps" else math.nan
    return c.tp / (c.tp + c.fp + c.fn)


#: the epsilon IMIS-Bench's ``test.py`` adds to the Dice and IoU denominators (``get_iou_and_dice``)
ORIGINAL_EPS = 1e-8


def eps_dice(pred: np.ndarray, truth: np.ndarray, eps: float = ORIGINAL_EPS) -> float:
    """IMIS-Bench's Dice: ``2|P & G| / (|P| + |G| + eps)`` (two empty masks give 0).

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.interactive import eps_dice
        >>> eps_dice(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])) == 2 / (3 + 1e-8)
        True
    """
    c = _confusion(pred, truth)
    return 2.0 * c.tp / (2.0 * c.tp + c.fp + c.fn + eps)


def eps_iou(pred: np.ndarray, truth: np.ndarray, eps: float = ORIGINAL_EPS) -> float:
    """IMIS-Bench's IoU: ``|P & G| / (|P | G| + eps)`` (two empty masks give 0).

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.interactive import eps_iou
        >>> eps_iou(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])) == 1 / (2 + 1e-8)
        True
    """
    c = _confusion(pred, truth)
    return c.tp / (c.tp + c.fp + c.fn + eps)


def _confusion(pred: np.ndarray, truth: np.ndarray) -> LabelCounts:
    """Confusion counts of label 1 of two masks (non-zero = foreground)."""
    return confusion(np.asarray(pred, dtype=bool).view(np.uint8), np.asarray(truth, dtype=bool).view(np.uint8), [1])[1]


def _counts(pred: np.ndarray, truth: np.ndarray, empty_rule: str) -> LabelCounts | None:
    """Confusion counts of label 1, or None when both masks are empty."""
    if empty_rule not in ("nan", "original_eps"):
        raise ValueError(f"unknown empty rule {empty_rule!r}")
    c = _confusion(pred, truth)
    return None if c.tp + c.fp + c.fn == 0 else c


def number_of_clicks(curve: np.ndarray, threshold: float, not_reached: str = "max_plus_one") -> float:
    """NoC@threshold: the first turn (1-based) whose score is ``>= threshold``.

    Never reached: ``len(curve) + 1`` (``not_reached="max_plus_one"``, the IMIS original) or ``len(curve)``
    (``"max"``, RITM / SimpleClick, where a sequence that ends on the last click and one that never gets there
    both count as the maximum). NaN entries never reach the threshold. An empty curve gives 1.0 (0.0 with
    ``max``).

    Examples:
        >>> from trackeval.metrics.interactive import number_of_clicks
        >>> number_of_clicks([0.5, 0.82, 0.91], threshold=0.8)
        2.0
        >>> number_of_clicks([0.5, 0.82, 0.91], threshold=0.95)  # never reached: 3 turns + 1
        4.0
        >>> number_of_clicks([0.5, 0.82, 0.91], threshold=0.95, not_reached="max")
        3.0
    """
    if not_reached not in ("max_plus_one", "max"):
        raise ValueError(f"unknown not_reached rule {not_reached!r}")
    reached = np.flatnonzero(np.nan_to_num(np.asarray(curve, dtype=np.float64), nan=-1.0) >= threshold)
    if len(reached):
        return float(reached[0] + 1)
    return float(len(curve) + (1 if not_reached == "max_plus_one" else 0))


def dice_auc(curve: np.ndarray) -> float:
    """Normalised area under the Dice-vs-clicks curve, in [0, 1].

    Trapezoidal rule over clicks 1..T with unit spacing, divided by ``T - 1`` (so a constant curve ``d``
    gives ``d``); one point gives that point, no points or any NaN give NaN.

    Examples:
        >>> from trackeval.metrics.interactive import dice_auc
        >>> round(dice_auc([0.5, 0.7, 0.9]), 4)  # ((0.5 + 0.7) / 2 + (0.7 + 0.9) / 2) / 2
        0.7
        >>> dice_auc([0.8]), dice_auc([0.8, float("nan")])
        (0.8, nan)
    """
    d = np.asarray(curve, dtype=np.float64)
    if len(d) == 0 or np.isnan(d).any():
        return math.nan
    if len(d) == 1:
        return float(d[0])
    return float(np.trapezoid(d) / (len(d) - 1))
