"""Compiled loops of the metric kernels (numba): the per-element loops that vectorised numpy cannot stop early.

Each function here takes C-contiguous arrays and writes its result into arrays the caller allocated (or, for
:func:`border_codes`, into its input, in place); none allocates more than a row buffer, none holds the GIL
(``nogil``), so the surface metrics score labels in threads. The signatures
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


@_compiled("void(uint8[::1], int64[::1], int64[::1], int64[::1], int64[::1])")
def first_hits(bits, query, deltas, restart, out):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``out[i]`` = the first ``k`` with bit ``query[i] + deltas[k]`` of ``bits`` set, or -1 where no ``k`` hits.

    ``bits``: a flat corner grid, one bit per corner (little bit order: corner ``c`` is bit ``c & 7`` of byte ``c >>
    3``; set at the border corners); ``query``: flat corner indices, ascending; ``deltas``: flat offsets, nearest
    first. Every ``query[i] + deltas[k]`` must be a corner of the grid (the caller pads it by the largest offset).
    ``restart[k]``: where the scan of a query may start when the query before it is its neighbour along the last
    axis (``query[i] == query[i - 1] + 1``) and had its first hit at ``k`` (``restart[-1]`` when it had none): an
    index before which no offset can hit (the caller builds it from the triangle inequality, see
    ``trackeval.metrics._surface_search._restart_table``), so the first hit is the same as with a scan from 0.
    Most queries of a surface follow their neighbour, so a query far from the other surface skips most of the
    offsets that its neighbour already found empty.
    """
    n_deltas = deltas.size
    previous = -2
    previous_hit = 0
    for i in range(query.size):
        base = query[i]
        k = 0
        if base == previous + 1:
            k = restart[previous_hit if previous_hit >= 0 else n_deltas - 1]
        hit = -1
        while k < n_deltas:
            at = base + deltas[k]
            if (bits[at >> 3] >> (at & 7)) & 1:
                hit = k
                break
            k += 1
        out[i] = hit
        previous = base
        previous_hit = hit


@_compiled("int64(uint8[:, :, ::1], uint8[::1], int64, int64[::1], int64[::1])")
def border_codes(grid, weights, full, corner, extent):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Replace, in place, a binary mask on a corner grid by the neighbourhood codes of its border corners.

    ``grid``: ``(g0, g1, g2)``, zero but for the mask's voxels (1) at ``corner + 1 + v`` for each voxel ``v`` of
    an ``extent - 1`` crop; ``weights``: the 8 code weights of a corner's neighbourhood, C order (voxel ``(a,
    b, c)`` of corner ``x`` is the grid's ``x + (a, b, c)`` and weighs ``weights[4a + 2b + c]``); ``full``: the
    code of a corner inside the mask (< 256). Corner ``corner + (i, j, k)``, for each ``(i, j, k)`` below
    ``extent``, gets its code ``sum_abc weights[4a + 2b + c] * mask[...]`` where ``0 < code < full`` (a border
    corner) and 0 elsewhere; the grid must reach ``corner + extent`` on every axis. A 2D mask is the first
    plane of ``g0 = 2`` planes whose second plane has the weights 0 (``extent[0] = 1``).

    In place and row by row: a corner row reads the mask rows ``(i, j)``, ``(i, j + 1)``, ``(i + 1, j)`` and
    ``(i + 1, j + 1)`` and overwrites row ``(i, j)``, which no later row reads, so a surface costs one grid of
    bytes (no mask and no code array beside it). The codes of a row go through a row buffer in uint8, so both
    loops over the last axis are vectorised (~0.3 ns per corner).
    """
    c0, c1, c2 = corner[0], corner[1], corner[2]
    n0, n1, n2 = extent[0], extent[1], extent[2]
    w0, w1, w2, w3 = weights[0], weights[1], weights[2], weights[3]
    w4, w5, w6, w7 = weights[4], weights[5], weights[6], weights[7]
    one = np.uint8(1)
    zero = np.uint8(0)
    inside = np.uint8(full - 1)  # code - 1 < full - 1 in uint8 (0 wraps to 255): 0 < code < full
    row = np.empty(n2, dtype=np.uint8)
    count = 0
    for i in range(n0):
        for j in range(n1):
            r0 = grid[c0 + i, c1 + j, c2:]
            r1 = grid[c0 + i, c1 + j + 1, c2:]
            r2 = grid[c0 + i + 1, c1 + j, c2:]
            r3 = grid[c0 + i + 1, c1 + j + 1, c2:]
            for k in range(n2):
                row[k] = np.uint8(
                    w0 * r0[k]
                    + w1 * r0[k + 1]
                    + w2 * r1[k]
                    + w3 * r1[k + 1]
                    + w4 * r2[k]
                    + w5 * r2[k + 1]
                    + w6 * r3[k]
                    + w7 * r3[k + 1]
                )
            border = 0
            for k in range(n2):
                code = row[k]
                flag = np.uint8(code - one) < inside
                r0[k] = code if flag else zero
                border += flag
            count += border
    return count


@_compiled("void(uint8[:, :, ::1], uint64[::1], int64[::1], int64[::1], int64[::1], uint8[::1], uint8[::1])")
def gather_nonzero(grid, words, corner, extent, flat, values, bits):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """The non-zero bytes of a corner grid's region, in C order: their flat indices, their values and a bit grid.

    ``grid``: ``(g0, g1, g2)``; ``words``: its bytes as uint64 words (the whole words of the flat grid); the
    region: ``corner + (i, j, k)`` for ``(i, j, k)`` below ``extent`` (every non-zero byte must lie in it);
    ``flat``, ``values``: sized to the number of non-zero bytes; ``bits``: zeroed, at least ``grid.size / 8``
    bytes, gets bit ``c & 7`` of byte ``c >> 3`` set for each non-zero byte ``c`` (the grid at an eighth of its
    size, for :func:`first_hits`). Runs of zero bytes are skipped a word at a time (a border is a thin shell in a
    mostly empty crop).
    """
    c0, c1, c2 = corner[0], corner[1], corner[2]
    n0, n1, n2 = extent[0], extent[1], extent[2]
    g1, g2 = grid.shape[1], grid.shape[2]
    at = 0
    for i in range(n0):
        for j in range(n1):
            row = grid[c0 + i, c1 + j]
            base = ((c0 + i) * g1 + c1 + j) * g2  # flat index of the grid row's first byte
            end = c2 + n2
            words_end = (base + end) >> 3  # the region row's whole words are those before this one
            k = c2
            while k < end:
                stop = min(end, k + (-(base + k) & 7))  # bytes up to the next word boundary
                if stop == k:  # at a boundary: skip the zero words, then look at the next 8 bytes
                    w = (base + k) >> 3
                    while w < words_end and words[w] == 0:
                        w += 1
                    k = (w << 3) - base
                    stop = min(end, k + 8)
                while k < stop:
                    if row[k] != 0:
                        c = base + k
                        flat[at] = c
                        values[at] = row[k]
                        bits[c >> 3] |= np.uint8(1) << np.uint8(c & 7)
                        at += 1
                    k += 1


# long: one compiled pass whose branches are a run's byte, word and tail steps; a helper per run would cost a call
@_compiled("void(uint8[:, :, ::1], uint8[:, :, ::1], uint64[::1], uint64[::1], int64[:, ::1])")
def union_boxes(first, second, first_words, second_words, bounds):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Bounding box of every value over two uint8 maps of one shape (``find_objects``' boxes of each map, united).

    ``first``, ``second``: ``(n0, n1, n2)``; ``first_words``, ``second_words``: the same bytes, flat, as uint64
    words (the whole words only: ``size // 8``); ``bounds``: ``(256, 6)``, row ``v`` = ``(lo0, lo1, lo2, hi0,
    hi1, hi2)`` of the voxels where either map equals ``v`` (``lo`` inclusive, ``hi`` exclusive); the caller fills
    ``lo`` with values above the shape and ``hi`` with 0, so an absent value keeps ``hi0 == 0``. Two label maps
    are long runs of one pair of values along the last axis: a run is followed byte by byte to a word boundary,
    then 8 voxels at a time, so the work is ~0.04 ns per voxel plus twelve updates per run (11 ms for a 512 x 512
    x 133 pair, where two ``scipy.ndimage.find_objects`` passes take 0.14 s).
    """
    n0, n1, n2 = first.shape
    ones = np.uint64(0x0101010101010101)
    for i in range(n0):
        for j in range(n1):
            row_a, row_b = first[i, j], second[i, j]
            base = (i * n1 + j) * n2  # flat index of the row's first voxel
            words_end = (base + n2) >> 3  # the row's whole words are those before this one
            k = 0
            while k < n2:
                a, b = row_a[k], row_b[k]
                start = k
                k += 1
                while k < n2 and (base + k) & 7 and row_a[k] == a and row_b[k] == b:
                    k += 1
                if k < n2 and row_a[k] == a and row_b[k] == b:  # at a word boundary, still in the run
                    word_a, word_b = ones * np.uint64(a), ones * np.uint64(b)
                    w = (base + k) >> 3
                    while w < words_end and first_words[w] == word_a and second_words[w] == word_b:
                        w += 1
                    k = (w << 3) - base
                    while k < n2 and row_a[k] == a and row_b[k] == b:
                        k += 1
                for v in (a, b):
                    bounds[v, 0] = min(bounds[v, 0], i)
                    bounds[v, 1] = min(bounds[v, 1], j)
                    bounds[v, 2] = min(bounds[v, 2], start)
                    bounds[v, 3] = max(bounds[v, 3], i + 1)
                    bounds[v, 4] = max(bounds[v, 4], j + 1)
                    bounds[v, 5] = max(bounds[v, 5], k)
