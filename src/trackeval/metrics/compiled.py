"""Compiled loops of the metric kernels (numba): the per-element loops that vectorised numpy cannot stop early.

Each function here takes C-contiguous arrays and writes its result into an output array the caller allocated;
none allocates, none holds the GIL (``nogil``), so the surface metrics score labels in threads. The signatures
are explicit, so the machine code is built when this module is first imported, not on a first call, and it is
cached on disk (numba's ``cache=True``: in the package's ``__pycache__``, or numba's user-wide cache directory
when that is not writable; ``NUMBA_CACHE_DIR`` sets another). A cold build takes ~1 CPU-s once per machine; a
cached load ~0.25 CPU-s per process, paid only by runs that compute surface metrics (their modules import this
one when they first need it). Why numba and not another route: docs/performance.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np


def _compiled(signature: str) -> Callable[[Callable], Callable]:
    """``numba.njit`` with the module's options, cached on disk where numba finds a writable place for it."""

    def build(fn: Callable) -> Callable:
        try:
            return numba.njit(signature, nogil=True, cache=True, boundscheck=False)(fn)
        except RuntimeError:  # numba: "cannot cache function ...: no locator available" (read-only everywhere)
            return numba.njit(signature, nogil=True, boundscheck=False)(fn)

    return build


@_compiled("void(boolean[::1], int64[::1], int64[::1], int64[::1])")
def first_hits(grid, query, deltas, out):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``out[i]`` = the first ``k`` with ``grid[query[i] + deltas[k]]`` True, or -1 where no ``k`` hits.

    ``grid``: flat bool corner grid; ``query``: flat indices into it; ``deltas``: flat offsets, nearest first.
    Every ``query[i] + deltas[k]`` must index ``grid`` (the caller pads the grid by the largest offset).
    """
    n_deltas = deltas.size
    for i in range(query.size):
        base = query[i]
        hit = -1
        for k in range(n_deltas):
            if grid[base + deltas[k]]:
                hit = k
                break
        out[i] = hit


@_compiled("void(uint8[:, :, ::1], uint8[::1], int64, int64[::1], uint8[:, :, ::1], uint8[:, :, ::1])")
def neighbour_codes(mask, weights, full, corner, codes, border):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Neighbourhood codes of a binary mask on a corner grid, and which corners are border corners.

    ``mask``: ``(m0, m1, m2)`` 0/1, the mask with a zero border of one voxel; ``weights``: the 8 code weights of
    a corner's neighbourhood, C order (voxel ``(a, b, c)`` weighs ``weights[4a + 2b + c]``); ``full``: the code
    of a corner inside the mask (< 256). Writes, for each ``(i, j, k)`` below ``(m0 - 1, m1 - 1, m2 - 1)``,
    ``codes[corner + (i, j, k)] = sum_abc weights[4a + 2b + c] * mask[i + a, j + b, k + c]`` and ``border[...] =
    0 < code < full`` (1 or 0); ``codes`` and ``border`` (same shape, at least ``corner + mask.shape - 1``) are
    left as they are elsewhere (the caller zeroes them: the codes out of the mask's reach are 0). A 2D mask is
    the first plane of ``m0 = 2`` planes whose second plane has the weights 0. uint8 arithmetic throughout, so
    the loop over the last axis is vectorised (~0.25 ns per voxel).
    """
    c0, c1, c2 = corner[0], corner[1], corner[2]
    n0, n1, n2 = mask.shape[0] - 1, mask.shape[1] - 1, mask.shape[2] - 1
    w0, w1, w2, w3 = weights[0], weights[1], weights[2], weights[3]
    w4, w5, w6, w7 = weights[4], weights[5], weights[6], weights[7]
    one = np.uint8(1)
    inside = np.uint8(full - 1)  # code - 1 < full - 1 in uint8 (0 wraps to 255): 0 < code < full
    for i in range(n0):
        for j in range(n1):
            r0, r1, r2, r3 = mask[i, j], mask[i, j + 1], mask[i + 1, j], mask[i + 1, j + 1]
            out_code = codes[c0 + i, c1 + j, c2:]
            out_border = border[c0 + i, c1 + j, c2:]
            for k in range(n2):
                code = np.uint8(
                    w0 * r0[k]
                    + w1 * r0[k + 1]
                    + w2 * r1[k]
                    + w3 * r1[k + 1]
                    + w4 * r2[k]
                    + w5 * r2[k + 1]
                    + w6 * r3[k]
                    + w7 * r3[k + 1]
                )
                out_code[k] = code
                out_border[k] = np.uint8(code - one) < inside


@_compiled("void(uint8[:, :, ::1], int64[:, ::1])")
def value_boxes(code, bounds):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Bounding box of every value of a uint8 map, from its runs along the last axis (``find_objects``' boxes).

    ``code``: ``(n0, n1, n2)``; ``bounds``: ``(256, 6)``, row ``v`` = ``(lo0, lo1, lo2, hi0, hi1, hi2)`` of the
    voxels equal to ``v`` (``lo`` inclusive, ``hi`` exclusive); the caller fills ``lo`` with values above the
    shape and ``hi`` with 0, so an absent value keeps ``hi0 == 0``. A label map is long runs of one value, so
    the work per voxel is one comparison (~0.3 ns) and per run six updates: 0.025 CPU-s for a 512 x 512 x 133
    map, where ``scipy.ndimage.find_objects`` takes 0.065.
    """
    n0, n1, n2 = code.shape
    for i in range(n0):
        for j in range(n1):
            row = code[i, j]
            k = 0
            while k < n2:
                value = row[k]
                start = k
                k += 1
                while k < n2 and row[k] == value:
                    k += 1
                box = bounds[value]
                box[0] = min(box[0], i)
                box[1] = min(box[1], j)
                box[2] = min(box[2], start)
                box[3] = max(box[3], i + 1)
                box[4] = max(box[4], j + 1)
                box[5] = max(box[5], k)
