"""Reading NIfTI label maps and images with bounded memory and checked geometry.

Decoding is done here, not by ``nibabel.load``, so that nothing is allocated before the header is checked:

1. the header (NIfTI-1 or NIfTI-2, single file) is parsed by nibabel from the first bytes (inflated alone for a
   ``.nii.gz``); its shape must be 2D or 3D (a 4th axis of length 1 is dropped) and within the element limit of
   :mod:`trackeval.io.limits`;
2. the file must hold exactly ``vox_offset + n_voxels * itemsize`` bytes of NIfTI: an uncompressed file of
   another size, or a gzip stream that inflates to more or less than that (a decompression bomb, trailing data,
   a truncated file), is an :class:`~trackeval.errors.InputError` naming the file. A gzip stream is inflated with
   ISA-L (``isal.isal_zlib.decompressobj``: zlib's interface and output, about twice zlib's speed; see
   docs/performance.md) in bounded chunks straight into one buffer of the declared size (gzip members may be
   concatenated; any other byte after the last member is trailing data). The buffer is a numpy array, which
   numpy backs with transparent huge pages where the kernel offers them (``madvise``): filling a 35 MB image
   then takes ~20 page faults instead of ~8,500, and inflating it 10-13 ms instead of 27-36 ms into a
   ``bytearray``;
3. the voxel spacing is taken from the affine (sform, else qform, else pixdim: nibabel's ``get_best_affine``, the
   geometry :func:`check_same_grid` compares): the column norms of its 3x3 part. A header whose ``pixdim`` is
   not finite and positive, whose affine is not finite or degenerate, whose spacing is outside
   [:data:`MIN_SPACING_MM`, :data:`MAX_SPACING_MM`], or whose ``pixdim`` disagrees with the affine's spacing by
   more than :data:`SPACING_RTOL` (relative) is an error naming the file and the field (``pixdim`` / ``affine``).

Peak memory per file: the file's bytes (about the declared array or less, when compressed), the declared array
(the decoded buffer, used in place) and one converted copy (labels cast to the smallest integer type that holds
them; images to float32); conversions and checks run in chunks of :data:`CHUNK_VOXELS`.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np
from isal import isal_zlib

from trackeval.errors import InputError
from trackeval.io.files import open_regular, read_open
from trackeval.io.hashing import sha256_bytes
from trackeval.io.limits import check_voxels, max_voxels

#: the first bytes that hold any NIfTI header (NIfTI-2: 540; NIfTI-1: 348 + the 4-byte extension flag)
HEADER_BYTES = 540
#: the first bytes of a file read before its size is checked against what its header declares
PEEK_BYTES = 1 << 16
#: largest bytes per element a NIfTI dtype takes (complex256): the size limit of a file whose header is unknown
MAX_ITEMSIZE = 32
#: a gzip stream may exceed its content by this fraction (deflate's stored blocks, gzip members) plus 1 MiB
GZIP_OVERHEAD = 1 / 64
#: bytes inflated per step (each step's output comes from the allocator's free list and is still in cache when it
#: is copied into the image's buffer; 10-13 ms per 35 MB UMD file for steps of 256 KiB to 4 MiB), and voxels
#: converted per step
CHUNK_BYTES = 1 << 20
CHUNK_VOXELS = 1 << 20
#: plausible voxel spacing, mm (1 micrometre to 1 metre)
MIN_SPACING_MM = 1e-3
MAX_SPACING_MM = 1e3
#: largest relative difference allowed between pixdim and the affine's column norms (float32 storage, rounding)
SPACING_RTOL = 1e-3
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class LabelVolume:
    """A label map with its geometry. ``spacing`` in mm per array axis (column norms of the affine);
    ``digest`` = sha256 of the file."""

    array: np.ndarray
    affine: np.ndarray
    spacing: tuple[float, ...]
    digest: str
    path: str


@dataclass(frozen=True)
class _Layout:
    """What a header declares: the spatial shape, the stored dtype and where the voxels are."""

    header: nib.Nifti1Header
    #: pixdim as stored (nibabel's checked header replaces zero and negative spacings)
    pixdim: tuple[float, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int
    n_voxels: int

    @property
    def nbytes(self) -> int:
        """The exact size of the (uncompressed) file."""
        return self.offset + self.n_voxels * self.dtype.itemsize


def read_bytes_digest(path: Path, *, case_id: str) -> tuple[bytes, str]:
    """File bytes and their sha256 (read once: the digest feeds the lineage and the case cache).

    The file must be a regular file (symbolic links are followed). A NIfTI file (plain or gzip, recognised by its
    first bytes) is refused before the rest is read when it is larger than its header's image can take; any other
    file when it is larger than the element limit allows (:data:`MAX_ITEMSIZE` bytes per element).

    Raises:
        InputError: naming the file and case when it cannot be read, is empty or too large.
    """
    with open_regular(path, case_id=case_id) as f:
        head = read_open(f, path, case_id=case_id, size=PEEK_BYTES)
        limit = _size_limit(head, os.fstat(f.fileno()).st_size, {"file": str(path), "case_id": case_id})
        f.seek(0)  # read the whole file into one buffer (head + rest would copy it)
        data = read_open(f, path, case_id=case_id, max_bytes=limit)
    if not data:
        raise InputError("file is empty", file=str(path), case_id=case_id)
    return data, sha256_bytes(data)


def _size_limit(head: bytes, size: int, where: dict[str, str]) -> int:
    """The largest size the file may have, from its header when ``head`` starts a NIfTI file; a NIfTI file of
    ``size`` bytes that its header cannot explain is refused here, before it is read."""
    if head[:2] == _GZIP_MAGIC:
        try:
            inner = isal_zlib.decompressobj(31).decompress(head, HEADER_BYTES)
        except isal_zlib.error:
            inner = b""  # a damaged stream: decoding names the error
        if _header_class(inner) is not None:
            nbytes = _layout(inner, where).nbytes
            limit = int(nbytes * (1 + GZIP_OVERHEAD)) + (1 << 20)
            if size > limit:
                raise InputError(
                    f"the gzip file is {size} bytes, more than a {nbytes}-byte image (its header) can compress to: "
                    "trailing data",
                    field="dim",
                    **where,
                )
            return limit
    elif _header_class(head) is not None:
        layout = _layout(head, where)
        _check_plain_size(size, layout, where)
        return layout.nbytes
    return max_voxels() * MAX_ITEMSIZE + (1 << 20)


def _check_plain_size(size: int, layout: _Layout, where: dict[str, str]) -> None:
    """An uncompressed NIfTI file holds exactly the header's ``vox_offset + voxels x itemsize`` bytes."""
    if size != layout.nbytes:
        what = "truncated" if size < layout.nbytes else "trailing data after the image"
        raise InputError(
            f"not a readable NIfTI file: {what}: it has {size} bytes, the header declares {layout.nbytes} "
            "(vox_offset + voxels x itemsize)",
            field="dim",
            **where,
        )


def read_label_map(path: Path, *, case_id: str, raw: bytes | None = None, digest: str | None = None) -> LabelVolume:
    """Load an integer label map from ``.nii``/``.nii.gz`` and validate it (see the module docstring).

    ``raw``/``digest`` may pass the bytes already read with :func:`read_bytes_digest`. Float (or scaled) data is
    accepted only when every value is a finite integer (it is then cast); NaN/inf or fractional values, negative
    labels, 4D+ data, an oversized or inconsistent header and unreadable, truncated or over-long files raise
    :class:`InputError` naming the file, the case and the offending field.
    """
    where = {"file": str(path), "case_id": case_id}
    v = _read_stored(path, case_id, raw, digest)
    return LabelVolume(_as_integer_labels(v.data, v.slope, v.inter, where), v.affine, v.spacing, v.digest, str(path))


def read_image(path: Path, *, case_id: str) -> LabelVolume:
    """An image volume (any numeric dtype, scaled as its header says) as float32, with the checks of
    :func:`read_label_map` on size and geometry."""
    v = _read_stored(path, case_id, None, None)
    if v.data.dtype.kind not in "biuf":
        raise InputError(f"unsupported voxel dtype {v.data.dtype}", field="datatype", file=str(path), case_id=case_id)
    out = np.empty_like(v.data, dtype=np.float32)
    for src, dst in _chunks(v.data, out):
        dst[...] = src * v.slope + v.inter if (v.slope, v.inter) != (1.0, 0.0) else src
    return LabelVolume(out, v.affine, v.spacing, v.digest, str(path))


@dataclass(frozen=True)
class _Stored:
    """A file's stored voxels (unscaled, Fortran order), their scaling, the checked geometry and the digest."""

    data: np.ndarray
    slope: float
    inter: float
    affine: np.ndarray
    spacing: tuple[float, ...]
    digest: str


def _read_stored(path: Path, case_id: str, raw: bytes | None, digest: str | None) -> _Stored:
    """Read (unless ``raw``/``digest`` are given), decode and check a NIfTI file: what both readers share."""
    where = {"file": str(path), "case_id": case_id}
    if raw is None or digest is None:
        raw, digest = read_bytes_digest(path, case_id=case_id)
    layout, data = _decode(raw, where)
    affine, spacing = _geometry(layout, where)
    slope, inter = _scaling(layout, where)
    return _Stored(data, slope, inter, affine, spacing, digest)


def _header_class(head: bytes) -> type[nib.Nifti1Header] | None:
    """The header class of a single-file NIfTI (magic ``n+1`` at byte 344, ``n+2`` at byte 4), else ``None``."""
    if head[344:348] == b"n+1\x00":
        return nib.Nifti1Header
    if head[4:8] == b"n+2\x00":
        return nib.Nifti2Header
    return None


def _layout(head: bytes, where: dict[str, str]) -> _Layout:
    klass = _header_class(head)
    if klass is None:
        raise InputError(
            "not a readable NIfTI file: no n+1/n+2 magic (not a single-file NIfTI-1/NIfTI-2)", field="header", **where
        )
    block = head[: klass.sizeof_hdr]
    try:
        pixdim = tuple(float(p) for p in klass.from_fileobj(io.BytesIO(block), check=False)["pixdim"])
        header = klass.from_fileobj(io.BytesIO(block), check=True)  # fixes what nibabel fixes (qfac...)
        shape = tuple(int(d) for d in header.get_data_shape())
        dtype = np.dtype(header.get_data_dtype())
        offset = int(header.get_data_offset())
    except Exception as exc:  # nibabel raises HeaderDataError, ValueError, struct errors... on bad headers
        raise InputError(f"not a readable NIfTI file: bad header: {exc}", field="header", **where) from exc
    n_voxels = check_voxels(shape, field="dim", **where)
    spatial = shape[:3] if len(shape) == 4 and shape[3] == 1 else shape
    if len(spatial) not in (2, 3):
        raise InputError(f"expected a 2D or 3D volume, got shape {shape}", field="dim", **where)
    return _Layout(header, pixdim, spatial, dtype, offset, n_voxels)


def _decode(raw: bytes, where: dict[str, str]) -> tuple[_Layout, np.ndarray]:
    """The header's layout and the stored voxels (unscaled, Fortran order) of a whole file's bytes."""
    if raw[:2] == _GZIP_MAGIC:
        layout, buffer = _inflate(raw, where)
        offset = 0
    else:
        layout, buffer = _layout(raw[:HEADER_BYTES], where), raw
        _check_plain_size(len(raw), layout, where)
        offset = layout.offset
    data = np.frombuffer(buffer, dtype=layout.dtype, count=layout.n_voxels, offset=offset)
    return layout, data.reshape(layout.shape, order="F")


class _Inflater:
    """Bounded reads from a gzip byte string (concatenated members allowed); errors name the file."""

    def __init__(self, raw: bytes, where: dict[str, str]) -> None:
        self.where = where
        self.d = isal_zlib.decompressobj(31)
        self.data = raw

    def read(self, n: int) -> bytes:
        """Up to ``n`` inflated bytes; fewer only at the end of the last member."""
        parts: list[bytes] = []
        got = 0
        try:
            while got < n:
                if self.d.eof:
                    rest = self.d.unused_data
                    if not rest:
                        break
                    if rest[:2] != _GZIP_MAGIC:
                        raise InputError(f"{len(rest)} bytes of trailing data after the gzip stream", **self.where)
                    self.d, self.data = isal_zlib.decompressobj(31), rest
                had_input = bool(self.data)
                chunk = self.d.decompress(self.data, n - got)
                self.data = self.d.unconsumed_tail
                if chunk:
                    parts.append(chunk)
                    got += len(chunk)
                elif not had_input and not self.d.eof:
                    raise InputError("truncated or corrupt gzip stream: it ends before its end marker", **self.where)
        except isal_zlib.error as exc:
            raise InputError(f"truncated or corrupt gzip stream: {exc}", **self.where) from exc
        return b"".join(parts)


def _inflate(raw: bytes, where: dict[str, str]) -> tuple[_Layout, np.ndarray]:
    """Inflate exactly the bytes the header declares; keep only the voxel data (the header, its extensions and any
    gap up to ``vox_offset`` are read in chunks and dropped). More or fewer bytes is an error."""
    inflater = _Inflater(raw, where)
    head = inflater.read(HEADER_BYTES)
    layout = _layout(head, where)
    total, size = layout.nbytes, layout.nbytes - layout.offset
    bomb = InputError(
        f"the gzip stream inflates beyond the {total} bytes its header declares (decompression bomb or trailing data)",
        field="dim",
        **where,
    )
    if len(head) > total:
        raise bomb
    buffer = np.empty(size, dtype=np.uint8)
    start = head[layout.offset :]
    buffer[: len(start)] = np.frombuffer(start, dtype=np.uint8)
    pos = len(head)
    while pos < total:
        chunk = inflater.read(min(CHUNK_BYTES, total - pos))
        if not chunk:
            raise InputError(
                f"not a readable NIfTI file: truncated: it inflates to {pos} bytes, the header declares {total}",
                field="dim",
                **where,
            )
        data = chunk[max(layout.offset - pos, 0) :]
        at = max(pos - layout.offset, 0)
        buffer[at : at + len(data)] = np.frombuffer(data, dtype=np.uint8)
        pos += len(chunk)
    if inflater.read(1):
        raise bomb
    return layout, buffer


def _geometry(layout: _Layout, where: dict[str, str]) -> tuple[np.ndarray, tuple[float, ...]]:
    """The affine and the spacing (mm per axis, its column norms), checked against pixdim (module docstring)."""
    ndim = len(layout.shape)
    pixdim = layout.pixdim[1 : ndim + 1]
    for axis, p in enumerate(pixdim):
        if not (math.isfinite(p) and p > 0):
            raise InputError(f"pixdim[{axis + 1}] = {p} is not a positive spacing", field="pixdim", **where)
    try:
        affine = np.asarray(layout.header.get_best_affine(), dtype=np.float64)
    except Exception as exc:  # nibabel's HeaderDataError on a bad qform (qfac, quaternion)
        raise InputError(f"no valid affine: {exc}", field="affine", **where) from exc
    if not np.isfinite(affine).all():
        raise InputError("the affine (sform/qform) holds NaN or inf", field="affine", **where)
    norms = np.linalg.norm(affine[:3, :ndim], axis=0)
    for axis, (s, p) in enumerate(zip(norms, pixdim, strict=True)):
        if not MIN_SPACING_MM <= s <= MAX_SPACING_MM:
            raise InputError(
                f"the affine's spacing {s:.6g} mm along axis {axis} is outside [{MIN_SPACING_MM:g}, "
                f"{MAX_SPACING_MM:g}] mm",
                field="affine",
                **where,
            )
        if abs(p - s) > SPACING_RTOL * s:
            raise InputError(
                f"pixdim[{axis + 1}] = {p:.6g} mm disagrees with the affine's spacing {s:.6g} mm (sform/qform)",
                field="pixdim",
                **where,
            )
    if np.linalg.svd(affine[:3, :ndim] / norms, compute_uv=False).min() < 1e-6:
        raise InputError("the affine is degenerate (its axes are not independent)", field="affine", **where)
    return affine, tuple(float(s) for s in norms)


def _scaling(layout: _Layout, where: dict[str, str]) -> tuple[float, float]:
    """``(scl_slope, scl_inter)``; ``(1, 0)`` when unset."""
    try:
        slope, inter = layout.header.get_slope_inter()
    except Exception as exc:  # a valid slope with a non-finite intercept
        raise InputError(f"invalid scaling: {exc}", field="scl_inter", **where) from exc
    return (1.0, 0.0) if slope is None else (float(slope), float(inter))


def _chunks(src: np.ndarray, dst: np.ndarray | None = None):
    """Matching flat chunks of ``src`` (and ``dst``, same shape and memory order) of :data:`CHUNK_VOXELS`."""
    flat = src.ravel(order="K")
    out = None if dst is None else dst.ravel(order="K")
    for i in range(0, flat.size, CHUNK_VOXELS):
        yield flat[i : i + CHUNK_VOXELS], (None if out is None else out[i : i + CHUNK_VOXELS])


def _largest_label(data: np.ndarray, slope: float, inter: float, where: dict[str, str]) -> int:
    """The largest scaled value (0 for an empty array), checking chunk by chunk that every scaled value is a
    finite non-negative integer (an unscaled integer array is integral by type)."""
    scaled = (slope, inter) != (1.0, 0.0)
    exact = data.dtype.kind in "biu" and not scaled
    top = 0
    for chunk, _ in _chunks(data):
        values = chunk * slope + inter if scaled else chunk
        if not exact:
            if not np.isfinite(values).all():
                raise InputError("label map holds NaN or inf values", field="voxel values", **where)
            if not np.array_equal(values, np.round(values)):
                raise InputError("label map holds non-integer values (probabilities?)", field="voxel values", **where)
        if values.size and values.min() < 0:
            raise InputError(f"negative label value {int(values.min())}", field="voxel values", **where)
        top = max(top, int(values.max()) if values.size else 0)
    return top


def _as_integer_labels(data: np.ndarray, slope: float, inter: float, where: dict[str, str]) -> np.ndarray:
    """The stored values, scaled, as non-negative integer labels in the smallest of uint8, uint16, int32, int64
    that holds them (the stored array itself when it is unscaled and already such a type)."""
    if data.dtype.kind not in "biuf":
        raise InputError(f"unsupported voxel dtype {data.dtype}", field="datatype", **where)
    scaled = (slope, inter) != (1.0, 0.0)
    exact = data.dtype.kind in "biu" and not scaled
    top = _largest_label(data, slope, inter, where)
    if top > np.iinfo(np.int64).max:
        raise InputError(f"label value {top} is beyond the int64 range", field="voxel values", **where)
    target = next(np.dtype(t) for t in (np.uint8, np.uint16, np.int32, np.int64) if top <= np.iinfo(t).max)
    if exact and data.dtype in (target, np.uint16, np.int16, np.int32, np.int64):
        return data if data.flags.writeable else data.copy()
    out = np.empty_like(data, dtype=target)
    for src, dst in _chunks(data, out):
        dst[...] = src * slope + inter if scaled else src
    return out


def check_same_grid(truth: LabelVolume, pred: LabelVolume, *, case_id: str, tolerance: float) -> None:
    """Raise :class:`InputError` naming both files if shapes differ or affines differ beyond ``tolerance``."""
    if truth.array.shape != pred.array.shape:
        raise InputError(
            f"shape mismatch: truth {truth.array.shape} ({truth.path}) vs prediction {pred.array.shape}",
            file=pred.path,
            case_id=case_id,
            field="dim",
        )
    diff = float(np.abs(truth.affine - pred.affine).max())
    if diff > tolerance:
        raise InputError(
            f"affine/spacing mismatch of {diff:.4g} mm (tolerance {tolerance:g}) between truth {truth.path} "
            f"and prediction",
            file=pred.path,
            case_id=case_id,
            field="affine",
        )
