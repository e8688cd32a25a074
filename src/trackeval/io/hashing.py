"""sha256 digests (hex): the one place trackeval computes them (data lineage, case cache, results contract).

:func:`sha256_text` is defined in :mod:`trackeval.results` (a leaf module, which may not import ``io``: the
results contract digests its config and data with it) and re-exported here; import every digest from here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from trackeval.io.files import read_bytes
from trackeval.results import sha256_text

__all__ = ["sha256_bytes", "sha256_files", "sha256_stream", "sha256_text"]


def sha256_stream(chunks: Iterable[bytes]) -> str:
    """sha256 over the chunks in order (the digest of their concatenation), consumed one at a time."""
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def sha256_bytes(*chunks: bytes) -> str:
    """sha256 of the concatenated bytes."""
    return sha256_stream(chunks)


def sha256_files(*paths: Path) -> str:
    """sha256 over the bytes of the files, in order (the data lineage digest); :class:`InputError` if unreadable."""
    return sha256_stream(read_bytes(p) for p in paths)
