"""Former path of the interactive-model protocol, now :mod:`trackeval.benchmarks.imis.protocol`.

Kept as an alias so that models written against it (``from trackeval.interactive.protocol import Request``) keep
working, with a DeprecationWarning; names are forwarded lazily.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED = "trackeval.interactive.protocol is deprecated: use trackeval.benchmarks.imis.protocol"


def __getattr__(name: str) -> Any:
    from trackeval.benchmarks.imis import protocol

    value = getattr(protocol, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value
