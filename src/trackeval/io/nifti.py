"""Reading integer label maps from NIfTI with the checks every segmentation benchmark needs."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np

from trackeval.errors import InputError
from trackeval.io.files import read_bytes
from trackeval.io.hashing import sha256_bytes

#: Refuse volumes larger than this many voxels (a corrupt header can claim absurd sizes).
MAX_VOXELS = 2_000_000_000


@dataclass(frozen=True)
class LabelVolume:
    """A label map with its geometry. ``spacing`` in mm per array axis; ``digest`` = sha256 of the file."""

    array: np.ndarray
    affine: np.ndarray
    spacing: tuple[float, ...]
    digest: str
    path: str


def read_bytes_digest(path: Path, *, case_id: str) -> tuple[bytes, str]:
    """File bytes and their sha256 (read once: the digest feeds the lineage and the case cache).

    Raises :class:`InputError` naming the file and case when it cannot be read or is empty.
    """
    data = read_bytes(path, case_id=case_id)
    if not data:
        raise InputError("file is empty", file=str(path), case_id=case_id)
    return data, sha256_bytes(data)


def read_label_map(path: Path, *, case_id: str, raw: bytes | None = None, digest: str | None = None) -> LabelVolume:
    """Load an integer label map from ``.nii``/``.nii.gz`` and validate it.

    ``raw``/``digest`` may pass the bytes already read with :func:`read_bytes_digest`. Float data is accepted
    only when every value is a finite integer (it is then cast); NaN/inf or fractional values, negative
    labels, 4D+ data and unreadable or truncated files raise :class:`InputError` naming the file, the case
    and the offending field.
    """
    where = {"file": str(path), "case_id": case_id}
    if raw is None or digest is None:
        raw, digest = read_bytes_digest(path, case_id=case_id)
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        img = nib.Nifti1Image.from_bytes(raw) if raw[344:348] in (b"n+1\x00", b"ni1\x00") else None
        if img is None:
            img = nib.Nifti2Image.from_bytes(raw)
        shape = img.shape
        if int(np.prod(shape, dtype=np.int64)) > MAX_VOXELS:
            raise InputError(f"absurd volume size {shape}", field="dim", **where)
        data = np.asanyarray(img.dataobj)
    except InputError:
        raise
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"truncated or corrupt gzip stream: {exc}", **where) from exc
    except Exception as exc:  # nibabel raises a zoo of types on bad headers/short data
        raise InputError(f"not a readable NIfTI file: {exc}", field="header", **where) from exc
    if data.ndim == 4 and data.shape[3] == 1:
        data = data[..., 0]
    if data.ndim not in (2, 3):
        raise InputError(f"expected a 2D or 3D label map, got shape {data.shape}", field="dim", **where)
    return LabelVolume(
        array=_as_integer_labels(data, where),
        affine=np.asarray(img.affine, dtype=np.float64),
        spacing=tuple(float(z) for z in img.header.get_zooms()[: data.ndim]),
        digest=digest,
        path=str(path),
    )


def _as_integer_labels(data: np.ndarray, where: dict[str, str]) -> np.ndarray:
    if data.dtype == bool:
        return data.astype(np.uint8)
    if np.issubdtype(data.dtype, np.floating):
        if not np.isfinite(data).all():
            raise InputError("label map holds NaN or inf values", field="voxel values", **where)
        if not np.array_equal(data, np.round(data)):
            raise InputError("label map holds non-integer values (probabilities?)", field="voxel values", **where)
        data = data.astype(np.int64)
    elif not np.issubdtype(data.dtype, np.integer):
        raise InputError(f"unsupported voxel dtype {data.dtype}", field="datatype", **where)
    if data.size and data.min() < 0:
        raise InputError(f"negative label value {int(data.min())}", field="voxel values", **where)
    if data.size and data.max() <= np.iinfo(np.uint8).max and data.dtype != np.uint8:
        data = data.astype(np.uint8)
    elif data.dtype not in (np.uint8, np.uint16, np.int16, np.int32, np.int64):
        data = data.astype(np.int64)
    return data


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
