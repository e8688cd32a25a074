"""Former home of the demo IMIS models, which live in :mod:`trackeval.demo.baselines` (demo-model code, not
part of the evaluation package).

Kept as an alias so that model references already written in configs, scripts and results
(``--model trackeval.interactive.baselines:region_grower``) and ``python -m trackeval.interactive.baselines``
keep working; new code names ``trackeval.demo.baselines``. Nothing (no torch, no MONAI) is imported until a name
is looked up.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from trackeval.demo import baselines

    return getattr(baselines, name)


if __name__ == "__main__":
    from trackeval.demo.baselines import main

    main()
