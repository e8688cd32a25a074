"""Former path of the IMIS reference runner, now :mod:`trackeval.benchmarks.imis.runner`.

Kept as an alias so that ``python -m trackeval.interactive.runner ...`` and imports of it keep working, with a
DeprecationWarning; names are forwarded lazily.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

MOVED = "trackeval.interactive.runner is deprecated: use trackeval.benchmarks.imis.runner"


def __getattr__(name: str) -> Any:
    from trackeval.benchmarks.imis import runner

    value = getattr(runner, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value


if __name__ == "__main__":
    from trackeval.benchmarks.imis.runner import main

    warnings.warn(MOVED, DeprecationWarning, stacklevel=1)
    sys.exit(main())
