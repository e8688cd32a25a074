"""Former path of 3D-MIR's config section (``Mir3dConfig``), now :mod:`trackeval.benchmarks.mir3d.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.mir3d_config import ...``, the path the
docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED = "trackeval.benchmarks.mir3d_config is deprecated: use trackeval.benchmarks.mir3d.config"


def __getattr__(name: str) -> Any:
    import trackeval.benchmarks.mir3d.config as section

    value = getattr(section, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value
