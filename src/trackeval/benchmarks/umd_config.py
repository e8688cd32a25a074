"""Former path of UMD's config section (``UMDConfig``, ``UMD_ORGANS``...), now
:mod:`trackeval.benchmarks.umd.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.umd_config import ...``, the path
the docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED = "trackeval.benchmarks.umd_config is deprecated: use trackeval.benchmarks.umd.config"


def __getattr__(name: str) -> Any:
    import trackeval.benchmarks.umd.config as section

    value = getattr(section, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value
