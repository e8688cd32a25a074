"""Former home of the demo IMIS models, which live in :mod:`trackeval.demo.baselines` (demo-model code, not
part of the evaluation package).

Kept as an alias so that model references already written in configs, scripts and results
(``--model trackeval.interactive.baselines:region_grower``) and ``python -m trackeval.interactive.baselines``
keep working, with a DeprecationWarning; new code names ``trackeval.demo.baselines``. Nothing (no torch, no
MONAI) is imported until a name is looked up.
"""

from __future__ import annotations

import warnings
from typing import Any

MOVED = "trackeval.interactive.baselines is deprecated: use trackeval.demo.baselines"


def __getattr__(name: str) -> Any:
    from trackeval.demo import baselines

    value = getattr(baselines, name)
    warnings.warn(MOVED, DeprecationWarning, stacklevel=2)
    return value


if __name__ == "__main__":
    from trackeval.demo.baselines import main

    warnings.warn(MOVED, DeprecationWarning, stacklevel=1)
    main()
