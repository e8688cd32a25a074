"""Click and box simulation of the IMIS protocol (pure functions: masks + a seeded generator in, prompts out).

All functions work on 2D or 3D boolean masks; coordinates are array indices. The semantics follow the original
IMIS-Bench code (``get_points_from_mask``, ``get_bboxes_from_mask`` and the multi-turn loop of ``test.py``):

* first click: the centroid of the target pixels, the ``max(1, int(n * fraction))`` pixels closest to it
  (Euclidean, stable order on ties), one of them uniformly at random, label 1;
* box: the tight inclusive box; with jitter ``j`` every corner coordinate moves by a uniform integer in
  ``[-j, j]``, clipped to the image;
* next click, ``random_error``: a uniformly random pixel of prediction XOR truth, label 1 where the truth is
  foreground (a missed pixel), 0 where it is background (a false alarm);
* next click, ``center_error`` ("largest-component centre"): the largest connected false-negative or
  false-positive region (full connectivity; ties: false negatives first, then scan order), and inside it the
  pixel farthest from the region's boundary (Euclidean distance transform with the image border as boundary;
  ties: scan order). It uses no random numbers.
* next click, ``ritm``: the evaluation clicker of RITM / SimpleClick (``isegm/inference/clicker.py``,
  ``Clicker._get_next_click``) exactly: ``fn = truth & ~pred`` and ``fp = ~truth & pred``, each padded by one
  zero pixel on every side, its Euclidean distance transform, the padding cropped (so the image border counts
  as boundary), and the pixels already clicked in this sequence set to 0 (RITM's ``not_clicked_map``). If the
  deepest false-negative distance is larger than the deepest false-positive one, the click is positive,
  otherwise (ties included) negative, at the first pixel (row-major ``np.argwhere`` order) where that distance
  map reaches its maximum. The distance transform is scipy's exact ``distance_transform_edt``; RITM's
  ``cv2.distanceTransform(..., cv2.DIST_L2, 0)`` is the same exact L2 transform (older RITM code used the 5x5
  approximate mask, which can move a click between near-equal depths). Unlike RITM (which then clicks pixel
  (0, 0) as a negative), no click is made when no unclicked error pixel is left. No random numbers.

An empty error region gives no click (``None``): the prediction is already exact. (With ``imis.protocol:
imis_bench`` the loop then sends IMIS-Bench's label ``-1`` placeholder,
:func:`trackeval.benchmarks.imis.session.noop_click`.)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from trackeval.benchmarks.imis.protocol import Box, Click


def _inner_coords(truth: np.ndarray, fraction: float) -> np.ndarray:
    """``(k, ndim)`` indices of the ``max(1, int(n * fraction))`` target pixels closest to the centroid."""
    coords = np.argwhere(truth)
    if len(coords) == 0:
        raise ValueError("the first click needs a non-empty target mask")
    dist = np.linalg.norm(coords - coords.mean(axis=0), axis=1)
    return coords[np.argsort(dist, kind="stable")[: max(1, int(len(coords) * fraction))]]


def first_click(truth: np.ndarray, rng: np.random.Generator, fraction: float = 0.5) -> Click:
    """The initial positive click (see the module docstring); draws one integer from ``rng``.

    Raises ``ValueError`` for an empty ``truth`` (the protocol only evaluates non-empty targets).
    """
    inner = _inner_coords(truth, fraction)
    return Click(tuple(int(c) for c in inner[rng.integers(len(inner))]), 1)


def inner_pixels(truth: np.ndarray, fraction: float = 0.5) -> np.ndarray:
    """Bool mask of the pixels :func:`first_click` draws from (for checks and plots)."""
    out = np.zeros(truth.shape, dtype=bool)
    out[tuple(_inner_coords(truth, fraction).T)] = True
    return out


def bounding_box(truth: np.ndarray, rng: np.random.Generator, jitter: int = 0) -> Box:
    """The tight inclusive box of a non-empty mask, each coordinate jittered by ``[-jitter, jitter]`` px."""
    coords = np.argwhere(truth)
    if len(coords) == 0:
        raise ValueError("bounding_box needs a non-empty target mask")
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    if jitter > 0:
        top = np.asarray(truth.shape) - 1
        lo = np.clip(lo + rng.integers(-jitter, jitter + 1, size=lo.shape), 0, top)
        hi = np.clip(hi + rng.integers(-jitter, jitter + 1, size=hi.shape), 0, top)
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    return Box(tuple(int(v) for v in lo), tuple(int(v) for v in hi))


def error_click(
    pred: np.ndarray,
    truth: np.ndarray,
    rng: np.random.Generator,
    mode: str,
    clicked: Iterable[tuple[int, ...]] = (),
) -> Click | None:
    """The next corrective click for ``pred`` against ``truth`` (bool masks of one shape), or ``None``.

    Args:
        pred: the binarised previous prediction.
        truth: the target mask.
        rng: the turn's generator (``random_error`` draws one integer from it; the others none).
        mode: ``random_error``, ``center_error`` or ``ritm``.
        clicked: coordinates already clicked in this sequence (only ``ritm`` uses them: they are never
            clicked again, as RITM's ``not_clicked_map``).
    """
    if mode == "random_error":
        errors = np.argwhere(pred != truth)
        if len(errors) == 0:
            return None
        chosen = tuple(int(c) for c in errors[rng.integers(len(errors))])
        return Click(chosen, int(truth[chosen]))
    if mode == "center_error":
        return _center_click(pred, truth)
    if mode == "ritm":
        return ritm_click(pred, truth, clicked)
    raise ValueError(f"unknown click mode {mode!r}")


def _center_click(pred: np.ndarray, truth: np.ndarray) -> Click | None:
    from scipy import ndimage  # here, not at import: every CLI start loads this module (IMIS is registered)

    structure = ndimage.generate_binary_structure(truth.ndim, truth.ndim)
    best: tuple[int, np.ndarray, int] | None = None
    for label, region in ((1, truth & ~pred), (0, pred & ~truth)):
        components, n = ndimage.label(region, structure)
        if n == 0:
            continue
        sizes = np.bincount(components.ravel())[1:]
        k = int(np.argmax(sizes))
        if best is None or sizes[k] > best[0]:
            best = (int(sizes[k]), components == k + 1, label)
    if best is None:
        return None
    _, component, label = best
    depth = ndimage.distance_transform_edt(np.pad(component, 1))[(slice(1, -1),) * component.ndim]
    chosen = np.unravel_index(int(np.argmax(depth)), depth.shape)
    return Click(tuple(int(c) for c in chosen), label)


def ritm_click(pred: np.ndarray, truth: np.ndarray, clicked: Iterable[tuple[int, ...]] = ()) -> Click | None:
    """RITM / SimpleClick's next click (see the module docstring); ``None`` when no unclicked error pixel is left."""
    from scipy import ndimage

    pred, truth = np.asarray(pred, dtype=bool), np.asarray(truth, dtype=bool)
    not_clicked = np.ones(truth.shape, dtype=bool)
    for coords in clicked:
        not_clicked[tuple(coords)] = False
    inner = (slice(1, -1),) * truth.ndim
    fn_dt = ndimage.distance_transform_edt(np.pad(truth & ~pred, 1))[inner] * not_clicked
    fp_dt = ndimage.distance_transform_edt(np.pad(pred & ~truth, 1))[inner] * not_clicked
    fn_max, fp_max = float(fn_dt.max()), float(fp_dt.max())
    if fn_max == 0.0 and fp_max == 0.0:
        return None
    positive = fn_max > fp_max
    depth, deepest = (fn_dt, fn_max) if positive else (fp_dt, fp_max)
    chosen = np.argwhere(depth == deepest)[0]
    return Click(tuple(int(c) for c in chosen), int(positive))
