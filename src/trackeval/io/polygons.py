"""Polygons rasterised to binary masks by the pixel-centre rule.

Coordinates are in pixels of the image, ``x`` to the right and ``y`` down, with ``(0, 0)`` the top-left corner of
the top-left pixel, so pixel ``(column i, row j)`` is the unit square ``[i, i + 1) x [j, j + 1)`` and its centre
is ``(i + 0.5, j + 0.5)``. **A pixel belongs to the polygon when its centre lies inside it** by the even-odd
(crossing-number) rule, with the polygon closed from its last vertex back to the first, vertices used as given
(floats, not rounded). A centre exactly on an edge is decided the way the crossing test decides it (the
classic ``pnpoly``: an edge counts for the rows ``y`` with ``min(y0, y1) <= y < max(y0, y1)`` and a crossing at
``x_c`` counts when ``x < x_c``), so it is inside on left and top edges and outside on right and bottom edges:
two polygons that share an edge never both cover a pixel centred on it, and none is left uncovered.

Fewer than 3 vertices cover nothing; parts outside the image are clipped.

This differs from ``cv2.fillPoly`` and ``PIL.ImageDraw.polygon``, which also paint the pixels the outline
passes through (PIL puts pixel centres at integer coordinates): the masks differ only on the pixels the
boundary crosses.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fill_polygon"]


#: crossings expanded at once: bounds the rasteriser's working memory (about 40 bytes per crossing)
_CHUNK = 1 << 20


def fill_polygon(xy: np.ndarray, height: int, width: int) -> np.ndarray:
    """The boolean ``(height, width)`` mask of the polygon with vertices ``xy`` (``(n, 2)``: x, y in pixels) by
    the pixel-centre rule of the module docstring.

    A scanline fill whose memory does not grow with vertices x rows: each edge is expanded only into the rows
    whose centre line it crosses (``ceil(min(y) - 0.5) <= row < ceil(max(y) - 0.5)``, clipped to the image),
    in chunks of at most :data:`_CHUNK` crossings. A crossing at ``x_c`` counts for the pixels ``i`` with
    ``i + 0.5 < x_c``: it toggles ``[0, ceil(x_c - 0.5))``, so each crossing adds one to a per-row histogram
    at that column, and a pixel is inside when the crossings counting for it (the histogram summed from its
    column + 1 to the right) are odd. Memory: the vertices, one ``(height, width + 1)`` histogram and one chunk;
    time: the number of (edge, row) crossings.

    Examples:
        >>> import numpy as np
        >>> from trackeval.io.polygons import fill_polygon
        >>> fill_polygon(np.array([[1.0, 1.0], [3.0, 1.0], [3.0, 3.0], [1.0, 3.0]]), 4, 5).astype(int).tolist()
        [[0, 0, 0, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]
    """
    pts = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if pts.shape[0] < 3 or height <= 0 or width <= 0:
        return np.zeros((max(height, 0), max(width, 0)), dtype=bool)
    x0, y0 = pts[:, 0], pts[:, 1]  # edge k runs from vertex k to vertex k + 1 (the last closes it)
    x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
    lo, hi = np.minimum(y0, y1), np.maximum(y0, y1)
    first = np.clip(np.ceil(lo - 0.5), 0, height).astype(np.int64)  # first row whose centre the edge spans
    stop = np.clip(np.ceil(hi - 0.5), 0, height).astype(np.int64)  # one past the last
    keep = stop > first
    x0, y0, x1, y1, first, stop = x0[keep], y0[keep], x1[keep], y1[keep], first[keep], stop[keep]
    counts = stop - first
    hist = np.zeros(height * (width + 1), dtype=np.int64)
    ends = np.cumsum(counts)
    k = 0
    while k < len(counts):
        # edges k..j-1: at most _CHUNK crossings (at least one edge, whatever its rows)
        j = max(int(np.searchsorted(ends, (ends[k - 1] if k else 0) + _CHUNK, side="right")), k + 1)
        n = counts[k:j]
        edge = np.repeat(np.arange(k, j), n)
        offset = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        row = first[edge] + offset
        y = row + 0.5
        ex0, ey0 = x0[edge], y0[edge]
        xc = ex0 + (y - ey0) * (x1[edge] - ex0) / (y1[edge] - ey0)
        col = np.clip(np.ceil(xc - 0.5), 0, width).astype(np.int64)
        hist += np.bincount(row * (width + 1) + col, minlength=hist.size)
        k = j
    # crossings counting for pixel i: those with column > i (a suffix sum from i + 1)
    after = np.cumsum(hist.reshape(height, width + 1)[:, ::-1], axis=1)[:, ::-1]
    return (after[:, 1:] & 1).astype(bool)
