"""The distance-search engine of :mod:`trackeval.metrics.surface`: the surfel-area table, the border corners of a
label's crop (:class:`Surface`), the search for each corner's nearest border corner of the other surface
(:func:`find_nearest`: the offset table, then a k-d tree), and one label's HD, HD95, ASSD and NSD
(:func:`label_metrics`). The definitions and the design are those of :mod:`trackeval.metrics.surface`'s docstring.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from trackeval.metrics._surface_crop import Box, words

# scipy (~0.2 s to import) and the compiled loops (numba) are imported by the functions that use them (see
# trackeval.metrics.surface)

#: the metrics of one label, in the order :func:`label_metrics` returns them
METRIC_KEYS = ("hd", "hd95", "assd", "nsd")

# Source corners sampled to bound the window the k-d tree fallback is built over (see _window).
_WINDOW_SAMPLE = 1024

# --------------------------------------------------------------------------- surfel areas

#: Neighbourhood-code kernels (MONAI ``ENCODING_KERNEL``, DeepMind's layout), original axis order.
_ENCODING_KERNEL = {
    2: np.array([[8, 4], [2, 1]], dtype=np.int64),
    3: np.array([[[128, 64], [32, 16]], [[8, 4], [2, 1]]], dtype=np.int64),
}

# DeepMind's marching-cubes surfel normals per 3D neighbourhood code (google-deepmind/surface-distance,
# lookup_tables.py, as copied into MONAI's metrics/utils.py; Apache-2.0). Only the absolute components enter
# the area, so code c's entry lists its non-zero normals in table order, three digits each: 8 x |n_x|, 8 x |n_y|,
# 8 x |n_z| ("0": no normal). Checked against MONAI's table in tests/test_metrics_surface.py.
_NORMALS_3D = (
    "0 111 111 220220 111 202202 111111 400222111 111 111111 202202 400222111 220220 400222111 400222111 400400 "
    "111 022022 111111 040222111 111111 004222111 111111111 111222222111 111111 022022111 202202111 111333022202 "
    "111220220 333022111220 400111222111 400111222 111 111111 022022 040111222 111111 111202202 022022111 "
    "333022111202 111111 111111111 004222111 222222111111 111220220 400222111111 022333111220 400222111 220220 "
    "040222111 040111222 040040 220220111 333202111220 111040222111 040222111 111220220 040222111111 333220111202 "
    "040222111 220220220220 220220111 111220220 220220 111 111111 111111 111220220 022022 004222111 022022111 "
    "333022111220 111111 111111111 111202202 400222111111 040222111 222222111111 202333022111 400222111 202202 "
    "004222111 111202202 202333220111 004222111 004004 111111222004 111222004 202202111 004222111111 202202202202 "
    "111202202 202333220111 004222111 111202202 202202 111111 111111111 111022022 040111222111 022022111 "
    "004222111111 022022022022 022022111 111111111 111111111111 004222111111 111111111 040222111111 111111111 "
    "022022111 111111 400222111 222111222111 333022111202 040222111 333220022111 111222004 111022022 022022 "
    "400222111111 111111111 202202111 111111 220220111 111111 111111 111 111 111111 111111 220220111 111111 "
    "202202111 111111111 400222111111 022022 111022022 111222004 333220022111 040222111 333022111202 222111222111 "
    "400222111 111111 022022111 111111111 040222111111 111111111 004222111111 111111111111 111111111 022022111 "
    "022022022022 004222111111 022022111 040111222111 111022022 111111111 111111 202202 111202202 004222111 "
    "202333220111 111202202 202202202202 004222111111 202202111 111222004 111111222004 004004 004222111 "
    "202333220111 111202202 004222111 202202 400222111 202333022111 222222111111 040222111 400222111111 111202202 "
    "111111111 111111 333022111220 022022111 004222111 022022 111220220 111111 111111 111 220220 111220220 "
    "220220111 220220220220 040222111 333220111202 040222111111 111220220 040222111 111040222111 333202111220 "
    "220220111 040040 040111222 040222111 220220 400222111 022333111220 400222111111 111220220 222222111111 "
    "004222111 111111111 111111 333022111202 022022111 111202202 111111 040111222 022022 111111 111 400111222 "
    "400111222111 333022111220 111220220 111333022202 202202111 022022111 111111 111222222111 111111111 004222111 "
    "111111 040222111 111111 022022 111 400400 400222111 400222111 220220 400222111 202202 111111 111 400222111 "
    "111111 202202 111 220220 111 111 0 "
)


def _normals_3d() -> np.ndarray:
    """``(256, 4, 3)`` float32 absolute normal components (DeepMind/MONAI order, zero-padded)."""
    out = np.zeros((256, 4, 3), dtype=np.float32)
    for code, entry in enumerate(_NORMALS_3D.split()):
        if entry != "0":
            out[code, : len(entry) // 3] = np.reshape([int(ch) for ch in entry], (-1, 3))
    return out / np.float32(8)


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correctly rounded float32 ``a * b + c`` (a fused multiply-add, as torch's CPU vector norm uses).

    ``a * b`` is exact in float64 (24 + 24 bits); the float64 sum is rounded to odd (Boldo & Melquiond), which
    makes the final rounding to float32 correct despite the two roundings.
    """
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)  # TwoSum: s + err == p + c exactly
    even = (s.view(np.int64) & 1) == 0
    s = np.where((err != 0) & even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def _area_table(spacing: tuple[float, ...]) -> np.ndarray:
    """Surfel area (mm^2, 3D) or contour length (mm, 2D) per neighbourhood code, float64.

    Bit-identical to MONAI's ``get_code_to_measure_table(spacing)`` (converted to float64), which is computed in
    float32 in 3D: ``sum_k ||normal_k * (s1 s2, s0 s2, s0 s1)||`` with torch's fused multiply-add vector norm and
    a left-to-right sum. In 2D MONAI's float64 table of diagonal and axis-aligned segment lengths.
    """
    if len(spacing) == 2:
        first, second = spacing
        diag = 0.5 * np.linalg.norm(spacing)
        return np.array(
            [0, diag, diag, second, diag, first, 2 * diag, diag, diag, 2 * diag, first, diag, second, diag, diag, 0],
            dtype=np.float64,
        )
    s0, s1, s2 = spacing
    v = _normals_3d() * np.array([s1 * s2, s0 * s2, s0 * s1], dtype=np.float32)
    square = v[..., 0] * v[..., 0]
    square = _fma32(v[..., 1], v[..., 1], square)
    square = _fma32(v[..., 2], v[..., 2], square)
    norms = np.sqrt(square)
    area = norms[:, 0]
    for k in range(1, norms.shape[1]):
        area = area + norms[:, k]
    return area.astype(np.float64)


# --------------------------------------------------------------------------- the search


class Geometry:
    """Spacing-dependent constants, for arrays processed as given (``flip`` False) or transposed (True).

    ``spacing``, the area table and the search offsets' distances are in the original axis order; ``weights``
    (the neighbourhood-code weights), ``offsets``, ``grid_spacing`` and ``pad`` in the working (possibly
    transposed) one, so every neighbourhood code and distance equals the one of the untransposed arrays.
    """

    def __init__(self, spacing: tuple[float, ...], flip: bool, budget: int) -> None:
        ndim = len(spacing)
        order = slice(None, None, -1) if flip else slice(None)
        self.spacing = np.asarray(spacing, dtype=np.float64)
        self.flip = flip
        self.table = _area_table(spacing)
        kernel = _ENCODING_KERNEL[ndim]
        self.full_code = int(kernel.sum())
        working = kernel.T if flip else kernel
        # 2 x 2 x 2 uint8, flat, as compiled.border_codes takes them; a 2D kernel's second plane weighs 0
        weights = working if ndim == 3 else np.stack([working, np.zeros_like(working)])
        self.weights = np.ascontiguousarray(weights, dtype=np.uint8).ravel()
        offsets, self.offset_distances = _search_offsets(self.spacing, budget)
        # the table's distinct distances, ascending, and each offset's position among them
        self.distinct_distances, self.offset_rank = np.unique(self.offset_distances, return_inverse=True)
        self.offsets = offsets[:, order]
        self.grid_spacing = self.spacing[order]
        self.restart = _restart_table(self.offset_distances, float(self.grid_spacing[-1]))
        # every border corner plus every search offset stays inside the corner grid of the padded crop (and
        # compiled.border_codes reads one corner beyond the crop's last: at least 2)
        self.pad = tuple(max(int(r) + 1, 2) for r in np.abs(self.offsets).max(axis=0))

    @staticmethod
    @lru_cache(maxsize=32)
    def get(spacing: tuple[float, ...], flip: bool, budget: int) -> Geometry:
        return Geometry(spacing, flip, budget)


def _search_offsets(spacing: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer corner-grid offsets within the radius that holds about ``budget`` of them, nearest first.

    Returns ``(offsets, distances)``: ``(K, ndim)`` int64 (original axis order, the zero offset first) and their
    distances (mm, float64, ascending; ties in lexicographic order). Every offset left out is farther than every
    one kept: the box searched reaches one step beyond the radius on every axis.
    """
    ndim = spacing.size
    unit_ball = math.pi if ndim == 2 else 4.0 * math.pi / 3.0
    radius = (budget * float(np.prod(spacing)) / unit_ball) ** (1.0 / ndim)
    axes = [np.arange(-(int(radius // s) + 1), int(radius // s) + 2) for s in spacing]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, ndim)
    distances = _offset_norm(list(grid.T), spacing)
    keep = np.flatnonzero(distances <= radius)
    keep = keep[np.argsort(distances[keep], kind="stable")]
    return grid[keep], distances[keep]


def _restart_table(distances: np.ndarray, step: float) -> np.ndarray:
    """``restart[k]``: the first offset whose distance is at least ``distances[k] - step`` (minus 1e-9 mm for
    rounding), int64. A corner whose nearest other-surface corner is at ``distances[k]`` has a neighbour ``step`` mm
    away (along the last axis) whose nearest one is at least ``distances[k] - step`` away (triangle inequality),
    so that neighbour's offsets before ``restart[k]`` cannot hit: its scan may start there
    (:func:`trackeval.metrics.compiled.first_hits`). A corner with no hit in the table is farther than its last
    offset, so ``restart[-1]`` serves it as well.
    """
    return np.searchsorted(distances, distances - step - 1e-9, side="left").astype(np.int64)


@dataclass(frozen=True, eq=False)
class Surface:
    """The border corners of one mask on the corner grid of its padded crop (C order, shape ``shape``).

    ``bits`` is the flat corner grid, one bit per corner (set at the border corners; little bit order, as
    :func:`trackeval.metrics.compiled.first_hits` reads it), and ``deltas`` the search offsets as flat offsets on
    this grid (every border corner plus every offset lies inside it: the crop is padded by the search radius).
    ``flat`` holds the border corners' flat indices (ascending), ``codes`` their neighbourhood codes (the index
    of their surfel area in the geometry's table).
    """

    bits: np.ndarray
    shape: tuple[int, ...]
    deltas: np.ndarray
    flat: np.ndarray
    codes: np.ndarray


def _surface(arr: np.ndarray, box: Box, members: tuple, geometry: Geometry) -> Surface:
    """The :class:`Surface` of ``members`` of ``arr`` inside ``box``.

    The corner grid is that of the crop padded by ``geometry.pad`` voxels on every side (so that the search
    offsets of every border corner stay inside it). The crop's mask is written into the grid (voxel ``v`` at
    ``pad + v``), and the corners next to the crop, the only ones that can be border corners, replace it by
    their codes in place (:func:`trackeval.metrics.compiled.border_codes`), from which the border corners and a
    bit grid are gathered: one byte per corner of the padded crop while a surface is built, one bit per corner
    while it is searched (a whole-body organ's 38 MB grid is kept as 4.8 MB).
    """
    from trackeval.metrics import compiled

    sub = arr[box]
    shape = tuple(n + 2 * p - 1 for n, p in zip(sub.shape, geometry.pad, strict=True))
    corner = [p - 1 for p in geometry.pad]
    extent = [n + 1 for n in sub.shape]
    if sub.ndim == 2:  # a plane of 3D corners whose second plane of voxels (zeros) has no weight
        grid3 = np.zeros((2, *shape), dtype=np.uint8)
        grid, corner, extent = grid3[0], [0, *corner], [1, *extent]
    else:
        grid3 = grid = np.zeros(shape, dtype=np.uint8)
    mask = grid[tuple(slice(p, p + n) for p, n in zip(geometry.pad, sub.shape, strict=True))].view(np.bool_)
    if len(members) == 1:
        np.equal(sub, members[0], out=mask)
    else:
        mask[...] = np.isin(sub, members)
    corner_at, extent_at = np.array(corner, dtype=np.int64), np.array(extent, dtype=np.int64)
    n = compiled.border_codes(grid3, geometry.weights, geometry.full_code, corner_at, extent_at)
    flat, codes = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.uint8)
    bits = np.zeros(grid.size // 8 + 1, dtype=np.uint8)
    compiled.gather_nonzero(grid3, words(grid3), corner_at, extent_at, flat, codes, bits)
    strides = np.array([math.prod(shape[ax + 1 :]) for ax in range(len(shape))], dtype=np.int64)
    return Surface(bits, shape, geometry.offsets @ strides, flat, codes)


def _offset_norm(offsets: Sequence[np.ndarray], spacing: np.ndarray) -> np.ndarray:
    """Euclidean norm (mm) of integer corner offsets, one array per axis (original axis order)."""
    sq = np.zeros(offsets[0].shape, dtype=np.float64)
    for ax, off in enumerate(offsets):
        diff = off.astype(np.float64)
        diff *= spacing[ax]
        sq += diff * diff
    return np.sqrt(sq)


@dataclass(frozen=True, eq=False)
class Nearest:
    """Where the nearest border corner of the other surface is, for each query corner.

    ``offset``: the index of the query's first hit in the geometry's offset table (its distance is
    ``offset_distances[offset]``), or -1 where the table holds none; those queries, at ``far_at``, have the
    distances ``far`` (mm) from the k-d tree.
    """

    offset: np.ndarray
    far_at: np.ndarray
    far: np.ndarray

    def distances(self, geometry: Geometry) -> np.ndarray:
        """Distance (mm) of every query, float64."""
        out = geometry.offset_distances[self.offset]
        out[self.far_at] = self.far
        return out


def find_nearest(source: Surface, query_flat: np.ndarray, geometry: Geometry) -> Nearest:
    """The nearest border corner of ``source`` for each corner ``query_flat`` (see :class:`Nearest`).

    Each query tries the geometry's offsets nearest first and stops at its first hit (a compiled loop,
    :func:`trackeval.metrics.compiled.first_hits`): the exact minimum over all corners, since every offset left
    out is farther than the last one tried. Most surfels of a plausible prediction stop within a few offsets.
    Queries without a hit in the table go to :func:`_kdtree_distances`.
    """
    from trackeval.metrics import compiled

    offset = np.empty(query_flat.size, dtype=np.int64)
    compiled.first_hits(source.bits, query_flat, source.deltas, geometry.restart, offset)
    far_at = np.flatnonzero(offset < 0)
    far = _kdtree_distances(source.flat, query_flat[far_at], source.shape, geometry) if far_at.size else np.zeros(0)
    return Nearest(offset, far_at, far)


def _kdtree_distances(
    source_flat: np.ndarray, query_flat: np.ndarray, shape: tuple[int, ...], geometry: Geometry
) -> np.ndarray:
    """Distance (mm) from each corner ``query_flat`` to the nearest of the corners ``source_flat`` (a k-d tree).

    The distance is recomputed from the integer offset to the nearest corner with the formula of the offset
    table (original axis order), so both paths return identical values.
    """
    from scipy.spatial import cKDTree

    query = np.stack(np.unravel_index(query_flat, shape), axis=1)
    source = _window(source_flat, query, shape, geometry.grid_spacing)
    tree = cKDTree(source * geometry.grid_spacing, leafsize=32, balanced_tree=False, compact_nodes=False)
    _, nearest = tree.query(query * geometry.grid_spacing, k=1)
    offsets = source[nearest] - query
    if geometry.flip:
        offsets = offsets[:, ::-1]
    return _offset_norm(list(offsets.T), geometry.spacing)


def _window(source_flat: np.ndarray, query: np.ndarray, shape: tuple[int, ...], spacing: np.ndarray) -> np.ndarray:
    """The corners of ``source_flat`` (ascending flat indices) that can be the nearest of some ``query`` corner.

    Returns them as integer coordinates, ``(n, ndim)``: those in the queries' box widened on every side by an upper
    bound of their distances (the largest distance from a query to an even sample of ``_WINDOW_SAMPLE`` source
    corners: the nearest corner is never farther than the nearest sampled one) plus one corner for rounding. The
    k-d tree is then built over the window, not the whole surface (the few queries that reach the tree usually lie
    in one region: building the tree over a whole large organ's surface cost 0.07-0.17 CPU-s per UMD case). Only
    the window's slab along the first axis is unravelled. A surface of up to 4 samples' size is returned whole.
    """
    from scipy.spatial import cKDTree

    def coordinates(flat: np.ndarray) -> np.ndarray:
        return np.stack(np.unravel_index(flat, shape), axis=1)

    if source_flat.size <= 4 * _WINDOW_SAMPLE:
        return coordinates(source_flat)
    sample = coordinates(source_flat[:: source_flat.size // _WINDOW_SAMPLE]) * spacing
    bound, _ = cKDTree(sample, balanced_tree=False, compact_nodes=False).query(query * spacing, k=1)
    reach = np.ceil(float(bound.max()) / spacing).astype(np.int64) + 1
    low, high = query.min(axis=0) - reach, query.max(axis=0) + reach
    slab = math.prod(shape[1:])
    first, last = np.searchsorted(source_flat, [max(int(low[0]), 0) * slab, (int(high[0]) + 1) * slab])
    source = coordinates(source_flat[first:last])
    return source[np.all((source >= low) & (source <= high), axis=1)]


def surfaces(
    truth: np.ndarray, pred: np.ndarray, box: Box, members: tuple, geometry: Geometry
) -> tuple[Surface, Surface]:
    """The truth's and the prediction's :class:`Surface` of ``members`` inside ``box``."""
    return _surface(truth, box, members, geometry), _surface(pred, box, members, geometry)


@dataclass(frozen=True, eq=False)
class _Directed:
    """The distances from the surfels of one surface to the other surface, as a histogram: ``values`` the distinct
    distances present (mm, ascending), ``areas`` the surfel area (mm^2, 3D; mm, 2D) at each."""

    values: np.ndarray
    areas: np.ndarray


def _directed(nearest: Nearest, codes: np.ndarray, geometry: Geometry) -> _Directed:
    """The :class:`_Directed` histogram of the surfels with neighbourhood ``codes`` and their ``nearest``.

    The surfels are counted per (distance, code), integers; each distance's area is then summed from those counts
    in the order of the codes, so no sum depends on the order of the surfels: a Fortran- and a C-ordered pair of
    maps, or a label scored in another thread, give the same bits, with no sort of the surfels.
    """
    n_codes = geometry.table.size
    far_values, far_index = np.unique(nearest.far, return_inverse=True)
    n_table = geometry.distinct_distances.size
    values, rank = np.unique(np.concatenate([geometry.distinct_distances, far_values]), return_inverse=True)
    surfel_rank = rank[:n_table][geometry.offset_rank][nearest.offset]  # offset -1: overwritten next
    surfel_rank[nearest.far_at] = rank[n_table:][far_index]
    counts = np.bincount(surfel_rank * n_codes + codes, minlength=values.size * n_codes)
    pairs = np.flatnonzero(counts)
    at = pairs // n_codes
    areas = np.bincount(at, weights=counts[pairs] * geometry.table[pairs - at * n_codes], minlength=values.size)
    present = np.unique(at)
    return _Directed(values[present], areas[present])


def label_metrics(
    truth: np.ndarray, pred: np.ndarray, box: Box, members: tuple, geometry: Geometry, tol: float, pct: float
) -> dict[str, float]:
    """HD, HD95, ASSD and NSD of ``members`` inside ``box`` (the empty-mask rules of
    :mod:`trackeval.metrics.surface`), keyed by :data:`METRIC_KEYS`."""
    truth_surface, pred_surface = surfaces(truth, pred, box, members, geometry)
    if not (truth_surface.flat.size or pred_surface.flat.size):
        return dict.fromkeys(METRIC_KEYS, math.nan)
    if not (truth_surface.flat.size and pred_surface.flat.size):
        return {"hd": math.inf, "hd95": math.inf, "assd": math.inf, "nsd": 0.0}
    tp = _directed(find_nearest(pred_surface, truth_surface.flat, geometry), truth_surface.codes, geometry)
    pt = _directed(find_nearest(truth_surface, pred_surface.flat, geometry), pred_surface.codes, geometry)
    total = float(np.sum(tp.areas) + np.sum(pt.areas))
    return {
        "hd": float(max(tp.values[-1], pt.values[-1])),
        "hd95": max(_robust_hausdorff(tp, pct), _robust_hausdorff(pt, pct)),
        "assd": float((np.sum(tp.values * tp.areas) + np.sum(pt.values * pt.areas)) / total),
        "nsd": float((np.sum(tp.areas[tp.values <= tol]) + np.sum(pt.areas[pt.values <= tol])) / total),
    }


def _robust_hausdorff(directed: _Directed, percentile: float) -> float:
    """The smallest distance whose cumulative area fraction (distances ascending) reaches ``percentile / 100``."""
    cumulative = np.cumsum(directed.areas) / np.sum(directed.areas)
    idx = int(np.searchsorted(cumulative, percentile / 100.0))
    return float(directed.values[min(idx, directed.values.size - 1)])
