"""Tests for trackeval.metrics.surface (DeepMind-style surface-distance metrics)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from monai.metrics import HausdorffDistanceMetric, SurfaceDiceMetric
from monai.metrics.utils import get_code_to_measure_table
from scipy.spatial import cKDTree

import trackeval.metrics._surface_crop as crop_mod
import trackeval.metrics._surface_search as search_mod
import trackeval.metrics.surface as surface_mod
from trackeval.metrics.surface import (
    assd,
    hausdorff,
    hd95,
    nsd,
    surface_distances,
    surface_metrics,
)

# --------------------------------------------------------------------------- brute-force reference


def _reference_directed(
    truth: np.ndarray, pred: np.ndarray, spacing: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Full-volume DeepMind surfels; codes by explicit shifts, distances by brute-force NN."""
    table, kernel = get_code_to_measure_table(spacing)
    table = table.numpy().astype(np.float64)
    kernel = kernel.numpy().reshape((2,) * truth.ndim)
    full = int(kernel.sum())

    def surfels(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        padded = np.pad(mask.astype(np.int64), 1)
        code = np.zeros(tuple(s + 1 for s in mask.shape), dtype=np.int64)
        for offset in itertools.product((0, 1), repeat=mask.ndim):
            shifted = padded[tuple(slice(o, o + n) for o, n in zip(offset, code.shape, strict=True))]
            code += int(kernel[offset]) * shifted
        border = (code != 0) & (code != full)
        return np.argwhere(border) * np.asarray(spacing), table[code[border]]

    pts_t, a_t = surfels(truth)
    pts_p, a_p = surfels(pred)
    if len(pts_t) and len(pts_p):
        d_tp = cKDTree(pts_p).query(pts_t, k=1)[0]
        d_pt = cKDTree(pts_t).query(pts_p, k=1)[0]
    else:
        d_tp, d_pt = np.full(len(pts_t), np.inf), np.full(len(pts_p), np.inf)
    return d_tp, a_t, d_pt, a_p


def _reference_percentile(d: np.ndarray, a: np.ndarray, pct: float) -> float:
    order = np.argsort(d)
    d, a = d[order], a[order]
    reached = np.cumsum(a) / a.sum() >= pct / 100.0
    return float(d[np.argmax(reached)] if reached.any() else d[-1])


def _reference_metrics(
    pred: np.ndarray,
    truth: np.ndarray,
    spacing: tuple[float, ...],
    members: tuple[int, ...],
    tol: float,
    pct: float,
) -> dict[str, float]:
    d_tp, a_t, d_pt, a_p = _reference_directed(np.isin(truth, members), np.isin(pred, members), spacing)
    if not len(d_tp) and not len(d_pt):
        return {"hd": math.nan, "hd95": math.nan, "assd": math.nan, "nsd": math.nan}
    if not len(d_tp) or not len(d_pt):
        return {"hd": math.inf, "hd95": math.inf, "assd": math.inf, "nsd": 0.0}
    total = a_t.sum() + a_p.sum()
    return {
        "hd": float(max(d_tp.max(), d_pt.max())),
        "hd95": max(_reference_percentile(d_tp, a_t, pct), _reference_percentile(d_pt, a_p, pct)),
        "assd": float(((d_tp * a_t).sum() + (d_pt * a_p).sum()) / total),
        "nsd": float((a_t[d_tp <= tol].sum() + a_p[d_pt <= tol].sum()) / total),
    }


def _assert_metrics_close(actual: dict[str, float], expected: dict[str, float], atol: float = 1e-6) -> None:
    assert set(actual) == {"hd", "hd95", "assd", "nsd"}
    for key, value in expected.items():
        got = actual[key]
        if math.isnan(value):
            assert math.isnan(got), (key, got, value)
        else:
            assert got == pytest.approx(value, abs=atol, rel=0), (key, got, value)


# --------------------------------------------------------------------------- random label maps


def _ball(shape: tuple[int, ...], centre: np.ndarray, radii: np.ndarray) -> np.ndarray:
    grid = np.indices(shape, dtype=np.float64)
    r = sum(((g - c) / rad) ** 2 for g, c, rad in zip(grid, centre, radii, strict=True))
    return r <= 1.0


def _random_label_map(rng: np.random.Generator, shape: tuple[int, ...], n_labels: int) -> np.ndarray:
    """Balls, boxes and noisy blobs; label 1 always touches the volume border."""
    out = np.zeros(shape, dtype=np.int16)
    ndim = len(shape)
    corner = tuple(slice(0, int(rng.integers(3, s // 2))) for s in shape)
    out[corner] = 1
    for label in range(2, n_labels + 1):
        kind = label % 3
        centre = rng.uniform(0, np.asarray(shape) - 1)
        if kind == 0:
            out[_ball(shape, centre, rng.uniform(2, 6, ndim))] = label
        elif kind == 1:
            lo = rng.integers(0, np.asarray(shape) - 3)
            hi = lo + rng.integers(2, 8, ndim)
            out[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))] = label
        else:
            blob = _ball(shape, centre, rng.uniform(3, 7, ndim)) & (rng.random(shape) < 0.7)
            out[blob] = label
    return out


def _perturb(rng: np.random.Generator, truth: np.ndarray) -> np.ndarray:
    """A plausible prediction: shifted map with random label flips and a spurious island."""
    axis = int(rng.integers(truth.ndim))
    pred = np.roll(truth, int(rng.choice([-1, 1])), axis=axis)
    flip = rng.random(truth.shape) < 0.02
    pred[flip] = rng.integers(0, truth.max() + 1, int(flip.sum()))
    island = tuple(slice(int(s) - 3, int(s) - 1) for s in truth.shape)
    pred[island] = truth.max()
    return pred


CASES = [
    pytest.param((40, 36), (0.8, 1.3), 5, id="2d"),
    pytest.param((64, 51), (1.0, 1.0), 4, id="2d-iso"),
    pytest.param((28, 24, 20), (1.5, 0.7, 0.9), 6, id="3d"),
    pytest.param((22, 30, 18), (2.5, 0.703125, 0.703125), 5, id="3d-ct-like"),
]


def _assert_identical(actual: dict, expected: dict) -> None:
    """Bit-identical metric dicts (NaN equals NaN)."""
    assert list(actual) == list(expected)
    for label, values in expected.items():
        assert list(actual[label]) == list(values)
        for key, value in values.items():
            got = actual[label][key]
            assert got == value or (math.isnan(got) and math.isnan(value)), (label, key, got, value)


def _no_kdtree(*_args: object) -> np.ndarray:
    raise AssertionError("the k-d tree fallback must not run on this path")


def _use_path(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """``offsets``: the offset table covers every distance, no k-d tree; ``kdtree``: every search by the tree but
    those at distance 0 (the table holds only the zero offset)."""
    if path == "offsets":
        monkeypatch.setattr(surface_mod, "_OFFSET_BUDGET", 10**6)
        monkeypatch.setattr(search_mod, "_kdtree_distances", _no_kdtree)
    elif path == "kdtree":
        monkeypatch.setattr(surface_mod, "_OFFSET_BUDGET", 1)


@pytest.mark.parametrize(("shape", "spacing", "n_labels"), CASES)
@pytest.mark.parametrize("path", ["auto", "offsets", "kdtree"])
def test_matches_bruteforce_reference(
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, ...],
    spacing: tuple[float, ...],
    n_labels: int,
    path: str,
) -> None:
    _use_path(monkeypatch, path)
    rng = np.random.default_rng(int(np.prod(shape)) + n_labels)
    truth = _random_label_map(rng, shape, n_labels)
    pred = _perturb(rng, truth)
    pred[pred == 3] = 0  # label 3 empty in the prediction only
    labels: list = [1, 2, 3, 4, (2, 4), (1, 2, 4), 99]  # 99: absent from both
    tol, pct = 1.2345, 90.0
    result = surface_metrics(pred, truth, spacing, labels=labels, tolerance_mm=tol, percentile=pct)
    assert list(result) == labels
    for label in labels:
        members = label if isinstance(label, tuple) else (label,)
        expected = _reference_metrics(pred, truth, spacing, members, tol, pct)
        _assert_metrics_close(result[label], expected)
    assert result[3]["nsd"] == 0.0 and math.isinf(result[3]["hd"])
    assert all(math.isnan(v) for v in result[99].values())
    # the perturbation must produce non-trivial values, otherwise the test proves little
    assert 0.0 < result[(2, 4)]["nsd"] < 1.0 and result[(2, 4)]["hd"] > 0.0
    # Fortran-ordered maps (nibabel's layout) are processed transposed, with bit-identical results; so is a pair
    # of maps in different memory orders
    fortran = surface_metrics(
        np.asfortranarray(pred), np.asfortranarray(truth), spacing, labels=labels, tolerance_mm=tol, percentile=pct
    )
    _assert_identical(fortran, result)
    mixed = surface_metrics(pred, np.asfortranarray(truth), spacing, labels=labels, tolerance_mm=tol, percentile=pct)
    _assert_identical(mixed, result)


@pytest.mark.parametrize("path", ["offsets", "kdtree"])
def test_search_paths_are_bit_identical(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The offset search and the k-d tree give the same values as the default mix of both, bit for bit."""
    rng = np.random.default_rng(5)
    truth = _random_label_map(rng, (30, 26, 22), 6)
    pred = _perturb(rng, truth)
    spacing = (2.5, 0.703125, 0.703125)
    default = surface_metrics(np.asfortranarray(pred), np.asfortranarray(truth), spacing, tolerance_mm=1.5)
    _use_path(monkeypatch, path)
    _assert_identical(
        surface_metrics(np.asfortranarray(pred), np.asfortranarray(truth), spacing, tolerance_mm=1.5), default
    )


def test_kdtree_window_of_far_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few far queries (an island 12 mm off a large surface) reach the k-d tree, which is built over their window
    only: it holds a part of the large surface, and the values are the brute-force reference's and those of a tree
    over the whole surface, bit for bit."""
    truth = _ball((60, 60, 48), np.array([26.0, 26.0, 24.0]), np.array([18.0, 18.0, 16.0])).astype(np.uint8)
    pred = truth.copy()
    pred[53:56, 53:56, 20:23] = 1  # island: ~12 voxels from the ball's surface, past the offset table's radius
    spacing = (1.0, 1.0, 1.0)
    windows: list[tuple[int, int]] = []
    window = search_mod._window

    def spy(source: np.ndarray, query: np.ndarray, shape: tuple[int, ...], grid_spacing: np.ndarray) -> np.ndarray:
        kept = window(source, query, shape, grid_spacing)
        windows.append((source.size, kept.shape[0]))
        return kept

    monkeypatch.setattr(search_mod, "_window", spy)
    result = surface_metrics(pred, truth, spacing)[1]
    assert windows and all(0 < kept < whole for whole, kept in windows), windows
    _assert_metrics_close(result, _reference_metrics(pred, truth, spacing, (1,), 1.0, 95.0))
    assert result["hd"] > 10.0
    monkeypatch.setattr(search_mod, "_WINDOW_SAMPLE", 10**9)  # the whole surface, as before the window
    _assert_identical({1: surface_metrics(pred, truth, spacing)[1]}, {1: result})


@pytest.mark.parametrize("path", ["auto", "kdtree"])
@pytest.mark.parametrize("threads", [2, 3, 64])
def test_labels_scored_in_threads_are_bit_identical(monkeypatch: pytest.MonkeyPatch, path: str, threads: int) -> None:
    """``threads`` scores labels concurrently (the tail of a process-pool run); values and order do not change."""
    rng = np.random.default_rng(11)
    truth = _random_label_map(rng, (28, 24, 20), 6)
    pred = _perturb(rng, truth)
    pred[pred == 5] = 0
    labels: list = [6, 1, (2, 4), 5, 3, 99, 2, 4]
    spacing = (0.703125, 0.703125, 2.5)
    _use_path(monkeypatch, path)
    one = surface_metrics(np.asfortranarray(pred), np.asfortranarray(truth), spacing, labels=labels)
    many = surface_metrics(np.asfortranarray(pred), np.asfortranarray(truth), spacing, labels=labels, threads=threads)
    assert list(many) == labels
    _assert_identical(many, one)
    assert 0.0 < one[(2, 4)]["nsd"] < 1.0  # non-trivial values


SPACINGS_3D = [(1.0, 1.0, 1.0), (0.703125, 0.703125, 2.5), (2.5, 0.703125, 0.703125), (3.0, 2.0, 1.0), (0.1, 7.3, 0.45)]


@pytest.mark.parametrize("spacing", SPACINGS_3D + [(0.8, 1.3), (1.0, 1.0), (2.0, 0.7)])
def test_area_table_is_monais_bit_for_bit(spacing: tuple[float, ...]) -> None:
    """The surfel-area table is computed without MONAI/torch and equals MONAI's (float32 in 3D) exactly."""
    table, kernel = get_code_to_measure_table(spacing)
    np.testing.assert_array_equal(search_mod._area_table(spacing), np.asarray(table.numpy(), dtype=np.float64))
    ours = search_mod._ENCODING_KERNEL[len(spacing)]
    np.testing.assert_array_equal(ours, kernel.numpy().reshape(ours.shape))


def test_area_table_random_spacings() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        spacing = tuple(float(s) for s in rng.uniform(0.05, 8.0, 3))
        expected = np.asarray(get_code_to_measure_table(spacing)[0].numpy(), dtype=np.float64)
        np.testing.assert_array_equal(search_mod._area_table(spacing), expected, err_msg=str(spacing))


def test_default_labels_are_all_nonzero_ids_and_wrappers_agree() -> None:
    rng = np.random.default_rng(7)
    truth = _random_label_map(rng, (20, 22, 16), 4)
    pred = _perturb(rng, truth)
    pred[pred == 2] = 7  # 7 only in the prediction, 2 only in the truth
    spacing = (1.2, 0.9, 2.0)
    result = surface_metrics(pred, truth, spacing)
    assert sorted(result) == sorted(set(np.unique(truth).tolist() + np.unique(pred).tolist()) - {0})
    assert result[7]["nsd"] == 0.0 and result[2]["hd"] == math.inf
    assert hausdorff(pred, truth, spacing) == {k: v["hd"] for k, v in result.items()}
    assert hd95(pred, truth, spacing) == {k: v["hd95"] for k, v in result.items()}
    assert assd(pred, truth, spacing) == {k: v["assd"] for k, v in result.items()}
    assert nsd(pred, truth, spacing, 1.0) == {k: v["nsd"] for k, v in result.items()}
    hd50 = hd95(pred, truth, spacing, labels=[1], percentile=50.0)[1]
    assert hd50 <= result[1]["hd95"] <= result[1]["hd"]


@pytest.mark.parametrize("offset", [-5, 100_000])
def test_negative_and_large_ids_and_background_label(offset: int) -> None:
    rng = np.random.default_rng(3)
    base = _random_label_map(rng, (18, 20, 14), 3).astype(np.int64)
    base_pred = _perturb(rng, base)
    truth = np.where(base > 0, base + offset, 0)
    pred = np.where(base_pred > 0, base_pred + offset, 0)
    spacing = (1.0, 1.4, 0.6)
    labels: list = [1 + offset, 2 + offset, (1 + offset, 3 + offset), 0]
    result = surface_metrics(pred, truth, spacing, labels=labels, tolerance_mm=0.77)
    for label in labels:
        members = label if isinstance(label, tuple) else (label,)
        _assert_metrics_close(result[label], _reference_metrics(pred, truth, spacing, members, 0.77, 95.0))
    assert set(surface_metrics(pred, truth, spacing)) == set(np.unique(np.r_[truth.ravel(), pred.ravel()])) - {0}


@pytest.mark.parametrize("shift", [0, 240])
def test_compiled_union_boxes_and_per_map_boxes_agree(shift: int) -> None:
    """uint8 maps are boxed in one compiled pass over both, other dtypes map by map (``find_objects``):
    bit-identical values and the same labels (those present in either map), for ids up to 255."""
    rng = np.random.default_rng(5)
    truth = _random_label_map(rng, (18, 20, 14), 6)
    pred = _perturb(rng, truth)
    pred[pred == 2] = 0  # label 2 in the truth only
    truth[truth == 5] = 0  # label 5 in the prediction only
    truth, pred = (np.where(a > 0, a + shift, 0).astype(np.uint8) for a in (truth, pred))
    spacing = (1.0, 1.4, 0.6)
    compiled = surface_metrics(pred, truth, spacing)
    assert {2 + shift, 5 + shift} <= set(compiled)
    per_map = surface_metrics(pred.astype(np.uint16), truth.astype(np.uint16), spacing)
    _assert_identical(per_map, compiled)
    expected = crop_mod.union_label_boxes(truth.astype(np.int32), pred.astype(np.int32))
    assert crop_mod._uint8_union_boxes(truth, pred) == expected
    unaligned = np.empty(truth.size + 1, dtype=np.uint8)[1:].reshape(truth.shape)  # not 8-byte aligned
    unaligned[...] = truth
    assert crop_mod.union_label_boxes(unaligned, pred) == expected


def test_bool_maps() -> None:
    rng = np.random.default_rng(11)
    truth = _ball((30, 26), np.array([14.0, 12.0]), np.array([8.0, 5.0]))
    pred = truth ^ (rng.random(truth.shape) < 0.03)
    spacing = (0.9, 1.7)
    expected = _reference_metrics(pred.astype(np.uint8), truth.astype(np.uint8), spacing, (1,), 1.1, 95.0)
    _assert_metrics_close(surface_metrics(pred, truth, spacing, tolerance_mm=1.1)[1], expected)


@pytest.mark.parametrize(("shape", "flip"), [((9, 7), False), ((9, 7), True), ((6, 9, 5), False), ((6, 9, 5), True)])
def test_surface_codes_equal_the_padded_convolution(shape: tuple[int, ...], flip: bool) -> None:
    """The compiled neighbourhood codes and border corners of a crop equal ``sum_o kernel[o] * padded[i + o]``
    over the crop zero-padded by the search radius (the definition), and the border corners are the corners
    with ``0 < code < full``."""
    rng = np.random.default_rng(len(shape) + flip)
    arr = rng.integers(0, 3, size=(12, 11, 10)[: len(shape)], dtype=np.uint8)
    box = tuple(slice(1, 1 + n) for n in shape)
    spacing = (0.8, 1.3, 2.1)[: len(shape)]
    geometry = search_mod.Geometry(spacing, flip, 40)
    kernel = search_mod._ENCODING_KERNEL[len(shape)]
    kernel = kernel.T if flip else kernel
    padded = np.pad(np.isin(arr[box], (1, 2)), [(p, p) for p in geometry.pad]).astype(np.int64)
    expected = np.zeros(tuple(n - 1 for n in padded.shape), dtype=np.int64)
    for offset in np.ndindex(kernel.shape):
        expected += kernel[offset] * padded[tuple(slice(o, o + n) for o, n in zip(offset, expected.shape, strict=True))]
    surface = search_mod._surface(arr, box, (1, 2), geometry)
    assert surface.shape == expected.shape
    border = (expected > 0) & (expected < kernel.sum())
    np.testing.assert_array_equal(np.unpackbits(surface.bits, bitorder="little")[: border.size], border.ravel())
    np.testing.assert_array_equal(surface.flat, np.flatnonzero(border))
    np.testing.assert_array_equal(surface.codes, expected.ravel()[surface.flat])
    assert 0 < surface.flat.size < border.size  # a non-trivial mask


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (0.7, 0.9, 2.5), (2.5, 0.9, 0.6)])
def test_first_hits_restart_finds_the_same_first_hit(spacing: tuple[float, ...]) -> None:
    """A query that follows its neighbour starts its scan at the restart table's index (triangle inequality):
    the first hit is the one of a scan from offset 0, for near, far and table-missing queries alike."""
    from trackeval.metrics import compiled

    rng = np.random.default_rng(17)
    geometry = search_mod.Geometry(spacing, False, 400)
    shape = tuple(24 + 2 * p for p in geometry.pad)
    source = np.zeros(shape, dtype=bool)
    source[tuple(rng.integers(p, p + 24, size=40) for p in geometry.pad)] = True  # sparse: many misses
    strides = np.array([shape[1] * shape[2], shape[2], 1], dtype=np.int64)
    deltas = geometry.offsets @ strides
    inner = np.zeros(shape, dtype=bool)
    inner[tuple(slice(p, p + 24) for p in geometry.pad)] = True
    query = np.flatnonzero(inner & (rng.random(shape) < 0.7))  # runs of neighbours along the last axis
    with_restart, from_zero = (np.empty(query.size, dtype=np.int64) for _ in range(2))
    compiled.first_hits(np.packbits(source.ravel(), bitorder="little"), query, deltas, geometry.restart, with_restart)
    compiled.first_hits(
        np.packbits(source.ravel(), bitorder="little"), query, deltas, np.zeros_like(geometry.restart), from_zero
    )
    np.testing.assert_array_equal(with_restart, from_zero)
    assert (from_zero < 0).any() and (from_zero > 0).any() and (geometry.restart > 0).any()


def test_compiled_loops_fall_back_to_no_disk_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where numba finds no writable place for its cache (it raises RuntimeError: "no locator available"), a loop is
    compiled without one and gives the same results. The fault is simulated (root can write everywhere here)."""
    import numba

    from trackeval.metrics import compiled

    real = numba.njit
    calls: list[bool] = []

    def njit(signature: str, **options: object):  # noqa: ANN202
        calls.append(bool(options.get("cache")))
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'first_hits': no locator available for file '<test>'")
        return real(signature, **options)

    monkeypatch.setattr(numba, "njit", njit)
    uncached = compiled._compiled("void(uint8[::1], int64[::1], int64[::1], int64[::1], int64[::1])")(
        compiled.first_hits.py_func
    )
    assert calls == [True, False]
    bits = np.packbits(np.array([0, 0, 1, 0, 0, 0, 0, 1, 1], dtype=bool), bitorder="little")
    query, deltas, restart = (np.array(v, dtype=np.int64) for v in ([0, 1, 5], [0, 1, 2], [0, 0, 0]))
    out, expected = np.empty(3, dtype=np.int64), np.empty(3, dtype=np.int64)
    uncached(bits, query, deltas, restart, out)
    compiled.first_hits(bits, query, deltas, restart, expected)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out, [2, 1, 2])  # corners 2, 2 and 7 are the first set bits reached


# --------------------------------------------------------------------------- DeepMind published vectors
# google-deepmind/surface-distance, surface_distance_test.py


def test_deepmind_2d_two_pixels_2mm_away() -> None:
    gt = np.zeros((128, 128), bool)
    pr = np.zeros((128, 128), bool)
    gt[50, 70] = 1
    pr[50, 72] = 1
    sd = surface_distances(pr, gt, (2, 1))
    diag = 0.5 * math.sqrt(2**2 + 1**2)
    np.testing.assert_allclose(sd.surfel_areas_truth, [diag] * 4, rtol=1e-12)
    np.testing.assert_allclose(sd.surfel_areas_pred, [diag] * 4, rtol=1e-12)
    np.testing.assert_array_equal(sd.distances_truth_to_pred, [1.0, 1.0, 2.0, 2.0])
    np.testing.assert_array_equal(sd.distances_pred_to_truth, [1.0, 1.0, 2.0, 2.0])
    assert sd.average_surface_distances == pytest.approx((1.5, 1.5), abs=1e-3)
    m = surface_metrics(pr, gt, (2, 1), tolerance_mm=1.0)[1]
    assert m["hd"] == pytest.approx(2.0, abs=1e-3)
    assert m["hd95"] == pytest.approx(2.0, abs=1e-3)
    assert m["nsd"] == pytest.approx(0.5, abs=1e-3)
    assert m["assd"] == pytest.approx(1.5, abs=1e-3)


def test_deepmind_2d_two_squares_shifted_by_one_pixel() -> None:
    gt = np.zeros((6, 6), bool)
    gt[1:3, 1:3] = 1
    pr = np.zeros((6, 6), bool)
    pr[1:4, 1:3] = 1
    vertical, horizontal = 2.0, 1.0
    diag = 0.5 * math.sqrt(horizontal**2 + vertical**2)
    sd = surface_distances(pr, gt, (vertical, horizontal))
    areas_gt = np.array([diag, horizontal, diag, vertical, diag, horizontal, diag, vertical])
    areas_pr = np.array([diag, horizontal, diag, vertical, vertical, diag, horizontal, diag, vertical, vertical])
    d_gt = np.array([0.0] * 5 + [horizontal] + [0.0] * 2)
    d_pr = np.array([0.0] * 5 + [vertical] * 3 + [0.0] * 2)
    for d, a, got_d, got_a in [
        (d_gt, areas_gt, sd.distances_truth_to_pred, sd.surfel_areas_truth),
        (d_pr, areas_pr, sd.distances_pred_to_truth, sd.surfel_areas_pred),
    ]:
        order = np.lexsort((a, d))
        np.testing.assert_array_equal(got_d, d[order])
        np.testing.assert_allclose(got_a, a[order], rtol=1e-12)


def test_deepmind_3d_two_voxels_2mm_away() -> None:
    gt = np.zeros((128, 128, 128), bool)
    pr = np.zeros((128, 128, 128), bool)
    gt[50, 60, 70] = 1
    pr[50, 60, 72] = 1
    sd = surface_distances(pr, gt, (3, 2, 1))
    assert sd.average_surface_distances == pytest.approx((1.5, 1.5), abs=1e-3)
    m = surface_metrics(pr, gt, (3, 2, 1))[1]
    assert (m["hd"], m["hd95"], m["nsd"]) == pytest.approx((2.0, 2.0, 0.5), abs=1e-3)


def test_deepmind_3d_two_cubes_shifted_by_one_pixel() -> None:
    gt = np.zeros((100, 100, 100), np.uint8)
    pr = np.zeros((100, 100, 100), np.uint8)
    gt[0:50, :, :] = 1
    pr[0:51, :, :] = 1
    sd = surface_distances(pr, gt, (2, 1, 1))
    assert sd.average_surface_distances == pytest.approx((0.322, 0.339), abs=1e-3)
    a_t, a_p = sd.surfel_areas_truth, sd.surfel_areas_pred
    overlap = (
        a_t[sd.distances_truth_to_pred <= 1].sum() / a_t.sum(),
        a_p[sd.distances_pred_to_truth <= 1].sum() / a_p.sum(),
    )
    assert overlap == pytest.approx((0.842, 0.830), abs=1e-3)
    m = surface_metrics(pr, gt, (2, 1, 1), tolerance_mm=1.0)[1]
    assert m["hd"] == pytest.approx(2.0, abs=1e-3)
    assert m["hd95"] == pytest.approx(2.0, abs=1e-3)
    assert m["nsd"] == pytest.approx(0.836, abs=1e-3)
    # pooled ASSD lies between the directed DeepMind values
    assert 0.322 < m["assd"] < 0.339


# --------------------------------------------------------------------------- empty masks


@pytest.mark.parametrize("ndim", [2, 3])
def test_empty_cases(ndim: int) -> None:
    shape = (16,) * ndim
    spacing = (3.0, 2.0, 1.0)[:ndim]
    empty = np.zeros(shape, np.uint8)
    one = empty.copy()
    one[(5,) * ndim] = 1
    both = surface_metrics(empty, empty, spacing, labels=[1])[1]
    assert all(math.isnan(v) for v in both.values())
    for pred, truth in [(empty, one), (one, empty)]:
        m = surface_metrics(pred, truth, spacing, labels=[1])[1]
        assert m == {"hd": math.inf, "hd95": math.inf, "assd": math.inf, "nsd": 0.0}
    assert surface_metrics(empty, empty, spacing) == {}
    sd = surface_distances(empty, one, spacing)
    assert sd.distances_pred_to_truth.size == 0 and np.all(np.isinf(sd.distances_truth_to_pred))
    assert math.isnan(sd.average_surface_distances[1]) and sd.average_surface_distances[0] == math.inf
    sd = surface_distances(empty, empty, spacing)
    assert sd.distances_truth_to_pred.size == 0 and sd.surfel_areas_pred.size == 0


# --------------------------------------------------------------------------- MONAI agreement


def _one_hot(label_map: np.ndarray, labels: list) -> torch.Tensor:
    channels = [np.isin(label_map, lab if isinstance(lab, tuple) else (lab,)) for lab in labels]
    return torch.from_numpy(np.stack(channels)[None].astype(np.float32))


MONAI_CASES = [
    pytest.param((48, 40), (0.9, 1.6), id="2d"),
    pytest.param((26, 30, 22), (2.0, 0.8, 1.1), id="3d"),
]


@pytest.mark.parametrize(("shape", "spacing"), MONAI_CASES)
def test_nsd_and_hd_agree_with_monai(shape: tuple[int, ...], spacing: tuple[float, ...]) -> None:
    rng = np.random.default_rng(sum(shape))
    truth = _random_label_map(rng, shape, 5)
    pred = _perturb(rng, truth)
    labels: list = [1, 2, 3, 4, 5, (2, 5)]
    tol = 1.3
    ours = surface_metrics(pred, truth, spacing, labels=labels, tolerance_mm=tol)
    y_pred, y = _one_hot(pred, labels), _one_hot(truth, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monai_nsd = SurfaceDiceMetric(
            class_thresholds=[tol] * len(labels), include_background=True, use_subvoxels=True
        )(y_pred, y, spacing=list(spacing))[0]
        monai_hd = HausdorffDistanceMetric(include_background=True)(y_pred, y, spacing=list(spacing))[0]
    # NSD: identical definition, MONAI returns float32
    np.testing.assert_allclose([ours[lab]["nsd"] for lab in labels], monai_nsd.numpy(), atol=2e-6)
    # HD: MONAI measures between edge-voxel centres, we between border corners. Each border
    # corner is within half a voxel diagonal of an edge-voxel centre and vice versa, so the two
    # Hausdorff distances differ by at most one voxel diagonal.
    voxel_diagonal = math.sqrt(sum(s * s for s in spacing))
    diffs = np.abs(np.array([ours[lab]["hd"] for lab in labels]) - monai_hd.numpy())
    assert np.all(diffs <= voxel_diagonal + 1e-5), (diffs, voxel_diagonal)


# --------------------------------------------------------------------------- validation


def test_validation_errors() -> None:
    a = np.zeros((4, 5, 6), np.uint8)
    sp = (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"same shape.*\(4, 5, 6\).*\(4, 5, 7\)"):
        surface_metrics(a, np.zeros((4, 5, 7), np.uint8), sp)
    with pytest.raises(TypeError, match="integer or bool dtype"):
        surface_metrics(a.astype(np.float32), a, sp)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        surface_metrics(a.tolist(), a, sp)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2D or 3D"):
        surface_metrics(np.zeros((2, 2, 2, 2), np.uint8), np.zeros((2, 2, 2, 2), np.uint8), (1,) * 4)
    with pytest.raises(ValueError, match="one value per axis"):
        surface_metrics(a, a, (1.0, 1.0))
    for bad in [(1.0, 0.0, 1.0), (1.0, -2.0, 1.0), (1.0, math.nan, 1.0), (1.0, math.inf, 1.0)]:
        with pytest.raises(ValueError, match="positive and finite"):
            surface_metrics(a, a, bad)
    with pytest.raises(TypeError, match="spacing"):
        surface_metrics(a, a, "1,1,1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tolerance_mm must be >= 0"):
        surface_metrics(a, a, sp, tolerance_mm=-0.1)
    with pytest.raises(ValueError, match="tolerance_mm"):
        nsd(a, a, sp, math.nan)
    for bad_pct in (-1.0, 100.5, math.nan):
        with pytest.raises(ValueError, match=r"percentile must be in \[0, 100\]"):
            surface_metrics(a, a, sp, percentile=bad_pct)
    with pytest.raises(TypeError, match="labels"):
        surface_metrics(a, a, sp, labels=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="label ids must be integers"):
        surface_metrics(a, a, sp, labels=[1.5])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="at least one id"):
        surface_metrics(a, a, sp, labels=[()])
    with pytest.raises(TypeError, match="threads must be an integer"):
        surface_metrics(a, a, sp, threads=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads must be >= 1"):
        surface_metrics(a, a, sp, threads=0)
    with pytest.raises(ValueError, match="same shape"):
        surface_distances(np.zeros((3, 3), bool), np.zeros((3, 4), bool), (1.0, 1.0))
