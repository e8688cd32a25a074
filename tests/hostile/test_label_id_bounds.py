"""Resources are bounded before they are allocated: label ids outside the label map are refused before anything
sized by them is built.

The confusion matrix behind Dice and IoU is ``K x K`` int64 in the ``K`` distinct values of the two maps: a 50 KB
UMD prediction holding 20 000 ids that are not in ``umd.labels`` used to peak at 3.1 GB before its "not in the
label map" error. The values are now checked against the label map first
(:func:`trackeval.metrics.overlap.unlisted_values`: a ``max`` pass, then a chunked pass through a table sized by
the label map), for UMD and X-ray seg. The end-to-end cases run ``trackeval evaluate`` in a subprocess that
measures its peak (``tracemalloc``, as ``test_input_bounds.py`` does in-process) under an ``RLIMIT_DATA`` of
1 GiB, so a regression fails fast instead of exhausting the machine; each ends with exit 2 and the one-line
message naming file, case and field.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import evaluate_argv, save_nifti, scaled, umd_argv
from trackeval.metrics.overlap import unlisted_values

FAST = ("--executor", "local", "--no-cache", "--set", "bootstrap.n_resamples=20")
SHAPE = (40, 40, 40)
N_STRAY = 20_000
#: the most traced memory an evaluation refusing stray ids may peak at (the old K x K matrix: 3.2 GB)
PEAK_LIMIT = 64 << 20

#: runs ``trackeval`` with its argv, under a data limit, and prints its exit status and traced peak as JSON
_MEASURED = """
import json, resource, sys, tracemalloc
if hasattr(resource, "RLIMIT_DATA"):
    resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30))
from trackeval.cli import main
import trackeval.benchmarks.umd, trackeval.benchmarks.xray  # imported before tracing: code is not a peak
tracemalloc.start()
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "peak": tracemalloc.get_traced_memory()[1]}))
"""


def _measured(cwd: Path, *argv: object) -> tuple[int, int, str]:
    """``(exit status, traced peak in bytes, stderr)`` of ``trackeval *argv`` in a fresh interpreter."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURED, *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=scaled(180),
        check=False,
    )
    assert proc.stdout.strip(), (proc.returncode, proc.stderr[-2000:])
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return report["rc"], report["peak"], proc.stderr


def _one_line(stderr: str, *needles: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [x for x in stderr.splitlines() if x.startswith("trackeval: error:")]
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _stray(shape: tuple[int, ...], first: int = 1000, n: int = N_STRAY) -> np.ndarray:
    """A uint16 map holding ``n`` distinct ids ``first, first + 1, ...`` (then repeating) on a zero background."""
    size = int(np.prod(shape))
    values = np.zeros(size, np.uint16)
    values[: min(size, 3 * n)] = first + np.arange(min(size, 3 * n)) % n
    return values.reshape(shape)


STRAY_NEEDLE = f"[{', '.join(str(1000 + i) for i in range(10))}]"  # the ten smallest stray ids


# --------------------------------------------------------------------------------------------------------- UMD


@pytest.mark.parametrize("role", ["prediction", "ground truth"])
def test_umd_map_with_20000_stray_ids_is_refused_with_bounded_memory(umd_dataset, tmp_path, role):
    gt, pred = umd_dataset(shape=SHAPE)
    path = (pred if role == "prediction" else gt) / "s1_ct.nii.gz"
    save_nifti(path, _stray(SHAPE), dtype=np.uint16)
    assert path.stat().st_size < 200 << 10  # a small file
    out = tmp_path / "out"
    rc, peak, err = _measured(tmp_path, *umd_argv(gt, pred, out, *FAST))
    assert rc == 2, err[-2000:]
    _one_line(
        err,
        f"{role} holds label id(s) {STRAY_NEEDLE} that are not in the label map (umd.labels)",
        f"file={path}",
        "case=s1_ct",
        "field=voxel values",
    )
    assert peak < PEAK_LIMIT, peak
    assert not out.exists()


def _umd_with_pred_values(umd_dataset, values: dict[tuple[int, int, int], int]) -> tuple[Path, Path, Path]:
    gt, pred = umd_dataset()
    import nibabel as nib

    path = pred / "s1_ct.nii.gz"
    array = np.asarray(nib.load(path).dataobj).copy()
    for where, value in values.items():
        array[where] = value
    save_nifti(path, array)
    return gt, pred, path


@pytest.mark.parametrize(
    ("values", "labels", "listed"),
    [
        ({(0, 0, 0): 14}, None, "[14]"),  # above the largest id of the default map (1..13)
        ({(0, 0, 0): 3}, "umd.labels={liver: 1, heart: 5}", "[3]"),  # a gap between listed ids
        ({(0, 0, 0): 9, (0, 0, 1): 3, (0, 0, 2): 200}, "umd.labels={liver: 1, heart: 5}", "[3, 9, 200]"),
        ({(0, 0, 0): 2}, "umd.labels={liver: 1, heart: 5, big: 1099511627776}", "[2]"),  # no 2**40 table
    ],
    ids=["above-the-map", "in-a-gap", "sorted", "huge-listed-id"],
)
def test_umd_stray_ids_are_named_exactly(cli, umd_dataset, tmp_path, values, labels, listed):
    gt, pred, path = _umd_with_pred_values(umd_dataset, values)
    out = tmp_path / "out"
    extra = ("--set", labels) if labels else ()
    cli(*umd_argv(gt, pred, out, *FAST, *extra)).one_line_error(
        f"prediction holds label id(s) {listed} that are not in the label map",
        f"file={path}",
        "case=s1_ct",
        "field=voxel values",
    )
    assert not out.exists()


def test_umd_region_ids_are_in_the_label_map(cli, umd_dataset, tmp_path):
    """Control: the ids of a region (``kidney: [2, 3]``) are listed; a map using them scores normally."""
    gt, pred, _ = _umd_with_pred_values(umd_dataset, {(0, 0, 0): 2, (0, 0, 1): 3})
    out = tmp_path / "out"
    res = cli(*umd_argv(gt, pred, out, *FAST, "--set", "umd.labels={liver: 1, kidney: [2, 3], heart: 5}"))
    assert res.rc == 0, res.err
    assert "umd/dsc/by_organ/kidney" in json.loads((out / "results.json").read_text())["aggregates"]


# --------------------------------------------------------------------------------------------------- X-ray seg


def _seg(tmp_path: Path, shape=(200, 200)) -> tuple[Path, Path, Path]:
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    gt.mkdir()
    pred.mkdir()
    for i in range(2):
        mask = np.zeros(shape, np.uint8)
        mask[20 : 80 + i, 30:90] = 255
        Image.fromarray(mask).save(gt / f"img{i}.png")
        Image.fromarray(mask).save(pred / f"img{i}.png")
    names = tmp_path / "names.csv"
    with names.open("w", newline="") as f:
        csv.writer(f).writerows([["id", "name"], [255, "lung"]])
    return gt, pred, names


def _seg_argv(gt: Path, pred: Path, out: Path, names: Path) -> list[str]:
    return [*evaluate_argv("xray", gt, pred, out, "--task", "seg", "--label-names", str(names)), *FAST]


@pytest.mark.parametrize("role", ["prediction", "truth"])
def test_xray_seg_png_with_20000_stray_values_is_refused_with_bounded_memory(tmp_path, role):
    gt, pred, names = _seg(tmp_path)
    path = (pred if role == "prediction" else gt) / "img1.png"
    Image.fromarray(_stray((200, 200))).save(path)  # 16-bit greyscale
    assert Image.open(path).mode.startswith("I")
    out = tmp_path / "out"
    rc, peak, err = _measured(tmp_path, *_seg_argv(gt, pred, out, names))
    assert rc == 2, err[-2000:]
    _one_line(
        err,
        f"{role} holds pixel value(s) {STRAY_NEEDLE} that are not in the label names",
        f"file={path}",
        "case=img1",
        "field=pixel values",
    )
    assert peak < PEAK_LIMIT, peak
    assert not out.exists()


def test_xray_seg_one_stray_value_is_named(cli, tmp_path):
    gt, pred, names = _seg(tmp_path, shape=(24, 24))
    mask = np.asarray(Image.open(pred / "img0.png")).copy()
    mask[0, 0], mask[0, 1] = 128, 7
    Image.fromarray(mask).save(pred / "img0.png")
    out = tmp_path / "out"
    cli(*_seg_argv(gt, pred, out, names)).one_line_error(
        "prediction holds pixel value(s) [7, 128] that are not in the label names",
        f"file={pred / 'img0.png'}",
        "case=img0",
        "field=pixel values",
    )
    assert not out.exists()


# ------------------------------------------------------------------------------------ the check itself: bounded


def _traced_peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        value = fn()
        return value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("array", "allowed"),
    [
        (np.arange(64_000, dtype=np.uint32).reshape(SHAPE), range(1, 14)),  # 64 k ids in a 40^3 volume
        (np.full(SHAPE, 2**62, dtype=np.int64), {1, 2**62 - 1}),  # a huge value: no table of its size
        (np.ones(SHAPE, dtype=np.uint8), {1, 2**40}),  # a huge listed id: searched, not tabled
    ],
    ids=["64k-ids", "huge-value", "huge-listed-id"],
)
def test_the_check_peaks_at_a_chunk_not_at_the_ids(array, allowed):
    found, peak = _traced_peak(lambda: unlisted_values(array, allowed))
    expected = sorted({int(v) for v in np.unique(array)} - set(allowed) - {0})[:10]
    assert found == expected
    assert peak < 8 << 20, peak  # one chunk of int64 codes (4 MiB) and a small table


def _brute(array: np.ndarray, allowed) -> list[int]:
    return sorted({int(v) for v in np.unique(array.astype(np.int64))} - {int(a) for a in allowed} - {0})[:10]


@pytest.mark.parametrize(
    ("dtype", "layout", "allowed"),
    [
        (np.uint8, "C", range(1, 14)),
        (np.int16, "F", {1, 5, 9}),
        (np.uint16, "strided", {2, 3}),
        (np.uint64, "C", {1, 2**40}),
        (np.bool_, "F", set()),
        (np.int32, "F", {7}),
    ],
    ids=["uint8-C-contiguous-map", "int16-F-gaps", "uint16-strided", "uint64-huge-id", "bool-empty-map", "int32-F"],
)
def test_the_check_agrees_with_a_brute_force_set_difference(dtype, layout, allowed):
    rng = np.random.default_rng(7)
    hi = 2 if dtype == np.bool_ else 40
    array = rng.integers(0, hi, size=(30, 20, 24)).astype(dtype)
    array[array == 9] = 0 if dtype == np.bool_ else 2**40 if dtype == np.uint64 else 9
    if layout == "F":
        array = np.asfortranarray(array)
    elif layout == "strided":
        array = array[::2, 1::3, :]
    assert unlisted_values(array, allowed) == _brute(array, allowed)
    assert unlisted_values(np.zeros_like(array), allowed) == []
