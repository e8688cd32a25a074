"""Former path of IMIS's config section (``IMISConfig``, ``IMISVolumesConfig``...), now
:mod:`trackeval.benchmarks.imis.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.imis_config import ...``, the path
the docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED = "trackeval.benchmarks.imis_config is deprecated: use trackeval.benchmarks.imis.config"


def __getattr__(name: str) -> Any:
    import trackeval.benchmarks.imis.config as section

    value = getattr(section, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value
