"""Inputs cannot exhaust memory or silently change geometry: hostile NIfTI, PNG and NPZ files.

Every file here is real and hand-built: NIfTI headers are nibabel headers with one field changed, then
serialised with their voxels (a gzip bomb is a tiny header claiming a small image followed by megabytes of zeros,
deflated with zlib); PNGs carry a hand-written IHDR chunk; NPZ archives a hand-written ``.npy`` header. Each is
evaluated through the CLI and must end with exit 2, one line naming the file, the case and the field, and no
``--out`` folder.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import struct
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import scipy.sparse
from PIL import Image

from tests.conftest import SPACING, cube, save_nifti, umd_argv, write_manifest
from trackeval.errors import InputError
from trackeval.io import nifti
from trackeval.io.limits import MAX_VOXELS_ENV
from trackeval.io.nifti import read_image, read_label_map

SHAPE = (20, 18, 12)
FAST = ("--executor", "local", "--set", "bootstrap.n_resamples=50", "--set", "engine.cache=false")


def nifti_bytes(
    array: np.ndarray,
    *,
    spacing: tuple[float, ...] = SPACING,
    edit: Callable[[nib.Nifti1Header], None] | None = None,
    header_class: type = nib.Nifti1Header,
) -> bytes:
    """An uncompressed single-file NIfTI (header, extension flag, Fortran-order voxels) with ``edit`` applied to
    the header after nibabel filled it in from the affine."""
    image_class = nib.Nifti1Image if header_class is nib.Nifti1Header else nib.Nifti2Image
    img = image_class(array, np.diag([*spacing, 1.0]), dtype=array.dtype)
    header = img.header
    header.set_data_dtype(array.dtype)
    header["vox_offset"] = header.sizeof_hdr + 4
    if edit is not None:
        edit(header)
    return header.binaryblock + b"\0" * 4 + np.asarray(array).tobytes(order="F")


def deflate(*parts: bytes) -> bytes:
    """One gzip member of the parts, built with zlib (wbits 31 = gzip)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(z.compress(p) for p in parts) + z.flush()


def _labels() -> np.ndarray:
    return cube(SHAPE, (2, 2, 2), (10, 10, 8), 1)


@pytest.fixture
def umd(umd_dataset, tmp_path, cli):
    """``umd(raw)``: write ``raw`` as the prediction of case s1_ct and run ``trackeval evaluate umd``."""
    gt, pred = umd_dataset()
    out = tmp_path / "out"

    def run(raw: bytes | None = None, *extra: str):
        if raw is not None:
            (pred / "s1_ct.nii.gz").write_bytes(raw)
        return cli(*umd_argv(gt, pred, out, *FAST, *extra))

    run.pred, run.gt, run.out = pred / "s1_ct.nii.gz", gt, out
    return run


def _set(field: str, index: int | None, value: float) -> Callable[[nib.Nifti1Header], None]:
    def edit(header: nib.Nifti1Header) -> None:
        if index is None:
            header[field] = value
        else:
            header[field][index] = value

    return edit


def _sform(matrix: list[list[float]]) -> Callable[[nib.Nifti1Header], None]:
    def edit(header: nib.Nifti1Header) -> None:
        header.set_sform(np.array([*matrix, [0, 0, 0, 1]], dtype=float), code=2)

    return edit


def _dims(*dims: int) -> Callable[[nib.Nifti1Header], None]:
    def edit(header: nib.Nifti1Header) -> None:
        header["dim"][: len(dims) + 1] = [len(dims), *dims]

    return edit


def _scale(slope: float, inter: float = 0.0) -> Callable[[nib.Nifti1Header], None]:
    def edit(header: nib.Nifti1Header) -> None:
        header["scl_slope"], header["scl_inter"] = slope, inter

    return edit


def _chain(*edits: Callable[[nib.Nifti1Header], None]) -> Callable[[nib.Nifti1Header], None]:
    def edit(header: nib.Nifti1Header) -> None:
        for e in edits:
            e(header)

    return edit


_BODY = _labels()
_PLAIN = nifti_bytes(_BODY)

#: (id, file bytes, needle, field)
NIFTI_CASES = [
    # size: bombs, trailing data, truncation, absurd dimensions
    ("gzip_bomb_8mb", deflate(_PLAIN, bytes(8 << 20)), "inflates beyond", "dim"),
    ("gzip_trailing_junk", deflate(_PLAIN) + b"JUNK" * 100, "trailing data after the gzip stream", None),
    ("gzip_second_member", deflate(_PLAIN) + deflate(bytes(4096)), "inflates beyond", "dim"),
    ("gzip_short_image", deflate(_PLAIN[:-100]), "truncated: it inflates to", "dim"),
    ("gzip_cut_stream", deflate(_PLAIN)[:-30], "truncated or corrupt gzip stream", None),
    ("gzip_bad_crc", deflate(_PLAIN)[:-8] + b"\0" * 8, "truncated or corrupt gzip stream", None),
    ("plain_trailing_data", _PLAIN + b"\0" * 64, "trailing data after the image", "dim"),
    ("plain_truncated", _PLAIN[:-1], "truncated", "dim"),
    ("huge_dims", deflate(nifti_bytes(_BODY, edit=_dims(30000, 30000, 30000))), "exceeds the limit", "dim"),
    ("huge_dims_plain", nifti_bytes(_BODY, edit=_dims(32767, 32767, 32767)), "exceeds the limit", "dim"),
    ("four_d", deflate(nifti_bytes(_BODY, edit=_dims(20, 18, 6, 2))), "expected a 2D or 3D volume", "dim"),
    ("one_d", deflate(nifti_bytes(_BODY, edit=_dims(4320))), "expected a 2D or 3D volume", "dim"),
    (
        "vox_offset_in_header",
        deflate(nifti_bytes(_BODY, edit=_set("vox_offset", None, 100))),
        "vox offset 100 too low",
        "header",
    ),
    ("not_nifti", deflate(b"\x89PNG\r\n\x1a\n" + bytes(600)), "no n+1/n+2 magic", "header"),
    ("pair_magic_ni1", deflate(nifti_bytes(_BODY, edit=_set("magic", None, b"ni1"))), "no n+1/n+2 magic", "header"),
    ("unknown_datatype", deflate(nifti_bytes(_BODY, edit=_set("datatype", None, 9999))), "bad header", "header"),
    # geometry: pixdim against the affine
    ("pixdim_contradicts_sform", deflate(nifti_bytes(_BODY, edit=_set("pixdim", 1, 3.0))), "disagrees", "pixdim"),
    ("pixdim_slightly_off", deflate(nifti_bytes(_BODY, edit=_set("pixdim", 3, 2.01))), "disagrees", "pixdim"),
    ("pixdim_zero", deflate(nifti_bytes(_BODY, edit=_set("pixdim", 2, 0.0))), "not a positive spacing", "pixdim"),
    ("pixdim_negative", deflate(nifti_bytes(_BODY, edit=_set("pixdim", 1, -1.5))), "not a positive spacing", "pixdim"),
    ("pixdim_nan", deflate(nifti_bytes(_BODY, edit=_set("pixdim", 3, math.nan))), "not a positive spacing", "pixdim"),
    (
        "sform_nan",
        deflate(nifti_bytes(_BODY, edit=_sform([[math.nan, 0, 0, 0], [0, 1, 0, 0], [0, 0, 2, 0]]))),
        "NaN or inf",
        "affine",
    ),
    (
        "sform_zero_column",
        deflate(nifti_bytes(_BODY, edit=_sform([[1.5, 0, 0, 0], [0, 0, 0, 0], [0, 0, 2, 0]]))),
        "outside",
        "affine",
    ),
    (
        "sform_degenerate",
        deflate(nifti_bytes(_BODY, edit=_sform([[1.5, 1.0, 0, 0], [0, 0, 0, 0], [0, 0, 2, 0]]))),
        "degenerate",
        "affine",
    ),
    ("spacing_absurd_large", deflate(nifti_bytes(_BODY, spacing=(1e6, 1.0, 2.0))), "outside", "affine"),
    ("spacing_absurd_small", deflate(nifti_bytes(_BODY, spacing=(1e-6, 1.0, 2.0))), "outside", "affine"),
    (
        "qform_bad_quaternion",
        deflate(
            nifti_bytes(
                _BODY, edit=_chain(_set("sform_code", None, 0), _set("qform_code", None, 1), _set("quatern_b", None, 2))
            )
        ),
        "no valid affine",
        "affine",
    ),
    # values and types
    (
        "scaled_to_fractions",
        deflate(nifti_bytes(_BODY, edit=_scale(0.5))),
        "non-integer",
        "voxel values",
    ),
    (
        "inf_intercept",
        deflate(nifti_bytes(_BODY, edit=_chain(_set("scl_slope", None, 1.0), _set("scl_inter", None, math.inf)))),
        "invalid scaling",
        "scl_inter",
    ),
    ("float_beyond_int64", deflate(nifti_bytes(_BODY * np.float64(1e300))), "beyond the int64 range", "voxel values"),
    (
        "uint64_beyond_int64",
        deflate(nifti_bytes(_BODY * np.uint64(2**63 + 1))),
        "beyond the int64 range",
        "voxel values",
    ),
    ("complex_voxels", deflate(nifti_bytes(_BODY.astype(np.complex64))), "unsupported voxel dtype", "datatype"),
    ("negative_labels", deflate(nifti_bytes(-_BODY.astype(np.int16))), "negative label value", "voxel values"),
]


@pytest.mark.parametrize(("raw", "needle", "field"), [c[1:] for c in NIFTI_CASES], ids=[c[0] for c in NIFTI_CASES])
def test_hostile_nifti_is_one_line_naming_file_case_field(umd, raw, needle, field):
    res = umd(raw)
    res.one_line_error(needle, f"file={umd.pred}", "case=s1_ct", *([f"field={field}"] if field else []), rc=2)
    assert not umd.out.exists()


def test_the_bomb_file_is_small(umd):
    """The hostile files are small: the 8 MB bomb is a few kilobytes on disk."""
    assert len(NIFTI_CASES[0][1]) < 64 << 10


def test_the_voxel_limit_is_configurable_by_environment(umd, monkeypatch):
    monkeypatch.setenv(MAX_VOXELS_ENV, str(math.prod(SHAPE) - 1))
    umd().one_line_error("exceeds the limit", MAX_VOXELS_ENV, "case=s", "field=dim", rc=2)
    assert not umd.out.exists()
    monkeypatch.setenv(MAX_VOXELS_ENV, str(math.prod(SHAPE)))
    assert umd().rc == 0


@pytest.mark.parametrize("value", ["lots", "0", "-5", "1e9"])
def test_an_invalid_voxel_limit_is_a_config_error(umd, monkeypatch, value):
    monkeypatch.setenv(MAX_VOXELS_ENV, value)
    umd().one_line_error(MAX_VOXELS_ENV, repr(value), rc=2)
    assert not umd.out.exists()


def _loop(pred: Path) -> None:
    pred.unlink()
    pred.symlink_to(pred)


def _fifo(pred: Path) -> None:
    pred.unlink()
    os.mkfifo(pred)


@pytest.mark.parametrize(
    ("make", "target", "needle"),
    [(_loop, "pred", "symbolic link loop"), (_loop, "truth", "symbolic link loop")],
    ids=["prediction_symlink_loop", "truth_symlink_loop"],
)
def test_symlink_loops_are_one_line(umd, make, target, needle):
    path = umd.pred if target == "pred" else umd.gt / "s1_ct.nii.gz"
    make(path)
    umd().one_line_error(needle, f"file={path}", "case=s1_ct", rc=2)
    assert not umd.out.exists()


def test_a_fifo_is_refused_not_read(umd_dataset, tmp_path):
    """A FIFO where a label map should be: refused at once (opening it must not block)."""
    gt, _ = umd_dataset()
    path = gt / "s1_ct.nii.gz"
    _fifo(path)
    with pytest.raises(InputError, match="not a regular file") as err:
        read_label_map(path, case_id="s1_ct")
    assert err.value.file == str(path) and err.value.case_id == "s1_ct"


# ------------------------------------------------------------------ accepted inputs and memory bounds


def test_nifti2_and_plain_nifti_and_scaled_integers_are_read(tmp_path):
    """Control cases: NIfTI-2, an uncompressed file, an integer scaling (labels x 2) and spacing from the affine."""
    body = _labels()
    for name, raw, expect in [
        ("n2.nii", nifti_bytes(body, header_class=nib.Nifti2Header), body),
        ("plain.nii", _PLAIN, body),
        ("scaled.nii.gz", deflate(nifti_bytes(body, edit=_scale(2.0))), body * 2),
    ]:
        (tmp_path / name).write_bytes(raw)
        vol = read_label_map(tmp_path / name, case_id="c")
        assert np.array_equal(vol.array, expect) and vol.array.dtype == np.uint8
        assert vol.spacing == pytest.approx(SPACING)


def test_spacing_comes_from_a_rotated_affine(tmp_path):
    """An oblique sform: the spacing is the affine's column norms (pixdim agrees), not the diagonal."""
    c, s = math.cos(0.3), math.sin(0.3)
    rotated = [[1.5 * c, -1.0 * s, 0, 0], [1.5 * s, 1.0 * c, 0, 0], [0, 0, 2.0, 0]]
    path = tmp_path / "oblique.nii.gz"
    path.write_bytes(deflate(nifti_bytes(_labels(), edit=_sform(rotated))))
    assert read_label_map(path, case_id="c").spacing == pytest.approx((1.5, 1.0, 2.0))


def test_a_200mb_bomb_is_refused_without_inflating_it(tmp_path):
    """A header claiming 416 bytes then 200 MB of zeros (about 200 KB on disk): refused with a peak of a few MB."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    small = nifti_bytes(np.zeros((4, 4, 4), np.uint8))
    parts = [z.compress(small)] + [z.compress(bytes(1 << 20)) for _ in range(200)] + [z.flush()]
    path = tmp_path / "bomb.nii.gz"
    path.write_bytes(b"".join(parts))
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="inflates beyond the 416 bytes"):
            read_label_map(path, case_id="c")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert path.stat().st_size < 1 << 20 and peak < 8 << 20


@pytest.mark.parametrize(("dtype", "compress"), [(np.float32, False), (np.int16, True), (np.uint8, False)])
def test_peak_memory_is_about_three_times_the_declared_array(tmp_path, monkeypatch, dtype, compress):
    """Peak traced memory of reading a label map (file bytes included) stays within 3x the declared array plus
    the conversion chunks."""
    monkeypatch.setattr(nifti, "CHUNK_VOXELS", 1 << 14)
    array = np.zeros((96, 96, 64), dtype)
    array[10:50, 20:60, 5:40] = 3
    raw = nifti_bytes(array)
    path = tmp_path / "big.nii.gz"
    path.write_bytes(gzip.compress(raw, 1) if compress else raw)
    tracemalloc.start()
    try:
        vol = read_label_map(path, case_id="c")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(vol.array, array)
    assert peak <= 3 * array.nbytes + 64 * (1 << 14) + (1 << 20), (peak, array.nbytes)


def test_an_image_volume_is_scaled_to_float32(tmp_path):
    path = tmp_path / "img.nii.gz"
    path.write_bytes(deflate(nifti_bytes(_labels().astype(np.int16), edit=_scale(0.5, -1.0))))
    vol = read_image(path, case_id="c")
    assert vol.array.dtype == np.float32 and np.array_equal(vol.array, _labels() * 0.5 - 1.0)


# ------------------------------------------------------------------ IMIS: PNG and NPZ


def _png(width: int, height: int, *, idat: bytes | None = None) -> bytes:
    """A PNG with a hand-written IHDR (8-bit RGB) and one IDAT chunk (default: a single deflated zero byte)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat or zlib.compress(b"\0")) + chunk(b"IEND", b"")
    )


def _npy_header(shape: tuple[int, ...], dtype: str = "<i4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


@pytest.fixture
def imis_case(tmp_path, cli):
    """A one-image IMIS-Bench folder; ``imis_case(edit)`` lets ``edit(gt, image, label)`` damage it, then runs
    ``trackeval evaluate imis`` with the region-growing baseline."""
    gt = tmp_path / "gt"
    (gt / "image").mkdir(parents=True)
    (gt / "label").mkdir()
    mask = np.zeros((24, 24), bool)
    mask[4:12, 5:15] = True
    img = np.zeros((24, 24, 3), np.uint8)
    img[..., 0] = mask * 200
    Image.fromarray(img).save(gt / "image" / "c1.png")
    label = gt / "label" / "x___c1.(1, 24, 24, 1).npz"
    scipy.sparse.save_npz(label, scipy.sparse.csr_matrix(mask.reshape(1, -1).astype(np.int32)))
    meta = {"labels": {"0": "background", "1": "liver"}, "modality": {"0": "ct"}, "test": []}
    out = tmp_path / "out"

    def run(edit: Callable[[Path, Path, Path], Path | None]):
        new_label = edit(gt, gt / "image" / "c1.png", label) or label
        item = {"image": "image/c1.png", "label": new_label.relative_to(gt).as_posix()}
        (gt / "dataset.json").write_text(json.dumps({**meta, "test": [item]}))
        argv = ["evaluate", "imis", "--ground-truth", gt, "--model", "trackeval.interactive.baselines:region_grower"]
        return cli(*argv, "--out", out, "--set", "bootstrap.n_resamples=20", "--set", "imis.max_turns=2"), new_label

    run.out = out
    return run


def _write_png(raw: bytes) -> Callable[[Path, Path, Path], None]:
    def edit(gt: Path, image: Path, label: Path) -> None:
        image.write_bytes(raw)

    return edit


def _rename_label(name: str) -> Callable[[Path, Path, Path], Path]:
    return lambda gt, image, label: label.rename(label.parent / name)


def _npz_member(name: str, raw: bytes) -> Callable[[Path, Path, Path], None]:
    """Replace one member of the label archive (``data.npy``, ``format.npy``...) by ``raw``."""

    def edit(gt: Path, image: Path, label: Path) -> None:
        with zipfile.ZipFile(label) as z:
            members = {n: z.read(n) for n in z.namelist()}
        members[name] = raw
        with zipfile.ZipFile(label, "w") as z:
            for n, data in members.items():
                z.writestr(n, data)

    return edit


IMIS_CASES = [
    ("png_bomb_ihdr", _write_png(_png(200_000, 200_000)), "image", "decompression bomb", "size"),
    ("png_wide_ihdr", _write_png(_png(2**31 - 1, 2)), "image", "decompression bomb", "size"),
    ("png_truncated", _write_png(_png(24, 24)[:40]), "image", "not a readable image", "image"),
    ("png_not_an_image", _write_png(b"GIF89a but not really"), "image", "not a readable image", "image"),
    ("png_bad_pixels", _write_png(_png(24, 24, idat=b"not zlib")), "image", "not a readable image", "image"),
    (
        "npz_name_declares_huge",
        _rename_label("x___c1.(13, 100000, 100000, 1).npz"),
        "label",
        "exceeds the limit",
        "shape",
    ),
    (
        "npz_member_declares_huge",
        _npz_member("data.npy", _npy_header((10**12,))),
        "label",
        "exceeds the limit",
        "data.npy",
    ),
    (
        "npz_member_negative",
        _npz_member("indices.npy", _npy_header((-1,))),
        "label",
        "negative dimension",
        "indices.npy",
    ),
    ("npz_member_not_npy", _npz_member("indptr.npy", b"not an array"), "label", "is not a .npy array", "indptr.npy"),
]


@pytest.mark.parametrize(
    ("edit", "which", "needle", "field"), [c[1:] for c in IMIS_CASES], ids=[c[0] for c in IMIS_CASES]
)
def test_hostile_imis_png_and_npz(imis_case, edit, which, needle, field):
    res, label = imis_case(edit)
    file = label if which == "label" else label.parents[1] / "image" / "c1.png"
    res.one_line_error(needle, f"file={file}", "case=c1", f"field={field}", rc=2)
    assert not imis_case.out.exists()


def test_the_png_limit_follows_the_environment(imis_case, monkeypatch):
    """Under Pillow's own bomb limit, but over ``TRACKEVAL_MAX_VOXELS``: refused before decoding."""
    monkeypatch.setenv(MAX_VOXELS_ENV, "1000")
    res, _ = imis_case(lambda gt, image, label: None)
    res.one_line_error("exceeds the limit", "c1.png", "case=c1", "field=size", rc=2)
    assert not imis_case.out.exists()


def test_a_genuine_3d_nifti_label_still_reads(tmp_path):
    """The old path (nibabel save) reads unchanged: shape, values, spacing."""
    path = save_nifti(tmp_path / "t.nii.gz", _labels())
    vol = read_label_map(path, case_id="t")
    assert vol.array.shape == SHAPE and vol.spacing == pytest.approx(SPACING) and int(vol.array.max()) == 1
    write_manifest(tmp_path / "m.csv", [{"a": "1"}])  # the conftest helpers stay usable side by side


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_prediction_that_is_not_a_regular_file_is_not_a_missing_prediction(cli, umd_dataset, tmp_path, kind):
    """A folder or FIFO named ``<case>.nii.gz`` is an error naming it, never silently scored as a missing
    prediction (which ``missing_prediction: worst`` would turn into Dice 0)."""
    import os

    from tests.conftest import umd_argv

    gt, pred = umd_dataset()
    target = pred / "s1_ct.nii.gz"
    target.unlink()
    target.mkdir() if kind == "folder" else os.mkfifo(target)
    out = tmp_path / "out"
    cli(*umd_argv(gt, pred, out, "--executor", "local", "--no-cache")).one_line_error(
        "not a regular file", f"file={target}", "case=s1_ct"
    )
    assert not out.exists()
