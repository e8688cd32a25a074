"""IMIS-Bench's two grids (``imis.protocol: imis_bench``): the model's square ``eval_size`` grid and the label's own.

IMIS-Bench's loader (``dataloaders/data_utils.py``, ``Resize``) resizes the image and every label channel to the
square model grid with torchvision's ``resize`` on PIL images, ``InterpolationMode.NEAREST``. PIL's nearest
resize samples pixel centres: output pixel ``i`` of ``n_out`` takes source pixel ``floor((i + 0.5) * n_in /
n_out)``, the position accumulated in double precision from ``0.5 * scale`` in steps of ``scale = n_in / n_out``
exactly as PIL's scaling loop does (for ``n_out`` a power of two, 1024 included, every step is exact and the
index is the exact ``floor``). This is torch's ``interpolate(mode="nearest-exact")``, not ``mode="nearest"``
(``floor(i * n_in / n_out)``): the two agree only when ``n_out / n_in`` is an integer, e.g. 256 -> 1024.

Its ``test.py`` takes Dice on the label's own grid: the model's mask scores on the ``eval_size`` grid are resized
bilinearly (``F.interpolate(..., mode="bilinear")``: half-pixel centres, ``align_corners=False``, no
antialiasing) to the label's ``H x W``, then thresholded (logits: ``sigmoid > 0.5``). :func:`to_label_grid`
does this for logits, probabilities and binary masks (read as the probabilities 0 and 1).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

#: how a model's answer on the ``eval_size`` grid is read: float logits, float probabilities, or a binary mask
ScoreKind = Literal["logits", "probabilities", "mask"]


def centre_indices(n_in: int, n_out: int) -> np.ndarray:
    """The source index of each of ``n_out`` output pixels under PIL's nearest (pixel-centre) resize.

    The position of output pixel ``i`` is ``0.5 * s + i * s`` with ``s = n_in / n_out``, summed one step at a time
    in double precision (``np.add.accumulate`` adds sequentially, as PIL's loop does), truncated to an integer.

    Examples:
        >>> from trackeval.benchmarks.imis.grid import centre_indices
        >>> centre_indices(2, 5).tolist()  # centres 0.2, 0.6, 1.0, 1.4, 1.8
        [0, 0, 1, 1, 1]
        >>> centre_indices(3, 4).tolist()  # 0.375, 1.125, 1.875, 2.625 (torch "nearest" gives 0, 0, 1, 2)
        [0, 1, 1, 2]
    """
    if n_in < 1 or n_out < 1:
        raise ValueError(f"sizes must be positive, got {n_in} -> {n_out}")
    scale = n_in / n_out
    steps = np.full(n_out, scale, dtype=np.float64)
    steps[0] = scale * 0.5
    positions = np.add.accumulate(steps)
    return np.minimum(positions.astype(np.int64), n_in - 1)  # positions are < n_in; the minimum is a guard


def resize_nearest(array: np.ndarray, size: int) -> np.ndarray:
    """A 2D array (``H x W`` or ``H x W x C``) resized to ``size x size`` as PIL's ``NEAREST`` resize does
    (:func:`centre_indices` on each axis); the dtype and values are kept (a pure gather of source pixels).

    Examples:
        >>> import numpy as np
        >>> from trackeval.benchmarks.imis.grid import resize_nearest
        >>> resize_nearest(np.arange(9).reshape(3, 3), 4)
        array([[0, 1, 1, 2],
               [3, 4, 4, 5],
               [3, 4, 4, 5],
               [6, 7, 7, 8]])
    """
    rows = centre_indices(array.shape[0], size)
    cols = centre_indices(array.shape[1], size)
    return np.ascontiguousarray(array[rows[:, None], cols[None, :]])


def score_kind(output: np.ndarray, declared: str) -> ScoreKind:
    """How a validated model answer is read: a bool or integer array is a mask; a float array is what the model
    declares (``logits`` unless it declares ``probabilities``)."""
    if output.dtype == np.bool_ or np.issubdtype(output.dtype, np.integer):
        return "mask"
    return "probabilities" if declared == "probabilities" else "logits"


def to_label_grid(output: np.ndarray, shape: tuple[int, int], kind: ScoreKind) -> np.ndarray:
    """A model answer on the ``eval_size`` grid as a bool mask on the label grid ``shape``, IMIS-Bench's way.

    The answer is taken as float32 (the dtype of the original's mask logits), resized bilinearly to ``shape``
    (``torch.nn.functional.interpolate(mode="bilinear", align_corners=False)``, the original's
    ``postprocessing_mask``) and thresholded: logits by ``sigmoid(x) > 0.5`` in float32 (the original's
    ``get_iou_and_dice``); probabilities by ``p > 0.5``; a binary mask (``kind="mask"``) is read as the
    probabilities 0 and 1, so a pixel is foreground where the interpolated value is ``> 0.5`` (a mask that is
    the nearest-neighbour upsampling of a label-grid mask comes back unchanged).
    """
    import torch
    import torch.nn.functional as F

    scores = torch.from_numpy(np.ascontiguousarray(output, dtype=np.float32))[None, None]
    if tuple(scores.shape[-2:]) != tuple(shape):
        scores = F.interpolate(scores, size=tuple(shape), mode="bilinear", align_corners=False)
    values = scores[0, 0].numpy()
    if kind != "logits":
        return values > 0.5
    # sigmoid(x) > 0.5 in float32 is x > 0 except for tiny x (sigmoid rounds to 0.5 there): sigmoid is evaluated
    # where |x| <= 1e-3 only, the rest is decided by the sign (sigmoid is monotone)
    out = values > 0
    near = np.flatnonzero(np.abs(values) <= 1e-3)
    if near.size:
        out.flat[near] = (torch.sigmoid(torch.from_numpy(values.flat[near])) > 0.5).numpy()
    return out
