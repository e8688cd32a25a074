"""Bounded decoding of 2D images (PNG...) and NPZ archives: the declared size is checked before any pixel or
array is decoded (:func:`trackeval.io.limits.check_voxels`), so a small file cannot claim gigabytes.

* :func:`load_image`: the image's width x height x bands from its header (Pillow parses it without decoding),
  then the pixels. Pillow's own decompression-bomb guard (``Image.MAX_IMAGE_PIXELS``) stays in force; both are
  one-line :class:`~trackeval.errors.InputError` s.
* :func:`check_npz_members`: every ``.npy`` member's declared shape (its header, read with
  ``numpy.lib.format``), before ``numpy.load`` allocates it.
"""

from __future__ import annotations

import io
import zipfile

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
                    version = np.lib.format.read_magic(member)
                    read = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, _ = read(member, max_header_size=10_000)
            except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
                raise InputError(f"member {name} is not a .npy array: {exc}", field=name, **where) from exc
            check_voxels(tuple(shape), field=name, **where)
