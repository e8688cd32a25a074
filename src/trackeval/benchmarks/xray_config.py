"""Former path of the X-ray config section (``XRayConfig``, ``XRayClsConfig``...), now
:mod:`trackeval.benchmarks.xray.config`.

Kept as an alias so that code written against it (``from trackeval.benchmarks.xray_config import ...``, the path
the docs named) keeps working, with a DeprecationWarning; names are forwarded lazily.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED = "trackeval.benchmarks.xray_config is deprecated: use trackeval.benchmarks.xray.config"


def __getattr__(name: str) -> Any:
    import trackeval.benchmarks.xray.config as section

    value = getattr(section, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value
