"""Former home of the loop's Python functions (``write_results``, ``track``, ``compare``, ``promote``,
``verify``), which live in :mod:`trackeval.api`, the one module of the Python API.

Kept as an alias so that ``from trackeval.loop import promote`` keeps working, with a DeprecationWarning; new
code names ``trackeval.api`` or the facade (``trackeval.promote``). Nothing is imported until a name is looked up.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED = "trackeval.loop is deprecated: use trackeval.api (or trackeval.promote, trackeval.track, ...)"


def __getattr__(name: str) -> Any:
    import trackeval.api as api

    value = getattr(api, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value
