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


def fill_polygon(xy: np.ndarray, height: int, width: int) -> np.ndarray:
    """The boolean ``(height, width)`` mask of the polygon with vertices ``xy`` (``(n, 2)``: x, y in pixels) by
    the pixel-centre rule of the module docstring.

    Cost: one ``(n_vertices, height)`` array of edge crossings, then one pass over the mask.

    Examples:
        >>> import numpy as np
        >>> from trackeval.io.polygons import fill_polygon
        >>> fill_polygon(np.array([[1.0, 1.0], [3.0, 1.0], [3.0, 3.0], [1.0, 3.0]]), 4, 5).astype(int).tolist()
        [[0, 0, 0, 0, 0], [0, 1, 1, 0, 0], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]
    """
    mask = np.zeros((height, width), dtype=bool)
    pts = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if pts.shape[0] < 3 or height <= 0 or width <= 0:
        return mask
    x0, y0 = pts[:, 0:1], pts[:, 1:2]  # (n, 1): edge k runs from vertex k to vertex k + 1 (the last closes it)
    x1, y1 = np.roll(x0, -1, axis=0), np.roll(y0, -1, axis=0)
    y = np.arange(height, dtype=np.float64)[None, :] + 0.5  # (1, height): the rows' centres
    spans = (y0 > y) != (y1 > y)  # (n, height): the edge crosses the row's centre line
    with np.errstate(divide="ignore", invalid="ignore"):
        xc = np.where(spans, x0 + (y - y0) * (x1 - x0) / (y1 - y0), np.nan)
    xc.sort(axis=0)  # per row: the crossings left to right, NaN (no crossing) last; each row has an even count
    lo, hi = xc[0 : 2 * (len(xc) // 2) : 2], xc[1::2]
    rows = np.broadcast_to(np.arange(height)[None, :], lo.shape)
    keep = ~np.isnan(lo) & ~np.isnan(hi)
    # pixels i with lo <= i + 0.5 < hi: i from ceil(lo - 0.5) to ceil(hi - 0.5) - 1, clipped to the image
    first = np.clip(np.ceil(lo[keep] - 0.5), 0, width).astype(np.int64)
    stop = np.clip(np.ceil(hi[keep] - 0.5), 0, width).astype(np.int64)
    edges = np.zeros((height, width + 1), dtype=np.int32)
    np.add.at(edges, (rows[keep], first), 1)
    np.add.at(edges, (rows[keep], stop), -1)
    mask[:] = np.cumsum(edges[:, :width], axis=1) > 0
    return mask
