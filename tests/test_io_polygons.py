"""The polygon rasteriser: the pixel-centre rule, pixel for pixel as the crossing-matrix fill it replaced, with
memory that does not grow with vertices x rows."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from trackeval.io.polygons import fill_polygon


def _reference(xy: np.ndarray, height: int, width: int) -> np.ndarray:
    """The crossing-matrix fill of trackeval before issue 34 (a ``(vertices, rows)`` array): the reference."""
    mask = np.zeros((height, width), dtype=bool)
    pts = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if pts.shape[0] < 3:
        return mask
    x0, y0 = pts[:, 0:1], pts[:, 1:2]
    x1, y1 = np.roll(x0, -1, axis=0), np.roll(y0, -1, axis=0)
    y = np.arange(height, dtype=np.float64)[None, :] + 0.5
    spans = (y0 > y) != (y1 > y)
    with np.errstate(divide="ignore", invalid="ignore"):
        xc = np.where(spans, x0 + (y - y0) * (x1 - x0) / (y1 - y0), np.nan)
    xc.sort(axis=0)
    lo, hi = xc[0 : 2 * (len(xc) // 2) : 2], xc[1::2]
    rows = np.broadcast_to(np.arange(height)[None, :], lo.shape)
    keep = ~np.isnan(lo) & ~np.isnan(hi)
    first = np.clip(np.ceil(lo[keep] - 0.5), 0, width).astype(np.int64)
    stop = np.clip(np.ceil(hi[keep] - 0.5), 0, width).astype(np.int64)
    edges = np.zeros((height, width + 1), dtype=np.int32)
    np.add.at(edges, (rows[keep], first), 1)
    np.add.at(edges, (rows[keep], stop), -1)
    mask[:] = np.cumsum(edges[:, :width], axis=1) > 0
    return mask


@pytest.mark.parametrize("seed", range(40))
def test_same_pixels_as_the_crossing_matrix_fill(seed):
    """Random polygons (self-intersecting, partly outside the image, vertices on half-pixel centres and on
    integer corners, horizontal edges) give exactly the reference mask."""
    rng = np.random.default_rng(seed)
    height, width = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    n = int(rng.integers(3, 60))
    xy = rng.uniform(-8, max(height, width) + 8, size=(n, 2))
    if seed % 3 == 0:
        xy = np.round(xy * 2) / 2  # on pixel centres and corners: the edge cases of the rule
    if seed % 4 == 0:
        xy[1::3, 1] = xy[0::3, 1][: len(xy[1::3])]  # horizontal edges
    mask = fill_polygon(xy, height, width)
    assert mask.shape == (height, width) and mask.dtype == bool
    np.testing.assert_array_equal(mask, _reference(xy, height, width))


def test_chunks_join_without_seams(monkeypatch):
    """A zig-zag whose crossings span many chunks gives the reference mask (a chunk of 7 crossings)."""
    import trackeval.io.polygons as polygons

    monkeypatch.setattr(polygons, "_CHUNK", 7)
    t = np.linspace(0, 2 * np.pi, 301)[:-1]
    xy = np.stack([16 + 14 * np.cos(t) * (1 + 0.3 * np.sin(9 * t)), 16 + 14 * np.sin(t)], axis=1)
    np.testing.assert_array_equal(fill_polygon(xy, 33, 35), _reference(xy, 33, 35))
    assert fill_polygon(xy, 33, 35).sum() > 400


def test_square_area_and_degenerate_inputs():
    square = np.array([[2.0, 3.0], [12.0, 3.0], [12.0, 9.0], [2.0, 9.0]])
    assert fill_polygon(square, 16, 16).sum() == 10 * 6
    assert fill_polygon(square[:2], 16, 16).sum() == 0  # fewer than 3 vertices cover nothing
    assert fill_polygon(square, 0, 5).shape == (0, 5)


_PEAK = """
import sys
import numpy as np
from trackeval.io.polygons import fill_polygon
n = 200_000
t = np.linspace(0, 2 * np.pi, n, endpoint=False)
# a rib-like outline of 200,000 points on a 512 x 512 image, and a zig-zag of the same count whose every edge
# spans all 512 rows (vertices x rows = 102 M crossings for the old crossing matrix: 800 MB of float64)
rib = np.stack([256 + 200 * np.cos(t), 256 + 30 * np.sin(t)], axis=1)
zig = np.stack([np.linspace(0, 511, n), np.where(np.arange(n) % 2, 511.9, 0.1)], axis=1)
def hwm():  # this process's peak RSS (kB): VmHWM is per address space; ru_maxrss survives exec from the parent
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
base = hwm()
a = fill_polygon(rib, 512, 512)
b = fill_polygon(zig, 512, 512)
print(base, hwm())
np.save(sys.argv[1], np.stack([a, b]))
np.save(sys.argv[2], np.stack([rib, zig]))
"""


@pytest.mark.slow
def test_peak_memory_of_a_200000_vertex_polygon_stays_under_200_mb(tmp_path):
    """Issue 34: a 150,000-point rib took 1.38 GB. Two 200,000-vertex polygons (one crossing every row with
    every edge) in a fresh process: the peak resident set stays < 200 MB (about 135 MB measured, 40 MB of it the
    interpreter and numpy), the rib's area is the ellipse's, and sampled rows of both masks are the reference's
    (a row of the reference is the one-row image of the polygon shifted up)."""
    masks, polys = tmp_path / "masks.npy", tmp_path / "polys.npy"
    cmd = [sys.executable, "-c", _PEAK, str(masks), str(polys)]
    base_kb, peak_kb = (int(v) for v in subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split())
    assert peak_kb < 200 * 1024, (base_kb, peak_kb)
    got, xy = np.load(masks), np.load(polys)
    assert abs(int(got[0].sum()) - np.pi * 200 * 30) < 0.005 * np.pi * 200 * 30
    for k in range(2):
        for row in (0, 1, 137, 226, 255, 256, 300, 511):
            shifted = xy[k] - np.array([0.0, row])
            np.testing.assert_array_equal(got[k][row], _reference(shifted, 1, 512)[0], err_msg=f"{k} {row}")
