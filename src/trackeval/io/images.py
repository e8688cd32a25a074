"""Bounded decoding of 2D images (PNG...) and NPZ archives: the declared size is checked before any pixel or
array is decoded (:func:`trackeval.io.limits.check_voxels`), so a small file cannot claim gigabytes.

* :func:`load_image`: the image's width x height x bands from its header (Pillow parses it without decoding),
  then the pixels. Pillow's own decompression-bomb guard (``Image.MAX_IMAGE_PIXELS``) stays in force; both are
  one-line :class:`~trackeval.errors.InputError` s.
* :func:`check_npz_members`: every ``.npy`` member's declared shape (its header, read with
  ``numpy.lib.format``), before ``numpy.load`` allocates it.
* :func:`load_npy`: one ``.npy`` array, its declared shape checked the same way, loaded without pickles.
* :func:`image_size`: an image's width and height from its header alone (no pixel is decoded).
"""

from __future__ import annotations

import io
import zipfile
from typing import IO

import numpy as np
from PIL import Image, UnidentifiedImageError

from trackeval.errors import InputError
from trackeval.io.limits import check_voxels


def load_image(raw: bytes, *, file: str, case_id: str | None = None) -> Image.Image:
    """The decoded image of ``raw`` (close it, or use it as a context manager).

    Raises:
        InputError: naming ``file`` and ``case_id``: an unreadable image (``field=image``), or one whose declared
            size exceeds the element limit or Pillow's bomb limit (``field=size``).
    """
    where = {"file": file, "case_id": case_id}
    try:
        img = Image.open(io.BytesIO(raw))
    except Image.DecompressionBombError as exc:
        raise InputError(f"decompression bomb: {exc}", field="size", **where) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputError(f"not a readable image: {exc}", field="image", **where) from exc
    try:
        width, height = img.size
        check_voxels((height, width, len(img.getbands())), field="size", **where)
        img.load()
    except InputError:
        img.close()
        raise
    except (OSError, ValueError, SyntaxError) as exc:  # truncated or corrupt pixel data
        img.close()
        raise InputError(f"not a readable image: {exc}", field="image", **where) from exc
    return img


def check_npz_members(raw: bytes, *, file: str, case_id: str | None = None, what: str = "an NPZ archive") -> None:
    """Check the declared shape of every ``.npy`` member of the NPZ archive ``raw`` against the element limit
    (``what`` names the expected content in the message of a file that is not a zip archive).

    Raises:
        InputError: naming ``file``, ``case_id`` and, as ``field``, the member: not a zip archive, a member that
            is not a ``.npy`` array, or a declared shape beyond the limit.
    """
    where = {"file": file, "case_id": case_id}
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise InputError(f"not {what}: not a zip archive ({exc})", **where) from exc
    with archive:
        for name in archive.namelist():
            try:
                with archive.open(name) as member:
                    shape = _npy_shape(member)
            except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
                raise InputError(f"member {name} is not a .npy array: {exc}", field=name, **where) from exc
            check_voxels(shape, field=name, **where)


def _npy_shape(stream: IO[bytes]) -> tuple[int, ...]:
    """The shape a ``.npy`` stream's header declares (the stream is left after the header); ``ValueError``
    (or ``EOFError``) when it is not a ``.npy`` header."""
    version = np.lib.format.read_magic(stream)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, _ = read(stream, max_header_size=10_000)
    return tuple(int(d) for d in shape)


def load_npy(raw: bytes, *, file: str, case_id: str | None = None) -> np.ndarray:
    """The array of the ``.npy`` file ``raw``: its declared shape checked against the element limit before it
    is allocated, loaded with ``allow_pickle=False`` (an object array is refused, never unpickled).

    Raises:
        InputError: naming ``file`` and ``case_id``: not a ``.npy`` file or a pickled/object array
            (``field=npy``), a declared size beyond the limit (``field=size``), or a truncated array.
    """
    where = {"file": file, "case_id": case_id}
    try:
        shape = _npy_shape(io.BytesIO(raw))
    except (ValueError, EOFError) as exc:
        raise InputError(f"not a .npy array: {exc}", field="npy", **where) from exc
    check_voxels(shape, field="size", **where)
    try:
        return np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:  # object arrays need pickles; a short file fails here
        raise InputError(f"not a readable .npy array: {exc}", field="npy", **where) from exc


def image_size(raw: bytes, *, file: str, case_id: str | None = None, planes: int = 1) -> tuple[int, int]:
    """``(width, height)`` of the image ``raw`` from its header (Pillow reads no pixel data for it), checked
    against the element limit (:func:`~trackeval.io.limits.check_voxels`) for ``planes`` arrays of that size
    (the masks a caller will allocate at it), so a size read from a header never allocates beyond the limit.

    Raises:
        InputError: naming ``file`` and ``case_id`` when ``raw`` is not an image Pillow recognises
            (``field=image``), its header trips Pillow's bomb limit or ``planes`` x height x width exceeds
            ``TRACKEVAL_MAX_VOXELS`` (``field=size``).
    """
    where = {"file": file, "case_id": case_id}
    try:
        with Image.open(io.BytesIO(raw)) as img:
            width, height = img.size
    except Image.DecompressionBombError as exc:
        raise InputError(f"decompression bomb: {exc}", field="size", **where) from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise InputError(f"not a readable image header: {exc}", field="image", **where) from exc
    check_voxels((planes, int(height), int(width)), field="size", **where)
    return int(width), int(height)
