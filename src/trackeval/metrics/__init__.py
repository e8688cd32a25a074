"""Pure metric kernels: arrays in, numbers out (no I/O, no MLflow, no pydantic).

Segmentation functions take integer label maps (2D or 3D) and return ``{label: value}``, where a label is an
id or a tuple of ids (an nnU-Net style region, the union of its ids).
"""

from trackeval.metrics.overlap import Label, LabelCounts, confusion, confusion_matrix, dice, iou
from trackeval.metrics.surface import assd, hausdorff, hd95, nsd, surface_distances, surface_metrics

__all__ = [
    "Label",
    "LabelCounts",
    "assd",
    "confusion",
    "confusion_matrix",
    "dice",
    "hausdorff",
    "hd95",
    "iou",
    "nsd",
    "surface_distances",
    "surface_metrics",
]
