"""Size limits on untrusted inputs, checked against what a file's header declares before its data is read.

A NIfTI, PNG or NPZ header declares its array size in a few bytes; a corrupt or hostile file can claim (or
inflate to) gigabytes. Every image reader asks :func:`check_voxels` before allocating, so memory per case stays
bounded by the declared array (about three times it, counting the decoded bytes and one converted copy).

The limit is :data:`MAX_VOXELS` elements per array (voxels x channels for a PNG; elements for an NPZ member),
overridable per process with the environment variable ``TRACKEVAL_MAX_VOXELS`` (a positive integer), which worker
processes inherit.
"""

from __future__ import annotations

import os

from trackeval.errors import ConfigError, InputError

#: default limit on the elements of one decoded array (2 G: a 1300^3 CT volume, 8 GB as float32)
MAX_VOXELS = 2_000_000_000
#: environment variable overriding :data:`MAX_VOXELS`
MAX_VOXELS_ENV = "TRACKEVAL_MAX_VOXELS"


def max_voxels() -> int:
    """The element limit: ``TRACKEVAL_MAX_VOXELS`` when set, else :data:`MAX_VOXELS`.

    Raises:
        ConfigError: the variable is set to something other than a positive integer.
    """
    raw = os.environ.get(MAX_VOXELS_ENV, "").strip()
    if not raw:
        return MAX_VOXELS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"invalid environment variable {MAX_VOXELS_ENV}={raw!r}: expected a positive integer")
    return value


def check_voxels(shape: tuple[int, ...], *, file: str, case_id: str | None = None, field: str = "dim") -> int:
    """The number of elements ``shape`` declares (exact Python integers: no overflow), if within the limit.

    Raises:
        InputError: naming ``file``, ``case_id`` and ``field`` when a dimension is negative or the product
            exceeds :func:`max_voxels`.
    """
    if any(d < 0 for d in shape):
        raise InputError(f"negative dimension in the declared shape {shape}", file=file, case_id=case_id, field=field)
    n = 1
    for d in shape:
        n *= int(d)
    limit = max_voxels()
    if n > limit:
        raise InputError(
            f"declared size {shape} = {n} elements exceeds the limit of {limit} ({MAX_VOXELS_ENV})",
            file=file,
            case_id=case_id,
            field=field,
        )
    return n
