"""Scoring of one (truth, prediction) pair of label maps for named labels: shared by UMD and X-ray seg.

One confusion pass gives Dice/IoU and voxel counts for every label and region; surface metrics run per
label on cropped bounding boxes, and only when one of them is asked for (``metrics``: Dice/IoU alone cost one
pass over the volumes). The empty policy (``docs/design.md``):

=====================  ======  =====  ==============================  =====
truth / prediction     Dice    NSD    HD95, HD, ASSD                  valid
=====================  ======  =====  ==============================  =====
both empty             NaN     NaN    NaN                             no (``empty_both="nan"``)
both empty             1       1      0                               yes (``empty_both="perfect"``)
truth empty, pred not  0       0      penalty (``hd_empty_penalty``)  yes
pred empty, truth not  0       0      penalty                         yes
=====================  ======  =====  ==============================  =====
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from trackeval.metrics.overlap import (
    Label,
    LabelCounts,
    confusion_matrix,
    counts_from_matrix,
    dice_from_counts,
    iou_from_counts,
)
from trackeval.metrics.surface import COMPILED_MODULE, surface_metrics

#: Per-item metrics a segmentation record can carry (units: Dice/IoU/NSD in [0, 1], distances in mm); the voxel
#: counts ``n_ref``/``n_pred`` are always there, the others when selected.
SEG_METRICS: tuple[str, ...] = ("dsc", "iou", "nsd", "hd95", "hd", "assd", "n_ref", "n_pred")
#: The metrics that need surface distances.
SURFACE_METRICS: tuple[str, ...] = ("nsd", "hd95", "hd", "assd")
#: Values of an item absent from both truth and prediction under ``empty_both="perfect"``.
PERFECT = {"dsc": 1.0, "iou": 1.0, "nsd": 1.0, "hd95": 0.0, "hd": 0.0, "assd": 0.0}


def scored_perfect(c: LabelCounts, empty_both: str) -> bool:
    """True when an item with counts ``c`` takes the :data:`PERFECT` values: absent from both truth and prediction
    (``n_ref == n_pred == 0``) under ``empty_both="perfect"``; under ``"nan"`` (the default) it never does."""
    return empty_both == "perfect" and c.n_ref == 0 and c.n_pred == 0


def worker_preload(metrics: Collection[str]) -> tuple[str, ...]:
    """The modules a worker scoring ``metrics`` imports on its first case that a process pool may load once for all
    of its workers: the compiled surface loops when a surface metric is selected, else none."""
    return (COMPILED_MODULE,) if set(metrics) & set(SURFACE_METRICS) else ()


def distance_penalty(shape: tuple[int, ...], spacing: tuple[float, ...], setting: str | float) -> float:
    """The HD/ASSD value used when exactly one side is empty: the image diagonal in mm, or a fixed value."""
    if setting == "diagonal":
        return float(math.hypot(*(n * s for n, s in zip(shape, spacing, strict=True))))
    return float(setting)


def score_segmentation(
    truth: np.ndarray,
    pred: np.ndarray,
    spacing: tuple[float, ...],
    labels: dict[str, Label],
    *,
    nsd_tolerance_mm: float,
    hd_percentile: float,
    hd_empty_penalty: str | float,
    empty_both: str = "nan",
    confusion: tuple[np.ndarray, np.ndarray] | None = None,
    metrics: Collection[str] = SEG_METRICS,
    threads: int = 1,
) -> dict[str, dict[str, float]]:
    """``{item name: {metric: value}}`` for every named label or region.

    ``metrics`` selects what is computed among ``dsc, iou, nsd, hd95, hd, assd`` (default all); the keys of
    the others are absent, and the surface distances are not computed at all when none of ``nsd, hd95, hd,
    assd`` is selected. ``n_ref``/``n_pred`` (voxel counts) are always recorded. ``confusion`` may pass a
    ``confusion_matrix(pred, truth)`` already computed by the caller (for label checks) so the volumes are not
    scanned twice. ``threads``: surface distances of up to this many labels at once (values unchanged).
    """
    selected = [m for m in SEG_METRICS if m in metrics and m not in ("n_ref", "n_pred")]
    values, matrix = confusion if confusion is not None else confusion_matrix(pred, truth)
    counts = counts_from_matrix(values, matrix, list(labels.values()))
    surf = {}
    if any(m in SURFACE_METRICS for m in selected):
        surf = surface_metrics(
            pred,
            truth,
            spacing,
            labels=list(labels.values()),
            tolerance_mm=nsd_tolerance_mm,
            percentile=hd_percentile,
            threads=threads,
        )
    penalty = distance_penalty(truth.shape, spacing, hd_empty_penalty)
    return {
        name: _item_values(selected, counts[label], surf, label, penalty, empty_both) for name, label in labels.items()
    }


def _item_values(
    selected: list[str],
    c: LabelCounts,
    surf: dict[Label, dict[str, float]],
    label: Label,
    penalty: float,
    empty_both: str,
) -> dict[str, float]:
    """``{metric: value}`` of one label or region: the ``selected`` metrics (in that order) under the empty
    policy, then ``n_ref`` and ``n_pred``. ``c``: its voxel counts; ``surf``: the surface metrics by label (read
    only for a selected surface metric); ``penalty``: HD/ASSD in mm when exactly one side is empty."""
    row = {}
    for m in selected:
        if scored_perfect(c, empty_both):
            row[m] = PERFECT[m]
        elif m == "dsc":
            row[m] = dice_from_counts(c)
        elif m == "iou":
            row[m] = iou_from_counts(c)
        elif m == "nsd":
            row[m] = surf[label]["nsd"]
        else:  # distances: the penalty when exactly one side is empty
            row[m] = penalty if math.isinf(surf[label][m]) else surf[label][m]
    row["n_ref"] = float(c.n_ref)
    row["n_pred"] = float(c.n_pred)
    return row
