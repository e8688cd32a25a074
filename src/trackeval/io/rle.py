"""Run-length encoded masks as the SIIM-ACR Pneumothorax Segmentation challenge writes them.

The challenge's own decoder (``rle2mask`` in the ``mask_functions.py`` it shipped) defines the encoding:

* an encoding is a space-separated list of integer pairs ``start length`` (surrounding spaces are ignored:
  ``train-rle.csv`` writes every value after ``", "``);
* it is **relative**: the first ``start`` is the 0-based offset of the first run from the first pixel, every
  later ``start`` the number of background pixels between the end of the previous run and this one;
* offsets count pixels **column by column** (the flat mask is reshaped to ``(width, height)`` and transposed):
  flat index ``k`` is column ``k // height``, row ``k % height``;
* ``-1`` is the empty mask.

A file that breaks these rules (an odd number of values, a negative or non-integer value, runs past the last
pixel) is one :class:`~trackeval.errors.InputError` naming the file, the case and the field.
"""

from __future__ import annotations

import numpy as np

from trackeval.errors import InputError

__all__ = ["EMPTY", "decode_relative_rle"]

#: the encoding of an empty mask
EMPTY = "-1"


def _values(encoded: str, where: dict[str, str | None]) -> list[int]:
    """The integers of ``encoded``, checked: each a non-negative integer, an even count."""
    values = []
    for token in encoded.split():
        try:
            value = int(token)
        except ValueError:
            value = -1
        if value < 0:
            raise InputError(f"run-length value {token!r} is not a non-negative integer", **where)
        values.append(value)
    if len(values) % 2:
        raise InputError(f"run-length encoding has an odd number of values ({len(values)})", **where)
    return values


def decode_relative_rle(
    encoded: str, shape: tuple[int, int], *, file: str, case_id: str | None = None, field: str = "EncodedPixels"
) -> np.ndarray:
    """The boolean ``(height, width)`` mask of one relative, column-major encoding (see the module docstring).

    ``-1`` (or a blank) is the empty mask. Runs of length 0 are allowed and cover nothing.

    Raises:
        InputError: naming ``file``, ``case_id`` and ``field``: a malformed encoding, or runs that end beyond the
            ``height * width`` pixels of ``shape``.

    Examples:
        >>> from trackeval.io.rle import decode_relative_rle
        >>> decode_relative_rle("1 2 1 1", (3, 2), file="x").astype(int).tolist()  # pixels 1, 2 and 4
        [[0, 0], [1, 1], [1, 0]]
    """
    height, width = shape
    where = {"file": file, "case_id": case_id, "field": field}
    text = encoded.strip()
    n = height * width
    if text in ("", EMPTY):
        return np.zeros(shape, dtype=bool)
    values = _values(text, where)
    if (last := sum(values)) > n:  # exact Python integers: the partial sums below all fit in int64
        raise InputError(f"runs end at pixel {last}, beyond the {height}x{width} = {n} pixels", **where)
    gaps, lengths = np.array(values[0::2], dtype=np.int64), np.array(values[1::2], dtype=np.int64)
    starts = np.cumsum(gaps) + np.concatenate(([0], np.cumsum(lengths)[:-1]))
    ends = starts + lengths
    edges = np.zeros(n + 1, dtype=np.int64)
    np.add.at(edges, starts, 1)
    np.add.at(edges, ends, -1)
    flat = np.cumsum(edges[:-1]) > 0
    return np.ascontiguousarray(flat.reshape(width, height).T)
