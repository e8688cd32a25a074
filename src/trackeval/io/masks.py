"""Binary masks from files: one class per image file (PNG, GIF), or a ``C x H x W`` stack in a ``.npy`` file.

* :func:`read_mask_image`: a pixel is in the class when its grey value is non-zero (a palette image, e.g. the
  SCR GIFs, by its palette colour's grey value, so the palette order does not matter); greyscale, palette
  and 1-bit images only, decoded through :func:`trackeval.io.images.load_image` (size checked first).
* :func:`read_mask_stack`: a 3D array of 0/1 (bool, integer, or float holding exactly 0.0 and 1.0), one channel
  per class, loaded without pickles (:func:`trackeval.io.images.load_npy`).

Both return the mask and the sha256 of the file's bytes; every failure is one
:class:`~trackeval.errors.InputError` naming the file, the case and the field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trackeval.errors import InputError
from trackeval.io.images import load_image, load_npy
from trackeval.io.nifti import read_bytes_digest

__all__ = ["MASK_MODES", "read_mask_image", "read_mask_stack"]

#: Pillow modes a mask image may have (greyscale, palette, 1-bit)
MASK_MODES = frozenset({"1", "L", "P", "I", "I;16", "I;16B", "I;16L"})


def read_mask_image(path: Path, *, case_id: str) -> tuple[np.ndarray, str]:
    """The boolean ``(height, width)`` mask of one image file (non-zero grey value = in the class) and the
    file's sha256.

    Raises:
        InputError: naming the file and case: unreadable, too large (see :func:`load_image`), or a colour image
            (``field=mode``).
    """
    raw, digest = read_bytes_digest(path, case_id=case_id)
    with load_image(raw, file=str(path), case_id=case_id) as img:
        if img.mode not in MASK_MODES:
            raise InputError(
                f"image mode {img.mode} is not a mask (expected greyscale, palette or 1-bit)",
                file=str(path),
                case_id=case_id,
                field="mode",
            )
        grey = img.convert("L") if img.mode == "P" else img
        mask = np.asarray(grey) != 0
    return mask, digest


def _as_binary(array: np.ndarray, where: dict[str, str]) -> np.ndarray:
    """``array`` as bool when it holds only 0 and 1, else :class:`InputError` naming a value found."""
    if array.dtype == np.bool_:
        return array
    if array.dtype.kind not in "iuf":
        raise InputError(f"dtype {array.dtype} is not a mask (expected bool, integer or float 0/1)", **where)
    mask = array == 1
    stray = (array != 0) & ~mask
    if stray.any():
        raise InputError(f"value {array[stray].flat[0]!r} is not 0 or 1: not a binary mask stack", **where)
    return mask


def read_mask_stack(path: Path, *, case_id: str) -> tuple[np.ndarray, str]:
    """The boolean ``(classes, height, width)`` stack of one ``.npy`` file and the file's sha256.

    Raises:
        InputError: naming the file and case: not a ``.npy`` array, pickled, too large, not 3D
            (``field=dim``), or values other than 0 and 1 (``field=values``).
    """
    raw, digest = read_bytes_digest(path, case_id=case_id)
    array = load_npy(raw, file=str(path), case_id=case_id)
    if array.ndim != 3:
        raise InputError(
            f"expected a C x H x W stack, got shape {array.shape}", file=str(path), case_id=case_id, field="dim"
        )
    return _as_binary(array, {"file": str(path), "case_id": case_id, "field": "values"}), digest
