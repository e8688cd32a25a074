"""Size limits on untrusted inputs, checked against what a file's header declares before its data is read.

A NIfTI, PNG or NPZ header declares its array size in a few bytes; a corrupt or hostile file can claim (or
inflate to) gigabytes. Every image reader asks :func:`check_voxels` before allocating, so memory per case stays
bounded by the declared array (about three times it, counting the decoded bytes and one converted copy).

The limit is :data:`MAX_VOXELS` elements per array (voxels x channels for a PNG; elements for an NPZ member),
overridable per process with the environment variable ``TRACKEVAL_MAX_VOXELS`` (a positive integer), which worker
processes inherit.

Structured files (JSON, YAML, XML, CSV) are bounded the same way by :mod:`trackeval.io.structured`: bytes
(``TRACKEVAL_MAX_FILE_BYTES``), elements (``TRACKEVAL_MAX_ELEMENTS``) and nesting depth (:data:`MAX_DEPTH`);
polygons by their vertices (``TRACKEVAL_MAX_POLYGON_VERTICES`` per polygon, ``TRACKEVAL_MAX_TOTAL_VERTICES`` per
file).
"""

from __future__ import annotations

import os

from trackeval.errors import ConfigError, InputError

#: default limit on the elements of one decoded array (2 G: a 1300^3 CT volume, 8 GB as float32)
MAX_VOXELS = 2_000_000_000
#: environment variable overriding :data:`MAX_VOXELS`
MAX_VOXELS_ENV = "TRACKEVAL_MAX_VOXELS"


class LimitError(InputError):
    """An input beyond one of these limits: refused whatever layout the file would be (layout detection lets it
    through instead of trying the next layout)."""


def max_voxels() -> int:
    """The element limit: ``TRACKEVAL_MAX_VOXELS`` when set, else :data:`MAX_VOXELS`.

    Raises:
        ConfigError: the variable is set to something other than a positive integer.
    """
    return env_limit(MAX_VOXELS_ENV, MAX_VOXELS)


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
        raise LimitError(
            f"declared size {shape} = {n} elements exceeds the limit of {limit} ({MAX_VOXELS_ENV})",
            file=file,
            case_id=case_id,
            field=field,
        )
    return n


#: default limit on the bytes of one structured input file (JSON, YAML, XML, CSV, text lists): 1 GiB
MAX_FILE_BYTES = 1 << 30
#: environment variable overriding :data:`MAX_FILE_BYTES`
MAX_FILE_BYTES_ENV = "TRACKEVAL_MAX_FILE_BYTES"
#: default limit on the elements of one structured file (JSON/YAML values, XML elements, CSV cells)
MAX_ELEMENTS = 50_000_000
#: environment variable overriding :data:`MAX_ELEMENTS`
MAX_ELEMENTS_ENV = "TRACKEVAL_MAX_ELEMENTS"
#: nesting depth of a structured file (JSON arrays/objects, YAML collections, XML elements); the native layouts
#: nest 6 levels at most
MAX_DEPTH = 64
#: default limit on the vertices of one polygon (a VinDr-RibCXR rib has about 100)
MAX_POLYGON_VERTICES = 250_000
#: environment variable overriding :data:`MAX_POLYGON_VERTICES`
MAX_POLYGON_VERTICES_ENV = "TRACKEVAL_MAX_POLYGON_VERTICES"
#: default limit on the vertices of all polygons of one file
MAX_TOTAL_VERTICES = 5_000_000
#: environment variable overriding :data:`MAX_TOTAL_VERTICES`
MAX_TOTAL_VERTICES_ENV = "TRACKEVAL_MAX_TOTAL_VERTICES"


def env_limit(name: str, default: int) -> int:
    """The positive integer of the environment variable ``name``, else ``default``.

    Raises:
        ConfigError: the variable is set to something other than a positive integer.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"invalid environment variable {name}={raw!r}: expected a positive integer")
    return value


def max_file_bytes() -> int:
    """``TRACKEVAL_MAX_FILE_BYTES`` when set, else :data:`MAX_FILE_BYTES`."""
    return env_limit(MAX_FILE_BYTES_ENV, MAX_FILE_BYTES)


def max_elements() -> int:
    """``TRACKEVAL_MAX_ELEMENTS`` when set, else :data:`MAX_ELEMENTS`."""
    return env_limit(MAX_ELEMENTS_ENV, MAX_ELEMENTS)


def check_vertices(n: int, total: int, *, file: str, case_id: str | None = None, field: str | None = None) -> None:
    """Refuse a polygon of ``n`` vertices, or a file whose polygons reach ``total`` vertices so far, beyond
    ``TRACKEVAL_MAX_POLYGON_VERTICES`` / ``TRACKEVAL_MAX_TOTAL_VERTICES``.

    Raises:
        InputError: naming ``file``, ``case_id`` and ``field`` (the polygon's column).
    """
    per = env_limit(MAX_POLYGON_VERTICES_ENV, MAX_POLYGON_VERTICES)
    if n > per:
        raise LimitError(
            f"polygon of {n} vertices exceeds the limit of {per} ({MAX_POLYGON_VERTICES_ENV})",
            file=file,
            case_id=case_id,
            field=field,
        )
    cap = env_limit(MAX_TOTAL_VERTICES_ENV, MAX_TOTAL_VERTICES)
    if total > cap:
        raise LimitError(
            f"the file's polygons exceed {cap} vertices in all ({MAX_TOTAL_VERTICES_ENV})",
            file=file,
            case_id=case_id,
            field=field,
        )
