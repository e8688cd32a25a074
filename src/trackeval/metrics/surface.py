"""Spacing-aware surface-distance metrics for 2D/3D label maps (HD, HD95, ASSD, NSD).

All distances are in millimetres (mm); surface areas are in mm^2 (3D) or contour
lengths in mm (2D). The definitions follow DeepMind's ``surface-distance``
package (google-deepmind/surface-distance, ``compute_surface_distances``):

* For a binary mask, padded by one background voxel on every side, each point of
  the *corner grid* (the corners shared by ``2**ndim`` voxels) gets a neighbourhood
  code from its 2x2 (2D) or 2x2x2 (3D) neighbourhood. Corners whose code is
  neither 0 (all background) nor all-ones (all foreground) are *border corners*
  (surface elements, "surfels"). Each surfel carries the contour length (2D) or
  surface area (3D) that MONAI's ``get_code_to_measure_table(spacing)`` assigns to
  its code (the same look-up table as DeepMind's).
* The directed distance of a surfel of mask A to mask B is the Euclidean distance
  (physical units, via ``scipy.ndimage.distance_transform_edt(..., sampling=spacing)``)
  from that corner to the nearest border corner of B.

With ``d_tp``/``a_t`` the truth->prediction distances and truth surfel areas, and
``d_pt``/``a_p`` the prediction->truth distances and prediction surfel areas:

* ``hd``   = ``max(max(d_tp), max(d_pt))`` (Hausdorff distance, mm).
* ``hd95`` = DeepMind ``compute_robust_hausdorff(percent)``: per direction the
  surfel-area-weighted percentile -- the smallest distance whose cumulative
  area fraction (distances sorted ascending) reaches ``percentile / 100`` -- then
  the larger of the two directions (mm).
* ``assd`` = ``(sum(d_tp * a_t) + sum(d_pt * a_p)) / (sum(a_t) + sum(a_p))``: the
  area-weighted mean over *both* surfaces pooled (mm). DeepMind's
  ``compute_average_surface_distance`` instead returns the directed pair
  ``(sum(d_tp*a_t)/sum(a_t), sum(d_pt*a_p)/sum(a_p))``; that pair is available
  as :attr:`SurfaceDistances.average_surface_distances` from
  :func:`surface_distances`. The pooled value lies between the two directed ones.
* ``nsd``  = ``(sum(a_t[d_tp <= tol]) + sum(a_p[d_pt <= tol])) / (sum(a_t) + sum(a_p))``
  (normalised surface Dice / DeepMind ``compute_surface_dice_at_tolerance``; in [0, 1]).

Empty masks (per label, after the label/region has been selected):

=====================  =======  =======  =======  =======
case                   ``hd``   ``hd95`` ``assd`` ``nsd``
=====================  =======  =======  =======  =======
both present           finite   finite   finite   [0, 1]
both empty             NaN      NaN      NaN      NaN
only one empty         +inf     +inf     +inf     0.0
=====================  =======  =======  =======  =======

(DeepMind returns ``inf`` for the Hausdorff distances when both masks are empty;
here every metric is NaN so that "label absent from both" is never mistaken for
a failure.)

Relation to MONAI:

* NSD equals MONAI ``SurfaceDiceMetric(class_thresholds=[tol], use_subvoxels=True)``
  (same corner grid, same area table, ``<=`` tolerance), up to MONAI's float32 output.
* HD/HD95 differ from MONAI ``HausdorffDistanceMetric``: MONAI takes the *edge
  voxels* (foreground voxels with a face-neighbour in the background, found by
  binary erosion) and measures distances between their *voxel centres*; the 95th
  percentile is the unweighted ``torch.quantile`` (linear interpolation) over
  those distances. Here distances are between border corners and the percentile
  is surfel-area weighted. Every border corner lies within half a voxel diagonal
  of an edge-voxel centre and vice versa, so the Hausdorff distances (percentile
  100) of the two definitions differ by at most one voxel diagonal
  ``sqrt(sum(spacing**2))``; no such bound holds for HD95.

Implementation: the metrics never one-hot the volume and never run a distance
transform. The bounding box of every label is found in one pass: a compiled
scan of the runs of both maps at once when both are uint8 (the usual label
map), else one ``scipy.ndimage.find_objects`` pass per map; each label (or
region, the union of its member ids) is processed inside the union box of its
truth and prediction boxes, on the corner grid of that crop (one byte per
corner while the border corners are coded, one bit while they are searched).
The nearest border corner of the other surface is searched exactly on the
integer corner grid: the offsets to try are the ``_OFFSET_BUDGET`` grid offsets
nearest to the origin, sorted by their distance, and each surfel takes the first
offset that lands on a border corner of the other mask (a compiled loop per
surfel, :mod:`trackeval.metrics.compiled`; most surfels of a plausible
prediction stop within a few offsets, and a surfel that follows its neighbour
along the last axis skips the offsets the triangle inequality rules out).
Surfels with no border corner within that radius (rare) are answered by an
exact ``scipy.spatial.cKDTree`` query, over the window of the other surface
that can hold their nearest corners.
The crop is padded by the search radius, so memory is bounded by the largest crop, never the volume.

Memory order: nibabel returns Fortran-ordered arrays. Such a pair of maps is
processed as its C-contiguous transposed view (no copy; scanning a Fortran array
in C order was ~7x slower); neighbourhood codes, surfel areas and distances
follow the original axis order. The summaries never sum over the surfels in
their memory order: the surfels are counted per (distance, neighbourhood code),
integers, and every sum runs over those counts in a fixed order, so the result
is bit-identical for a C-ordered copy, in any thread, without sorting the
surfels. Every distance is computed from the integer corner offset with one
formula, and the area table reproduces MONAI's float32 table bit for bit without
importing MONAI or torch.

Modules: this one holds the public functions and their argument checks (through
:mod:`trackeval.metrics.checks`); :mod:`trackeval.metrics._surface_crop` the
memory order and the label boxes; :mod:`trackeval.metrics._surface_search` the
surfel areas, the border corners and the nearest-corner search.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from trackeval.metrics._surface_crop import box_for, mask_box, oriented, union_box, union_label_boxes
from trackeval.metrics._surface_search import METRIC_KEYS, Geometry, find_nearest, label_metrics, surfaces
from trackeval.metrics.checks import (
    check_integer,
    check_label_map,
    check_number,
    check_same_shape,
    is_integer,
    is_number,
)

# scipy (~0.2 s to import) is imported by the functions that use it: Dice/IoU-only runs, which import this
# module through trackeval.metrics, never load it

__all__ = [
    "Label",
    "SurfaceDistances",
    "assd",
    "hausdorff",
    "hd95",
    "nsd",
    "surface_distances",
    "surface_metrics",
]

Label = int | tuple[int, ...]
"""A label id, or a tuple of ids forming an nnU-Net style region (union of the ids)."""

#: the module of the compiled loops, imported on first use (numba: ~0.45 CPU-s per process); a process pool can
#: import it once before it forks its workers (:func:`trackeval.engine.executors.map_cases`' ``preload``)
COMPILED_MODULE = "trackeval.metrics.compiled"

# Grid offsets in the search table, nearest first (a radius of about 8.4 mm for
# 0.7 x 0.7 x 2.5 mm CT voxels); the crop is padded by that radius. Surfels
# farther than that go to the k-d tree: on the 6 UMD cases of the end-to-end
# benchmark 1024 offsets left up to 12,613 per case there (0.14 CPU-s), 2048
# about 1,000 (0.02 CPU-s); 4096 and 8192 cost as much in larger crops.
_OFFSET_BUDGET = 2048


@dataclass(frozen=True, eq=False)
class SurfaceDistances:
    """Directed surface distances of one pair of binary masks (DeepMind layout).

    Attributes:
        distances_truth_to_pred: distance (mm) from every truth surfel to the
            prediction surface, sorted ascending; ``+inf`` everywhere if the
            prediction is empty.
        distances_pred_to_truth: distance (mm) from every prediction surfel to the
            truth surface, sorted ascending; ``+inf`` everywhere if the truth is empty.
        surfel_areas_truth: area (mm^2, 3D) or length (mm, 2D) of each truth
            surfel, in the order of ``distances_truth_to_pred``.
        surfel_areas_pred: area/length of each prediction surfel, in the order of
            ``distances_pred_to_truth``.

    All arrays are float64 and read-only; an empty mask yields empty arrays.
    """

    distances_truth_to_pred: np.ndarray
    distances_pred_to_truth: np.ndarray
    surfel_areas_truth: np.ndarray
    surfel_areas_pred: np.ndarray

    @property
    def average_surface_distances(self) -> tuple[float, float]:
        """DeepMind ``compute_average_surface_distance``: ``(truth->pred, pred->truth)`` in mm.

        Each entry is NaN if the corresponding surface is empty.
        """
        return (
            _weighted_mean(self.distances_truth_to_pred, self.surfel_areas_truth),
            _weighted_mean(self.distances_pred_to_truth, self.surfel_areas_pred),
        )


# --------------------------------------------------------------------------- public API


def surface_metrics(
    pred: np.ndarray,
    truth: np.ndarray,
    spacing: Sequence[float],
    labels: Iterable[Label] | None = None,
    tolerance_mm: float = 1.0,
    percentile: float = 95.0,
    threads: int = 1,
) -> dict[Label, dict[str, float]]:
    """Compute HD, HD95, ASSD and NSD for every label in one pass per label.

    Args:
        pred: predicted label map, integer or bool dtype, 2D or 3D.
        truth: reference label map with the same shape as ``pred``.
        spacing: voxel size in mm, one positive finite value per axis (same axis
            order as the arrays).
        labels: labels to evaluate; each is an int id or a tuple of ids (a region,
            the union of the ids). ``None`` (default) evaluates every non-zero id
            present in either map. To evaluate a single region pass ``[(1, 2)]``.
        tolerance_mm: NSD tolerance in mm (``>= 0``); a surfel counts as matched
            when its distance is ``<= tolerance_mm``.
        percentile: percentile for the robust Hausdorff distance, in [0, 100].
        threads: score up to this many labels at once, each in its own thread
            (numpy releases the GIL in the heavy loops); the values do not depend
            on it. Default 1.

    Returns:
        ``{label: {"hd": ..., "hd95": ..., "assd": ..., "nsd": ...}}`` with
        distances in mm (``"hd95"`` is the ``percentile``-th robust Hausdorff
        distance) and NSD in [0, 1]. Empty-mask cases follow the table in the
        module docstring (NaN when both are empty; inf/inf/inf/0.0 when exactly
        one is empty).

    Raises:
        TypeError: non-array input, non-integer dtype, malformed labels or spacing.
        ValueError: shape mismatch, unsupported dimensionality, bad spacing,
            negative tolerance or percentile outside [0, 100].

    Examples:
        Two neighbouring pixels: each square has 4 border corners, 2 of them shared
        (distance 0) and 2 at one pixel width from the other square, all with the
        same contour length. So HD = HD95 = 1 px, ASSD = 0.5 px, and NSD is the
        fraction of corners within the tolerance.

        >>> import numpy as np
        >>> from trackeval.metrics.surface import surface_metrics
        >>> truth = np.array([[1, 0]])  # one 1 x 1 mm pixel ...
        >>> pred = np.array([[0, 1]])  # ... and its right-hand neighbour
        >>> res = surface_metrics(pred, truth, spacing=(1.0, 1.0))
        >>> sorted(res[1].items())
        [('assd', 0.5), ('hd', 1.0), ('hd95', 1.0), ('nsd', 1.0)]
        >>> res = surface_metrics(pred, truth, spacing=(1.0, 2.0), labels=[1, 2])  # 2 mm wide pixels
        >>> sorted(res[1].items())
        [('assd', 1.0), ('hd', 2.0), ('hd95', 2.0), ('nsd', 0.5)]
        >>> sorted(res[2].items())  # label 2 is absent from both maps
        [('assd', nan), ('hd', nan), ('hd95', nan), ('nsd', nan)]
    """
    pred_arr, truth_arr = _check_maps(pred, truth)
    spacing_t = _check_spacing(spacing, pred_arr.ndim)
    tol = check_number("tolerance_mm", tolerance_mm, at_least=0)
    pct = check_number("percentile", percentile, at_least=0, at_most=100)
    n_threads = check_integer("threads", threads, at_least=1)
    requested = _check_labels(labels)

    pred_arr, truth_arr, flip = oriented(pred_arr, truth_arr)
    boxes = union_label_boxes(truth_arr, pred_arr)
    if requested is None:
        requested = sorted(boxes)

    geometry = Geometry.get(spacing_t, flip, _OFFSET_BUDGET)

    members_of = [label if isinstance(label, tuple) else (label,) for label in requested]
    label_boxes = [union_box([box_for(truth_arr, pred_arr, boxes, m) for m in members]) for members in members_of]

    def score(i: int) -> dict[str, float]:
        if label_boxes[i] is None:
            return dict.fromkeys(METRIC_KEYS, math.nan)
        return label_metrics(truth_arr, pred_arr, label_boxes[i], members_of[i], geometry, tol, pct)

    workers = min(n_threads, len(requested))
    if workers <= 1:
        scores = [score(i) for i in range(len(requested))]
    else:
        scores = _in_threads(
            score, [0 if box is None else math.prod(s.stop - s.start for s in box) for box in label_boxes], workers
        )
    return dict(zip(requested, scores, strict=True))


def _in_threads(score: Callable[[int], dict[str, float]], sizes: list[int], workers: int) -> list[dict[str, float]]:
    """``[score(i) for i in range(len(sizes))]`` in ``workers`` threads.

    ``sizes``: each item's crop (voxels), which its working memory is proportional to. One thread takes the items
    from the largest down, the others from the smallest up: until they meet, the largest crops are scored one at
    a time, so the peak stays near that of one thread (measured on the 6-case UMD set, with the pool's single
    malloc arena: 223-226 MiB per worker either way).
    """
    order = deque(sorted(range(len(sizes)), key=lambda i: -sizes[i]))
    lock = threading.Lock()
    out: list[dict[str, float]] = [{} for _ in sizes]

    def run(largest_first: bool) -> None:
        while True:
            with lock:
                if not order:
                    return
                i = order.popleft() if largest_first else order.pop()
            out[i] = score(i)

    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(run, k == 0) for k in range(workers)]:
            future.result()
    return out


def hausdorff(
    pred: np.ndarray,
    truth: np.ndarray,
    spacing: Sequence[float],
    labels: Iterable[Label] | None = None,
) -> dict[Label, float]:
    """Symmetric Hausdorff distance (mm) per label on the surfel corner grid.

    See :func:`surface_metrics` for arguments, errors and empty-mask values.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.surface import hausdorff
        >>> truth = np.array([[1, 0]])  # one 1 x 1 mm pixel ...
        >>> pred = np.array([[0, 1]])  # ... and its right-hand neighbour
        >>> hausdorff(pred, truth, spacing=(1.0, 1.0))
        {1: 1.0}
        >>> hausdorff(pred, truth, spacing=(1.0, 2.0), labels=[1, 2])
        {1: 2.0, 2: nan}
        >>> hausdorff(np.zeros_like(truth), truth, spacing=(1.0, 1.0))  # nothing predicted
        {1: inf}
    """
    return _select(surface_metrics(pred, truth, spacing, labels), "hd")


def hd95(
    pred: np.ndarray,
    truth: np.ndarray,
    spacing: Sequence[float],
    labels: Iterable[Label] | None = None,
    percentile: float = 95.0,
) -> dict[Label, float]:
    """Robust (surfel-area-weighted ``percentile``) Hausdorff distance (mm) per label.

    This is DeepMind's ``compute_robust_hausdorff``, not MONAI's unweighted
    voxel-centre percentile (see the module docstring). See
    :func:`surface_metrics` for arguments, errors and empty-mask values.

    Examples:
        Per direction the 4 corner distances are ``[0, 0, 1, 1]`` with equal weights
        (cumulative fractions 0.25, 0.5, 0.75, 1.0).

        >>> import numpy as np
        >>> from trackeval.metrics.surface import hd95
        >>> truth = np.array([[1, 0]])  # one 1 x 1 mm pixel ...
        >>> pred = np.array([[0, 1]])  # ... and its right-hand neighbour
        >>> hd95(pred, truth, spacing=(1.0, 1.0))
        {1: 1.0}
        >>> hd95(pred, truth, spacing=(1.0, 1.0), percentile=40)  # first fraction >= 0.4 is at distance 0
        {1: 0.0}
    """
    return _select(surface_metrics(pred, truth, spacing, labels, percentile=percentile), "hd95")


def assd(
    pred: np.ndarray,
    truth: np.ndarray,
    spacing: Sequence[float],
    labels: Iterable[Label] | None = None,
) -> dict[Label, float]:
    """Average symmetric surface distance (mm) per label, area-weighted over both surfaces.

    ``(sum(d_tp * a_t) + sum(d_pt * a_p)) / (sum(a_t) + sum(a_p))``; the directed
    DeepMind pair is available from :func:`surface_distances`. See
    :func:`surface_metrics` for arguments, errors and empty-mask values.

    Examples:
        Each surface has 4 equal-length corners, at distances ``[0, 0, 1, 1]`` px.

        >>> import numpy as np
        >>> from trackeval.metrics.surface import assd
        >>> truth = np.array([[1, 0]])  # one 1 x 1 mm pixel ...
        >>> pred = np.array([[0, 1]])  # ... and its right-hand neighbour
        >>> assd(pred, truth, spacing=(1.0, 1.0))
        {1: 0.5}
        >>> assd(pred, truth, spacing=(1.0, 2.0))
        {1: 1.0}
    """
    return _select(surface_metrics(pred, truth, spacing, labels), "assd")


def nsd(
    pred: np.ndarray,
    truth: np.ndarray,
    spacing: Sequence[float],
    tolerance_mm: float,
    labels: Iterable[Label] | None = None,
) -> dict[Label, float]:
    """Normalised surface Dice at ``tolerance_mm`` (mm) per label, in [0, 1].

    Matches MONAI ``SurfaceDiceMetric(use_subvoxels=True)``. See
    :func:`surface_metrics` for arguments, errors and empty-mask values.

    Examples:
        Half of the corners of each surface are shared, the other half lie 1 px away.

        >>> import numpy as np
        >>> from trackeval.metrics.surface import nsd
        >>> truth = np.array([[1, 0]])  # one 1 x 1 mm pixel ...
        >>> pred = np.array([[0, 1]])  # ... and its right-hand neighbour
        >>> nsd(pred, truth, spacing=(1.0, 1.0), tolerance_mm=1.0)
        {1: 1.0}
        >>> nsd(pred, truth, spacing=(1.0, 1.0), tolerance_mm=0.5)
        {1: 0.5}
        >>> nsd(np.zeros_like(truth), truth, spacing=(1.0, 1.0), tolerance_mm=1.0)  # nothing predicted
        {1: 0.0}
    """
    return _select(surface_metrics(pred, truth, spacing, labels, tolerance_mm=tolerance_mm), "nsd")


def surface_distances(
    pred_mask: np.ndarray,
    truth_mask: np.ndarray,
    spacing: Sequence[float],
) -> SurfaceDistances:
    """Directed surfel distances and areas for one pair of binary masks.

    Args:
        pred_mask: predicted mask (bool, or integer where non-zero is foreground), 2D or 3D.
        truth_mask: reference mask of the same shape.
        spacing: voxel size in mm, one positive finite value per axis.

    Returns:
        A :class:`SurfaceDistances` with distances in mm sorted ascending (ties
        ordered by area, as DeepMind does). If both masks are empty all arrays are
        empty; if exactly one is empty its arrays are empty and the other
        direction's distances are all ``+inf``.

    Raises:
        TypeError, ValueError: as for :func:`surface_metrics`.

    Examples:
        >>> import numpy as np
        >>> from trackeval.metrics.surface import surface_distances
        >>> truth = np.array([[1, 0]])  # one 1 x 1 mm pixel ...
        >>> pred = np.array([[0, 1]])  # ... and its right-hand neighbour
        >>> d = surface_distances(pred, truth, spacing=(1.0, 1.0))
        >>> d.distances_truth_to_pred.tolist(), d.distances_pred_to_truth.tolist()
        ([0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0])
        >>> [round(float(a), 4) for a in d.surfel_areas_truth]  # a diagonal half-pixel segment each
        [0.7071, 0.7071, 0.7071, 0.7071]
        >>> d.average_surface_distances
        (0.5, 0.5)
    """
    pred_arr, truth_arr = _check_maps(pred_mask, truth_mask, names=("pred_mask", "truth_mask"))
    spacing_t = _check_spacing(spacing, pred_arr.ndim)
    pred_arr, truth_arr, flip = oriented(pred_arr, truth_arr)
    pred_bool = pred_arr if pred_arr.dtype == np.bool_ else pred_arr != 0
    truth_bool = truth_arr if truth_arr.dtype == np.bool_ else truth_arr != 0
    box = union_box([mask_box(truth_bool), mask_box(pred_bool)])
    if box is None:
        empty = _readonly(np.zeros(0))
        return SurfaceDistances(empty, empty, empty, empty)
    geometry = Geometry.get(spacing_t, flip, _OFFSET_BUDGET)
    truth_surface, pred_surface = surfaces(truth_bool, pred_bool, box, (True,), geometry)
    a_t, a_p = geometry.table[truth_surface.codes], geometry.table[pred_surface.codes]
    if a_t.size and a_p.size:
        d_tp = find_nearest(pred_surface, truth_surface.flat, geometry).distances(geometry)
        d_pt = find_nearest(truth_surface, pred_surface.flat, geometry).distances(geometry)
    else:  # at most one surface present: its distances are infinite
        d_tp, d_pt = np.full(a_t.size, np.inf), np.full(a_p.size, np.inf)
    d_tp, a_t = _sort_pairs(d_tp, a_t)
    d_pt, a_p = _sort_pairs(d_pt, a_p)
    return SurfaceDistances(_readonly(d_tp), _readonly(d_pt), _readonly(a_t), _readonly(a_p))


# --------------------------------------------------------------------------- validation


def _check_maps(
    pred: object, truth: object, names: tuple[str, str] = ("pred", "truth")
) -> tuple[np.ndarray, np.ndarray]:
    arrays = [check_label_map(name, value, (2, 3)) for name, value in zip(names, (pred, truth), strict=True)]
    check_same_shape(names, arrays[0], arrays[1])
    return arrays[0], arrays[1]


def _check_spacing(spacing: Sequence[float], ndim: int) -> tuple[float, ...]:
    if isinstance(spacing, str | bytes) or not isinstance(spacing, Sequence | np.ndarray):
        raise TypeError(f"spacing must be a sequence of {ndim} floats (mm), got {type(spacing).__name__}")
    values = list(np.asarray(spacing).ravel()) if isinstance(spacing, np.ndarray) else list(spacing)
    if len(values) != ndim:
        raise ValueError(f"spacing must have one value per axis ({ndim}), got {len(values)}: {spacing!r}")
    out = []
    for v in values:
        if not is_number(v):
            raise TypeError(f"spacing values must be numbers, got {v!r} in {spacing!r}")
        f = float(v)
        if not math.isfinite(f) or f <= 0:
            raise ValueError(f"spacing values must be positive and finite (mm), got {spacing!r}")
        out.append(f)
    return tuple(out)


def _check_label_id(value: object, context: object) -> int:
    if not is_integer(value):
        raise TypeError(f"label ids must be integers, got {value!r} in {context!r}")
    return int(value)  # type: ignore[call-overload]


def _check_labels(labels: Iterable[Label] | None) -> list[Label] | None:
    if labels is None:
        return None
    if isinstance(labels, int | np.integer | str | bytes) or not isinstance(labels, Iterable):
        raise TypeError(
            f"labels must be None or an iterable of ints / tuples of ints, got {labels!r}; "
            "wrap a single label or region in a list, e.g. [3] or [(1, 2)]"
        )
    out: list[Label] = []
    for label in labels:
        if isinstance(label, tuple):
            if not label:
                raise ValueError("a region label must contain at least one id, got ()")
            out.append(tuple(_check_label_id(m, label) for m in label))
        else:
            out.append(_check_label_id(label, labels))
    return out


def _sort_pairs(distances: np.ndarray, areas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((areas, distances))
    return distances[order], areas[order]


def _weighted_mean(distances: np.ndarray, areas: np.ndarray) -> float:
    """``sum(distances * areas) / sum(areas)`` by numpy's pairwise summation (not BLAS, whose last bits depend on
    its thread count); NaN for empty arrays."""
    if distances.size == 0:
        return math.nan
    return float(np.sum(distances * areas) / np.sum(areas))


def _select(results: dict[Label, dict[str, float]], key: str) -> dict[Label, float]:
    return {label: values[key] for label, values in results.items()}


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a
